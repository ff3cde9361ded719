#!/usr/bin/env bash
# The examples' test (CTest "examples"): runs each example as a user would, kills the counter
# with SIGKILL mid-run, and checks what the next run recovers.
#   examples/run_examples.sh BIN_DIR
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "run_examples.sh: $*" >&2; exit 1; }
# kill_after_lines OUT PREFIX N WHAT COMMAND...: runs COMMAND in the background with its output in
# OUT, waits (up to 10 s) until OUT has N lines starting with PREFIX, then kills it with SIGKILL.
kill_after_lines() {
  local out=$1 prefix=$2 n=$3 what=$4
  shift 4
  "$@" >"$out" &
  local pid=$!
  for _ in $(seq 200); do
    [[ $(grep -c "^$prefix" "$out" || true) -ge $n ]] && break
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || fail "$what finished before it could be killed"
  wait "$pid" 2>/dev/null || true
}

# (a) The counter: create, count 2000, reopen and count 500 more.
"$bin/kv_counter" "$dir/counter.pool" 2000 >"$dir/a1"
grep -qx "created" "$dir/a1" && grep -qx "count 2000" "$dir/a1" || fail "first count: $(cat "$dir/a1")"
"$bin/kv_counter" "$dir/counter.pool" 500 >"$dir/a2"
grep -qx "recovered 2000" "$dir/a2" && grep -qx "count 2500" "$dir/a2" || fail "reopen: $(cat "$dir/a2")"

# kill -9 mid-run: everything the killed process reported counted is recovered, with no gap
# (kv_counter checks the gap itself), and counting goes on from there.
kill_after_lines "$dir/a3" counted 3 "the counter" "$bin/kv_counter" "$dir/counter.pool" 2000000
last=$(grep '^counted' "$dir/a3" | tail -n 1 | cut -d' ' -f2)
[[ -n $last ]] || fail "the killed counter reported nothing"
"$bin/kv_counter" "$dir/counter.pool" 10 >"$dir/a4" || fail "recovery after kill -9: $(cat "$dir/a4")"
recovered=$(grep '^recovered' "$dir/a4" | cut -d' ' -f2)
((recovered >= last)) || fail "recovered $recovered after kill -9, but $last were counted before it"
grep -qx "count $((recovered + 10))" "$dir/a4" || fail "counting after recovery: $(cat "$dir/a4")"
echo "kv_counter: killed after $last counted, recovered $recovered"

# A pool file made for another structure is refused with a clear error, and left as it was.
cp "$dir/counter.pool" "$dir/copy.pool"
if "$bin/durable_queue" "$dir/counter.pool" 10 2>"$dir/err"; then fail "a foreign pool was accepted"; fi
grep -q "layout" "$dir/err" || fail "unclear error for a foreign pool: $(cat "$dir/err")"
cmp -s "$dir/counter.pool" "$dir/copy.pool" || fail "a refused pool file was changed"

# (b) The queue: a producer and a consumer thread; a second run finds nothing left over.
"$bin/durable_queue" "$dir/queue.pool" 5000 >"$dir/b1"
grep -qx "consumed 5000 in order" "$dir/b1" || fail "queue: $(cat "$dir/b1")"
"$bin/durable_queue" "$dir/queue.pool" 100 >"$dir/b2"
grep -qx "left over 0" "$dir/b2" && grep -qx "consumed 100 in order" "$dir/b2" ||
  fail "queue reopen: $(cat "$dir/b2")"
# (c) Detectable recovery: the stack's pusher is killed mid-run; the next run learns what became
# of the push it was making, completes it exactly once, and finds every value 1..N in order.
"$bin/detectable_stack" "$dir/stack.pool" 3000 >"$dir/c1"
grep -qx "stack holds 3000, in order" "$dir/c1" || fail "stack: $(cat "$dir/c1")"
kill_after_lines "$dir/c2" pushed 50 "the stack's pusher" "$bin/detectable_stack" "$dir/stack.pool" 20000000
"$bin/detectable_stack" "$dir/stack.pool" 10 >"$dir/c3" || fail "detectable recovery: $(cat "$dir/c3")"
grep -Eq "^pending [0-9]+ (took effect|not taken)$" "$dir/c3" || fail "no pending report: $(cat "$dir/c3")"
grep -Eq "^stack holds [0-9]+, in order$" "$dir/c3" || fail "stack after kill -9: $(cat "$dir/c3")"
echo "detectable_stack: killed, then $(grep '^pending' "$dir/c3")"
# (d) The string index, buffered: load, kill -9 mid-load, and the next load finds user:1..m in
# order (it checks that itself) with m at least the last count a completed sync() covered.
"$bin/string_index" "$dir/index.pool" load 2500 >"$dir/d1"
grep -qx "created" "$dir/d1" && grep -qx "holds 2500" "$dir/d1" || fail "index: $(cat "$dir/d1")"
"$bin/string_index" "$dir/index.pool" scan user:002499 5 >"$dir/d2"
[[ $(cat "$dir/d2") == $'user:002499 profile of user:002499\nuser:002500 profile of user:002500' ]] ||
  fail "index scan: $(cat "$dir/d2")"
kill_after_lines "$dir/d3" synced 3 "the index's loader" "$bin/string_index" "$dir/index.pool" load 5000000
last=$(grep '^synced' "$dir/d3" | tail -n 1 | cut -d' ' -f2)
[[ -n $last ]] || fail "the killed loader reported no sync"
"$bin/string_index" "$dir/index.pool" load 10 >"$dir/d4" || fail "index after kill -9: $(cat "$dir/d4")"
recovered=$(grep '^recovered' "$dir/d4" | cut -d' ' -f2)
((recovered >= last)) || fail "index recovered $recovered after kill -9, but $last were synced"
echo "string_index: killed after $last synced, recovered $recovered"
echo "examples: all passed"

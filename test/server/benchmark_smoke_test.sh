#!/usr/bin/env bash
# redis-benchmark against pmds-server: every test answers, unpipelined and 16 deep.
#   test/server/benchmark_smoke_test.sh SERVER_BIN STRUCTURE
#   test/server/benchmark_smoke_test.sh --redis      (the same against redis-server)
# Exit 0 when passed, 1 when failed, 77 (skipped) without redis-benchmark or redis-cli.
set -euo pipefail
fail() { echo "benchmark_smoke_test.sh: FAIL: $*" >&2; [[ -n ${err:-} && -f $err ]] &&
           { echo "server stderr tail:" >&2; tail -c 3000 "$err" >&2; }; exit 1; }
for tool in redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
[[ $# -ge 1 ]] || { echo "usage: $0 SERVER_BIN STRUCTURE | --redis" >&2; exit 2; }

base=/dev/shm
[[ -d $base ]] || base=${TMPDIR:-/tmp}
dir=$(mktemp -d "$base/pmds-server-bench-XXXXXX")
pid=
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
err=$dir/stderr

if [[ $1 == --redis ]]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0))
print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    >"$dir/stdout" 2>"$err" &
  pid=$!
  for _ in $(seq 300); do
    redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break
    sleep 0.1
  done
else
  # --port 0: the server picks a port and names it in its ready line.
  "$1" --pool "$dir/bench.pool" --structure "$2" --port 0 --bind 127.0.0.1 >"$dir/stdout" 2>"$err" &
  pid=$!
  port=
  for _ in $(seq 300); do  # 30 s
    port=$(sed -n 's/^pmds-server ready address=127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$dir/stdout")
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null ||
      fail "pmds-server exited before its ready line: $(cat "$dir/stdout")"
    sleep 0.1
  done
  [[ -n $port ]] || fail "no ready line from pmds-server within 30 s: $(cat "$dir/stdout")"
fi
redis-cli -p "$port" PING | grep -qx PONG || fail "no PONG on port $port"

for pipeline in 1 16; do
  out=$dir/bench.$pipeline
  redis-benchmark -p "$port" -t set,get,incr,mset -n 2000 -r 1000 -c 10 -P "$pipeline" -q \
    >"$out" 2>&1 || fail "redis-benchmark -P $pipeline: exit $?: $(tr '\r' '\n' <"$out" | tail -5)"
  # -q prints progress with carriage returns; the final line of each test ends with a newline.
  tr '\r' '\n' <"$out" >"$out.lines"
  for test in SET GET INCR 'MSET (10 keys)'; do
    grep -Eq "^$(sed 's/[()]/\\&/g' <<<"$test"): [0-9.]+ requests per second" "$out.lines" ||
      fail "redis-benchmark -P $pipeline: no requests-per-second line for $test:" \
           "$(tail -8 "$out.lines")"
  done
  grep -Ei "error|refused" "$out.lines" && fail "redis-benchmark -P $pipeline reported errors"
  grep -E "requests per second" "$out.lines" | sed "s/^/  -P $pipeline  /"
done

# The benchmark's keys are there: key:__rand_int__ (SET, MSET) and counter:__rand_int__ (INCR).
keys=$(redis-cli -p "$port" DBSIZE)
[[ $keys =~ ^[0-9]+$ && $keys -gt 0 ]] || fail "DBSIZE after the benchmark: '$keys'"
kill -0 "$pid" 2>/dev/null || fail "the server died"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[[ $status -eq 0 ]] || fail "SIGTERM: exit status $status, expected 0"
echo "benchmark_smoke_test: passed ($keys keys)"

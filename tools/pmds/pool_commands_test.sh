#!/usr/bin/env bash
# CTest "pool_commands": pmds check and pmds dump on pools pmds bench left behind, on a damaged
# pool, and on a file that is not a pool.
#   tools/pmds/pool_commands_test.sh PMDS
set -euo pipefail
pmds=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "pool_commands_test.sh: $*" >&2; exit 1; }

# A link-free list holding exactly the 128 keys of its prefill (100% reads change nothing).
"$pmds" bench --structure list/linkfree --key-range 256 --prefill 128 --reads 100 --threads 1 \
  --duration 0.05 --warmup 0 --reps 1 --no-table --no-recovery --pool "$dir/list.pool" 2>/dev/null
cp "$dir/list.pool" "$dir/before.pool"
"$pmds" check "$dir/list.pool" >"$dir/check" || fail "check failed: $(cat "$dir/check")"
grep -q "^structure   list/linkfree" "$dir/check" && grep -q "^elements    128$" "$dir/check" &&
  grep -qx "OK" "$dir/check" || fail "check: $(cat "$dir/check")"
cmp -s "$dir/list.pool" "$dir/before.pool" || fail "check changed the pool without --in-place"
"$pmds" dump "$dir/list.pool" >"$dir/dump"
[[ $(wc -l <"$dir/dump") -eq 128 ]] || fail "dump: $(wc -l <"$dir/dump") lines, not 128"
python3 - "$dir/dump" <<'PY' || fail "dump is not 128 ascending JSON lines with key and value"
import json, sys
keys = [json.loads(line)["key"] for line in open(sys.argv[1])]
assert keys == sorted(set(keys)) and len(keys) == 128 and all(1 <= k <= 256 for k in keys)
PY
"$pmds" check --in-place "$dir/list.pool" >"$dir/check2" || fail "check --in-place: $(cat "$dir/check2")"
grep -q "in place" "$dir/check2" || fail "check --in-place: $(cat "$dir/check2")"
"$pmds" inspect "$dir/list.pool" | grep -q "^shutdown        clean" || fail "in-place check left it dirty"

# A pool that grows: created at 4 MiB, filled past it; inspect shows its growth, check its keys.
"$pmds" bench --structure hash/linkfree --key-range 200000 --reads 100 --threads 1 \
  --duration 0.05 --warmup 0 --reps 1 --no-table --no-recovery --pool-size 4M \
  --max-pool-size 64M --pool "$dir/grow.pool" 2>/dev/null
"$pmds" inspect "$dir/grow.pool" >"$dir/inspect"
grep -Eq "^growth          created at [0-9.]+ MiB, grew [1-9][0-9]* times, may grow to [0-9.]+ MiB" \
  "$dir/inspect" || fail "inspect of a grown pool: $(cat "$dir/inspect")"
"$pmds" check "$dir/grow.pool" >"$dir/check3" || fail "check of a grown pool: $(cat "$dir/check3")"
grep -q "^elements    100000$" "$dir/check3" || fail "check of a grown pool: $(cat "$dir/check3")"

# A queue: its values in dequeue order.
"$pmds" bench --structure queue/izraelevitz --workload pairs --threads 1 --duration 0.05 \
  --warmup 0 --reps 1 --no-table --pool "$dir/queue.pool" 2>/dev/null
"$pmds" check "$dir/queue.pool" | grep -qx "OK" || fail "check of a queue"
"$pmds" dump "$dir/queue.pool" >/dev/null || fail "dump of a queue"

# Not a pool, and a pool whose header was damaged: exit 1, a message, nothing written.
head -c 1048576 /dev/urandom >"$dir/random.pool"
if "$pmds" check "$dir/random.pool" 2>"$dir/err"; then fail "random bytes passed check"; fi
[[ -s $dir/err ]] || fail "no message for random bytes"
cp "$dir/before.pool" "$dir/damaged.pool"
printf 'XXXXXXXX' | dd of="$dir/damaged.pool" bs=1 seek=0 conv=notrunc status=none
if "$pmds" dump "$dir/damaged.pool" 2>"$dir/err"; then fail "a damaged header passed dump"; fi
[[ -s $dir/err ]] || fail "no message for a damaged header"
echo "pool_commands: check and dump passed"

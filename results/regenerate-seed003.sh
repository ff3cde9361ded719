#!/usr/bin/env bash
# results/regenerate-seed003.sh — regenerates results/seed003/: seed 003's figures (Cai et al.,
# "Fast Nonblocking Persistence for Concurrent Data Structures", nbMontage) at this machine's
# scale, for what pmds has built of it so far: hash/montage, skiplist/montage, bst/montage,
# hash-so/montage, queue/montage, and the byte-string hash-bytes/montage and
# skiplist-bytes/montage,
# each in one `pmds bench` invocation with its transient twin and the other durable techniques
# on the same algorithm, so every ratio compares records of one run, round by round; then the
# latency of sync() (bench/montage_sync_bench) and recovery of 1M and 4M payloads. See
# results/README.md. About 15 minutes on the idle 2-core machine.
#
# usage: results/regenerate-seed003.sh       (from anywhere; builds nothing)
# environment: PMDS_BIN (default build/release/bin/pmds), SYNC_BENCH (default
#              build/release/bench/montage_sync_bench), DURATION (s per repetition, default
#              0.5), WARMUP (default 0.2), REPS (default 5)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
sync_bench=${SYNC_BENCH:-build/release/bench/montage_sync_bench}
[[ -x $sync_bench ]] || { echo "$0: $sync_bench is not built" >&2; exit 1; }
timing=(--duration "${DURATION:-0.5}" --warmup "${WARMUP:-0.2}" --reps "${REPS:-5}")
results_begin seed003 "${timing[*]}"

# Figures 3-4: 2:1:1 get:insert:remove (the set workload at 50% reads) over 1M keys, 0.5M
# prefilled (the default: half the range), 8-byte keys and values, 1, 2 and 4 threads (4 are
# oversubscribed on 2 cores). Every durable technique pmds has for the algorithm runs beside
# the twin. Then the same with 32-byte keys and 1 KB values (the -bytes entries).
for s in hash skiplist; do
  run "$s-211-1m" --structure "$(family "$s" transient montage izraelevitz linkfree soft mirror)" \
    --workload set --reads 50 --key-range 1000000 --threads 1,2,4 --no-recovery "${timing[@]}"
done
run bst-211-1m --structure "$(family bst transient montage izraelevitz mirror)" \
  --workload set --reads 50 --key-range 1000000 --threads 1,2,4 --no-recovery "${timing[@]}"
run hash-bytes-211-1m-32x1024 --structure hash-bytes/transient,hash-bytes/montage \
  --workload set --reads 50 --key-range 1000000 --threads 1,2,4 --no-recovery \
  --key-size 32 --value-size 1024 "${timing[@]}"
run skiplist-bytes-211-1m-32x1024 --structure skiplist-bytes/transient,skiplist-bytes/montage \
  --workload set --reads 50 --key-range 1000000 --threads 1,2,4 --no-recovery \
  --key-size 32 --value-size 1024 "${timing[@]}"
run hash-so-211-1m --structure "$(family hash-so transient montage)" \
  --workload set --reads 50 --key-range 1000000 --threads 1,2,4 --no-recovery "${timing[@]}"
# The queue: enqueue/dequeue pairs from empty, local work up to 64 iterations between
# operations (as results/seed004's queues).
run queue-pairs --structure "$(family queue transient montage izraelevitz mirror)" \
  --workload pairs --local-work 64 --threads 1,2,4 --no-recovery "${timing[@]}"

# Figure 6: recovery of 1M payloads (2M key range, 1M prefilled) and 4M (hash only), one
# recovery thread, then two: the pool opened after the loaded structure's process was killed, until the
# first operation can be served (payload scan, the three rules, the DRAM index rebuilt).
run recovery-1m --structure hash/montage,skiplist/montage,bst/montage,hash-so/montage \
  --workload set --reads 50 \
  --key-range 2000000 --prefill 1000000 --threads 1 --duration 0.2 --warmup 0 --reps 3
run recovery-4m --structure hash/montage --workload set --reads 50 --key-range 8000000 \
  --prefill 4000000 --threads 1 --duration 0.2 --warmup 0 --reps 3
# The same with two recovery threads (seed 003 §3.4's parallel recovery, --recovery-threads).
run recovery-1m-2-threads --structure hash/montage,skiplist/montage,bst/montage,hash-so/montage \
  --workload set --reads 50 --key-range 2000000 --prefill 1000000 --threads 1 --duration 0.2 \
  --warmup 0 --reps 3 --recovery-threads 2
run recovery-4m-2-threads --structure hash/montage --workload set --reads 50 --key-range 8000000 \
  --prefill 4000000 --threads 1 --duration 0.2 --warmup 0 --reps 3 --recovery-threads 2

# Figure 5: sync() latency and throughput with a sync every x operations per thread (the
# background advancer off), hash/montage at 2:1:1 over 1M keys.
echo "== sync: $sync_bench --threads 1,2 --every 1,10,100,1000,10000 --keys 1000000 --duration 1" \
  | tee -a "$out/tables.txt" >&2
"$sync_bench" --threads 1,2 --every 1,10,100,1000,10000 --keys 1000000 --duration 1 \
  | tee "$out/sync.txt" | tee -a "$out/tables.txt"

plot throughput "$out"/json/*.json
/usr/bin/python3 results/summarize-seed003.py "$out" >"$out/ratios.md"
results_end

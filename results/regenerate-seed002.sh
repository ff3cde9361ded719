#!/usr/bin/env bash
# results/regenerate-seed002.sh — regenerates results/seed002/: seed 002's figures (Cohen, Aksun,
# Avni, Larus, "Fine-Grain Checkpointing with In-Cache-Line Logging") at this machine's scale:
# masstree/incll (InCLL) and masstree/logging (the paper's LOGGING mode) beside masstree/transient
# (the twin every ratio is taken against), and the same three over byte-string keys
# (masstree-bytes/*), in one `pmds bench` invocation per run, so every ratio compares records of
# one run, round by round. See results/README.md. About 25 minutes on the idle 2-core machine.
#
# usage: results/regenerate-seed002.sh       (from anywhere; builds nothing)
# environment: PMDS_BIN (default build/release/bin/pmds), DURATION (s per repetition, default
#              0.5), WARMUP (default 0.2), REPS (default 5)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
timing=(--duration "${DURATION:-0.5}" --warmup "${WARMUP:-0.2}" --reps "${REPS:-5}")
results_begin seed002 "${timing[*]}"

trees=$(family masstree transient incll logging)

# Figures 2-5: YCSB A (50% put), B (5%), C (0%) and E (scans), uniform and zipfian 0.99
# (scrambled), a tree of 1M entries, 8-byte keys and values, 1, 2 and 4 threads (4 threads on
# this machine's 2 cores are oversubscribed).
for dist in uniform zipfian; do
  for w in a b c e; do
    run "ycsb-$w-$dist-1m" --structure "$trees" --workload "ycsb-$w" --distribution "$dist" \
      --key-range 1000000 --threads 1,2,4 --no-recovery "${timing[@]}"
  done
done
# The same at 10M entries (YCSB A and C; one thread: each repetition loads 10M keys), with
# recovery after a crash of the loaded tree.
for w in a c; do
  run "ycsb-$w-uniform-10m" --structure "$trees" --workload "ycsb-$w" --key-range 10000000 \
    --threads 1 "${timing[@]}"
done
# Recovery of the same 10M-entry trees opened lazily (seed 002 §4.3: the first operation served
# within 100 ms), three samples (one per run; each run measures recovery once).
for i in 1 2 3; do
  run "ycsb-c-uniform-10m-lazy-$i" --structure masstree/incll,masstree/logging --workload ycsb-c \
    --key-range 10000000 --threads 1 --lazy-recovery --duration 0.1 --warmup 0.05 --reps 1
done
# The byte-string trees' lazy open (their sweep finds the free blocks while the tree serves),
# 10M entries of 16-byte keys (layers), one sample.
run "ycsb-c-uniform-10m-key-16-lazy" --structure masstree-bytes/incll,masstree-bytes/logging \
  --workload ycsb-c --key-range 10000000 --key-size 16 --threads 1 --lazy-recovery --duration 0.1 \
  --warmup 0.05 --reps 1
# Figure 6: tree size 10K to 1M on YCSB A (10M above).
for n in 10000 100000; do
  run "ycsb-a-uniform-$n" --structure "$trees" --workload ycsb-a --key-range "$n" --threads 1,2 \
    --no-recovery "${timing[@]}"
done
# Figure 8: emulated fence latency 0 to 1000 ns on YCSB A (the transient twin issues no fences).
for ns in 250 500 1000; do
  run "ycsb-a-uniform-1m-fence-$ns" --structure "$trees" --workload ycsb-a --key-range 1000000 \
    --fence-latency "$ns" --threads 1 --no-recovery "${timing[@]}"
done

# Byte-string keys with common prefixes (the paper's keys are 8 bytes; 16 and 64 here): each
# 8 consecutive keys share all but their last 8 bytes, so the tree makes layers; 8-byte values
# in pool blocks (masstree-bytes/*), YCSB A and C, 1M entries. The pool is sized by hand: with
# 64-byte keys each group of 8 keys takes six layers of one entry (512-byte borders), more than
# the default sizing's 192 bytes a key.
bytes_trees=$(family masstree-bytes transient incll logging)
for size in 16 64; do
  for w in a c; do
    run "ycsb-$w-uniform-1m-key-$size" --structure "$bytes_trees" --workload "ycsb-$w" \
      --key-range 1000000 --key-size "$size" --value-size 8 --pool-size 1G --threads 1,2 \
      --no-recovery "${timing[@]}"
  done
done

plot throughput "$out"/json/*.json
/usr/bin/python3 results/summarize-seed002.py "$out" >"$out/ratios.md"
results_end

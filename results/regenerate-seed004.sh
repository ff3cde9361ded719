#!/usr/bin/env bash
# results/regenerate-seed004.sh — regenerates results/seed004/: seed 004's Figures 1-7 shapes
# (Fatourou, Kallimanis, Kosmas, "Persistent Software Combining") at this machine's scale. Every
# run puts the combining structures beside their volatile twins (*/pbcomb-transient,
# */pwfcomb-transient: Figure 8's volatile combining), their durable-only variants, the
# Izraelevitz transformation of the lock-free original and the transient original, in one
# `pmds bench` invocation, so every ratio compares records of one run, round by round. See
# results/README.md. About 15 minutes on the idle 2-core machine.
#
# usage: results/regenerate-seed004.sh       (from anywhere; builds nothing)
# environment: PMDS_BIN (default build/release/bin/pmds), DURATION (s per repetition, default
#              0.5), WARMUP (default 0.2), REPS (default 5)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
timing=(--duration "${DURATION:-0.5}" --warmup "${WARMUP:-0.2}" --reps "${REPS:-5}")
results_begin seed004 "${timing[*]}"

registers=(pbcomb pbcomb-durable pbcomb-transient pwfcomb pwfcomb-durable pwfcomb-transient
  izraelevitz transient)
queues=(pbcomb pbcomb-durable pbcomb-transient pwfcomb pwfcomb-durable pwfcomb-transient izraelevitz
  transient)
stacks=(pbcomb pbcomb-durable pbcomb-transient pbcomb-no-elim pbcomb-no-rec pwfcomb pwfcomb-durable
  pwfcomb-transient pwfcomb-no-elim izraelevitz transient)
heaps=(pbcomb pbcomb-durable pbcomb-transient pwfcomb pwfcomb-transient transient)

# Figures 1-2: AtomicFloat throughput and pwbs/op, local work up to 512 iterations (§6).
run atomicfloat-w512 --structure "$(family register "${registers[@]}")" --workload atomicfloat \
  --local-work 512 --threads 1,2,4 "${timing[@]}"
# The same at local work 64, the artifact's default (the side-by-side runs use it).
run atomicfloat-w64 --structure "$(family register "${registers[@]}")" --workload atomicfloat \
  --local-work 64 --threads 1,2,4 "${timing[@]}"
# Figures 4-5: queues in enqueue/dequeue pairs from empty; Figure 7a: stacks in push/pop pairs,
# with and without elimination and the recycling stack, on both protocols.
run queue-pairs --structure "$(family queue "${queues[@]}")" --workload pairs --local-work 64 \
  --threads 1,2,4 "${timing[@]}"
run stack-pairs --structure "$(family stack "${stacks[@]}")" --workload pairs --local-work 64 \
  --threads 1,2,4 "${timing[@]}"
# Figure 7b: heaps of 64 to 1024 keys, half full, equal numbers of inserts and delete-mins.
for keys in 64 256 1024; do
  run "heap-$keys" --structure "$(family heap "${heaps[@]}")" --workload heap --key-range "$keys" \
    --local-work 64 --threads 1,2,4 "${timing[@]}"
done

# Figure 6's question (how much is synchronization, how much persistence): the same runs with
# every pwb a no-op (PMDS_EADR=1: no write-back is issued; the fences stay).
export PMDS_EADR=1
run atomicfloat-no-pwb --structure "$(family register pbcomb pbcomb-transient pwfcomb \
  pwfcomb-transient izraelevitz)" --workload atomicfloat --local-work 64 --threads 1,2,4 \
  --no-recovery "${timing[@]}"
run queue-pairs-no-pwb --structure "$(family queue pbcomb pbcomb-transient pwfcomb \
  pwfcomb-transient izraelevitz)" --workload pairs --local-work 64 --threads 1,2,4 --no-recovery \
  "${timing[@]}"
unset PMDS_EADR

plot throughput "$out"/json/*.json
/usr/bin/python3 results/summarize-seed004.py "$out" >"$out/ratios.md"
results_end

#!/usr/bin/env bash
# results/regenerate-seed004.sh — regenerates results/seed004/: seed 004's Figures 1-6 shapes
# (Fatourou, Kallimanis, Kosmas, "Persistent Software Combining") at this machine's scale, for
# what pmds has built of it so far (PBcomb: register, stack, queue). Every run puts the combining
# structure beside its volatile twin (*/pbcomb-transient, Figure 8's volatile PBcomb), its
# durable-only variant, the Izraelevitz transformation of the lock-free original and the
# transient original, in one `pmds bench` invocation, so every ratio compares records of one
# run, round by round. See results/README.md.
#
# usage: results/regenerate-seed004.sh       (from anywhere; builds nothing)
# environment: PMDS_BIN (default build/release/bin/pmds), DURATION (s per repetition, default
#              0.5), WARMUP (default 0.2), REPS (default 5), WORK (max local-work iterations
#              between operations, default 64: the artifact's setting for the figures compared
#              side by side; the paper's Figure 1 uses up to 512).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
work=${WORK:-64}
common=(--duration "${DURATION:-0.5}" --warmup "${WARMUP:-0.2}" --reps "${REPS:-5}"
  --local-work "$work" --threads 1,2,4)
results_begin seed004 "${common[*]}"

family() {
  local s=$1 t
  shift
  local names=()
  for t in "$@"; do names+=("$s/$t"); done
  (IFS=,; echo "${names[*]}")
}
contenders=(pbcomb pbcomb-durable pbcomb-transient izraelevitz transient)

# Figures 1-2: AtomicFloat throughput and pwbs/op; Figures 4-5: queues in enqueue/dequeue pairs
# from empty; Figure 7a: stacks in push/pop pairs.
run atomicfloat --structure "$(family register "${contenders[@]}")" --workload atomicfloat \
  "${common[@]}"
run queue-pairs --structure "$(family queue "${contenders[@]}")" --workload pairs "${common[@]}"
run stack-pairs --structure "$(family stack "${contenders[@]}")" --workload pairs "${common[@]}"

# Figure 6's question (how much is synchronization, how much persistence): the same runs with
# every pwb a no-op (PMDS_EADR=1: no write-back is issued; the fences stay).
export PMDS_EADR=1
run atomicfloat-no-pwb --structure "$(family register pbcomb pbcomb-transient izraelevitz)" \
  --workload atomicfloat --no-recovery "${common[@]}"
run queue-pairs-no-pwb --structure "$(family queue pbcomb pbcomb-transient izraelevitz)" \
  --workload pairs --no-recovery "${common[@]}"
unset PMDS_EADR

plot throughput "$out"/json/*.json
results_end

#!/usr/bin/env bash
# results/regenerate-twins.sh — regenerates results/twins/: every transient twin that has an
# independent implementation of its algorithm, measured beside it in one `pmds bench` per
# structure, on the default suite's workloads and key ranges (scripts/run-default-suite.sh):
#   list/transient  vs list/xenium   set workload, key range 256
#   hash/transient  vs hash/xenium   set workload, key range 1048576 (2^20 buckets each)
#   queue/transient vs queue/xenium  pairs workload, key range 1024
# at 1 and 2 threads, REPS interleaved repetitions (each its own round); the ratio table is the
# median of the per-round ratios xenium/twin with their min and max (pmds bench --ratios): a
# twin at least as fast as its counterpart shows 1.0 or less. About 2 minutes on the idle
# 2-core machine. The twins are the denominators of every ratio pmds reports
# (docs/ARCHITECTURE.md §6, "Independent comparators").
#
# usage: results/regenerate-twins.sh       (from anywhere; builds nothing)
# environment: PMDS_BIN (default build/release/bin/pmds), DURATION (s per repetition, default
#              0.25, the default suite's), WARMUP (default 0.1), REPS (default 21)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
timing=(--duration "${DURATION:-0.25}" --warmup "${WARMUP:-0.1}" --reps "${REPS:-21}")
results_begin twins "${timing[*]}"

twin() {
  local name=$1 workload=$2 range=$3
  run "$name" --structure "$name/transient,$name/xenium" --workload "$workload" \
    --key-range "$range" --threads 1,2 --ratios "$out/$name.ratios" "${timing[@]}"
}
twin list set 256
twin hash set 1048576
twin queue pairs 1024

{
  echo "# xenium/twin throughput: median of the per-round ratios [min - max]"
  for name in list hash queue; do
    echo "## $name"
    cat "$out/$name.ratios"
  done
} >"$out/ratios.txt"
results_end
cat "$out/ratios.txt"

#!/usr/bin/env bash
# Runs the short default benchmark suite over every registered structure (`pmds list`), each with
# the workload of its kind, at 1 and 2 threads, in short interleaved rounds (every structure of a
# group runs round r before any runs round r+1), and writes into one results folder:
#   ratios.txt      every durable structure's throughput relative to its transient twin and to
#                   psync-bound: the median of the per-round ratios, with their spread. On a
#                   noisy machine these, not the absolute figures, are the result: printed first.
#   table.txt       the ratio table, then the terminal tables of every run
#   results.json    every record (one per structure x thread count; the per-group files too)
#   results.csv     the same, as CSV
#   plots/*.png     throughput vs threads (with the ratio to each transient twin), and
#                   flushes/op + fences/op of the durable structures (scripts/plot.py)
#   environment.txt machine, commit and settings
# It builds nothing: the README's setup script builds first. The folder is printed at the end.
#
# usage: scripts/run-default-suite.sh [RESULTS_DIR]
# The folder defaults to pmds-results/default-suite-DATE (git ignores pmds-results*/).
# environment: PMDS_BIN (the pmds program; default build/release/bin/pmds),
#              PMDS_SUITE_DURATION (seconds per round, default 0.25),
#              PMDS_SUITE_REPS (rounds, default 5).
#
# Workloads and sizes (docs/ARCHITECTURE.md §6, the specification papers' defaults):
#   lists             set mix, 90% reads, key range 256 (Zuriel et al. §6)
#   hash tables       set mix, 90% reads, key range 2^20 over 2^20 buckets (Zuriel et al. §6)
#   other sets/maps   set mix, 90% reads, key range 2^16 (skip lists, trees: prefilling 2^19
#                     keys into the Izraelevitz ones alone would take minutes)
#   queues, stacks    enqueue/dequeue (push/pop) pairs from empty, local work <= 512
#                     (Fatourou et al.)
#   priority queues   half-full heap of 1024 keys, insert + delete-min (Fatourou et al.)
#   registers         AtomicFloat (Fatourou et al.)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pmds=${PMDS_BIN:-$root/build/release/bin/pmds}
if [[ ! -x $pmds ]]; then
  echo "run-default-suite.sh: $pmds is not built (run scripts/setup-and-run.sh, or set PMDS_BIN)" >&2
  exit 1
fi
out=${1:-$root/pmds-results/default-suite-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
duration=${PMDS_SUITE_DURATION:-0.25}
reps=${PMDS_SUITE_REPS:-5}
common=(--threads 1,2 --duration "$duration" --warmup 0.1 --reps "$reps")

{
  echo "date:      $(date -Is)"
  echo "commit:    $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "machine:   $(uname -srm), $(nproc) cores"
  echo "cpu:       $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "pmds:      $pmds"
  echo "settings:  ${common[*]}"
} >"$out/environment.txt"

failures=0
groups=()

# run GROUP WORKLOAD KEY_RANGE NAME... : one `pmds bench` over the named structures.
run() {
  local group=$1 workload=$2 range=$3
  shift 3
  (($# > 0)) || return 0
  local names
  names=$(IFS=,; echo "$*")
  echo "== $group: $workload over $names" >&2
  if "$pmds" bench --structure "$names" --workload "$workload" --key-range "$range" "${common[@]}" \
      --json "$out/$group.json" --csv "$out/$group.csv" --ratios "$out/$group.ratios" \
      | tee -a "$out/runs.txt"; then
    groups+=("$group")
  else
    echo "run-default-suite.sh: the $group run failed" >&2
    failures=$((failures + 1))
  fi
  echo >>"$out/runs.txt"
}

mapfile -t keyed < <("$pmds" list --names --kind map; "$pmds" list --names --kind set)
lists=() hashes=() others=()
for name in "${keyed[@]}"; do
  case $name in
    list/*) lists+=("$name") ;;
    hash/*) hashes+=("$name") ;;
    *) others+=("$name") ;;
  esac
done
mapfile -t pairs < <("$pmds" list --names --kind queue; "$pmds" list --names --kind stack)
mapfile -t heaps < <("$pmds" list --names --kind priority-queue)
mapfile -t registers < <("$pmds" list --names --kind register)

run lists set 256 "${lists[@]}"
run hashes set 1048576 "${hashes[@]}"
run sets set 65536 "${others[@]}"
run pairs pairs 1024 "${pairs[@]}"
run heaps heap 1024 "${heaps[@]}"
run registers atomicfloat 1024 "${registers[@]}"

if ((${#groups[@]} > 0)); then
  # One JSON and one CSV with every record.
  /usr/bin/python3 - "$out" "${groups[@]}" <<'EOF'
import json, sys
out, groups = sys.argv[1], sys.argv[2:]
merged = {"pmds_bench": 1, "command": "scripts/run-default-suite.sh", "results": []}
for g in groups:
    with open(f"{out}/{g}.json") as f:
        merged["results"] += json.load(f)["results"]
with open(f"{out}/results.json", "w") as f:
    json.dump(merged, f, indent=1)
with open(f"{out}/results.csv", "w") as f:
    for i, g in enumerate(groups):
        with open(f"{out}/{g}.csv") as part:
            lines = part.readlines()
        f.writelines(lines if i == 0 else lines[1:])
EOF
  # The ratio tables of every group (pmds bench --ratios), in one.
  {
    echo "# throughput ratios: median of the per-round ratios [min - max] over $reps rounds"
    for group in "${groups[@]}"; do
      [[ -s $out/$group.ratios ]] && { echo "## $group"; cat "$out/$group.ratios"; }
    done
  } >"$out/ratios.txt"
  cat "$out/ratios.txt" "$out/runs.txt" >"$out/table.txt"
  rm -f "$out/runs.txt" "$out"/*.ratios
  "$pmds" plot --out "$out/plots" "$out/results.json" >/dev/null || failures=$((failures + 1))
fi

echo
[[ -f $out/ratios.txt ]] && cat "$out/ratios.txt"
echo
echo "results: $out"
echo "  ratios.txt, table.txt, results.json, results.csv, plots/ ($(ls "$out/plots" 2>/dev/null | wc -l) figures)"
((failures == 0)) || { echo "run-default-suite.sh: $failures step(s) failed" >&2; exit 1; }

#!/usr/bin/env bash
# results/regenerate-seed000.sh — regenerates results/seed000/: seed 000's experiment shapes (Zuriel et al.,
# "Efficient Lock-Free Durable Sets") at this machine's scale, each run with the transient and
# Izraelevitz twins in the same `pmds bench` invocation (so ratios compare like with like), plus
# issue 3's queue/stack pairs and a recovery measurement of 1M keys. See results/README.md.
#
# usage: results/regenerate-seed000.sh            (from anywhere; builds nothing)
# environment: PMDS_BIN (default build/release/bin/pmds; build it with
#                cmake --preset release && cmake --build --preset release --target pmds_cli)
#              DURATION (s per repetition, default 0.5), WARMUP (default 0.2), REPS (default 5),
#              SKIP_4M=1 to stop the hash key-range sweep at 256K.
#              SEED000_ARTIFACT=DIR: also run seed 000's published artifact side by side (DIR holds
#                its already-built `hash`, `list` and `sl` programs; this script never fetches or
#                builds it; results/README.md says how it was built), ARTIFACT_ROUNDS (default 5).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
common=(--duration "${DURATION:-0.5}" --warmup "${WARMUP:-0.2}" --reps "${REPS:-5}" --no-recovery)
results_begin seed000 "${common[*]}"
# Each family also runs its psync-bound reference (bench/psync_bound.hpp: the transient twin plus
# one psync per successful update, the ceiling of any durable set on this machine).
lists=list/transient,list/psync-bound,list/izraelevitz,list/linkfree,list/soft
hashes=hash/transient,hash/psync-bound,hash/izraelevitz,hash/linkfree,hash/soft
skiplists=skiplist/transient,skiplist/psync-bound,skiplist/izraelevitz,skiplist/linkfree,skiplist/soft
# the recovery run leaves out psync-bound: it has no pool to recover
recovery_hashes=hash/transient,hash/izraelevitz,hash/linkfree,hash/soft

# 1. throughput vs threads (1, 2, 4 = oversubscribed on 2 cores), 90% reads (seed 000 Fig. 7-8)
run threads-list256 --structure $lists --key-range 256 --threads 1,2,4 "${common[@]}"
run threads-list1024 --structure $lists --key-range 1024 --threads 1,2,4 "${common[@]}"
run threads-hash1M --structure $hashes --key-range 1048576 --buckets 1048576 --threads 1,2,4 "${common[@]}"
run threads-skiplist1024 --structure $skiplists --key-range 1024 --threads 1,2,4 "${common[@]}"

# 2. throughput vs key range, 2 threads, 90% reads (seed 000 Fig. 9-10); hash buckets = key range
for r in 16 64 256 1024 4096 16384; do
  run keyrange-list-$r --structure $lists --key-range $r --threads 2 "${common[@]}"
done
hash_ranges="1024 16384 262144 4194304"
[[ ${SKIP_4M:-0} == 1 ]] && hash_ranges="1024 16384 262144"
for r in $hash_ranges; do
  run keyrange-hash-$r --structure $hashes --key-range $r --threads 2 "${common[@]}"
done

# 3. throughput vs read percentage, 2 threads (seed 000 Fig. 11-12)
for p in 50 70 90 95 100; do
  run reads-list256-$p --structure $lists --key-range 256 --reads $p --threads 2 "${common[@]}"
  run reads-list1024-$p --structure $lists --key-range 1024 --reads $p --threads 2 "${common[@]}"
  run reads-hash1M-$p --structure $hashes --key-range 1048576 --buckets 1048576 --reads $p \
    --threads 2 "${common[@]}"
done

# Issue 4's targets (SOFT/link-free hash vs transient and Izraelevitz, 1M keys, 90% reads) in
# three separate invocations, so the spread of the ratio across runs on this loaded machine shows.
for i in 1 2 3; do
  run target-hash1M-$i --structure $hashes --key-range 1048576 --buckets 1048576 --threads 1,2 \
    "${common[@]}"
done

# The same shape on an eADR platform (PMDS_EADR=1: flushes skipped, fences kept), where a psync
# costs only its fence: how much of each gap above is the flush latency of this machine.
PMDS_EADR=1 run eadr-hash1M --structure $hashes --key-range 1048576 --buckets 1048576 \
  --threads 1,2 "${common[@]}"

# The same shape with clflush, the artifact's flush instruction, instead of clwb: clflush evicts
# the line, so a link-free node that was just made durable is a miss for its next reader, while
# SOFT's readers never touch its PNodes. How much of seed 000's finding (SOFT ahead of link-free
# on hash tables) is that eviction.
PMDS_FLUSH=clflush run clflush-hash1M --structure $hashes --key-range 1048576 --buckets 1048576 \
  --threads 1,2 "${common[@]}"

# Issue 3: queue and stack enqueue/dequeue (push/pop) pairs from empty, local work <= 512
run pairs --structure queue/transient,queue/izraelevitz,stack/transient,stack/izraelevitz \
  --workload pairs --threads 1,2 "${common[@]}"

# Recovery of 1M keys after a process crash (one thread; key range 2M prefilled with 1M keys,
# 2^20 buckets), with a short run so the record also carries bytes per key at 1M keys.
run recovery-hash1M --structure $recovery_hashes --key-range 2097152 --buckets 1048576 --threads 1 \
  --duration 0.2 --warmup 0.1 --reps 1

# Seed 000's published artifact side by side with pmds on the artifact's own workloads (90%
# reads, its key ranges, 1 and 2 threads): in each round one artifact run of each algorithm and
# one pmds invocation, in alternating order, 1 s each (the artifact's -d takes whole seconds).
# Each round's ratio is pmds / artifact within that round; the summary takes their median.
if [[ -n ${SEED000_ARTIFACT:-} ]]; then
  art=$(cd "$SEED000_ARTIFACT" && pwd)
  for p in hash list sl; do
    [[ -x $art/$p ]] || { echo "$0: SEED000_ARTIFACT: $art/$p is not an executable" >&2; exit 1; }
  done
  mkdir -p "$out/artifact"
  rounds_csv=$out/artifact/rounds.csv
  echo "round,workload,threads,program,algorithm,kops" >"$rounds_csv"
  scratch=$(mktemp -d)  # the artifact appends a result file to its working directory
  trap 'rm -rf "$scratch"' EXIT
  # One run of each side for the loop's current round, workload and thread count.
  artifact_runs() {
    for algorithm in LinkFree SOFT; do
      # it prints thousands of operations per second last
      kops=$(cd "$scratch" && "$art/$program" -a "$algorithm$suffix" -p "$threads" -R 90 \
        -M "$range" -d 1 | tail -n 1)
      echo "$round,$workload,$threads,artifact,${algorithm,,},$kops" >>"$rounds_csv"
    done
  }
  pmds_run() {
    "$pmds" bench --structure "$family/linkfree,$family/soft,$family/transient" \
      --key-range "$range" --reads 90 --threads "$threads" --duration 1 --warmup 0.2 \
      --reps 1 --no-recovery --no-table --json "$scratch/pmds.json" >/dev/null
    /usr/bin/python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(sys.argv[2] + ",pmds," + r["technique"] + "," + str(r["mops"] * 1000))' \
      "$scratch/pmds.json" "$round,$workload,$threads" >>"$rounds_csv"
  }
  for round in $(seq 1 "${ARTIFACT_ROUNDS:-5}"); do
    for workload in list256 list1024 skiplist1M hash1M; do
      case $workload in
        list256) program=list family=list range=256 suffix=List ;;
        list1024) program=list family=list range=1024 suffix=List ;;
        skiplist1M) program=sl family=skiplist range=1000000 suffix=SkipList ;;
        hash1M) program=hash family=hash range=1000000 suffix=HashTable ;;
      esac
      for threads in 1 2; do
        if ((round % 2)); then artifact_runs; pmds_run; else pmds_run; artifact_runs; fi
      done
    done
    echo "== artifact side by side: round $round done" >&2
  done
fi

# Figures: one plot.py call per family, so a family's records form exactly its sweeps.
for f in threads-list256 threads-list1024 threads-hash1M threads-skiplist1024; do
  plot "$f" "$out/json/$f.json"  # one folder each: list and skip list at 1024 share figure names
done
plot keyrange-list "$out"/json/keyrange-list-*.json
plot keyrange-hash "$out"/json/keyrange-hash-*.json
plot reads-list256 "$out"/json/reads-list256-*.json
plot reads-list1024 "$out"/json/reads-list1024-*.json
plot reads-hash1M "$out"/json/reads-hash1M-*.json
plot pairs "$out/json/pairs.json"

results_end
/usr/bin/python3 results/summarize-seed000.py "$out" >"$out/ratios.md"
cat "$out/ratios.md"

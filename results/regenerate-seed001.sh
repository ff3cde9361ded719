#!/usr/bin/env bash
# results/regenerate-seed001.sh — regenerates results/seed001/: seed 001's Figure 6 shapes
# (Friedman, Petrank, Ramalhete, "Mirror", PLDI 2021) at this machine's scale. Every run puts
# the Mirror structure beside its transient, Izraelevitz, FliT and psync-bound twins (and
# link-free/SOFT where they exist) in the same `pmds bench` invocation, so every ratio compares
# records of one run, round by round. See results/README.md.
#
# usage: results/regenerate-seed001.sh       (from anywhere; builds nothing)
# environment: PMDS_BIN (default build/release/bin/pmds), DURATION (s per repetition, default
#              0.5), WARMUP (default 0.2), REPS (default 5), NODES (elements of the large
#              structures, default 1048576; the key range is twice that, prefilled half).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
common=(--duration "${DURATION:-0.5}" --warmup "${WARMUP:-0.2}" --reps "${REPS:-5}" --no-recovery)
nodes=${NODES:-1048576}
range=$((2 * nodes))
results_begin seed001 "${common[*]} nodes=$nodes"

# The contenders of each family (seed 001 §6.1: the transient original, the general
# transformations, the hand-made sets). psync-bound exists for lists, hash tables and skip lists;
# psync2-bound (two psyncs per successful update: Mirror's own ceiling) for lists and hash tables.
lists=$(family list transient psync-bound psync2-bound izraelevitz flit mirror linkfree soft)
hashes=$(family hash transient psync-bound psync2-bound izraelevitz flit mirror linkfree soft)
skiplists=$(family skiplist transient psync-bound izraelevitz flit mirror linkfree soft)
bsts=$(family bst transient izraelevitz flit mirror)
# the threads runs also show §6.3's variant (both replicas on the pool's medium: /dev/shm here)
lists_pm=$lists,list/mirror-pm
hashes_pm=$hashes,hash/mirror-pm
large_args=(--key-range "$range" --buckets "$nodes")  # hash: one bucket per element

# Fig. 6 (a)-(c): the list, 128 keys in a range of 256, 80% lookups, 10% inserts, 10% deletes.
run threads-list128 --structure "$lists_pm" --key-range 256 --reads 80 --threads 1,2,4 "${common[@]}"
for r in 64 1024 4096; do  # 256 is the threads run's
  run size-list-$r --structure "$lists" --key-range "$r" --reads 80 --threads 2 "${common[@]}"
done
for u in 0 50 100; do  # 20 is the threads run's
  run updates-list128-$u --structure "$lists" --key-range 256 --reads $((100 - u)) --threads 2 \
    "${common[@]}"
done

# Fig. 6 (d)-(l): hash table, BST and skip list with NODES elements, 80/10/10; size and update
# sweeps at 2 threads. The BST and skip list run 1 and 2 threads only: their Izraelevitz twins
# take 5-9 s to prefill NODES elements, for every repetition.
run threads-hash --structure "$hashes_pm" "${large_args[@]}" --reads 80 --threads 1,2,4 "${common[@]}"
run threads-bst --structure "$bsts" "${large_args[@]}" --reads 80 --threads 1,2 "${common[@]}"
run threads-skiplist --structure "$skiplists" "${large_args[@]}" --reads 80 --threads 1,2 \
  "${common[@]}"
for s in hash bst skiplist; do
  case $s in hash) names=$hashes ;; bst) names=$bsts ;; skiplist) names=$skiplists ;; esac
  for r in 16384 262144; do  # 8K and 128K elements; the NODES size is the threads run's
    run size-$s-$r --structure "$names" --key-range "$r" --reads 80 --threads 2 "${common[@]}"
  done
  for u in 0 50; do  # 20% is the threads run's
    run updates-$s-$u --structure "$names" "${large_args[@]}" --reads $((100 - u)) --threads 2 \
      "${common[@]}"
  done
done

# No persistent memory here: a fence costs what it costs on DRAM. --fence-latency adds a delay
# after every fence, as a slower medium's write-back would (hash: NODES elements, list: 128).
for ns in 100 1000; do
  run fence-hash-$ns --structure "$hashes" "${large_args[@]}" --reads 80 --threads 2 \
    --fence-latency "$ns" "${common[@]}"
  run fence-list128-$ns --structure "$lists" --key-range 256 --reads 80 --threads 2 \
    --fence-latency "$ns" "${common[@]}"
done

# Space per element (Mirror's two replicas) and recovery time of NODES elements after a real
# process crash, one thread, one sample each.
for s in hash bst skiplist list; do
  case $s in
    list) names=list/izraelevitz,list/flit,list/mirror,list/linkfree,list/soft; r=16384 ;;
    bst) names=bst/izraelevitz,bst/flit,bst/mirror; r=$range ;;
    *) names=$s/izraelevitz,$s/flit,$s/mirror,$s/linkfree,$s/soft; r=$range ;;
  esac
  run recovery-$s --structure "$s/transient,$names" --key-range "$r" --buckets "$nodes" \
    --reads 80 --threads 1 --duration 0.2 --warmup 0.1 --reps 1
done

plot threads-list128 "$out/json/threads-list128.json"
plot size-list "$out"/json/size-list-*.json
plot updates-list128 "$out"/json/updates-list128-*.json
for s in hash bst skiplist; do
  plot threads-$s "$out/json/threads-$s.json"
  plot size-$s "$out"/json/size-$s-*.json "$out/json/threads-$s.json"
  plot updates-$s "$out"/json/updates-$s-*.json "$out/json/threads-$s.json"
done

results_end
/usr/bin/python3 results/summarize-seed001.py "$out" >"$out/ratios.md"
cat "$out/ratios.md"

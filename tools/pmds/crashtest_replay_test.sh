#!/usr/bin/env bash
# CTest "crashtest_replay": a lab run is a function of its seed, across processes.
#   - the same run in two processes executes the same simulator events and checks the same
#     images (skip lists too: their tower heights must not depend on an address, which ASLR
#     moves; nor may a thread's pmds id depend on when another thread ended);
#   - the replay command a violation prints reproduces the violation on its own.
#   tools/pmds/crashtest_replay_test.sh PMDS
set -euo pipefail
pmds=$1
dir=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The lab's scratch files and the replay's kept history go here, and go with it.
export PMDS_CRASHLAB_DIR=$dir
fail() { echo "crashtest_replay_test.sh: $*" >&2; exit 1; }
# The workload's events, the images checked and the recoveries crashed.
outcome() {
  python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))[0]
print(r["simulator_events"], r["images_checked"], r["recovery_crashes"])' "$1"
}

# skiplist/soft over 200 crash points reaches PCT runs in which a thread ends before another's
# first turn: the lab's threads took their pmds ids there by the clock (crashlab/sim_lab.hpp),
# and two runs of this check differed 4 times in 10 (3 and 7 of 10 runs in two outcomes).
for check in skiplist/izraelevitz:30 skiplist/linkfree:30 skiplist/soft:200; do
  structure=${check%:*}
  for run in a b; do
    "$pmds" crashtest --structure "$structure" --crashes "${check#*:}" --process-crashes 0 \
      --quiet --json "$dir/$run.json" >/dev/null || fail "$structure: the lab failed (run $run)"
  done
  a=$(outcome "$dir/a.json") b=$(outcome "$dir/b.json")
  [[ ${a%% *} -gt 0 && $a == "$b" ]] ||
    fail "$structure: one seed, two processes: events, images, recovery crashes $a and $b"
done

# A planted bug: its first violation's replay command, run alone, reports it again.
"$pmds" crashtest --structure list/izraelevitz-bug-b-link-not-fenced --crashes 500 \
  --process-crashes 0 --stop-at-first --quiet >"$dir/found" && fail "the planted bug passed"
command=$(sed -n 's/^  replay:  pmds //p' "$dir/found" | head -1)
[[ -n $command ]] || fail "no replay command in: $(cat "$dir/found")"
# shellcheck disable=SC2086  # the printed command is split into its words on purpose
"$pmds" $command >"$dir/replayed" 2>/dev/null && fail "the replay passed: pmds $command"
grep -q "^VIOLATION list/izraelevitz-bug-b-link-not-fenced" "$dir/replayed" ||
  fail "the replay did not report the violation: $(cat "$dir/replayed")"
echo "crashtest_replay_test.sh: passed"

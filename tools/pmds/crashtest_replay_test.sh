#!/usr/bin/env bash
# CTest "crashtest_replay": a lab run is a function of its seed, across processes.
#   - the same run in two processes executes the same simulator events (skip lists too: their
#     tower heights must not depend on an address, which ASLR moves);
#   - the replay command a violation prints reproduces the violation on its own.
#   tools/pmds/crashtest_replay_test.sh PMDS
set -euo pipefail
pmds=$1
dir=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The lab's scratch files and the replay's kept history go here, and go with it.
export PMDS_CRASHLAB_DIR=$dir
fail() { echo "crashtest_replay_test.sh: $*" >&2; exit 1; }
events() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["simulator_events"])' "$1"; }

for structure in skiplist/izraelevitz skiplist/linkfree skiplist/soft; do
  for run in a b; do
    "$pmds" crashtest --structure "$structure" --crashes 30 --process-crashes 0 --quiet \
      --json "$dir/$run.json" >/dev/null || fail "$structure: the lab failed (run $run)"
  done
  a=$(events "$dir/a.json") b=$(events "$dir/b.json")
  [[ $a -gt 0 && $a -eq $b ]] || fail "$structure: one seed, two processes, $a and $b events"
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

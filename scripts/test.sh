#!/usr/bin/env bash
# Runs the whole test suite: release build, then ThreadSanitizer and AddressSanitizer builds
# (those two build and run the tests only). Prints the time of every stage.
#   scripts/test.sh               everything (what CI runs)
#   PMDS_TEST_PRESETS="release"   only some configurations
#   PMDS_SOAK=1                   the crash-lab tests run their long soak (hours; not in CI)
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
stage_start=$start
stages=()
# Ends the current stage: prints its time and keeps it for the summary.
stage_done() {
  local now
  now=$(date +%s)
  stages+=("$(printf '%-22s %5d s' "$1" $((now - stage_start)))")
  echo "=== pmds: $1 took $((now - stage_start)) s ==="
  stage_start=$now
}

# CI keeps only the log's tail, where ctest's inline output of a failure is long gone: print
# each failed test's output again (the last 60 lines of at most 3 tests) after the summary.
show_failures() {
  awk '/^[0-9]+\/[0-9]+ Testing: / { n = 0; passed = 0; inside = 1 }
       inside { line[n++] = $0 }
       /^Test Pass(ed\.| Reason:)/ { passed = 1 }
       /time elapsed: / && inside {
         inside = 0
         if (!passed && shown++ < 3)
           for (i = (n > 60 ? n - 60 : 0); i < n; i++) print line[i]
       }' "$1/Testing/Temporary/LastTest.log"
}

scripts/install-deps.sh
stage_done "dependencies"

presets=${PMDS_TEST_PRESETS:-"release tsan asan"}
for preset in $presets; do
  echo "=== pmds: $preset build ==="
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  stage_done "$preset build"
  echo "=== pmds: $preset tests ==="
  if ! ctest --preset "$preset"; then
    echo "=== pmds: $preset tests failed; their output again ==="
    show_failures "build/$preset"
    exit 1
  fi
  stage_done "$preset tests"
done

echo "=== pmds: stage times ==="
printf '  %s\n' "${stages[@]}"
echo "pmds: all test configurations passed ($presets) in $(($(date +%s) - start)) s"

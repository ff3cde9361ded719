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

scripts/install-deps.sh
stage_done "dependencies"

presets=${PMDS_TEST_PRESETS:-"release tsan asan"}
for preset in $presets; do
  echo "=== pmds: $preset build ==="
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  stage_done "$preset build"
  echo "=== pmds: $preset tests ==="
  ctest --preset "$preset"
  stage_done "$preset tests"
done

echo "=== pmds: stage times ==="
printf '  %s\n' "${stages[@]}"
echo "pmds: all test configurations passed ($presets) in $(($(date +%s) - start)) s"

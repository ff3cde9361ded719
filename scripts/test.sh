#!/usr/bin/env bash
# Runs the whole test suite: release build, then ThreadSanitizer and AddressSanitizer builds.
#   scripts/test.sh               everything (what CI runs)
#   PMDS_TEST_PRESETS="release"   only some configurations
#   PMDS_SOAK=1                   also the long crash-lab soak (hours; not in CI)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

presets=${PMDS_TEST_PRESETS:-"release tsan asan"}
start=$(date +%s)
for preset in $presets; do
  echo "=== pmds: $preset build ==="
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  echo "=== pmds: $preset tests ==="
  ctest --preset "$preset"
done
echo "pmds: all test configurations passed ($presets) in $(( $(date +%s) - start )) s"

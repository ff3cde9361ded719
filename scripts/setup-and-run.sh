#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs the main job: installs missing
# packages, builds what the suite runs (the pmds program, release), then runs the short default
# benchmark suite over every registered structure and writes its ratio table, tables, JSON, CSV
# and plots into a results folder (about 7 minutes on a 2-core host once `pmds` is built;
# scripts/test.sh builds and runs the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target pmds_cli
exec scripts/run-default-suite.sh "$@"

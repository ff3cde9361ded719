#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs the main job: installs missing
# packages, builds pmds (release), then runs the short default benchmark suite over every
# registered structure and writes its table, JSON, CSV and plots into a results folder.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec scripts/run-default-suite.sh "$@"

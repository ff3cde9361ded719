#!/usr/bin/env bash
# Installs the Debian 12 packages pmds needs, only those missing. Safe to run repeatedly.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libpmem2-dev libpmem-dev        # pool mapping (libpmem2), eADR query and nt-memcpy (libpmem)
  libxenium-dev                   # reclamation library (see include/pmds/reclaim/epoch.hpp)
  libxxhash-dev                   # XXH3: the string maps' hash and checksum (header-only)
  nlohmann-json3-dev libcli11-dev # JSON output and input; command-line options (CLI11)
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  golang-go                       # only used when no Go toolchain is on PATH (tools/lincheck)
  python3 python3-matplotlib      # scripts/plot.py
  clang-format
  doxygen                         # the API reference (docs/Doxyfile.in), checked by the suite
  libuv1-dev                      # pmds-server's event loops
  redis-server redis-tools python3-redis nutcracker  # pmds-server's tests and comparison
)

missing=()
for p in "${packages[@]}"; do
  if [[ "$p" == golang-go ]] && command -v go >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "pmds: installing missing packages: ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "pmds: need root (or sudo) to apt-get install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The linearizability checker's Go modules (porcupine, goccy/go-json) come from the Go module proxy.
if [[ -f tools/lincheck/go.mod ]]; then
  (cd tools/lincheck && go mod download)
fi

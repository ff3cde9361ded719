#!/usr/bin/env bash
# CTest "install": installs pmds from BUILD_DIR into a temporary prefix, then builds and runs a
# consumer program against it twice, with find_package(pmds) and with pkg-config.
#   test/install/run.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1
build_dir=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cmake --install "$build_dir" --prefix "$dir/prefix" >/dev/null

# Both consumers build unoptimized: they check that an installed pmds compiles, links and runs,
# and optimizing them would only add compile time to the suite.

# find_package(pmds)
cmake -S "$source_dir/test/install/consumer" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE= \
  -DCMAKE_PREFIX_PATH="$dir/prefix" >/dev/null
cmake --build "$dir/build" >/dev/null
"$dir/build/consumer" "$dir/cmake.pool"

# pkg-config
export PKG_CONFIG_PATH="$dir/prefix/share/pkgconfig"
# shellcheck disable=SC2046  # the flags are words
c++ -O0 -o "$dir/consumer-pc" "$source_dir/test/install/consumer/consumer.cpp" \
  $(pkg-config --cflags pmds) $(pkg-config --libs pmds)
"$dir/consumer-pc" "$dir/pkg-config.pool"
# Both report the same version (CMakeLists.txt's project VERSION, CHANGELOG.md's latest).
cmake_version=$(cat "$dir/build/pmds_version.txt")
pc_version=$(pkg-config --modversion pmds)
[[ -n $cmake_version && $cmake_version == "$pc_version" ]] ||
  { echo "install: find_package reports '$cmake_version', pkg-config '$pc_version'" >&2; exit 1; }
grep -q "^## $cmake_version" "$source_dir/CHANGELOG.md" ||
  { echo "install: CHANGELOG.md has no section for $cmake_version" >&2; exit 1; }
echo "install: find_package and pkg-config consumers ran (pmds $cmake_version)"

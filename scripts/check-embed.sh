#!/usr/bin/env bash
# Installs a build of Tandem into a scratch root and compiles an outside
# program against it with pkg-config, as an embedding user would.
# Usage: scripts/check-embed.sh [BUILDDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build" --destdir "$root" --quiet
pc=$(dirname "$(find "$root" -name tandem.pc | head -1)")
export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR=$root
libdir=$(dirname "$(find "$root" -name 'libtandem.so' | head -1)")
c++ -std=c++20 examples/embed/main.cpp $(pkg-config --cflags --libs tandem) -o "$root/embed"
LD_LIBRARY_PATH=$libdir "$root/embed"
echo "embed check passed: compiled and ran against the installed headers and tandem.pc"

#!/usr/bin/env bash
# Installs a build of Tandem into a scratch root and compiles an outside
# program against it with pkg-config, as an embedding user would. The
# installed headers and tandem.pc must not need nlohmann-json, which only
# the library's .cpp files use (and no *_private.h header may be installed).
# Usage: scripts/check-embed.sh [BUILDDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build" --destdir "$root" --quiet
pc=$(dirname "$(find "$root" -name tandem.pc | head -1)")
umbrella=$(find "$root" -path '*/include/tandem/tandem/tandem.h' | head -1)
if [ -z "$umbrella" ] || [ -z "$(find "$root" -name tandem.pc | head -1)" ]; then
  echo "check-embed: the install has no tandem/tandem.h or no tandem.pc" >&2
  exit 1
fi
include=$(dirname "$umbrella")/..
leaks=$(grep -rlE '^\s*#\s*include\s*[<"](nlohmann/|[^>"]*_private\.h)' "$include"; grep -l nlohmann "$pc/tandem.pc") || true
if [ -n "$leaks" ]; then
  echo "check-embed: installed files include nlohmann-json or a private header, or tandem.pc requires it:" >&2
  echo "$leaks" >&2
  exit 1
fi
if find "$include" -name '*_private.h' | grep .; then
  echo "check-embed: private headers are installed (above)" >&2
  exit 1
fi
export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR=$root
libdir=$(dirname "$(find "$root" -name 'libtandem.so' | head -1)")
c++ -std=c++20 examples/embed/main.cpp $(pkg-config --cflags --libs tandem) -o "$root/embed"
LD_LIBRARY_PATH=$libdir "$root/embed"
echo "embed check passed: compiled and ran against the installed headers and tandem.pc (neither names nlohmann-json)"

#!/usr/bin/env bash
# Stages what the GPU test machine lacks into shared/gpu-deps/ (git-ignored;
# the device tool sends a checkout's shared/ along with the tree): the
# Catch2 v2 header and a pkg-config file that finds it there, CLI11's
# headers (the tandem command's and the benches' flags) and nlohmann-json's
# (the library's safetensors headers and checkpoint metadata). Run it here,
# where Debian's catch2 is installed, before sending the tree; then
# scripts/gpu-check.sh on the GPU machine configures the tests against it.
# Usage: scripts/stage-gpu-deps.sh   (CATCH2_HEADER=path to use another catch.hpp)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/shared/gpu-deps
header=${CATCH2_HEADER:-/usr/include/catch2/catch.hpp}
if [ ! -f "$header" ]; then
  echo "stage-gpu-deps: $header not found (install Debian's catch2, or set CATCH2_HEADER)" >&2
  exit 1
fi
version=$(awk '/#define CATCH_VERSION_(MAJOR|MINOR|PATCH)/ {v = v (v == "" ? "" : ".") $3} END {print v}' "$header")
case $version in
  2.*) ;;
  *) echo "stage-gpu-deps: $header is Catch2 '$version', the tests need v2 (catch2/catch.hpp)" >&2; exit 1 ;;
esac
mkdir -p "$dest/include/catch2" "$dest/lib/pkgconfig"
cp "$header" "$dest/include/catch2/catch.hpp"
# ${pcfiledir}: pkg-config resolves the prefix wherever the folder lands.
cat > "$dest/lib/pkgconfig/catch2.pc" <<PC
prefix=\${pcfiledir}/../..
includedir=\${prefix}/include

Name: Catch2
Description: Catch2 v2 header, staged for the GPU test machine by scripts/stage-gpu-deps.sh
Version: $version
Cflags: -I\${includedir}
PC
cli11=${CLI11_INCLUDE:-/usr/include/CLI}
if [ ! -f "$cli11/CLI.hpp" ]; then
  echo "stage-gpu-deps: $cli11/CLI.hpp not found (install Debian's libcli11-dev, or set CLI11_INCLUDE)" >&2
  exit 1
fi
rm -rf "$dest/include/CLI"
cp -r "$cli11" "$dest/include/CLI"
echo "staged CLI11 from $cli11"
# Debian's nlohmann-json3-dev is the multi-header layout: json.hpp includes
# nlohmann/detail/..., so the whole folder goes (about 1 MB).
nlohmann=${NLOHMANN_INCLUDE:-/usr/include/nlohmann}
if [ ! -f "$nlohmann/json.hpp" ]; then
  echo "stage-gpu-deps: $nlohmann/json.hpp not found (install Debian's nlohmann-json3-dev, or set NLOHMANN_INCLUDE)" >&2
  exit 1
fi
rm -rf "$dest/include/nlohmann"
cp -r "$nlohmann" "$dest/include/nlohmann"
echo "staged nlohmann-json from $nlohmann"
# Fashion-MNIST for tandem train (30 MB of gzip IDX files).
fmnist=${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ -f "$fmnist/train-images-idx3-ubyte.gz" ]; then
  mkdir -p "$dest/fashion-mnist"
  cp "$fmnist"/*-ubyte.gz "$dest/fashion-mnist/"
  echo "staged Fashion-MNIST from $fmnist"
else
  echo "stage-gpu-deps: no Fashion-MNIST in $fmnist (apt-get install dataset-fashion-mnist); the GPU check's main job will fail" >&2
fi
echo "staged Catch2 $version into ${dest#"$root"/}/ ($(du -sh "$dest" | cut -f1))"

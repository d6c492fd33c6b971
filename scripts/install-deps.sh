#!/usr/bin/env bash
# Installs the Debian packages Tandem needs to build and test, if missing.
# Works on a fresh Debian 12 or Ubuntu 22.04+ machine (as root or with sudo).
set -euo pipefail

packages=(g++ meson ninja-build pkg-config catch2 libopenblas-dev ccache zlib1g-dev python3 dataset-fashion-mnist
  libcli11-dev nlohmann-json3-dev python3-matplotlib libgloo-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "Installing missing packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

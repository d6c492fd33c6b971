#!/usr/bin/env bash
# Times a cold build of the library, the tandem command, the examples and
# the tests (-Dbench=false) at one commit: a fresh clone, an empty ccache,
# ninja -j2 (our CI machines have 2 cores). Prints the wall and CPU times and
# the time of each step by category, and keeps ninja's log in OUTDIR. Run it
# on a quiet machine, one at a time: compare commits on the same machine.
# Usage: scripts/cold-build-time.sh REV OUTDIR [meson setup args...]
set -euo pipefail
rev=$1
out=$(realpath -m "$2")
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$src" "$work/main"
# The headers scripts/stage-gpu-deps.sh staged for a machine without the
# packages (git-ignored, so not in the clone).
if [ -d "$src/shared/gpu-deps" ]; then
  mkdir -p "$work/main/shared"
  cp -r "$src/shared/gpu-deps" "$work/main/shared/"
fi
git -C "$work/main" checkout -q "$rev"
export CCACHE_DIR="$work/ccache"
meson setup "$work/main/b" "$work/main" -Dbench=false "$@" >/dev/null
mkdir -p "$out"
/usr/bin/time -f "%e s wall, %U s user, %S s sys" -o "$out/time.txt" ninja -C "$work/main/b" -j"${JOBS:-2}" >/dev/null
cp "$work/main/b/.ninja_log" "$out/ninja_log"
# Each step's duration in seconds (under -j2, so close to its CPU time).
awk 'NR > 1 { print ($2 - $1) / 1000, $4 }' "$out/ninja_log" | sort -rn >"$out/steps.txt"
echo "$(git -C "$work/main" rev-parse --short HEAD): $(cat "$out/time.txt")"
awk '{ k = "other"
  if ($2 ~ /^tests\//) k = "tests"; else if ($2 ~ /\.cu\.o$/) k = "cuda"
  else if ($2 ~ /^libtandem/) k = "library (C++)"; else if ($2 ~ /^cli\//) k = "cli"
  else if ($2 ~ /^examples\//) k = "examples"; else if ($2 ~ /^bench\//) k = "bench"
  s[k] += $1; n[k]++ }
  END { for (k in s) printf "  %-14s %7.1f s in %d steps\n", k, s[k], n[k] }' "$out/steps.txt" | sort

#!/usr/bin/env bash
# Fails if a tracked C++ file differs from what .clang-format asks for.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "clang-format is not installed (apt-get install clang-format)"; exit 1; }
git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format --dry-run --Werror
echo "format check passed"

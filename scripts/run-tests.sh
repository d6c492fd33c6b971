#!/usr/bin/env bash
# Runs meson's tests in a build dir and prints the Catch2 test-case totals
# as a last line "N passed, M failed, K skipped" (a skipped test is a run
# that exited 77: no GPU).
# Usage: scripts/run-tests.sh BUILDDIR [extra meson test args...]
set -uo pipefail
builddir=$1; shift
meson test -C "$builddir" --num-processes "$(nproc)" --print-errorlogs "$@"
status=$?
python3 "$(dirname "$0")/count-tests.py" "$builddir/meson-logs/testlog.json"
exit $status

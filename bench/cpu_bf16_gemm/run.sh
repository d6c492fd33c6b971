#!/bin/sh
# one full run: ./run.sh OUTFILE [extra args]
out=$1; shift
{ date -u; uptime; ./bench "$@"; uptime; date -u; } > "$out" 2>&1

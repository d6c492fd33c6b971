#!/bin/sh
# Lists the headers meson installs (paths relative to the source root).
cd "$(dirname "$0")/.." && for d in autograd tandem tensor kernels nn optim data; do
  [ -d "$d" ] && find "$d" -name '*.h'
done | sort

#!/bin/sh
# Lists the headers meson installs (paths relative to the source root).
cd "$(dirname "$0")/.." && find autograd tandem tensor kernels -name '*.h' | sort

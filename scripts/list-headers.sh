#!/bin/sh
# Lists the headers meson installs (paths relative to the source root): all
# but the *_private.h ones, which only the library's and the tandem
# command's .cpp files include (tensor/io/json_private.h names nlohmann-json,
# which the installed headers must not).
cd "$(dirname "$0")/.." && for d in autograd tandem tensor kernels nn optim data distributed; do
  [ -d "$d" ] && find "$d" -name '*.h' ! -name '*_private.h'
done | sort

// The error every CUDA entry point throws in a build without CUDA: the
// kernels' (kernels/contract.h) and the runtime layer's (kernels/cuda/stub.cpp).
// Emulated devices never get here: their ops run on the CPU kernels.
#pragma once

#include "tensor/core/errors.h"

namespace tandem::detail {

[[noreturn]] inline void no_cuda(const char* what) {
  throw NotImplementedError(
      str_cat(what,
              ": Tandem was built without CUDA support. Rebuild on a machine with the CUDA toolkit (meson setup "
              "-Dcuda=enabled), or set TANDEM_EMULATE_CUDA=1 to emulate a device"));
}

}  // namespace tandem::detail

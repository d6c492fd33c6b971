// What the op front end uses to route to a backend: the device switch and
// the error for an op that a backend does not have.
#pragma once

#include "tensor/core/tensor.h"
#include "tensor/ops/runtime.h"

namespace tandem {

// NotImplementedError naming the op, the device and the dtype.
[[noreturn]] void not_implemented_on(const char* op, Device device, Dtype dtype);

}  // namespace tandem

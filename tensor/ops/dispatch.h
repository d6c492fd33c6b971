// What the op front end uses to route to a backend: dispatch, and the error
// for an op that a backend does not have.
#pragma once

#include <utility>

#include "tensor/core/tensor.h"
#include "tensor/ops/runtime.h"

namespace tandem {

// A kernel on the backend that computes for device: on_cpu for the cpu and
// the emulated cuda devices, on_cuda for a real or simulated GPU, e.g.
//   dispatch(out.device(), cpu::fill, cuda::fill, out, value);
// on_cpu and on_cuda are one kernel's two definitions, declared by its
// area's contract (kernels/contract.h), so they take the same parameters;
// every argument is passed (a function pointer has no default arguments). In
// a build without CUDA on_cuda throws NotImplementedError; no device reaches
// it there. Never a fallback: the switch has no default.
template <typename R, typename... P, typename... A>
R dispatch(Device device, R (*on_cpu)(P...), R (*on_cuda)(P...), A&&... args) {
  switch (backend_of(device)) {
    case Backend::CUDA: return on_cuda(std::forward<A>(args)...);
    case Backend::CPU: break;
  }
  return on_cpu(std::forward<A>(args)...);
}

// NotImplementedError naming the op, the device and the dtype.
[[noreturn]] void not_implemented_on(const char* op, Device device, Dtype dtype);

}  // namespace tandem

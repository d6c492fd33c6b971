// Softmax and log_softmax with their fused backward, both backends
// (kernels/contract.h): kernels/cpu/softmax.cpp, kernels/cuda/softmax.cu. The
// gradient's terms are shared math (kernels/functors/softmax.h).
//
// softmax: out = softmax or log_softmax of in along dim; in is contiguous, out has
//   its shape and dtype (a floating one).
// softmax_backward: the gradient of softmax (log = false) or log_softmax (log =
//   true) along dim, from the forward's output and the gradient grad flowing into it:
//     softmax:     grad_in = out * (grad - sum(grad * out))
//     log_softmax: grad_in = grad - exp(out) * sum(grad)
//   with the sums over dim. grad and out are contiguous, of one shape and floating
//   dtype; grad_in has the same.
#pragma once

#include <cstdint>

#include "kernels/contract.h"
#include "tensor/core/tensor.h"

#define TANDEM_SOFTMAX_KERNELS(K)                                                \
  K(void, softmax, (const Tensor& out, const Tensor& in, int64_t dim, bool log)) \
  K(void, softmax_backward, (const Tensor& grad_in, const Tensor& grad, const Tensor& out, int64_t dim, bool log))

TANDEM_KERNELS(TANDEM_SOFTMAX_KERNELS)

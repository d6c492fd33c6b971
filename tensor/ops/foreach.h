// Multi-tensor ("foreach") ops, PyTorch's _foreach_norm and _foreach_mul_:
// one op over a list of tensors, run as one multi-tensor kernel
// (kernels/cpu/optim.h, kernels/cuda/optim.h) instead of one op per tensor.
// nn::utils::clip_grad_norm_ is built on them:
//   Tensor norms = detail::foreach_norm(grads, 2.0);  // (n,)
//   detail::foreach_mul_(grads, coef);                // coef: one element
//
// Unlike PyTorch's, which take any list (mixed lists on a slow path), these
// take one device and one floating dtype (float32, float64, float16,
// bfloat16): group the tensors first. Tensors that are not contiguous go
// through a contiguous copy. They record no graph, so they refuse a tensor
// that requires grad while grad mode is on.
#pragma once

#include <vector>

#include "tensor/core/tensor.h"

namespace tandem::detail {

// out[i] = ||tensors[i]||_p, as tandem::norm(tensors[i], p) (p = 2, 1, 0,
// inf, -inf or any other order), accumulated in float64. Returns one (n,)
// tensor of the tensors' dtype on their device (PyTorch returns n 0-dim
// tensors). An order without an identity (inf, -inf, p < 0) refuses an
// empty tensor, in PyTorch's words.
Tensor foreach_norm(const std::vector<Tensor>& tensors, double p);

// tensors[i] *= scale, in place, in the opmath type (float for the 16-bit
// types). scale: one element (any shape, any dtype: converted to the
// tensors'), on the tensors' device, read there without a host
// synchronization (a scale inside one of the tensors is read from a copy).
// A tensor listed twice is scaled twice.
void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale);

}  // namespace tandem::detail

// CPU reduction kernels (sum, mean, prod, amax, amin, logsumexp, norms,
// var/std, the arg reductions) and softmax / log_softmax with their fused
// backward. Outputs are allocated by the caller; inputs already have the
// dtype the op computes in.
#pragma once

#include <cstdint>

#include "tensor/core/op_table.h"
#include "tensor/core/tensor.h"

namespace tandem::cpu {

// out has in's rank, with size 1 on every reduced dim (the keepdim shape);
// which dims are reduced is read from that. in may have any strides
// (transposed, sliced, expanded). out has in's dtype.
void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const ReduceParams& params = {});

// max(dim) / min(dim) / argmax / argmin over at most one dim of size > 1:
// values (in's dtype; may be undefined for argmax/argmin) and indices (int64)
// both have the keepdim shape. The first occurrence wins ties; NaN wins.
void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in);

// out = softmax or log_softmax of in along dim; in is contiguous, out has
// its shape and dtype (a floating one).
void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log);

// The gradient of softmax (log = false) or log_softmax (log = true) along
// dim, from the forward's output and the gradient grad flowing into it:
//   softmax:     grad_in = out * (grad - sum(grad * out))
//   log_softmax: grad_in = grad - exp(out) * sum(grad)
// with the sums over dim. grad and out are contiguous, of one shape and
// floating dtype; grad_in has the same.
void softmax_backward(const Tensor& grad_in, const Tensor& grad, const Tensor& out, int64_t dim, bool log);

}  // namespace tandem::cpu

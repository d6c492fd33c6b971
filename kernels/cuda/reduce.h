// CUDA reductions, softmax and its fused backward, with the contract of
// kernels/cpu/reduce.h. They launch on the current stream of the input's device.
#pragma once

#include <cstdint>

#include "tensor/core/op_table.h"
#include "tensor/core/tensor.h"

namespace tandem::gpu {

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

// The gradient of softmax / log_softmax along dim (the formulas of
// cpu::softmax_backward); grad and out contiguous, of one shape and floating
// dtype; grad_in has the same.
void softmax_backward(const Tensor& grad_in, const Tensor& grad, const Tensor& out, int64_t dim, bool log);

}  // namespace tandem::gpu

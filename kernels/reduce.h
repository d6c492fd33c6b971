// Reductions, both backends (kernels/contract.h): sum, mean, prod, amax,
// amin, logsumexp, norms, var/std and the arg reductions, in
// kernels/cpu/reduce.cpp and kernels/cuda/reduce.cu. Outputs are allocated by
// the caller; inputs already have the dtype the op computes in. On CUDA they
// launch on the current stream of the input's device. Softmax: kernels/softmax.h.
//
// reduce: out has in's rank, with size 1 on every reduced dim (the keepdim
//   shape); which dims are reduced is read from that. in may have any strides
//   (transposed, sliced, expanded). out has in's dtype.
// arg_reduce: max(dim) / min(dim) / argmax / argmin over at most one dim of size >
//   1: values (in's dtype; may be undefined for argmax/argmin) and indices (int64)
//   both have the keepdim shape. The first occurrence wins ties; NaN wins.
#pragma once

#include "kernels/contract.h"
#include "tensor/core/op_table.h"
#include "tensor/core/tensor.h"

#define TANDEM_REDUCE_KERNELS(K)                                                                       \
  K(void, reduce, (ReduceOp op, const Tensor& out, const Tensor& in, const ReduceParams& params = {})) \
  K(void, arg_reduce, (bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in))

TANDEM_KERNELS(TANDEM_REDUCE_KERNELS)

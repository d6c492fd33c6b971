// CUDA elementwise kernels, with the contract of kernels/cpu/elementwise.h:
// outputs allocated by the caller, inputs broadcast to the output's shape.
// They launch on the current stream of the output's device.
#pragma once

#include <optional>

#include "tensor/core/op_table.h"
#include "tensor/core/tensor.h"

namespace tandem::gpu {

void unary(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& params = {});
// params: an activation backward's forward parameters.
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1,
            const UnaryParams& params = {});
// out = cond ? a : b; cond is bool, a and b have out's dtype.
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// out = mask ? value : in; mask is bool.
void masked_fill(const Tensor& out, const Tensor& in, const Tensor& mask, const Scalar& value);
void fill(const Tensor& out, const Scalar& value);
// dst = src converted to dst's dtype; src broadcasts to dst's shape.
void copy(const Tensor& dst, const Tensor& src);

}  // namespace tandem::gpu

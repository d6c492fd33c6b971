// CUDA kernels of the range factories, with the contract of
// kernels/cpu/ranges.h.
#pragma once

#include "tensor/core/scalar.h"
#include "tensor/core/tensor.h"

namespace tandem::gpu {

// out: (n,), numeric. out[i] = start + step * i, computed in int64 for the
// integer dtypes, else as one fma in float for float16/bfloat16 and in
// double for float32/float64.
void arange(const Tensor& out, const Scalar& start, const Scalar& step);
// out: (steps,), numeric. PyTorch's symmetric formula: the first half counts
// up from start, the second down from end, so both endpoints are exact.
void linspace(const Tensor& out, const Scalar& start, const Scalar& end);
// out: (n, m), any dtype. Ones on the main diagonal, zeros elsewhere.
void eye(const Tensor& out);

}  // namespace tandem::gpu

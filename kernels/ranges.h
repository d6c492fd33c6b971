// The range factories' kernels, both backends (kernels/contract.h):
// kernels/cpu/ranges.cpp, kernels/cuda/ranges.cu. The outputs are contiguous
// and allocated by the front end (tensor/ops/ranges.cpp).
//
// arange:   out: (n,), numeric. out[i] = start + step * i, computed in int64 for the
//           integer dtypes, else as one fma in float for float16/bfloat16 and in
//           double for float32/float64.
// linspace: out: (steps,), numeric. PyTorch's symmetric formula: the first half
//           counts up from start, the second down from end, so both endpoints are exact.
// eye:      out: (n, m), any dtype. Ones on the main diagonal, zeros elsewhere.
#pragma once

#include "kernels/contract.h"
#include "tensor/core/scalar.h"
#include "tensor/core/tensor.h"

#define TANDEM_RANGES_KERNELS(K)                                                 \
  K(void, arange, (const Tensor& out, const Scalar& start, const Scalar& step))  \
  K(void, linspace, (const Tensor& out, const Scalar& start, const Scalar& end)) \
  K(void, eye, (const Tensor& out))

TANDEM_KERNELS(TANDEM_RANGES_KERNELS)

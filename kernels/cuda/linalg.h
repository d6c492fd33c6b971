// CUDA-only matrix products, beside the contract's cuda::matmul
// (kernels/linalg.h), for the convolution (kernels/cuda/conv.cu).
#pragma once

#include "kernels/linalg.h"
#include "tensor/core/tensor.h"

namespace tandem::cuda {

// cuda::matmul with two more ways to run: a and b may be float16/bfloat16
// with a float32 out (the float32 sums, not rounded to the inputs' type),
// and accumulate (floating dtypes): out += a @ b, the sum taken in the
// compute type before out's one rounding (cuBLAS's beta = 1), as the
// convolution adds its bias.
void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b, bool allow_tf32, bool accumulate);

}  // namespace tandem::cuda

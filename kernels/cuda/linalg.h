// CUDA matrix products through cuBLAS (a tiled kernel for the integer
// dtypes), with the contract of kernels/cpu/linalg.h.
#pragma once

#include "tensor/core/tensor.h"

namespace tandem::gpu {

// out = a @ b for every batch index.
// out: (batch..., M, N), contiguous; a: (batch..., M, K); b: (batch..., K, N).
// a and b are strided views at out's batch shape (broadcast batch dims have
// stride 0) and have out's dtype (any but bool), or are float16/bfloat16
// with a float32 out: the float32 sums, not rounded to the inputs' type. allow_tf32: float32
// products may round their inputs to TF32 (cuda::matmul_allow_tf32()).
// accumulate (floating dtypes): out += a @ b, the sum taken in the compute
// type before out's one rounding (cuBLAS's beta = 1), as the convolution
// adds its bias.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b, bool allow_tf32 = false, bool accumulate = false);

}  // namespace tandem::gpu

// CUDA matrix products through cuBLAS (a tiled kernel for the integer
// dtypes), with the contract of kernels/cpu/linalg.h.
#pragma once

#include "tensor/core/tensor.h"

namespace tandem::gpu {

// out = a @ b for every batch index.
// out: (batch..., M, N), contiguous; a: (batch..., M, K); b: (batch..., K, N).
// a and b are strided views at out's batch shape (broadcast batch dims have
// stride 0) and have out's dtype (any but bool). allow_tf32: float32
// products may round their inputs to TF32 (cuda::matmul_allow_tf32()).
void matmul(const Tensor& out, const Tensor& a, const Tensor& b, bool allow_tf32 = false);

}  // namespace tandem::gpu

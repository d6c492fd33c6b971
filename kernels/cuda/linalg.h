// CUDA matrix products through cuBLAS, with the contract of
// kernels/cpu/linalg.h.
#pragma once

#include "tensor/core/tensor.h"

namespace tandem::gpu {

// out = a @ b for every batch index.
// out: (batch..., M, N), contiguous; a: (batch..., M, K); b: (batch..., K, N).
// a and b are strided views at out's batch shape (broadcast batch dims have
// stride 0) and have out's dtype (any but bool).
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tandem::gpu

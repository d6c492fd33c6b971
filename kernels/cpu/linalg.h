// CPU matrix products: batched GEMM over strided views, through OpenBLAS for
// float32/float64 (and float16/bfloat16 via float32) when the build has it,
// a blocked C++ GEMM otherwise and for the integer dtypes.
#pragma once

#include "tensor/core/tensor.h"

namespace tandem::cpu {

// out = a @ b for every batch index.
// out: (batch..., M, N), contiguous; a: (batch..., M, K); b: (batch..., K, N).
// a and b are strided views at out's batch shape (broadcast batch dims have
// stride 0) and have out's dtype (any but bool).
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tandem::cpu

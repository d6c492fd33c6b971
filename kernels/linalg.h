// Matrix products, both backends (kernels/contract.h). The CPU's
// (kernels/cpu/linalg.cpp): batched GEMM over strided views through OpenBLAS
// for float32/float64 (and float16/bfloat16 via float32) when the build has
// it, a blocked C++ GEMM otherwise and for the integer dtypes. CUDA's
// (kernels/cuda/linalg.cu): cuBLAS, a tiled kernel for the integer dtypes.
//
// matmul: out = a @ b for every batch index.
//   out: (batch..., M, N), contiguous; a: (batch..., M, K); b: (batch..., K, N).
//   a and b are strided views at out's batch shape (broadcast batch dims have
//   stride 0) and have out's dtype (any but bool). allow_tf32: float32
//   products may round their inputs to TF32 (cuda::matmul_allow_tf32()); the
//   CPU never does.
#pragma once

#include "kernels/contract.h"
#include "tensor/core/tensor.h"

#define TANDEM_LINALG_KERNELS(K) \
  K(void, matmul, (const Tensor& out, const Tensor& a, const Tensor& b, bool allow_tf32 = false))

TANDEM_KERNELS(TANDEM_LINALG_KERNELS)

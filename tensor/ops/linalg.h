// Matrix products: matmul (torch.matmul's rank rules with broadcast batch
// dims), mm (2-D only) and bmm (3-D only). All take two tensors of one dtype
// (no promotion, as PyTorch) on one device, and return a new tensor.
#pragma once

#include "tensor/core/tensor.h"

namespace tandem {

// 1-D x 1-D: dot product (0-dim); 2-D x 1-D: matrix-vector (M); 1-D x 2-D:
// (N); 2-D x 2-D: (M, N); otherwise batched over the broadcast batch dims,
// e.g. (2, 1, 3, 4) @ (5, 4, 6) -> (2, 5, 3, 6).
Tensor matmul(const Tensor& self, const Tensor& other);
// mat1: (M, K), mat2: (K, N) -> (M, N)
Tensor mm(const Tensor& mat1, const Tensor& mat2);
// batch1: (B, M, K), batch2: (B, K, N) -> (B, M, N)
Tensor bmm(const Tensor& batch1, const Tensor& batch2);

}  // namespace tandem

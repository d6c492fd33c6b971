// Batch norm, layer norm and embedding as functions, torch.nn.functional's
// semantics, over the ops of tensor/ops/norm.h (autograd on every device).
//   namespace F = tandem::nn::functional;
//   Tensor y = F::batch_norm(x, running_mean, running_var, F::BatchNormFuncOptions().training(true));
//   Tensor z = F::layer_norm(x, F::LayerNormFuncOptions({64}).weight(w).bias(b));
//   Tensor e = F::embedding(ids, table, F::EmbeddingFuncOptions().padding_idx(0));
#pragma once

#include "nn/options/norm.h"
#include "tensor/core/tensor.h"

namespace tandem::nn::functional {

// input: (N, C) or (N, C, *). running_mean, running_var: (C), or undefined
// (then options.training() must be true). See tandem::batch_norm.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options = {});

// input: (*, normalized_shape...). See tandem::layer_norm.
Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& options);

// input: int64 or int32 indices of any shape S; weight: (num_embeddings,
// embedding_dim). Returns (S..., embedding_dim). With max_norm, the rows
// that input names are first rescaled in place (without recording) to a
// norm_type-norm of at most max_norm, as PyTorch's; that pass looks at the
// whole table (one norm per row), not only the rows named.
Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options = {});

}  // namespace tandem::nn::functional

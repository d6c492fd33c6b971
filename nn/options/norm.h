// Options of the normalisation and embedding layers, in libtorch's builder
// style and names:
//   nn::BatchNorm2d(nn::BatchNormOptions(32).momentum(0.01).affine(false))
//   F::layer_norm(x, F::LayerNormFuncOptions({64}).eps(1e-6))
//   nn::Embedding(nn::EmbeddingOptions(1000, 64).padding_idx(0))
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tensor/core/arg.h"
#include "tensor/core/tensor.h"

namespace tandem::nn {

struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT(google-explicit-constructor)
  // C, the input's size(1).
  TANDEM_ARG(int64_t, num_features);
  TANDEM_ARG(double, eps) = 1e-5;
  // The running statistics' update: running = (1 - momentum) * running +
  // momentum * batch. None (std::nullopt): a cumulative average, momentum
  // 1 / num_batches_tracked.
  TANDEM_ARG(std::optional<double>, momentum) = 0.1;
  // A learnable per-channel weight (ones) and bias (zeros).
  TANDEM_ARG(bool, affine) = true;
  // Running mean and variance buffers, used in eval(); without them the
  // batch's statistics normalise in eval() too.
  TANDEM_ARG(bool, track_running_stats) = true;
};

struct LayerNormOptions {
  LayerNormOptions(std::vector<int64_t> normalized_shape)  // NOLINT(google-explicit-constructor)
      : normalized_shape_(std::move(normalized_shape)) {}
  // The trailing sizes each row spans, e.g. {hidden}.
  TANDEM_ARG(std::vector<int64_t>, normalized_shape);
  TANDEM_ARG(double, eps) = 1e-5;
  // A learnable weight (ones) and bias (zeros) of normalized_shape.
  TANDEM_ARG(bool, elementwise_affine) = true;
};

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TANDEM_ARG(int64_t, num_embeddings);
  TANDEM_ARG(int64_t, embedding_dim);
  // A row that gets no gradient (and starts at zero); negative counts from the end.
  TANDEM_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  // Rows looked up are first rescaled in place to a norm_type-norm of at
  // most max_norm, as PyTorch's.
  TANDEM_ARG(std::optional<double>, max_norm) = std::nullopt;
  TANDEM_ARG(double, norm_type) = 2.0;
  // Each row's gradient divided by how often its index occurs in the batch.
  TANDEM_ARG(bool, scale_grad_by_freq) = false;
  // Sparse gradients: not supported (Tandem has no sparse tensors).
  TANDEM_ARG(bool, sparse) = false;
  // A table to use instead of a fresh N(0, 1) one: (num_embeddings, embedding_dim).
  TANDEM_ARG(Tensor, _weight) = {};
};

// Embedding::from_pretrained's options.
struct EmbeddingFromPretrainedOptions {
  // The table does not train (its requires_grad is false).
  TANDEM_ARG(bool, freeze) = true;
  TANDEM_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  TANDEM_ARG(std::optional<double>, max_norm) = std::nullopt;
  TANDEM_ARG(double, norm_type) = 2.0;
  TANDEM_ARG(bool, scale_grad_by_freq) = false;
  TANDEM_ARG(bool, sparse) = false;
};

namespace functional {

struct BatchNormFuncOptions {
  TANDEM_ARG(Tensor, weight) = {};
  TANDEM_ARG(Tensor, bias) = {};
  // Batch statistics (and running statistics updated) when true; the
  // running ones otherwise.
  TANDEM_ARG(bool, training) = false;
  // The running statistics' update factor (see BatchNormOptions).
  TANDEM_ARG(double, momentum) = 0.1;
  TANDEM_ARG(double, eps) = 1e-5;
};

struct LayerNormFuncOptions {
  LayerNormFuncOptions(std::vector<int64_t> normalized_shape)  // NOLINT(google-explicit-constructor)
      : normalized_shape_(std::move(normalized_shape)) {}
  TANDEM_ARG(std::vector<int64_t>, normalized_shape);
  TANDEM_ARG(Tensor, weight) = {};
  TANDEM_ARG(Tensor, bias) = {};
  TANDEM_ARG(double, eps) = 1e-5;
};

struct EmbeddingFuncOptions {
  TANDEM_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  TANDEM_ARG(std::optional<double>, max_norm) = std::nullopt;
  TANDEM_ARG(double, norm_type) = 2.0;
  TANDEM_ARG(bool, scale_grad_by_freq) = false;
  TANDEM_ARG(bool, sparse) = false;
};

}  // namespace functional

}  // namespace tandem::nn

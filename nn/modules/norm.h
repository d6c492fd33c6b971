// nn::BatchNorm1d, nn::BatchNorm2d and nn::LayerNorm, as libtorch's (and
// PyTorch's: the same parameter and buffer names, so state dicts match).
#pragma once

#include "nn/module.h"
#include "nn/options/norm.h"

namespace tandem::nn {

// BatchNorm1d and BatchNorm2d differ only in the input ranks they accept.
//   weight: (C), ones; bias: (C), zeros (parameters, with affine)
//   running_mean: (C), zeros; running_var: (C), ones; num_batches_tracked:
//   int64 scalar, 0 (buffers, with track_running_stats)
// train(): the batch's statistics normalise; the running ones are updated
// and num_batches_tracked counts the batches. eval(): the running ones
// normalise (the batch's, without track_running_stats).
class BatchNormImplBase : public Module {
 public:
  explicit BatchNormImplBase(const BatchNormOptions& options);
  Tensor forward(const Tensor& input);
  // running_mean = 0, running_var = 1, num_batches_tracked = 0.
  void reset_running_stats();
  // reset_running_stats(), and weight = 1, bias = 0.
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;

  BatchNormOptions options;
  Tensor weight, bias;                                    // undefined without affine
  Tensor running_mean, running_var, num_batches_tracked;  // undefined without track_running_stats

 protected:
  // Throws ValueError, in PyTorch's words, for an input of the wrong rank.
  virtual void check_input_dim(const Tensor& input) const = 0;
};

// input: (N, C) or (N, C, L).
class BatchNorm1dImpl : public BatchNormImplBase {
 public:
  explicit BatchNorm1dImpl(int64_t num_features) : BatchNormImplBase(BatchNormOptions(num_features)) {}
  explicit BatchNorm1dImpl(const BatchNormOptions& options) : BatchNormImplBase(options) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};
TANDEM_MODULE(BatchNorm1d);

// input: (N, C, H, W).
class BatchNorm2dImpl : public BatchNormImplBase {
 public:
  explicit BatchNorm2dImpl(int64_t num_features) : BatchNormImplBase(BatchNormOptions(num_features)) {}
  explicit BatchNorm2dImpl(const BatchNormOptions& options) : BatchNormImplBase(options) {}

 protected:
  void check_input_dim(const Tensor& input) const override;
};
TANDEM_MODULE(BatchNorm2d);

// weight: normalized_shape, ones; bias: normalized_shape, zeros (with
// elementwise_affine). input: (*, normalized_shape...).
class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(std::vector<int64_t> normalized_shape)
      : LayerNormImpl(LayerNormOptions(std::move(normalized_shape))) {}
  explicit LayerNormImpl(const LayerNormOptions& options);
  Tensor forward(const Tensor& input);
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;

  LayerNormOptions options;
  Tensor weight, bias;  // undefined without elementwise_affine
};
TANDEM_MODULE(LayerNorm);

}  // namespace tandem::nn

// nn::BatchNorm1d, nn::BatchNorm2d and nn::LayerNorm.
#include "nn/modules/norm.h"

#include <ostream>

#include "nn/functional/norm.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/factory.h"

namespace tandem::nn {

namespace {
const char* bool_str(bool b) { return b ? "true" : "false"; }
}  // namespace

// ---------------------------------------------------------------- BatchNorm
BatchNormImplBase::BatchNormImplBase(const BatchNormOptions& options_) : options(options_) {
  const int64_t C = options.num_features();
  TANDEM_CHECK(C >= 0, ValueError, "BatchNorm: num_features must be non-negative, got ", C);
  if (options.affine()) {
    weight = register_parameter("weight", empty({C}));
    bias = register_parameter("bias", empty({C}));
  } else {
    register_parameter("weight", Tensor(), false);
    register_parameter("bias", Tensor(), false);
  }
  if (options.track_running_stats()) {
    running_mean = register_buffer("running_mean", empty({C}));
    running_var = register_buffer("running_var", empty({C}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  } else {
    register_buffer("running_mean", Tensor());
    register_buffer("running_var", Tensor());
    register_buffer("num_batches_tracked", Tensor());
  }
  reset_parameters();
}

void BatchNormImplBase::reset_running_stats() {
  if (!options.track_running_stats()) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void BatchNormImplBase::reset_parameters() {
  reset_running_stats();
  if (!options.affine()) return;
  NoGradGuard no_grad;
  weight.fill_(1);
  bias.zero_();
}

// As PyTorch's _BatchNorm.forward: while training with running statistics,
// count the batch, and take 1 / count as the momentum when it is None. The
// count goes up once the batch passed the op's checks (PyTorch counts first,
// so a rejected batch counts there).
Tensor BatchNormImplBase::forward(const Tensor& input) {
  check_input_dim(input);
  const bool counting = is_training() && options.track_running_stats();
  double momentum = options.momentum().value_or(0.0);
  if (counting && !options.momentum()) momentum = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>() + 1);
  // Batch statistics while training, and in eval() without running ones.
  const bool use_batch_stats = is_training() || !options.track_running_stats();
  Tensor out = functional::batch_norm(input, running_mean, running_var,
                                      functional::BatchNormFuncOptions()
                                          .weight(weight)
                                          .bias(bias)
                                          .training(use_batch_stats)
                                          .momentum(momentum)
                                          .eps(options.eps()));
  if (counting) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  return out;
}

void BatchNormImplBase::pretty_print(std::ostream& stream) const {
  stream << name() << "(" << options.num_features() << ", eps=" << options.eps() << ", momentum=";
  if (options.momentum())
    stream << *options.momentum();
  else
    stream << "None";
  stream << ", affine=" << bool_str(options.affine())
         << ", track_running_stats=" << bool_str(options.track_running_stats()) << ")";
}

void BatchNorm1dImpl::check_input_dim(const Tensor& input) const {
  TANDEM_CHECK(input.dim() == 2 || input.dim() == 3, ValueError, "expected 2D or 3D input (got ", input.dim(),
               "D input) in BatchNorm1d, which takes (N, C) or (N, C, L); for (N, C, H, W) use BatchNorm2d");
}

void BatchNorm2dImpl::check_input_dim(const Tensor& input) const {
  TANDEM_CHECK(input.dim() == 4, ValueError, "expected 4D input (got ", input.dim(),
               "D input) in BatchNorm2d, which takes (N, C, H, W); for (N, C) or (N, C, L) use BatchNorm1d, and "
               "add a batch dim to a single image with input.unsqueeze(0)");
}

// ---------------------------------------------------------------- LayerNorm
LayerNormImpl::LayerNormImpl(const LayerNormOptions& options_) : options(options_) {
  for (int64_t s : options.normalized_shape())
    TANDEM_CHECK(s >= 0, ValueError, "LayerNorm: normalized_shape must hold non-negative sizes, got ",
                 shape_str(options.normalized_shape()));
  if (options.elementwise_affine()) {
    weight = register_parameter("weight", tandem::empty(options.normalized_shape()));
    bias = register_parameter("bias", tandem::empty(options.normalized_shape()));
  } else {
    register_parameter("weight", Tensor(), false);
    register_parameter("bias", Tensor(), false);
  }
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (!options.elementwise_affine()) return;
  NoGradGuard no_grad;
  weight.fill_(1);
  bias.zero_();
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  return functional::layer_norm(
      input, functional::LayerNormFuncOptions(options.normalized_shape()).weight(weight).bias(bias).eps(options.eps()));
}

void LayerNormImpl::pretty_print(std::ostream& stream) const {
  stream << "LayerNorm(" << shape_str(options.normalized_shape()) << ", eps=" << options.eps()
         << ", elementwise_affine=" << bool_str(options.elementwise_affine()) << ")";
}

}  // namespace tandem::nn

// nn::Linear (y = x W^T + b) and nn::Flatten, as libtorch's.
#pragma once

#include "nn/module.h"
#include "tensor/core/arg.h"

namespace tandem::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  TANDEM_ARG(int64_t, in_features);
  TANDEM_ARG(int64_t, out_features);
  TANDEM_ARG(bool, bias) = true;
};

// weight: (out_features, in_features), bias: (out_features), both float32 on
// the cpu and initialised as PyTorch's: U(-1/sqrt(in), 1/sqrt(in)) (weight by
// kaiming_uniform_ with a = sqrt(5), which gives that bound).
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  void reset_parameters();
  // input: (*, in_features) → (*, out_features)
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;

  LinearOptions options;
  Tensor weight;
  Tensor bias;  // undefined with bias(false)
};
TANDEM_MODULE(Linear);

struct FlattenOptions {
  TANDEM_ARG(int64_t, start_dim) = 1;
  TANDEM_ARG(int64_t, end_dim) = -1;
};

class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(const FlattenOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  FlattenOptions options;
};
TANDEM_MODULE(Flatten);

}  // namespace tandem::nn

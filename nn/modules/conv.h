// nn::Conv2d, as libtorch's: a 2-D convolution layer with its weight and
// bias, initialised as PyTorch's.
#pragma once

#include "nn/module.h"
#include "nn/options/conv.h"

namespace tandem::nn {

// weight: (out_channels, in_channels / groups, kH, kW), bias: (out_channels),
// float32 on the cpu, both U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
// in_channels / groups * kH * kW (the weight by kaiming_uniform_ with
// a = sqrt(5), which gives that bound). Only zero padding.
class Conv2dImpl : public Module {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv2dImpl(const Conv2dOptions& options);
  void reset_parameters();
  // input: (N, in_channels, H, W) or (in_channels, H, W) → (N, out_channels, OH, OW)
  Tensor forward(const Tensor& input);
  // "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"
  void pretty_print(std::ostream& stream) const override;

  Conv2dOptions options;
  Tensor weight;
  Tensor bias;  // undefined with bias(false)
};
TANDEM_MODULE(Conv2d);

}  // namespace tandem::nn

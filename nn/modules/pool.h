// Pooling modules (MaxPool2d, AvgPool2d, AdaptiveAvgPool2d), as libtorch's:
// no parameters, forward is the functional.
#pragma once

#include <tuple>

#include "nn/module.h"
#include "nn/options/conv.h"

namespace tandem::nn {

class MaxPool2dImpl : public Module {
 public:
  explicit MaxPool2dImpl(ExpandingArray2 kernel_size) : options(kernel_size) {}
  explicit MaxPool2dImpl(const MaxPool2dOptions& options) : options(options) {}
  // input: (N, C, H, W) or (C, H, W)
  Tensor forward(const Tensor& input);
  // (values, int64 indices of the maxima in their (H, W) planes)
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& input);
  // "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)"
  void pretty_print(std::ostream& stream) const override;
  MaxPool2dOptions options;
};
TANDEM_MODULE(MaxPool2d);

class AvgPool2dImpl : public Module {
 public:
  explicit AvgPool2dImpl(ExpandingArray2 kernel_size) : options(kernel_size) {}
  explicit AvgPool2dImpl(const AvgPool2dOptions& options) : options(options) {}
  Tensor forward(const Tensor& input);
  // "AvgPool2d(kernel_size=2, stride=2, padding=0)"
  void pretty_print(std::ostream& stream) const override;
  AvgPool2dOptions options;
};
TANDEM_MODULE(AvgPool2d);

class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(ExpandingArray2 output_size) : options(output_size) {}
  explicit AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options) : options(options) {}
  Tensor forward(const Tensor& input);
  // "AdaptiveAvgPool2d(output_size=(5, 7))"
  void pretty_print(std::ostream& stream) const override;
  AdaptiveAvgPool2dOptions options;
};
TANDEM_MODULE(AdaptiveAvgPool2d);

}  // namespace tandem::nn

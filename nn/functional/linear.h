// nn::functional::linear: y = x W^T + b, with checks that name the layer's
// parameters when the input is on another device or has the wrong width.
#pragma once

#include "tensor/core/tensor.h"

namespace tandem::nn::functional {

// input: (*, in_features); weight: (out_features, in_features); bias:
// (out_features) or undefined. Returns (*, out_features).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});

}  // namespace tandem::nn::functional

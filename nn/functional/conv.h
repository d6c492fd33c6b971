// Convolution and pooling as functions, torch.nn.functional's semantics,
// with libtorch's option structs (nn/options/conv.h):
//   namespace F = tandem::nn::functional;
//   Tensor y = F::conv2d(x, w, F::Conv2dFuncOptions().bias(b).padding(1));
//   Tensor p = F::max_pool2d(y, F::MaxPool2dFuncOptions(2));
#pragma once

#include <tuple>

#include "nn/options/conv.h"
#include "tensor/core/tensor.h"

namespace tandem::nn::functional {

// input: (N, C_in, H, W) or (C_in, H, W); weight: (C_out, C_in / groups, kH, kW).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options = {});

// input: (N, C, H, W) or (C, H, W).
Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options);
// (values, int64 indices: each maximum's flat index in its (H, W) plane).
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const MaxPool2dFuncOptions& options);
Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& options);
Tensor adaptive_avg_pool2d(const Tensor& input, const AdaptiveAvgPool2dFuncOptions& options);

}  // namespace tandem::nn::functional

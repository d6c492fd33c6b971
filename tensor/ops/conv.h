// 2-D convolution with PyTorch's semantics (torch.nn.functional.conv2d):
// stride, zero padding (as sizes, or "same" / "valid"), dilation and channel
// groups, batched (N, C, H, W) or unbatched (C, H, W) input. Differentiable
// in the input, the weight and the bias (first order; double backward is not
// implemented). On the CPU: im2col + GEMM; on a GPU: cuDNN, or im2col +
// cuBLAS in a build without cuDNN.
#pragma once

#include <cstdint>
#include <string_view>

#include "tensor/core/tensor.h"

namespace tandem {

// input: (N, C_in, H, W) or (C_in, H, W); weight: (C_out, C_in / groups, kH,
// kW); bias: (C_out) or undefined. stride, padding and dilation each hold one
// value for both dims or two (h, w). All of one floating dtype, on one device.
// Returns (N, C_out, OH, OW) (or (C_out, OH, OW)) with
//   OH = (H + 2 * padding_h - dilation_h * (kH - 1) - 1) / stride_h + 1.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, IntArrayRef stride = 1,
              IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1);
// padding "valid" (none) or "same" (the output has the input's size; stride
// 1 only). An odd total padding puts the extra row and column at the bottom
// and right, as PyTorch does.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              std::string_view padding, IntArrayRef dilation = 1, int64_t groups = 1);
// One padding for both dims. (A literal 0 converts to IntArrayRef and to
// std::string_view alike; this overload takes it without ambiguity.)
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride, int64_t padding,
              IntArrayRef dilation = 1, int64_t groups = 1);

namespace detail {
// The gradients of a batched conv2d (4-D tensors, contiguous or not), from
// the gradient grad_out (N, C_out, OH, OW) flowing into its output:
//   conv2d_backward_input:  d/d(input) given the weight, of input_sizes;
//   conv2d_backward_weight: d/d(weight) given the input, of weight_sizes.
// stride, padding and dilation as conv2d's (two values each). They record no
// graph node, so they refuse arguments that require grad while grad mode is
// on: autograd calls them only when it does not record.
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, IntArrayRef input_sizes, IntArrayRef stride,
                             IntArrayRef padding, IntArrayRef dilation, int64_t groups);
Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& input, IntArrayRef weight_sizes, IntArrayRef stride,
                              IntArrayRef padding, IntArrayRef dilation, int64_t groups);
}  // namespace detail

}  // namespace tandem

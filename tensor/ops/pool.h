// 2-D pooling with PyTorch's semantics (torch.nn.functional): max pooling
// (with the indices of the maxima), average pooling and adaptive average
// pooling, over (N, C, H, W) or unbatched (C, H, W) inputs of a floating
// dtype. Differentiable in the input (max pooling to second order too).
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>

#include "tensor/core/tensor.h"

namespace tandem {

// kernel_size, stride, padding and dilation each hold one value for both
// dims or two (h, w); an empty stride means the kernel size. padding is at
// most half the kernel. With ceil_mode the output size rounds up, keeping
// only windows that start inside the input or its left padding:
//   OH = floor_or_ceil((H + 2 * padding_h - dilation_h * (kH - 1) - 1) / stride_h) + 1.
// A NaN in a window is its maximum; among equal values the first wins.
Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  IntArrayRef dilation = 1, bool ceil_mode = false);
// (values, indices): indices (int64) hold each maximum's flat index
// h * W + w in its (H, W) input plane, as PyTorch's.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size,
                                                   IntArrayRef stride = {}, IntArrayRef padding = 0,
                                                   IntArrayRef dilation = 1, bool ceil_mode = false);

// The mean of each window. count_include_pad: the padding's zeros count in
// the divisor; divisor_override (non-zero) replaces the divisor.
Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);

// The mean over windows that tile the input into output_size (one value, or
// (OH, OW)): output row i covers input rows [floor(i * H / OH), ceil((i + 1) * H / OH)).
Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size);

namespace detail {
// The input gradients of the batched (4-D) pooling ops, from grad_out
// (N, C, OH, OW) flowing into their output; parameters as the forward's
// (stride given). They record no graph node, so they refuse a grad_out that
// requires grad while grad mode is on: autograd calls them only when it
// does not record.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, IntArrayRef input_sizes,
                           IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                           bool ceil_mode);
Tensor avg_pool2d_backward(const Tensor& grad_out, IntArrayRef input_sizes, IntArrayRef kernel_size, IntArrayRef stride,
                           IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, IntArrayRef input_sizes);
}  // namespace detail

}  // namespace tandem

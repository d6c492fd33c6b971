// CPU 2-D pooling: max (with PyTorch's indices), average and adaptive
// average, forward and backward, as direct loops over (N * C) planes. The
// windows come from kernels/functors/conv.h, which the CUDA kernels share.
#pragma once

#include "kernels/functors/conv.h"
#include "tensor/core/tensor.h"

namespace tandem::cpu {

// Every tensor contiguous and 4-D, one floating dtype (indices int64); the
// front end checked the shapes. Outputs are fully overwritten.
// input / grad_input: (N, C, H, W); out / grad_out / indices: (N, C, OH, OW).

// indices: the flat index ih * W + iw of each maximum in its input plane. A
// NaN wins; among equal values the first in the window (row-major) wins.
void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p);
// grad_input[index] sums grad_out over the outputs whose maximum it was.
void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices);

void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dParams& p);
void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p);

void adaptive_avg_pool2d(const Tensor& out, const Tensor& input);
void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out);

}  // namespace tandem::cpu

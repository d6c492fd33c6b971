// CUDA 2-D pooling with the contract of kernels/cpu/pool.h: hand-written
// kernels (cuDNN has neither PyTorch's max indices nor its adaptive windows).
// Backward passes gather, one thread per input element, so they need no
// atomics and give the same sums on every run. A build without CUDA has
// throwing stubs (stub_conv.cpp).
#pragma once

#include "kernels/functors/conv.h"
#include "tensor/core/tensor.h"

namespace tandem::gpu {

// Every tensor contiguous and 4-D on one cuda device, one floating dtype
// (indices int64). input / grad_input: (N, C, H, W); out / grad_out /
// indices: (N, C, OH, OW). Outputs are fully overwritten.
void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p);
// p: the forward's (the gather needs the windows to find its outputs).
void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                         const Pool2dParams& p);
void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dParams& p);
void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p);
void adaptive_avg_pool2d(const Tensor& out, const Tensor& input);
void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out);

}  // namespace tandem::gpu

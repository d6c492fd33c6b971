// CUDA 2-D convolution with the contract of kernels/cpu/conv.h: through
// cuDNN when the build found it, else im2col kernels and cuBLAS GEMMs
// (gpu::matmul). A build without CUDA has throwing stubs (stub_conv.cpp).
#pragma once

#include "kernels/functors/conv.h"
#include "tensor/core/tensor.h"

namespace tandem::gpu {

// Every tensor contiguous, of one floating dtype, on one cuda device; the
// front end checked the shapes and handles empty tensors. Outputs are fully
// overwritten.
// out: (N, C_out, OH, OW); input: (N, C_in, H, W);
// weight: (C_out, C_in / groups, kH, kW); bias: (C_out) or undefined.
void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p);
// grad_input: (N, C_in, H, W); grad_out: (N, C_out, OH, OW).
void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p);
// grad_weight: (C_out, C_in / groups, kH, kW), the sum over the batch.
void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                            const Conv2dParams& p);

// "cudnn" or "im2col+cublas": which implementation this build has.
const char* conv2d_implementation();

// Whether the convolution may take cuDNN where the build has it (else, and
// always without it, im2col + cuBLAS): cuda::set_cudnn_enabled.
void set_cudnn_enabled(bool enabled);
bool cudnn_enabled();

}  // namespace tandem::gpu

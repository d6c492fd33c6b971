// CPU 2-D convolution: im2col + GEMM per batch item and group (OpenBLAS
// for the GEMMs when the build has it), and its two backward passes (input
// gradient by GEMM + col2im, weight gradient by GEMM). float16/bfloat16
// compute in float32 and round once on store.
#pragma once

#include "kernels/functors/conv.h"
#include "tensor/core/tensor.h"

namespace tandem::cpu {

// Every tensor contiguous, of one floating dtype; the front end checked the
// shapes. out is fully overwritten.
// out: (N, C_out, OH, OW); input: (N, C_in, H, W);
// weight: (C_out, C_in / groups, kH, kW); bias: (C_out) or undefined.
void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p);

// grad_input: (N, C_in, H, W), overwritten; grad_out: (N, C_out, OH, OW).
void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p);

// grad_weight: (C_out, C_in / groups, kH, kW), overwritten with the sum over
// the batch; grad_out: (N, C_out, OH, OW); input: (N, C_in, H, W).
void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                            const Conv2dParams& p);

}  // namespace tandem::cpu

// 2-D convolution and its two backward passes, both backends
// (kernels/contract.h). The CPU's (kernels/cpu/conv.cpp): im2col + GEMM per
// batch item and group (OpenBLAS for the GEMMs when the build has it), the
// input gradient by GEMM + col2im, the weight gradient by GEMM. CUDA's
// (kernels/cuda/conv.cu): cuDNN when the build found it and it is enabled
// (kernels/cuda/conv.h), else im2col kernels and cuBLAS GEMMs. float16 and
// bfloat16 compute in float32 and round once on store.
//
// Every tensor contiguous, of one floating dtype; the front end checked the
// shapes and handles empty tensors. Outputs are fully overwritten.
// conv2d: out: (N, C_out, OH, OW); input: (N, C_in, H, W);
//   weight: (C_out, C_in / groups, kH, kW); bias: (C_out) or undefined.
// conv2d_backward_input: grad_input: (N, C_in, H, W); grad_out: (N, C_out, OH, OW).
// conv2d_backward_weight: grad_weight: (C_out, C_in / groups, kH, kW), the sum over
//   the batch; grad_out: (N, C_out, OH, OW); input: (N, C_in, H, W).
#pragma once

#include "kernels/contract.h"
#include "kernels/functors/conv.h"
#include "tensor/core/tensor.h"

#define TANDEM_CONV_KERNELS(K)                                                                                 \
  K(void, conv2d,                                                                                              \
    (const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p)) \
  K(void, conv2d_backward_input,                                                                               \
    (const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight, const Conv2dParams& p))           \
  K(void, conv2d_backward_weight,                                                                              \
    (const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input, const Conv2dParams& p))

TANDEM_KERNELS(TANDEM_CONV_KERNELS)

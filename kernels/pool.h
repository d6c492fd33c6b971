// 2-D pooling, both backends (kernels/contract.h): max (with PyTorch's
// indices), average and adaptive average, forward and backward. The CPU's
// (kernels/cpu/pool.cpp) are direct loops over (N * C) planes; CUDA's
// (kernels/cuda/pool.cu) are hand-written kernels (cuDNN has neither
// PyTorch's max indices nor its adaptive windows) whose backward passes
// gather, one thread per input element, so they need no atomics and give the
// same sums on every run. The windows come from kernels/functors/conv.h.
//
// Every tensor contiguous and 4-D, one floating dtype (indices int64); the
// front end checked the shapes. Outputs are fully overwritten.
// input / grad_input: (N, C, H, W); out / grad_out / indices: (N, C, OH, OW).
// max_pool2d: indices: the flat index ih * W + iw of each maximum in its input
//   plane. A NaN wins; among equal values the first in the window (row-major) wins.
// max_pool2d_backward: grad_input[index] sums grad_out over the outputs whose
//   maximum it was. p: the forward's (CUDA's gather needs the windows to find its
//   outputs; the CPU scatters through the indices alone).
#pragma once

#include "kernels/contract.h"
#include "kernels/functors/conv.h"
#include "tensor/core/tensor.h"

#define TANDEM_POOL_KERNELS(K)                                                                                \
  K(void, max_pool2d, (const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p)) \
  K(void, max_pool2d_backward,                                                                                \
    (const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices, const Pool2dParams& p))         \
  K(void, avg_pool2d, (const Tensor& out, const Tensor& input, const Pool2dParams& p))                        \
  K(void, avg_pool2d_backward, (const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p))     \
  K(void, adaptive_avg_pool2d, (const Tensor& out, const Tensor& input))                                      \
  K(void, adaptive_avg_pool2d_backward, (const Tensor& grad_input, const Tensor& grad_out))

TANDEM_KERNELS(TANDEM_POOL_KERNELS)

// CUDA kernels of the joining ops (kernels/cuda/index.cu), which the CPU does
// in its front end: cat copies every input into its slice of the output in
// one launch (per batch of inputs), where the front end would otherwise
// launch one copy per input (kernels/contract.h: TANDEM_CUDA_KERNELS).
//
// cat: out: contiguous, the cat of inputs along dim. inputs: in order, each of
//   out's dtype and on out's device, any strides; a 1-D empty input beside a
//   higher-dimensional out (PyTorch's legacy rule) and inputs without elements
//   are skipped.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/contract.h"
#include "tensor/core/tensor.h"

#define TANDEM_SHAPE_KERNELS(K) K(void, cat, (const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim))

TANDEM_CUDA_KERNELS(TANDEM_SHAPE_KERNELS)

// CUDA kernels of the joining ops: cat copies every input into its slice of
// the output in one launch (per batch of inputs), where the front end would
// otherwise launch one copy per input.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/core/tensor.h"

namespace tandem::gpu {

// out: contiguous, the cat of inputs along dim. inputs: in order, each of
// out's dtype and on out's device, any strides; a 1-D empty input beside a
// higher-dimensional out (PyTorch's legacy rule) and inputs without elements
// are skipped.
void cat(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim);

}  // namespace tandem::gpu

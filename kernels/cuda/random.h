// CUDA random fills, with the contract of kernels/cpu/random.h: the same
// Philox counters per element, so the same seed gives the same numbers.
#pragma once

#include <cstdint>

#include "tensor/core/philox.h"
#include "tensor/core/tensor.h"

namespace tandem::gpu {

// out: contiguous, floating. u * (to - from) + from with u uniform in [0, 1).
void uniform(const Tensor& out, PhiloxState state, double from, double to);
// out: contiguous, floating. z * std + mean with z standard normal.
void normal(const Tensor& out, PhiloxState state, double mean, double std);
// out: contiguous, any dtype. Integers in [low, high), low < high.
void randint(const Tensor& out, PhiloxState state, int64_t low, int64_t high);

}  // namespace tandem::gpu

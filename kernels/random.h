// Random fills, both backends (kernels/contract.h): kernels/cpu/random.cpp,
// kernels/cuda/random.cu. Each writes every element of a contiguous output
// from the Philox counters the front end reserved, following the element map
// in tensor/ops/random.h, so the same seed gives the same numbers on every
// backend (and the CPU's thread count never changes one).
//
// uniform: out: contiguous, floating. u * (to - from) + from with u uniform in [0, 1).
// normal:  out: contiguous, floating. z * std + mean with z standard normal.
// randint: out: contiguous, any dtype. Integers in [low, high), low < high.
#pragma once

#include <cstdint>

#include "kernels/contract.h"
#include "tensor/core/philox.h"
#include "tensor/core/tensor.h"

#define TANDEM_RANDOM_KERNELS(K)                                                   \
  K(void, uniform, (const Tensor& out, PhiloxState state, double from, double to)) \
  K(void, normal, (const Tensor& out, PhiloxState state, double mean, double std)) \
  K(void, randint, (const Tensor& out, PhiloxState state, int64_t low, int64_t high))

TANDEM_KERNELS(TANDEM_RANDOM_KERNELS)

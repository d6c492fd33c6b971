// The (N, C, L) view of a batch-norm input, shared by the CPU kernels
// (kernels/cpu/norm.cpp), the CUDA kernels (kernels/cuda/norm.cu) and their
// launch plan (kernels/cuda/norm_plan.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/core/int_array_ref.h"

namespace tandem {

// An input (N, C, *) as N rows of C planes of L values, channel c's plane of
// row n at (n * C + c) * L; L is the product of the trailing sizes (1 for
// (N, C)), 0 when there is no plane.
struct Nchw {
  int64_t N, C, L;
};

inline Nchw nchw_of(IntArrayRef sizes) {
  const int64_t N = sizes[0], C = sizes[1];
  int64_t L = 1;
  for (size_t d = 2; d < sizes.size(); ++d) L *= sizes[d];
  return {N, C, N * C == 0 ? 0 : L};
}

}  // namespace tandem

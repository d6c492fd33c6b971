// Per-element math of the random fills shared by the CPU loops
// (kernels/cpu/random.cpp) and the CUDA kernels (kernels/cuda/random.cu), so
// that one seed gives the same values on both.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/core/half.h"
#include "tensor/core/macros.h"

namespace tandem::fn {

// randint's integer in the dtype T: bool is v != 0; float16 and bfloat16
// round the value through float.
template <typename T>
TANDEM_HD_INLINE T from_int(int64_t v) {
  if constexpr (std::is_same_v<T, bool>)
    return v != 0;
  else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

}  // namespace tandem::fn

// Conversions between a CPU kernel's storage type and its compute type in
// loops GCC vectorizes: a float16/bfloat16 result is stored through its bits
// member, since assigning the struct is an aggregate copy, which the
// vectorizer refuses (the loop then runs an element at a time).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "tensor/core/half.h"

namespace tandem::cpu {

template <typename T>
inline constexpr bool kIs16Bit = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// o = r converted to T.
template <typename T, typename R>
inline void store_as(T& o, R r) {
  if constexpr (kIs16Bit<T>)
    o.x = static_cast<T>(r).x;
  else
    o = static_cast<T>(r);
}

// dst[0, n) = src[0, n) converted to To (a 16-bit float from float16/bfloat16
// or to it goes through float).
template <typename To, typename From>
inline void convert_n(To* dst, const From* src, int64_t n) {
  TANDEM_SIMD
  for (int64_t k = 0; k < n; ++k) {
    if constexpr (kIs16Bit<From>)
      store_as(dst[k], static_cast<float>(src[k]));
    else
      store_as(dst[k], src[k]);
  }
}

}  // namespace tandem::cpu

// Per-element math of arange and linspace, for the CPU kernels and the CUDA
// ones alike, so that both give the same bits (kernels/cpu/ranges.h has the
// contract). The arithmetic follows PyTorch's CPU kernels (RangeFactories)
// as torch's build compiles them, with a*b + c fused into one fma.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tensor/core/half.h"
#include "tensor/core/macros.h"

namespace tandem::fn {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The type arange accumulates in (PyTorch's acc_type on the cpu).
template <typename T>
using arange_acc_t =
    std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<is_half_v<T>, float, double>>;

// arange's element i: start + step * i, in int64 for the integer dtypes,
// else one fma in the accumulation type.
template <typename T>
TANDEM_HD_INLINE T arange_at(arange_acc_t<T> start, arange_acc_t<T> step, int64_t i) {
  if constexpr (std::is_integral_v<arange_acc_t<T>>)
    return static_cast<T>(start + step * i);
  else
    return static_cast<T>(std::fma(step, static_cast<arange_acc_t<T>>(i), start));
}

// Arithmetic of linspace's step type S: double for integers, the dtype itself
// for floats. float16/bfloat16 round after every operation, as c10::Half's
// operators do (an int64 operand is first rounded to the type too); the
// others fuse a + step * k into one fma.
template <typename T>
struct LinspaceMath {
  using S = std::conditional_t<std::is_integral_v<T>, double, T>;
  static TANDEM_HD_INLINE S half(float x) { return S(x); }
  static TANDEM_HD_INLINE float f(S x) { return static_cast<float>(x); }

  static TANDEM_HD_INLINE S sub(S a, S b) {
    if constexpr (is_half_v<T>)
      return half(f(a) - f(b));
    else
      return a - b;
  }
  static TANDEM_HD_INLINE S div(S a, int64_t k) {
    if constexpr (is_half_v<T>)
      return half(f(a) / f(half(static_cast<float>(k))));
    else
      return a / static_cast<S>(k);
  }
  static TANDEM_HD_INLINE S add_mul(S a, S step, int64_t k) {  // a + step * k
    if constexpr (is_half_v<T>)
      return half(f(a) + f(half(f(step) * f(half(static_cast<float>(k))))));
    else
      return std::fma(step, static_cast<S>(k), a);
  }
  static TANDEM_HD_INLINE S sub_mul(S a, S step, int64_t k) {  // a - step * k
    if constexpr (is_half_v<T>)
      return half(f(a) - f(half(f(step) * f(half(static_cast<float>(k))))));
    else
      return std::fma(-step, static_cast<S>(k), a);
  }
  // Element i of steps (> 1): the first half counts up from start, the second
  // down from end, so both endpoints are exact.
  static TANDEM_HD_INLINE T at(S start, S end, S step, int64_t steps, int64_t i) {
    S v = i < steps / 2 ? add_mul(start, step, i) : sub_mul(end, step, steps - i - 1);
    return static_cast<T>(v);
  }
};

}  // namespace tandem::fn

// CPU kernels of the range factories. The arithmetic follows PyTorch's CPU
// kernels (RangeFactories) as torch's build compiles them, with a*b + c fused
// into one fma, so the values match torch's bit for bit; a CUDA kernel gets
// the same numbers from its fma.
#include "kernels/cpu/ranges.h"

#include <cmath>
#include <type_traits>

#include "kernels/cpu/parallel.h"

namespace tandem::cpu {

namespace {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The type arange accumulates in (PyTorch's acc_type on the cpu).
template <typename T>
using arange_acc_t =
    std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<is_half_v<T>, float, double>>;

template <typename T>
T* contiguous_data(const Tensor& out) {
  TANDEM_INTERNAL_ASSERT(out.is_contiguous(), "range kernels write contiguous outputs");
  return out.data_ptr<T>();
}

// Arithmetic of linspace's step type S: double for integers, the dtype itself
// for floats. float16/bfloat16 round after every operation, as c10::Half's
// operators do (an int64 operand is first rounded to the type too); the
// others fuse a + step * k into one fma.
template <typename T>
struct LinspaceMath {
  using S = std::conditional_t<std::is_integral_v<T>, double, T>;
  static S half(float x) { return S(x); }
  static float f(S x) { return static_cast<float>(x); }

  static S sub(S a, S b) {
    if constexpr (is_half_v<T>)
      return half(f(a) - f(b));
    else
      return a - b;
  }
  static S div(S a, int64_t k) {
    if constexpr (is_half_v<T>)
      return half(f(a) / f(half(static_cast<float>(k))));
    else
      return a / static_cast<S>(k);
  }
  static S add_mul(S a, S step, int64_t k) {  // a + step * k
    if constexpr (is_half_v<T>)
      return half(f(a) + f(half(f(step) * f(half(static_cast<float>(k))))));
    else
      return std::fma(step, static_cast<S>(k), a);
  }
  static S sub_mul(S a, S step, int64_t k) {  // a - step * k
    if constexpr (is_half_v<T>)
      return half(f(a) - f(half(f(step) * f(half(static_cast<float>(k))))));
    else
      return std::fma(-step, static_cast<S>(k), a);
  }
};

}  // namespace

void arange(const Tensor& out, const Scalar& start, const Scalar& step) {
  int64_t n = out.numel();
  dispatch_numeric(out.dtype(), "arange (cpu)", [&]<typename T>() {
    using Acc = arange_acc_t<T>;
    T* p = contiguous_data<T>(out);
    const Acc a = start.to<Acc>(), s = step.to<Acc>();
    parallel_for(0, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if constexpr (std::is_integral_v<Acc>)
          p[i] = static_cast<T>(a + s * i);
        else
          p[i] = static_cast<T>(std::fma(s, static_cast<Acc>(i), a));
      }
    });
  });
}

void linspace(const Tensor& out, const Scalar& start, const Scalar& end) {
  int64_t steps = out.numel();
  if (steps == 0) return;
  dispatch_numeric(out.dtype(), "linspace (cpu)", [&]<typename T>() {
    using M = LinspaceMath<T>;
    using S = typename M::S;
    T* p = contiguous_data<T>(out);
    const T a = start.to<T>(), z = end.to<T>();
    if (steps == 1) {
      p[0] = a;
      return;
    }
    const S sa = static_cast<S>(a), sz = static_cast<S>(z);
    const S step = M::div(M::sub(sz, sa), steps - 1);
    const int64_t halfway = steps / 2;
    parallel_for(0, steps, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        S v = i < halfway ? M::add_mul(sa, step, i) : M::sub_mul(sz, step, steps - i - 1);
        p[i] = static_cast<T>(v);
      }
    });
  });
}

void eye(const Tensor& out) {
  const int64_t n = out.size(0), m = out.size(1);
  if (n == 0 || m == 0) return;
  dispatch_all(out.dtype(), "eye (cpu)", [&]<typename T>() {
    T* p = contiguous_data<T>(out);
    const T zero = static_cast<T>(0.0f), one = static_cast<T>(1.0f);
    parallel_for(0, n, std::max<int64_t>(1, kElementwiseGrain / m), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T* row = p + i * m;
        for (int64_t j = 0; j < m; ++j) row[j] = zero;
        if (i < m) row[i] = one;
      }
    });
  });
}

}  // namespace tandem::cpu

// Per-element math shared by the CPU loops and the CUDA launchers. Each
// functor takes and returns the opmath type T (float for float16/bfloat16).
// A functor with parameters is built on the host by make() from its op's
// parameter struct (tensor/core/op_table.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/core/macros.h"
#include "tensor/core/op_table.h"

namespace tandem::fn {

// ---- unary
template <typename T>
struct Neg {
  TANDEM_HD_INLINE T operator()(T x) const { return -x; }
};
template <typename T>
struct Abs {
  TANDEM_HD_INLINE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else if constexpr (std::is_floating_point_v<T>)
      return std::fabs(x);  // abs(-0.0) is +0.0, as torch.abs
    else
      return x < T(0) ? -x : x;
  }
};
template <typename T>
struct Exp {
  TANDEM_HD_INLINE T operator()(T x) const { return std::exp(x); }
};
template <typename T>
struct Log {
  TANDEM_HD_INLINE T operator()(T x) const { return std::log(x); }
};
template <typename T>
struct Log1p {
  TANDEM_HD_INLINE T operator()(T x) const { return std::log1p(x); }
};
template <typename T>
struct Sqrt {
  TANDEM_HD_INLINE T operator()(T x) const { return std::sqrt(x); }
};
template <typename T>
struct Rsqrt {
  TANDEM_HD_INLINE T operator()(T x) const { return T(1) / std::sqrt(x); }
};
template <typename T>
struct Sin {
  TANDEM_HD_INLINE T operator()(T x) const { return std::sin(x); }
};
template <typename T>
struct Cos {
  TANDEM_HD_INLINE T operator()(T x) const { return std::cos(x); }
};
template <typename T>
struct Tanh {
  TANDEM_HD_INLINE T operator()(T x) const { return std::tanh(x); }
};
template <typename T>
struct Sigmoid {
  TANDEM_HD_INLINE T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
};
// x < 0 is false for NaN and for -0.0, which both pass through unchanged, as
// in torch.relu (clamp_min(x, 0)); one compare and one select vectorize.
template <typename T>
struct Relu {
  TANDEM_HD_INLINE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < T(0) ? T(0) : x;
  }
};
// gelu(x) = x * Phi(x), exact (erf) form.
template <typename T>
struct Gelu {
  TANDEM_HD_INLINE T operator()(T x) const { return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440))); }
};
// gelu with approximate="tanh".
template <typename T>
struct GeluTanh {
  TANDEM_HD_INLINE T operator()(T x) const {
    const T k = T(0.79788456080286535588);  // sqrt(2/pi)
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }
};
template <typename T>
struct Erf {
  TANDEM_HD_INLINE T operator()(T x) const { return std::erf(x); }
};
template <typename T>
struct Silu {
  TANDEM_HD_INLINE T operator()(T x) const { return x / (T(1) + std::exp(-x)); }
};
// x > 0 ? x : slope * x; NaN passes through (NaN * slope).
template <typename T>
struct LeakyRelu {
  T slope;
  static LeakyRelu make(const LeakyReluParams& p) { return {T(p.negative_slope)}; }
  TANDEM_HD_INLINE T operator()(T x) const { return x > T(0) ? x : x * slope; }
};
// x <= 0 ? scale alpha (exp(input_scale x) - 1) : scale x, PyTorch's
// form (expm1 keeps small negative x accurate).
template <typename T>
struct Elu {
  T neg_coef, pos_coef, input_scale;  // scale * alpha, scale, input_scale
  static Elu make(const EluParams& p) { return {T(p.scale * p.alpha), T(p.scale), T(p.input_scale)}; }
  TANDEM_HD_INLINE T operator()(T x) const { return x <= T(0) ? std::expm1(x * input_scale) * neg_coef : x * pos_coef; }
};
// beta x > threshold ? x : log1p(exp(beta x)) / beta, as PyTorch: above
// the threshold the result is x to within rounding.
template <typename T>
struct Softplus {
  T beta, threshold;
  static Softplus make(const SoftplusParams& p) { return {T(p.beta), T(p.threshold)}; }
  TANDEM_HD_INLINE T operator()(T x) const {
    const T bx = x * beta;
    return bx > threshold ? x : std::log1p(std::exp(bx)) / beta;
  }
};

// Integer power by squaring. A negative exponent (only reachable with a
// tensor exponent) gives what PyTorch's powi gives: 1 for base 1, +-1 for
// base -1, else 0 (the truncated reciprocal).
template <typename T>
TANDEM_HD_INLINE T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (-exp) % 2 ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  while (exp > 0) {
    if (exp & 1) result = static_cast<T>(result * base);
    base = static_cast<T>(base * base);
    exp >>= 1;
  }
  return result;
}

template <typename T>
TANDEM_HD_INLINE T pow_value(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || !b;
  } else if constexpr (std::is_integral_v<T>) {
    return int_pow(a, b);
  } else {
    return std::pow(a, b);
  }
}

template <typename T>
struct PowScalar {
  T exponent;
  static PowScalar make(const PowScalarParams& p) { return {p.exponent.to<T>()}; }
  TANDEM_HD_INLINE T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (exponent == T(2)) return x * x;
      if (exponent == T(0.5)) return std::sqrt(x);
    }
    return pow_value(x, exponent);
  }
};

// min(max(x, lo), hi): when lo > hi every element becomes hi, as torch.clamp.
template <typename T>
struct Clamp {
  T lo, hi;
  // A missing bound is -inf / +inf, or the type's limit where T has no infinity.
  static Clamp make(const ClampParams& p) {
    using L = std::numeric_limits<T>;
    T lo = L::has_infinity ? -L::infinity() : L::lowest();
    T hi = L::has_infinity ? L::infinity() : L::max();
    if (p.min) lo = p.min->to<T>();
    if (p.max) hi = p.max->to<T>();
    return {lo, hi};
  }
  TANDEM_HD_INLINE T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (x != x) return x;  // NaN propagates, as torch.clamp
    }
    T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};

template <typename T>
struct Fill {
  T value;
  TANDEM_HD_INLINE T operator()() const { return value; }
};

// ---- binary
template <typename T>
struct Add {
  T alpha;
  TANDEM_HD_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a || (alpha && b);
    else
      return a + alpha * b;
  }
};
template <typename T>
struct Sub {
  T alpha;
  TANDEM_HD_INLINE T operator()(T a, T b) const { return a - alpha * b; }
};
template <typename T>
struct Mul {
  TANDEM_HD_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>)
      return a && b;
    else
      return a * b;
  }
};
template <typename T>
struct Div {
  TANDEM_HD_INLINE T operator()(T a, T b) const { return a / b; }
};
template <typename T>
struct Pow {
  TANDEM_HD_INLINE T operator()(T a, T b) const { return pow_value(a, b); }
};
// maximum/minimum propagate NaN, as torch.maximum.
template <typename T>
struct Maximum {
  TANDEM_HD_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return a != a ? a : b;
    }
    return a > b ? a : b;
  }
};
template <typename T>
struct Minimum {
  TANDEM_HD_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return a != a ? a : b;
    }
    return a < b ? a : b;
  }
};
template <typename T>
struct Eq {
  TANDEM_HD_INLINE bool operator()(T a, T b) const { return a == b; }
};
template <typename T>
struct Ne {
  TANDEM_HD_INLINE bool operator()(T a, T b) const { return a != b; }
};
template <typename T>
struct Lt {
  TANDEM_HD_INLINE bool operator()(T a, T b) const { return a < b; }
};
template <typename T>
struct Le {
  TANDEM_HD_INLINE bool operator()(T a, T b) const { return a <= b; }
};
template <typename T>
struct Gt {
  TANDEM_HD_INLINE bool operator()(T a, T b) const { return a > b; }
};
template <typename T>
struct Ge {
  TANDEM_HD_INLINE bool operator()(T a, T b) const { return a >= b; }
};

// ---- activation backward: (grad, saved) -> grad_input, T floating. Each is
// its composite rule in autograd/rules_elementwise.cpp fused into one pass,
// with the same operations in the same order, so NaN and infinity come out
// as there; 16-bit types round once at the end instead of after each op.
// y > 0 is false for NaN: the gradient is 0 at y = NaN, as the composite
// where(y > 0, g, 0) (PyTorch's threshold_backward, y <= 0 ? 0 : g, passes g).
template <typename T>
struct ReluBackward {
  TANDEM_HD_INLINE T operator()(T g, T y) const { return y > T(0) ? g : T(0); }
};
template <typename T>
struct TanhBackward {
  TANDEM_HD_INLINE T operator()(T g, T y) const { return g * (T(1) - y * y); }
};
template <typename T>
struct SigmoidBackward {
  TANDEM_HD_INLINE T operator()(T g, T y) const { return g * y * (T(1) - y); }
};
// g * (Phi(x) + x * phi(x)).
template <typename T>
struct GeluBackward {
  TANDEM_HD_INLINE T operator()(T g, T x) const {
    const T cdf = (std::erf(x * T(0.70710678118654752440)) + T(1)) * T(0.5);  // x / sqrt(2)
    const T pdf = std::exp(x * x * T(-0.5)) * T(0.39894228040143267794);      // 1 / sqrt(2 pi)
    return g * (cdf + x * pdf);
  }
};
// g * d/dx [x/2 (1 + tanh(u))], u = k (x + 0.044715 x^3), k = sqrt(2/pi).
template <typename T>
struct GeluTanhBackward {
  TANDEM_HD_INLINE T operator()(T g, T x) const {
    const T k = T(0.79788456080286535588);
    const T x_sq = x * x;
    const T t = std::tanh((x + x * x_sq * T(0.044715)) * k);
    const T du = (x_sq * T(3 * 0.044715) + T(1)) * k;
    return g * ((t + T(1)) * T(0.5) + x * T(0.5) * (T(1) - t * t) * du);
  }
};
// g * s (1 + x (1 - s)), s = sigmoid(x).
template <typename T>
struct SiluBackward {
  TANDEM_HD_INLINE T operator()(T g, T x) const {
    const T s = T(1) / (T(1) + std::exp(-x));
    return g * s * (x * (T(1) - s) + T(1));
  }
};

// g * (x > 0 ? 1 : slope): slope at 0, as PyTorch.
template <typename T>
struct LeakyReluBackward {
  T slope;
  static LeakyReluBackward make(const LeakyReluParams& p) { return {T(p.negative_slope)}; }
  TANDEM_HD_INLINE T operator()(T g, T x) const { return x > T(0) ? g : g * slope; }
};
// g * (x <= 0 ? scale alpha input_scale exp(input_scale x) : scale).
template <typename T>
struct EluBackward {
  T neg_coef, pos_coef, input_scale;  // scale * alpha, scale, input_scale
  static EluBackward make(const EluParams& p) { return {T(p.scale * p.alpha), T(p.scale), T(p.input_scale)}; }
  TANDEM_HD_INLINE T operator()(T g, T x) const {
    return x <= T(0) ? g * input_scale * neg_coef * std::exp(x * input_scale) : g * pos_coef;
  }
};
// g * z / (z + 1), z = exp(beta x); g above the threshold.
template <typename T>
struct SoftplusBackward {
  T beta, threshold;
  static SoftplusBackward make(const SoftplusParams& p) { return {T(p.beta), T(p.threshold)}; }
  TANDEM_HD_INLINE T operator()(T g, T x) const {
    const T bx = x * beta;
    if (bx > threshold) return g;
    const T z = std::exp(bx);
    return g * z / (z + T(1));
  }
};

// ---- ternary
template <typename T>
struct Where {
  TANDEM_HD_INLINE T operator()(bool c, T a, T b) const { return c ? a : b; }
};
template <typename T>
struct MaskedFill {
  T value;
  TANDEM_HD_INLINE T operator()(T x, bool m) const { return m ? value : x; }
};

// ---- conversion
// static_cast, except floating to uint8 goes through int64 (as PyTorch's
// cast): a negative float converted straight to an unsigned type is
// undefined behaviour, and compilers and GPUs disagree on it.
template <typename To>
struct Cast {
  template <typename From>
  TANDEM_HD_INLINE To operator()(From x) const {
    if constexpr (std::is_same_v<To, uint8_t> && std::is_floating_point_v<From>) {
      return static_cast<To>(static_cast<int64_t>(x));
    } else {
      return static_cast<To>(x);
    }
  }
};

}  // namespace tandem::fn

// Per-reduction math shared by the CPU reduction engine and the CUDA launchers.
// Each *Ops names its accumulator (acc_t), the type elements are loaded as
// (in_t), the identity, how one element is folded in (reduce), how two partial
// accumulators merge (combine) and what is written out (project).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/core/macros.h"

namespace tandem::fn {

// Engines fold the elements of one partial accumulator in increasing index
// order, but may split a reduction into partials and merge them in any
// grouping: every combine below is associative and commutative (the arg
// reductions break ties on the index, not on the order of the partials).

template <typename T>
TANDEM_HD_INLINE bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
}

template <typename T>
TANDEM_HD_INLINE T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}
template <typename T>
TANDEM_HD_INLINE T highest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::max();
}

// Integer sums and products wrap on overflow, as PyTorch's do; going through
// the unsigned type keeps that defined behaviour.
template <typename T>
TANDEM_HD_INLINE T add_wrap(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
TANDEM_HD_INLINE T mul_wrap(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// NaN-propagating max/min of two values.
template <typename T>
TANDEM_HD_INLINE T max_nan(T a, T b) {
  return (b > a || is_nan(b)) && !is_nan(a) ? b : a;
}
template <typename T>
TANDEM_HD_INLINE T min_nan(T a, T b) {
  return (b < a || is_nan(b)) && !is_nan(a) ? b : a;
}

// Branch-free max/min that skip a NaN x (an IEEE comparison with NaN is
// false), for folds that keep independent lanes in vector registers: they
// track is_nan(x) on the side and return NaN if any element was one, which
// gives max_nan's result.
template <typename T>
TANDEM_HD_INLINE T max_skip_nan(T a, T x) {
  return x > a ? x : a;
}
template <typename T>
TANDEM_HD_INLINE T min_skip_nan(T a, T x) {
  return x < a ? x : a;
}

// ---- sum, mean, prod
// The sum, divided by count when Acc is a float: count is 1 for a sum and
// the number of elements reduced for a mean (NaN for none, as torch), so
// that sum and mean share one fold (and one kernel) per dtype.
template <typename Acc>
struct SumOps {
  using acc_t = Acc;
  using in_t = Acc;
  Acc count = Acc(1);
  TANDEM_HD_INLINE Acc identity() const { return Acc(0); }
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return add_wrap(a, x); }
  TANDEM_HD_INLINE Acc combine(Acc a, Acc b) const { return add_wrap(a, b); }
  TANDEM_HD_INLINE Acc project(Acc a) const {
    if constexpr (std::is_floating_point_v<Acc>)  // Acc is an opmath type: float for the 16-bit floats
      return count == Acc(1) ? a : a / count;
    else
      return a;
  }
};

// The mean: a float sum divided by the number of elements reduced.
template <typename Acc>
SumOps<Acc> mean_ops(int64_t count) {
  return SumOps<Acc>{static_cast<Acc>(count)};
}

template <typename Acc>
struct ProdOps {
  using acc_t = Acc;
  using in_t = Acc;
  TANDEM_HD_INLINE Acc identity() const { return Acc(1); }
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return mul_wrap(a, x); }
  TANDEM_HD_INLINE Acc combine(Acc a, Acc b) const { return mul_wrap(a, b); }
  TANDEM_HD_INLINE Acc project(Acc a) const { return a; }
};

// ---- amax, amin: values only, NaN wins
template <typename Acc>
struct MaxOps {
  using acc_t = Acc;
  using in_t = Acc;
  TANDEM_HD_INLINE Acc identity() const { return lowest_value<Acc>(); }
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return max_nan(a, x); }
  TANDEM_HD_INLINE Acc combine(Acc a, Acc b) const { return max_nan(a, b); }
  TANDEM_HD_INLINE Acc project(Acc a) const { return a; }
};
template <typename Acc>
struct MinOps {
  using acc_t = Acc;
  using in_t = Acc;
  TANDEM_HD_INLINE Acc identity() const { return highest_value<Acc>(); }
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return min_nan(a, x); }
  TANDEM_HD_INLINE Acc combine(Acc a, Acc b) const { return min_nan(a, b); }
  TANDEM_HD_INLINE Acc project(Acc a) const { return a; }
};

// ---- max(dim), min(dim), argmax, argmin: (value, index) pairs. A NaN beats
// every number (the first NaN's index is returned); equal values keep the
// smaller index, so the first occurrence wins. Index -1 marks "no element".
template <typename Acc>
struct ValueIndex {
  Acc value;
  int64_t index;
};

template <typename Acc, bool IsMax>
struct ArgOps {
  using acc_t = ValueIndex<Acc>;
  using in_t = Acc;
  TANDEM_HD_INLINE acc_t identity() const { return {IsMax ? lowest_value<Acc>() : highest_value<Acc>(), -1}; }
  // Elements come in increasing index order: a strict comparison keeps the
  // first occurrence, and one cheap test covers the common case.
  TANDEM_HD_INLINE acc_t reduce(acc_t a, Acc x, int64_t index) const {
    bool better = IsMax ? x > a.value : x < a.value;
    if (better || a.index < 0 || (is_nan(x) && !is_nan(a.value))) return {x, index};
    return a;
  }
  TANDEM_HD_INLINE acc_t combine(acc_t a, acc_t b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return (IsMax ? a.value > b.value : a.value < b.value) ? a : b;
    return a.index <= b.index ? a : b;
  }
  TANDEM_HD_INLINE acc_t project(acc_t a) const { return a; }
};
template <typename Acc>
using ArgMaxOps = ArgOps<Acc, true>;
template <typename Acc>
using ArgMinOps = ArgOps<Acc, false>;

// ---- var, std: Welford's running mean and sum of squared deviations, merged
// with Chan's formula; numerically stable in one pass.
template <typename Acc>
struct WelfordData {
  Acc mean, m2, n;
};

template <typename Acc>
struct WelfordOps {
  using acc_t = WelfordData<Acc>;
  using in_t = Acc;
  Acc correction;
  bool take_sqrt;
  TANDEM_HD_INLINE acc_t identity() const { return {Acc(0), Acc(0), Acc(0)}; }
  TANDEM_HD_INLINE acc_t reduce(acc_t a, Acc x, int64_t) const {
    Acc n = a.n + Acc(1);
    Acc delta = x - a.mean;
    Acc mean = a.mean + delta / n;
    return {mean, a.m2 + delta * (x - mean), n};
  }
  TANDEM_HD_INLINE acc_t combine(acc_t a, acc_t b) const {
    if (a.n == Acc(0)) return b;
    if (b.n == Acc(0)) return a;
    Acc n = a.n + b.n;
    Acc delta = b.mean - a.mean;
    Acc b_share = b.n / n;
    return {a.mean + delta * b_share, a.m2 + b.m2 + delta * delta * a.n * b_share, n};
  }
  // N - correction <= 0 divides by zero: inf, or NaN when m2 is 0 (as torch).
  TANDEM_HD_INLINE Acc project(acc_t a) const {
    Acc divisor = a.n > correction ? a.n - correction : Acc(0);
    Acc var = a.m2 / divisor;
    return take_sqrt ? std::sqrt(var) : var;
  }
};

// ---- vector norms
template <typename Acc>
struct Norm2Ops : SumOps<Acc> {
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return a + x * x; }
  TANDEM_HD_INLINE Acc project(Acc a) const { return std::sqrt(a); }
};
template <typename Acc>
struct Norm1Ops : SumOps<Acc> {
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return a + std::abs(x); }
};
// p = 0 counts the non-zero elements.
template <typename Acc>
struct Norm0Ops : SumOps<Acc> {
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return a + (x != Acc(0) ? Acc(1) : Acc(0)); }
};
template <typename Acc>
struct NormPOps : SumOps<Acc> {
  Acc p;
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return a + std::pow(std::abs(x), p); }
  TANDEM_HD_INLINE Acc project(Acc a) const { return std::pow(a, Acc(1) / p); }
};
template <typename Acc>
struct NormInfOps : MaxOps<Acc> {
  TANDEM_HD_INLINE Acc identity() const { return Acc(0); }
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return max_nan(a, Acc(std::abs(x))); }
};
template <typename Acc>
struct NormNegInfOps : MinOps<Acc> {
  TANDEM_HD_INLINE Acc reduce(Acc a, Acc x, int64_t) const { return min_nan(a, Acc(std::abs(x))); }
};

// ---- logsumexp in one pass: (max, sum of exp(x - max)), rescaled when the
// max grows, so nothing overflows. Equal maxima add without an exp, which
// keeps an all -inf row at -inf (not NaN) and inf + inf at inf.
template <typename Acc>
struct MaxSum {
  Acc max, sum;
};

template <typename Acc>
struct LogSumExpOps {
  using acc_t = MaxSum<Acc>;
  using in_t = Acc;
  TANDEM_HD_INLINE acc_t identity() const { return {lowest_value<Acc>(), Acc(0)}; }
  TANDEM_HD_INLINE acc_t combine(acc_t a, acc_t b) const {
    if (is_nan(a.max)) return a;
    if (is_nan(b.max)) return b;
    if (a.max < b.max) {
      acc_t t = a;
      a = b;
      b = t;
    }
    if (a.max == b.max) return {a.max, a.sum + b.sum};
    return {a.max, a.sum + b.sum * std::exp(b.max - a.max)};
  }
  TANDEM_HD_INLINE acc_t reduce(acc_t a, Acc x, int64_t) const { return combine(a, acc_t{x, Acc(1)}); }
  TANDEM_HD_INLINE Acc project(acc_t a) const { return a.max + std::log(a.sum); }
};

// ---- softmax outputs, given a row's max and sum of exp(x - max)
template <typename T>
struct SoftmaxOut {
  T max, inv_sum;
  TANDEM_HD_INLINE T operator()(T x) const { return std::exp(x - max) * inv_sum; }
};
// log_softmax: (x - max) - log(sum); shifting by max first keeps the bits a
// large max would round away from max + log(sum).
template <typename T>
struct LogSoftmaxOut {
  T max, log_sum;
  TANDEM_HD_INLINE T operator()(T x) const { return (x - max) - log_sum; }
};

}  // namespace tandem::fn

// Scalar: a number passed by value to an op (add(t, 2), full(s, 0.5)); it
// remembers whether it was a bool, an integer or a floating value, which
// matters for type promotion.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "tensor/core/dtype.h"

namespace tandem {

class Scalar {
 public:
  enum class Kind : int8_t { Bool, Int, Float };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}
  Scalar(Half v) : kind_(Kind::Float), d_(static_cast<float>(v)) {}
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(static_cast<float>(v)) {}

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }

  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0;
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return T(kind_ == Kind::Float ? static_cast<float>(d_) : static_cast<float>(i_));
    } else {
      return kind_ == Kind::Float ? static_cast<T>(d_) : static_cast<T>(i_);
    }
  }
  double to_double() const { return to<double>(); }
  int64_t to_int() const { return to<int64_t>(); }

  // The dtype a tensor made from this scalar alone gets (bool, int64, float32).
  Dtype default_dtype() const { return kind_ == Kind::Bool ? kBool : kind_ == Kind::Int ? kInt64 : kFloat32; }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace tandem

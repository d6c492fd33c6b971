// Dtype (libtorch's ScalarType): the element types Tandem stores, their C++
// types, names, PyTorch's promotion lattice, and the dispatch helpers that
// turn a runtime dtype into a compile-time type.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <type_traits>

#include "tensor/core/errors.h"
#include "tensor/core/half.h"

namespace tandem {

enum class ScalarType : int8_t { Float32, Float64, Float16, BFloat16, Int64, Int32, UInt8, Bool };
using Dtype = ScalarType;
constexpr int kNumDtypes = 8;

constexpr Dtype kFloat32 = Dtype::Float32, kFloat = Dtype::Float32;
constexpr Dtype kFloat64 = Dtype::Float64, kDouble = Dtype::Float64;
constexpr Dtype kFloat16 = Dtype::Float16, kHalf = Dtype::Float16;
constexpr Dtype kBFloat16 = Dtype::BFloat16;
constexpr Dtype kInt64 = Dtype::Int64, kLong = Dtype::Int64;
constexpr Dtype kInt32 = Dtype::Int32, kInt = Dtype::Int32;
constexpr Dtype kUInt8 = Dtype::UInt8, kByte = Dtype::UInt8;
constexpr Dtype kBool = Dtype::Bool;

// Short name as in torch ("float32", "int64", ...).
std::string_view dtype_name(Dtype dtype);
// PyTorch's ScalarType name ("Float", "Long", ...), which its messages quote.
std::string_view torch_scalar_name(Dtype dtype);
std::ostream& operator<<(std::ostream& os, Dtype dtype);

constexpr size_t element_size(Dtype dtype) {
  switch (dtype) {
    case Dtype::Float64:
    case Dtype::Int64: return 8;
    case Dtype::Float32:
    case Dtype::Int32: return 4;
    case Dtype::Float16:
    case Dtype::BFloat16: return 2;
    case Dtype::UInt8:
    case Dtype::Bool: return 1;
  }
  return 0;
}
constexpr bool is_floating_point(Dtype d) { return d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16; }
constexpr bool is_integral(Dtype d, bool include_bool) {
  return d == kInt64 || d == kInt32 || d == kUInt8 || (include_bool && d == kBool);
}
constexpr bool is_reduced_float(Dtype d) { return d == kFloat16 || d == kBFloat16; }

// The type lattice of torch.promote_types.
Dtype promote_types(Dtype a, Dtype b);

template <Dtype D>
struct CppTypeOf;
template <>
struct CppTypeOf<kFloat32> {
  using type = float;
};
template <>
struct CppTypeOf<kFloat64> {
  using type = double;
};
template <>
struct CppTypeOf<kFloat16> {
  using type = Half;
};
template <>
struct CppTypeOf<kBFloat16> {
  using type = BFloat16;
};
template <>
struct CppTypeOf<kInt64> {
  using type = int64_t;
};
template <>
struct CppTypeOf<kInt32> {
  using type = int32_t;
};
template <>
struct CppTypeOf<kUInt8> {
  using type = uint8_t;
};
template <>
struct CppTypeOf<kBool> {
  using type = bool;
};
template <Dtype D>
using cpp_type_t = typename CppTypeOf<D>::type;

template <typename T>
struct DtypeOf;
template <>
struct DtypeOf<float> {
  static constexpr Dtype value = kFloat32;
};
template <>
struct DtypeOf<double> {
  static constexpr Dtype value = kFloat64;
};
template <>
struct DtypeOf<Half> {
  static constexpr Dtype value = kFloat16;
};
template <>
struct DtypeOf<BFloat16> {
  static constexpr Dtype value = kBFloat16;
};
template <>
struct DtypeOf<int64_t> {
  static constexpr Dtype value = kInt64;
};
template <>
struct DtypeOf<int32_t> {
  static constexpr Dtype value = kInt32;
};
template <>
struct DtypeOf<uint8_t> {
  static constexpr Dtype value = kUInt8;
};
template <>
struct DtypeOf<bool> {
  static constexpr Dtype value = kBool;
};
template <typename T>
constexpr Dtype dtype_of = DtypeOf<T>::value;

// The type per-element math runs in: float for the 16-bit floats.
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

template <typename T>
constexpr bool is_float_type_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

namespace detail {
[[noreturn]] void throw_unsupported_dtype(const char* op, Dtype dtype);

template <Dtype First, Dtype... Rest, typename F>
decltype(auto) dispatch_impl(Dtype dtype, const char* op, F&& f) {
  if (dtype == First) return f.template operator()<cpp_type_t<First>>();
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_impl<Rest...>(dtype, op, std::forward<F>(f));
  } else {
    throw_unsupported_dtype(op, dtype);
  }
}
}  // namespace detail

// dispatch_types<kFloat32, kFloat64>(dtype, "op", [&]<typename T>() {...})
// calls the lambda with T the C++ type of dtype, or throws
// NotImplementedError naming the op and dtype when dtype is not listed.
template <Dtype... Ds, typename F>
decltype(auto) dispatch_types(Dtype dtype, const char* op, F&& f) {
  return detail::dispatch_impl<Ds...>(dtype, op, std::forward<F>(f));
}
template <typename F>
decltype(auto) dispatch_all(Dtype dtype, const char* op, F&& f) {
  return dispatch_types<kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool>(dtype, op,
                                                                                                std::forward<F>(f));
}
template <typename F>
decltype(auto) dispatch_numeric(Dtype dtype, const char* op, F&& f) {
  return dispatch_types<kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8>(dtype, op, std::forward<F>(f));
}
template <typename F>
decltype(auto) dispatch_floating(Dtype dtype, const char* op, F&& f) {
  return dispatch_types<kFloat32, kFloat64, kFloat16, kBFloat16>(dtype, op, std::forward<F>(f));
}
template <typename F>
decltype(auto) dispatch_index(Dtype dtype, const char* op, F&& f) {
  return dispatch_types<kInt64, kInt32>(dtype, op, std::forward<F>(f));
}

}  // namespace tandem

// CPU elementwise kernels: map each op kind to its functor and run it
// through cpu_kernel.
#include "kernels/cpu/elementwise.h"

#include <cstring>
#include <limits>

#include "kernels/cpu/loops.h"
#include "kernels/functors/elementwise.h"

namespace tandem::cpu {

namespace {

template <typename T, template <typename> class F, typename... Args>
void run_unary(const Tensor& out, const Tensor& in, Args... args) {
  using M = opmath_t<T>;
  cpu_kernel<T, T>(out, {&in}, F<M>{args...});
}

template <typename T>
std::pair<opmath_t<T>, opmath_t<T>> clamp_bounds(const UnaryParams& p) {
  using M = opmath_t<T>;
  M lo = std::numeric_limits<M>::has_infinity ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::lowest();
  M hi = std::numeric_limits<M>::has_infinity ? std::numeric_limits<M>::infinity() : std::numeric_limits<M>::max();
  if (p.a) lo = p.a->to<M>();
  if (p.b) hi = p.b->to<M>();
  return {lo, hi};
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& params) {
  // Ops defined on every numeric dtype.
  switch (op) {
    case UnaryOp::Neg:
      return dispatch_numeric(out.dtype(), "neg (cpu)", [&]<typename T>() { run_unary<T, fn::Neg>(out, in); });
    case UnaryOp::Abs:
      return dispatch_numeric(out.dtype(), "abs (cpu)", [&]<typename T>() { run_unary<T, fn::Abs>(out, in); });
    case UnaryOp::Relu:
      return dispatch_numeric(out.dtype(), "relu (cpu)", [&]<typename T>() { run_unary<T, fn::Relu>(out, in); });
    case UnaryOp::PowScalar:
      return dispatch_numeric(out.dtype(), "pow (cpu)",
                              [&]<typename T>() { run_unary<T, fn::PowScalar>(out, in, params.a->to<opmath_t<T>>()); });
    case UnaryOp::Clamp:
      return dispatch_numeric(out.dtype(), "clamp (cpu)", [&]<typename T>() {
        auto [lo, hi] = clamp_bounds<T>(params);
        run_unary<T, fn::Clamp>(out, in, lo, hi);
      });
    default: break;
  }
  // Ops defined on floating dtypes only (the front end promotes integers).
  dispatch_floating(out.dtype(), op_name(op), [&]<typename T>() {
    switch (op) {
      case UnaryOp::Exp: return run_unary<T, fn::Exp>(out, in);
      case UnaryOp::Log: return run_unary<T, fn::Log>(out, in);
      case UnaryOp::Log1p: return run_unary<T, fn::Log1p>(out, in);
      case UnaryOp::Sqrt: return run_unary<T, fn::Sqrt>(out, in);
      case UnaryOp::Rsqrt: return run_unary<T, fn::Rsqrt>(out, in);
      case UnaryOp::Sin: return run_unary<T, fn::Sin>(out, in);
      case UnaryOp::Cos: return run_unary<T, fn::Cos>(out, in);
      case UnaryOp::Tanh: return run_unary<T, fn::Tanh>(out, in);
      case UnaryOp::Sigmoid: return run_unary<T, fn::Sigmoid>(out, in);
      case UnaryOp::Gelu: return run_unary<T, fn::Gelu>(out, in);
      case UnaryOp::GeluTanh: return run_unary<T, fn::GeluTanh>(out, in);
      case UnaryOp::Silu: return run_unary<T, fn::Silu>(out, in);
      case UnaryOp::Neg:
      case UnaryOp::Abs:
      case UnaryOp::Relu:
      case UnaryOp::PowScalar:
      case UnaryOp::Clamp: break;  // handled above
    }
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  dispatch_all(a.dtype(), op_name(op), [&]<typename T>() {
    using M = opmath_t<T>;
    switch (op) {
      case BinaryOp::Add: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Add<M>{alpha.to<M>()});
      case BinaryOp::Sub: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Sub<M>{alpha.to<M>()});
      case BinaryOp::Mul: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Mul<M>{});
      case BinaryOp::Div: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Div<M>{});
      case BinaryOp::Pow: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Pow<M>{});
      case BinaryOp::Maximum: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Maximum<M>{});
      case BinaryOp::Minimum: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Minimum<M>{});
      case BinaryOp::Eq: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Eq<M>{});
      case BinaryOp::Ne: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Ne<M>{});
      case BinaryOp::Lt: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Lt<M>{});
      case BinaryOp::Le: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Le<M>{});
      case BinaryOp::Gt: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Gt<M>{});
      case BinaryOp::Ge: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Ge<M>{});
    }
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where (cpu)", [&]<typename T>() {
    cpu_kernel<T, bool, T, T>(out, {&cond, &a, &b}, fn::Where<opmath_t<T>>{});
  });
}

void masked_fill(const Tensor& out, const Tensor& in, const Tensor& mask, const Scalar& value) {
  dispatch_all(out.dtype(), "masked_fill (cpu)", [&]<typename T>() {
    cpu_kernel<T, T, bool>(out, {&in, &mask}, fn::MaskedFill<opmath_t<T>>{value.to<opmath_t<T>>()});
  });
}

void fill(const Tensor& out, const Scalar& value) {
  dispatch_all(out.dtype(), "fill (cpu)", [&]<typename T>() {
    T v = value.to<T>();
    cpu_kernel<T>(out, {}, [v]() { return v; });
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;  // an empty tensor may wrap a null pointer (from_blob)
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  dispatch_all(dst.dtype(), "copy (cpu)", [&]<typename To>() {
    dispatch_all(src.dtype(), "copy (cpu)",
                 [&]<typename From>() { cpu_kernel<To, From>(dst, {&src}, fn::Cast<To>{}); });
  });
}

}  // namespace tandem::cpu

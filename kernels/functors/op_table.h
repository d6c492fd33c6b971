// Which functor of kernels/functors/elementwise.h computes each UnaryOp and
// BinaryOp, written once for both backends. A visit_* call builds the functor
// of an op in the opmath type M and hands it to a generic callable, so each
// backend keeps its own dtype dispatch and its own loop:
//
//   dispatch_floating(dtype, name, [&]<typename T>() {
//     fn::visit_floating_unary<opmath_t<T>>(op, [&](auto f) { cpu_kernel<T, T>(out, {&in}, f); });
//   });
//
// The ops come in groups by the dtypes they are defined on (numeric unary,
// floating unary, arithmetic binary with the floating-only activation
// backwards inside it, comparisons), one entry point a group, so a dtype
// instantiates only the functors of its group.
#pragma once

#include <limits>
#include <type_traits>
#include <utility>

#include "kernels/functors/elementwise.h"
#include "kernels/op_kinds.h"
#include "tensor/core/errors.h"
#include "tensor/core/macros.h"
#include "tensor/core/scalar.h"

namespace tandem::fn {

// Whether op is defined on every numeric dtype; the others are floating only
// (the front end promotes integer inputs to float32 for them).
constexpr bool is_numeric_unary(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu || op == UnaryOp::PowScalar ||
         op == UnaryOp::Clamp;
}

// Clamp's bounds in M: a missing bound is -inf / +inf, or the type's limit
// where M has no infinity.
template <typename M>
std::pair<M, M> clamp_bounds(const UnaryParams& p) {
  M lo = std::numeric_limits<M>::has_infinity ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::lowest();
  M hi = std::numeric_limits<M>::has_infinity ? std::numeric_limits<M>::infinity() : std::numeric_limits<M>::max();
  if (p.a) lo = p.a->to<M>();
  if (p.b) hi = p.b->to<M>();
  return {lo, hi};
}

// f(functor) for an op with is_numeric_unary(op).
template <typename M, typename F>
void visit_numeric_unary(UnaryOp op, const UnaryParams& params, F&& f) {
  switch (op) {
    case UnaryOp::Neg: return f(Neg<M>{});
    case UnaryOp::Abs: return f(Abs<M>{});
    case UnaryOp::Relu: return f(Relu<M>{});
    case UnaryOp::PowScalar: return f(PowScalar<M>{params.a->to<M>()});
    case UnaryOp::Clamp: {
      auto [lo, hi] = clamp_bounds<M>(params);
      return f(Clamp<M>{lo, hi});
    }
    default: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "visit_numeric_unary: ", op_name(op), " is floating only");
}

// f(functor) for an op without is_numeric_unary(op); M is floating.
template <typename M, typename F>
void visit_floating_unary(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::Exp: return f(Exp<M>{});
    case UnaryOp::Log: return f(Log<M>{});
    case UnaryOp::Log1p: return f(Log1p<M>{});
    case UnaryOp::Sqrt: return f(Sqrt<M>{});
    case UnaryOp::Rsqrt: return f(Rsqrt<M>{});
    case UnaryOp::Sin: return f(Sin<M>{});
    case UnaryOp::Cos: return f(Cos<M>{});
    case UnaryOp::Tanh: return f(Tanh<M>{});
    case UnaryOp::Sigmoid: return f(Sigmoid<M>{});
    case UnaryOp::Gelu: return f(Gelu<M>{});
    case UnaryOp::GeluTanh: return f(GeluTanh<M>{});
    case UnaryOp::Silu: return f(Silu<M>{});
    case UnaryOp::Erf: return f(Erf<M>{});
    default: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "visit_floating_unary: ", op_name(op), " is numeric");
}

// f(functor) for an activation backward (is_activation_backward(op)); M is
// floating.
template <typename M, typename F>
void visit_activation_backward(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::ReluBackward: return f(ReluBackward<M>{});
    case BinaryOp::TanhBackward: return f(TanhBackward<M>{});
    case BinaryOp::SigmoidBackward: return f(SigmoidBackward<M>{});
    case BinaryOp::GeluBackward: return f(GeluBackward<M>{});
    case BinaryOp::GeluTanhBackward: return f(GeluTanhBackward<M>{});
    case BinaryOp::SiluBackward: return f(SiluBackward<M>{});
    default: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "visit_activation_backward: ", op_name(op), " is not an activation backward");
}

// The six activation backwards as one functor, the op a member (the same for
// every element, so the branch is uniform): one kernel per dtype instead of
// six. nvcc takes it, whose compile time matters more than a branch per
// element (elementwise.cu: about +2 s instead of +7 s over 37 s); host
// compilers take one functor per op, whose loops vectorize. Any op other than
// the first five is taken as SiluBackward.
template <typename M>
struct ActivationBackward {
  BinaryOp op;
  TANDEM_HD_INLINE M operator()(M g, M saved) const {
    switch (op) {
      case BinaryOp::ReluBackward: return ReluBackward<M>{}(g, saved);
      case BinaryOp::TanhBackward: return TanhBackward<M>{}(g, saved);
      case BinaryOp::SigmoidBackward: return SigmoidBackward<M>{}(g, saved);
      case BinaryOp::GeluBackward: return GeluBackward<M>{}(g, saved);
      case BinaryOp::GeluTanhBackward: return GeluTanhBackward<M>{}(g, saved);
      default: return SiluBackward<M>{}(g, saved);
    }
  }
};

// f(functor) for a binary op that is not a comparison: (M, M) -> M. The
// activation backwards are floating only: an integer or bool M instantiates
// none of their functors (the front end admits floating dtypes only).
template <typename M, typename F>
void visit_arithmetic(BinaryOp op, const Scalar& alpha, F&& f) {
  if constexpr (std::is_floating_point_v<M>) {
#if TANDEM_CUDA_SOURCE
    if (is_activation_backward(op)) return f(ActivationBackward<M>{op});
#else
    if (is_activation_backward(op)) return visit_activation_backward<M>(op, f);
#endif
  }
  switch (op) {
    case BinaryOp::Add: return f(Add<M>{alpha.to<M>()});
    case BinaryOp::Sub: return f(Sub<M>{alpha.to<M>()});
    case BinaryOp::Mul: return f(Mul<M>{});
    case BinaryOp::Div: return f(Div<M>{});
    case BinaryOp::Pow: return f(Pow<M>{});
    case BinaryOp::Maximum: return f(Maximum<M>{});
    case BinaryOp::Minimum: return f(Minimum<M>{});
    default: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "visit_arithmetic: ", op_name(op), " is a comparison, or floating only");
}

// f(functor) for a comparison (is_comparison(op)): (M, M) -> bool. Host and
// device, for Compare; any other op is taken as Ge.
template <typename M, typename F>
TANDEM_HD_INLINE decltype(auto) visit_comparison(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::Eq: return f(Eq<M>{});
    case BinaryOp::Ne: return f(Ne<M>{});
    case BinaryOp::Lt: return f(Lt<M>{});
    case BinaryOp::Le: return f(Le<M>{});
    case BinaryOp::Gt: return f(Gt<M>{});
    default: return f(Ge<M>{});
  }
}

// The six comparisons as one functor, the op a member (the same for every
// element): one kernel per dtype instead of six, for a backend whose compile
// time matters more than a branch per element (CUDA).
template <typename M>
struct Compare {
  BinaryOp op;
  TANDEM_HD_INLINE bool operator()(M a, M b) const {
    return visit_comparison<M>(op, [a, b](auto cmp) { return cmp(a, b); });
  }
};

}  // namespace tandem::fn

// Which functor of kernels/functors/elementwise.h computes each UnaryOp and
// BinaryOp, generated from the op table (tensor/core/op_table.h) for both
// backends. A visit_* call builds the functor of an op in the opmath type M
// and hands it to a generic callable, so each backend keeps its own dtype
// dispatch and its own loop:
//
//   dispatch_floating(dtype, name, [&]<typename T>() {
//     fn::visit_floating_unary<opmath_t<T>>(op, params, [&](auto f) { cpu_kernel<T, T>(out, {&in}, f); });
//   });
//
// The ops come in groups by the dtypes they are defined on (numeric unary,
// floating unary, arithmetic binary with the floating-only activation
// backwards inside it, comparisons), one entry point a group, so a dtype
// instantiates only the functors of its group. CUDA takes each group as one
// op set instead (below): one kernel per dtype and group.
#pragma once

#include <type_traits>
#include <utility>

#include "kernels/functors/elementwise.h"
#include "tensor/core/errors.h"
#include "tensor/core/macros.h"
#include "tensor/core/op_table.h"
#include "tensor/core/scalar.h"

namespace tandem::fn {

// The functor F of an op whose parameter struct is P, built from params.
template <typename F, typename P, typename Variant>
F make_functor(const Variant& params) {
  if constexpr (std::is_same_v<P, NoParams>) {
    return F{};
  } else {
    TANDEM_INTERNAL_ASSERT(std::holds_alternative<P>(params), "make_functor: the op's parameters are missing");
    return F::make(std::get<P>(params));
  }
}

#define TANDEM_VISIT_WHEN_Numeric(...) __VA_ARGS__
#define TANDEM_VISIT_WHEN_Floating(...)
#define TANDEM_VISIT_UNLESS_Numeric(...)
#define TANDEM_VISIT_UNLESS_Floating(...) __VA_ARGS__

// f(functor) for an op with is_numeric_unary(op).
template <typename M, typename F>
void visit_numeric_unary(UnaryOp op, const UnaryParams& params, F&& f) {
  switch (op) {
#define X(Name, name, dtypes, keeps, Params, ...) \
  TANDEM_VISIT_WHEN_##dtypes(case UnaryOp::Name : return f(make_functor<Name<M>, Params>(params));)
    TANDEM_UNARY_OPS(X)
#undef X
    default: break;  // the floating ones: visit_floating_unary
  }
  TANDEM_INTERNAL_ASSERT(false, "visit_numeric_unary: ", op_name(op), " is floating only");
}

// f(functor) for an op without is_numeric_unary(op); M is floating.
template <typename M, typename F>
void visit_floating_unary(UnaryOp op, const UnaryParams& params, F&& f) {
  switch (op) {
#define X(Name, name, dtypes, keeps, Params, ...) \
  TANDEM_VISIT_UNLESS_##dtypes(case UnaryOp::Name : return f(make_functor<Name<M>, Params>(params));)
    TANDEM_UNARY_OPS(X)
#undef X
    default: break;  // the numeric ones: visit_numeric_unary
  }
  TANDEM_INTERNAL_ASSERT(false, "visit_floating_unary: ", op_name(op), " is numeric");
}

// ---- Op sets, for CUDA: a group's ops as one functor type, the op a member
// beside each op's functor. loops.cuh's kernels call visit(g) once per
// thread, which hands g the op's functor: one kernel per dtype and group
// instead of one per op (nvcc's time, the host's and the device's, grows
// with the kernels), while each element still runs its op's own code, with
// no branch per element. Host compilers take one functor per op (visit_*
// above), whose loops vectorize. An op set is also callable, one element at
// a time (tests/test_elementwise.cpp checks each set against visit_*).
// kernels/cuda/elementwise.cu went from 382 kernels to 110 and from 51.6 s
// of CPU to 38.7 (nvcc --time: host compiler 15.0 -> 6.3 s, cicc 20.6 ->
// 12.4, ptxas, on bigger kernels, 14.3 -> 18.2, the rest 1.8 both times).
// A kernel's registers are its set's widest op's
// (ptxas -v, sm_90, vector kernels): float add and mul 48 -> 52, float exp
// and tanh 32 -> 40, relu unchanged at 32, the 16-bit binary ones unchanged
// (64 and 94); at 128 threads a block, 40 registers still let 75% of an
// SM's threads be resident.
template <typename Set, typename... A>
TANDEM_HD_INLINE auto call_op_set(const Set& set, A... a) {
  return set.visit([&](const auto& f) { return f(a...); });
}

// The unary ops of one dtype group (the op table's dtypes column): the
// numeric ones (is_numeric_unary), or the floating ones (M floating). Each
// op's functor is a member, but only the group's are built and run.
enum class UnaryGroup { Numeric, Floating };

template <typename M, UnaryGroup G>
struct UnaryOps {
  using op_set = void;
  UnaryOp op;
#define X(Name, ...) Name<M> Name##_{};
  TANDEM_UNARY_OPS(X)
#undef X

  static UnaryOps make(UnaryOp op, const UnaryParams& params) {
    UnaryOps s{op};
    switch (op) {
#define X(Name, name, dtypes, keeps, Params, ...)        \
  case UnaryOp::Name:                                    \
    if constexpr (UnaryGroup::dtypes == G) {             \
      s.Name##_ = make_functor<Name<M>, Params>(params); \
      return s;                                          \
    }                                                    \
    break;
      TANDEM_UNARY_OPS(X)
#undef X
    }
    TANDEM_INTERNAL_ASSERT(false, "UnaryOps: ", op_name(op),
                           G == UnaryGroup::Numeric ? " is floating only" : " is numeric");
  }
  template <typename G2>
  TANDEM_HD_INLINE decltype(auto) visit(G2&& g) const {
    switch (op) {
#define X(Name, name, dtypes, ...)                            \
  case UnaryOp::Name:                                         \
    if constexpr (UnaryGroup::dtypes == G) return g(Name##_); \
    break;
      TANDEM_UNARY_OPS(X)
#undef X
    }
    // Unreachable: make() admits the group's ops only.
    if constexpr (G == UnaryGroup::Numeric)
      return g(Neg_);
    else
      return g(Exp_);
  }
  TANDEM_HD_INLINE M operator()(M x) const { return call_op_set(*this, x); }
};

template <typename M>
using NumericUnaryOps = UnaryOps<M, UnaryGroup::Numeric>;
template <typename M>
using FloatingUnaryOps = UnaryOps<M, UnaryGroup::Floating>;  // M is floating

#undef TANDEM_VISIT_WHEN_Numeric
#undef TANDEM_VISIT_WHEN_Floating
#undef TANDEM_VISIT_UNLESS_Numeric
#undef TANDEM_VISIT_UNLESS_Floating

// f(functor) for an activation backward (is_activation_backward(op)); M is
// floating. params: the forward op's.
template <typename M, typename F>
void visit_activation_backward(BinaryOp op, const UnaryParams& params, F&& f) {
  switch (op) {
#define X(Name, name, saved, Params) \
  case BinaryOp::Name: return f(make_functor<Name<M>, Params>(params));
    TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X
    default: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "visit_activation_backward: ", op_name(op), " is not an activation backward");
}

// The activation backwards as an op set (is_activation_backward); M is
// floating. params: the forward op's.
template <typename M>
struct ActivationBackward {
  using op_set = void;
  BinaryOp op;
#define X(Name, ...) Name<M> Name##_{};
  TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X

  static ActivationBackward make(BinaryOp op, const UnaryParams& params) {
    ActivationBackward a{op};
    switch (op) {
#define X(Name, name, saved, Params) \
  case BinaryOp::Name: a.Name##_ = make_functor<Name<M>, Params>(params); break;
      TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X
      default: TANDEM_INTERNAL_ASSERT(false, "ActivationBackward: ", op_name(op), " is not an activation backward");
    }
    return a;
  }
  template <typename G>
  TANDEM_HD_INLINE decltype(auto) visit(G&& g) const {
    switch (op) {
#define X(Name, ...) \
  case BinaryOp::Name: return g(Name##_);
      TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X
      default: return g(ReluBackward_);  // unreachable: make() admits activation backwards only
    }
  }
  TANDEM_HD_INLINE M operator()(M g, M saved) const { return call_op_set(*this, g, saved); }
};

// The arithmetic binary ops (TANDEM_ARITHMETIC_OPS) as an op set.
template <typename M>
struct ArithmeticOps {
  using op_set = void;
  BinaryOp op;
#define X(Name, ...) Name<M> Name##_{};
  TANDEM_ARITHMETIC_OPS(X)
#undef X

  static ArithmeticOps make(BinaryOp op, const Scalar& alpha) {
    ArithmeticOps s{op};
    s.Add_ = Add<M>{alpha.to<M>()};
    s.Sub_ = Sub<M>{alpha.to<M>()};
    switch (op) {
#define X(Name, ...) \
  case BinaryOp::Name: return s;
      TANDEM_ARITHMETIC_OPS(X)
#undef X
      default: break;
    }
    TANDEM_INTERNAL_ASSERT(false, "ArithmeticOps: ", op_name(op), " is not arithmetic");
  }
  template <typename G>
  TANDEM_HD_INLINE decltype(auto) visit(G&& g) const {
    switch (op) {
#define X(Name, ...) \
  case BinaryOp::Name: return g(Name##_);
      TANDEM_ARITHMETIC_OPS(X)
#undef X
      default: return g(Add_);  // unreachable: make() admits these ops only
    }
  }
  TANDEM_HD_INLINE M operator()(M a, M b) const { return call_op_set(*this, a, b); }
};

// f(functor) for a binary op that is not a comparison: (M, M) -> M. The
// activation backwards are floating only: an integer or bool M instantiates
// none of their functors (the front end admits floating dtypes only).
template <typename M, typename F>
void visit_arithmetic(BinaryOp op, const Scalar& alpha, const UnaryParams& params, F&& f) {
  if constexpr (std::is_floating_point_v<M>) {
    if (is_activation_backward(op)) return visit_activation_backward<M>(op, params, f);
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
// device, for Compare; the front end passes comparisons only.
template <typename M, typename F>
TANDEM_HD_INLINE decltype(auto) visit_comparison(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::Eq: return f(Eq<M>{});
    case BinaryOp::Ne: return f(Ne<M>{});
    case BinaryOp::Lt: return f(Lt<M>{});
    case BinaryOp::Le: return f(Le<M>{});
    case BinaryOp::Gt: return f(Gt<M>{});
    default: return f(Ge<M>{});  // Ge; a device function cannot throw
  }
}

// The six comparisons as one functor, the op a member (the same for every
// element): one kernel per dtype instead of six, for a backend whose compile
// time matters more than a branch per element (CUDA). Each is one
// instruction, so it branches per element instead of being an op set.
template <typename M>
struct Compare {
  BinaryOp op;
  TANDEM_HD_INLINE bool operator()(M a, M b) const {
    return visit_comparison<M>(op, [a, b](auto cmp) { return cmp(a, b); });
  }
};

}  // namespace tandem::fn

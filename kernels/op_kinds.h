// The elementwise and reduction operations both backends implement, named once so that
// the front end dispatches with a value and each backend maps it to a
// functor in kernels/functors.
#pragma once

#include <cstdint>
#include <optional>

#include "tensor/core/scalar.h"

namespace tandem {

enum class UnaryOp : int8_t {
  Neg,
  Abs,
  Exp,
  Log,
  Log1p,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,
  GeluTanh,
  Silu,
  Erf,
  PowScalar,  // x ^ param0
  Clamp,      // min(max(x, param0), param1); +-inf mean "no bound"
};

enum class BinaryOp : int8_t {
  Add,
  Sub,  // a +- alpha * b
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,  // produce bool
  // The activations' derivatives in one pass, (grad, saved) -> grad_input,
  // floating dtypes only: what autograd's rules run when they do not record.
  ReluBackward,      // (g, y = relu(x)): y > 0 ? g : 0
  TanhBackward,      // (g, y = tanh(x)): g * (1 - y * y)
  SigmoidBackward,   // (g, y = sigmoid(x)): g * y * (1 - y)
  GeluBackward,      // (g, x): g * gelu'(x), the exact (erf) form
  GeluTanhBackward,  // (g, x): g * gelu'(x), approximate = "tanh"
  SiluBackward,      // (g, x): g * silu'(x)
};

struct UnaryParams {
  std::optional<Scalar> a, b;  // PowScalar: a = exponent; Clamp: a = min, b = max
};

enum class ReduceOp : int8_t { Sum, Mean, Prod, Amax, Amin, LogSumExp, Norm, Var, Std };

struct ReduceParams {
  double p = 2;            // Norm: the order (inf and -inf allowed)
  int64_t correction = 1;  // Var, Std: divide by N - correction
};

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);

constexpr bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le || op == BinaryOp::Gt ||
         op == BinaryOp::Ge;
}

constexpr bool is_activation_backward(BinaryOp op) {
  return op == BinaryOp::ReluBackward || op == BinaryOp::TanhBackward || op == BinaryOp::SigmoidBackward ||
         op == BinaryOp::GeluBackward || op == BinaryOp::GeluTanhBackward || op == BinaryOp::SiluBackward;
}

}  // namespace tandem

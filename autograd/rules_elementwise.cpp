// Derivative rules of the elementwise ops and conversions. grad: the gradient
// of the output; the engine sums a result back to a broadcast input's shape
// and converts it to the input's dtype, so rules stay in the output's shape.
// The op table's unary and binary rules switch without a default: an op of
// tensor/core/op_table.h without its derivative here fails to compile.
#include <cmath>
#include <variant>

#include "autograd/rules.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/node_params.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"

#pragma GCC diagnostic error "-Wswitch"

namespace tandem::autograd {

namespace {

constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi)
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;

// sign(x) as x's dtype: 1, -1 or 0.
Tensor sign_of(const Tensor& x) { return x.gt(0).to(x.dtype()) - x.lt(0).to(x.dtype()); }

// d gelu(x) / dx, both forms (PyTorch's gelu_backward).
Tensor gelu_derivative(const Tensor& x, const std::string& approximate) {
  if (approximate == "tanh") {
    Tensor x_sq = x * x;
    Tensor inner = (x + x * x_sq * 0.044715) * kSqrt2OverPi;
    Tensor t = tanh(inner);
    Tensor d_inner = (x_sq * (3 * 0.044715) + 1) * kSqrt2OverPi;
    return (t + 1) * 0.5 + x * 0.5 * (1 - t * t) * d_inner;
  }
  Tensor cdf = (erf(x * kInvSqrt2) + 1) * 0.5;
  Tensor pdf = exp(x * x * -0.5) * kInvSqrt2Pi;
  return cdf + x * pdf;
}

// Whether an activation's rule takes its fused one-pass kernel
// (detail::tanh_backward, ...): when nothing records, and grad has saved's
// dtype (a root gradient may not). Under create_graph the composite formula
// runs instead, its ops recorded for the next derivative.
bool fused(const Tensor& grad, const Tensor& saved) {
  return !GradMode::is_enabled() && grad.dtype() == saved.dtype() && grad.sizes() == saved.sizes();
}

}  // namespace

GradList unary_backward(UnaryOp op, Node& node, const Tensor& grad) {
  const UnaryParams& params = node.params<UnaryParams>();
  Tensor saved;  // what the op table's keeps column says: the input or the output
  if (unary_keeps(op) != Keep::Nothing) saved = node.saved_tensor(0);
  if (auto backward = fused_backward(op); backward && fused(grad, saved))
    return {detail::activation_backward(*backward, grad, saved, params)};
  // The composite formulas: what runs under create_graph (and for a root
  // gradient of another dtype), recorded for the next derivative.
  switch (op) {
    case UnaryOp::Neg: return {-grad};
    case UnaryOp::Abs: return {grad * sign_of(saved)};
    case UnaryOp::Exp: return {grad * saved};  // saved: output
    case UnaryOp::Log: return {grad / saved};
    case UnaryOp::Log1p: return {grad / (saved + 1)};
    case UnaryOp::Sqrt: return {grad / (saved * 2)};           // saved: output
    case UnaryOp::Rsqrt: return {grad * saved.pow(3) * -0.5};  // saved: output
    case UnaryOp::Sin: return {grad * cos(saved)};
    case UnaryOp::Cos: return {-grad * sin(saved)};
    case UnaryOp::Tanh: return {grad * (1 - saved * saved)};     // saved: output
    case UnaryOp::Sigmoid: return {grad * saved * (1 - saved)};  // saved: output
    case UnaryOp::Relu: return {where(saved.gt(0), grad, 0.0)};  // saved: output; 0 at 0, as PyTorch
    case UnaryOp::Gelu: return {grad * gelu_derivative(saved, "none")};
    case UnaryOp::GeluTanh: return {grad * gelu_derivative(saved, "tanh")};
    case UnaryOp::Silu: {
      Tensor s = sigmoid(saved);
      return {grad * s * (saved * (1 - s) + 1)};
    }
    case UnaryOp::Erf: return {grad * exp(-(saved * saved)) * kTwoOverSqrtPi};
    case UnaryOp::PowScalar: {
      const Scalar& p = std::get<PowScalarParams>(params).exponent;
      if (p.to_double() == 0) return {zeros_like(grad)};
      return {grad * saved.pow(Scalar(p.to_double() - 1)) * p};
    }
    case UnaryOp::Clamp: {
      // Gradient passes where min <= x <= max (at a bound too), as PyTorch.
      const ClampParams& c = std::get<ClampParams>(params);
      Tensor g = grad;
      if (c.min) g = where(saved.lt(*c.min), 0.0, g);
      if (c.max) g = where(saved.gt(*c.max), 0.0, g);
      return {g};
    }
    case UnaryOp::LeakyRelu: {  // slope at 0, as PyTorch
      double slope = std::get<LeakyReluParams>(params).negative_slope;
      return {where(saved.gt(0), grad, grad * slope)};
    }
    case UnaryOp::Elu: {
      // The exponential of min(x, 0): the branch where() drops must not
      // overflow, or its zero gradient times inf is NaN at the next order.
      const EluParams& e = std::get<EluParams>(params);
      Tensor negative = grad * exp(clamp_max(saved, 0) * e.input_scale) * (e.scale * e.alpha * e.input_scale);
      return {where(saved.le(0), negative, grad * e.scale)};
    }
    case UnaryOp::Softplus: {
      // sigmoid(beta x) is exp(beta x) / (exp(beta x) + 1) without overflow.
      const SoftplusParams& sp = std::get<SoftplusParams>(params);
      Tensor bx = saved * sp.beta;
      return {where(bx.gt(sp.threshold), grad, grad * sigmoid(bx))};
    }
  }
  TANDEM_INTERNAL_ASSERT(false, "unary_backward: op ", static_cast<int>(op), " is not in the op table");
  return {};
}

GradList binary_backward(BinaryOp op, Node& node, const Tensor& grad) {
  auto saved = [&](size_t i) { return node.saved_tensor(i); };
  auto need = [&](size_t i) { return node.needs_input_grad(i); };
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub: {
      double alpha = node.params<AddParams>().alpha.to_double();
      double sign = op == BinaryOp::Sub ? -1.0 : 1.0;
      Tensor grad_b;
      if (need(1)) grad_b = alpha * sign == 1.0 ? grad : grad * (alpha * sign);
      return {need(0) ? grad : Tensor(), grad_b};
    }
    case BinaryOp::Mul:  // saved: {a if b needs grad, b if a needs grad}
      return {need(0) ? grad * saved(1) : Tensor(), need(1) ? grad * saved(0) : Tensor()};
    case BinaryOp::Div: {  // saved: {a if b needs grad, b}
      Tensor b = saved(1);
      Tensor grad_a = need(0) ? grad / b : Tensor();
      Tensor grad_b = need(1) ? -grad * saved(0) / (b * b) : Tensor();
      return {grad_a, grad_b};
    }
    case BinaryOp::Pow: {  // saved: {a, b}; out = a^b
      Tensor a = saved(0), b = saved(1);
      Tensor grad_a, grad_b;
      // b * a^(b-1), taken as 0 where b == 0 (also at a == 0).
      if (need(0)) grad_a = where(b.eq(0), 0.0, grad * b * a.pow(b - 1));
      // a^b * log(a), taken as 0 where a == 0 and b >= 0.
      if (need(1)) {
        Tensor g = grad * a.pow(b) * log(a);
        grad_b = where(a.eq(0), where(b.ge(0), 0.0, g), g);
      }
      return {grad_a, grad_b};
    }
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {  // saved: {a, b}; a tie splits the gradient in half
      Tensor a = saved(0), b = saved(1);
      Tensor a_wins = op == BinaryOp::Maximum ? a.gt(b) : a.lt(b);
      Tensor b_wins = op == BinaryOp::Maximum ? a.lt(b) : a.gt(b);
      Tensor split = where(a.eq(b), grad * 0.5, grad);
      return {need(0) ? where(b_wins, 0.0, split) : Tensor(), need(1) ? where(a_wins, 0.0, split) : Tensor()};
    }
    // Comparisons and the activation backwards never record.
#define X(Name, ...) case BinaryOp::Name:
      TANDEM_COMPARISON_OPS(X) TANDEM_ACTIVATION_BACKWARD_OPS(X) break;
#undef X
  }
  TANDEM_INTERNAL_ASSERT(false, "binary_backward: ", op_name(op), " has no derivative");
  return {};
}

// saved: {cond}
GradList where_backward(Node& node, const Tensor& grad) {
  Tensor cond = node.saved_tensor(0);
  return {node.needs_input_grad(0) ? where(cond, grad, 0.0) : Tensor(),
          node.needs_input_grad(1) ? where(cond, 0.0, grad) : Tensor()};
}

// saved: {mask}
GradList masked_fill_backward(Node& node, const Tensor& grad) { return {grad.masked_fill(node.saved_tensor(0), 0)}; }

GradList fill_backward(Node&, const Tensor&) { return {Tensor()}; }  // the old values are gone

// inputs: {dst's old values (none), src}: back to src's device.
GradList copy_backward(Node& node, const Tensor& grad) {
  return {Tensor(), node.needs_input_grad(1) ? grad.to(node.inputs[1].device) : Tensor()};
}

GradList to_copy_backward(Node& node, const Tensor& grad) {
  return {grad.to(node.inputs[0].device, node.inputs[0].dtype)};
}

GradList clone_backward(Node&, const Tensor& grad) { return {grad}; }

}  // namespace tandem::autograd

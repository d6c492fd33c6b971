// Derivative rules of the elementwise ops and conversions. grad: the gradient
// of the output; the engine sums a result back to a broadcast input's shape
// and converts it to the input's dtype, so rules stay in the output's shape.
#include <cmath>

#include "autograd/rules.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"

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

GradList elementwise_backward(Node& node, const Tensor& grad) {
  auto saved = [&](size_t i) { return node.saved_tensor(i); };
  auto need = [&](size_t i) { return node.needs_input_grad(i); };
  switch (node.op) {
    case GradOp::Neg: return {-grad};
    case GradOp::Abs: return {grad * sign_of(saved(0))};
    case GradOp::Exp: return {grad * saved(0)};  // saved: output
    case GradOp::Log: return {grad / saved(0)};
    case GradOp::Log1p: return {grad / (saved(0) + 1)};
    case GradOp::Sqrt: return {grad / (saved(0) * 2)};           // saved: output
    case GradOp::Rsqrt: return {grad * saved(0).pow(3) * -0.5};  // saved: output
    case GradOp::Sin: return {grad * cos(saved(0))};
    case GradOp::Cos: return {-grad * sin(saved(0))};
    case GradOp::Tanh: {
      Tensor y = saved(0);  // output
      if (fused(grad, y)) return {detail::tanh_backward(grad, y)};
      return {grad * (1 - y * y)};
    }
    case GradOp::Sigmoid: {
      Tensor y = saved(0);  // output
      if (fused(grad, y)) return {detail::sigmoid_backward(grad, y)};
      return {grad * y * (1 - y)};
    }
    case GradOp::Relu: {
      Tensor y = saved(0);  // output; the gradient is 0 at 0, as PyTorch
      if (fused(grad, y)) return {detail::relu_backward(grad, y)};
      return {where(y.gt(0), grad, 0.0)};
    }
    case GradOp::Gelu: {
      Tensor x = saved(0);
      if (fused(grad, x)) return {detail::gelu_backward(grad, x, node.str)};
      return {grad * gelu_derivative(x, node.str)};
    }
    case GradOp::Silu: {
      Tensor x = saved(0);
      if (fused(grad, x)) return {detail::silu_backward(grad, x)};
      Tensor s = sigmoid(x);
      return {grad * s * (x * (1 - s) + 1)};
    }
    case GradOp::Erf: {
      Tensor x = saved(0);
      return {grad * exp(-(x * x)) * kTwoOverSqrtPi};
    }
    case GradOp::PowScalar: {
      const Scalar& p = node.scalars[0];
      if (p.to_double() == 0) return {zeros_like(grad)};
      Tensor x = saved(0);
      return {grad * x.pow(Scalar(p.to_double() - 1)) * p};
    }
    case GradOp::Clamp: {
      // Gradient passes where min <= x <= max (at a bound too), as PyTorch.
      Tensor x = saved(0);
      Tensor g = grad;
      if (node.ints[0]) g = where(x.lt(node.scalars[0]), 0.0, g);
      if (node.ints[1]) g = where(x.gt(node.scalars[1]), 0.0, g);
      return {g};
    }
    case GradOp::Add:
    case GradOp::Sub: {
      // scalars: {alpha}
      double alpha = node.scalars[0].to_double();
      double sign = node.op == GradOp::Sub ? -1.0 : 1.0;
      Tensor grad_b;
      if (need(1)) grad_b = alpha * sign == 1.0 ? grad : grad * (alpha * sign);
      return {need(0) ? grad : Tensor(), grad_b};
    }
    case GradOp::Mul:  // saved: {a if b needs grad, b if a needs grad}
      return {need(0) ? grad * saved(1) : Tensor(), need(1) ? grad * saved(0) : Tensor()};
    case GradOp::Div: {  // saved: {a if b needs grad, b}
      Tensor b = saved(1);
      Tensor grad_a = need(0) ? grad / b : Tensor();
      Tensor grad_b = need(1) ? -grad * saved(0) / (b * b) : Tensor();
      return {grad_a, grad_b};
    }
    case GradOp::Pow: {  // saved: {a, b}; out = a^b
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
    case GradOp::Maximum:
    case GradOp::Minimum: {  // saved: {a, b}; a tie splits the gradient in half
      Tensor a = saved(0), b = saved(1);
      Tensor a_wins = node.op == GradOp::Maximum ? a.gt(b) : a.lt(b);
      Tensor b_wins = node.op == GradOp::Maximum ? a.lt(b) : a.gt(b);
      Tensor split = where(a.eq(b), grad * 0.5, grad);
      return {need(0) ? where(b_wins, 0.0, split) : Tensor(), need(1) ? where(a_wins, 0.0, split) : Tensor()};
    }
    case GradOp::Where: {  // saved: {cond}
      Tensor cond = saved(0);
      return {need(0) ? where(cond, grad, 0.0) : Tensor(), need(1) ? where(cond, 0.0, grad) : Tensor()};
    }
    case GradOp::MaskedFill: return {grad.masked_fill(saved(0), 0)};  // saved: {mask}
    case GradOp::Fill: return {Tensor()};                             // the old values are gone
    case GradOp::Copy: {
      // inputs: {dst's old values (none), src}: back to src's device.
      return {Tensor(), need(1) ? grad.to(node.inputs[1].device) : Tensor()};
    }
    case GradOp::ToCopy: return {grad.to(node.inputs[0].device, node.inputs[0].dtype)};
    case GradOp::Clone: return {grad};
    default: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "node ", node.name(), " is not an elementwise rule");
  return {};
}

}  // namespace tandem::autograd

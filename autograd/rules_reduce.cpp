// Derivative rules of the reductions and softmax (PyTorch's derivatives.yaml).
// The front ends in tensor/ops/reduce.cpp record ints = {keepdim, reduced
// dims...} and the saved tensors listed there (record_reduction). grad has the
// output's shape; each rule first views it at the keepdim shape so that it
// broadcasts against the input.
// Softmax and log_softmax take the fused one-pass kernel
// (detail::softmax_backward_data) when the backward does not record; with
// create_graph their composite formula records its ops for double backward.
#include <cmath>

#include "autograd/rules.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/reduce.h"

namespace tandem::autograd {

namespace {

// ints = {keepdim, dims...}, as record_reduction writes them.
struct Reduced {
  bool keepdim;
  std::vector<int64_t> dims;  // wrapped, sorted
};

Reduced reduced_of(const Node& node) {
  TANDEM_INTERNAL_ASSERT(!node.ints.empty(), "node ", node.name(), " recorded no reduction dims");
  return {node.ints[0] != 0, std::vector<int64_t>(node.ints.begin() + 1, node.ints.end())};
}

// t (the output's shape) at the keepdim shape: the reduced dims put back with
// size 1, in ascending order (PyTorch's unsqueeze_multiple).
Tensor at_keepdim(const Tensor& t, const Reduced& r) {
  if (r.keepdim) return t;
  Tensor k = t;
  for (int64_t d : r.dims) k = k.unsqueeze(d);
  return k;
}

// How many input elements each output reduced.
int64_t reduced_count(const Node& node, const Reduced& r) {
  int64_t n = 1;
  for (int64_t d : r.dims) n *= node.inputs[0].sizes[d];
  return n;
}

// sign(x) as x's dtype: 1, -1 or 0.
Tensor sign_of(const Tensor& x) { return x.gt(0).to(x.dtype()) - x.lt(0).to(x.dtype()); }

// grad_k (keepdim shape) shared evenly among the elements where mask is true,
// over the reduced dims (PyTorch's evenly_distribute / scale_grad_by_count).
Tensor split_evenly(const Tensor& grad_k, const Tensor& mask, const Reduced& r) {
  Tensor count = mask.sum(r.dims, /*keepdim=*/true);
  return where(mask, grad_k / count, 0.0);
}

// Where x equals the reduced value out_k (keepdim shape); NaN matches NaN, as
// a NaN result comes from the NaN elements.
Tensor equals_result(const Tensor& x, const Tensor& out_k) { return where(out_k.ne(out_k), x.ne(x), x.eq(out_k)); }

// The gradient of a sum: grad_k repeated over the reduced dims.
Tensor expand_back(const Tensor& grad_k, const Node& node) { return grad_k.expand(node.inputs[0].sizes); }

// prod, exact with zeros: d/dx_i prod(x) is out / x_i without zeros, the
// product of the others at the only zero (out / x_i = 0 at the rest), and 0
// everywhere with two zeros or more. The zero branches are written so that
// their own gradients (double backward) are exact too.
Tensor prod_backward(const Tensor& grad_k, const Tensor& x, const Tensor& out_k, const Reduced& r) {
  bool one_dim = r.dims.size() == 1;
  auto sum_k = [&](const Tensor& t) { return one_dim ? t.sum(r.dims, /*keepdim=*/true) : t.sum(); };
  Tensor is_zero = x.eq(0);
  Tensor nonzero = where(is_zero, 1.0, x);
  Tensor zeros_in = sum_k(is_zero);
  Tensor others = one_dim ? nonzero.prod(r.dims[0], /*keepdim=*/true) : nonzero.prod();
  // Dividing by nonzero, not x, keeps the branch where() drops finite, so
  // that its gradient is not 0 * inf. Beside a single zero, out / x_i (0, not
  // a constant) carries d2 out / dx_i dx_zero = others / x_i.
  Tensor by_out = grad_k * out_k / nonzero;
  Tensor none_or_one = where(is_zero, grad_k * others, by_out);
  // Two zeros a, b: the gradient at a is grad * others * x_b, which is 0 but
  // has the derivative grad * others in x_b (the sum of the zeros but x_a).
  Tensor other_zero = sum_k(where(is_zero, x, 0.0)) - x;
  Tensor two = where(is_zero, grad_k * others * other_zero, 0.0);
  return where(zeros_in.ge(3), 0.0, where(zeros_in.eq(2), two, none_or_one));
}

// var over dims: grad * 2 (x - mean) / (N - correction).
Tensor var_backward(const Tensor& grad_k, const Tensor& x, const Reduced& r, double divisor) {
  return grad_k * (x - x.mean(r.dims, /*keepdim=*/true)) * (2.0 / divisor);
}

// The p-norm (PyTorch's norm_backward), norm_k at the keepdim shape.
Tensor norm_backward(const Tensor& grad_k, const Tensor& x, const Tensor& norm_k, const Reduced& r, double p) {
  if (p == 0) return zeros_like(x, TensorOptions(grad_k.dtype()));
  if (p == 1) return grad_k * sign_of(x);
  if (std::isinf(p)) return sign_of(x) * split_evenly(grad_k, x.abs().eq(norm_k), r);
  Tensor zero_norm = norm_k.eq(0);
  if (p == 2) return x * where(zero_norm, 0.0, grad_k / norm_k);
  if (p < 1) {
    Tensor scaled = sign_of(x) * where(x.eq(0), 0.0, x.abs().pow(p - 1));
    return scaled * grad_k * norm_k.pow(1 - p);
  }
  Tensor scaled = p < 2 ? sign_of(x) * x.abs().pow(p - 1) : x * x.abs().pow(p - 2);
  return scaled * where(zero_norm, 0.0, grad_k / norm_k.pow(p - 1));
}

// max(dim) / min(dim): the gradient goes to the returned index only. indices_k
// (keepdim shape) against a range along dim is a one-hot mask of x's shape.
Tensor value_selecting_backward(const Tensor& grad_k, const Tensor& indices_k, const Node& node, int64_t dim) {
  const InputMeta& in = node.inputs[0];
  Shape range_shape(in.sizes.size(), 1);
  range_shape[dim] = in.sizes[dim];
  Tensor range = arange(in.sizes[dim], TensorOptions(kInt64).device(in.device)).view(range_shape);
  return where(range.eq(indices_k), grad_k, 0.0);
}

}  // namespace

GradList reduce_backward(Node& node, const Tensor& grad) {
  auto saved = [&](size_t i) { return node.saved_tensor(i); };
  switch (node.op) {
    case GradOp::Sum: {
      Reduced r = reduced_of(node);
      return {expand_back(at_keepdim(grad, r), node)};
    }
    case GradOp::Mean: {
      Reduced r = reduced_of(node);
      return {expand_back(at_keepdim(grad, r) / static_cast<double>(reduced_count(node, r)), node)};
    }
    case GradOp::Prod: {  // saved: {x, out}
      Reduced r = reduced_of(node);
      return {prod_backward(at_keepdim(grad, r), saved(0), at_keepdim(saved(1), r), r)};
    }
    case GradOp::MaxAll:
    case GradOp::MinAll:
    case GradOp::Amax:
    case GradOp::Amin: {  // saved: {x, out}; ties share the gradient
      Reduced r = reduced_of(node);
      Tensor x = saved(0);
      return {split_evenly(at_keepdim(grad, r), equals_result(x, at_keepdim(saved(1), r)), r)};
    }
    case GradOp::MaxDim:
    case GradOp::MinDim: {  // saved: {indices}
      Reduced r = reduced_of(node);
      if (r.dims.empty()) return {grad};  // a 0-dim input: the value is the element
      return {value_selecting_backward(at_keepdim(grad, r), at_keepdim(saved(0), r), node, r.dims[0])};
    }
    case GradOp::Var: {  // saved: {x}; scalars: {correction}
      Reduced r = reduced_of(node);
      double divisor = static_cast<double>(reduced_count(node, r)) - node.scalars[0].to_double();
      return {var_backward(at_keepdim(grad, r), saved(0), r, divisor)};
    }
    case GradOp::Std: {  // saved: {x, out}; scalars: {correction}
      // std = sqrt(var): through var, with 0 where std is 0 (as PyTorch).
      Reduced r = reduced_of(node);
      double divisor = static_cast<double>(reduced_count(node, r)) - node.scalars[0].to_double();
      Tensor std_k = at_keepdim(saved(1), r);
      Tensor grad_var = where(std_k.eq(0), 0.0, at_keepdim(grad, r) / (std_k * 2.0));
      return {var_backward(grad_var, saved(0), r, divisor)};
    }
    case GradOp::Norm: {  // saved: {x, out}; scalars: {p}
      Reduced r = reduced_of(node);
      return {norm_backward(at_keepdim(grad, r), saved(0), at_keepdim(saved(1), r), r, node.scalars[0].to_double())};
    }
    case GradOp::LogSumExp: {  // saved: {x, out}
      Reduced r = reduced_of(node);
      return {at_keepdim(grad, r) * exp(saved(0) - at_keepdim(saved(1), r))};
    }
    case GradOp::Softmax: {  // saved: {y}; ints: {dim}
      Tensor y = saved(0);
      int64_t dim = node.ints[0];
      if (!GradMode::is_enabled()) return {detail::softmax_backward_data(grad.to(y.dtype()), y, dim, false)};
      return {y * (grad - (grad * y).sum({dim}, /*keepdim=*/true))};
    }
    case GradOp::LogSoftmax: {  // saved: {out}; ints: {dim}
      Tensor out = saved(0);
      int64_t dim = node.ints[0];
      if (!GradMode::is_enabled()) return {detail::softmax_backward_data(grad.to(out.dtype()), out, dim, true)};
      return {grad - exp(out) * grad.sum({dim}, /*keepdim=*/true)};
    }
    default: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "node ", node.name(), " is not a reduction rule");
  return {};
}

}  // namespace tandem::autograd

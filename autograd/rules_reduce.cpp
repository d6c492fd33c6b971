// Derivative rules of the reductions and softmax (PyTorch's derivatives.yaml).
// The front ends in tensor/ops/reduce.cpp record a ReductionParams payload
// (the reduced dims, keepdim, correction or p) and the saved tensors listed
// there (record_reduction). grad has the output's shape; each rule first
// views it at the keepdim shape so that it broadcasts against the input.
// Softmax and log_softmax take the fused one-pass kernel
// (detail::softmax_backward_data) when the backward does not record; with
// create_graph their composite formula records its ops for double backward.
#include <cmath>

#include "autograd/rules.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/node_params.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/reduce.h"

#pragma GCC diagnostic error "-Wswitch"

namespace tandem::autograd {

namespace {

// t (the output's shape) at the keepdim shape: the reduced dims put back with
// size 1, in ascending order (PyTorch's unsqueeze_multiple).
Tensor at_keepdim(const Tensor& t, const ReductionParams& r) {
  if (r.keepdim) return t;
  Tensor k = t;
  for (int64_t d : r.dims) k = k.unsqueeze(d);
  return k;
}

// How many input elements each output reduced.
int64_t reduced_count(const Node& node, const ReductionParams& r) {
  int64_t n = 1;
  for (int64_t d : r.dims) n *= node.inputs[0].sizes[d];
  return n;
}

// sign(x) as x's dtype: 1, -1 or 0.
Tensor sign_of(const Tensor& x) { return x.gt(0).to(x.dtype()) - x.lt(0).to(x.dtype()); }

// grad_k (keepdim shape) shared evenly among the elements where mask is true,
// over the reduced dims (PyTorch's evenly_distribute / scale_grad_by_count).
Tensor split_evenly(const Tensor& grad_k, const Tensor& mask, const ReductionParams& r) {
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
Tensor prod_grad(const Tensor& grad_k, const Tensor& x, const Tensor& out_k, const ReductionParams& r) {
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
Tensor var_grad(const Tensor& grad_k, const Tensor& x, const ReductionParams& r, double divisor) {
  return grad_k * (x - x.mean(r.dims, /*keepdim=*/true)) * (2.0 / divisor);
}

// The p-norm (PyTorch's norm_backward), norm_k at the keepdim shape.
Tensor p_norm_grad(const Tensor& grad_k, const Tensor& x, const Tensor& norm_k, const ReductionParams& r, double p) {
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

GradList sum_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  return {expand_back(at_keepdim(grad, r), node)};
}

GradList mean_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  return {expand_back(at_keepdim(grad, r) / static_cast<double>(reduced_count(node, r)), node)};
}

// saved: {x, out}
GradList prod_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  return {prod_grad(at_keepdim(grad, r), node.saved_tensor(0), at_keepdim(node.saved_tensor(1), r), r)};
}

// MaxAll, MinAll, Amax, Amin. saved: {x, out}; ties share the gradient.
GradList max_min_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  Tensor x = node.saved_tensor(0);
  return {split_evenly(at_keepdim(grad, r), equals_result(x, at_keepdim(node.saved_tensor(1), r)), r)};
}

// MaxDim, MinDim. saved: {indices}
GradList max_min_dim_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  if (r.dims.empty()) return {grad};  // a 0-dim input: the value is the element
  return {value_selecting_backward(at_keepdim(grad, r), at_keepdim(node.saved_tensor(0), r), node, r.dims[0])};
}

// saved: {x}
GradList var_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  double divisor = static_cast<double>(reduced_count(node, r)) - static_cast<double>(r.reduce.correction);
  return {var_grad(at_keepdim(grad, r), node.saved_tensor(0), r, divisor)};
}

// saved: {x, out}. std = sqrt(var): through var, with 0 where std is 0 (as
// PyTorch).
GradList std_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  double divisor = static_cast<double>(reduced_count(node, r)) - static_cast<double>(r.reduce.correction);
  Tensor std_k = at_keepdim(node.saved_tensor(1), r);
  Tensor grad_var = where(std_k.eq(0), 0.0, at_keepdim(grad, r) / (std_k * 2.0));
  return {var_grad(grad_var, node.saved_tensor(0), r, divisor)};
}

// saved: {x, out}
GradList norm_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  return {p_norm_grad(at_keepdim(grad, r), node.saved_tensor(0), at_keepdim(node.saved_tensor(1), r), r, r.reduce.p)};
}

// saved: {x, out}
GradList logsumexp_backward(Node& node, const Tensor& grad) {
  const ReductionParams& r = node.params<ReductionParams>();
  return {at_keepdim(grad, r) * exp(node.saved_tensor(0) - at_keepdim(node.saved_tensor(1), r))};
}

// saved: {y}
GradList softmax_backward(Node& node, const Tensor& grad) {
  Tensor y = node.saved_tensor(0);
  int64_t dim = node.params<DimParams>().dim;
  if (!GradMode::is_enabled()) return {detail::softmax_backward_data(grad.to(y.dtype()), y, dim, false)};
  return {y * (grad - (grad * y).sum({dim}, /*keepdim=*/true))};
}

// saved: {out}
GradList log_softmax_backward(Node& node, const Tensor& grad) {
  Tensor out = node.saved_tensor(0);
  int64_t dim = node.params<DimParams>().dim;
  if (!GradMode::is_enabled()) return {detail::softmax_backward_data(grad.to(out.dtype()), out, dim, true)};
  return {grad - exp(out) * grad.sum({dim}, /*keepdim=*/true)};
}

}  // namespace tandem::autograd

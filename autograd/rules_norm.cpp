// Derivative rules of batch norm, layer norm and embedding (node layouts in
// tensor/ops/norm.cpp). Without create_graph each takes its fused backward
// op (detail::batch_norm_backward, ...); with it, the same gradients are
// composed from differentiable ops, the statistics recomputed from the
// input so that they carry its history, and double backward needs no rule
// of its own.
#include <array>
#include <optional>

#include "autograd/rules.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/node_params.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/reduce.h"

#pragma GCC diagnostic error "-Wswitch"

namespace tandem::autograd {

namespace {

std::array<bool, 3> mask_of(const Node& node) {
  return {node.needs_input_grad(0), node.needs_input_grad(1), node.needs_input_grad(2)};
}

// The gradient of a (C) or normalized_shape parameter, in the parameter's shape.
Tensor as_input(const Tensor& grad, const Node& node, size_t i) {
  return grad.defined() ? grad.reshape(node.inputs[i].sizes) : grad;
}

// (mean, invstd) of x over dims, kept, recorded: the training statistics
// as functions of x.
std::pair<Tensor, Tensor> statistics(const Tensor& x, IntArrayRef dims, double eps) {
  Tensor mean = x.mean(dims, /*keepdim=*/true);
  Tensor centred = x - mean;
  return {mean, ((centred * centred).mean(dims, /*keepdim=*/true) + eps).rsqrt()};
}

}  // namespace

// saved: {input, weight, mean, invstd}
GradList batch_norm_backward(Node& node, const Tensor& grad) {
  const Tensor x = node.saved_tensor(0), w = node.saved_tensor(1);
  const Tensor mean = node.saved_tensor(2), invstd = node.saved_tensor(3);
  const BatchNormParams& p = node.params<BatchNormParams>();
  const bool training = p.training;
  const std::array<bool, 3> mask = mask_of(node);
  const Tensor g = grad.to(x.dtype());
  if (!GradMode::is_enabled()) {
    auto [gi, gw, gb] = detail::batch_norm_backward(g, x, w, mean, invstd, training, mask);
    return {gi, as_input(gw, node, 1), as_input(gb, node, 2)};
  }
  // dims: every dim but the channels'; (1, C, 1, ...) broadcasts a channel value.
  std::vector<int64_t> dims;
  Shape channel_shape(x.dim(), 1);
  channel_shape[1] = x.size(1);
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  Tensor mu, is;
  if (training) {
    std::tie(mu, is) = statistics(x, dims, p.eps);
  } else {  // the running statistics: constants
    mu = mean.to(x.dtype()).reshape(channel_shape);
    is = invstd.to(x.dtype()).reshape(channel_shape);
  }
  const Tensor xhat = (x - mu) * is;
  Tensor gi, gw, gb;
  if (mask[0]) {
    const Tensor scale = w.defined() ? is * w.reshape(channel_shape) : is;
    gi = training ? (g - g.mean(dims, true) - xhat * (g * xhat).mean(dims, true)) * scale : g * scale;
  }
  if (mask[1]) gw = as_input((g * xhat).sum(dims), node, 1);
  if (mask[2]) gb = as_input(g.sum(dims), node, 2);
  return {gi, gw, gb};
}

// saved: {input, weight, mean, invstd}
GradList layer_norm_backward(Node& node, const Tensor& grad) {
  const Tensor x = node.saved_tensor(0), w = node.saved_tensor(1);
  const Tensor mean = node.saved_tensor(2), invstd = node.saved_tensor(3);
  const LayerNormParams& p = node.params<LayerNormParams>();
  const Shape& normalized_shape = p.normalized_shape;
  const std::array<bool, 3> mask = mask_of(node);
  const Tensor g = grad.to(x.dtype());
  if (!GradMode::is_enabled()) {
    auto [gi, gw, gb] = detail::layer_norm_backward(g, x, normalized_shape, w, mean, invstd, mask);
    return {gi, gw, gb};
  }
  // dims: the normalised (trailing) ones; lead: the others.
  const auto k = static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> dims, lead;
  for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - k ? lead : dims).push_back(d);
  const auto [mu, is] = statistics(x, dims, p.eps);
  const Tensor xhat = (x - mu) * is;
  // An empty dims list would mean "every dim" to sum.
  auto sum_lead = [&](const Tensor& t) { return lead.empty() ? t : t.sum(lead); };
  Tensor gi, gw, gb;
  if (mask[0]) {
    const Tensor gw_ = w.defined() ? g * w : g;
    gi = (gw_ - gw_.mean(dims, true) - xhat * (gw_ * xhat).mean(dims, true)) * is;
  }
  if (mask[1]) gw = sum_lead(g * xhat);
  if (mask[2]) gb = sum_lead(g);
  return {gi, gw, gb};
}

// saved: {indices}
GradList embedding_backward(Node& node, const Tensor& grad) {
  if (!node.needs_input_grad(0)) return {Tensor()};
  const Tensor indices = node.saved_tensor(0);
  const EmbeddingParams& p = node.params<EmbeddingParams>();
  const int64_t num = p.num_weights;
  const bool scale = p.scale_grad_by_freq;
  const std::optional<int64_t>& padding_idx = p.padding_idx;
  if (!GradMode::is_enabled()) return {detail::embedding_backward(grad, indices, num, padding_idx, scale)};
  // A scatter_add of the gradient rows into a zero table.
  const int64_t K = indices.numel(), D = grad.size(-1);
  const TensorOptions options = TensorOptions(grad.dtype()).device(grad.device());
  const Tensor idx = indices.reshape({K}).to(kInt64);
  Tensor rows = grad.reshape({K, D});
  if (padding_idx) rows = rows.masked_fill(idx.eq(*padding_idx).unsqueeze(1), 0);
  if (scale) {
    const Tensor counts = zeros({num}, options).scatter_add(0, idx, ones({K}, options));
    rows = rows / counts.index_select(0, idx).unsqueeze(1);
  }
  return {zeros({num, D}, options).scatter_add(0, idx.unsqueeze(1).expand({K, D}).contiguous(), rows)};
}

}  // namespace tandem::autograd

// Derivative rules of the joins (cat, stack), the indexing ops (gather,
// scatter_add, index_select) and the matrix products (mm, bmm, matmul). Each
// front end documents the node's saved tensors and payload where it records.
#include <algorithm>

#include "autograd/engine.h"
#include "autograd/rules.h"
#include "tensor/core/node_params.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/index.h"
#include "tensor/ops/linalg.h"
#include "tensor/ops/shape_ops.h"

#pragma GCC diagnostic error "-Wswitch"

namespace tandem::autograd {

namespace {

// gather and scatter treat a 0-dim tensor as a 1-dim one of size 1.
Shape nonempty_sizes(IntArrayRef sizes) { return sizes.empty() ? Shape{1} : sizes.vec(); }

// grad_src of scatter_add: grad.gather(dim, index) has index's shape, which
// may be smaller than src's in any dim; src's elements beyond index's extent
// were never read and get zeros (PyTorch's rule leaves such a gradient the
// wrong shape).
Tensor scatter_add_src_grad(const Tensor& grad, int64_t dim, const Tensor& index, IntArrayRef src_sizes) {
  TensorOptions options = TensorOptions(grad.dtype()).device(grad.device());
  if (index.numel() == 0) return zeros(src_sizes, options);
  Tensor g = grad.gather(dim, index);
  if (g.sizes() == src_sizes) return g;
  Shape have = nonempty_sizes(index.sizes()), want = nonempty_sizes(src_sizes);
  g = g.reshape(have);
  for (size_t d = 0; d < have.size(); ++d) {
    if (have[d] == want[d]) continue;
    Shape pad = g.sizes().vec();
    pad[d] = want[d] - have[d];
    g = cat({g, zeros(pad, options)}, static_cast<int64_t>(d));
  }
  return g.reshape(src_sizes);
}

// grad_t of index_select: grad's slices along dim summed into the rows of t
// that index picked. scatter_add takes an index of grad's shape: index
// (int32 or int64, 1-D or 0-dim) laid along dim and expanded over the rest.
Tensor index_select_grad(const Tensor& grad, int64_t dim, const Tensor& index, IntArrayRef t_sizes) {
  Tensor idx = index.to(kInt64);
  if (t_sizes.empty()) {
    idx = idx.reshape({});
  } else {
    Shape along(t_sizes.size(), 1);
    along[static_cast<size_t>(dim)] = index.numel();
    idx = idx.reshape(along).expand(grad.sizes());
  }
  return zeros(t_sizes, TensorOptions(grad.dtype()).device(grad.device())).scatter_add(dim, idx, grad);
}

}  // namespace

// Each input's gradient is its part of grad along the dim; an input cat
// skipped gets an empty [0].
GradList cat_backward(Node& node, const Tensor& grad) {
  const CatParams& p = node.params<CatParams>();
  int64_t offset = 0;
  GradList grads(node.next_edges.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::optional<int64_t>& size = p.sizes.at(i);
    if (!size) {
      if (node.needs_input_grad(i)) grads[i] = zeros({0}, TensorOptions(grad.dtype()).device(grad.device()));
      continue;
    }
    if (node.needs_input_grad(i)) grads[i] = grad.narrow(p.dim, offset, *size);
    offset += *size;
  }
  return grads;
}

GradList stack_backward(Node& node, const Tensor& grad) {
  const int64_t dim = node.params<DimParams>().dim;
  GradList grads(node.next_edges.size());
  for (size_t i = 0; i < grads.size(); ++i)
    if (node.needs_input_grad(i)) grads[i] = grad.select(dim, static_cast<int64_t>(i));
  return grads;
}

// saved: {index}
GradList gather_backward(Node& node, const Tensor& grad) {
  Tensor index = node.saved_tensor(0);
  TensorOptions options = TensorOptions(grad.dtype()).device(grad.device());
  return {zeros(node.inputs[0].sizes, options).scatter_add(node.params<DimParams>().dim, index, grad)};
}

// saved: {index if src needs grad}
GradList scatter_add_backward(Node& node, const Tensor& grad) {
  Tensor grad_src;
  if (node.needs_input_grad(1)) {
    grad_src = scatter_add_src_grad(grad, node.params<DimParams>().dim, node.saved_tensor(0), node.inputs[1].sizes);
  }
  return {node.needs_input_grad(0) ? grad : Tensor(), grad_src};
}

// saved: {index}
GradList index_select_backward(Node& node, const Tensor& grad) {
  return {index_select_grad(grad, node.params<DimParams>().dim, node.saved_tensor(0), node.inputs[0].sizes)};
}

// saved: {a if b needs grad, b if a needs grad}
GradList mm_backward(Node& node, const Tensor& grad) {
  Tensor grad_a = node.needs_input_grad(0) ? grad.mm(node.saved_tensor(1).t()) : Tensor();
  Tensor grad_b = node.needs_input_grad(1) ? node.saved_tensor(0).t().mm(grad) : Tensor();
  return {grad_a, grad_b};
}

// saved: {a if b needs grad, b if a needs grad}
GradList bmm_backward(Node& node, const Tensor& grad) {
  Tensor grad_a = node.needs_input_grad(0) ? grad.bmm(node.saved_tensor(1).transpose(1, 2)) : Tensor();
  Tensor grad_b = node.needs_input_grad(1) ? node.saved_tensor(0).transpose(1, 2).bmm(grad) : Tensor();
  return {grad_a, grad_b};
}

// saved: {a if b needs grad, b if a needs grad}. The gradients of
// out = matmul(a, b) over all of matmul's rank cases. A 1-D operand is a
// matrix with a unit dim (a: (1, K), b: (K, 1)) and grad gets that dim back;
// each gradient is the batched product summed over the batch dims its operand
// was broadcast along, then shaped as the operand.
GradList matmul_backward(Node& node, const Tensor& grad) {
  IntArrayRef a_sizes = node.inputs[0].sizes, b_sizes = node.inputs[1].sizes;
  Tensor g = grad;  // (batch..., M, N) once both unit dims are back
  if (b_sizes.size() == 1) g = g.unsqueeze(-1);
  if (a_sizes.size() == 1) g = g.unsqueeze(-2);
  Tensor grad_a, grad_b;
  if (node.needs_input_grad(0)) {
    Tensor b = node.saved_tensor(1);
    if (b.dim() == 1) b = b.unsqueeze(-1);
    Shape a_matrix = a_sizes.size() == 1 ? Shape{1, a_sizes[0]} : a_sizes.vec();
    grad_a = sum_to(g.matmul(b.transpose(-1, -2)), a_matrix).reshape(a_sizes);
  }
  if (node.needs_input_grad(1)) {
    Tensor a = node.saved_tensor(0);
    if (a.dim() == 1) a = a.unsqueeze(0);
    Shape b_matrix = b_sizes.size() == 1 ? Shape{b_sizes[0], 1} : b_sizes.vec();
    grad_b = sum_to(a.transpose(-1, -2).matmul(g), b_matrix).reshape(b_sizes);
  }
  return {grad_a, grad_b};
}

}  // namespace tandem::autograd

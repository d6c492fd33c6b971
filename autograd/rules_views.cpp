// Derivative rules of the view ops (tensor/ops/views.cpp) and of the two
// nodes the core makes for in-place ops on views (tensor/core/grad_record.cpp):
// AsStrided (a view whose base changed after the view was made) and
// CopySlices (an in-place op on a view, seen from its base).
//
// Writing a gradient into part of a zero tensor (Slice, Select, AsStrided,
// CopySlices) is an in-place copy_ into a view of a fresh tensor: under
// create_graph that copy is itself recorded (a CopySlices on the fresh
// tensor), so these rules are differentiable by the same machinery.
#include <algorithm>

#include "autograd/engine.h"
#include "autograd/rules.h"
#include "tensor/core/node_params.h"
#include "tensor/core/shape.h"
#include "tensor/ops/factory.h"

#pragma GCC diagnostic error "-Wswitch"

namespace tandem::autograd {

namespace {

// True when two elements of the geometry may share a storage element:
// dims of size > 1 sorted by stride must each step past all the smaller ones.
bool overlaps(const Strided& g) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < g.sizes.size(); ++d)
    if (g.sizes[d] > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return g.strides[a] < g.strides[b]; });
  int64_t reach = 0;  // the furthest offset the smaller dims reach
  for (size_t d : dims) {
    if (g.strides[d] <= reach) return true;
    reach += (g.sizes[d] - 1) * g.strides[d];
  }
  return false;
}

// "sizes [..], strides [..]" for messages.
std::string shape_and_strides(const Strided& g) {
  return detail::str_cat("sizes ", shape_str(g.sizes), ", strides ", shape_str(g.strides));
}

// A zero buffer shaped like the storage under a base tensor, and the base
// and the view as views of it (offsets relative to the base's first element).
struct Layout {
  Tensor base, view;
};

Layout zero_layout(const ViewGeometry& g, const Tensor& like) {
  Tensor buffer = zeros({g.extent}, TensorOptions(like.dtype()).device(like.device()));
  // Both views are taken before anything is written, so that under
  // create_graph a write through one leaves the other stale: it then gets its
  // history from the buffer (an AsStrided node), as any view would.
  Tensor base = detail::make_view(buffer, g.base.sizes, g.base.strides, 0);
  Tensor view = detail::make_view(buffer, g.view.sizes, g.view.strides, g.offset);
  return {base, view};
}

// Zeros of the input's shape, for a gradient that fills part of it.
Tensor zeros_of_input(const Node& node, const Tensor& grad) {
  return zeros(node.inputs[0].sizes, TensorOptions(grad.dtype()).device(grad.device()));
}

}  // namespace

// View, Squeeze, SqueezeDim, Unsqueeze: the same elements in the input's shape.
GradList view_backward(Node& node, const Tensor& grad) { return {grad.reshape(node.inputs[0].sizes)}; }

GradList permute_backward(Node& node, const Tensor& grad) {
  const std::vector<int64_t>& dims = node.params<PermuteParams>().dims;
  Shape inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = static_cast<int64_t>(i);
  return {grad.permute(inverse)};
}

// Transpose, T.
GradList transpose_backward(Node& node, const Tensor& grad) {
  const TransposeParams& p = node.params<TransposeParams>();
  return {grad.transpose(p.dim0, p.dim1)};
}

GradList expand_backward(Node& node, const Tensor& grad) { return {sum_to(grad, node.inputs[0].sizes)}; }

GradList slice_backward(Node& node, const Tensor& grad) {
  const SliceParams& p = node.params<SliceParams>();
  Tensor grad_input = zeros_of_input(node, grad);
  grad_input.slice(p.dim, p.start, p.end, p.step).copy_(grad);
  return {grad_input};
}

GradList select_backward(Node& node, const Tensor& grad) {
  const SelectParams& p = node.params<SelectParams>();
  Tensor grad_input = zeros_of_input(node, grad);
  grad_input.select(p.dim, p.index).copy_(grad);
  return {grad_input};
}

// AsStridedBackward0: the view's gradient scattered into zeros laid out as the
// base. Elements a view repeats (stride-0 dims, from expand) all land on one
// storage element: their gradients are summed first, so that the write is
// one to one.
GradList as_strided_backward(Node& node, const Tensor& grad) {
  ViewGeometry g = node.params<ViewGeometry>();
  Shape repeated;
  for (size_t d = 0; d < g.view.sizes.size(); ++d) {
    if (g.view.strides[d] == 0 && g.view.sizes[d] > 1) {
      repeated.push_back(static_cast<int64_t>(d));
      g.view.sizes[d] = 1;
    }
  }
  TANDEM_INTERNAL_ASSERT(!overlaps(g.view), node.name(), ": the view (", shape_and_strides(g.view),
                         ") overlaps itself beyond stride-0 dims, which no view op makes");
  Tensor grad_view = repeated.empty() ? grad : grad.sum(repeated, /*keepdim=*/true);
  Layout l = zero_layout(g, grad);
  l.view.copy_(grad_view);
  return {l.base};
}

// CopySlices: the base's gradient g, split at the view. Inside the view it
// belongs to the in-place op's output; outside, to the base's old history.
GradList copy_slices_backward(Node& node, const Tensor& grad) {
  const ViewGeometry& g = node.params<ViewGeometry>();
  TANDEM_CHECK(!overlaps(g.base), NotImplementedError, node.name(),
               ": the base of a view changed in place has elements that share memory (", shape_and_strides(g.base),
               "; e.g. it is the detach() of an expand()), so its gradient cannot be laid out; this is not "
               "implemented. Clone the base before writing into its view in place");
  Layout l = zero_layout(g, grad);
  l.base.copy_(grad);
  // A view with repeated elements (only fill_ writes one) reads the same
  // gradient for each copy of an element, as PyTorch's CopySlices does.
  Tensor grad_op = node.needs_input_grad(1) ? l.view.clone() : Tensor();
  if (!node.needs_input_grad(0)) return {Tensor(), grad_op};
  l.view.zero_();
  return {l.base, grad_op};
}

}  // namespace tandem::autograd

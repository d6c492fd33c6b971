// View ops: new sizes/strides/offset over the same storage, no data moved
// (reshape and contiguous copy only when a view is impossible). Each records
// one node (rules in autograd/rules_views.cpp) and remembers its base, so that
// an in-place op on the view updates the base's history.
//
// What each node keeps as its payload (tensor/core/node_params.h; the
// input's sizes are in node.inputs[0].sizes):
//   View, Squeeze, Unsqueeze, Expand: nothing
//   Permute:      PermuteParams, the dims wrapped
//   Transpose, T: TransposeParams, wrapped ({0, 0} for a 0-dim tensor)
//   Slice:        SliceParams, wrapped and clamped
//   Select:       SelectParams, wrapped
#include <algorithm>

#include "tensor/core/grad_record.h"
#include "tensor/core/node_params.h"
#include "tensor/core/shape.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/factory.h"

namespace tandem {

using autograd::GradOp;
using autograd::Recorder;

namespace {

// Resolves one -1 in shape against numel; checks the element count matches.
Shape infer_shape(IntArrayRef shape, int64_t numel, const char* op) {
  Shape out = shape.vec();
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TANDEM_CHECK(infer < 0, ShapeError, op, ": only one dimension can be inferred (shape ", shape_str(shape), ")");
      infer = static_cast<int>(i);
    } else {
      TANDEM_CHECK(out[i] >= 0, ShapeError, op, ": invalid shape dimension ", out[i], " in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    TANDEM_CHECK(known != 0 && numel % known == 0, ShapeError, op, ": shape '", shape_str(shape),
                 "' is invalid for input of size ", numel);
    out[infer] = numel / known;
  }
  TANDEM_CHECK(shape_numel(out) == numel, ShapeError, op, ": shape '", shape_str(shape),
               "' is invalid for input of size ", numel);
  return out;
}

// Strides for viewing (sizes, strides) as new_sizes without a copy, or
// nothing if the memory layout does not allow it (PyTorch's computeStride).
std::optional<Shape> view_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes) {
  Shape out(new_sizes.size());
  if (sizes.empty()) {
    std::fill(out.begin(), out.end(), 1);
    return out;
  }
  if (shape_numel(sizes) == 0) return contiguous_strides(new_sizes);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor Tensor::view(IntArrayRef shape) const {
  check_defined("view", {{"self", *this}});
  Shape sizes = infer_shape(shape, numel(), "view");
  auto st = view_strides(this->sizes(), this->strides(), sizes);
  TANDEM_CHECK(st.has_value(), ShapeError, "view size is not compatible with input tensor's size and stride (size ",
               shape_str(this->sizes()), ", stride ", shape_str(this->strides()),
               "): at least one dimension spans across two contiguous subspaces. Use .reshape(...) instead");
  Recorder rec(GradOp::View, {*this});
  Tensor out = detail::make_view(*this, std::move(sizes), std::move(*st), storage_offset());
  return rec.finish_view(out, *this);
}

Tensor Tensor::reshape(IntArrayRef shape) const {
  check_defined("reshape", {{"self", *this}});
  Shape sizes = infer_shape(shape, numel(), "reshape");
  if (auto st = view_strides(this->sizes(), this->strides(), sizes)) {
    Recorder rec(GradOp::View, {*this});
    Tensor out = detail::make_view(*this, std::move(sizes), std::move(*st), storage_offset());
    return rec.finish_view(out, *this);
  }
  return contiguous().view(sizes);  // records Clone, then View
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  check_defined("flatten", {{"self", *this}});
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  TANDEM_CHECK(s <= e, IndexError, "flatten: start_dim (", start_dim, ") cannot come after end_dim (", end_dim, ")");
  Shape sizes;
  for (int64_t d = 0; d < s; ++d) sizes.push_back(size(d));
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= size(d);
  sizes.push_back(merged);
  for (int64_t d = e + 1; d < dim(); ++d) sizes.push_back(size(d));
  return reshape(sizes);
}

Tensor Tensor::squeeze() const {
  check_defined("squeeze", {{"self", *this}});
  Recorder rec(GradOp::Squeeze, {*this});
  Shape sizes, strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (size(d) != 1) {
      sizes.push_back(size(d));
      strides.push_back(stride(d));
    }
  }
  Tensor out = detail::make_view(*this, std::move(sizes), std::move(strides), storage_offset());
  return rec.finish_view(out, *this);
}

Tensor Tensor::squeeze(int64_t d) const {
  check_defined("squeeze", {{"self", *this}});
  d = wrap_dim(d, dim(), "squeeze");
  Shape sizes = this->sizes().vec(), strides = this->strides().vec();
  if (dim() > 0 && size(d) == 1) {
    sizes.erase(sizes.begin() + d);
    strides.erase(strides.begin() + d);
  }
  Recorder rec(GradOp::SqueezeDim, {*this});
  Tensor out = detail::make_view(*this, std::move(sizes), std::move(strides), storage_offset());
  return rec.finish_view(out, *this);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_defined("unsqueeze", {{"self", *this}});
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sizes = this->sizes().vec(), strides = this->strides().vec();
  int64_t st = d < dim() ? sizes[d] * strides[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  Recorder rec(GradOp::Unsqueeze, {*this});
  Tensor out = detail::make_view(*this, std::move(sizes), std::move(strides), storage_offset());
  return rec.finish_view(out, *this);
}

Tensor Tensor::permute(IntArrayRef dims) const {
  check_defined("permute", {{"self", *this}});
  TANDEM_CHECK(static_cast<int64_t>(dims.size()) == dim(), ShapeError,
               "permute: number of dims don't match in permute (input has ", dim(), " dims, dims has ", dims.size(),
               ": ", shape_str(dims), ")");
  Shape sizes(dims.size()), strides(dims.size()), wrapped(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    TANDEM_CHECK(!seen[d], ValueError, "permute: repeated dim ", d, " in ", shape_str(dims));
    seen[d] = true;
    wrapped[i] = d;
    sizes[i] = size(d);
    strides[i] = stride(d);
  }
  Recorder rec(GradOp::Permute, {*this});
  if (rec) rec.node().payload = autograd::PermuteParams{std::move(wrapped)};
  Tensor out = detail::make_view(*this, std::move(sizes), std::move(strides), storage_offset());
  return rec.finish_view(out, *this);
}

namespace {
// transpose and t (op: their node, Transpose or T).
Tensor transpose_view(const Tensor& self, int64_t d0, int64_t d1, GradOp op) {
  d0 = wrap_dim(d0, self.dim(), "transpose");
  d1 = wrap_dim(d1, self.dim(), "transpose");
  Shape sizes = self.sizes().vec(), strides = self.strides().vec();
  if (self.dim() > 0) {
    std::swap(sizes[d0], sizes[d1]);
    std::swap(strides[d0], strides[d1]);
  }
  Recorder rec(op, {self});
  if (rec) rec.node().payload = autograd::TransposeParams{d0, d1};
  Tensor out = detail::make_view(self, std::move(sizes), std::move(strides), self.storage_offset());
  return rec.finish_view(out, self);
}
}  // namespace

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_defined("transpose", {{"self", *this}});
  return transpose_view(*this, d0, d1, GradOp::Transpose);
}

Tensor Tensor::t() const {
  check_defined("t", {{"self", *this}});
  TANDEM_CHECK(dim() <= 2, ShapeError, "t() expects a tensor with <= 2 dimensions, but self is ", dim(), "D");
  return transpose_view(*this, 0, dim() < 2 ? 0 : 1, GradOp::T);
}

Tensor Tensor::expand(IntArrayRef shape) const {
  check_defined("expand", {{"self", *this}});
  int64_t nd = static_cast<int64_t>(shape.size());
  TANDEM_CHECK(nd >= dim(), ShapeError, "expand: the number of sizes provided (", nd,
               ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  Shape sizes(nd), strides(nd);
  int64_t lead = nd - dim();
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t target = shape[i];
    if (i < lead) {
      TANDEM_CHECK(target >= 0, ShapeError, "expand: the expanded size of the tensor (", target,
                   ") isn't allowed in a leading, non-existing dimension ", i);
      sizes[i] = target;
      strides[i] = 0;
      continue;
    }
    int64_t cur = size(i - lead);
    if (target == -1) target = cur;
    TANDEM_CHECK(target >= 0, ShapeError, "expand: invalid size ", target, " at dimension ", i,
                 " (sizes must be non-negative, or -1 to keep the existing size).  Target sizes: ", shape_str(shape),
                 ".  Tensor sizes: ", shape_str(this->sizes()));
    TANDEM_CHECK(cur == target || cur == 1, ShapeError, "expand: the expanded size of the tensor (", target,
                 ") must match the existing size (", cur, ") at non-singleton dimension ", i,
                 ".  Target sizes: ", shape_str(shape), ".  Tensor sizes: ", shape_str(this->sizes()));
    sizes[i] = target;
    strides[i] = cur == target ? stride(i - lead) : 0;
  }
  Recorder rec(GradOp::Expand, {*this});
  Tensor out = detail::make_view(*this, std::move(sizes), std::move(strides), storage_offset());
  return rec.finish_view(out, *this);
}

Tensor Tensor::expand_as(const Tensor& other) const { return expand(other.sizes()); }

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  check_defined("slice", {{"self", *this}});
  TANDEM_CHECK(dim() > 0, IndexError, "slice() cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "slice");
  TANDEM_CHECK(step > 0, ValueError, "slice: step must be positive, got ", step);
  int64_t n = size(d);
  int64_t s = start.value_or(0), e = end.value_or(n);
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = std::clamp<int64_t>(s, 0, n);
  e = std::clamp<int64_t>(e, s, n);
  Shape sizes = this->sizes().vec(), strides = this->strides().vec();
  sizes[d] = (e - s + step - 1) / step;
  int64_t offset = storage_offset() + s * strides[d];
  strides[d] *= step;
  Recorder rec(GradOp::Slice, {*this});
  if (rec) rec.node().payload = autograd::SliceParams{d, s, e, step};
  Tensor out = detail::make_view(*this, std::move(sizes), std::move(strides), offset);
  return rec.finish_view(out, *this);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_defined("narrow", {{"self", *this}});
  TANDEM_CHECK(dim() > 0, IndexError, "narrow() cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "narrow");
  int64_t n = size(d);
  TANDEM_CHECK(start >= -n && start <= n, IndexError, "narrow: start (", start, ") is out of bounds for dimension ", d,
               " of size ", n);
  if (start < 0) start += n;
  TANDEM_CHECK(length >= 0, IndexError, "narrow: length must be non-negative, got ", length);
  TANDEM_CHECK(start + length <= n, IndexError, "narrow: start (", start, ") + length (", length,
               ") exceeds dimension size (", n, ")");
  return slice(d, start, start + length, 1);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_defined("select", {{"self", *this}});
  TANDEM_CHECK(dim() > 0, IndexError, "select() cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "select");
  int64_t n = size(d);
  TANDEM_CHECK(index >= -n && index < n, IndexError, "select(): index ", index, " out of range for tensor of size ",
               shape_str(sizes()), " at dimension ", d);
  if (index < 0) index += n;
  Shape sizes = this->sizes().vec(), strides = this->strides().vec();
  int64_t offset = storage_offset() + index * strides[d];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  Recorder rec(GradOp::Select, {*this});
  if (rec) rec.node().payload = autograd::SelectParams{d, index};
  Tensor out = detail::make_view(*this, std::move(sizes), std::move(strides), offset);
  return rec.finish_view(out, *this);
}

}  // namespace tandem

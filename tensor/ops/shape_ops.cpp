// Front end of cat, stack, split and chunk. cat copies each input into a
// narrow() view of the output with copy_, which converts dtypes and strides on
// any device; on a GPU, inputs of the output's dtype are copied in one launch
// instead. cat and stack record one node each (the copies inside run with
// grad mode off); split and chunk only make views.
#include "tensor/ops/shape_ops.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/shape_ops.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/node_params.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"

namespace tandem {

namespace {

void check_list_defined(const char* op, const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string name = detail::str_cat("tensors[", i, "]");
    check_defined(op, {{name.c_str(), tensors[i]}});
  }
}

// PyTorch's legacy rule: a 1-D tensor with no elements joins any cat.
bool cat_skips(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

// The dim cat joins along, wrapped against the first input it does not skip
// (0 when it skips them all).
int64_t cat_dim(const std::vector<Tensor>& tensors, int64_t dim, const char* op) {
  for (const Tensor& t : tensors)
    if (!cat_skips(t)) return wrap_dim(dim, t.dim(), op);
  return 0;
}

// cat without the door checks that stack has already run (op names the
// public op in messages and origins).
Tensor cat_impl(const std::vector<Tensor>& tensors, int64_t dim, const char* op) {
  Dtype dt = tensors[0].dtype();
  for (const Tensor& t : tensors) dt = promote_types(dt, t.dtype());
  const Tensor* ref = nullptr;
  for (const Tensor& t : tensors) {
    if (!cat_skips(t)) {
      ref = &t;
      break;
    }
  }
  Device device = tensors[0].device();
  if (ref == nullptr) return detail::make_result({0}, dt, device, Origin::computed(op, tensors[0].origin()));

  dim = wrap_dim(dim, ref->dim(), op);
  Shape shape = ref->sizes().vec();
  shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (cat_skips(t)) continue;
    TANDEM_CHECK(t.dim() == ref->dim(), ShapeError, op, "(): Tensors must have same number of dimensions: got ",
                 ref->dim(), " and ", t.dim(), " (shapes ", shape_str(ref->sizes()), " and ", shape_str(t.sizes()),
                 " for tensor number ", i, " in the list)");
    for (int64_t d = 0; d < t.dim(); ++d) {
      TANDEM_CHECK(d == dim || t.size(d) == ref->size(d), ShapeError, op,
                   "(): Sizes of tensors must match except in dimension ", dim, ". Expected size ", ref->size(d),
                   " but got size ", t.size(d), " for tensor number ", i, " in the list.");
    }
    shape[dim] += t.size(dim);
  }

  Tensor out = detail::make_result(shape, dt, device, Origin::computed(op, ref->origin()));
  switch (backend_of(device)) {
    case Backend::CPU: break;
    case Backend::CUDA: {
      // One launch for all inputs (a launch per input costs more than a small
      // copy); mixed dtypes take the converting copy_ below.
      bool same_dtype = std::all_of(tensors.begin(), tensors.end(), [&](const Tensor& t) { return t.dtype() == dt; });
      if (same_dtype) {
        cuda::cat(out, tensors, dim);
        return out;
      }
      break;
    }
  }
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (cat_skips(t) || t.size(dim) == 0) continue;
    out.narrow(dim, offset, t.size(dim)).copy_(t);
    offset += t.size(dim);
  }
  return out;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (auto in = autocast::detail::inputs("cat", tensors))
    return autocast::detail::excluded([&] { return cat(*in, dim); });
  TANDEM_CHECK(!tensors.empty(), ValueError, "cat(): expected a non-empty list of Tensors");
  check_list_defined("cat", tensors);
  check_same_device("cat", "tensors", tensors);
  for (size_t i = 0; i < tensors.size(); ++i) {
    TANDEM_CHECK(tensors[i].dim() > 0, ShapeError, "cat(): zero-dimensional tensor (at position ", i,
                 ") cannot be concatenated; unsqueeze it to shape [1] first, or use stack()");
  }
  autograd::Recorder rec(autograd::GradOp::Cat, tensors);
  Tensor out = cat_impl(tensors, dim, "cat");
  if (rec) {
    // The dim, and each input's size along it (none for an input cat skipped).
    autograd::CatParams p{cat_dim(tensors, dim, "cat"), {}};
    for (const Tensor& t : tensors)
      p.sizes.push_back(cat_skips(t) ? std::nullopt : std::optional<int64_t>(t.size(p.dim)));
    rec.node().payload = std::move(p);
  }
  return rec.finish(out);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (auto in = autocast::detail::inputs("stack", tensors))
    return autocast::detail::excluded([&] { return stack(*in, dim); });
  TANDEM_CHECK(!tensors.empty(), ValueError, "stack(): expected a non-empty list of Tensors");
  check_list_defined("stack", tensors);
  check_same_device("stack", "tensors", tensors);
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  for (size_t i = 1; i < tensors.size(); ++i) {
    TANDEM_CHECK(tensors[i].sizes() == tensors[0].sizes(), ShapeError,
                 "stack expects each tensor to be equal size, but got ", shape_str(tensors[0].sizes()),
                 " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
  }
  // Recording first turns grad mode off, so the unsqueezed parts are plain views.
  autograd::Recorder rec(autograd::GradOp::Stack, tensors);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(dim));
  Tensor out = cat_impl(parts, dim, "stack");
  if (rec) rec.node().payload = autograd::DimParams{dim};  // wrapped; input i gets grad.select(dim, i)
  return rec.finish(out);
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  check_defined("split", {{"self", t}});
  TANDEM_CHECK(t.dim() > 0, ShapeError, "split expects at least a 1-dimensional tensor, but got a 0-dim tensor");
  TANDEM_CHECK(split_size >= 0, ValueError,
               "split expects split_size be non-negative, but got split_size=", split_size);
  dim = wrap_dim(dim, t.dim(), "split");
  int64_t n = t.size(dim);
  TANDEM_CHECK(split_size > 0 || n == 0, ValueError,
               "split_size can only be 0 if dimension size is 0, but got dimension size of ", n);
  // At least one piece, even when split_size exceeds the size or both are 0.
  int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(pieces));
  for (int64_t i = 0; i < pieces; ++i) {
    int64_t start = i * split_size;
    out.push_back(t.narrow(dim, start, i + 1 < pieces ? split_size : n - start));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& t, IntArrayRef split_sizes, int64_t dim) {
  check_defined("split_with_sizes", {{"self", t}});
  TANDEM_CHECK(t.dim() > 0, ShapeError,
               "split_with_sizes expects at least a 1-dimensional tensor, but got a 0-dim tensor");
  dim = wrap_dim(dim, t.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    TANDEM_CHECK(s >= 0, ValueError,
                 "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=",
                 shape_str(split_sizes));
    total += s;
  }
  TANDEM_CHECK(total == t.size(dim), ValueError, "split_with_sizes expects split_sizes to sum exactly to ", t.size(dim),
               " (input tensor's size at dimension ", dim, "), but got split_sizes=", shape_str(split_sizes),
               " which sum to ", total);
  std::vector<Tensor> out;
  out.reserve(split_sizes.size());
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(t.narrow(dim, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& t, IntArrayRef split_sizes, int64_t dim) {
  return split_with_sizes(t, split_sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
  check_defined("chunk", {{"self", t}});
  TANDEM_CHECK(t.dim() > 0, ShapeError, "chunk expects at least a 1-dimensional tensor, but got a 0-dim tensor");
  TANDEM_CHECK(chunks > 0, ValueError, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  dim = wrap_dim(dim, t.dim(), "chunk");
  int64_t n = t.size(dim);
  // An empty dim still gives `chunks` empty pieces, as PyTorch.
  if (n == 0) return split_with_sizes(t, Shape(static_cast<size_t>(chunks), 0), dim);
  return split(t, (n + chunks - 1) / chunks, dim);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return tandem::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(IntArrayRef split_sizes, int64_t dim) const {
  return tandem::split_with_sizes(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return tandem::chunk(*this, chunks, dim); }

}  // namespace tandem

// The non-random factories.
#include "tensor/ops/factory.h"

#include <cmath>

#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/runtime.h"

namespace tandem {

namespace detail {

Tensor make_result(IntArrayRef sizes, Dtype dtype, Device device, const Origin& origin, bool pinned) {
  for (int64_t s : sizes)
    TANDEM_CHECK(s >= 0, ShapeError, "Trying to create tensor with negative dimension ", s, ": ", shape_str(sizes));
  auto impl = std::make_shared<TensorImpl>();
  int64_t n = shape_numel(sizes);
  impl->storage = allocate_storage(device, static_cast<size_t>(n) * element_size(dtype), pinned);
  impl->sizes = sizes.vec();
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->origin = origin;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = t.dtype();
  impl->origin = t.origin();
  Tensor view(std::move(impl));
  autograd::note_view(view, t);
  return view;
}

}  // namespace detail

Tensor detail::create(const char* op, IntArrayRef sizes, const TensorOptions& options, const SourceLoc& loc) {
  Device device = resolve_device(options.device(), op);
  TANDEM_CHECK(!options.pinned_memory() || device.is_cpu(), DeviceError, op,
               ": only cpu tensors can be pinned, but device is ", device.str());
  TANDEM_CHECK(!options.requires_grad() || is_floating_point(options.dtype()), DtypeError, op,
               ": only tensors of floating point dtype can require gradients (got ", dtype_name(options.dtype()),
               "); leave requires_grad unset, or ask for a floating dtype");
  return detail::make_result(sizes, options.dtype(), device, Origin::created(op, loc), options.pinned_memory());
}

Tensor detail::finish_factory(Tensor t, const TensorOptions& options) {
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

namespace {
TensorOptions like(const Tensor& t, const TensorOptions& options) {
  TensorOptions o = options;
  if (!o.has_dtype()) o = o.dtype(t.dtype());
  if (!o.has_device()) o = o.device(t.device());
  return o;
}
}  // namespace

Tensor empty(IntArrayRef sizes, const TensorOptions& options, SourceLoc loc) {
  return detail::finish_factory(detail::create("tandem::empty", sizes, options, loc), options);
}

Tensor zeros(IntArrayRef sizes, const TensorOptions& options, SourceLoc loc) {
  Tensor t = detail::create("tandem::zeros", sizes, options, loc);
  t.zero_();
  return detail::finish_factory(t, options);
}

Tensor ones(IntArrayRef sizes, const TensorOptions& options, SourceLoc loc) {
  Tensor t = detail::create("tandem::ones", sizes, options, loc);
  t.fill_(1);
  return detail::finish_factory(t, options);
}

Tensor full(IntArrayRef sizes, const Scalar& value, const TensorOptions& options, SourceLoc loc) {
  TensorOptions o = options.has_dtype() ? options : options.dtype(value.default_dtype());
  Tensor t = detail::create("tandem::full", sizes, o, loc);
  t.fill_(value);
  return detail::finish_factory(t, o);
}

Tensor empty_like(const Tensor& t, const TensorOptions& options, SourceLoc loc) {
  check_defined("empty_like", {{"input", t}});
  return detail::finish_factory(detail::create("tandem::empty_like", t.sizes(), like(t, options), loc), options);
}
Tensor zeros_like(const Tensor& t, const TensorOptions& options, SourceLoc loc) {
  check_defined("zeros_like", {{"input", t}});
  Tensor r = detail::create("tandem::zeros_like", t.sizes(), like(t, options), loc);
  r.zero_();
  return detail::finish_factory(r, options);
}
Tensor ones_like(const Tensor& t, const TensorOptions& options, SourceLoc loc) {
  check_defined("ones_like", {{"input", t}});
  Tensor r = detail::create("tandem::ones_like", t.sizes(), like(t, options), loc);
  r.fill_(1);
  return detail::finish_factory(r, options);
}
Tensor full_like(const Tensor& t, const Scalar& value, const TensorOptions& options, SourceLoc loc) {
  check_defined("full_like", {{"input", t}});
  Tensor r = detail::create("tandem::full_like", t.sizes(), like(t, options), loc);
  r.fill_(value);
  return detail::finish_factory(r, options);
}

}  // namespace tandem

namespace tandem {

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, const TensorOptions& options, SourceLoc loc) {
  TANDEM_CHECK(data != nullptr || shape_numel(sizes) == 0, ValueError, "from_blob: data is a null pointer");
  TANDEM_CHECK(sizes.size() == strides.size(), ShapeError, "from_blob: sizes ", shape_str(sizes), " and strides ",
               shape_str(strides), " must have the same length");
  Device device = resolve_device(options.device(), "from_blob");
  int64_t extent = 1;  // elements reachable through the strides
  for (size_t i = 0; i < sizes.size(); ++i) {
    TANDEM_CHECK(sizes[i] >= 0 && strides[i] >= 0, ShapeError, "from_blob: negative size or stride in sizes ",
                 shape_str(sizes), ", strides ", shape_str(strides));
    if (sizes[i] == 0)
      extent = 0;
    else if (extent > 0)
      extent += (sizes[i] - 1) * strides[i];
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      std::make_shared<Storage>(data, static_cast<size_t>(extent) * element_size(options.dtype()), device, nullptr);
  impl->sizes = sizes.vec();
  impl->strides = strides.vec();
  impl->dtype = options.dtype();
  impl->origin = Origin::created("tandem::from_blob", loc);
  return detail::finish_factory(Tensor(std::move(impl)), options);
}

Tensor from_blob(void* data, IntArrayRef sizes, const TensorOptions& options, SourceLoc loc) {
  Shape strides = contiguous_strides(sizes);
  return from_blob(data, sizes, strides, options, loc);
}

}  // namespace tandem

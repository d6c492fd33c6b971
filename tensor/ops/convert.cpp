// Conversions between devices and dtypes: to(), copy_(), contiguous(),
// clone(), item(). copy_ and to() are the only ways data crosses devices.
#include "kernels/elementwise.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"

namespace tandem {

void not_implemented_on(const char* op, Device device, Dtype dtype) {
  throw NotImplementedError(detail::str_cat(op, " is not implemented on ", device.str(), " for dtype ",
                                            dtype_name(dtype), " in this build of Tandem"));
}

namespace {
// Same-device elementwise copy with dtype conversion and broadcasting.
void copy_same_device(const Tensor& dst, const Tensor& src) {
  return dispatch(dst.device(), cpu::copy, cuda::copy, dst, src);
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.shares_storage(b) && a.storage_offset() == b.storage_offset() && a.dtype() == b.dtype() &&
         a.sizes() == b.sizes() && a.strides() == b.strides();
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  check_defined("copy_", {{"self", *this}, {"src", src}});
  detail::check_writable(*this, "copy_");
  Shape shape = broadcast_shapes(sizes(), src.sizes(), "copy_");
  TANDEM_CHECK(IntArrayRef(shape) == sizes(), ShapeError, "copy_: the source of shape ", shape_str(src.sizes()),
               " cannot be broadcast to the destination's shape ", shape_str(sizes()));
  autograd::check_inplace(*this, "copy_");
  autograd::Recorder rec(autograd::GradOp::Copy, {*this, src});
  if (src.device() == device()) {
    // A source overlapping the destination in another layout (x.copy_(x.t()))
    // would be read after being overwritten: copy it out first.
    if (!same_view(*this, src)) copy_same_device(*this, src.shares_storage(*this) ? src.clone() : src);
  } else {
    // Bring src to dst's dtype and shape, contiguous, on its own device; then
    // move the bytes; then lay them out as dst if dst is not contiguous. The
    // byte copy is asynchronous when non_blocking and the host side is
    // pinned (a converted or made-contiguous source is not: it is pageable).
    Tensor s = src.to(dtype()).expand(sizes()).contiguous();
    if (is_contiguous()) {
      copy_bytes(data_ptr(), device(), s.data_ptr(), s.device(), nbytes(), non_blocking, storage().get(),
                 s.storage().get());
    } else {
      Tensor tmp = detail::make_result(sizes(), dtype(), device(), origin());
      copy_bytes(tmp.data_ptr(), device(), s.data_ptr(), s.device(), nbytes(), non_blocking, tmp.storage().get(),
                 s.storage().get());
      copy_same_device(*this, tmp);
    }
  }
  storage()->bump_version();
  rec.finish_inplace(*this);
  return *this;
}

Tensor Tensor::to(Device target, Dtype dt, bool non_blocking, bool copy, std::source_location loc) const {
  check_defined("to", {{"self", *this}});
  target = resolve_device(target, "to");
  if (target == device() && dt == dtype() && !copy) return *this;
  Origin origin = target == device() ? Origin::computed("to", this->origin()) : Origin::moved(".to()", loc);
  autograd::Recorder rec(autograd::GradOp::ToCopy, {*this});
  Tensor out;
  if (non_blocking && target.is_cpu() && is_cuda()) {
    // As PyTorch: a non-blocking copy to the cpu lands in pinned memory, so
    // that it can be asynchronous; synchronize before reading it.
    out = empty(sizes(), TensorOptions(dt).pinned_memory(true));
    out.set_origin(origin);
  } else {
    out = detail::make_result(sizes(), dt, target, origin);
  }
  out.copy_(*this, non_blocking);
  return rec.finish(out);
}

Tensor Tensor::to(Device device, bool non_blocking, bool copy, std::source_location loc) const {
  check_defined("to", {{"self", *this}});
  return to(device, dtype(), non_blocking, copy, loc);
}

Tensor Tensor::to(Dtype dt, bool non_blocking, bool copy) const {
  check_defined("to", {{"self", *this}});
  if (dt == dtype() && !copy) return *this;
  autograd::Recorder rec(autograd::GradOp::ToCopy, {*this});
  Tensor out = detail::make_result(sizes(), dt, device(), Origin::computed("to", origin()));
  out.copy_(*this, non_blocking);
  return rec.finish(out);
}

Tensor Tensor::to(const TensorOptions& options, bool non_blocking, bool copy, std::source_location loc) const {
  check_defined("to", {{"self", *this}});
  return to(options.has_device() ? options.device() : device(), options.has_dtype() ? options.dtype() : dtype(),
            non_blocking, copy, loc);
}

Tensor Tensor::cpu(std::source_location loc) const { return to(Device(kCPU), false, false, loc); }
Tensor Tensor::cuda(int index, std::source_location loc) const { return to(Device(kCUDA, index), false, false, loc); }

Tensor Tensor::contiguous() const {
  check_defined("contiguous", {{"self", *this}});
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  check_defined("clone", {{"self", *this}});
  autograd::Recorder rec(autograd::GradOp::Clone, {*this});
  Tensor out = detail::make_result(sizes(), dtype(), device(), Origin::computed("clone", origin()));
  copy_same_device(out, *this);
  return rec.finish(out);
}

Scalar Tensor::item() const {
  check_defined("item", {{"self", *this}});
  TANDEM_CHECK(numel() == 1, ValueError, "item(): a Tensor with ", numel(),
               " elements cannot be converted to Scalar (shape ", shape_str(sizes()), ")");
  Tensor host = device().is_cpu() ? *this : to(Device(kCPU));
  return dispatch_all(dtype(), "item", [&]<typename T>() { return Scalar(*static_cast<const T*>(host.data_ptr())); });
}

}  // namespace tandem

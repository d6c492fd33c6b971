// The autograd members of Tensor (requires_grad, grad, grad_fn, detach,
// set_data, ...); backward is in autograd/autograd.cpp.
#include "tensor/core/grad_record.h"

namespace tandem {

using autograd::AutogradMeta;
using autograd::meta_of;

bool Tensor::requires_grad() const {
  if (!defined()) return false;
  if (const AutogradMeta* m = impl_->autograd.get(); m && (m->requires_grad || m->grad_fn)) return true;
  // A view of a tensor that gained history after the view was made.
  const auto& base = impl_->view_base;
  return base && base->autograd && base->autograd->history != impl_->view_base_history && Tensor(base).requires_grad();
}

Tensor& Tensor::requires_grad_(bool r) {
  TANDEM_CHECK(defined(), ValueError, "requires_grad_: the tensor is undefined");
  AutogradMeta& m = meta_of(*this);
  if (!r) {
    TANDEM_CHECK(!m.grad_fn, ValueError,
                 "requires_grad_(false): you can only change requires_grad flags of leaf tensors; this one was "
                 "computed by ",
                 m.grad_fn->name(), ". Use .detach() for a tensor without history");
    m.requires_grad = false;
    return *this;
  }
  TANDEM_CHECK(is_floating_point(), DtypeError, "only tensors of floating point dtype can require gradients (got ",
               dtype_name(dtype()), "); convert with .to(kFloat32) first");
  if (!m.grad_fn) m.requires_grad = true;
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const AutogradMeta* m = defined() ? impl_->autograd.get() : nullptr;
  return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() const { return meta_of(*this).grad; }

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  if (!defined()) return none;
  if (impl_->view_base) autograd::gradient_edge(*this);  // refreshes a stale view's grad_fn
  if (!impl_->autograd) return none;
  return impl_->autograd->grad_fn ? impl_->autograd->grad_fn : none;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

uint32_t Tensor::output_nr() const {
  const AutogradMeta* m = defined() ? impl_->autograd.get() : nullptr;
  return m ? m->output_nr : 0;
}

void Tensor::retain_grad() const {
  TANDEM_CHECK(requires_grad(), ValueError, "retain_grad: can't retain_grad on a tensor that doesn't require grad");
  if (is_leaf()) return;  // leaves keep their grad anyway
  AutogradMeta& m = meta_of(*this);
  if (m.retains_grad) return;
  m.retains_grad = true;
  auto& retained = m.grad_fn->retained;
  if (retained.size() <= m.output_nr) retained.resize(m.output_nr + 1);
  retained[m.output_nr] = impl_;
}

bool Tensor::retains_grad() const {
  const AutogradMeta* m = defined() ? impl_->autograd.get() : nullptr;
  return m && m->retains_grad;
}

Tensor Tensor::detach() const {
  TANDEM_CHECK(defined(), ValueError, "detach: the tensor is undefined");
  return autograd::alias_without_history(*this);
}

Tensor& Tensor::detach_() {
  TANDEM_CHECK(defined(), ValueError, "detach_: the tensor is undefined");
  if (!impl_->autograd) return *this;
  AutogradMeta& m = *impl_->autograd;
  TANDEM_CHECK(!impl_->view_base || !requires_grad(), ValueError,
               "detach_: can't detach views in-place. Use detach() instead");
  m.grad_fn.reset();
  m.requires_grad = false;
  m.output_nr = 0;
  return *this;
}

uint64_t Tensor::_version() const { return storage()->version(); }

void Tensor::set_data(const Tensor& new_data) const {
  TANDEM_CHECK(defined() && new_data.defined(), ValueError, "set_data: both tensors must be defined");
  TANDEM_CHECK(!(impl_->autograd && impl_->autograd->requires_grad) || tandem::is_floating_point(new_data.dtype()),
               DtypeError, "set_data: a tensor that requires grad needs floating point data, got ", new_data.dtype());
  TensorImpl& self = *impl_;
  const TensorImpl& src = *new_data.impl();
  const bool same_kind = self.dtype == src.dtype && self.storage->device() == src.storage->device();
  self.storage = src.storage;
  self.sizes = src.sizes;
  self.strides = src.strides;
  self.offset = src.offset;
  self.dtype = src.dtype;
  self.origin = src.origin;
  self.view_base = src.view_base;
  self.view_base_history = src.view_base_history;
  self.view_made_without_grad = src.view_made_without_grad;
  // An AccumulateGrad node still held by an old graph describes the old
  // data; a new graph must make a new one (PyTorch resets it the same way).
  if (!same_kind && self.autograd) self.autograd->grad_accumulator.reset();
}

}  // namespace tandem

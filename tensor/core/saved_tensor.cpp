// Saved tensors: what a node keeps for its rule, with the version check
// that catches an in-place change before backward reads the value.
#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"

namespace tandem::autograd {

// An alias of t (same storage and geometry) without autograd metadata.
Tensor alias_without_history(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->sizes = t.sizes().vec();
  impl->strides = t.strides().vec();
  impl->offset = t.storage_offset();
  impl->dtype = t.dtype();
  impl->origin = t.origin();
  return Tensor(std::move(impl));
}

namespace {
std::string describe(const Tensor& t) {
  return detail::str_cat("[", dtype_name(t.dtype()), " ", shape_str(t.sizes()), " on ", t.device().str(), "]");
}
}  // namespace

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : defined_(t.defined()), is_output_(is_output) {
  if (!defined_) return;
  version_ = t.storage()->version();
  data_ = alias_without_history(t);
  if (is_output) {
    // Saved before the node is attached to it; every output of a recording
    // op requires grad, as output 0 of the node.
    requires_grad_ = true;
    return;
  }
  requires_grad_ = t.requires_grad();
  if (!requires_grad_) return;
  grad_fn_ = t.grad_fn();
  output_nr_ = t.output_nr();
  if (!grad_fn_) leaf_ = t.shared_impl();
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner) const {
  if (!defined_) return {};
  TANDEM_CHECK(!released_, ValueError, owner->name(),
               ": trying to backward through the graph a second time (or directly access saved tensors after they "
               "have already been freed). Saved intermediate values of the graph are freed when you call "
               ".backward() or autograd::grad(). Specify retain_graph=true if you need to backward through the graph "
               "a second time or if you need to access saved tensors after calling backward.");
  uint64_t now = data_.storage()->version();
  if (now != version_) [[unlikely]] {
    std::string which = is_output_       ? detail::str_cat("output ", output_nr_, " of ", owner->name())
                        : grad_fn_       ? detail::str_cat("output ", output_nr_, " of ", grad_fn_->name())
                        : requires_grad_ ? std::string("a leaf")
                                         : std::string("a tensor that does not require grad");
    throw ValueError(detail::str_cat(
        "one of the variables needed for gradient computation has been modified by an inplace operation: ",
        describe(data_), ", which is ", which, ", is at version ", now, "; expected version ", version_, " instead. ",
        owner->name(),
        " saved it for the backward pass: clone the tensor before changing it in place, or use the out-of-place "
        "op"));
  }
  // Without create_graph the rule only needs the values.
  if (!requires_grad_ || !GradMode::is_enabled()) return data_;
  if (leaf_.expired() && !grad_fn_ && !is_output_) return data_;  // a leaf nobody holds: no gradient to keep
  if (!grad_fn_ && !is_output_) return Tensor(leaf_.lock());
  // A computed input, or an output of the owner itself: an alias that
  // continues that history, so that the rule's own ops are differentiable.
  Tensor t = alias_without_history(data_);
  AutogradMeta& m = meta_of(t);
  m.grad_fn = is_output_ ? owner : grad_fn_;
  m.output_nr = output_nr_;
  return t;
}

void SavedTensor::release() {
  if (!defined_) return;
  data_ = Tensor();
  grad_fn_.reset();
  released_ = true;
}

}  // namespace tandem::autograd

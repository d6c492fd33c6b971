// The record hook ops call: a tensor's autograd metadata, the edge
// gradient flows through, views and their bases, and the Recorder.
#include "tensor/core/grad_record.h"

#include "tensor/core/node_params.h"

namespace tandem::autograd {

AutogradMeta& meta_of(const Tensor& t) {
  TensorImpl* impl = t.impl();
  TANDEM_INTERNAL_ASSERT(impl != nullptr);
  if (!impl->autograd) impl->autograd = std::make_shared<AutogradMeta>();
  return *impl->autograd;
}

namespace {
AutogradMeta* meta_if(const Tensor& t) { return t.defined() ? t.impl()->autograd.get() : nullptr; }

// Geometry of a view relative to its base, for AsStrided and CopySlices.
ViewGeometry view_geometry(const Tensor& base, const Tensor& view) {
  int64_t extent = 1;
  for (int64_t d = 0; d < base.dim(); ++d) extent += (base.size(d) - 1) * base.stride(d);
  return {{base.sizes().vec(), base.strides().vec()},
          {view.sizes().vec(), view.strides().vec()},
          view.storage_offset() - base.storage_offset(),
          base.numel() == 0 ? 0 : extent};
}

InputMeta input_meta(const Tensor& t) { return {t.sizes().vec(), t.dtype(), t.device()}; }

std::shared_ptr<Node> as_strided_node(const Tensor& base, const Tensor& view) {
  auto node = std::make_shared<Node>(GradOp::AsStrided);
  node->next_edges.push_back(gradient_edge(base));
  node->inputs.push_back(input_meta(base));
  node->payload = view_geometry(base, view);
  return node;
}
}  // namespace

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  TensorImpl* impl = t.impl();
  // A view whose base got a new history from an in-place op (through the
  // base or another view) since the view was made: its old grad_fn is stale.
  if (impl->view_base && impl->view_base->autograd && impl->view_base->autograd->history != impl->view_base_history) {
    Tensor base(impl->view_base);
    impl->view_base_history = impl->view_base->autograd->history;
    if (base.requires_grad()) {
      AutogradMeta& vm = meta_of(t);
      vm.grad_fn = as_strided_node(base, t);
      vm.output_nr = 0;
    }
  }
  AutogradMeta* m = meta_if(t);
  if (m == nullptr) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<Node>(GradOp::AccumulateGrad);
    acc->variable = t.shared_impl();
    acc->inputs.push_back(input_meta(t));
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

void note_view(const Tensor& view, const Tensor& input) {
  TensorImpl* in = input.impl();
  TensorImpl* v = view.impl();
  v->view_base = in->view_base ? in->view_base : input.shared_impl();
  v->view_base_history = v->view_base->autograd ? v->view_base->autograd->history : 0;
  v->view_made_without_grad = !GradMode::is_enabled() || in->view_made_without_grad;
}

// ---------------------------------------------------------------- recording
namespace {
constexpr const char* kNoGradViewMessage =
    ": a view was created in no_grad mode and is being modified in place with grad mode enabled. This is "
    "ambiguous and forbidden, as in PyTorch: make the view and change it both inside the NoGradGuard (if the "
    "change should not be tracked) or both outside it (if it should)";
}  // namespace

Recorder::Recorder(GradOp op, Inputs inputs) {
  if (!GradMode::is_enabled()) return;
  const Tensor* ptrs[8];
  TANDEM_INTERNAL_ASSERT(inputs.size() <= 8);
  size_t n = 0;
  for (const Tensor& t : inputs) ptrs[n++] = &t;
  init(op, ptrs, n);
}

Recorder::Recorder(GradOp op, const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  init(op, ptrs.data(), ptrs.size());
}

void Recorder::init(GradOp op, const Tensor* const* inputs, size_t n) {
  bool any = false;
  for (size_t i = 0; i < n && !any; ++i) any = inputs[i]->defined() && inputs[i]->requires_grad();
  if (!any) return;
  node_ = std::make_shared<Node>(op);
  node_->next_edges.reserve(n);
  node_->inputs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = *inputs[i];
    node_->next_edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
    node_->inputs.push_back(t.defined() ? input_meta(t) : InputMeta{});
  }
  no_grad_.emplace(false);
}

void Recorder::save(const Tensor& t) { node_->saved.emplace_back(t, false); }

Tensor Recorder::save_original(const Tensor& self) {
  Tensor original;
  {
    AutoGradMode record(true);  // the guard turned it off; it was on, or there would be no node
    original = self.clone();
  }
  save(original);
  return original;
}

void Recorder::save_output(const Tensor& out) { node_->saved.emplace_back(out, true); }

const Tensor& Recorder::finish(const Tensor& out) {
  no_grad_.reset();  // recording is over: what the op does next (a view of out) records again
  if (!node_ || !is_floating_point(out.dtype())) return out;  // integer results carry no gradient
  AutogradMeta& m = meta_of(out);
  m.grad_fn = node_;
  m.output_nr = 0;
  return out;
}

const Tensor& Recorder::finish_view(const Tensor& out, const Tensor& input) {
  TANDEM_INTERNAL_ASSERT(!out.defined() || out.impl()->view_base != nullptr || !input.defined(),
                         "finish_view: out was not made by detail::make_view");
  if (node_) out.impl()->view_made_without_grad = false;  // a recorded view is a differentiable one
  return finish(out);
}

void Recorder::finish_inplace(const Tensor& self) {
  no_grad_.reset();
  if (!node_ || !is_floating_point(self.dtype())) return;
  AutogradMeta& m = meta_of(self);
  TensorImpl* impl = self.impl();
  if (!impl->view_base) {
    m.grad_fn = node_;
    m.output_nr = 0;
    ++m.history;
    return;
  }
  TANDEM_CHECK(!impl->view_made_without_grad, ValueError, node_->name(), kNoGradViewMessage);
  // self is a view of base: base's values changed where self lies. Base's
  // new history: its old one outside the view, the op's node inside it.
  Tensor base(impl->view_base);
  auto copy_slices = std::make_shared<Node>(GradOp::CopySlices);
  copy_slices->next_edges = {gradient_edge(base), Edge{node_, 0}};
  copy_slices->inputs = {input_meta(base), input_meta(self)};
  copy_slices->payload = view_geometry(base, self);
  AutogradMeta& bm = meta_of(base);
  bm.grad_fn = copy_slices;
  bm.output_nr = 0;
  ++bm.history;
  m.grad_fn = as_strided_node(base, self);
  m.output_nr = 0;
  impl->view_base_history = bm.history;
}

void check_inplace(const Tensor& self, const char* op, const char* suffix) {
  if (!GradMode::is_enabled()) return;
  AutogradMeta* m = meta_if(self);
  TANDEM_CHECK(!(m && m->requires_grad && !m->grad_fn), ValueError, op, suffix,
               ": a leaf tensor that requires grad is being used in an in-place operation. Change it inside a "
               "NoGradGuard (as optimizers do), or work on a clone");
  const TensorImpl* impl = self.impl();
  if (impl->view_base && impl->view_base->autograd) {
    const AutogradMeta& b = *impl->view_base->autograd;
    TANDEM_CHECK(!(b.requires_grad && !b.grad_fn), ValueError, op, suffix,
                 ": a view of a leaf tensor that requires grad is being used in an in-place operation. Change it "
                 "inside a NoGradGuard (as optimizers do), or work on a clone");
    TANDEM_CHECK(!(impl->view_made_without_grad && b.grad_fn), ValueError, op, suffix, kNoGradViewMessage);
  }
}

}  // namespace tandem::autograd

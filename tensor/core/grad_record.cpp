// Grad mode, the graph's node and saved-tensor types, the autograd members of
// Tensor (all but backward), and the record hook ops call.
#include "tensor/core/grad_record.h"

#include <atomic>

#include "tensor/core/shape.h"

namespace tandem {

namespace {
thread_local bool grad_mode_enabled = true;
std::atomic<uint64_t> next_sequence_nr{0};
}  // namespace

bool GradMode::is_enabled() { return grad_mode_enabled; }
void GradMode::set_enabled(bool enabled) { grad_mode_enabled = enabled; }

namespace autograd {

const char* grad_op_name(GradOp op) {
  switch (op) {
    case GradOp::AccumulateGrad: return "AccumulateGrad";
#define X(Name, name, dtypes, keeps, Params, backward, node_name) \
  case GradOp::Name: return node_name;
      TANDEM_UNARY_OPS(X)
#undef X
#define X(Name, name, node_name) \
  case GradOp::Name: return node_name;
      TANDEM_ARITHMETIC_OPS(X)
#undef X
    case GradOp::Where: return "WhereBackward0";
    case GradOp::MaskedFill: return "MaskedFillBackward0";
    case GradOp::Fill: return "FillBackward0";
    case GradOp::Copy: return "CopyBackwards";
    case GradOp::ToCopy: return "ToCopyBackward0";
    case GradOp::Clone: return "CloneBackward0";
    case GradOp::Sum: return "SumBackward0";
    case GradOp::Mean: return "MeanBackward0";
    case GradOp::Prod: return "ProdBackward0";
    case GradOp::MaxAll: return "MaxBackward1";
    case GradOp::MinAll: return "MinBackward1";
    case GradOp::MaxDim: return "MaxBackward0";
    case GradOp::MinDim: return "MinBackward0";
    case GradOp::Amax: return "AmaxBackward0";
    case GradOp::Amin: return "AminBackward0";
    case GradOp::Var: return "VarBackward0";
    case GradOp::Std: return "StdBackward0";
    case GradOp::Norm: return "NormBackward1";
    case GradOp::LogSumExp: return "LogsumexpBackward0";
    case GradOp::Softmax: return "SoftmaxBackward0";
    case GradOp::LogSoftmax: return "LogSoftmaxBackward0";
    case GradOp::View: return "ViewBackward0";
    case GradOp::Squeeze: return "SqueezeBackward0";
    case GradOp::SqueezeDim: return "SqueezeBackward1";
    case GradOp::Unsqueeze: return "UnsqueezeBackward0";
    case GradOp::Permute: return "PermuteBackward0";
    case GradOp::Transpose: return "TransposeBackward0";
    case GradOp::T: return "TBackward0";
    case GradOp::Expand: return "ExpandBackward0";
    case GradOp::Slice: return "SliceBackward0";
    case GradOp::Select: return "SelectBackward0";
    case GradOp::AsStrided: return "AsStridedBackward0";
    case GradOp::CopySlices: return "CopySlices";
    case GradOp::Cat: return "CatBackward0";
    case GradOp::Stack: return "StackBackward0";
    case GradOp::Gather: return "GatherBackward0";
    case GradOp::ScatterAdd: return "ScatterAddBackward0";
    case GradOp::IndexSelect: return "IndexSelectBackward0";
    case GradOp::Mm: return "MmBackward0";
    case GradOp::Bmm: return "BmmBackward0";
    case GradOp::Matmul: return "MatmulBackward0";
    case GradOp::Convolution: return "ConvolutionBackward0";
    case GradOp::MaxPool2d: return "MaxPool2DWithIndicesBackward0";
    case GradOp::AvgPool2d: return "AvgPool2DBackward0";
    case GradOp::AdaptiveAvgPool2d: return "AdaptiveAvgPool2DBackward0";
    case GradOp::BatchNorm: return "NativeBatchNormBackward0";
    case GradOp::LayerNorm: return "NativeLayerNormBackward0";
    case GradOp::Embedding: return "EmbeddingBackward0";
  }
  return "?";
}

// ---------------------------------------------------------------- saved tensors
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

// ---------------------------------------------------------------- nodes
Node::Node(GradOp op) : op(op), sequence_nr(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

void Node::release_saved() {
  for (auto& s : saved) s.release();
  released_ = true;
}

AutogradMeta& meta_of(const Tensor& t) {
  TensorImpl* impl = t.impl();
  TANDEM_INTERNAL_ASSERT(impl != nullptr);
  if (!impl->autograd) impl->autograd = std::make_shared<AutogradMeta>();
  return *impl->autograd;
}

namespace {
AutogradMeta* meta_if(const Tensor& t) { return t.defined() ? t.impl()->autograd.get() : nullptr; }

// Geometry of a view relative to its base, for AsStrided and CopySlices:
// [base dim, base sizes, base strides, view dim, view sizes, view strides,
// view offset - base offset, extent of the base's elements in the storage].
std::vector<int64_t> view_geometry(const Tensor& base, const Tensor& view) {
  std::vector<int64_t> g;
  auto push = [&](const Tensor& t) {
    g.push_back(t.dim());
    for (int64_t s : t.sizes()) g.push_back(s);
    for (int64_t s : t.strides()) g.push_back(s);
  };
  push(base);
  push(view);
  g.push_back(view.storage_offset() - base.storage_offset());
  int64_t extent = 1;
  for (int64_t d = 0; d < base.dim(); ++d) extent += (base.size(d) - 1) * base.stride(d);
  g.push_back(base.numel() == 0 ? 0 : extent);
  return g;
}

InputMeta input_meta(const Tensor& t) { return {t.sizes().vec(), t.dtype(), t.device()}; }

std::shared_ptr<Node> as_strided_node(const Tensor& base, const Tensor& view) {
  auto node = std::make_shared<Node>(GradOp::AsStrided);
  node->next_edges.push_back(gradient_edge(base));
  node->inputs.push_back(input_meta(base));
  node->ints = view_geometry(base, view);
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
  copy_slices->ints = view_geometry(base, self);
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

}  // namespace autograd

// ---------------------------------------------------------------- Tensor members
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

// Post-accumulate-grad hooks (stored in the leaf's AutogradMeta) and the
// end-of-pass callbacks (a list per running pass, per thread).
#include "autograd/hooks.h"

#include <atomic>
#include <vector>

#include "tensor/core/autograd_meta.h"
#include "tensor/core/grad_record.h"

namespace tandem::autograd {

namespace {
std::atomic<uint64_t> next_hook_id{1};
}

void RemovableHandle::remove() {
  std::shared_ptr<TensorImpl> impl = tensor_.lock();
  if (!impl || !impl->autograd) return;
  auto& hooks = impl->autograd->post_accumulate_grad_hooks;
  std::erase_if(hooks, [&](const auto& h) { return h.first == id_; });
  tensor_.reset();
}

RemovableHandle register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(Tensor&)> hook) {
  TANDEM_CHECK(leaf.defined(), ValueError, "register_post_accumulate_grad_hook: the tensor is undefined");
  TANDEM_CHECK(leaf.is_leaf(), ValueError,
               "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered on non-leaf "
               "tensors (this one was computed by ",
               leaf.grad_fn() ? leaf.grad_fn()->name() : "an op", "); register it on the leaf it came from");
  TANDEM_CHECK(leaf.requires_grad(), ValueError,
               "register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't require "
               "gradient; call requires_grad_() first");
  uint64_t id = next_hook_id.fetch_add(1);
  meta_of(leaf).post_accumulate_grad_hooks.emplace_back(id, std::move(hook));
  return RemovableHandle(leaf.shared_impl(), id);
}

namespace detail {

struct CallbackScope::List {
  std::vector<std::function<void()>> callbacks;
};

namespace {
thread_local CallbackScope::List* current_pass = nullptr;
}

CallbackScope::CallbackScope() : list_(std::make_unique<List>()), outer_(current_pass) { current_pass = list_.get(); }
CallbackScope::~CallbackScope() { current_pass = outer_; }

void CallbackScope::run() {
  // By index: a callback may queue another, which runs after it.
  for (size_t i = 0; i < list_->callbacks.size(); ++i) {
    std::function<void()> fn = std::move(list_->callbacks[i]);
    fn();
  }
  list_->callbacks.clear();
}

void run_post_accumulate_grad_hooks(Tensor& leaf) {
  AutogradMeta* m = leaf.impl()->autograd.get();
  if (!m || m->post_accumulate_grad_hooks.empty()) return;
  // A copy: a hook may remove itself or register another.
  auto hooks = m->post_accumulate_grad_hooks;
  for (auto& [id, fn] : hooks) fn(leaf);
}

}  // namespace detail

void queue_callback(std::function<void()> fn) {
  TANDEM_CHECK(detail::current_pass != nullptr, ValueError,
               "autograd::queue_callback: no backward pass is running on this thread; queue callbacks from a hook "
               "that a pass calls");
  detail::current_pass->callbacks.push_back(std::move(fn));
}

}  // namespace tandem::autograd

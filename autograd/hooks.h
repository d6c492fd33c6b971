// Hooks into a backward pass, for code that must act while gradients are
// being produced (DistributedDataParallel starts a bucket's allreduce as soon
// as its last gradient is accumulated): a leaf's post-accumulate-grad hook,
// and a callback at the end of the current pass (PyTorch's
// Tensor.register_post_accumulate_grad_hook and Engine.queue_callback).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/core/tensor.h"

namespace tandem::autograd {

// Removes the hook it was returned for (PyTorch's RemovableHandle); removing
// twice, or after the tensor is gone, does nothing. Not removed on
// destruction: call remove().
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<TensorImpl> tensor, uint64_t id) : tensor_(std::move(tensor)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<TensorImpl> tensor_;
  uint64_t id_ = 0;
};

// hook(leaf) runs after each backward pass (or autograd::backward with
// inputs) has accumulated a gradient into leaf.grad(), on the pass's thread,
// once per pass, hooks in the order registered. leaf must be a leaf that
// requires grad. autograd::grad, which accumulates nothing, runs none.
RemovableHandle register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(Tensor&)> hook);

// Runs fn on the pass's thread when the backward pass that is running now
// has finished (all of its gradients accumulated and their hooks run), in
// the order queued; a callback may queue another. Only from inside a pass
// (a hook); a pass that throws drops its callbacks.
void queue_callback(std::function<void()> fn);

namespace detail {
// The engine's side: a leaf's hooks after an accumulation, and the scope of
// one pass's callbacks (nestable: a hook may run a pass of its own).
void run_post_accumulate_grad_hooks(Tensor& leaf);
class CallbackScope {
 public:
  CallbackScope();
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
  // Runs the queued callbacks (and those they queue) and empties the list.
  void run();

  struct List;

 private:
  std::unique_ptr<List> list_;
  List* outer_;
};
}  // namespace detail

}  // namespace tandem::autograd

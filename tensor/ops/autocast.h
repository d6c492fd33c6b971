// Autocast: ops run in float16 or bfloat16 where that is safe and in float32
// where it is not, without changing the model (PyTorch's torch.autocast).
//
//   {
//     AutocastGuard autocast(kCUDA);             // float16 on cuda tensors
//     Tensor logits = model->forward(x);         // linear, conv2d: float16
//     Tensor loss = F::cross_entropy(logits, y); // float32
//   }
//   loss.backward();  // outside: backward ops run in the forward's dtypes
//
// Which op runs in which precision is one table, TANDEM_AUTOCAST_OPS in
// tensor/core/op_table.h (docs/autocast.md prints it). Each listed op asks
// for its inputs through autocast::detail::inputs at its door, and runs its
// body with autocast off (as PyTorch's wrappers do), so the ops it calls
// inside are not cast again. The state is per thread: a guard does not
// reach a DataLoader's workers. The backward pass runs with autocast off.
//
// The cast cache: a float32 leaf that requires grad (a weight) is cast to
// the lower precision once per outermost guard, not once per use, and the
// cache is cleared when that guard ends. A cast made under NoGradGuard is
// kept apart from one made with grad mode on (PyTorch mixes them:
// pytorch/pytorch#112583, where a no_grad forward inside autocast leaves the
// next forward's weights without gradients); an in-place change of the
// weight (its version) makes the next use cast again.
#pragma once

#include <initializer_list>
#include <optional>
#include <vector>

#include "tensor/core/device.h"
#include "tensor/core/dtype.h"
#include "tensor/core/tensor.h"

namespace tandem {

// As PyTorch's torch.autocast(device_type, dtype, enabled, cache_enabled):
// for this guard's scope, ops on tensors of device_type follow the table.
// dtype: the lower precision, float16 or bfloat16 (anything else is a
// ValueError); by default float16 on cuda and bfloat16 on the cpu.
// enabled = false turns autocast off for the scope (inside another guard).
// Guards nest; each restores what was before it.
class AutocastGuard {
 public:
  explicit AutocastGuard(DeviceType device_type, std::optional<Dtype> dtype = std::nullopt, bool enabled = true,
                         bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_type_;
  bool prev_enabled_;
  Dtype prev_dtype_;
  bool prev_cache_enabled_;
};

namespace autocast {

// This thread's state, as at::autocast's.
bool is_enabled(DeviceType device_type);
Dtype get_dtype(DeviceType device_type);  // the lower precision it casts to
bool is_cache_enabled();
// The casts cached so far on this thread (the outermost guard's end clears them).
size_t cache_size();
void clear_cache();

enum class Policy { None, Lower, Float32, Promote };
// The table's entry for op (its name, as in TANDEM_AUTOCAST_OPS) on tensors
// of device_type: None for an op not listed.
Policy policy(const char* op, DeviceType device_type);
const char* policy_name(Policy policy);
// The table's op names, in its order.
std::vector<const char*> listed_ops();

namespace detail {

// At a listed op's door: nullopt when autocast does not apply (off for the
// inputs' device type, or the op not listed for it); else the inputs as the
// op runs them (undefined ones stay undefined), and the caller runs its
// body on them under Excluded:
//   if (auto in = autocast::detail::inputs("matmul", {a, b}))
//     return autocast::detail::excluded([&] { return matmul((*in)[0], (*in)[1]); });
std::optional<std::vector<Tensor>> inputs(const char* op, std::initializer_list<Tensor> tensors);
std::optional<std::vector<Tensor>> inputs(const char* op, const std::vector<Tensor>& tensors);

// Autocast off on this thread for a scope (a listed op's body, a backward
// pass), the cache kept.
class Excluded {
 public:
  Excluded();
  ~Excluded();
  Excluded(const Excluded&) = delete;
  Excluded& operator=(const Excluded&) = delete;

 private:
  bool prev_;
};

template <typename F>
auto excluded(const F& f) {
  Excluded scope;
  return f();
}

}  // namespace detail

}  // namespace autocast

}  // namespace tandem

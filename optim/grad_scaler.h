// amp::GradScaler: dynamic loss scaling for float16 training, with PyTorch's
// semantics, defaults, state dict keys and misuse errors
// (torch.amp.GradScaler; libtorch has none):
//
//   amp::GradScaler scaler;
//   for (...) {
//     opt.zero_grad();
//     Tensor loss;
//     {
//       AutocastGuard autocast(kCUDA);
//       loss = F::cross_entropy(model->forward(x), y);
//     }
//     scaler.scale(loss).backward();  // gradients of loss * scale
//     scaler.step(opt);               // unscaled first; skipped on inf or NaN
//     scaler.update();                // the scale backs off, or grows
//   }
//
// The scale, its growth tracker and each step's found-inf flag live on the
// loss's device as one-element tensors. unscale_ is one multi-tensor kernel
// per device and dtype that divides the gradients by the scale and sets the
// flag on the device (detail::amp_unscale_); update is one device kernel
// (detail::amp_update_scale_). Neither waits for the device while the
// gradients are on the scale's device (a copy between two GPUs waits for
// both). step hands the flag to an optimizer that skips on the device
// (supports_amp_scaling: SGD without dampening, Adam and AdamW with
// fused(true)), so that nothing waits; when unscale_ was not called, such an
// optimizer also takes the scale and unscales the gradients in its own
// kernel (the GradScaler's pass then only checks them: PyTorch's fused
// optimizers' grad_scale). For the others step reads the flag (one host
// synchronisation per device) to decide whether to run the optimizer's
// step, as PyTorch does.
//
// A skipped step is a step not taken: the optimizer's state is unchanged.
// A learning-rate scheduler's step() after it still advances the schedule:
// the schedule counts iterations, not optimizer updates, so a skipped step
// costs one iteration of the schedule and nothing else (PyTorch warns when
// the first optimizer step was skipped, pytorch/pytorch#44511; Tandem says
// it here and in docs/autocast.md instead). skipped_steps() counts them on
// the device.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/core/arg.h"
#include "tensor/core/ordered_dict.h"
#include "tensor/core/tensor.h"

namespace tandem::amp {

struct GradScalerOptions {
  TANDEM_ARG(double, init_scale) = 65536.0;  // 2^16
  TANDEM_ARG(double, growth_factor) = 2.0;
  TANDEM_ARG(double, backoff_factor) = 0.5;
  TANDEM_ARG(int64_t, growth_interval) = 2000;
  // A disabled scaler passes everything through: scale(loss) is loss, step
  // is the optimizer's step, update does nothing.
  TANDEM_ARG(bool, enabled) = true;
};

class GradScaler {
 public:
  // ValueError for a growth_factor <= 1, a backoff_factor outside (0, 1), a
  // growth_interval <= 0 or an init_scale <= 0.
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale (a new tensor, recorded). The scale is made on the first
  // output's device the first time.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);

  // Divides the optimizer's gradients by the scale in place and records,
  // on each device, whether any was inf or NaN. At most once per optimizer
  // between update()s, and not after its step(): PyTorch's errors. A float16
  // gradient is refused (PyTorch: "Attempting to unscale FP16 gradients.";
  // keep float32 weights and let autocast cast them).
  void unscale_(optim::Optimizer& optimizer);
  // unscale_ (if not done yet), then the optimizer's step unless a gradient
  // was inf or NaN; returns what the step returned (undefined when skipped,
  // or without a closure). Once per optimizer between update()s. With an
  // optimizer that supports_amp_scaling(), the skip is decided on the
  // device and, unless unscale_ ran, the unscale happens in the step's
  // kernel: after a clean step the gradients are unscaled either way; after
  // a skipped one they are left as they were (scaled, unless unscale_ ran).
  // Such a step also takes float16 gradients, which it unscales in float32.
  Tensor step(optim::Optimizer& optimizer);
  // After the optimizers' steps: the scale backs off (times backoff_factor)
  // if any of them found an inf or NaN, else grows (times growth_factor)
  // after growth_interval clean steps in a row. With new_scale, sets it
  // instead. Then every optimizer is ready for the next unscale_/step.
  void update();
  void update(double new_scale);
  void update(const Tensor& new_scale);  // one float32 element, not requiring grad

  // The scale: init_scale before the first scale(), 1 when disabled. Reads
  // it back from the device (a host synchronisation).
  double get_scale() const;
  // The scale tensor itself (undefined before the first scale()): for a
  // fused step that reads it on the device.
  const Tensor& scale_tensor() const { return scale_; }
  int64_t get_growth_tracker() const;  // reads it back (a host synchronisation)
  double get_growth_factor() const { return options_.growth_factor(); }
  void set_growth_factor(double v) { options_.growth_factor(v); }
  double get_backoff_factor() const { return options_.backoff_factor(); }
  void set_backoff_factor(double v) { options_.backoff_factor(v); }
  int64_t get_growth_interval() const { return options_.growth_interval(); }
  void set_growth_interval(int64_t v) { options_.growth_interval(v); }
  bool is_enabled() const { return options_.enabled(); }
  // How many steps update() has seen skipped since this scaler was made or
  // loaded, counted on the device: reading it is a host synchronisation.
  int64_t skipped_steps() const;

  // PyTorch's keys: "scale", "growth_factor", "backoff_factor",
  // "growth_interval", "_growth_tracker"; empty when disabled. Reads the
  // scale and tracker back (a host synchronisation).
  OrderedDict<std::string, double> state_dict() const;
  // Refuses an empty state dict (PyTorch's words: it came from a disabled
  // scaler) and one without those keys (KeyError).
  void load_state_dict(const OrderedDict<std::string, double>& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    std::vector<Tensor> found_inf;  // one per device its gradients are on
  };
  PerOptimizer& state_of(const optim::Optimizer& optimizer);
  void make_scale(Device device);
  // One found-inf flag per device of the optimizer's gradients, each set
  // when one of them is inf or NaN; with unscale, the gradients are divided
  // by the scale in the same pass (amp_unscale_), otherwise only read.
  std::vector<Tensor> check_grads(const optim::Optimizer& optimizer, bool unscale) const;

  GradScalerOptions options_;
  Tensor scale_, growth_tracker_, skipped_;  // on one device, made by the first scale()
  int64_t loaded_tracker_ = 0;               // a loaded tracker, before the scale exists
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace tandem::amp

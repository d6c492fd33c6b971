// amp::GradScaler (optim/grad_scaler.h): PyTorch's torch.amp.GradScaler,
// its state machine per optimizer and its errors, over the two device ops
// of tensor/ops/foreach.h.
#include "optim/grad_scaler.h"

#include <algorithm>
#include <cmath>

#include "tensor/core/errors.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/foreach.h"

namespace tandem::amp {

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  TANDEM_CHECK(options_.init_scale() > 0 && std::isfinite(options_.init_scale()), ValueError,
               "GradScaler: init_scale must be a positive finite number, got ", options_.init_scale());
  TANDEM_CHECK(options_.growth_factor() > 1.0, ValueError, "The growth factor must be > 1.0. (GradScaler: got ",
               options_.growth_factor(), ")");
  TANDEM_CHECK(options_.backoff_factor() > 0 && options_.backoff_factor() < 1.0, ValueError,
               "The backoff factor must be < 1.0. (GradScaler: and > 0; got ", options_.backoff_factor(), ")");
  TANDEM_CHECK(options_.growth_interval() > 0, ValueError, "GradScaler: growth_interval must be positive, got ",
               options_.growth_interval());
  loaded_tracker_ = 0;
}

void GradScaler::make_scale(Device device) {
  const TensorOptions f32 = TensorOptions(kFloat32).device(device);
  scale_ = full({}, options_.init_scale(), f32);
  growth_tracker_ = full({}, loaded_tracker_, TensorOptions(kInt32).device(device));
  skipped_ = zeros({}, TensorOptions(kInt64).device(device));
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!options_.enabled()) return outputs;
  TANDEM_CHECK(outputs.defined(), ValueError, "GradScaler.scale: outputs is an undefined tensor");
  if (!scale_.defined()) make_scale(outputs.device());
  return outputs * (scale_.device() == outputs.device() ? scale_ : scale_.to(outputs.device()));
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  if (!options_.enabled() || outputs.empty()) return outputs;
  for (const Tensor& t : outputs)
    TANDEM_CHECK(t.defined(), ValueError, "GradScaler.scale: outputs holds an undefined tensor");
  if (!scale_.defined()) make_scale(outputs[0].device());
  // One copy of the scale per device of the outputs, for this call
  // (PyTorch's _MultiDeviceReplicator): each copy waits for the devices.
  std::vector<std::pair<Device, Tensor>> copies{{scale_.device(), scale_}};
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) {
    auto it = std::find_if(copies.begin(), copies.end(), [&](const auto& c) { return c.first == t.device(); });
    if (it == copies.end()) it = copies.insert(copies.end(), {t.device(), scale_.to(t.device())});
    out.push_back(t * it->second);
  }
  return out;
}

GradScaler::PerOptimizer& GradScaler::state_of(const optim::Optimizer& optimizer) { return per_optimizer_[&optimizer]; }

namespace {

void check_scale_made(const Tensor& scale, const char* fn) {
  TANDEM_CHECK(scale.defined(), ValueError, "Attempted ", fn,
               " but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) "
               "earlier in the iteration. (GradScaler: call scaler.scale(loss).backward() first)");
}

}  // namespace

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled()) return;
  check_scale_made(scale_, "unscale_");
  PerOptimizer& s = state_of(optimizer);
  TANDEM_CHECK(s.stage != Stage::Unscaled, ValueError,
               "unscale_() has already been called on this optimizer since the last update().");
  TANDEM_CHECK(s.stage != Stage::Stepped, ValueError, "unscale_() is being called after step().");
  s.found_inf = check_grads(optimizer, /*unscale=*/true);
  s.stage = Stage::Unscaled;
}

std::vector<Tensor> GradScaler::check_grads(const optim::Optimizer& optimizer, bool unscale) const {
  NoGradGuard no_grad;
  // The gradients by device, then dtype: one kernel each.
  std::vector<std::pair<Device, std::map<Dtype, std::vector<Tensor>>>> grads;
  for (const optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    for (const Tensor& p : group.params()) {
      const Tensor& g = p.grad();
      if (!g.defined()) continue;
      // Unscaled in place, a float16 gradient would lose what the scale
      // kept; a fused step unscales in float32 (PyTorch's allow_fp16 there).
      TANDEM_CHECK(!unscale || g.dtype() != kFloat16, ValueError,
                   "Attempting to unscale FP16 gradients. (GradScaler: keep the weights in float32 and let "
                   "AutocastGuard cast them; the gradients are then float32)");
      auto it = std::find_if(grads.begin(), grads.end(), [&](const auto& e) { return e.first == g.device(); });
      if (it == grads.end()) it = grads.insert(grads.end(), {g.device(), {}});
      it->second[g.dtype()].push_back(g);
    }
  }
  Tensor inv_scale;
  if (unscale)
    inv_scale = full({}, 1.0, TensorOptions(kFloat64).device(scale_.device())).div(scale_.to(kFloat64)).to(kFloat32);
  std::vector<Tensor> found;
  for (auto& [device, by_dtype] : grads) {
    Tensor found_inf = zeros({}, TensorOptions(kFloat32).device(device));
    const Tensor inv = !unscale || device == inv_scale.device() ? inv_scale : inv_scale.to(device);
    for (auto& [dtype, list] : by_dtype) {
      if (unscale)
        tandem::detail::amp_unscale_(list, found_inf, inv);
      else
        tandem::detail::amp_check_finite_(list, found_inf);
    }
    found.push_back(found_inf);
  }
  return found;
}

Tensor GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled()) return optimizer.step();
  check_scale_made(scale_, "step");
  PerOptimizer& s = state_of(optimizer);
  TANDEM_CHECK(s.stage != Stage::Stepped, ValueError, "step() has already been called since the last update().");
  const char* none_checked =
      "No inf checks were recorded for this optimizer. (GradScaler.step: none of its parameters has a gradient; "
      "call scaler.scale(loss).backward() first)";
  if (optimizer.supports_amp_scaling()) {
    // A fused step: the optimizer's kernels read the flag and the scale on
    // the device, and nothing waits. Unless unscale_ ran, they also unscale
    // the gradients, and the pass here only checks them. The scaler's state
    // changes once the step has run: a step that throws (a parameter moved
    // since its state was made) leaves the gradients scaled and the
    // optimizer ready, so that the step can be taken again.
    const bool scaled = s.stage == Stage::Ready;
    std::vector<Tensor> found = scaled ? check_grads(optimizer, /*unscale=*/false) : s.found_inf;
    if (found.empty()) {
      s.stage = Stage::Unscaled;  // as unscale_ leaves it, as PyTorch's step does
      TANDEM_CHECK(false, ValueError, none_checked);
    }
    Tensor combined;
    for (const Tensor& f : found) {
      const Tensor here = f.device() == scale_.device() ? f : f.to(scale_.device());
      combined = combined.defined() ? combined + here : here;
    }
    optimizer.step_unless_found_inf(combined, scaled ? scale_ : Tensor());
    s.found_inf = std::move(found);
    s.stage = Stage::Stepped;
    return Tensor();
  }
  if (s.stage == Stage::Ready) unscale_(optimizer);
  TANDEM_CHECK(!s.found_inf.empty(), ValueError, none_checked);
  // The one wait of an unfused step: whether any device found an inf or NaN.
  double found = 0;
  for (const Tensor& f : s.found_inf) found += f.item<float>();
  Tensor retval;
  if (found == 0) retval = optimizer.step();
  s.stage = Stage::Stepped;
  return retval;
}

void GradScaler::update() {
  if (!options_.enabled()) return;
  check_scale_made(scale_, "update");
  std::vector<Tensor> found;
  for (auto& [opt, s] : per_optimizer_)
    for (const Tensor& f : s.found_inf) found.push_back(f.device() == scale_.device() ? f : f.to(scale_.device()));
  TANDEM_CHECK(!found.empty(), ValueError,
               "No inf checks were recorded prior to update. (GradScaler: call step() or unscale_() for at least "
               "one optimizer first)");
  NoGradGuard no_grad;
  Tensor combined = found[0];
  for (size_t i = 1; i < found.size(); ++i) combined = combined + found[i];
  tandem::detail::amp_update_scale_(scale_, growth_tracker_, combined, options_.growth_factor(),
                                    options_.backoff_factor(), options_.growth_interval());
  skipped_.add_(combined.gt(0).to(kInt64));
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled()) return;
  check_scale_made(scale_, "update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

void GradScaler::update(const Tensor& new_scale) {
  if (!options_.enabled()) return;
  check_scale_made(scale_, "update");
  TANDEM_CHECK(
      new_scale.defined() && new_scale.numel() == 1 && new_scale.dtype() == kFloat32 && !new_scale.requires_grad(),
      ValueError,
      "new_scale should be a float or a 1-element torch.cuda.FloatTensor or torch.FloatTensor with "
      "requires_grad=False. (GradScaler.update: a one-element float32 tensor)");
  NoGradGuard no_grad;
  scale_.copy_(new_scale.reshape({}));
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled()) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : options_.init_scale();
}

int64_t GradScaler::get_growth_tracker() const {
  if (!options_.enabled()) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int32_t>() : loaded_tracker_;
}

int64_t GradScaler::skipped_steps() const { return skipped_.defined() ? skipped_.item<int64_t>() : 0; }

OrderedDict<std::string, double> GradScaler::state_dict() const {
  OrderedDict<std::string, double> d("GradScaler state");
  if (!options_.enabled()) return d;
  d.insert("scale", get_scale());
  d.insert("growth_factor", options_.growth_factor());
  d.insert("backoff_factor", options_.backoff_factor());
  d.insert("growth_interval", static_cast<double>(options_.growth_interval()));
  d.insert("_growth_tracker", static_cast<double>(get_growth_tracker()));
  return d;
}

void GradScaler::load_state_dict(const OrderedDict<std::string, double>& state) {
  if (!options_.enabled()) return;
  TANDEM_CHECK(!state.is_empty(), ValueError,
               "The source state dict is empty, possibly because it was saved from a disabled instance of "
               "GradScaler.");
  for (const char* key : {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}) {
    TANDEM_CHECK(state.contains(key), KeyError, "GradScaler.load_state_dict: the state dict has no '", key,
                 "' (expected scale, growth_factor, backoff_factor, growth_interval and _growth_tracker)");
  }
  options_.init_scale(state["scale"]);
  options_.growth_factor(state["growth_factor"]);
  options_.backoff_factor(state["backoff_factor"]);
  options_.growth_interval(static_cast<int64_t>(state["growth_interval"]));
  loaded_tracker_ = static_cast<int64_t>(state["_growth_tracker"]);
  NoGradGuard no_grad;
  if (scale_.defined()) scale_.fill_(state["scale"]);
  if (growth_tracker_.defined()) growth_tracker_.fill_(loaded_tracker_);
  if (skipped_.defined()) skipped_.zero_();
}

}  // namespace tandem::amp

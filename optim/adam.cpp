// Adam: options and state, and the step Adam and AdamW share: each group's
// parameters bucketed by device and dtype, one multi-tensor kernel per
// bucket, the step counts kept on the cpu (or, fused, on the device).
#include "optim/adam.h"

#include "kernels/optim.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/runtime.h"

namespace tandem::optim {

// ---------------------------------------------------------------- options

namespace detail {

OrderedDict<std::string, double> adam_options_dict(double lr, const std::tuple<double, double>& betas, double eps,
                                                   double weight_decay, bool amsgrad, bool maximize) {
  return {{"lr", lr},
          {"beta1", std::get<0>(betas)},
          {"beta2", std::get<1>(betas)},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

void validate_adam_options(double lr, const std::tuple<double, double>& betas, double eps, double weight_decay) {
  const auto [beta1, beta2] = betas;
  TANDEM_CHECK(lr >= 0, ValueError, "Invalid learning rate: ", lr);
  TANDEM_CHECK(eps >= 0, ValueError, "Invalid epsilon value: ", eps);
  TANDEM_CHECK(beta1 >= 0 && beta1 < 1, ValueError, "Invalid beta parameter at index 0: ", beta1);
  TANDEM_CHECK(beta2 >= 0 && beta2 < 1, ValueError, "Invalid beta parameter at index 1: ", beta2);
  TANDEM_CHECK(weight_decay >= 0, ValueError, "Invalid weight_decay value: ", weight_decay);
}

}  // namespace detail

AdamOptions::AdamOptions(double lr) : lr_(lr) {}

OrderedDict<std::string, double> AdamOptions::to_dict() const {
  return detail::adam_options_dict(lr(), betas(), eps(), weight_decay(), amsgrad(), maximize());
}

void AdamOptions::set(const std::string& key, double value) {
  detail::set_adam_option(*this, "AdamOptions", key, value);
}

void AdamOptions::validate() const { detail::validate_adam_options(lr(), betas(), eps(), weight_decay()); }

// ---------------------------------------------------------------- state

std::unique_ptr<OptimizerParamState> AdamParamState::clone() const { return std::make_unique<AdamParamState>(*this); }

OrderedDict<std::string, Tensor> AdamParamState::to_dict() const {
  OrderedDict<std::string, Tensor> out;
  out.insert("step", step());
  out.insert("exp_avg", exp_avg());
  out.insert("exp_avg_sq", exp_avg_sq());
  if (max_exp_avg_sq().defined()) out.insert("max_exp_avg_sq", max_exp_avg_sq());
  return out;
}

// ---------------------------------------------------------------- step

namespace detail {

namespace {

// The step count as a double (PyTorch's step_t.item()). A float32 cpu
// scalar, the usual case, is read directly; any other goes through item().
double read_step(const Tensor& step) {
  if (step.is_cpu() && step.dtype() == kFloat32 && step.numel() == 1) return *step.data_ptr<float>();
  return step.item<double>();
}

// step_t += 1, in the step tensor's own dtype and place.
void increment_step(Tensor& step) {
  if (step.is_cpu() && step.dtype() == kFloat32 && step.numel() == 1) {
    *step.data_ptr<float>() += 1.0f;
  } else {
    step.add_(1);
  }
}

}  // namespace

Tensor AdamFamily::adam_step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  update(Tensor(), Tensor());
  return loss;
}

bool AdamFamily::supports_amp_scaling() const {
  for (const auto& group : param_groups_)
    if (!fused(group.options())) return false;
  return true;
}

void AdamFamily::step_unless_found_inf(const Tensor& found_inf, const Tensor& grad_scale) {
  TANDEM_CHECK(supports_amp_scaling(), NotImplementedError, name(),
               ": step_unless_found_inf needs fused(true) in every group (a skipped step must leave the step counts "
               "unchanged, which only counts on the device can do without a wait); amp::GradScaler::step steps an "
               "unfused ",
               name(), " after reading the flag");
  check_amp_args(name(), found_inf, grad_scale);
  update(found_inf, grad_scale);
}

void AdamFamily::update(const Tensor& found_inf, const Tensor& grad_scale) {
  NoGradGuard no_grad;
  int64_t index = 0;
  for (auto& group : param_groups_) {
    const fn::AdamHyper h = hyper(group.options());
    const bool counts_on_device = fused(group.options());
    std::vector<UpdateBucket> buckets;
    // State made for this step joins state_ once the kernels ran; every
    // updated parameter's host step count is incremented then (a fused
    // group's kernels increment theirs).
    std::vector<std::pair<const TensorImpl*, std::unique_ptr<AdamParamState>>> made;
    std::vector<AdamParamState*> stepped;
    for (const Tensor& p : group.params()) {
      const int64_t i = index++;
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      AdamParamState* state = nullptr;
      if (auto it = state_.find(p.impl()); it != state_.end()) {
        state = static_cast<AdamParamState*>(it->second.get());
      } else {
        auto fresh = std::make_unique<AdamParamState>();
        fresh->step(zeros({}, TensorOptions(kFloat32).device(counts_on_device ? p.device() : Device(kCPU))));
        fresh->exp_avg(zeros(p.sizes(), p.options()));
        fresh->exp_avg_sq(zeros(p.sizes(), p.options()));
        label_state(fresh->exp_avg(), name(), "made by step()");
        label_state(fresh->exp_avg_sq(), name(), "made by step()");
        state = fresh.get();
        made.emplace_back(p.impl(), std::move(fresh));
      }
      // amsgrad switched on after earlier steps: the maximum starts at zero.
      if (h.amsgrad && !state->max_exp_avg_sq().defined()) {
        state->max_exp_avg_sq(zeros(p.sizes(), p.options()));
        label_state(state->max_exp_avg_sq(), name(), "made by step()");
      }
      UpdateBucket* bucket;
      if (h.amsgrad)
        bucket =
            &bucket_for(buckets, name(), i, p, grad, {state->exp_avg(), state->exp_avg_sq(), state->max_exp_avg_sq()},
                        {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
      else
        bucket = &bucket_for(buckets, name(), i, p, grad, {state->exp_avg(), state->exp_avg_sq()},
                             {"exp_avg", "exp_avg_sq"});
      if (counts_on_device) {
        // A count on the cpu (loaded, or made by an unfused step) moves to the
        // parameter's device once, as PyTorch's fused Adam moves it on load.
        const Tensor& step = state->step();
        if ((step.is_cpu() && !p.is_cpu()) || step.dtype() != kFloat32 || step.dim() != 0) {
          state->step(step.to(p.device(), kFloat32, false, /*copy=*/true).reshape({}));
          label_state(state->step(), name(), "moved to the parameter's device by a fused step()");
        }
        check_state_device(name(), i, p, "step", state->step());
        bucket->device_steps.push_back(state->step());
      } else {
        bucket->steps.push_back(read_step(state->step()) + 1);
        stepped.push_back(state);
      }
    }
    static const std::vector<Tensor> kNone;
    static const std::vector<double> kNoSteps;
    for (auto& b : buckets) {
      const std::vector<Tensor>& max_exp_avg_sqs = h.amsgrad ? b.states[2] : kNone;
      dispatch(b.device, cpu::adam_step, cuda::adam_step, b.params, b.grads, b.states[0], b.states[1], max_exp_avg_sqs,
               counts_on_device ? kNoSteps : b.steps, counts_on_device ? b.device_steps : kNone, h,
               detail::on_device(found_inf, b.device), detail::on_device(grad_scale, b.device));
      finish_bucket(b, grad_scale.defined());
    }
    for (AdamParamState* state : stepped) increment_step(state->step());
    for (auto& [impl, state] : made) state_[impl] = std::move(state);
  }
}

void AdamFamily::check_state(const OrderedDict<std::string, Tensor>& saved, const Tensor& param, int64_t index) const {
  check_state_keys(saved, name(), {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}, index);
  const Tensor step = saved_state(saved, name(), "step", param, index);
  TANDEM_CHECK(step.numel() == 1, ShapeError, name(), ".load_state_dict: state 'step' of parameter ", index, " has ",
               step.numel(), " elements; it is the parameter's step count, one number");
  saved_state(saved, name(), "exp_avg", param, index);
  saved_state(saved, name(), "exp_avg_sq", param, index);
  if (saved.contains("max_exp_avg_sq")) saved_state(saved, name(), "max_exp_avg_sq", param, index);
}

std::unique_ptr<OptimizerParamState> AdamFamily::make_state(const OrderedDict<std::string, Tensor>& saved,
                                                            const Tensor&, int64_t) const {
  auto state = std::make_unique<AdamParamState>();
  state->step(saved["step"]);
  state->exp_avg(saved["exp_avg"]);
  state->exp_avg_sq(saved["exp_avg_sq"]);
  if (const Tensor* max_exp_avg_sq = saved.find("max_exp_avg_sq")) state->max_exp_avg_sq(*max_exp_avg_sq);
  return state;
}

}  // namespace detail

// ---------------------------------------------------------------- Adam

Adam::Adam(std::vector<OptimizerParamGroup> param_groups, AdamOptions defaults)
    : AdamFamily(std::move(param_groups), std::make_unique<AdamOptions>(defaults)) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions defaults)
    : Adam(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

bool Adam::fused(const OptimizerOptions& options) const { return static_cast<const AdamOptions&>(options).fused(); }

fn::AdamHyper Adam::hyper(const OptimizerOptions& options) const {
  const auto& o = static_cast<const AdamOptions&>(options);
  return {o.lr(),      std::get<0>(o.betas()), std::get<1>(o.betas()),          o.eps(), o.weight_decay(),
          o.amsgrad(), o.maximize(),           /*decoupled_weight_decay=*/false};
}

}  // namespace tandem::optim

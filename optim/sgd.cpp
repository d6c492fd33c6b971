// SGD: options, state, and the step that buckets each group's parameters
// by device and dtype and runs one multi-tensor kernel per bucket.
#include "optim/sgd.h"

#include "kernels/optim.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/runtime.h"

namespace tandem::optim {

SGDOptions::SGDOptions(double lr) : lr_(lr) {}

OrderedDict<std::string, double> SGDOptions::to_dict() const {
  return {{"lr", lr()},
          {"momentum", momentum()},
          {"dampening", dampening()},
          {"weight_decay", weight_decay()},
          {"nesterov", nesterov() ? 1.0 : 0.0},
          {"maximize", maximize() ? 1.0 : 0.0}};
}

void SGDOptions::set(const std::string& key, double value) {
  if (key == "lr")
    lr(value);
  else if (key == "momentum")
    momentum(value);
  else if (key == "dampening")
    dampening(value);
  else if (key == "weight_decay")
    weight_decay(value);
  else if (key == "nesterov")
    nesterov(value != 0);
  else if (key == "maximize")
    maximize(value != 0);
  else
    detail::throw_unknown_option("SGDOptions", key, to_dict());
}

void SGDOptions::validate() const {
  TANDEM_CHECK(lr() >= 0, ValueError, "Invalid learning rate: ", lr());
  TANDEM_CHECK(momentum() >= 0, ValueError, "Invalid momentum value: ", momentum());
  TANDEM_CHECK(weight_decay() >= 0, ValueError, "Invalid weight_decay value: ", weight_decay());
  TANDEM_CHECK(!nesterov() || (momentum() > 0 && dampening() == 0), ValueError,
               "Nesterov momentum requires a momentum and zero dampening (momentum=", momentum(),
               ", dampening=", dampening(), ")");
}

std::unique_ptr<OptimizerParamState> SGDParamState::clone() const { return std::make_unique<SGDParamState>(*this); }

OrderedDict<std::string, Tensor> SGDParamState::to_dict() const {
  OrderedDict<std::string, Tensor> out;
  if (momentum_buffer().defined()) out.insert("momentum_buffer", momentum_buffer());
  return out;
}

SGD::SGD(std::vector<OptimizerParamGroup> param_groups, SGDOptions defaults)
    : Optimizer(std::move(param_groups), std::make_unique<SGDOptions>(defaults)) {}

SGD::SGD(std::vector<Tensor> params, SGDOptions defaults)
    : SGD(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

Tensor SGD::step(LossClosure closure) {
  Tensor loss = run_closure(closure);
  update(Tensor(), Tensor());
  return loss;
}

bool SGD::supports_amp_scaling() const {
  for (const auto& group : param_groups_)
    if (static_cast<const SGDOptions&>(group.options()).dampening() != 0) return false;
  return true;
}

void SGD::step_unless_found_inf(const Tensor& found_inf, const Tensor& grad_scale) {
  TANDEM_CHECK(supports_amp_scaling(), NotImplementedError,
               "SGD: step_unless_found_inf needs dampening 0 in every group (a skipped step's fresh momentum buffer "
               "would then take dampening on the next); use amp::GradScaler::step, which steps such an SGD after "
               "reading the flag");
  detail::check_amp_args(name(), found_inf, grad_scale);
  update(found_inf, grad_scale);
}

void SGD::update(const Tensor& found_inf, const Tensor& grad_scale) {
  NoGradGuard no_grad;
  int64_t index = 0;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    const fn::SgdHyper h{o.lr(), o.momentum(), o.dampening(), o.weight_decay(), o.nesterov(), o.maximize()};
    const bool has_momentum = o.momentum() != 0;
    std::vector<detail::UpdateBucket> buckets;
    // Buffers made for this step join the state once the kernels ran.
    std::vector<std::pair<const TensorImpl*, Tensor>> made;
    for (const Tensor& p : group.params()) {
      const int64_t i = index++;
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      if (!has_momentum) {
        detail::bucket_for(buckets, name(), i, p, grad, {}, {}).fresh.push_back(0);
        continue;
      }
      Tensor buffer;
      if (auto it = state_.find(p.impl()); it != state_.end())
        buffer = static_cast<const SGDParamState&>(*it->second).momentum_buffer();
      const bool fresh = !buffer.defined();
      if (fresh) {
        // Contiguous, on the parameter's device, zeroed: the kernel decays
        // it by 0 and adds d_p (fn::SgdTensorScalars).
        buffer = zeros(p.sizes(), p.options());
        detail::label_state(buffer, name(), "made by step()");
        made.emplace_back(p.impl(), buffer);
      }
      detail::bucket_for(buckets, name(), i, p, grad, {buffer}, {"momentum_buffer"}).fresh.push_back(fresh);
    }
    static const std::vector<Tensor> kNoBuffers;
    for (auto& b : buckets) {
      const std::vector<Tensor>& buffers = has_momentum ? b.states[0] : kNoBuffers;
      dispatch(b.device, cpu::sgd_step, cuda::sgd_step, b.params, b.grads, buffers, b.fresh, h,
               detail::on_device(found_inf, b.device), detail::on_device(grad_scale, b.device));
      detail::finish_bucket(b, grad_scale.defined());
    }
    for (auto& [impl, buffer] : made) {
      auto& slot = state_[impl];
      if (!slot) slot = std::make_unique<SGDParamState>();
      static_cast<SGDParamState&>(*slot).momentum_buffer(buffer);
    }
  }
}

void SGD::check_state(const OrderedDict<std::string, Tensor>& saved, const Tensor& param, int64_t index) const {
  detail::check_state_keys(saved, name(), {"momentum_buffer"}, index);
  if (saved.contains("momentum_buffer")) detail::saved_state(saved, name(), "momentum_buffer", param, index);
}

std::unique_ptr<OptimizerParamState> SGD::make_state(const OrderedDict<std::string, Tensor>& saved, const Tensor&,
                                                     int64_t) const {
  auto state = std::make_unique<SGDParamState>();
  if (const Tensor* buffer = saved.find("momentum_buffer")) state->momentum_buffer(*buffer);
  return state;
}

}  // namespace tandem::optim

// optim::Adam (torch.optim.Adam, libtorch's names), and the step it shares
// with optim::AdamW (optim/adamw.h):
//   optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3).betas({0.9, 0.999}));
#pragma once

#include <tuple>
#include <vector>

#include "kernels/functors/optim.h"
#include "optim/optimizer.h"

namespace tandem::optim {

struct AdamOptions : public OptimizerCloneableOptions<AdamOptions> {
  using betas_t = std::tuple<double, double>;
  AdamOptions(double lr = 1e-3);  // NOLINT(google-explicit-constructor)
  TANDEM_ARG(double, lr) = 1e-3;
  TANDEM_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TANDEM_ARG(double, eps) = 1e-8;
  TANDEM_ARG(double, weight_decay) = 0;
  TANDEM_ARG(bool, amsgrad) = false;
  TANDEM_ARG(bool, maximize) = false;  // PyTorch's: ascend the objective
  // PyTorch's fused Adam's contract: the step counts live on the parameters'
  // devices (float32 scalars) and the kernel computes the bias corrections
  // there, so that amp::GradScaler can skip a step on the device and a
  // whole mixed-precision step makes no host synchronisation
  // (supports_amp_scaling). Every Tandem step is one multi-tensor kernel,
  // fused or not; without it the counts stay on the cpu, as in PyTorch's
  // default Adam, and the GradScaler reads its flag once a step.
  TANDEM_ARG(bool, fused) = false;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(double lr) override { this->lr(lr); }
  // lr, beta1, beta2, eps, weight_decay, amsgrad, maximize (not fused: how
  // the step runs belongs to the program, not to a saved state)
  OrderedDict<std::string, double> to_dict() const override;
  void set(const std::string& key, double value) override;
  // PyTorch's checks: "Invalid learning rate", "Invalid epsilon value",
  // "Invalid beta parameter at index 0/1", "Invalid weight_decay value".
  void validate() const override;
};

// Adam's and AdamW's per-parameter state. step is a float32 scalar on the
// cpu, as PyTorch's (not capturable) Adam keeps it, or on the parameter's
// device with fused(true): load_state_dict puts it there, as PyTorch's fused
// Adam does, and a count an unfused step made on the cpu moves there at the
// next fused step.
struct AdamParamState : public OptimizerParamState {
  TANDEM_ARG(Tensor, step);
  TANDEM_ARG(Tensor, exp_avg);
  TANDEM_ARG(Tensor, exp_avg_sq);
  TANDEM_ARG(Tensor, max_exp_avg_sq);  // amsgrad only

 public:
  std::unique_ptr<OptimizerParamState> clone() const override;
  // "step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq" (when defined)
  OrderedDict<std::string, Tensor> to_dict() const override;
};

namespace detail {

// The step and state of Adam and AdamW, which differ in their options'
// types and in how weight decay applies (fn::AdamHyper).
class AdamFamily : public Optimizer {
 protected:
  using Optimizer::Optimizer;
  virtual fn::AdamHyper hyper(const OptimizerOptions& options) const = 0;
  virtual bool fused(const OptimizerOptions& options) const = 0;

 public:
  // Every group fused(true).
  bool supports_amp_scaling() const override;
  bool steps_on_device(const OptimizerOptions& options) const override { return fused(options); }
  void step_unless_found_inf(const Tensor& found_inf, const Tensor& grad_scale = Tensor()) override;

 protected:
  // For each parameter with a gradient (PyTorch's _single_tensor_adam, fused):
  //   step += 1; d = grad (+ weight_decay * p for Adam; AdamW first does
  //   p *= 1 - lr * weight_decay); m = beta1 m + (1 - beta1) d;
  //   v = beta2 v + (1 - beta2) d^2; (amsgrad: v_max = max(v_max, v), used for v)
  //   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
  Tensor adam_step(const LossClosure& closure);
  // One step over every group; found_inf and grad_scale as
  // step_unless_found_inf's, or undefined.
  void update(const Tensor& found_inf, const Tensor& grad_scale);
  void check_state(const OrderedDict<std::string, Tensor>& saved, const Tensor& param, int64_t index) const override;
  std::unique_ptr<OptimizerParamState> make_state(const OrderedDict<std::string, Tensor>& saved, const Tensor& param,
                                                  int64_t index) const override;
};

// Options shared by AdamOptions and AdamWOptions, by key.
OrderedDict<std::string, double> adam_options_dict(double lr, const std::tuple<double, double>& betas, double eps,
                                                   double weight_decay, bool amsgrad, bool maximize);
void validate_adam_options(double lr, const std::tuple<double, double>& betas, double eps, double weight_decay);

// OptimizerOptions::set of AdamOptions and AdamWOptions (`type` names it in
// the KeyError).
template <typename Options>
void set_adam_option(Options& o, const char* type, const std::string& key, double value) {
  if (key == "lr")
    o.lr(value);
  else if (key == "beta1")
    std::get<0>(o.betas()) = value;
  else if (key == "beta2")
    std::get<1>(o.betas()) = value;
  else if (key == "eps")
    o.eps(value);
  else if (key == "weight_decay")
    o.weight_decay(value);
  else if (key == "amsgrad")
    o.amsgrad(value != 0);
  else if (key == "maximize")
    o.maximize(value != 0);
  else
    throw_unknown_option(type, key, o.to_dict());
}

}  // namespace detail

class Adam : public detail::AdamFamily {
 public:
  Adam(std::vector<OptimizerParamGroup> param_groups, AdamOptions defaults = {});
  Adam(std::vector<Tensor> params, AdamOptions defaults = {});

  const char* name() const override { return "Adam"; }
  Tensor step(LossClosure closure = nullptr) override { return adam_step(closure); }

 protected:
  fn::AdamHyper hyper(const OptimizerOptions& options) const override;
  bool fused(const OptimizerOptions& options) const override;
};

}  // namespace tandem::optim

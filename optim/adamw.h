// optim::AdamW: Adam with decoupled weight decay (torch.optim.AdamW,
// libtorch's names); the step is Adam's (optim/adam.h) with
// p *= 1 - lr * weight_decay before the moments instead of an L2 term.
//   optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3).weight_decay(1e-2));
#pragma once

#include <tuple>
#include <vector>

#include "optim/adam.h"

namespace tandem::optim {

struct AdamWOptions : public OptimizerCloneableOptions<AdamWOptions> {
  using betas_t = std::tuple<double, double>;
  AdamWOptions(double lr = 1e-3);  // NOLINT(google-explicit-constructor)
  TANDEM_ARG(double, lr) = 1e-3;
  TANDEM_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TANDEM_ARG(double, eps) = 1e-8;
  TANDEM_ARG(double, weight_decay) = 1e-2;
  TANDEM_ARG(bool, amsgrad) = false;
  TANDEM_ARG(bool, maximize) = false;
  TANDEM_ARG(bool, fused) = false;  // as AdamOptions::fused

 public:
  double get_lr() const override { return lr(); }
  void set_lr(double lr) override { this->lr(lr); }
  // lr, beta1, beta2, eps, weight_decay, amsgrad, maximize
  OrderedDict<std::string, double> to_dict() const override;
  void set(const std::string& key, double value) override;
  void validate() const override;  // Adam's checks and messages
};

class AdamW : public detail::AdamFamily {
 public:
  AdamW(std::vector<OptimizerParamGroup> param_groups, AdamWOptions defaults = {});
  AdamW(std::vector<Tensor> params, AdamWOptions defaults = {});

  const char* name() const override { return "AdamW"; }
  Tensor step(LossClosure closure = nullptr) override { return adam_step(closure); }

 protected:
  fn::AdamHyper hyper(const OptimizerOptions& options) const override;
  bool fused(const OptimizerOptions& options) const override;
};

}  // namespace tandem::optim

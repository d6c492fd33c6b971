// AdamW: its options (weight_decay defaults to 1e-2) and its hyperparameters
// for the step it shares with Adam (optim/adam.cpp).
#include "optim/adamw.h"

namespace tandem::optim {

AdamWOptions::AdamWOptions(double lr) : lr_(lr) {}

OrderedDict<std::string, double> AdamWOptions::to_dict() const {
  return detail::adam_options_dict(lr(), betas(), eps(), weight_decay(), amsgrad(), maximize());
}

void AdamWOptions::set(const std::string& key, double value) {
  detail::set_adam_option(*this, "AdamWOptions", key, value);
}

void AdamWOptions::validate() const { detail::validate_adam_options(lr(), betas(), eps(), weight_decay()); }

AdamW::AdamW(std::vector<OptimizerParamGroup> param_groups, AdamWOptions defaults)
    : AdamFamily(std::move(param_groups), std::make_unique<AdamWOptions>(defaults)) {}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions defaults)
    : AdamW(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

fn::AdamHyper AdamW::hyper(const OptimizerOptions& options) const {
  const auto& o = static_cast<const AdamWOptions&>(options);
  return {o.lr(),      std::get<0>(o.betas()), std::get<1>(o.betas()),         o.eps(), o.weight_decay(),
          o.amsgrad(), o.maximize(),           /*decoupled_weight_decay=*/true};
}

bool AdamW::fused(const OptimizerOptions& options) const { return static_cast<const AdamWOptions&>(options).fused(); }

}  // namespace tandem::optim

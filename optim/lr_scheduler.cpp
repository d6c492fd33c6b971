// The schedulers' step and state, and each schedule's chainable formula as
// torch/optim/lr_scheduler.py (1.13) writes it, operation for operation.
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tandem::optim {

// ---------------------------------------------------------------- base

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& group : optimizer_.param_groups()) {
    if (!group.extra().contains("initial_lr")) group.extra().insert("initial_lr", group.options().get_lr());
    base_lrs_.push_back(group.extra()["initial_lr"]);
  }
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> lrs;
  for (const auto& group : optimizer_.param_groups()) lrs.push_back(group.options().get_lr());
  return lrs;
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  std::vector<double> lrs;
  try {
    lrs = get_lrs();
  } catch (...) {
    --last_epoch_;
    --step_count_;
    throw;
  }
  auto& groups = optimizer_.param_groups();
  TANDEM_INTERNAL_ASSERT(lrs.size() == groups.size(), "one lr per group");
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(lrs[g]);
  last_lr_ = current_lrs();
}

LRSchedulerState LRScheduler::state_dict() const {
  LRSchedulerState state;
  state.values.insert("last_epoch", static_cast<double>(last_epoch_));
  state.values.insert("_step_count", static_cast<double>(step_count_));
  state.lists.insert("base_lrs", base_lrs_);
  state.lists.insert("_last_lr", last_lr_);
  save_state(state);
  return state;
}

double LRScheduler::value(const LRSchedulerState& state, const std::string& key) const {
  const double* v = state.values.find(key);
  TANDEM_CHECK(v != nullptr, KeyError, name(), ".load_state_dict: the state has no '", key,
               "' (was it saved from another scheduler?)");
  return *v;
}

const std::vector<double>& LRScheduler::list(const LRSchedulerState& state, const std::string& key) const {
  const std::vector<double>* v = state.lists.find(key);
  TANDEM_CHECK(v != nullptr, KeyError, name(), ".load_state_dict: the state has no list '", key,
               "' (was it saved from another scheduler?)");
  return *v;
}

void LRScheduler::check_state_dict(const LRSchedulerState& state) const {
  const size_t groups = optimizer_.param_groups().size();
  const auto& base = list(state, "base_lrs");
  const auto& last = list(state, "_last_lr");
  TANDEM_CHECK(base.size() == groups && last.size() == groups, ValueError, name(), ".load_state_dict: the state ",
               "has ", base.size(), " base_lrs and ", last.size(), " _last_lr, but the optimizer has ", groups,
               " parameter groups");
  value(state, "last_epoch");
  value(state, "_step_count");
  check_state(state);
}

void LRScheduler::load_state_dict(const LRSchedulerState& state) {
  check_state_dict(state);
  load_state(state);
  last_epoch_ = static_cast<int64_t>(value(state, "last_epoch"));
  step_count_ = static_cast<int64_t>(value(state, "_step_count"));
  base_lrs_ = list(state, "base_lrs");
  last_lr_ = list(state, "_last_lr");
}

// ---------------------------------------------------------------- StepLR

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TANDEM_CHECK(step_size > 0, ValueError, "StepLR: step_size must be a positive number of epochs, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lrs() {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

void StepLR::save_state(LRSchedulerState& state) const {
  state.values.insert("step_size", static_cast<double>(step_size_));
  state.values.insert("gamma", gamma_);
}

void StepLR::check_state(const LRSchedulerState& state) const {
  const auto step_size = static_cast<int64_t>(value(state, "step_size"));
  TANDEM_CHECK(step_size > 0, ValueError, "StepLR.load_state_dict: step_size must be positive, got ", step_size);
  value(state, "gamma");
}

void StepLR::load_state(const LRSchedulerState& state) {
  step_size_ = static_cast<int64_t>(value(state, "step_size"));
  gamma_ = value(state, "gamma");
}

// ---------------------------------------------------------------- MultiStepLR

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lrs() {
  std::vector<double> lrs = current_lrs();
  const auto count = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (count == 0) return lrs;
  for (double& lr : lrs) lr = lr * std::pow(gamma_, static_cast<double>(count));
  return lrs;
}

void MultiStepLR::save_state(LRSchedulerState& state) const {
  state.values.insert("gamma", gamma_);
  state.lists.insert("milestones", std::vector<double>(milestones_.begin(), milestones_.end()));
}

void MultiStepLR::check_state(const LRSchedulerState& state) const {
  value(state, "gamma");
  list(state, "milestones");
}

void MultiStepLR::load_state(const LRSchedulerState& state) {
  gamma_ = value(state, "gamma");
  const auto& milestones = list(state, "milestones");
  milestones_.assign(milestones.begin(), milestones.end());
  std::sort(milestones_.begin(), milestones_.end());
}

// ---------------------------------------------------------------- CosineAnnealingLR

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  TANDEM_CHECK(T_max > 0, ValueError, "CosineAnnealingLR: T_max must be a positive number of iterations, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lrs() {
  constexpr double pi = std::numbers::pi;
  std::vector<double> lrs = current_lrs();
  const double t_max = static_cast<double>(T_max_), epoch = static_cast<double>(last_epoch_);
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) {
    for (size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = eta_min_ + (base_lrs_[g] - eta_min_) * (1 + std::cos(epoch * pi / t_max)) / 2;
    return lrs;
  }
  // Python's %: the result takes the divisor's sign.
  const int64_t period = 2 * T_max_;
  if ((((last_epoch_ - 1 - T_max_) % period) + period) % period == 0) {
    for (size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = lrs[g] + (base_lrs_[g] - eta_min_) * (1 - std::cos(pi / t_max)) / 2;
    return lrs;
  }
  for (double& lr : lrs)
    lr = (1 + std::cos(pi * epoch / t_max)) / (1 + std::cos(pi * (epoch - 1) / t_max)) * (lr - eta_min_) + eta_min_;
  return lrs;
}

void CosineAnnealingLR::save_state(LRSchedulerState& state) const {
  state.values.insert("T_max", static_cast<double>(T_max_));
  state.values.insert("eta_min", eta_min_);
}

void CosineAnnealingLR::check_state(const LRSchedulerState& state) const {
  const auto t_max = static_cast<int64_t>(value(state, "T_max"));
  TANDEM_CHECK(t_max > 0, ValueError, "CosineAnnealingLR.load_state_dict: T_max must be positive, got ", t_max);
  value(state, "eta_min");
}

void CosineAnnealingLR::load_state(const LRSchedulerState& state) {
  T_max_ = static_cast<int64_t>(value(state, "T_max"));
  eta_min_ = value(state, "eta_min");
}

// ---------------------------------------------------------------- LinearLR

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  TANDEM_CHECK(start_factor <= 1.0 && start_factor >= 0, ValueError,
               "Starting multiplicative factor expected to be between 0 and 1. (got ", start_factor, ")");
  TANDEM_CHECK(end_factor <= 1.0 && end_factor >= 0, ValueError,
               "Ending multiplicative factor expected to be between 0 and 1. (got ", end_factor, ")");
  initial_step();
}

std::vector<double> LinearLR::get_lrs() {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double total = static_cast<double>(total_iters_), epoch = static_cast<double>(last_epoch_);
  for (double& lr : lrs)
    lr = lr *
         (1. + (end_factor_ - start_factor_) / (total * start_factor_ + (epoch - 1) * (end_factor_ - start_factor_)));
  return lrs;
}

void LinearLR::save_state(LRSchedulerState& state) const {
  state.values.insert("start_factor", start_factor_);
  state.values.insert("end_factor", end_factor_);
  state.values.insert("total_iters", static_cast<double>(total_iters_));
}

void LinearLR::check_state(const LRSchedulerState& state) const {
  value(state, "start_factor");
  value(state, "end_factor");
  value(state, "total_iters");
}

void LinearLR::load_state(const LRSchedulerState& state) {
  start_factor_ = value(state, "start_factor");
  end_factor_ = value(state, "end_factor");
  total_iters_ = static_cast<int64_t>(value(state, "total_iters"));
}

// ---------------------------------------------------------------- OneCycleLR

namespace {

// PyTorch's _format_param: one value for every group, or one per group.
std::vector<double> per_group(const char* name, const std::vector<double>& values, bool per_group_given,
                              size_t groups) {
  if (!per_group_given) return std::vector<double>(groups, values.at(0));
  TANDEM_CHECK(values.size() == groups, ValueError, "expected ", groups, " values for ", name, ", got ", values.size());
  return values;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& options) : LRScheduler(optimizer) {
  const auto& o = options;
  if (o.total_steps().has_value()) {
    TANDEM_CHECK(*o.total_steps() > 0, ValueError, "Expected positive integer total_steps, but got ", *o.total_steps());
    total_steps_ = *o.total_steps();
  } else {
    TANDEM_CHECK(o.epochs().has_value() && o.steps_per_epoch().has_value(), ValueError,
                 "You must define either total_steps OR (epochs AND steps_per_epoch)");
    TANDEM_CHECK(*o.epochs() > 0, ValueError, "Expected positive integer epochs, but got ", *o.epochs());
    TANDEM_CHECK(*o.steps_per_epoch() > 0, ValueError, "Expected positive integer steps_per_epoch, but got ",
                 *o.steps_per_epoch());
    total_steps_ = *o.epochs() * *o.steps_per_epoch();
  }
  TANDEM_CHECK(o.pct_start() >= 0 && o.pct_start() <= 1, ValueError,
               "Expected float between 0 and 1 pct_start, but got ", o.pct_start());
  TANDEM_CHECK(o.anneal_strategy() == "cos" || o.anneal_strategy() == "linear", ValueError,
               "anneal_strategy must by one of 'cos' or 'linear', instead got ", o.anneal_strategy());
  linear_ = o.anneal_strategy() == "linear";
  three_phase_ = o.three_phase();
  make_phases(o.pct_start());

  auto& groups = optimizer_.param_groups();
  const std::vector<double> max_lrs = per_group("max_lr", o.max_lr(), o.max_lr_per_group(), groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    auto& extra = groups[g].extra();
    const double initial_lr = max_lrs[g] / o.div_factor();
    extra.insert_or_assign("initial_lr", initial_lr);
    extra.insert_or_assign("max_lr", max_lrs[g]);
    extra.insert_or_assign("min_lr", initial_lr / o.final_div_factor());
    base_lrs_[g] = initial_lr;
  }

  cycle_momentum_ = o.cycle_momentum();
  if (cycle_momentum_) {
    const auto defaults = optimizer_.defaults().to_dict();
    TANDEM_CHECK(defaults.contains("momentum") || defaults.contains("beta1"), ValueError,
                 "optimizer must support momentum with `cycle_momentum` option enabled");
    use_beta1_ = defaults.contains("beta1");
    for (auto& group : groups) {
      group.options().set(use_beta1_ ? "beta1" : "momentum", o.max_momentum());
      group.extra().insert_or_assign("max_momentum", o.max_momentum());
      group.extra().insert_or_assign("base_momentum", o.base_momentum());
    }
  }
  initial_step();
}

void OneCycleLR::make_phases(double pct_start) {
  const double total = static_cast<double>(total_steps_);
  if (three_phase_) {
    phases_ = {{pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {2 * pct_start * total - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
               {total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  } else {
    phases_ = {{pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  }
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (linear_) return (end - start) * pct + start;
  const double cos_out = std::cos(std::numbers::pi * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

std::vector<double> OneCycleLR::get_lrs() {
  const int64_t step_num = last_epoch_;
  TANDEM_CHECK(step_num <= total_steps_, ValueError, "Tried to step ", step_num + 1,
               " times. The specified number of total steps is ", total_steps_,
               " (make total_steps, or epochs * steps_per_epoch, cover every scheduler.step())");
  std::vector<double> lrs;
  for (auto& group : optimizer_.param_groups()) {
    const auto& extra = group.extra();
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& phase = phases_[i];
      if (static_cast<double>(step_num) <= phase.end_step || i == phases_.size() - 1) {
        const double pct = (static_cast<double>(step_num) - start_step) / (phase.end_step - start_step);
        lr = anneal(extra[phase.start_lr], extra[phase.end_lr], pct);
        if (cycle_momentum_) momentum = anneal(extra[phase.start_momentum], extra[phase.end_momentum], pct);
        break;
      }
      start_step = phase.end_step;
    }
    lrs.push_back(lr);
    if (cycle_momentum_) group.options().set(use_beta1_ ? "beta1" : "momentum", momentum);
  }
  return lrs;
}

void OneCycleLR::save_state(LRSchedulerState& state) const {
  state.values.insert("total_steps", static_cast<double>(total_steps_));
  state.values.insert("anneal_strategy", linear_ ? 1.0 : 0.0);
  state.values.insert("cycle_momentum", cycle_momentum_ ? 1.0 : 0.0);
  state.values.insert("use_beta1", use_beta1_ ? 1.0 : 0.0);
  state.values.insert("three_phase", three_phase_ ? 1.0 : 0.0);
  std::vector<double> ends;
  for (const Phase& p : phases_) ends.push_back(p.end_step);
  state.lists.insert("phase_end_steps", ends);
}

void OneCycleLR::check_state(const LRSchedulerState& state) const {
  for (const char* key : {"total_steps", "anneal_strategy", "cycle_momentum", "use_beta1"}) value(state, key);
  const bool three = value(state, "three_phase") != 0;
  const auto& ends = list(state, "phase_end_steps");
  TANDEM_CHECK(ends.size() == (three ? 3u : 2u), ValueError, "OneCycleLR.load_state_dict: ", ends.size(),
               " phase_end_steps for ", three ? 3 : 2, " phases");
}

void OneCycleLR::load_state(const LRSchedulerState& state) {
  total_steps_ = static_cast<int64_t>(value(state, "total_steps"));
  linear_ = value(state, "anneal_strategy") != 0;
  cycle_momentum_ = value(state, "cycle_momentum") != 0;
  use_beta1_ = value(state, "use_beta1") != 0;
  three_phase_ = value(state, "three_phase") != 0;
  make_phases(0);
  const auto& ends = list(state, "phase_end_steps");
  for (size_t i = 0; i < phases_.size(); ++i) phases_[i].end_step = ends[i];
}

}  // namespace tandem::optim

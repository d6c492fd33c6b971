// Learning-rate schedulers: they set the lr of each parameter group of an
// optimizer, once per step(), with PyTorch's formulas (torch.optim.lr_scheduler,
// 1.13) and libtorch's call shape:
//
//   optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
//   optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (epoch ...) { train(...); opt.step() ...; sched.step(); }
//
// As in PyTorch, building a scheduler performs its first step (epoch 0), so
// the group lrs change at construction for LinearLR and OneCycleLR; a
// scheduler keeps each group's starting lr as "initial_lr" in the group
// (OptimizerParamGroup::extra, saved with the optimizer's state dict) and
// takes that as its base lr, so that schedulers built one after another on
// one optimizer (warm-up, then decay) share the same base, as PyTorch's do.
// step() uses PyTorch's chainable form (get_lr): each lr is computed from the
// group's current lr, so the values are PyTorch's to the last bit and other
// changes to the lr compose as they do there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace tandem::optim {

// A scheduler's state, flat, as PyTorch's scheduler.state_dict() (its
// attributes, without the optimizer):
//   values  "last_epoch", "_step_count", and the scheduler's numbers:
//             StepLR:            "step_size", "gamma"
//             MultiStepLR:       "gamma"
//             CosineAnnealingLR: "T_max", "eta_min"
//             LinearLR:          "start_factor", "end_factor", "total_iters"
//             OneCycleLR:        "total_steps", "anneal_strategy" (0 = 'cos',
//                                1 = 'linear'), "cycle_momentum", "use_beta1",
//                                "three_phase" (booleans as 0/1)
//   lists   "base_lrs", "_last_lr" (one value per group), and
//             MultiStepLR:       "milestones" (sorted, repeats kept)
//             OneCycleLR:        "phase_end_steps" (each phase's end_step)
struct LRSchedulerState {
  OrderedDict<std::string, double> values{"scheduler value"};
  OrderedDict<std::string, std::vector<double>> lists{"scheduler list"};
};

class LRScheduler {
 public:
  // Records each group's "initial_lr" (its lr, unless a scheduler already
  // recorded one) as the base lrs. The concrete constructor then calls
  // initial_step().
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual const char* name() const = 0;

  // Advances last_epoch and sets every group's lr to the schedule's value.
  void step();
  // The lrs the last step() set, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  LRSchedulerState state_dict() const;
  // Restores what state_dict() saved (KeyError for a missing entry,
  // ValueError when its group count differs from the optimizer's). The group
  // lrs are the optimizer's state: load it with the optimizer's state dict.
  // It runs check_state_dict first, so a state it refuses changes nothing.
  void load_state_dict(const LRSchedulerState& state);
  // Every check load_state_dict makes, with its errors, changing nothing.
  void check_state_dict(const LRSchedulerState& state) const;

 protected:
  // The lrs for last_epoch_ (already advanced), from the current ones: the
  // chainable form of PyTorch's get_lr().
  virtual std::vector<double> get_lrs() = 0;
  // The scheduler's own entries of its state (see LRSchedulerState):
  // check_state checks them with load_state_dict's errors, load_state takes
  // entries check_state accepted.
  virtual void save_state(LRSchedulerState& state) const = 0;
  virtual void check_state(const LRSchedulerState& state) const = 0;
  virtual void load_state(const LRSchedulerState& state) = 0;
  // PyTorch's _initial_step: the first step(), to epoch 0. Called last by
  // each concrete constructor (a base constructor cannot call get_lrs).
  void initial_step();
  // Each group's current lr.
  std::vector<double> current_lrs() const;
  // state.values[key] / state.lists[key], or a KeyError naming the scheduler.
  double value(const LRSchedulerState& state, const std::string& key) const;
  const std::vector<double>& list(const LRSchedulerState& state, const std::string& key) const;

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  std::vector<double> last_lr_;
};

// Multiplies each lr by gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  const char* name() const override { return "StepLR"; }

 protected:
  std::vector<double> get_lrs() override;
  void save_state(LRSchedulerState& state) const override;
  void check_state(const LRSchedulerState& state) const override;
  void load_state(const LRSchedulerState& state) override;

 private:
  int64_t step_size_;
  double gamma_;
};

// Multiplies each lr by gamma at each milestone epoch (gamma^k for a
// milestone listed k times).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  const char* name() const override { return "MultiStepLR"; }

 protected:
  std::vector<double> get_lrs() override;
  void save_state(LRSchedulerState& state) const override;
  void check_state(const LRSchedulerState& state) const override;
  void load_state(const LRSchedulerState& state) override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, through
// PyTorch's recursive form (which continues past T_max, rising again).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);
  const char* name() const override { return "CosineAnnealingLR"; }

 protected:
  std::vector<double> get_lrs() override;
  void save_state(LRSchedulerState& state) const override;
  void check_state(const LRSchedulerState& state) const override;
  void load_state(const LRSchedulerState& state) override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// Scales each lr by a factor going linearly from start_factor (epoch 0) to
// end_factor (epoch total_iters), then keeps it.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  const char* name() const override { return "LinearLR"; }

 protected:
  std::vector<double> get_lrs() override;
  void save_state(LRSchedulerState& state) const override;
  void check_state(const LRSchedulerState& state) const override;
  void load_state(const LRSchedulerState& state) override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// The options of OneCycleLR, PyTorch's arguments and defaults. max_lr is
// one value for every group or one per group; either total_steps or epochs
// and steps_per_epoch must be given.
struct OneCycleLROptions {
  OneCycleLROptions(double max_lr) : max_lr_{max_lr}, max_lr_per_group_(false) {}                         // NOLINT
  OneCycleLROptions(std::vector<double> max_lr) : max_lr_(std::move(max_lr)), max_lr_per_group_(true) {}  // NOLINT
  const std::vector<double>& max_lr() const { return max_lr_; }
  bool max_lr_per_group() const { return max_lr_per_group_; }

  TANDEM_ARG(std::optional<int64_t>, total_steps);
  TANDEM_ARG(std::optional<int64_t>, epochs);
  TANDEM_ARG(std::optional<int64_t>, steps_per_epoch);
  TANDEM_ARG(double, pct_start) = 0.3;
  TANDEM_ARG(std::string, anneal_strategy) = "cos";  // or "linear"
  TANDEM_ARG(bool, cycle_momentum) = true;
  TANDEM_ARG(double, base_momentum) = 0.85;
  TANDEM_ARG(double, max_momentum) = 0.95;
  TANDEM_ARG(double, div_factor) = 25;
  TANDEM_ARG(double, final_div_factor) = 1e4;
  TANDEM_ARG(bool, three_phase) = false;

 private:
  std::vector<double> max_lr_;
  bool max_lr_per_group_;
};

// The 1cycle policy: lr from max_lr / div_factor up to max_lr over
// pct_start of the steps, then down to initial_lr / final_div_factor (with
// three_phase: back to initial_lr first, then down); momentum (SGD's
// momentum, or Adam's beta1) cycles the other way between max_momentum and
// base_momentum. Stepping past total_steps is an error.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& options);
  const char* name() const override { return "OneCycleLR"; }

 protected:
  std::vector<double> get_lrs() override;
  void save_state(LRSchedulerState& state) const override;
  void check_state(const LRSchedulerState& state) const override;
  void load_state(const LRSchedulerState& state) override;

 private:
  struct Phase {
    double end_step;
    const char* start_lr;
    const char* end_lr;
    const char* start_momentum;
    const char* end_momentum;
  };
  void make_phases(double pct_start);
  double anneal(double start, double end, double pct) const;

  int64_t total_steps_;
  bool linear_;  // anneal_strategy 'linear' (else 'cos')
  bool three_phase_;
  bool cycle_momentum_;
  bool use_beta1_ = false;  // Adam's beta1 cycles (else SGD's momentum)
  std::vector<Phase> phases_;
};

}  // namespace tandem::optim

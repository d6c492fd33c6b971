// Learning-rate schedulers: each schedule's lr (and OneCycleLR's momentum or
// beta1) after construction and after every step against PyTorch 1.13
// (tests/data/optim_reference.txt from scripts/gen_optim_reference.py), a
// state round trip in the middle of each schedule, and every error.
#include <memory>

#include "helpers.h"
#include "optim_reference.h"

using namespace tandem;
using Catch::Contains;

namespace {

struct Setup {
  std::vector<Tensor> params;
  std::unique_ptr<optim::Optimizer> opt;
  std::vector<std::unique_ptr<optim::LRScheduler>> scheds;
};

double arg(const test::SchedCase& c, const std::string& key) { return std::stod(c.args.at(key)); }
int64_t int_arg(const test::SchedCase& c, const std::string& key) { return std::stoll(c.args.at(key)); }

std::unique_ptr<optim::Optimizer> make_optimizer(const test::SchedCase& c, std::vector<Tensor>& params, Device device) {
  std::vector<optim::OptimizerParamGroup> groups;
  for (double lr : c.lrs) {
    params.push_back(zeros({2}, TensorOptions(kFloat32).device(device)).requires_grad_());
    if (c.optimizer == "sgd")
      groups.emplace_back(std::vector<Tensor>{params.back()}, optim::SGDOptions(lr).momentum(0.9));
    else
      groups.emplace_back(std::vector<Tensor>{params.back()}, optim::AdamOptions(lr));
  }
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(groups, optim::SGDOptions(c.lrs[0]).momentum(0.9));
  return std::make_unique<optim::Adam>(groups, optim::AdamOptions(c.lrs[0]));
}

std::vector<std::unique_ptr<optim::LRScheduler>> make_schedulers(const test::SchedCase& c, optim::Optimizer& opt) {
  std::vector<std::unique_ptr<optim::LRScheduler>> s;
  if (c.kind == "StepLR") {
    s.push_back(std::make_unique<optim::StepLR>(opt, int_arg(c, "step_size"), arg(c, "gamma")));
  } else if (c.kind == "MultiStepLR") {
    std::vector<int64_t> milestones;
    for (double m : test::parse_list(c.args.at("milestones"))) milestones.push_back(static_cast<int64_t>(m));
    s.push_back(std::make_unique<optim::MultiStepLR>(opt, milestones, arg(c, "gamma")));
  } else if (c.kind == "CosineAnnealingLR") {
    s.push_back(std::make_unique<optim::CosineAnnealingLR>(opt, int_arg(c, "T_max"), arg(c, "eta_min")));
  } else if (c.kind == "LinearLR") {
    s.push_back(std::make_unique<optim::LinearLR>(opt, arg(c, "start_factor"), arg(c, "end_factor"),
                                                  int_arg(c, "total_iters")));
  } else if (c.kind == "OneCycleLR") {
    const std::vector<double> max_lr = test::parse_list(c.args.at("max_lr"));
    optim::OneCycleLROptions o = c.args.at("max_lr").find(',') != std::string::npos
                                     ? optim::OneCycleLROptions(max_lr)
                                     : optim::OneCycleLROptions(max_lr[0]);
    if (c.args.count("total_steps")) o.total_steps(int_arg(c, "total_steps"));
    if (c.args.count("epochs")) o.epochs(int_arg(c, "epochs"));
    if (c.args.count("steps_per_epoch")) o.steps_per_epoch(int_arg(c, "steps_per_epoch"));
    if (c.args.count("pct_start")) o.pct_start(arg(c, "pct_start"));
    if (c.args.count("anneal_strategy")) o.anneal_strategy(c.args.at("anneal_strategy"));
    if (c.args.count("div_factor")) o.div_factor(arg(c, "div_factor"));
    if (c.args.count("final_div_factor")) o.final_div_factor(arg(c, "final_div_factor"));
    if (c.args.count("three_phase")) o.three_phase(int_arg(c, "three_phase") != 0);
    if (c.args.count("cycle_momentum")) o.cycle_momentum(int_arg(c, "cycle_momentum") != 0);
    if (c.args.count("base_momentum")) o.base_momentum(arg(c, "base_momentum"));
    if (c.args.count("max_momentum")) o.max_momentum(arg(c, "max_momentum"));
    s.push_back(std::make_unique<optim::OneCycleLR>(opt, o));
  } else if (c.kind == "LinearLR+CosineAnnealingLR") {
    s.push_back(std::make_unique<optim::LinearLR>(opt, arg(c, "start_factor"), 1.0, int_arg(c, "total_iters")));
    s.push_back(std::make_unique<optim::CosineAnnealingLR>(opt, int_arg(c, "T_max"), arg(c, "eta_min")));
  } else {
    FAIL("unknown scheduler " << c.kind);
  }
  return s;
}

Setup setup(const test::SchedCase& c, Device device) {
  Setup s;
  s.opt = make_optimizer(c, s.params, device);
  s.scheds = make_schedulers(c, *s.opt);
  return s;
}

double momentum_of(const optim::OptimizerOptions& o) {
  const auto d = o.to_dict();
  return d.contains("beta1") ? d["beta1"] : d["momentum"];
}

// The optimizer's lrs and momenta equal the reference row, bit for bit: the
// schedules are PyTorch's double arithmetic, operation for operation.
void check_row(const Setup& s, const std::vector<double>& row) {
  const auto& groups = s.opt->param_groups();
  REQUIRE(row.size() == 2 * groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    INFO("group " << g);
    CHECK(groups[g].options().get_lr() == row[g]);
    CHECK(momentum_of(groups[g].options()) == row[groups.size() + g]);
    CHECK(s.scheds.back()->get_last_lr().at(g) == row[g]);
  }
}

void step(Setup& s) {
  s.opt->step();
  for (auto& sched : s.scheds) sched->step();
}

}  // namespace

DEVICE_TEST_CASE("schedulers give PyTorch's learning rates", "[scheduler][reference]") {
  const auto& cases = test::optim_reference().scheds;
  REQUIRE(cases.size() == 10);
  for (const auto& c : cases) {
    INFO(c.name);
    Setup s = setup(c, device);
    CHECK(s.scheds[0]->last_epoch() == 0);
    check_row(s, c.rows[0]);
    for (int64_t k = 1; k <= c.steps; ++k) {
      INFO("step " << k);
      step(s);
      CHECK(s.scheds[0]->last_epoch() == k);
      check_row(s, c.rows[k]);
    }
  }
}

DEVICE_TEST_CASE("scheduler and optimizer state round trip mid-schedule", "[scheduler][state]") {
  for (const auto& c : test::optim_reference().scheds) {
    INFO(c.name);
    const int64_t half = c.steps / 2;
    Setup a = setup(c, device);
    for (int64_t k = 1; k <= half; ++k) step(a);
    std::vector<optim::LRSchedulerState> saved;
    for (const auto& sched : a.scheds) saved.push_back(sched->state_dict());
    const optim::OptimizerStateDict saved_opt = a.opt->state_dict();
    CHECK(saved[0].values["last_epoch"] == static_cast<double>(half));
    CHECK(saved[0].values["_step_count"] == static_cast<double>(half + 1));
    CHECK(saved[0].lists["_last_lr"] == a.scheds[0]->get_last_lr());
    CHECK(saved_opt.param_groups[0].options.contains("initial_lr"));

    // A fresh optimizer and schedulers, as a resumed run builds them, then
    // both states loaded.
    Setup b = setup(c, device);
    b.opt->load_state_dict(saved_opt);
    for (size_t i = 0; i < b.scheds.size(); ++i) b.scheds[i]->load_state_dict(saved[i]);
    CHECK(b.scheds[0]->last_epoch() == half);
    CHECK(b.scheds[0]->base_lrs() == a.scheds[0]->base_lrs());
    check_row(b, c.rows[half]);
    for (int64_t k = half + 1; k <= c.steps; ++k) {
      INFO("step " << k);
      step(b);
      check_row(b, c.rows[k]);
    }
  }
}

DEVICE_TEST_CASE("get_last_lr and the base lrs", "[scheduler]") {
  Tensor p = zeros({2}, TensorOptions(kFloat32).device(device)).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  optim::LinearLR warmup(opt, 0.5, 1.0, 2);
  CHECK(warmup.get_last_lr() == std::vector<double>{0.05});
  CHECK(opt.param_groups()[0].extra()["initial_lr"] == 0.1);
  // A second scheduler takes the recorded initial lr as its base, not the
  // lr the first one already changed.
  optim::StepLR decay(opt, 1, 0.5);
  CHECK(decay.base_lrs() == std::vector<double>{0.1});
  CHECK(decay.get_last_lr() == std::vector<double>{0.05});
  warmup.step();
  decay.step();
  CHECK(opt.param_groups()[0].options().get_lr() == Approx(0.0375).epsilon(1e-15));
}

namespace {

// An optimizer whose options have no momentum, for OneCycleLR's check.
struct PlainOptions : public optim::OptimizerCloneableOptions<PlainOptions> {
  double lr = 0.1;
  double get_lr() const override { return lr; }
  void set_lr(double v) override { lr = v; }
  OrderedDict<std::string, double> to_dict() const override { return {{"lr", lr}}; }
  void set(const std::string&, double v) override { lr = v; }
  void validate() const override {}
};
struct Plain : public optim::Optimizer {
  explicit Plain(std::vector<Tensor> params)
      : Optimizer({optim::OptimizerParamGroup(std::move(params))}, std::make_unique<PlainOptions>()) {}
  const char* name() const override { return "Plain"; }
  Tensor step(LossClosure) override { return {}; }

 protected:
  void check_state(const OrderedDict<std::string, Tensor>&, const Tensor&, int64_t) const override {}
  std::unique_ptr<optim::OptimizerParamState> make_state(const OrderedDict<std::string, Tensor>&, const Tensor&,
                                                         int64_t) const override {
    return nullptr;
  }
};

}  // namespace

TEST_CASE("scheduler errors", "[scheduler][errors]") {
  Tensor p = zeros({2}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9));
  auto value_error = [](auto make, const std::string& message) {
    INFO(message);
    REQUIRE_THROWS_AS(make(), ValueError);
    REQUIRE_THROWS_WITH(make(), Contains(message));
  };
  value_error([&] { optim::StepLR(opt, 0); }, "StepLR: step_size must be a positive number of epochs, got 0");
  value_error([&] { optim::CosineAnnealingLR(opt, 0); },
              "CosineAnnealingLR: T_max must be a positive number of iterations, got 0");
  value_error([&] { optim::LinearLR(opt, 1.5); }, "Starting multiplicative factor expected to be between 0 and 1.");
  value_error([&] { optim::LinearLR(opt, 0.5, -1); }, "Ending multiplicative factor expected to be between 0 and 1.");
  using O = optim::OneCycleLROptions;
  value_error([&] { optim::OneCycleLR(opt, O(0.1)); },
              "You must define either total_steps OR (epochs AND steps_per_epoch)");
  value_error([&] { optim::OneCycleLR(opt, O(0.1).epochs(2)); },
              "You must define either total_steps OR (epochs AND steps_per_epoch)");
  value_error([&] { optim::OneCycleLR(opt, O(0.1).total_steps(0)); },
              "Expected positive integer total_steps, but got 0");
  value_error([&] { optim::OneCycleLR(opt, O(0.1).epochs(0).steps_per_epoch(3)); },
              "Expected positive integer epochs, but got 0");
  value_error([&] { optim::OneCycleLR(opt, O(0.1).epochs(2).steps_per_epoch(-1)); },
              "Expected positive integer steps_per_epoch, but got -1");
  value_error([&] { optim::OneCycleLR(opt, O(0.1).total_steps(10).pct_start(1.5)); },
              "Expected float between 0 and 1 pct_start, but got 1.5");
  value_error([&] { optim::OneCycleLR(opt, O(0.1).total_steps(10).anneal_strategy("exp")); },
              "anneal_strategy must by one of 'cos' or 'linear', instead got exp");
  value_error(
      [&] {
        optim::OneCycleLR(opt, O(std::vector<double>{0.1, 0.2}).total_steps(10));
      },
      "expected 1 values for max_lr, got 2");
  Plain plain({zeros({2}).requires_grad_()});
  value_error([&] { optim::OneCycleLR(plain, O(0.1).total_steps(10)); },
              "optimizer must support momentum with `cycle_momentum` option enabled");
  optim::OneCycleLR without(plain, O(0.1).total_steps(10).cycle_momentum(false));
  CHECK(plain.param_groups()[0].options().get_lr() == Approx(0.004));

  // Stepping past total_steps.
  optim::SGD opt2({zeros({2}).requires_grad_()}, optim::SGDOptions(0.1).momentum(0.9));
  optim::OneCycleLR cycle(opt2, O(0.1).total_steps(3));
  for (int k = 0; k < 3; ++k) cycle.step();
  value_error([&] { cycle.step(); }, "Tried to step 5 times. The specified number of total steps is 3");
  CHECK(cycle.last_epoch() == 3);  // the refused step changed nothing

  // Loading a state that does not fit: check_state_dict refuses it with
  // load_state_dict's error, and neither changes anything.
  optim::StepLR step_lr(opt, 2);
  auto refused = [](optim::LRScheduler& sched, const optim::LRSchedulerState& state, const std::string& message,
                    bool key_error) {
    INFO(message);
    const optim::LRSchedulerState before = sched.state_dict();
    if (key_error) {
      REQUIRE_THROWS_AS(sched.check_state_dict(state), KeyError);
      REQUIRE_THROWS_AS(sched.load_state_dict(state), KeyError);
    } else {
      REQUIRE_THROWS_AS(sched.check_state_dict(state), ValueError);
      REQUIRE_THROWS_AS(sched.load_state_dict(state), ValueError);
    }
    REQUIRE_THROWS_WITH(sched.check_state_dict(state), Contains(message));
    REQUIRE_THROWS_WITH(sched.load_state_dict(state), Contains(message));
    const optim::LRSchedulerState after = sched.state_dict();
    CHECK(after.values.keys() == before.values.keys());
    for (const auto& item : before.values) CHECK(after.values[item.first] == item.second);
    for (const auto& item : before.lists) CHECK(after.lists[item.first] == item.second);
  };
  optim::LRSchedulerState state = step_lr.state_dict();
  state.values.erase("gamma");
  refused(step_lr, state, "StepLR.load_state_dict: the state has no 'gamma'", true);
  state = step_lr.state_dict();
  state.values.erase("_step_count");
  refused(step_lr, state, "StepLR.load_state_dict: the state has no '_step_count'", true);
  state = step_lr.state_dict();
  state.lists.erase("base_lrs");
  refused(step_lr, state, "StepLR.load_state_dict: the state has no list 'base_lrs'", true);
  state = step_lr.state_dict();
  state.lists["base_lrs"].push_back(0.5);
  refused(step_lr, state, "the state has 2 base_lrs and 1 _last_lr, but the optimizer has 1 parameter groups", false);
  state = step_lr.state_dict();
  state.values["step_size"] = 0;
  state.values["last_epoch"] = 5;
  refused(step_lr, state, "StepLR.load_state_dict: step_size must be positive, got 0", false);
  state = cycle.state_dict();
  state.lists["phase_end_steps"].push_back(1);
  refused(cycle, state, "OneCycleLR.load_state_dict: 3 phase_end_steps for 2 phases", false);
  refused(cycle, step_lr.state_dict(), "OneCycleLR.load_state_dict: the state has no 'total_steps'",
          true);  // another scheduler's state
  optim::CosineAnnealingLR cosine(opt, 10);
  state = cosine.state_dict();
  state.values["T_max"] = -3;
  refused(cosine, state, "CosineAnnealingLR.load_state_dict: T_max must be positive, got -3", false);
  state = cosine.state_dict();
  state.values.erase("eta_min");
  refused(cosine, state, "CosineAnnealingLR.load_state_dict: the state has no 'eta_min'", true);
  optim::MultiStepLR multi(opt, {2, 4});
  state = multi.state_dict();
  state.lists.erase("milestones");
  refused(multi, state, "MultiStepLR.load_state_dict: the state has no list 'milestones'", true);
  optim::LinearLR linear(opt);
  state = linear.state_dict();
  state.values.erase("total_iters");
  refused(linear, state, "LinearLR.load_state_dict: the state has no 'total_iters'", true);

  // A state that fits: check_state_dict changes nothing, load_state_dict
  // takes it.
  state = step_lr.state_dict();
  state.values["gamma"] = 0.5;
  state.values["last_epoch"] = 7;
  step_lr.check_state_dict(state);
  CHECK(step_lr.last_epoch() == 0);
  CHECK(step_lr.state_dict().values["gamma"] == 0.1);
  step_lr.load_state_dict(state);
  CHECK(step_lr.last_epoch() == 7);
  CHECK(step_lr.state_dict().values["gamma"] == 0.5);
}

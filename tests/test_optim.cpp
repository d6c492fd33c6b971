// Optimizers (SGD, Adam, AdamW) and clip_grad_norm_: trajectories against
// PyTorch 1.13 (tests/data/optim_reference.txt from
// scripts/gen_optim_reference.py) on every device; float16/bfloat16
// parameters against the float32 kernel with the same roundings; parameter
// groups, skipped parameters, closures, zero_grad; the state dict (round
// trip, loading onto another device and dtype, copies); the stale state after
// parameters moved; the multi-threaded and non-contiguous paths; every error.
#include <cmath>
#include <limits>
#include <memory>

#include "helpers.h"
#include "optim_reference.h"
#include "tensor/ops/foreach.h"

using namespace tandem;
using Catch::Contains;
using test::check_close;
using test::check_equal;
using test::check_values;

namespace {

test::Tolerance trajectory_tolerance(Dtype dtype, Device device) {
  // The fused kernels round once per op, in PyTorch's order, but PyTorch's
  // vectorized add_ may fuse a multiply-add: a few float32 values differ in
  // the last bits (the moments, where terms cancel, by 5e-8 absolute), float64
  // ones by at most 2e-15 relative. nvcc fuses multiply-adds too: a real GPU
  // gets more room.
  if (device.is_cuda() && !cuda::is_emulated())
    return dtype == kFloat64 ? test::Tolerance{1e-12, 1e-14} : test::Tolerance{1e-5, 1e-6};
  return dtype == kFloat64 ? test::Tolerance{1e-13, 1e-15} : test::Tolerance{1e-6, 1e-7};
}

std::unique_ptr<optim::OptimizerOptions> options_of(const test::OptimCase& c, size_t group) {
  std::unique_ptr<optim::OptimizerOptions> o;
  if (c.optimizer == "sgd")
    o = std::make_unique<optim::SGDOptions>(0.0);
  else if (c.optimizer == "adam")
    o = std::make_unique<optim::AdamOptions>();
  else
    o = std::make_unique<optim::AdamWOptions>();
  for (const auto& [key, value] : c.options.at(group)) o->set(key, value);
  return o;
}

// The case's optimizer over params, each group with its own options.
std::unique_ptr<optim::Optimizer> make_optimizer(const test::OptimCase& c, const std::vector<Tensor>& params) {
  std::vector<optim::OptimizerParamGroup> groups;
  size_t k = 0;
  for (size_t g = 0; g < c.sizes.size(); ++g) {
    std::vector<Tensor> ps(params.begin() + static_cast<std::ptrdiff_t>(k),
                           params.begin() + static_cast<std::ptrdiff_t>(k + c.sizes[g]));
    k += c.sizes[g];
    groups.emplace_back(ps, options_of(c, g));
  }
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(groups, optim::SGDOptions(1.0));
  if (c.optimizer == "adam") return std::make_unique<optim::Adam>(groups);
  return std::make_unique<optim::AdamW>(groups);
}

std::vector<Tensor> leaves(const std::vector<Tensor>& values, Device device, std::optional<Dtype> dtype = {}) {
  std::vector<Tensor> out;
  for (const Tensor& v : values) out.push_back(v.to(device, dtype.value_or(v.dtype())).clone().requires_grad_());
  return out;
}

void set_grads(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::optional<Dtype> dtype = {}) {
  for (size_t i = 0; i < params.size(); ++i)
    params[i].mutable_grad() =
        grads[i].defined() ? grads[i].to(params[i].device(), dtype.value_or(grads[i].dtype())) : Tensor();
}

const test::OptimCase& find_case(const std::string& name) {
  for (const auto& c : test::optim_reference().cases)
    if (c.name == name) return c;
  throw std::runtime_error("no optimizer case " + name);
}

// Rounds every parameter and state tensor (but "step") of a float32
// optimizer to dtype and back.
void round_through(optim::Optimizer& opt, Dtype dtype) {
  NoGradGuard no_grad;
  for (Tensor& p : opt.parameters()) p.copy_(p.to(dtype).to(kFloat32));
  const optim::OptimizerStateDict sd = opt.state_dict();  // the live state tensors
  for (const auto& [index, state] : sd.state)
    for (const auto& item : state)
      if (item.first != "step") Tensor(item.second).copy_(item.second.to(dtype).to(kFloat32));
}

}  // namespace

// ---------------------------------------------------------------- against PyTorch

DEVICE_TEST_CASE("optimizer trajectories match PyTorch's", "[optim][reference]") {
  const auto& cases = test::optim_reference().cases;
  REQUIRE(cases.size() == 36);
  for (const auto& c : cases) {
    INFO(c.name);
    std::vector<Tensor> params = leaves(c.initial, device);
    auto opt = make_optimizer(c, params);
    for (int64_t k = 0; k < c.steps; ++k) {
      INFO("step " << k + 1);
      set_grads(params, c.grads[k]);
      REQUIRE_FALSE(opt->step().defined());
      for (size_t i = 0; i < params.size(); ++i) {
        CHECK(params[i].device() == device);
        check_close(params[i], c.expected[k][i], trajectory_tolerance(c.dtype, device));
      }
    }
    // The state, by PyTorch's numbering and names.
    const optim::OptimizerStateDict sd = opt->state_dict();
    size_t entries = 0;
    for (const auto& [index, state] : sd.state) entries += state.size();
    CHECK(entries == c.state.size());
    for (const auto& [index, key, expected] : c.state) {
      INFO("state " << key << " of parameter " << index);
      REQUIRE(sd.state.count(index) == 1);
      const Tensor& value = sd.state.at(index)[key];
      if (key == "step") {
        CHECK(value.device() == Device(kCPU));
        check_equal(value, expected);
      } else {
        CHECK(value.device() == device);
        check_close(value, expected, trajectory_tolerance(c.dtype, device));
      }
    }
  }
}

DEVICE_TEST_CASE("16-bit parameters update in float and round once per step", "[optim]") {
  // The fused kernels load float16/bfloat16 into float, run the float32
  // functor and round on store: exactly a float32 run whose parameters and
  // state are rounded after each step.
  for (Dtype dtype : {kFloat16, kBFloat16}) {
    for (const char* name :
         {"sgd_dampening_f32", "sgd_nesterov_f32", "sgd_skip_f32", "adam_amsgrad_f32", "adam_skip_f32",
          "adam_options_f32", "adamw_groups_f32", "sgd_weight_decay_f32", "adam_weight_decay_amsgrad_f32"}) {
      const auto& c = find_case(name);
      INFO(name << " in " << dtype);
      std::vector<Tensor> half = leaves(c.initial, device, dtype);
      std::vector<Tensor> single;
      for (const Tensor& p : half) single.push_back(p.to(kFloat32).detach().requires_grad_());
      auto opt_half = make_optimizer(c, half);
      auto opt_single = make_optimizer(c, single);
      for (int64_t k = 0; k < c.steps; ++k) {
        std::vector<Tensor> grads;
        for (const Tensor& g : c.grads[k]) grads.push_back(g.defined() ? g.to(dtype).to(kFloat32) : Tensor());
        set_grads(half, grads, dtype);
        set_grads(single, grads);
        opt_half->step();
        opt_single->step();
        round_through(*opt_single, dtype);
        for (size_t i = 0; i < half.size(); ++i) {
          CHECK(half[i].dtype() == dtype);
          check_equal(half[i].to(kFloat32), single[i]);
        }
      }
      for (const auto& [index, state] : opt_half->state_dict().state)
        for (const auto& item : state)
          if (item.first != "step") CHECK(item.second.dtype() == dtype);
    }
  }
}

// ---------------------------------------------------------------- semantics

DEVICE_TEST_CASE("step with a closure evaluates the loss with grad mode on", "[optim]") {
  Tensor p = test::leaf({1, 2}, {2}, device);
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  NoGradGuard outer;  // the closure records even so, as torch.enable_grad() in PyTorch's step
  int calls = 0;
  Tensor loss = opt.step([&] {
    ++calls;
    opt.zero_grad();
    Tensor l = (p * p).sum();
    l.backward();
    return l;
  });
  CHECK(calls == 1);
  CHECK(loss.item<double>() == 5);
  check_values(p, {0.8, 1.6});  // p - 0.1 * 2p
  CHECK_FALSE(GradMode::is_enabled());
  CHECK_FALSE(opt.step().defined());  // no closure: no loss (and the same gradient again)
  check_values(p, {0.6, 1.2});
}

DEVICE_TEST_CASE("step runs under no_grad and bumps the versions of what it writes", "[optim]") {
  Tensor p = test::leaf({1, -2, 3}, {3}, device, kFloat32);
  optim::Adam opt({p}, optim::AdamOptions(0.1));
  p.mutable_grad() = test::make({0.5, 0.5, -1}, {3}, kFloat32, device);
  const uint64_t before = p._version();
  opt.step();
  CHECK(p._version() > before);
  CHECK(p.is_leaf());
  CHECK(p.grad_fn() == nullptr);
  // Adam's first step moves each element by lr against its gradient's sign.
  check_values(p, {0.9, -2.1, 3.1}, test::Tolerance{1e-6, 1e-6});
}

DEVICE_TEST_CASE("zero_grad sets gradients to none or zeroes them in place", "[optim]") {
  Tensor a = test::leaf({1, 2}, {2}, device), b = test::leaf({3}, {1}, device);
  optim::SGD opt({a, b}, optim::SGDOptions(0.1));
  a.mutable_grad() = test::make({5, 6}, {2}, kFloat64, device);
  b.mutable_grad() = test::make({7}, {1}, kFloat64, device);
  const Tensor kept = a.grad();
  opt.zero_grad(false);
  CHECK(a.grad().is_same(kept));
  check_values(a.grad(), {0, 0});
  check_values(b.grad(), {0});
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  opt.step();  // nothing has a gradient: nothing changes
  check_values(a, {1, 2});
}

DEVICE_TEST_CASE("parameter groups: defaults, own options, add_param_group", "[optim]") {
  Tensor a = test::leaf({1}, {1}, device), b = test::leaf({2}, {1}, device), c = test::leaf({3}, {1}, device);
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a});
  groups.emplace_back(std::vector<Tensor>{b}, optim::SGDOptions(0.5).momentum(0.9));
  optim::SGD opt(groups, optim::SGDOptions(0.1));
  opt.add_param_group(optim::OptimizerParamGroup({c}, optim::SGDOptions(1.0)));
  REQUIRE(opt.param_groups().size() == 3);
  CHECK(opt.size() == 3);
  CHECK(opt.parameters().size() == 3);
  CHECK(opt.parameters()[2].is_same(c));
  CHECK(opt.param_groups()[0].options().get_lr() == 0.1);
  CHECK(static_cast<optim::SGDOptions&>(opt.param_groups()[1].options()).momentum() == 0.9);
  CHECK(opt.defaults().get_lr() == 0.1);
  for (const Tensor& p : {a, b, c}) p.mutable_grad() = test::make({1}, {1}, kFloat64, device);
  opt.step();
  check_values(a, {0.9});
  check_values(b, {1.5});
  check_values(c, {2.0});
  // A group's options change the next step (as schedulers do).
  opt.param_groups()[0].options().set_lr(1.0);
  opt.step();
  check_values(a, {-0.1});
}

DEVICE_TEST_CASE("one group may hold parameters on several devices and of several dtypes", "[optim]") {
  std::vector<Device> where = {device};
  if (auto other = test::other_device(device)) where.push_back(*other);
  std::vector<Tensor> mixed, alone;
  for (const Device& d : where)
    for (Dtype dtype : {kFloat32, kFloat64}) {
      mixed.push_back(test::leaf({1, -2, 3}, {3}, d, dtype));
      alone.push_back(test::leaf({1, -2, 3}, {3}, d, dtype));
    }
  optim::Adam opt(mixed, optim::AdamOptions(0.01).amsgrad(true));
  for (size_t i = 0; i < mixed.size(); ++i) {
    Tensor g = test::make({0.3, -0.2, 0.1 * static_cast<double>(i + 1)}, {3}, mixed[i].dtype(), mixed[i].device());
    mixed[i].mutable_grad() = g;
    alone[i].mutable_grad() = g.clone();
  }
  for (int k = 0; k < 3; ++k) opt.step();
  for (size_t i = 0; i < mixed.size(); ++i) {
    optim::Adam single({alone[i]}, optim::AdamOptions(0.01).amsgrad(true));
    for (int k = 0; k < 3; ++k) single.step();
    check_equal(mixed[i], alone[i]);
    CHECK(mixed[i].device() == alone[i].device());
  }
}

DEVICE_TEST_CASE("non-contiguous parameters and gradients", "[optim]") {
  std::vector<double> values;
  for (int i = 0; i < 12; ++i) values.push_back(0.25 * i - 1);
  Tensor base = test::make(values, {4, 3}, kFloat32, device);
  Tensor p = base.t().requires_grad_();  // a (3, 4) leaf viewing base, not contiguous
  REQUIRE_FALSE(p.is_contiguous());
  REQUIRE(p.is_leaf());
  Tensor q = p.detach().contiguous().requires_grad_();
  Tensor grad = test::make(values, {4, 3}, kFloat32, device).t().mul(0.5);  // not contiguous either
  p.mutable_grad() = grad;
  q.mutable_grad() = grad.contiguous();
  optim::SGD sgd_p({p}, optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD sgd_q({q}, optim::SGDOptions(0.1).momentum(0.9));
  for (int k = 0; k < 3; ++k) {
    sgd_p.step();
    sgd_q.step();
  }
  check_equal(p.contiguous(), q);
  check_equal(base.t().contiguous(), q);  // written through the view
}

DEVICE_TEST_CASE("large tensors split across threads give the single-thread values", "[optim]") {
  // 3 x kElementwiseGrain + 5 elements: the CPU kernels take several threads.
  const int64_t n = 3 * 32768 + 5, piece = 10000;
  Tensor values = randn({n}, TensorOptions(kFloat32).device(device));
  Tensor grads = randn({n}, TensorOptions(kFloat32).device(device));
  Tensor big = values.clone().requires_grad_();
  big.mutable_grad() = grads.clone();
  std::vector<Tensor> pieces;
  for (int64_t s = 0; s < n; s += piece) {
    const int64_t len = std::min(piece, n - s);
    pieces.push_back(values.narrow(0, s, len).clone().requires_grad_());
    pieces.back().mutable_grad() = grads.narrow(0, s, len).clone();
  }
  optim::AdamW a({big}, optim::AdamWOptions(0.01).amsgrad(true));
  optim::AdamW b(pieces, optim::AdamWOptions(0.01).amsgrad(true));
  for (int k = 0; k < 2; ++k) {
    a.step();
    b.step();
  }
  check_equal(big, cat(pieces));
}

DEVICE_TEST_CASE("many tensors across chunks, unaligned and empty, match the cpu", "[optim]") {
  // On a GPU: more tensors than one kernel argument holds, sizes around the
  // 64k-element chunks, parameters that start off 16-byte alignment (the
  // scalar path) and empty ones. On the cpu the two runs are the same code.
  const std::vector<int64_t> sizes = {65536 + 3, 1, 7, 0, 131072 + 1, 4096, 65536, 33};
  for (Dtype dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (const char* which : {"sgd", "adam", "adamw"}) {
      INFO(which << " in " << dtype);
      std::vector<Tensor> here, there;  // the same values: here on the cpu, there on device
      for (int i = 0; i < 300; ++i) {
        const int64_t n = i < 16 ? sizes[i % sizes.size()] : 16 + i % 5;
        const int64_t offset = i % 3 == 1 ? 1 : 0;  // a view one element into its storage: not 16-byte aligned
        Tensor values = randn({n + 1}, TensorOptions(kFloat64)).to(dtype);
        here.push_back(values.narrow(0, offset, n).clone().requires_grad_());
        there.push_back(values.to(device).clone().narrow(0, offset, n).requires_grad_());
        REQUIRE(there.back().is_contiguous());
        REQUIRE(there.back().is_leaf());
      }
      std::vector<std::unique_ptr<optim::Optimizer>> opts;
      for (const auto* params : {&here, &there}) {
        if (std::string(which) == "sgd")
          opts.push_back(std::make_unique<optim::SGD>(*params, optim::SGDOptions(0.1).momentum(0.9).nesterov(true)));
        else if (std::string(which) == "adam")
          opts.push_back(
              std::make_unique<optim::Adam>(*params, optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.1)));
        else
          opts.push_back(std::make_unique<optim::AdamW>(*params, optim::AdamWOptions(0.01)));
      }
      for (int k = 0; k < 2; ++k) {
        for (size_t i = 0; i < here.size(); ++i) {
          Tensor g = randn(here[i].sizes(), TensorOptions(kFloat64)).to(dtype);
          here[i].mutable_grad() = g;
          there[i].mutable_grad() = g.to(device).clone();  // its own: clip_grad_norm_ scales it in place
        }
        opts[0]->step();
        opts[1]->step();
      }
      // And the norms of the same many gradients, and their scaling.
      const Tensor total_here = nn::utils::clip_grad_norm_(here, 0.5, 3.0);
      const Tensor total_there = nn::utils::clip_grad_norm_(there, 0.5, 3.0);
      const bool gpu = device.is_cuda() && !cuda::is_emulated();
      for (size_t i = 0; i < here.size(); ++i) {
        if (gpu) {
          check_close(there[i], here[i]);
          check_close(there[i].grad(), here[i].grad());
        } else {
          check_equal(there[i].cpu(), here[i]);
          check_equal(there[i].grad().cpu(), here[i].grad());
        }
      }
      check_close(total_there, total_here);
    }
  }
}

// ---------------------------------------------------------------- state dict

DEVICE_TEST_CASE("state_dict: PyTorch's layout, the live tensors, and a round trip", "[optim][state]") {
  Tensor a = test::leaf({1, 2}, {2}, device), b = test::leaf({3}, {1}, device), c = test::leaf({4, 5}, {2}, device);
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a, b});
  groups.emplace_back(std::vector<Tensor>{c}, optim::SGDOptions(0.01).nesterov(true).momentum(0.5));
  optim::SGD opt(groups, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  opt.param_groups()[1].extra().insert("initial_lr", 0.02);
  a.mutable_grad() = test::make({1, 1}, {2}, kFloat64, device);  // b has no gradient: no state
  c.mutable_grad() = test::make({-1, 2}, {2}, kFloat64, device);
  opt.step();

  optim::OptimizerStateDict sd = opt.state_dict();
  REQUIRE(sd.param_groups.size() == 2);
  CHECK(sd.param_groups[0].params == std::vector<int64_t>{0, 1});
  CHECK(sd.param_groups[1].params == std::vector<int64_t>{2});
  CHECK(sd.param_groups[0].options.keys() ==
        std::vector<std::string>{"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"});
  CHECK(sd.param_groups[0].options["weight_decay"] == 0.01);
  CHECK(sd.param_groups[1].options["nesterov"] == 1);
  CHECK(sd.param_groups[1].options["initial_lr"] == 0.02);
  REQUIRE(sd.state.size() == 2);
  CHECK(sd.state.count(1) == 0);
  CHECK(sd.state.at(0).keys() == std::vector<std::string>{"momentum_buffer"});
  check_values(sd.state.at(0)["momentum_buffer"], {1.01, 1.02});  // grad + wd * p on the first step
  // The optimizer's own tensors, as PyTorch's state_dict().
  CHECK(sd.state.at(2)["momentum_buffer"].is_same(
      static_cast<optim::SGDParamState&>(*opt.state().at(c.impl())).momentum_buffer()));

  // Another optimizer on copies of the parameters continues the same way.
  Tensor a2 = a.detach().clone().requires_grad_(), b2 = b.detach().clone().requires_grad_(),
         c2 = c.detach().clone().requires_grad_();
  std::vector<optim::OptimizerParamGroup> groups2;
  groups2.emplace_back(std::vector<Tensor>{a2, b2});
  groups2.emplace_back(std::vector<Tensor>{c2});
  optim::SGD opt2(groups2, optim::SGDOptions(0.5));
  opt2.load_state_dict(sd);
  CHECK(static_cast<optim::SGDOptions&>(opt2.param_groups()[1].options()).nesterov());
  CHECK(opt2.param_groups()[1].options().get_lr() == 0.01);
  CHECK(opt2.param_groups()[1].extra()["initial_lr"] == 0.02);
  CHECK_FALSE(opt2.param_groups()[0].extra().contains("initial_lr"));
  // Loading copies: opt2 shares no state with opt.
  CHECK_FALSE(opt2.state_dict().state.at(0)["momentum_buffer"].shares_storage(sd.state.at(0)["momentum_buffer"]));
  a2.mutable_grad() = a.grad().clone();
  c2.mutable_grad() = c.grad().clone();
  opt.step();
  opt2.step();
  check_equal(a2, a);
  check_equal(c2, c);
  check_equal(b2, b);
}

DEVICE_TEST_CASE("load_state_dict puts state on each parameter's device and dtype", "[optim][state]") {
  auto other = test::other_device(device);
  std::vector<Device> targets = {device};
  if (other) targets.push_back(*other);
  for (const Device& target : targets) {
    INFO("to " << target.str());
    Tensor p = test::leaf({1, -2, 3}, {3}, device, kFloat64);
    optim::Adam opt({p}, optim::AdamOptions(0.1).amsgrad(true));
    p.mutable_grad() = test::make({0.5, 0.25, -1}, {3}, kFloat64, device);
    opt.step();
    opt.step();
    // The loading side has float32 parameters on target.
    Tensor q = p.detach().to(target, kFloat32).requires_grad_();
    optim::Adam opt2({q}, optim::AdamOptions(0.1).amsgrad(true));
    opt2.load_state_dict(opt.state_dict());
    const auto state = opt2.state_dict().state.at(0);
    CHECK(state.keys() == std::vector<std::string>{"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
    for (const auto& item : state) {
      INFO(item.first);
      if (item.first == "step") {
        // "step" stays as saved: a float32 scalar on the cpu.
        CHECK(item.second.device() == Device(kCPU));
        CHECK(item.second.dtype() == kFloat32);
        CHECK(item.second.item<double>() == 2);
      } else {
        CHECK(item.second.device() == target);
        CHECK(item.second.dtype() == kFloat32);
        check_close(item.second, opt.state_dict().state.at(0)[item.first].to(kFloat32));
      }
    }
    q.mutable_grad() = p.grad().to(target, kFloat32);
    opt.step();
    opt2.step();
    check_close(q, p.to(kFloat32));
  }
}

DEVICE_TEST_CASE("a step after the parameters moved finds the old state: DeviceError", "[optim][state]") {
  auto other = test::other_device(device);
  if (!other) return;
  for (const char* which : {"Adam", "SGD"}) {
    INFO(which);
    Tensor a = test::leaf({1, 2}, {2}, device, kFloat32), b = test::leaf({3, 4}, {2}, device, kFloat32);
    std::unique_ptr<optim::Optimizer> opt;
    if (std::string(which) == "Adam")
      opt = std::make_unique<optim::Adam>(std::vector<Tensor>{a, b}, optim::AdamOptions(0.1));
    else
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{a, b}, optim::SGDOptions(0.1).momentum(0.9));
    const Tensor g = test::make({1, -1}, {2}, kFloat32, device);
    a.mutable_grad() = g.clone();
    b.mutable_grad() = g.clone();
    opt->step();
    // What Module::to() does: the parameter (and its gradient) move in place.
    {
      NoGradGuard no_grad;
      b.set_data(b.to(*other));
      b.mutable_grad() = b.grad().to(*other);
    }
    const Tensor a_before = a.detach().clone();
    const std::string state = std::string(which) == "Adam" ? "exp_avg" : "momentum_buffer";
    REQUIRE_THROWS_AS(opt->step(), DeviceError);
    REQUIRE_THROWS_WITH(
        opt->step(),
        Contains("Expected all tensors to be on the same device, but found at least two devices, " + other->str() +
                 " and " + device.str()) &&
            Contains("(when checking argument '" + state + " of parameter 1' of " + which + ".step())") &&
            Contains("The optimizer state '" + state + "' of parameter 1 was made on " + device.str()) &&
            Contains(state + " of parameter 1 is on " + device.str() + ": " + which + "'s state, made by step()") &&
            Contains("Module::to() moves parameters, not optimizer state") &&
            Contains("optimizer.load_state_dict(optimizer.state_dict())"));
    // The optimizer's fix in place of check_same_device's general one.
    REQUIRE_THROWS_WITH(opt->step(), !Contains("Move one of them first"));
    // Nothing was updated, nothing moved.
    check_equal(a, a_before);
    const optim::OptimizerStateDict stale = opt->state_dict();
    for (const auto& item : stale.state.at(1))
      if (item.first != "step") CHECK(item.second.device() == device);
    // The fix the message gives.
    opt->load_state_dict(opt->state_dict());
    opt->step();
    const optim::OptimizerStateDict moved = opt->state_dict();
    for (const auto& item : moved.state.at(1))
      if (item.first != "step") CHECK(item.second.device() == *other);
    CHECK(b.device() == *other);
  }
}

DEVICE_TEST_CASE("a step after the parameters changed dtype finds the old state: DtypeError", "[optim][state]") {
  Tensor a = test::leaf({1, 2}, {2}, device, kFloat32);
  optim::Adam opt({a}, optim::AdamOptions(0.1));
  a.mutable_grad() = test::make({1, -1}, {2}, kFloat32, device);
  opt.step();
  {
    NoGradGuard no_grad;
    a.set_data(a.to(kFloat64));
    a.mutable_grad() = a.grad().to(kFloat64);
  }
  REQUIRE_THROWS_AS(opt.step(), DtypeError);
  REQUIRE_THROWS_WITH(opt.step(), Contains("Adam.step(): state 'exp_avg' of parameter 0 is float32 [2] but the "
                                           "parameter is float64 [2]") &&
                                      Contains("optimizer.load_state_dict(optimizer.state_dict())"));
  opt.load_state_dict(opt.state_dict());
  opt.step();
  CHECK(opt.state_dict().state.at(0)["exp_avg"].dtype() == kFloat64);
}

// ---------------------------------------------------------------- clip_grad_norm_

DEVICE_TEST_CASE("clip_grad_norm_ matches PyTorch's", "[optim][clip]") {
  const auto& clips = test::optim_reference().clips;
  REQUIRE(clips.size() == 11);
  for (const auto& c : clips) {
    for (bool strided : {false, true}) {
      INFO(c.name << (strided ? ", first gradient not contiguous" : ""));
      std::vector<Tensor> params;
      for (const Tensor& g : c.grads) {
        params.push_back(zeros(g.sizes(), TensorOptions(g.dtype()).device(device)).requires_grad_());
        Tensor grad = g.to(device).clone();  // never the reference data itself: it is clipped in place
        if (strided && params.size() == 1 && g.dim() == 2) grad = grad.t().contiguous().t();
        params.back().mutable_grad() = grad;
      }
      if (strided) REQUIRE_FALSE(params[0].grad().is_contiguous());
      const Tensor total = nn::utils::clip_grad_norm_(params, c.max_norm, c.norm_type);
      CHECK(total.dim() == 0);
      CHECK(total.device() == device);
      CHECK(total.dtype() == c.total.dtype());
      check_close(total, c.total);
      for (size_t i = 0; i < params.size(); ++i) check_close(params[i].grad(), c.clipped[i]);
    }
  }
}

DEVICE_TEST_CASE("clip_grad_norm_: mixed devices and dtypes, large and empty gradients", "[optim][clip]") {
  std::vector<Device> where = {device};
  if (auto other = test::other_device(device)) where.push_back(*other);
  std::vector<Tensor> params;
  std::vector<Tensor> before;
  for (const Device& d : where)
    for (Dtype dtype : {kFloat32, kFloat64}) {
      params.push_back(zeros({5}, TensorOptions(dtype).device(d)).requires_grad_());
      params.back().mutable_grad() = randn({5}, TensorOptions(dtype).device(d));
      before.push_back(params.back().grad().clone());
    }
  // Large enough to be split across threads, and an empty one.
  params.push_back(zeros({3 * 32768 + 7}, TensorOptions(kFloat32).device(device)).requires_grad_());
  params.back().mutable_grad() = randn({3 * 32768 + 7}, TensorOptions(kFloat32).device(device));
  before.push_back(params.back().grad().clone());
  params.push_back(zeros({0}, TensorOptions(kFloat32).device(device)).requires_grad_());
  params.back().mutable_grad() = zeros({0}, TensorOptions(kFloat32).device(device));
  before.push_back(params.back().grad().clone());
  params.push_back(zeros({2}, TensorOptions(kFloat32).device(device)).requires_grad_());  // no gradient

  double sum_sq = 0;
  for (const Tensor& g : before) sum_sq += g.to(kFloat64).pow(2).sum().item<double>();
  const double expected = std::sqrt(sum_sq);
  const Tensor total = nn::utils::clip_grad_norm_(params, 1.0);
  CHECK(total.device() == device);   // the first gradient's
  CHECK(total.dtype() == kFloat64);  // promoted over the gradients
  CHECK(total.item<double>() == Approx(expected).epsilon(1e-6));
  for (size_t i = 0; i < before.size(); ++i)
    check_close(params[i].grad().to(kFloat64), before[i].to(kFloat64).mul(1.0 / (expected + 1e-6)),
                test::Tolerance{1e-5, 1e-7});
  CHECK_FALSE(params.back().grad().defined());

  // No gradient at all: tensor(0.), float32 on the cpu, as PyTorch.
  Tensor none = zeros({2}, TensorOptions(kFloat32).device(device)).requires_grad_();
  const Tensor zero = nn::utils::clip_grad_norm_(none, 1.0);
  CHECK(zero.device() == Device(kCPU));
  CHECK(zero.dtype() == kFloat32);
  CHECK(zero.item<double>() == 0);
}

DEVICE_TEST_CASE("clip_grad_norm_ refuses a non-finite norm when asked", "[optim][clip]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {inf, std::numeric_limits<double>::quiet_NaN()}) {
    Tensor p = zeros({3}, TensorOptions(kFloat32).device(device)).requires_grad_();
    p.mutable_grad() = test::make({1, bad, 2}, {3}, kFloat32, device);
    REQUIRE_THROWS_AS(nn::utils::clip_grad_norm_(p, 1.0, 2.0, true), ValueError);
    REQUIRE_THROWS_WITH(nn::utils::clip_grad_norm_(p, 1.0, 2.0, true),
                        Contains("The total norm of order 2.0 for gradients from `parameters` is non-finite, so it "
                                 "cannot be clipped. To disable this error and scale the gradients by the non-finite "
                                 "norm anyway, set `error_if_nonfinite=False`"));
    REQUIRE_THROWS_WITH(nn::utils::clip_grad_norm_(p, 1.0, inf, true), Contains("The total norm of order inf"));
    CHECK(p.grad().to_vector<float>()[0] == 1);  // untouched
    // Without the flag, PyTorch scales by the non-finite coefficient.
    const Tensor total = nn::utils::clip_grad_norm_(p, 1.0);
    CHECK_FALSE(std::isfinite(total.item<double>()));
  }
  REQUIRE_THROWS_WITH(nn::utils::clip_grad_norm_(std::vector<Tensor>{Tensor()}, 1.0),
                      Contains("clip_grad_norm_: a parameter is an undefined tensor"));
  Tensor n = zeros({2}, TensorOptions(kFloat32).device(device)).requires_grad_();
  n.mutable_grad() = zeros({2}, TensorOptions(kInt64).device(device));
  REQUIRE_THROWS_AS(nn::utils::clip_grad_norm_(n, 1.0), DtypeError);
  REQUIRE_THROWS_WITH(nn::utils::clip_grad_norm_(n, 1.0),
                      Contains("clip_grad_norm_: a gradient is int64; gradients are floating point"));
}

DEVICE_TEST_CASE("clip_grad_norm_ counts and scales a parameter listed twice once", "[optim][clip]") {
  // A tied weight (an embedding and the output layer sharing it) appears
  // twice in a list built by hand: its gradient is one tensor, counted once
  // in the norm and scaled once (not by coef^2).
  for (double norm_type : {2.0, 1.0, std::numeric_limits<double>::infinity()}) {
    INFO("norm_type " << norm_type);
    Tensor w = zeros({2, 2}, TensorOptions(kFloat64).device(device)).requires_grad_();
    Tensor b = zeros({2}, TensorOptions(kFloat64).device(device)).requires_grad_();
    w.mutable_grad() = test::make({3, -4, 12, 0}, {2, 2}, kFloat64, device);
    b.mutable_grad() = test::make({0, 84}, {2}, kFloat64, device);
    Tensor w1 = w.detach().clone().requires_grad_(), b1 = b.detach().clone().requires_grad_();
    w1.mutable_grad() = w.grad().clone();
    b1.mutable_grad() = b.grad().clone();
    const Tensor tied = nn::utils::clip_grad_norm_(std::vector<Tensor>{w, b, w, Tensor(w)}, 1.0, norm_type);
    const Tensor once = nn::utils::clip_grad_norm_(std::vector<Tensor>{w1, b1}, 1.0, norm_type);
    check_equal(tied, once);
    check_equal(w.grad(), w1.grad());
    check_equal(b.grad(), b1.grad());
  }
  // By hand for the 2-norm: sqrt(9 + 16 + 144 + 84^2) = 85.
  Tensor w = zeros({2, 2}, TensorOptions(kFloat64).device(device)).requires_grad_();
  Tensor b = zeros({2}, TensorOptions(kFloat64).device(device)).requires_grad_();
  w.mutable_grad() = test::make({3, -4, 12, 0}, {2, 2}, kFloat64, device);
  b.mutable_grad() = test::make({0, 84}, {2}, kFloat64, device);
  CHECK(nn::utils::clip_grad_norm_(std::vector<Tensor>{w, b, w}, 8.5).item<double>() == 85);
  const double coef = 8.5 / (85 + 1e-6);
  check_close(w.grad(), test::make({3 * coef, -4 * coef, 12 * coef, 0}, {2, 2}, kFloat64));
}

DEVICE_TEST_CASE("clip_grad_norm_ refuses an empty gradient for the orders without an identity", "[optim][clip]") {
  // torch.linalg.vector_norm's (and _foreach_norm's) refusal; before this
  // check a GPU gave 0 for the -inf norm of an empty gradient, the cpu inf.
  const double inf = std::numeric_limits<double>::infinity();
  for (double norm_type : {-inf, inf, -1.0}) {
    INFO("norm_type " << norm_type);
    Tensor p = zeros({3}, TensorOptions(kFloat32).device(device)).requires_grad_();
    p.mutable_grad() = test::make({1, -2, 3}, {3}, kFloat32, device);
    Tensor e = zeros({0}, TensorOptions(kFloat32).device(device)).requires_grad_();
    e.mutable_grad() = zeros({0}, TensorOptions(kFloat32).device(device));
    const std::vector<Tensor> params = {p, e};
    REQUIRE_THROWS_AS(nn::utils::clip_grad_norm_(params, 0.5, norm_type), ValueError);
    const std::string order = norm_type == -inf ? "-inf" : norm_type == inf ? "inf" : "-1";
    REQUIRE_THROWS_WITH(nn::utils::clip_grad_norm_(params, 0.5, norm_type),
                        Contains("linalg.vector_norm cannot compute the " + order +
                                 " norm on an empty tensor because the operation does not have an identity "
                                 "(tensors[1] has shape [0])"));
    check_values(p.grad(), {1, -2, 3});  // nothing scaled
  }
  // The orders with one give 0 for it.
  for (double norm_type : {2.0, 1.0, 0.0, 0.5}) {
    Tensor e = zeros({0}, TensorOptions(kFloat32).device(device)).requires_grad_();
    e.mutable_grad() = zeros({0}, TensorOptions(kFloat32).device(device));
    CHECK(nn::utils::clip_grad_norm_(e, 1.0, norm_type).item<double>() == 0);
  }
}

// ---------------------------------------------------------------- foreach ops

DEVICE_TEST_CASE("foreach_norm and foreach_mul_ match the per-tensor ops", "[optim][foreach]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (Dtype dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dtype);
    // Contiguous, transposed, sliced and one-element tensors.
    std::vector<Tensor> tensors = {
        test::make({0.5, -1.5, 2.25, -3, 0.75, 4}, {2, 3}, dtype, device),
        test::make({1, -2, 3, -4, 5, -6}, {2, 3}, dtype, device).t(),
        test::make({9, 1, -7, 2, 5, -3, 8}, {7}, dtype, device).narrow(0, 1, 5),
        test::make({-2.5}, {1}, dtype, device),
        test::make({1, 2, 3, 4, 5, 6, 7, 8}, {8}, dtype, device).slice(0, 0, 8, 3),
    };
    REQUIRE_FALSE(tensors[1].is_contiguous());
    REQUIRE_FALSE(tensors[4].is_contiguous());
    for (double p : {2.0, 1.0, 0.0, inf, -inf, 3.0, 0.5, -2.0}) {
      INFO("p " << p);
      const Tensor norms = detail::foreach_norm(tensors, p);
      CHECK(norms.sizes() == Shape{5});
      CHECK(norms.dtype() == dtype);
      CHECK(norms.device() == device);
      CHECK(norms.is_contiguous());
      for (size_t i = 0; i < tensors.size(); ++i) {
        INFO("tensor " << i);
        // Both fold in float64 and round once; their summation orders differ.
        check_close(norms.select(0, static_cast<int64_t>(i)), tensors[i].norm(p),
                    dtype == kFloat64 ? test::Tolerance{1e-14, 1e-15} : test::Tolerance{1e-6, 1e-7});
      }
    }
    std::vector<Tensor> expected;
    std::vector<uint64_t> versions;
    for (const Tensor& t : tensors) {
      expected.push_back(t.mul(test::make({-0.75}, {}, dtype, device)));
      versions.push_back(t._version());
    }
    // The scale in another dtype and shape, converted.
    detail::foreach_mul_(tensors, test::make({-0.75}, {1, 1}, kFloat64, device));
    for (size_t i = 0; i < tensors.size(); ++i) {
      INFO("tensor " << i);
      check_equal(tensors[i], expected[i]);
      CHECK(tensors[i]._version() > versions[i]);
    }
  }
  // A tensor listed twice is scaled twice, as PyTorch's _foreach_mul_ does.
  Tensor t = test::make({1, 2}, {2}, kFloat32, device);
  detail::foreach_mul_({t, t}, test::make({3}, {}, kFloat32, device));
  check_values(t, {9, 18});
  // A scale that is an element of a scaled tensor is read before any write.
  Tensor u = test::make({2, 5, 7}, {3}, kFloat32, device);
  detail::foreach_mul_({u}, u.narrow(0, 0, 1));
  check_values(u, {4, 10, 14});
}

DEVICE_TEST_CASE("foreach ops check their lists", "[optim][foreach][errors]") {
  const Tensor a = test::make({1, 2}, {2}, kFloat32, device);
  const Tensor two = test::make({2}, {}, kFloat32, device);
  auto refuses = [&](auto run, const std::string& message) {
    INFO(message);
    REQUIRE_THROWS_WITH(run(), Contains(message));
  };
  for (const char* op : {"foreach_norm", "foreach_mul_"}) {
    const bool norm = std::string(op) == "foreach_norm";
    auto call = [&](const std::vector<Tensor>& tensors) {
      return [&, tensors] {
        if (norm)
          detail::foreach_norm(tensors, 2.0);
        else
          detail::foreach_mul_(tensors, two);
      };
    };
    const std::string name(op);
    REQUIRE_THROWS_AS(call({})(), ValueError);
    refuses(call({}), name + ": expected a non-empty list of tensors");
    refuses(call({a, Tensor()}), name + ": tensors[1] is an undefined tensor");
    REQUIRE_THROWS_AS(call({zeros({2}, kInt64)})(), DtypeError);
    refuses(call({zeros({2}, kInt64)}), name +
                                            ": expected floating point tensors (float32, float64, float16, "
                                            "bfloat16), but tensors[0] is int64");
    REQUIRE_THROWS_AS(call({a, a.to(kFloat64)})(), DtypeError);
    refuses(call({a, a, a.to(kFloat64)}), name +
                                              ": expected one dtype, but tensors[0] is float32 and tensors[2] is "
                                              "float64; group the tensors by dtype");
    Tensor leaf = a.clone().requires_grad_();
    REQUIRE_THROWS_AS(call({a, leaf})(), ValueError);
    refuses(call({a, leaf}), name +
                                 ": records no graph, but grad mode is on and tensors[1] requires grad; call it "
                                 "inside a NoGradGuard");
    {
      NoGradGuard no_grad;
      call({a.clone(), leaf})();
    }
    if (auto other = test::other_device(device)) {
      REQUIRE_THROWS_AS(call({a, a.to(*other)})(), DeviceError);
      refuses(call({a, a.to(*other)}),
              "Expected all tensors to be on the same device, but found at least two "
              "devices, " +
                  device.str() + " and " + other->str() + "! (when checking argument 'tensors[1]' of " + name + ")");
    }
  }
  // foreach_norm's order.
  const double inf = std::numeric_limits<double>::infinity();
  refuses([&] { detail::foreach_norm({a}, std::numeric_limits<double>::quiet_NaN()); },
          "foreach_norm: the order p must be a number, got nan");
  const Tensor e = zeros({2, 0}, TensorOptions(kFloat32).device(device));
  REQUIRE_THROWS_AS(detail::foreach_norm({a, e}, -inf), ValueError);
  refuses(
      [&] {
        detail::foreach_norm({a, e}, -inf);
      },
      "foreach_norm: linalg.vector_norm cannot compute the -inf norm on an empty tensor because the operation "
      "does not have an identity (tensors[1] has shape [2, 0])");
  refuses([&] { detail::foreach_norm({e}, inf); }, "cannot compute the inf norm on an empty tensor");
  refuses([&] { detail::foreach_norm({e}, -0.5); }, "cannot compute the -0.5 norm on an empty tensor");
  // foreach_mul_'s scale.
  refuses([&] { detail::foreach_mul_({a}, Tensor()); }, "foreach_mul_: argument 'scale' is an undefined tensor");
  REQUIRE_THROWS_AS(detail::foreach_mul_({a}, test::make({1, 2}, {2}, kFloat32, device)), ShapeError);
  refuses(
      [&] {
        detail::foreach_mul_({a}, test::make({1, 2}, {2}, kFloat32, device));
      },
      "foreach_mul_: expected a one-element scale, but got shape [2]");
  Tensor scale = two.clone().requires_grad_();
  refuses([&] { detail::foreach_mul_({a.clone()}, scale); },
          "foreach_mul_: records no graph, but grad mode is on and scale requires grad; call it inside a "
          "NoGradGuard");
  if (auto other = test::other_device(device)) {
    REQUIRE_THROWS_AS(detail::foreach_mul_({a}, two.to(*other)), DeviceError);
    refuses([&] { detail::foreach_mul_({a}, two.to(*other)); }, "(when checking argument 'scale' of foreach_mul_)");
  }
  check_values(a, {1, 2});  // every refusal before a write
}

// ---------------------------------------------------------------- errors

TEST_CASE("options are checked with PyTorch's messages", "[optim][errors]") {
  Tensor p = zeros({2}).requires_grad_();
  auto throws = [&](auto make, const std::string& message) {
    INFO(message);
    REQUIRE_THROWS_AS(make(), ValueError);
    REQUIRE_THROWS_WITH(make(), Contains(message));
  };
  throws([&] { optim::SGD({p}, optim::SGDOptions(-1)); }, "Invalid learning rate: -1");
  throws([&] { optim::SGD({p}, optim::SGDOptions(0.1).momentum(-0.5)); }, "Invalid momentum value: -0.5");
  throws([&] { optim::SGD({p}, optim::SGDOptions(0.1).weight_decay(-1e-4)); }, "Invalid weight_decay value: -0.0001");
  throws([&] { optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true)); },
         "Nesterov momentum requires a momentum and zero dampening");
  throws([&] { optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true).momentum(0.9).dampening(0.1)); },
         "Nesterov momentum requires a momentum and zero dampening");
  throws([&] { optim::Adam({p}, optim::AdamOptions(-0.001)); }, "Invalid learning rate: -0.001");
  throws([&] { optim::Adam({p}, optim::AdamOptions().eps(-1)); }, "Invalid epsilon value: -1");
  throws([&] { optim::Adam({p}, optim::AdamOptions().betas({1.0, 0.999})); }, "Invalid beta parameter at index 0: 1");
  throws([&] { optim::Adam({p}, optim::AdamOptions().betas({0.9, -0.1})); }, "Invalid beta parameter at index 1: -0.1");
  throws([&] { optim::Adam({p}, optim::AdamOptions().weight_decay(-1)); }, "Invalid weight_decay value: -1");
  throws([&] { optim::AdamW({p}, optim::AdamWOptions(-2)); }, "Invalid learning rate: -2");
  throws([&] { optim::AdamW({p}, optim::AdamWOptions().betas({0.9, 1.5})); }, "Invalid beta parameter at index 1");
  // A group's own options are checked too, when it is added.
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  Tensor q = zeros({2}).requires_grad_();
  throws([&] { opt.add_param_group(optim::OptimizerParamGroup({q}, optim::SGDOptions(-3))); },
         "Invalid learning rate: -3");
  CHECK(opt.param_groups().size() == 1);
  CHECK(optim::AdamWOptions().weight_decay() == 1e-2);
  CHECK(optim::AdamOptions().weight_decay() == 0);
}

TEST_CASE("parameter lists are checked", "[optim][errors]") {
  Tensor p = zeros({2}).requires_grad_(), q = zeros({2}).requires_grad_();
  REQUIRE_THROWS_WITH(optim::SGD(std::vector<Tensor>{}, optim::SGDOptions(0.1)),
                      Contains("optimizer got an empty parameter list"));
  REQUIRE_THROWS_WITH(optim::SGD({Tensor()}, optim::SGDOptions(0.1)),
                      Contains("optimizer can only optimize Tensors, but one of the params is an undefined tensor"));
  REQUIRE_THROWS_WITH(optim::SGD({p.mul(2)}, optim::SGDOptions(0.1)), Contains("can't optimize a non-leaf Tensor"));
  REQUIRE_THROWS_WITH(optim::SGD({p, q, p}, optim::SGDOptions(0.1)),
                      Contains("optimizer contains a parameter group with duplicate parameters"));
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  REQUIRE_THROWS_AS(opt.add_param_group(optim::OptimizerParamGroup({q, p})), ValueError);
  REQUIRE_THROWS_WITH(opt.add_param_group(optim::OptimizerParamGroup({q, p})),
                      Contains("some parameters appear in more than one parameter group"));
  REQUIRE_THROWS_WITH(opt.add_param_group(optim::OptimizerParamGroup({q}, optim::AdamOptions())),
                      Contains("a parameter group's options are of another optimizer's type"));
  optim::OptimizerParamGroup bare({q});
  REQUIRE_THROWS_WITH(bare.options(), Contains("this parameter group has no options yet"));
  // Integer parameters cannot be stepped.
  Tensor n = zeros({2}, kInt64);
  optim::SGD ints({n}, optim::SGDOptions(0.1));
  n.mutable_grad() = zeros({2}, kInt64);
  REQUIRE_THROWS_AS(ints.step(), DtypeError);
  REQUIRE_THROWS_WITH(ints.step(), Contains("SGD.step(): parameter 0 is int64; optimizers update floating-point "
                                            "parameters only"));
  // A gradient that does not match its parameter.
  p.mutable_grad() = zeros({3});
  REQUIRE_THROWS_WITH(opt.step(), Contains("SGD.step(): the gradient of parameter 0 is float32 [3] but the "
                                           "parameter is float32 [2]"));
  p.mutable_grad() = zeros({2}, kFloat64);
  REQUIRE_THROWS_AS(opt.step(), ValueError);
}

DEVICE_TEST_CASE("a gradient on another device than its parameter is refused", "[optim][errors]") {
  auto other = test::other_device(device);
  if (!other) return;
  Tensor p = zeros({2}, TensorOptions(kFloat32).device(device)).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  p.mutable_grad() = zeros({2}, TensorOptions(kFloat32).device(*other));
  REQUIRE_THROWS_AS(opt.step(), DeviceError);
  REQUIRE_THROWS_WITH(opt.step(), Contains("Expected all tensors to be on the same device") &&
                                      Contains("(when checking argument 'the gradient of parameter 0' of SGD.step())"));
}

TEST_CASE("options by key", "[optim][errors]") {
  optim::AdamOptions o(0.1);
  o.set("beta1", 0.5);
  o.set("beta2", 0.75);
  o.set("amsgrad", 1);
  CHECK(std::get<0>(o.betas()) == 0.5);
  CHECK(std::get<1>(o.betas()) == 0.75);
  CHECK(o.amsgrad());
  CHECK(o.to_dict().keys() ==
        std::vector<std::string>{"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize"});
  REQUIRE_THROWS_AS(o.set("momentum", 0.9), KeyError);
  REQUIRE_THROWS_WITH(o.set("momentum", 0.9), Contains("AdamOptions has no option 'momentum' (it has 'lr', 'beta1'"));
  REQUIRE_THROWS_WITH(optim::SGDOptions(0.1).set("betas", 1), Contains("SGDOptions has no option 'betas'"));
  REQUIRE_THROWS_WITH(optim::AdamWOptions().set("nesterov", 1), Contains("AdamWOptions has no option 'nesterov'"));
}

namespace {

// check_state_dict refuses sd with load_state_dict's error, and so does
// load_state_dict.
template <typename E>
void check_refused(optim::Optimizer& opt, const optim::OptimizerStateDict& sd, const std::string& message) {
  INFO(message);
  REQUIRE_THROWS_AS(opt.check_state_dict(sd), E);
  REQUIRE_THROWS_AS(opt.load_state_dict(sd), E);
  REQUIRE_THROWS_WITH(opt.check_state_dict(sd), Contains(message));
  REQUIRE_THROWS_WITH(opt.load_state_dict(sd), Contains(message));
}

}  // namespace

TEST_CASE("load_state_dict and check_state_dict check what it loads, and change nothing when they refuse",
          "[optim][errors]") {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({3}).requires_grad_();
  optim::Adam opt({a, b}, optim::AdamOptions(0.1));
  a.mutable_grad() = ones({2});
  b.mutable_grad() = ones({3});
  opt.step();
  const optim::OptimizerStateDict good = opt.state_dict();
  const Tensor exp_avg = good.state.at(1)["exp_avg"].clone();

  optim::OptimizerStateDict sd = good;
  sd.param_groups.push_back(sd.param_groups[0]);
  check_refused<ValueError>(opt, sd,
                            "loaded state dict has a different number of parameter groups (2 saved, 1 in "
                            "this Adam)");
  sd = good;
  sd.param_groups[0].params.pop_back();
  check_refused<ValueError>(opt, sd,
                            "loaded state dict contains a parameter group that doesn't match the size of "
                            "optimizer's group (group 0: 1 parameters saved, 2 here)");
  sd = good;
  sd.param_groups[0].options.erase("eps");
  check_refused<KeyError>(opt, sd, "Adam.load_state_dict: parameter group 0 of the state dict has no 'eps'");
  sd = good;
  sd.state.at(1).erase("exp_avg_sq");
  check_refused<KeyError>(opt, sd, "Adam.load_state_dict: the state of parameter 1 has no 'exp_avg_sq'");
  sd = good;
  sd.state.at(1).insert("momentum_buffer", zeros({3}));
  check_refused<KeyError>(opt, sd, "Adam.load_state_dict: unknown state 'momentum_buffer' of parameter 1");
  sd = good;
  sd.state.at(1).insert_or_assign("exp_avg", zeros({2}));
  check_refused<ShapeError>(opt, sd, "state 'exp_avg' of parameter 1 has shape [2] but the parameter has shape [3]");
  sd = good;
  sd.state.at(1).insert_or_assign("step", zeros({2}));
  check_refused<ShapeError>(opt, sd, "state 'step' of parameter 1 has 2 elements");
  sd = good;
  sd.state.at(1).insert_or_assign("exp_avg", Tensor());
  check_refused<ValueError>(opt, sd, "state 'exp_avg' of parameter 1 is an undefined tensor");
  sd = good;
  sd.state.at(1).insert_or_assign("exp_avg_sq", zeros({3}, kInt64));
  check_refused<DtypeError>(opt, sd,
                            "Adam.load_state_dict: state 'exp_avg_sq' of parameter 1 is int64 but the "
                            "parameter is float32; optimizer state is floating point");
  sd = good;
  sd.state.at(1).insert_or_assign("step", ones({}, kInt64));  // "step" keeps any dtype, as PyTorch's
  opt.check_state_dict(sd);
  sd = good;
  sd.state.emplace(7, sd.state.at(0));
  check_refused<KeyError>(opt, sd,
                          "the state dict has state for parameter 7, which none of its parameter groups "
                          "lists");
  sd = good;
  sd.param_groups[0].options.insert_or_assign("lr", 0.5);
  sd.param_groups[0].options.insert_or_assign("momentum", 0.9);  // unknown to Adam: kept as an extra value
  sd.state.emplace(9, sd.state.at(0));                           // and a refusal after it
  check_refused<KeyError>(opt, sd, "state for parameter 9");
  CHECK(opt.param_groups()[0].options().get_lr() == 0.1);  // unchanged
  CHECK_FALSE(opt.param_groups()[0].extra().contains("momentum"));
  // An SGD state dict for an Adam optimizer.
  optim::SGD sgd({zeros({2}).requires_grad_(), zeros({3}).requires_grad_()}, optim::SGDOptions(0.1));
  check_refused<KeyError>(opt, sgd.state_dict(),
                          "parameter group 0 of the state dict has no 'beta1' (was it saved "
                          "from another optimizer?)");
  // And an Adam state for SGD: its keys, then its shapes.
  sd = good;
  sd.param_groups[0].options = sgd.state_dict().param_groups[0].options;
  check_refused<KeyError>(sgd, sd,
                          "SGD.load_state_dict: unknown state 'step' of parameter 0 (SGD keeps "
                          "'momentum_buffer'");
  sd.state.clear();
  sd.state[1].insert("momentum_buffer", zeros({4}));
  check_refused<ShapeError>(sgd, sd,
                            "SGD.load_state_dict: state 'momentum_buffer' of parameter 1 has shape [4] but "
                            "the parameter has shape [3]");

  // Nothing changed: the state is the first step's, the options are.
  const optim::OptimizerStateDict after = opt.state_dict();
  check_equal(after.state.at(1)["exp_avg"], exp_avg);
  CHECK(after.state.at(1)["step"].item<double>() == 1);
  CHECK(after.param_groups[0].options.keys() == good.param_groups[0].options.keys());
  CHECK(opt.param_groups()[0].options().get_lr() == 0.1);
  // A state dict that would change everything: check_state_dict accepts it
  // and still changes nothing; load_state_dict takes it.
  sd = good;
  sd.param_groups[0].options.insert_or_assign("lr", 0.25);
  sd.state.at(1).insert_or_assign("exp_avg", full({3}, 7.0));
  opt.check_state_dict(sd);
  CHECK(opt.param_groups()[0].options().get_lr() == 0.1);
  check_equal(opt.state_dict().state.at(1)["exp_avg"], exp_avg);
  opt.load_state_dict(sd);
  CHECK(opt.param_groups()[0].options().get_lr() == 0.25);
  check_values(opt.state_dict().state.at(1)["exp_avg"], {7, 7, 7});
  opt.load_state_dict(good);
}

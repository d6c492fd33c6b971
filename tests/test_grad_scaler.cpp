// amp::GradScaler (optim/grad_scaler.h) on every device: the scale's state
// machine on a scripted sequence of clean and overflowing steps (values by
// hand from PyTorch's rules), a skipped step leaving parameters and
// optimizer state unchanged, every misuse error in PyTorch's words, the
// state dict, the disabled scaler, the host synchronisations of a step, and
// the two device ops (detail::amp_unscale_, detail::amp_update_scale_).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "helpers.h"
#include "kernels/cuda/allocator.h"
#include "nn/checkpoint.h"
#include "tensor/ops/foreach.h"

using namespace tandem;
using Catch::Contains;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Two parameters whose gradients a test sets by hand: what a scaled
// backward would have left (the true gradient times the scale).
struct Params {
  Tensor a, b;
  explicit Params(Device device) {
    a = test::make({1.0, -2.0, 3.0}, {3}, kFloat32, device).requires_grad_();
    b = test::make({0.5, 0.25}, {2}, kFloat32, device).requires_grad_();
  }
  std::vector<Tensor> list() const { return {a, b}; }
  void set_grads(double scale, bool overflow) {
    a.mutable_grad() =
        test::make({0.1 * scale, overflow ? kInf : -0.2 * scale, 0.3 * scale}, {3}, kFloat32, a.device());
    b.mutable_grad() = test::make({0.4 * scale, -0.5 * scale}, {2}, kFloat32, b.device());
  }
};

// A fused optimizer (a, over fused) whose first step is skipped on the
// device, then three clean steps beside an unfused one (b, over plain) that
// never saw the skipped step: the same parameters bit for bit.
void check_skipped_first_step(optim::Optimizer& a, Params& fused, optim::Optimizer& b, Params& plain) {
  const Device device = fused.a.device();
  fused.set_grads(1.0, /*overflow=*/true);
  a.step_unless_found_inf(full({}, 1.0, TensorOptions(kFloat32).device(device)));  // skipped
  test::check_values(fused.a, {1, -2, 3}, test::Tolerance{0, 0});
  for (int i = 0; i < 3; ++i) {
    fused.set_grads(1.0, false);
    plain.set_grads(1.0, false);
    a.step_unless_found_inf(zeros({}, TensorOptions(kFloat32).device(device)));
    b.step();
  }
  test::check_equal(fused.a, plain.a);
  test::check_equal(fused.b, plain.b);
}

}  // namespace

DEVICE_TEST_CASE("GradScaler: the scale backs off on an overflow and grows after growth_interval clean steps",
                 "[amp][grad_scaler]") {
  Params p(device);
  optim::SGD opt(p.list(), optim::SGDOptions(0.1));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(1024).growth_interval(3));
  CHECK(scaler.get_scale() == 1024);  // init_scale before the first scale()
  Tensor dummy = ones({}, TensorOptions().device(device));
  // (overflow?, scale after update, growth tracker after update)
  const struct {
    bool overflow;
    double scale;
    int64_t tracker;
  } script[] = {{false, 1024, 1}, {false, 1024, 2}, {false, 2048, 0}, {false, 2048, 1}, {true, 1024, 0},
                {true, 512, 0},   {false, 512, 1},  {false, 512, 2},  {false, 1024, 0}};
  std::vector<double> a0 = p.a.to_vector<double>();
  int64_t taken = 0, step = 0;
  for (const auto& s : script) {
    INFO("step " << step++);
    CHECK(scaler.scale(dummy).item<double>() == scaler.get_scale());
    p.set_grads(scaler.get_scale(), s.overflow);
    std::vector<double> before = p.a.to_vector<double>();
    scaler.step(opt);
    scaler.update();
    CHECK(scaler.get_scale() == s.scale);
    CHECK(scaler.get_growth_tracker() == s.tracker);
    const std::vector<double> after = p.a.to_vector<double>();
    if (s.overflow) {
      CHECK(after == before);  // skipped: not a bit changed
    } else {
      ++taken;
      // The unscaled gradient 0.1 took one step of lr 0.1.
      CHECK(after[0] == Approx(before[0] - 0.01).epsilon(1e-6));
    }
  }
  CHECK(scaler.skipped_steps() == 2);
  CHECK(p.a.to_vector<double>()[0] == Approx(a0[0] - 0.01 * static_cast<double>(taken)).epsilon(1e-6));
}

DEVICE_TEST_CASE("GradScaler: an inf or NaN skips the step and leaves Adam's state as it was", "[amp][grad_scaler]") {
  Params p(device);
  optim::Adam opt(p.list(), optim::AdamOptions(1e-2));
  amp::GradScaler scaler;
  Tensor dummy = ones({}, TensorOptions().device(device));
  scaler.scale(dummy);
  p.set_grads(scaler.get_scale(), false);
  scaler.step(opt);
  scaler.update();
  const optim::OptimizerStateDict before = opt.state_dict();
  std::vector<std::vector<double>> moments;
  for (const auto& [i, st] : before.state)
    for (const auto& item : st.items()) moments.push_back(item.value().to_vector<double>());
  const std::vector<double> a = p.a.to_vector<double>(), b = p.b.to_vector<double>();

  scaler.scale(dummy);
  p.set_grads(scaler.get_scale(), /*overflow=*/true);
  p.b.mutable_grad() = test::make({std::nan(""), 1.0}, {2}, kFloat32, device);  // a NaN on the other parameter too
  scaler.step(opt);
  scaler.update();
  CHECK(scaler.get_scale() == 32768);  // 65536 * 0.5
  CHECK(scaler.get_growth_tracker() == 0);
  CHECK(p.a.to_vector<double>() == a);
  CHECK(p.b.to_vector<double>() == b);
  size_t k = 0;
  for (const auto& [i, st] : opt.state_dict().state)
    for (const auto& item : st.items()) CHECK(item.value().to_vector<double>() == moments[k++]);
  CHECK(k == moments.size());
}

DEVICE_TEST_CASE("GradScaler: unscale_ before clipping divides the gradients exactly; bfloat16 gradients too",
                 "[amp][grad_scaler]") {
  Params p(device);
  optim::SGD opt(p.list(), optim::SGDOptions(0.1));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(256));
  scaler.scale(ones({}, TensorOptions().device(device)));
  p.a.mutable_grad() = test::make({25.6, -51.2, 76.8}, {3}, kFloat32, device);
  p.b.mutable_grad() = test::make({256, -128}, {2}, kFloat32, device);
  scaler.unscale_(opt);
  test::check_values(p.a.grad(), {0.1, -0.2, 0.3}, test::Tolerance{1e-6, 0});
  test::check_values(p.b.grad(), {1, -0.5}, test::Tolerance{0, 0});
  scaler.step(opt);  // already unscaled: not again
  test::check_values(p.b, {0.4, 0.3}, test::Tolerance{1e-6, 1e-7});
  scaler.update();

  Tensor w = test::make({1, 2}, {2}, kBFloat16, device).requires_grad_();
  optim::SGD opt16({w}, optim::SGDOptions(1));
  w.mutable_grad() = test::make({512, -256}, {2}, kBFloat16, device);
  scaler.scale(ones({}, TensorOptions().device(device)));
  scaler.step(opt16);
  test::check_values(w, {-1, 3}, test::Tolerance{0, 0});  // grads 2 and -1 after unscaling by 256
}

DEVICE_TEST_CASE("GradScaler: misuse raises PyTorch's errors", "[amp][grad_scaler][errors]") {
  Params p(device);
  optim::SGD opt(p.list(), optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  CHECK_THROWS_WITH(scaler.unscale_(opt),
                    Catch::StartsWith("Attempted unscale_ but _scale is None.  This may indicate your script did not "
                                      "use scaler.scale(loss or outputs) earlier in the iteration."));
  CHECK_THROWS_WITH(scaler.update(), Catch::StartsWith("Attempted update but _scale is None."));
  CHECK_THROWS_WITH(scaler.step(opt), Catch::StartsWith("Attempted step but _scale is None."));
  scaler.scale(ones({}, TensorOptions().device(device)));
  CHECK_THROWS_WITH(scaler.step(opt), Catch::StartsWith("No inf checks were recorded for this optimizer."));
  CHECK_THROWS_WITH(scaler.update(), Catch::StartsWith("No inf checks were recorded prior to update."));
  // As in PyTorch, that step() left the optimizer unscaled (with no checks):
  // an update with a new scale starts the next iteration.
  CHECK_THROWS_WITH(scaler.unscale_(opt),
                    "unscale_() has already been called on this optimizer since the last update().");
  scaler.update(scaler.get_scale());
  p.set_grads(scaler.get_scale(), false);
  scaler.unscale_(opt);
  CHECK_THROWS_WITH(scaler.unscale_(opt),
                    "unscale_() has already been called on this optimizer since the last update().");
  scaler.step(opt);
  CHECK_THROWS_WITH(scaler.step(opt), "step() has already been called since the last update().");
  CHECK_THROWS_WITH(scaler.unscale_(opt), "unscale_() is being called after step().");
  scaler.update();
  CHECK_NOTHROW(scaler.unscale_(opt));  // a new iteration
  CHECK_THROWS_WITH(scaler.update(ones({2}, TensorOptions().device(device))),
                    Catch::StartsWith("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                                      "torch.FloatTensor with requires_grad=False."));
  scaler.update(full({1}, 8.0, TensorOptions().device(device)));
  CHECK(scaler.get_scale() == 8);
  scaler.update(4.0);
  CHECK(scaler.get_scale() == 4);

  Tensor h = ones({2}, TensorOptions(kFloat16).device(device)).requires_grad_();
  h.mutable_grad() = ones({2}, TensorOptions(kFloat16).device(device));
  p.set_grads(scaler.get_scale(), false);
  const std::vector<double> before = p.a.grad().to_vector<double>();
  scaler.update(scaler.get_scale());
  optim::SGD mixed({p.a, h}, optim::SGDOptions(0.1));
  CHECK_THROWS_WITH(scaler.unscale_(mixed), Catch::StartsWith("Attempting to unscale FP16 gradients."));
  CHECK(p.a.grad().to_vector<double>() == before);  // refused before anything was divided

  CHECK_THROWS_WITH(amp::GradScaler(amp::GradScalerOptions().growth_factor(1.0)),
                    Catch::StartsWith("The growth factor must be > 1.0."));
  CHECK_THROWS_WITH(amp::GradScaler(amp::GradScalerOptions().backoff_factor(1.0)),
                    Catch::StartsWith("The backoff factor must be < 1.0."));
  CHECK_THROWS_WITH(amp::GradScaler(amp::GradScalerOptions().growth_interval(0)),
                    "GradScaler: growth_interval must be positive, got 0");
  CHECK_THROWS_WITH(amp::GradScaler(amp::GradScalerOptions().init_scale(-1)),
                    "GradScaler: init_scale must be a positive finite number, got -1");
}

DEVICE_TEST_CASE("GradScaler: state_dict has PyTorch's keys and loads into another scaler", "[amp][grad_scaler]") {
  Params p(device);
  optim::SGD opt(p.list(), optim::SGDOptions(0.1));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(64).growth_interval(5).growth_factor(4));
  for (int i = 0; i < 3; ++i) {
    scaler.scale(ones({}, TensorOptions().device(device)));
    p.set_grads(scaler.get_scale(), false);
    scaler.step(opt);
    scaler.update();
  }
  const OrderedDict<std::string, double> sd = scaler.state_dict();
  REQUIRE(sd.keys() ==
          std::vector<std::string>{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"});
  CHECK(sd["scale"] == 64);
  CHECK(sd["growth_factor"] == 4);
  CHECK(sd["backoff_factor"] == 0.5);
  CHECK(sd["growth_interval"] == 5);
  CHECK(sd["_growth_tracker"] == 3);

  amp::GradScaler fresh;  // loaded before its scale exists, then after
  fresh.load_state_dict(sd);
  CHECK(fresh.get_scale() == 64);
  CHECK(fresh.get_growth_tracker() == 3);
  fresh.scale(ones({}, TensorOptions().device(device)));
  CHECK(fresh.get_scale() == 64);
  CHECK(fresh.get_growth_tracker() == 3);
  for (int i = 0; i < 2; ++i) {  // two more clean steps reach the interval of 5
    p.set_grads(fresh.get_scale(), false);
    fresh.step(opt);
    fresh.update();
    fresh.scale(ones({}, TensorOptions().device(device)));
  }
  CHECK(fresh.get_scale() == 256);
  CHECK(fresh.get_growth_tracker() == 0);
  OrderedDict<std::string, double> changed = sd;
  changed["scale"] = 2;
  fresh.load_state_dict(changed);
  CHECK(fresh.get_scale() == 2);

  CHECK_THROWS_WITH(fresh.load_state_dict(OrderedDict<std::string, double>()),
                    "The source state dict is empty, possibly because it was saved from a disabled instance of "
                    "GradScaler.");
  OrderedDict<std::string, double> partial;
  partial.insert("scale", 1);
  CHECK_THROWS_AS(fresh.load_state_dict(partial), KeyError);
  CHECK_THROWS_WITH(fresh.load_state_dict(partial), Catch::StartsWith("GradScaler.load_state_dict: the state dict "
                                                                      "has no 'growth_factor'"));
}

DEVICE_TEST_CASE("GradScaler: a disabled scaler passes everything through", "[amp][grad_scaler]") {
  Params p(device);
  optim::SGD opt(p.list(), optim::SGDOptions(0.1));
  amp::GradScaler scaler(amp::GradScalerOptions().enabled(false));
  Tensor loss = full({}, 3.0, TensorOptions().device(device));
  CHECK(scaler.scale(loss).is_same(loss));
  CHECK(scaler.get_scale() == 1.0);
  CHECK_FALSE(scaler.is_enabled());
  p.set_grads(1.0, true);  // an inf: not checked, the optimizer steps
  p.a.mutable_grad() = test::make({1, 1, 1}, {3}, kFloat32, device);
  scaler.unscale_(opt);
  scaler.step(opt);
  scaler.update();
  test::check_values(p.a, {0.9, -2.1, 2.9}, test::Tolerance{1e-6, 1e-7});
  CHECK(scaler.state_dict().is_empty());
}

TEST_CASE("GradScaler: a whole step makes no host synchronisation with SGD, one with Adam", "[amp][grad_scaler]") {
  if (!cuda::is_available() || cuda::detail::caching_disabled()) return;
  const Device dev("cuda:0");
  Tensor loss = full({}, 2.0, TensorOptions().device(dev));
  auto syncs_of_a_step = [&](optim::Optimizer& opt, Params& p, amp::GradScaler& scaler, bool overflow) {
    Tensor l = scaler.scale(loss);
    p.a.mutable_grad() = full({3}, overflow ? kInf : 1.0, TensorOptions().device(dev)) * l;
    p.b.mutable_grad() = full({2}, 1.0, TensorOptions().device(dev)) * l;
    const int64_t n = cuda::host_synchronizations(0);
    scaler.unscale_(opt);
    scaler.step(opt);
    scaler.update();
    return cuda::host_synchronizations(0) - n;
  };
  {
    Params p(dev);
    optim::SGD sgd(p.list(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
    REQUIRE(sgd.supports_amp_scaling());
    amp::GradScaler scaler;
    for (int i = 0; i < 2; ++i) syncs_of_a_step(sgd, p, scaler, false);  // warm: buffers, the allocator's blocks
    CHECK(syncs_of_a_step(sgd, p, scaler, false) == 0);
    const std::vector<double> a = p.a.to_vector<double>();
    const Tensor buffer = static_cast<const optim::SGDParamState&>(*sgd.state().at(p.a.impl())).momentum_buffer();
    const std::vector<double> m = buffer.to_vector<double>();
    CHECK(syncs_of_a_step(sgd, p, scaler, /*overflow=*/true) == 0);  // skipped on the device
    CHECK(p.a.to_vector<double>() == a);
    CHECK(buffer.to_vector<double>() == m);
    CHECK(scaler.get_scale() == 32768);
    CHECK(scaler.skipped_steps() == 1);
  }
  {
    Params p(dev);
    optim::Adam adam(p.list(), optim::AdamOptions(1e-3));
    CHECK_FALSE(adam.supports_amp_scaling());
    amp::GradScaler scaler;
    for (int i = 0; i < 2; ++i) syncs_of_a_step(adam, p, scaler, false);
    CHECK(syncs_of_a_step(adam, p, scaler, false) == 1);  // step reads the flag back
  }
  for (bool adamw : {false, true}) {
    INFO((adamw ? "fused AdamW" : "fused Adam"));
    Params p(dev);
    std::unique_ptr<optim::Optimizer> opt;
    if (adamw)
      opt = std::make_unique<optim::AdamW>(p.list(), optim::AdamWOptions(1e-3).fused(true));
    else
      opt = std::make_unique<optim::Adam>(p.list(), optim::AdamOptions(1e-3).amsgrad(true).fused(true));
    REQUIRE(opt->supports_amp_scaling());
    amp::GradScaler scaler;
    for (int i = 0; i < 2; ++i) syncs_of_a_step(*opt, p, scaler, false);
    CHECK(syncs_of_a_step(*opt, p, scaler, false) == 0);
    const std::vector<double> a = p.a.to_vector<double>();
    const optim::OptimizerStateDict before = opt->state_dict();
    std::vector<std::vector<double>> state;
    for (const auto& [i, st] : before.state)
      for (const auto& item : st.items()) state.push_back(item.value().to_vector<double>());
    CHECK(syncs_of_a_step(*opt, p, scaler, /*overflow=*/true) == 0);  // skipped on the device
    CHECK(p.a.to_vector<double>() == a);
    size_t k = 0;
    for (const auto& [i, st] : opt->state_dict().state)
      for (const auto& item : st.items()) CHECK(item.value().to_vector<double>() == state[k++]);  // step too
    CHECK(k == state.size());
    CHECK(opt->state_dict().state.at(0)["step"].to_vector<double>() == std::vector<double>{3});
    // Without unscale_: the scaler's pass only checks, the kernel unscales.
    auto step_only = [&] {
      Tensor l = scaler.scale(loss);
      p.a.mutable_grad() = full({3}, 1.0, TensorOptions().device(dev)) * l;
      p.b.mutable_grad() = full({2}, 1.0, TensorOptions().device(dev)) * l;
      const int64_t n = cuda::host_synchronizations(0);
      scaler.step(*opt);
      scaler.update();
      return cuda::host_synchronizations(0) - n;
    };
    step_only();
    CHECK(step_only() == 0);
    test::check_values(p.a.grad(), {2, 2, 2}, test::Tolerance{0, 0});  // the loss, 2, unscaled in the kernel
  }
}

TEST_CASE("GradScaler: scale() of a list copies the scale once per device", "[amp][grad_scaler]") {
  if (cuda::device_count() < 2 || cuda::detail::caching_disabled()) return;
  const Device d0("cuda:0"), d1("cuda:1");
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(8));
  scaler.scale(ones({}, TensorOptions().device(d0)));  // the scale lives on cuda:0
  const Tensor x = full({2}, 3.0, TensorOptions().device(d1));
  int64_t n = cuda::host_synchronizations(1);
  scaler.scale(x);
  const int64_t one_copy = cuda::host_synchronizations(1) - n;
  REQUIRE(one_copy > 0);
  n = cuda::host_synchronizations(1);
  const std::vector<Tensor> out = scaler.scale({full({}, 2.0, TensorOptions().device(d0)), x, x * 2});
  CHECK(cuda::host_synchronizations(1) - n == one_copy);
  REQUIRE(out.size() == 3);
  CHECK(out[0].item<double>() == 16);
  CHECK(out[0].device() == d0);
  test::check_values(out[1], {24, 24}, test::Tolerance{0, 0});
  test::check_values(out[2], {48, 48}, test::Tolerance{0, 0});
  CHECK(out[2].device() == d1);
  CHECK_THROWS_WITH(scaler.scale(std::vector<Tensor>{x, Tensor()}),
                    "GradScaler.scale: outputs holds an undefined tensor");
  CHECK(amp::GradScaler().scale(std::vector<Tensor>{}).empty());  // as PyTorch: nothing to scale
}

TEST_CASE("GradScaler: gradients on two devices, an inf on the other one skips the step", "[amp][grad_scaler]") {
  if (cuda::device_count() < 2) return;
  Tensor a = test::make({1, 2}, {2}, kFloat32, Device("cuda:0")).requires_grad_();
  Tensor b = test::make({3, 4}, {2}, kFloat32, Device("cuda:1")).requires_grad_();
  for (bool fused : {true, false}) {
    INFO((fused ? "SGD (fused skip)" : "Adam (flag read)"));
    std::unique_ptr<optim::Optimizer> opt;
    if (fused)
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{a, b}, optim::SGDOptions(0.5));
    else
      opt = std::make_unique<optim::Adam>(std::vector<Tensor>{a, b}, optim::AdamOptions(0.5));
    amp::GradScaler scaler(amp::GradScalerOptions().init_scale(4));
    scaler.scale(ones({}, TensorOptions().device("cuda:0")));
    a.mutable_grad() = test::make({4, 4}, {2}, kFloat32, Device("cuda:0"));
    b.mutable_grad() = test::make({4, kInf}, {2}, kFloat32, Device("cuda:1"));
    const std::vector<double> a0 = a.to_vector<double>(), b0 = b.to_vector<double>();
    scaler.step(*opt);
    scaler.update();
    CHECK(a.to_vector<double>() == a0);
    CHECK(b.to_vector<double>() == b0);
    CHECK(scaler.get_scale() == 2);
    scaler.scale(ones({}, TensorOptions().device("cuda:0")));
    a.mutable_grad() = test::make({2, 2}, {2}, kFloat32, Device("cuda:0"));
    b.mutable_grad() = test::make({2, 2}, {2}, kFloat32, Device("cuda:1"));
    scaler.step(*opt);
    scaler.update();
    CHECK(a.to_vector<double>() != a0);  // a clean step on both devices
    CHECK(b.to_vector<double>() != b0);
  }
}

DEVICE_TEST_CASE("SGD's fused skip: a first step skipped leaves a zero buffer that the next fills as a fresh one",
                 "[amp][grad_scaler]") {
  Params fused(device), plain(device);
  optim::SGD a(fused.list(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD b(plain.list(), optim::SGDOptions(0.1).momentum(0.9));
  {
    NoGradGuard no_grad;
    check_skipped_first_step(a, fused, b, plain);
  }
  optim::SGD damped(fused.list(), optim::SGDOptions(0.1).momentum(0.9).dampening(0.1));
  CHECK_FALSE(damped.supports_amp_scaling());
  CHECK_THROWS_AS(damped.step_unless_found_inf(zeros({}, TensorOptions().device(device))), NotImplementedError);
  optim::Adam adam(fused.list(), optim::AdamOptions(1e-3));
  CHECK_THROWS_WITH(adam.step_unless_found_inf(zeros({}, TensorOptions().device(device))),
                    Catch::StartsWith("Adam: step_unless_found_inf needs fused(true) in every group"));
  CHECK_THROWS_AS(adam.step_unless_found_inf(zeros({}, TensorOptions().device(device))), NotImplementedError);
  optim::AdamW adamw(fused.list(), optim::AdamWOptions(1e-3).fused(true));
  CHECK_THROWS_WITH(adamw.step_unless_found_inf(zeros({}, TensorOptions(kFloat64).device(device))),
                    "AdamW: step_unless_found_inf: found_inf must be a one-element float32 tensor");
  CHECK_THROWS_WITH(a.step_unless_found_inf(zeros({}, TensorOptions(kFloat32).device(device)),
                                            zeros({2}, TensorOptions(kFloat32).device(device))),
                    "SGD: step_unless_found_inf: grad_scale must be undefined or a one-element float32 tensor");
}

namespace {

// The state of an optimizer as numbers, by parameter and name, "step"
// included.
std::vector<std::vector<double>> state_values(const optim::Optimizer& opt) {
  std::vector<std::vector<double>> out;
  for (const auto& [i, st] : opt.state_dict().state)
    for (const auto& item : st.items()) out.push_back(item.value().to_vector<double>());
  return out;
}

}  // namespace

DEVICE_TEST_CASE(
    "Fused Adam and AdamW: the same bits as unfused ones, a skipped step leaving the counts, the unscale "
    "in the kernel",
    "[amp][grad_scaler]") {
  // Two runs through a GradScaler with a scale that is not a power of two
  // (so the unscale rounds): an unfused optimizer (unscale_ pass, flag read
  // back) and a fused one (check-only pass, unscale in its kernel, skip on
  // the device). With float32 and float64 every bit of parameters, moments,
  // counts and gradients agrees, through a skipped step. A bfloat16 step
  // updates with the unscaled gradient before it is rounded (the unfused
  // path reads it rounded): the gradients agree, the rest within bfloat16's
  // rounding. On a real GPU a float64 step's bias corrections come from
  // CUDA's pow, within an ulp or two of the host's: a few ulp there.
  const bool real_gpu = device.is_cuda() && !cuda::is_emulated() && !cuda::is_simulated();
  for (Dtype dt : {kFloat32, kFloat64, kBFloat16}) {
    const bool exact = dt == kFloat32 || (dt == kFloat64 && !real_gpu);
    const test::Tolerance tol = dt == kBFloat16 ? test::Tolerance{2e-2, 1e-2} : test::Tolerance{1e-14, 0};
    for (int variant = 0; variant < 3; ++variant) {
      INFO(dt << ", " << (variant == 0 ? "Adam" : variant == 1 ? "Adam amsgrad, weight decay" : "AdamW"));
      auto make_opt = [&](const std::vector<Tensor>& params, bool fused) -> std::unique_ptr<optim::Optimizer> {
        if (variant == 2) return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(1e-2).fused(fused));
        return std::make_unique<optim::Adam>(
            params, optim::AdamOptions(1e-2).amsgrad(variant == 1).weight_decay(variant == 1 ? 0.1 : 0).fused(fused));
      };
      // w: (2, 3) with a transposed (non-contiguous) gradient; v: (70000,),
      // past one 64K chunk of the CUDA kernel.
      auto make_params = [&] {
        Tensor w = test::make({0.5, -1.0, 1.5, 2.0, -0.25, 0.75}, {2, 3}, dt, device).requires_grad_();
        Tensor v = (arange(70000, TensorOptions(kFloat64)) * 1e-4 - 3.0).to(device, dt).requires_grad_();
        return std::vector<Tensor>{w, v};
      };
      const std::vector<Tensor> pu = make_params(), pf = make_params();
      auto unfused = make_opt(pu, false), fused = make_opt(pf, true);
      REQUIRE(fused->supports_amp_scaling());
      REQUIRE_FALSE(unfused->supports_amp_scaling());
      amp::GradScaler su(amp::GradScalerOptions().init_scale(3.0)), sf(amp::GradScalerOptions().init_scale(3.0));
      const Tensor one = ones({}, TensorOptions().device(device));
      for (int step = 0; step < 4; ++step) {
        INFO("step " << step);
        const bool overflow = step == 2;
        for (const auto& [params, scaler] : {std::pair{&pu, &su}, std::pair{&pf, &sf}}) {
          const double scale = scaler->scale(one).item<double>();
          const double k = 0.3 * (step + 1);
          (*params)[0].mutable_grad() =
              test::make({k * scale, -0.2 * scale, 0.7 * scale, overflow ? kInf : 0.1 * scale, -k * scale, 0.4 * scale},
                         {3, 2}, dt, device)
                  .t();
          (*params)[1].mutable_grad() = (ones({70000}, TensorOptions(kFloat64)) * (k * scale)).to(device, dt);
        }
        su.step(*unfused);
        sf.step(*fused);
        su.update();
        sf.update();
        CHECK(su.get_scale() == sf.get_scale());
        for (size_t i = 0; i < pu.size(); ++i) {
          if (exact)
            test::check_equal(pf[i], pu[i]);
          else
            test::check_close(pf[i], pu[i], tol);
          if (!overflow) test::check_equal(pf[i].grad(), pu[i].grad());  // unscaled either way
        }
        if (exact) {
          CHECK(state_values(*fused) == state_values(*unfused));
        } else {
          const optim::OptimizerStateDict a = fused->state_dict(), b = unfused->state_dict();
          for (const auto& [i, st] : b.state)
            for (const auto& item : st.items()) test::check_close(a.state.at(i)[item.key()], item.value(), tol);
        }
      }
      CHECK(su.skipped_steps() == 1);
      CHECK(fused->state_dict().state.at(1)["step"].device() == device);
      CHECK(unfused->state_dict().state.at(1)["step"].is_cpu());
      CHECK(state_values(*fused)[0] == std::vector<double>{3});  // 4 steps, one skipped
    }
  }
}

DEVICE_TEST_CASE("Fused Adam: load_state_dict puts a step count saved on the cpu on the parameter's device",
                 "[amp][grad_scaler]") {
  Params p(device);
  optim::Adam unfused(p.list(), optim::AdamOptions(1e-2));
  p.set_grads(1.0, false);
  unfused.step();
  unfused.step();
  const optim::OptimizerStateDict saved = unfused.state_dict();
  REQUIRE(saved.state.at(0)["step"].is_cpu());

  Params q(device);
  q.a.detach().copy_(p.a.detach());
  q.b.detach().copy_(p.b.detach());
  optim::Adam fused(q.list(), optim::AdamOptions(1e-2).fused(true));
  fused.load_state_dict(saved);
  // There at once, as PyTorch's fused Adam loads it; the saved one stays.
  CHECK(fused.state_dict().state.at(0)["step"].device() == device);
  CHECK(saved.state.at(0)["step"].is_cpu());
  q.set_grads(1.0, false);
  p.set_grads(1.0, false);
  fused.step();
  unfused.step();
  const Tensor step = fused.state_dict().state.at(0)["step"];
  CHECK(step.device() == device);
  CHECK(step.dtype() == kFloat32);
  CHECK(step.to_vector<double>() == std::vector<double>{3});
  test::check_equal(q.a, p.a);
  test::check_equal(q.b, p.b);
  CHECK(state_values(fused) == state_values(unfused));
}

TEST_CASE("Fused Adam: a step count left on another device is the same-device error", "[amp][grad_scaler]") {
  if (cuda::device_count() < 2) return;
  Tensor w = test::make({1, 2}, {2}, kFloat32, Device("cuda:0")).requires_grad_();
  optim::Adam adam({w}, optim::AdamOptions(1e-2).fused(true));
  w.mutable_grad() = test::make({1, 1}, {2}, kFloat32, Device("cuda:0"));
  adam.step();
  auto& state = static_cast<optim::AdamParamState&>(*adam.state().at(w.impl()));
  state.step(state.step().to(Device("cuda:1")));
  CHECK_THROWS_WITH(adam.step(), Contains("Expected all tensors to be on the same device, but found at least two "
                                          "devices, cuda:0 and cuda:1!") &&
                                     Contains("step of parameter 0") &&
                                     Contains("optimizer.load_state_dict(optimizer.state_dict())"));
  // The fix the message gives: the count goes to the parameter's device.
  adam.load_state_dict(adam.state_dict());
  adam.step();
  const Tensor step = adam.state_dict().state.at(0)["step"];
  CHECK(step.device() == Device("cuda:0"));
  CHECK(step.item<double>() == 2);
}

DEVICE_TEST_CASE("Fused Adam: a skipped first step leaves a zero state that the next step takes as a fresh one",
                 "[amp][grad_scaler]") {
  // At the initial scale, 65536, the first steps often overflow: the fused
  // step has made its state (count 0, zero moments) where the unfused one
  // made none; the next clean step is a first step either way.
  Params fused(device), plain(device);
  optim::Adam a(fused.list(), optim::AdamOptions(1e-2).fused(true));
  optim::Adam b(plain.list(), optim::AdamOptions(1e-2));
  check_skipped_first_step(a, fused, b, plain);
  CHECK(state_values(a) == state_values(b));  // the counts too: 3 each
}

DEVICE_TEST_CASE("Fused Adam with float16 parameters: a gradient below float16's range after unscaling still steps",
                 "[amp][grad_scaler]") {
  // The true gradient 2^-26 is under float16's smallest subnormal (2^-24);
  // scaled by 65536 it is 2^-10. Unscaled to float16 first it would be 0 and
  // Adam would not move; the fused kernel uses it in float32, as PyTorch's
  // fused Adam: the first step is lr * g / (|g| + eps) = 0.01 * 0.6.
  Tensor w = full({4}, 1.0, TensorOptions(kFloat16).device(device)).requires_grad_();
  optim::Adam adam({w}, optim::AdamOptions(1e-2).fused(true));
  amp::GradScaler scaler;  // 65536
  scaler.scale(ones({}, TensorOptions().device(device)));
  w.mutable_grad() = full({4}, std::ldexp(1.0, -10), TensorOptions(kFloat16).device(device));
  scaler.step(adam);
  scaler.update();
  const double g = std::ldexp(1.0, -26), expected = 1.0 - 1e-2 * g / (g + 1e-8);
  test::check_values(w, std::vector<double>(4, expected), test::Tolerance{0, 1e-3});  // float16's step at 1: 2^-11
  CHECK(w.to_vector<double>()[0] < 1.0);
  test::check_values(w.grad(), {0, 0, 0, 0}, test::Tolerance{0, 0});  // stored unscaled: rounds to 0
}

TEST_CASE("GradScaler: a fused step that throws leaves the gradients scaled, and the retry unscales them once",
          "[amp][grad_scaler]") {
  if (!cuda::is_available()) return;
  const Device gpu("cuda:0");
  Tensor w = test::make({1, 2, 3}, {3}, kFloat32, Device(kCPU)).requires_grad_();
  optim::Adam adam({w}, optim::AdamOptions(1e-2).fused(true));
  w.mutable_grad() = full({3}, 1.0, TensorOptions());
  adam.step();  // its state is made on the cpu
  {
    NoGradGuard no_grad;
    w.set_data(w.to(gpu));  // moved after: the state is stale
  }
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(4));
  scaler.scale(ones({}, TensorOptions().device(gpu)));
  w.mutable_grad() = full({3}, 8.0, TensorOptions().device(gpu));  // the true gradient 2, scaled by 4
  CHECK_THROWS_AS(scaler.step(adam), DeviceError);
  test::check_values(w.grad(), {8, 8, 8}, test::Tolerance{0, 0});  // checked, not unscaled
  adam.load_state_dict(adam.state_dict());                         // the state to the parameter's device
  scaler.step(adam);
  scaler.update();
  test::check_values(w.grad(), {2, 2, 2}, test::Tolerance{0, 0});  // unscaled once, by the step's kernel
  CHECK(adam.state_dict().state.at(0)["step"].item<double>() == 2);
  CHECK(scaler.get_scale() == 4);
}

DEVICE_TEST_CASE("amp_unscale_ and amp_update_scale_: every dtype, strided and large gradients, inf and NaN",
                 "[amp][grad_scaler]") {
  NoGradGuard no_grad;
  const TensorOptions f32 = TensorOptions(kFloat32).device(device);
  for (Dtype dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    INFO(dt);
    // 70000 elements: more than one 64K chunk of the CUDA kernel.
    Tensor big = full({70000}, 4.0, TensorOptions(dt).device(device));
    big[69999].fill_(8.0);
    Tensor strided = test::make({8, 16, 24, 32, 40, 48}, {2, 3}, dt, device).t();
    Tensor found = zeros({}, f32);
    detail::amp_unscale_({big, strided}, found, full({}, 0.25, f32));
    CHECK(found.item<float>() == 0.0f);
    CHECK(big.min().item<double>() == 1.0);
    CHECK(big[69998].item<double>() == 1.0);
    CHECK(big[69999].item<double>() == 2.0);
    test::check_values(strided.t(), {2, 4, 6, 8, 10, 12}, test::Tolerance{0, 0});
    if (dt == kFloat64) {  // a large finite float64 is not an inf
      Tensor g = full({4}, 1e300, TensorOptions(dt).device(device));
      Tensor f = zeros({}, f32);
      detail::amp_unscale_({g}, f, full({}, 0.5, f32));
      CHECK(f.item<float>() == 0.0f);
      CHECK(g[0].item<double>() == 5e299);
    }
    for (double bad : {kInf, -kInf, std::nan("")}) {
      Tensor g = ones({70000}, TensorOptions(dt).device(device));
      g[69990].fill_(bad);  // in the second chunk
      Tensor f = zeros({}, f32);
      detail::amp_unscale_({ones({5}, TensorOptions(dt).device(device)), g}, f, full({}, 0.5, f32));
      CHECK(f.item<float>() == 1.0f);
      CHECK(g[0].item<double>() == 0.5);  // every element is still scaled
      // The check alone: the flag, and not a gradient written.
      Tensor h = full({70000}, 3.0, TensorOptions(dt).device(device));
      h[69990].fill_(bad);
      Tensor strided_h = test::make({8, 16, 24, 32, 40, 48}, {2, 3}, dt, device).t();
      Tensor f2 = zeros({}, f32);
      detail::amp_check_finite_({strided_h, h}, f2);
      CHECK(f2.item<float>() == 1.0f);
      CHECK(h[0].item<double>() == 3.0);
      test::check_values(strided_h.t(), {8, 16, 24, 32, 40, 48}, test::Tolerance{0, 0});
    }
    Tensor f3 = zeros({}, f32);
    detail::amp_check_finite_({big, strided}, f3);
    CHECK(f3.item<float>() == 0.0f);
  }
  CHECK_THROWS_WITH(detail::amp_check_finite_({ones({2}, f32)}, zeros({}, TensorOptions(kFloat64).device(device))),
                    "amp_check_finite_: found_inf must be a one-element float32 tensor, but got shape [] and dtype "
                    "float64");
  CHECK_THROWS_WITH(
      detail::amp_unscale_({ones({2}, f32)}, zeros({2}, f32), full({}, 0.5, f32)),
      "amp_unscale_: found_inf must be a one-element float32 tensor, but got shape [2] and dtype float32");

  Tensor scale = full({}, 4.0, f32), tracker = zeros({}, TensorOptions(kInt32).device(device));
  auto update = [&](bool inf) {
    detail::amp_update_scale_(scale, tracker, full({}, inf ? 1.0 : 0.0, f32), 2.0, 0.25, 2);
  };
  update(false);
  CHECK(scale.item<float>() == 4.0f);
  CHECK(tracker.item<int32_t>() == 1);
  update(false);
  CHECK(scale.item<float>() == 8.0f);
  CHECK(tracker.item<int32_t>() == 0);
  update(true);
  CHECK(scale.item<float>() == 2.0f);
  scale.fill_(3e38);  // growing would overflow to inf: it stays
  update(false);
  update(false);
  CHECK(scale.item<float>() == 3e38f);
  CHECK(tracker.item<int32_t>() == 0);
}

DEVICE_TEST_CASE("GradScaler: its state goes into a checkpoint and comes back, checked before anything loads",
                 "[amp][grad_scaler][checkpoint]") {
  test::TempDir dir;
  manual_seed(7);
  nn::Linear model(3, 2);
  model->to(device);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(512).growth_interval(4));
  for (bool overflow : {false, true, false}) {
    opt.zero_grad();
    scaler.scale(model->forward(ones({1, 3}, TensorOptions().device(device))).sum()).backward();
    if (overflow) model->weight.mutable_grad().fill_(std::nan(""));
    scaler.step(opt);
    scaler.update();
  }
  CHECK(scaler.get_scale() == 256);
  CHECK(scaler.get_growth_tracker() == 1);
  const std::string path = dir.file("amp.safetensors");
  nn::save_checkpoint(path, *model, &opt, nullptr, 3, &scaler);

  nn::Linear model2(3, 2);
  model2->to(device);
  optim::SGD opt2(model2->parameters(), optim::SGDOptions(0.1));
  amp::GradScaler scaler2;
  CHECK(nn::load_checkpoint(path, *model2, &opt2, nullptr, std::nullopt, true, &scaler2) == 3);
  CHECK(scaler2.get_scale() == 256);
  CHECK(scaler2.get_growth_tracker() == 1);
  CHECK(scaler2.get_growth_interval() == 4);
  test::check_equal(model2->weight, model->weight);

  // Without a scaler's state, or with a disabled one's: refused, the model untouched.
  const std::string plain = dir.file("plain.safetensors");
  nn::save_checkpoint(plain, *model, &opt, nullptr, 1);
  nn::Linear model3(3, 2);
  model3->to(device);
  const Tensor before = model3->weight.clone();
  amp::GradScaler scaler3;
  CHECK_THROWS_AS(nn::load_checkpoint(plain, *model3, nullptr, nullptr, std::nullopt, true, &scaler3), KeyError);
  CHECK_THROWS_WITH(nn::load_checkpoint(plain, *model3, nullptr, nullptr, std::nullopt, true, &scaler3),
                    Contains("holds no grad scaler state (no \"grad_scaler\" entry): it was saved without one"));
  const std::string disabled = dir.file("disabled.safetensors");
  amp::GradScaler off(amp::GradScalerOptions().enabled(false));
  nn::save_checkpoint(disabled, *model, nullptr, nullptr, 1, &off);
  CHECK_THROWS_WITH(nn::load_checkpoint(disabled, *model3, nullptr, nullptr, std::nullopt, true, &scaler3),
                    Contains("The source state dict is empty, possibly because it was saved from a disabled instance "
                             "of GradScaler."));
  test::check_equal(model3->weight, before);
  CHECK(scaler3.get_scale() == 65536);
}

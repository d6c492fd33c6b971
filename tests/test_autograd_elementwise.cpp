// Gradients of the elementwise ops and conversions: gradcheck and
// gradgradcheck (float64, finite differences) for every op on every device,
// with broadcast, scalar and non-contiguous operands and the in-place forms;
// the values PyTorch picks at non-differentiable points; gradient dtypes and
// devices.
#include <functional>

#include "helpers.h"

using namespace tandem;
using Catch::Contains;
using test::check_close;
using test::check_values;
using test::make;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A float64 leaf on device that requires grad.
Tensor leaf(const std::vector<double>& values, IntArrayRef shape, Device device) {
  return make(values, shape, kFloat64, device).requires_grad_();
}

// First and second derivatives of fn at inputs, both checked by finite differences.
void check_gradients(const Fn& fn, const std::vector<Tensor>& inputs, bool second_order = true) {
  autograd::GradcheckFn wrapped = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; };
  INFO("first order");
  CHECK(autograd::gradcheck(wrapped, inputs) == "");
  if (second_order) {
    INFO("second order");
    CHECK(autograd::gradgradcheck(wrapped, inputs) == "");
  }
}

const std::vector<double> kMixed = {-1.3, 0.4, 2.1, -0.7, 1.6, 0.9};   // no zeros
const std::vector<double> kPositive = {0.3, 1.7, 2.4, 0.8, 1.1, 3.2};  // for log, sqrt, pow

}  // namespace

DEVICE_TEST_CASE("unary ops: gradients match finite differences", "[autograd][elementwise]") {
  struct Op {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    bool positive;  // needs x > 0
  };
  const std::vector<Op> ops = {
      {"neg", [](const Tensor& x) { return -x; }, false},
      {"abs", [](const Tensor& x) { return x.abs(); }, false},
      {"exp", [](const Tensor& x) { return x.exp(); }, false},
      {"log", [](const Tensor& x) { return x.log(); }, true},
      {"log1p", [](const Tensor& x) { return x.log1p(); }, true},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }, true},
      {"rsqrt", [](const Tensor& x) { return x.rsqrt(); }, true},
      {"sin", [](const Tensor& x) { return x.sin(); }, false},
      {"cos", [](const Tensor& x) { return x.cos(); }, false},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, false},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, false},
      {"relu", [](const Tensor& x) { return x.relu(); }, false},
      {"gelu", [](const Tensor& x) { return x.gelu(); }, false},
      {"gelu tanh", [](const Tensor& x) { return x.gelu("tanh"); }, false},
      {"silu", [](const Tensor& x) { return x.silu(); }, false},
      {"erf", [](const Tensor& x) { return x.erf(); }, false},
      {"pow 2", [](const Tensor& x) { return x.pow(2); }, false},
      {"pow 3", [](const Tensor& x) { return x.pow(3); }, false},
      {"pow 0", [](const Tensor& x) { return x.pow(0); }, false},
      {"pow 0.5", [](const Tensor& x) { return x.pow(0.5); }, true},
      {"pow -1.5", [](const Tensor& x) { return x.pow(-1.5); }, true},
      {"clamp both", [](const Tensor& x) { return x.clamp(-1.0, 1.0); }, false},
      {"clamp min", [](const Tensor& x) { return x.clamp_min(0.5); }, false},
      {"clamp max", [](const Tensor& x) { return x.clamp_max(0.5); }, false},
  };
  for (const Op& op : ops) {
    INFO(op.name);
    Tensor x = leaf(op.positive ? kPositive : kMixed, {2, 3}, device);
    check_gradients([&](const std::vector<Tensor>& in) { return op.f(in[0]); }, {x});
    // Non-contiguous: the op sees a transposed view of the leaf.
    check_gradients([&](const std::vector<Tensor>& in) { return op.f(in[0].t()); }, {x});
  }
}

DEVICE_TEST_CASE("binary ops: gradients with broadcasting and scalars", "[autograd][elementwise]") {
  Tensor a = leaf(kMixed, {2, 3}, device);
  Tensor b = leaf({0.7, -1.9, 1.3}, {3}, device);  // broadcast along dim 0
  Tensor c = leaf({1.4, 0.6}, {2, 1}, device);     // broadcast along dim 1
  Tensor p = leaf(kPositive, {2, 3}, device);
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"add", [](auto& in) { return in[0] + in[1]; }},
      {"add alpha", [](auto& in) { return in[0].add(in[1], 2.5); }},
      {"sub alpha", [](auto& in) { return in[0].sub(in[1], -0.5); }},
      {"mul", [](auto& in) { return in[0] * in[1]; }},
      {"div", [](auto& in) { return in[0] / in[1]; }},
      {"maximum", [](auto& in) { return maximum(in[0], in[1]); }},
      {"minimum", [](auto& in) { return minimum(in[0], in[1]); }},
  };
  for (const auto& [name, f] : cases) {
    INFO(name);
    check_gradients(f, {a, b});
    check_gradients(f, {a, c});
    check_gradients(f, {c, b});  // both broadcast: (2, 1) with (3)
  }
  INFO("pow tensor^tensor");
  check_gradients([](auto& in) { return pow(in[0], in[1]); }, {p, b});
  INFO("scalar operands");
  check_gradients([](auto& in) { return in[0] + 2.0; }, {a});
  check_gradients([](auto& in) { return 2.0 - in[0]; }, {a});
  check_gradients([](auto& in) { return in[0] * -3.0; }, {a});
  check_gradients([](auto& in) { return 2.0 / in[0]; }, {a});
  check_gradients([](auto& in) { return in[0] / 4.0; }, {a});
  check_gradients([](auto& in) { return pow(2.0, in[0]); }, {a});
  INFO("one operand without grad");
  Tensor k = make({0.5, 1.5, -2.0}, {3}, kFloat64, device);
  check_gradients([&](auto& in) { return in[0] * k / (k + in[0] * in[0]); }, {a});
}

DEVICE_TEST_CASE("where, masked_fill, and conversions: gradients", "[autograd][elementwise]") {
  Tensor a = leaf(kMixed, {2, 3}, device);
  Tensor b = leaf({0.7, -1.9, 1.3}, {3}, device);
  Tensor cond = make({1, 0, 1}, {3}, kBool, device);
  Tensor mask = make({0, 1}, {2, 1}, kBool, device);
  check_gradients([&](auto& in) { return where(cond, in[0], in[1]); }, {a, b});
  check_gradients([&](auto& in) { return where(cond, in[0], 2.0); }, {a});
  check_gradients([&](auto& in) { return in[0].masked_fill(mask, 5.0) * in[0]; }, {a});
  // A float32 round trip is too coarse for finite differences: check by hand.
  Tensor q = leaf({1.5, -2.0}, {2}, device);
  Tensor q32 = q.to(kFloat32);
  REQUIRE(q32.grad_fn()->name() == std::string("ToCopyBackward0"));
  (q32 * q32).sum().backward();
  REQUIRE(q.grad().dtype() == kFloat64);
  check_values(q.grad(), {3, -4});
  check_gradients([&](auto& in) { return in[0].clone() * 2.0; }, {a});
  check_gradients([&](auto& in) { return in[0].t().contiguous() * 2.0; }, {a});
}

DEVICE_TEST_CASE("in-place ops on non-leaves: gradients", "[autograd][elementwise]") {
  Tensor a = leaf(kMixed, {2, 3}, device);
  Tensor b = leaf({0.7, -1.9, 1.3}, {3}, device);
  Tensor mask = make({0, 1, 1}, {3}, kBool, device);
  // Each starts from a non-leaf copy, changes it in place, and uses the result.
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"exp_", [](auto& in) { return (in[0] * 1.0).exp_() * in[0]; }},
      {"tanh_", [](auto& in) { return (in[0] * 1.0).tanh_(); }},
      {"sigmoid_", [](auto& in) { return (in[0] * 1.0).sigmoid_(); }},
      {"neg_", [](auto& in) { return (in[0] * 2.0).neg_(); }},
      {"abs_", [](auto& in) { return (in[0] * 1.0).abs_() * in[0]; }},
      {"relu_", [](auto& in) { return (in[0] * 1.0).relu_(); }},
      {"pow_", [](auto& in) { return (in[0] * 1.0).pow_(3); }},
      {"clamp_", [](auto& in) { return (in[0] * 1.0).clamp_(-1.0, 1.0); }},
      {"add_", [](auto& in) { return (in[0] * 1.0).add_(in[1], 2.0); }},
      {"sub_", [](auto& in) { return (in[0] * 1.0).sub_(in[1]); }},
      {"mul_", [](auto& in) { return (in[0] * 1.0).mul_(in[1]) * in[0]; }},
      {"div_", [](auto& in) { return (in[0] * 1.0).div_(in[1]); }},
      {"mul_ scalar", [](auto& in) { return (in[0] + in[1]).mul_(3.0); }},
      {"masked_fill_", [&](auto& in) { return (in[0] * in[1]).masked_fill_(mask, 0.5); }},
      {"copy_", [](auto& in) { return (in[0] * 1.0).copy_(in[1]) * in[0]; }},
  };
  for (const auto& [name, f] : cases) {
    INFO(name);
    check_gradients(f, {a, b});
  }
  INFO("fill_ and zero_ cut the old values off");
  Tensor y = a * 2.0;
  y.fill_(3.0);
  (y * a).sum().backward();
  check_values(a.grad(), {3, 3, 3, 3, 3, 3});
  Tensor z = a * 2.0;
  z.zero_();
  REQUIRE(z.grad_fn()->name() == std::string("FillBackward0"));
}

DEVICE_TEST_CASE("values at non-differentiable points follow PyTorch", "[autograd][elementwise]") {
  Tensor x = leaf({-1.0, 0.0, 1.0}, {3}, device);
  x.relu().sum().backward();
  check_values(x.grad(), {0, 0, 1});  // relu'(0) = 0
  x.mutable_grad() = Tensor();
  x.abs().sum().backward();
  check_values(x.grad(), {-1, 0, 1});  // abs'(0) = 0
  x.mutable_grad() = Tensor();
  x.clamp(-1.0, 0.0).sum().backward();
  check_values(x.grad(), {1, 1, 0});  // a bound passes the gradient
  Tensor a = leaf({1.0, 2.0, 3.0}, {3}, device), b = leaf({1.0, 1.0, 4.0}, {3}, device);
  maximum(a, b).sum().backward();
  check_values(a.grad(), {0.5, 1, 0});  // a tie splits it
  check_values(b.grad(), {0.5, 0, 1});
  Tensor p = leaf({0.0, 2.0}, {2}, device), e = leaf({2.0, 0.0}, {2}, device);
  pow(p, e).sum().backward();
  check_values(p.grad(), {0, 0});              // 2 * 0^1 = 0; b == 0 gives 0
  check_values(e.grad(), {0, std::log(2.0)});  // 0^b * log(0) taken as 0
}

DEVICE_TEST_CASE("gradients keep their input's dtype and device", "[autograd][elementwise]") {
  Tensor x = make({1.0, 2.0}, {2}, kFloat32, device).requires_grad_();
  Tensor y = make({0.5, 0.25}, {2}, kFloat64, device).requires_grad_();
  (x * y).sum().backward();  // computed in float64
  REQUIRE(x.grad().dtype() == kFloat32);
  REQUIRE(y.grad().dtype() == kFloat64);
  REQUIRE(x.grad().device() == device);
  check_values(x.grad(), {0.5, 0.25});
  check_values(y.grad(), {1, 2});
  Tensor h = make({1.0, -2.0}, {2}, kFloat16, device).requires_grad_();
  (h * h).sum().backward();
  REQUIRE(h.grad().dtype() == kFloat16);
  check_values(h.grad(), {2, -4});
  Tensor bf = make({3.0}, {1}, kBFloat16, device).requires_grad_();
  (bf.to(kFloat32) * 2.0).sum().backward();
  REQUIRE(bf.grad().dtype() == kBFloat16);
  check_values(bf.grad(), {2});
}

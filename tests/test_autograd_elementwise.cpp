// Gradients of the elementwise ops and conversions: gradcheck and
// gradgradcheck (float64, finite differences) for every op on every device,
// with broadcast, scalar and non-contiguous operands and the in-place forms;
// the values PyTorch picks at non-differentiable points; gradient dtypes and
// devices; the activations' fused rules against their composite ones.
#include <functional>
#include <limits>
#include <string>

#include "helpers.h"

using namespace tandem;
using Catch::Contains;
using test::check_close;
using test::check_gradients;
using test::check_values;
using test::leaf;
using test::make;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

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
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, false},
      {"leaky_relu -0.5", [](const Tensor& x) { return leaky_relu(x, -0.5); }, false},
      {"elu", [](const Tensor& x) { return elu(x); }, false},
      {"elu 0.7 1.5 2", [](const Tensor& x) { return elu(x, 0.7, 1.5, 2.0); }, false},
      {"softplus", [](const Tensor& x) { return softplus(x); }, false},
      {"softplus 2 3", [](const Tensor& x) { return softplus(x, 2.0, 3.0); }, false},
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
  Tensor x = leaf({1.0, 2.0}, {2}, device, kFloat32);
  Tensor y = leaf({0.5, 0.25}, {2}, device);
  (x * y).sum().backward();  // computed in float64
  REQUIRE(x.grad().dtype() == kFloat32);
  REQUIRE(y.grad().dtype() == kFloat64);
  REQUIRE(x.grad().device() == device);
  check_values(x.grad(), {0.5, 0.25});
  check_values(y.grad(), {1, 2});
  Tensor h = leaf({1.0, -2.0}, {2}, device, kFloat16);
  (h * h).sum().backward();
  REQUIRE(h.grad().dtype() == kFloat16);
  check_values(h.grad(), {2, -4});
  Tensor bf = leaf({3.0}, {1}, device, kBFloat16);
  (bf.to(kFloat32) * 2.0).sum().backward();
  REQUIRE(bf.grad().dtype() == kBFloat16);
  check_values(bf.grad(), {2});
}

// ---------------------------------------------------------------- activations: fused and composite rules
// Without create_graph the rules of relu, tanh, sigmoid, gelu and silu run
// one fused op (detail::*_backward); with it, the composite formula whose ops
// record for the next derivative. Both must give the same gradient.
namespace {

struct Activation {
  const char* name;
  const char* fused_op;  // the op that computes the gradient without create_graph
  std::function<Tensor(const Tensor&)> f;
};

const std::vector<Activation>& activations() {
  static const std::vector<Activation> all = {
      {"relu", "relu_backward", [](const Tensor& x) { return x.relu(); }},
      {"tanh", "tanh_backward", [](const Tensor& x) { return x.tanh(); }},
      {"sigmoid", "sigmoid_backward", [](const Tensor& x) { return x.sigmoid(); }},
      {"gelu", "gelu_backward", [](const Tensor& x) { return x.gelu(); }},
      {"gelu tanh", "gelu_backward", [](const Tensor& x) { return x.gelu("tanh"); }},
      {"silu", "silu_backward", [](const Tensor& x) { return x.silu(); }},
      {"leaky_relu", "leaky_relu_backward", [](const Tensor& x) { return leaky_relu(x, 0.2); }},
      {"elu", "elu_backward", [](const Tensor& x) { return elu(x, 0.7, 1.5, 2.0); }},
      {"softplus", "softplus_backward", [](const Tensor& x) { return softplus(x, 2.0, 3.0); }},
  };
  return all;
}

const std::vector<double> kWide = {-4.5, -1.3, -0.25, 0.4, 2.1, 6.0};  // no zeros
const std::vector<double> kSeed = {0.75, -1.5, 2.0, 1.25, -0.5, 1.0};

}  // namespace

DEVICE_TEST_CASE("activation rules: the fused gradient matches the recorded composite one in every floating dtype",
                 "[autograd][elementwise][activation_backward]") {
  for (const Activation& a : activations()) {
    for (Dtype dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      INFO(a.name << ", " << dt);
      Tensor x = leaf(kWide, {2, 3}, device, dt);
      Tensor g = make(kSeed, {2, 3}, dt, device);
      Tensor y = a.f(x);
      Tensor fused = autograd::grad({y}, {x}, {g}, /*retain_graph=*/true)[0];
      REQUIRE(std::string(fused.origin().op) == a.fused_op);
      REQUIRE_FALSE(fused.requires_grad());
      REQUIRE(fused.dtype() == dt);
      REQUIRE(fused.device() == device);
      Tensor composite = autograd::grad({y}, {x}, {g}, /*retain_graph=*/true, /*create_graph=*/true)[0];
      // Its ops recorded (relu's and leaky_relu's where() have nothing to
      // record: x enters only through the condition, the seed needs no grad).
      if (std::string(a.name) != "relu" && std::string(a.name) != "leaky_relu") REQUIRE(composite.requires_grad());
      REQUIRE(std::string(composite.origin().op) != a.fused_op);
      check_close(fused, composite.detach(), test::tolerance(dt));
      // .backward() into .grad(), from a non-contiguous seed.
      Tensor g_t = make(kSeed, {3, 2}, dt, device).t();
      Tensor expected = autograd::grad({y}, {x}, {g_t}, true, true)[0].detach();
      y.backward(g_t);
      check_close(x.grad(), expected, test::tolerance(dt));
    }
  }
}

DEVICE_TEST_CASE("activation rules: finite differences on sliced inputs, first and second order",
                 "[autograd][elementwise][activation_backward]") {
  // The leaf's every other element: gradcheck perturbs the leaf, the op sees
  // a strided view. gradcheck's Jacobian runs the fused rules,
  // gradgradcheck differentiates the composite ones.
  std::vector<double> buf;
  for (double v : kWide) {
    buf.push_back(v);
    buf.push_back(-v / 3);
  }
  Tensor x = leaf(buf, {2, 6}, device);
  for (const Activation& a : activations()) {
    INFO(a.name);
    check_gradients([&](const std::vector<Tensor>& in) { return a.f(in[0].slice(1, 0, std::nullopt, 2)); }, {x});
    // Composed: the second derivative of tanh(gelu(x)) runs fused rules inside
    // the composite graph's backward.
    check_gradients([&](const std::vector<Tensor>& in) { return a.f(in[0].gelu("tanh").tanh()); }, {x});
  }
}

DEVICE_TEST_CASE("activation rules: a gradient of another dtype takes the composite formula",
                 "[autograd][elementwise][activation_backward]") {
  for (const Activation& a : activations()) {
    INFO(a.name);
    Tensor x = leaf(kWide, {2, 3}, device, kFloat32);
    Tensor x64 = x.detach().to(kFloat64).requires_grad_();
    Tensor g64 = make(kSeed, {2, 3}, kFloat64, device);
    // A float64 seed for a float32 output: the rule computes in float64 (as
    // before), and the engine converts the result to x's float32.
    Tensor got = autograd::grad({a.f(x)}, {x}, {g64})[0];
    REQUIRE(got.dtype() == kFloat32);
    Tensor y64 = a.f(x64);
    Tensor expected = autograd::grad({y64}, {x64}, {g64})[0];
    check_close(got, expected, test::tolerance(kFloat32));
  }
}

DEVICE_TEST_CASE("parameterised activations: PyTorch's values and gradients at 0, at the threshold, in place",
                 "[autograd][elementwise][activation_backward]") {
  Tensor x = leaf({-2.0, 0.0, 1.5, 4.0}, {4}, device);
  Tensor g = make({1.0, 1.0, 1.0, 1.0}, {4}, kFloat64, device);
  // leaky_relu'(0) is the slope, as PyTorch's leaky_relu_backward (x > 0 ? g : g * slope).
  Tensor y = leaky_relu(x, 0.2);
  check_values(y, {-0.4, 0.0, 1.5, 4.0});
  REQUIRE(y.grad_fn()->name() == std::string("LeakyReluBackward0"));
  check_values(autograd::grad({y}, {x}, {g}, true)[0], {0.2, 0.2, 1, 1});
  check_values(autograd::grad({y}, {x}, {g}, true, true)[0], {0.2, 0.2, 1, 1});
  // elu'(0) is the negative branch's scale * alpha * input_scale.
  y = elu(x, 0.5, 2.0, 3.0);
  check_values(y, {2.0 * 0.5 * std::expm1(-6.0), 0.0, 3.0, 8.0});
  REQUIRE(y.grad_fn()->name() == std::string("EluBackward0"));
  const std::vector<double> elu_grad = {2.0 * 0.5 * 3.0 * std::exp(-6.0), 3.0, 2.0, 2.0};
  check_values(autograd::grad({y}, {x}, {g}, true)[0], elu_grad);
  check_values(autograd::grad({y}, {x}, {g}, true, true)[0], elu_grad);
  // softplus is x where beta * x > threshold (4 * 2 > 3, and 1.5 * 2 = 3 is not above it).
  y = softplus(x, 2.0, 3.0);
  check_values(y, {std::log1p(std::exp(-4.0)) / 2, std::log(2.0) / 2, std::log1p(std::exp(3.0)) / 2, 4.0});
  REQUIRE(y.grad_fn()->name() == std::string("SoftplusBackward0"));
  const std::vector<double> sp_grad = {1 / (1 + std::exp(4.0)), 0.5, 1 / (1 + std::exp(-3.0)), 1.0};
  check_values(autograd::grad({y}, {x}, {g}, true)[0], sp_grad);
  check_values(autograd::grad({y}, {x}, {g}, true, true)[0], sp_grad);
  // In place on a non-leaf: the rule reads a copy of the input taken before the write.
  for (double slope : {0.2, -0.5}) {
    Tensor h = x * 1.0;
    leaky_relu_(h, slope);
    check_values(h, {-2.0 * slope, 0.0, 1.5, 4.0});
    check_values(autograd::grad({h}, {x}, {g})[0], {slope, slope, 1, 1});
  }
  Tensor h = x * 1.0;
  elu_(h, 0.5, 2.0, 3.0);
  check_values(autograd::grad({h}, {x}, {g})[0], elu_grad);
  // In place on a leaf that requires grad, or into an integer tensor: refused.
  REQUIRE_THROWS_WITH(leaky_relu_(x),
                      Contains("leaky_relu_: a leaf tensor that requires grad is being used in an in-place operation"));
  Tensor ints = make({-1, 2}, {2}, kInt64, device);
  REQUIRE_THROWS_AS(elu_(ints), DtypeError);
  REQUIRE_THROWS_WITH(elu_(ints), "elu_: result type float32 can't be cast to the desired output type int64");
  // Integer inputs compute in float32, as the other floating-only ops.
  Tensor yi = leaky_relu(ints, 0.5);
  REQUIRE(yi.dtype() == kFloat32);
  check_values(yi, {-0.5, 2.0});
}

DEVICE_TEST_CASE("activation rules: relu's gradient at 0 and NaN is 0 with and without create_graph",
                 "[autograd][elementwise][activation_backward][nan]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = leaf({-1.0, 0.0, -0.0, 2.0, nan}, {5}, device);
  Tensor y = x.relu();
  Tensor g = make({1.5, 1.5, 1.5, 1.5, 1.5}, {5}, kFloat64, device);
  // PyTorch's threshold_backward gives 1.5 at NaN; both of our rules give 0.
  check_values(autograd::grad({y}, {x}, {g}, true)[0], {0, 0, 0, 1.5, 0});
  check_values(autograd::grad({y}, {x}, {g}, true, true)[0], {0, 0, 0, 1.5, 0});
}

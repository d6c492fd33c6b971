// Gradients of the reductions and softmax: gradcheck (float64, finite
// differences) for every op and its variants (all dims, dims lists, negative
// dims, keepdim, non-contiguous inputs) on every device, gradgradcheck where
// the rule is smooth; ties, zeros and the other points where PyTorch picks a
// value; gradient dtypes and devices; one node per call; softmax's fused
// backward when the pass does not record, its formula when it does.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "helpers.h"

using namespace tandem;
using test::check_values;
using test::leaf;
using test::make;

namespace {

using Fn = std::function<Tensor(const Tensor&)>;

// test::check_gradients of a function of one tensor.
void check_gradients(const Fn& fn, const Tensor& x, bool second_order) {
  test::check_gradients([&](const std::vector<Tensor>& in) { return fn(in[0]); }, {x}, second_order);
}

// n values without zeros and without ties, in value or in |value|
// (magnitudes 0.3, 0.4, ..., 0.2 + 0.1 n in a scrambled order, a third of
// them negative): safe for max, amax, norm 1 and norm inf.
std::vector<double> distinct_values(int64_t n = 24) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back((i % 3 == 0 ? -1 : 1) * (0.3 + 0.1 * static_cast<double>((i * 7) % n)));
  return v;
}

struct Case {
  const char* name;
  Fn f;
};

// Runs each case on a (2, 3, 4) leaf and on a permuted view of a (4, 3, 2)
// leaf (the op sees a non-contiguous (2, 3, 4) input).
void check_cases(const std::vector<Case>& cases, Device device, bool second_order) {
  for (const Case& c : cases) {
    INFO(c.name);
    {
      INFO("contiguous");
      check_gradients(c.f, leaf(distinct_values(), {2, 3, 4}, device), second_order);
    }
    {
      INFO("permuted view of a leaf");
      Fn on_view = [&](const Tensor& x) { return c.f(x.permute({2, 1, 0})); };
      check_gradients(on_view, leaf(distinct_values(), {4, 3, 2}, device), second_order);
    }
  }
}

// The variants every dims-list reduction is checked over.
std::vector<Case> dims_variants(const std::function<Tensor(const Tensor&, IntArrayRef, bool)>& op) {
  return {
      {"all dims", [=](const Tensor& x) { return op(x, {}, false); }},
      {"all dims, keepdim", [=](const Tensor& x) { return op(x, {}, true); }},
      {"dim 1", [=](const Tensor& x) { return op(x, {1}, false); }},
      {"dim 1, keepdim", [=](const Tensor& x) { return op(x, {1}, true); }},
      {"dims {0, 2}",
       [=](const Tensor& x) {
         return op(x, {0, 2}, false);
       }},
      {"dims {2, 0}, keepdim",
       [=](const Tensor& x) {
         return op(x, {2, 0}, true);
       }},
      {"dim -1", [=](const Tensor& x) { return op(x, {-1}, false); }},
      {"dims {-1, -3}, keepdim",
       [=](const Tensor& x) {
         return op(x, {-1, -3}, true);
       }},
  };
}

// d(sum(fn(x)))/dx through backward(), for hand-computed values.
Tensor grad_of(const Fn& fn, const Tensor& x) {
  Tensor out = fn(x);
  out.backward(ones_like(out));
  return x.grad();
}

}  // namespace

// ---------------------------------------------------------------- sum, mean
DEVICE_TEST_CASE("sum and mean: gradients match finite differences", "[autograd][reduce]") {
  {
    INFO("sum");
    check_cases(dims_variants([](const Tensor& x, IntArrayRef d, bool k) { return x.sum(d, k); }), device, true);
    check_cases({{"sum()", [](const Tensor& x) { return x.sum(); }},
                 {"sum(dtype)", [](const Tensor& x) { return x.sum(kFloat64); }}},
                device, true);
  }
  {
    INFO("mean");
    check_cases(dims_variants([](const Tensor& x, IntArrayRef d, bool k) { return x.mean(d, k); }), device, true);
    check_cases({{"mean()", [](const Tensor& x) { return x.mean(); }},
                 {"mean(dims, dtype)", [](const Tensor& x) { return x.mean({1}, false, kFloat64); }}},
                device, true);
  }
}

DEVICE_TEST_CASE("sum and mean: hand-computed gradients", "[autograd][reduce]") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3}, device);
  check_values(grad_of([](const Tensor& t) { return t.sum(); }, x), {1, 1, 1, 1, 1, 1});
  x.mutable_grad() = Tensor();
  check_values(grad_of([](const Tensor& t) { return t.mean({1}); }, x),
               {1. / 3, 1. / 3, 1. / 3, 1. / 3, 1. / 3, 1. / 3});
  x.mutable_grad() = Tensor();
  // Weighted: the gradient of each output goes to the elements it summed.
  Tensor y = x.sum({0});
  y.backward(make({1, 10, 100}, {3}, kFloat64, device));
  check_values(x.grad(), {1, 10, 100, 1, 10, 100});
  // A second backward accumulates.
  x.sum().backward();
  check_values(x.grad(), {2, 11, 101, 2, 11, 101});
  x.sum().backward();
  check_values(x.grad(), {3, 12, 102, 3, 12, 102});
  // The first gradient of a leaf is its own memory (the rule's expanded view
  // is not kept), so that optimizers can update it in place.
  Tensor z = leaf({1, 2, 3, 4}, {2, 2}, device);
  z.mean().backward();
  CHECK(z.grad().is_contiguous());
  Tensor g = z.grad();
  g.mul_(4);
  check_values(z.grad(), {1, 1, 1, 1});
  // A 0-dim input, and an empty reduced dim.
  Tensor s = leaf({2.5}, {}, device);
  check_values(grad_of([](const Tensor& t) { return t.sum(); }, s), {1});
  Tensor e = zeros({2, 0}, TensorOptions(kFloat64).device(device)).requires_grad_();
  e.sum({1}).backward(make({1, 2}, {2}, kFloat64, device));
  CHECK(e.grad().sizes() == e.sizes());
}

// ---------------------------------------------------------------- prod
DEVICE_TEST_CASE("prod: gradients match finite differences, with and without zeros", "[autograd][reduce]") {
  const std::vector<Case> cases = {
      {"prod()", [](const Tensor& x) { return x.prod(); }},
      {"prod(0)", [](const Tensor& x) { return x.prod(0); }},
      {"prod(1, keepdim)", [](const Tensor& x) { return x.prod(1, true); }},
      {"prod(-1)", [](const Tensor& x) { return x.prod(-1); }},
      {"prod(-1, keepdim)", [](const Tensor& x) { return x.prod(-1, true); }},
      {"prod(dtype)", [](const Tensor& x) { return x.prod(kFloat64); }},
  };
  // prod is a polynomial: smooth at zeros too, so both orders are checked there.
  struct Input {
    const char* name;
    std::vector<double> values;  // (2, 3)
  };
  const std::vector<Input> inputs = {
      {"no zero", {1.2, -0.8, 1.5, 0.9, -1.1, 1.3}},           {"one zero", {1.2, 0.0, 1.5, 0.9, -1.1, 1.3}},
      {"two zeros in a row", {1.2, 0.0, 0.0, 0.9, -1.1, 1.3}}, {"a zero in each row", {0.0, -0.8, 1.5, 0.9, 0.0, 1.3}},
      {"three zeros", {0.0, -0.8, 0.0, 0.9, 0.0, 1.3}},        {"a row of zeros", {0.0, 0.0, 0.0, 0.9, -1.1, 1.3}},
  };
  for (const Input& in : inputs) {
    INFO(in.name);
    for (const Case& c : cases) {
      INFO(c.name);
      check_gradients(c.f, leaf(in.values, {2, 3}, device), true);
      INFO("transposed view of a leaf");
      std::vector<double> transposed = {in.values[0], in.values[3], in.values[1],
                                        in.values[4], in.values[2], in.values[5]};
      check_gradients([&](const Tensor& x) { return c.f(x.t()); }, leaf(transposed, {3, 2}, device), true);
    }
  }
}

DEVICE_TEST_CASE("prod: hand-computed gradients at zeros", "[autograd][reduce]") {
  Fn all = [](const Tensor& x) { return x.prod(); };
  Fn rows = [](const Tensor& x) { return x.prod(1); };
  // No zero: out / x.
  check_values(grad_of(all, leaf({2, 3, 4}, {3}, device)), {12, 8, 6});
  // One zero: the product of the others at the zero, 0 elsewhere.
  check_values(grad_of(all, leaf({2, 0, 4}, {3}, device)), {0, 8, 0});
  // Two zeros: 0 everywhere.
  check_values(grad_of(all, leaf({0, 3, 0}, {3}, device)), {0, 0, 0});
  // Along a dim, per row: [no zero | one zero | two zeros].
  check_values(grad_of(rows, leaf({2, 3, 4, 5, 0, 2, 0, 0, 7}, {3, 3}, device)), {12, 8, 6, 0, 10, 0, 0, 0, 0});
}

// ---------------------------------------------------------------- max, min, amax, amin
DEVICE_TEST_CASE("max, min, amax, amin: gradients match finite differences", "[autograd][reduce]") {
  // Not smooth where the winner changes: first order only, at points without ties.
  check_cases({{"max()", [](const Tensor& x) { return x.max(); }},
               {"min()", [](const Tensor& x) { return x.min(); }},
               {"max(1)", [](const Tensor& x) { return std::get<0>(x.max(1)); }},
               {"max(-1, keepdim)", [](const Tensor& x) { return std::get<0>(x.max(-1, true)); }},
               {"min(0)", [](const Tensor& x) { return std::get<0>(x.min(0)); }},
               {"min(-2, keepdim)", [](const Tensor& x) { return std::get<0>(x.min(-2, true)); }}},
              device, false);
  {
    INFO("amax");
    check_cases(dims_variants([](const Tensor& x, IntArrayRef d, bool k) { return x.amax(d, k); }), device, false);
  }
  {
    INFO("amin");
    check_cases(dims_variants([](const Tensor& x, IntArrayRef d, bool k) { return x.amin(d, k); }), device, false);
  }
}

DEVICE_TEST_CASE("max, min, amax, amin: ties as PyTorch", "[autograd][reduce]") {
  // torch: x = [1, 3, 3]; x.max().backward() -> [0, 0.5, 0.5] (evenly distributed).
  check_values(grad_of([](const Tensor& x) { return x.max(); }, leaf({1, 3, 3}, {3}, device)), {0, 0.5, 0.5});
  check_values(grad_of([](const Tensor& x) { return x.min(); }, leaf({2, 1, 1, 1}, {4}, device)),
               {0, 1. / 3, 1. / 3, 1. / 3});
  check_values(grad_of([](const Tensor& x) { return x.amax(); }, leaf({1, 3, 3}, {3}, device)), {0, 0.5, 0.5});
  // Per output: [[1, 3, 3], [2, 2, 0]].amax(1) -> [[0, .5, .5], [.5, .5, 0]].
  check_values(grad_of([](const Tensor& x) { return x.amax({1}); }, leaf({1, 3, 3, 2, 2, 0}, {2, 3}, device)),
               {0, 0.5, 0.5, 0.5, 0.5, 0});
  check_values(grad_of([](const Tensor& x) { return x.amin({0}, true); }, leaf({1, 3, 0, 1, 2, 0}, {2, 3}, device)),
               {0.5, 0, 0.5, 0.5, 1, 0.5});
  // max(dim) / min(dim): only the returned index (the first of the ties) gets it.
  Tensor x = leaf({1, 3, 3}, {3}, device);
  auto [values, indices] = x.max(0);
  CHECK(indices.item<int64_t>() == 1);
  values.backward();
  check_values(x.grad(), {0, 1, 0});
  check_values(grad_of([](const Tensor& t) { return std::get<0>(t.min(1)); }, leaf({4, 2, 2, 0, 0, 5}, {2, 3}, device)),
               {0, 1, 0, 1, 0, 0});
  // A NaN result: its gradient goes to the NaN elements.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  check_values(grad_of([](const Tensor& t) { return t.max(); }, leaf({1, nan, 3, nan}, {4}, device)), {0, 0.5, 0, 0.5});
}

DEVICE_TEST_CASE("max(dim), min(dim): only the values get a grad_fn", "[autograd][reduce]") {
  Tensor x = leaf(distinct_values(6), {2, 3}, device);
  auto [values, indices] = x.max(1);
  CHECK(values.requires_grad());
  REQUIRE(values.grad_fn() != nullptr);
  CHECK(std::string(values.grad_fn()->name()) == "MaxBackward0");
  CHECK(indices.dtype() == kInt64);
  CHECK_FALSE(indices.requires_grad());
  CHECK(indices.grad_fn() == nullptr);
  auto [min_values, min_indices] = x.min(0, true);
  CHECK(std::string(min_values.grad_fn()->name()) == "MinBackward0");
  CHECK_FALSE(min_indices.requires_grad());
  // Integer results carry no gradient.
  CHECK_FALSE(x.argmax().requires_grad());
  CHECK_FALSE(x.argmin(1).requires_grad());
  // A 0-dim input: max over dim 0 is the element itself.
  Tensor s = leaf({2.5}, {}, device);
  std::get<0>(s.max(0)).backward();
  check_values(s.grad(), {1});
}

// ---------------------------------------------------------------- var, std
DEVICE_TEST_CASE("var and std: gradients match finite differences", "[autograd][reduce]") {
  for (int64_t correction : {1, 0, 2}) {
    INFO("correction " << correction);
    {
      INFO("var");
      check_cases(dims_variants([=](const Tensor& x, IntArrayRef d, bool k) { return x.var(d, correction, k); }),
                  device, true);
    }
    {
      INFO("std");
      check_cases(dims_variants([=](const Tensor& x, IntArrayRef d, bool k) { return x.std(d, correction, k); }),
                  device, true);
    }
  }
}

DEVICE_TEST_CASE("var and std: hand-computed gradients", "[autograd][reduce]") {
  // x = [1, 2, 6]: mean 3, var = 7 (correction 1); d var / dx = 2 (x - 3) / 2.
  check_values(grad_of([](const Tensor& x) { return x.var(); }, leaf({1, 2, 6}, {3}, device)), {-2, -1, 3});
  // std = sqrt(7): (x - 3) / (2 sqrt(7)).
  const double s = std::sqrt(7.0);
  check_values(grad_of([](const Tensor& x) { return x.std(); }, leaf({1, 2, 6}, {3}, device)),
               {-2 / (2 * s), -1 / (2 * s), 3 / (2 * s)});
  // A constant row has std 0: gradient 0 there (PyTorch's masked_fill), not NaN.
  check_values(grad_of([](const Tensor& x) { return x.std({1}); }, leaf({2, 2, 2, 1, 2, 6}, {2, 3}, device)),
               {0, 0, 0, -2 / (2 * s), -1 / (2 * s), 3 / (2 * s)});
}

// ---------------------------------------------------------------- norm
DEVICE_TEST_CASE("norm: gradients match finite differences", "[autograd][reduce]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  struct P {
    double p;
    bool second_order;
  };
  for (P p :
       {P{2, true}, P{1, false}, P{3, true}, P{1.5, true}, P{0.5, true}, P{-1, true}, P{inf, false}, P{-inf, false}}) {
    INFO("p = " << p.p);
    check_cases(dims_variants([=](const Tensor& x, IntArrayRef d, bool k) { return x.norm(p.p, d, k); }), device,
                p.second_order);
  }
}

DEVICE_TEST_CASE("norm: hand-computed gradients, zeros and ties", "[autograd][reduce]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  // p = 2: x / |x|; [3, -4] -> [0.6, -0.8].
  check_values(grad_of([](const Tensor& x) { return x.norm(); }, leaf({3, -4}, {2}, device)), {0.6, -0.8});
  // p = 2 at 0: 0, not NaN (torch's masked_fill).
  check_values(grad_of([](const Tensor& x) { return x.norm(2, {1}); }, leaf({0, 0, 3, -4}, {2, 2}, device)),
               {0, 0, 0.6, -0.8});
  // p = 1: sign(x), 0 at 0.
  check_values(grad_of([](const Tensor& x) { return x.norm(1); }, leaf({-2, 0, 5}, {3}, device)), {-1, 0, 1});
  // p = inf: split among the ties of |x|, times sign(x).
  check_values(grad_of([](const Tensor& x) { return x.norm(inf); }, leaf({-3, 1, 3}, {3}, device)), {-0.5, 0, 0.5});
  check_values(grad_of([](const Tensor& x) { return x.norm(-inf); }, leaf({-1, 2, 1}, {3}, device)), {-0.5, 0, 0.5});
  // p = 0 (a count): zero gradient.
  check_values(grad_of([](const Tensor& x) { return x.norm(0); }, leaf({-1, 2, 0}, {3}, device)), {0, 0, 0});
  // p = 3 at 0: 0 (x |x| / norm^2 with norm 0 masked).
  check_values(grad_of([](const Tensor& x) { return x.norm(3, {1}); }, leaf({0, 0, 1, 0}, {2, 2}, device)),
               {0, 0, 1, 0});
}

// ---------------------------------------------------------------- logsumexp, softmax
DEVICE_TEST_CASE("logsumexp: gradients match finite differences", "[autograd][reduce]") {
  check_cases(dims_variants([](const Tensor& x, IntArrayRef d, bool k) { return x.logsumexp(d, k); }), device, true);
}

DEVICE_TEST_CASE("softmax and log_softmax: gradients match finite differences", "[autograd][reduce]") {
  std::vector<Case> cases;
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    cases.push_back({"softmax", [=](const Tensor& x) { return x.softmax(dim); }});
    cases.push_back({"log_softmax", [=](const Tensor& x) { return x.log_softmax(dim); }});
  }
  cases.push_back({"softmax(dtype)", [](const Tensor& x) { return x.softmax(1, kFloat64); }});
  cases.push_back({"log_softmax(dtype)", [](const Tensor& x) { return x.log_softmax(-1, kFloat64); }});
  check_cases(cases, device, true);
  // Through a loss that weights the outputs differently (sum would give 0 for softmax).
  Tensor w = make(distinct_values(), {2, 3, 4}, kFloat64, device);
  check_gradients([&](const Tensor& x) { return (x.softmax(2) * w).sum({2}); },
                  leaf(distinct_values(), {2, 3, 4}, device), true);
}

DEVICE_TEST_CASE("softmax and log_softmax: hand-computed gradients", "[autograd][reduce]") {
  // softmax([0, ln 3]) = [0.25, 0.75]; d y_1 / dx = y_1 (e_1 - y) = [-0.1875, 0.1875].
  Tensor x = leaf({0, std::log(3.0)}, {2}, device);
  (x.softmax(0) * make({0, 1}, {2}, kFloat64, device)).sum().backward();
  check_values(x.grad(), {-0.1875, 0.1875});
  // log_softmax summed: 1 - n * y = [1 - 2 * 0.25, 1 - 2 * 0.75].
  Tensor z = leaf({0, std::log(3.0)}, {2}, device);
  z.log_softmax(0).sum().backward();
  check_values(z.grad(), {0.5, -0.5});
}

DEVICE_TEST_CASE("softmax and log_softmax: a backward that does not record takes the fused kernel",
                 "[autograd][reduce]") {
  for (Dtype dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    for (bool log : {false, true}) {
      for (int64_t dim : {0, 1, 2}) {
        for (bool permuted : {false, true}) {
          INFO(dt << (log ? " log_softmax" : " softmax") << " over dim " << dim << (permuted ? ", permuted leaf" : ""));
          // x is (2, 3, 4): a leaf, or a permuted view of a (4, 3, 2) leaf.
          Tensor leaf_x = make(distinct_values(), permuted ? Shape{4, 3, 2} : Shape{2, 3, 4}, dt, device);
          leaf_x.requires_grad_();
          auto x_of = [&](const Tensor& l) { return permuted ? l.permute({2, 1, 0}) : l; };
          std::vector<double> wv = distinct_values();
          std::reverse(wv.begin(), wv.end());
          Tensor w = make(wv, {2, 3, 4}, dt, device);
          Tensor y = log ? x_of(leaf_x).log_softmax(dim) : x_of(leaf_x).softmax(dim);
          // The gradient reaching the softmax node is w itself.
          Tensor grad_x = x_of(autograd::grad({(y * w).sum()}, {leaf_x}, {}, /*retain_graph=*/true)[0]);
          CHECK_FALSE(grad_x.requires_grad());
          Tensor out = y.detach();
          test::check_equal(grad_x, detail::softmax_backward_data(w, out, dim, log));
          // The composite formula in float64 on the same values (in 16 bits
          // its own roundings, 2^-10 at 1, would dominate the comparison).
          Tensor w64 = w.to(kFloat64), out64 = out.to(kFloat64);
          Tensor composite =
              log ? w64 - exp(out64) * w64.sum({dim}, true) : out64 * (w64 - (w64 * out64).sum({dim}, true));
          test::check_close(grad_x, composite, test::tolerance(dt));
          // With create_graph the composite formula records its ops: a
          // gradient with history, and the same values.
          Tensor grad_graph = autograd::grad({(y * w).sum()}, {leaf_x}, {}, std::nullopt, /*create_graph=*/true)[0];
          CHECK(grad_graph.requires_grad());
          CHECK(grad_graph.dtype() == dt);
          Tensor composite_dt = log ? w - exp(out) * w.sum({dim}, true) : out * (w - (w * out).sum({dim}, true));
          test::check_equal(x_of(grad_graph).detach(), composite_dt);
        }
      }
    }
  }
}

DEVICE_TEST_CASE("softmax and log_softmax: second derivatives through the recorded formula", "[autograd][reduce]") {
  // Weighted losses on a middle dim, so that neither gradient is trivially 0;
  // gradgradcheck differentiates the create_graph gradient, the first-order
  // gradcheck the fused one.
  Tensor w = make(distinct_values(), {2, 3, 4}, kFloat64, device);
  for (bool log : {false, true}) {
    INFO((log ? "log_softmax" : "softmax"));
    check_gradients([&](const Tensor& x) { return ((log ? x.log_softmax(1) : x.softmax(1)) * w).sum({1}); },
                    leaf(distinct_values(), {2, 3, 4}, device), true);
    // A permuted view of a (4, 3, 2) leaf, over its first dim.
    check_gradients(
        [&](const Tensor& l) {
          Tensor x = l.permute({2, 1, 0});
          return ((log ? x.log_softmax(0) : x.softmax(0)) * w).sum();
        },
        leaf(distinct_values(), {4, 3, 2}, device), true);
  }
}

// ---------------------------------------------------------------- dtypes, devices, nodes
DEVICE_TEST_CASE("reductions: float32 inputs get float32 gradients on their device", "[autograd][reduce]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> ops = {
      {"sum", [](const Tensor& x) { return x.sum(); }},
      {"sum(dtype float64)", [](const Tensor& x) { return x.sum({1}, false, kFloat64); }},
      {"mean", [](const Tensor& x) { return x.mean({0}); }},
      {"mean(dtype float64)", [](const Tensor& x) { return x.mean(kFloat64); }},
      {"prod", [](const Tensor& x) { return x.prod(1); }},
      {"prod(dtype float64)", [](const Tensor& x) { return x.prod(kFloat64); }},
      {"max", [](const Tensor& x) { return x.max(); }},
      {"min", [](const Tensor& x) { return x.min(); }},
      {"max(dim)", [](const Tensor& x) { return std::get<0>(x.max(1)); }},
      {"min(dim)", [](const Tensor& x) { return std::get<0>(x.min(0, true)); }},
      {"amax", [](const Tensor& x) { return x.amax({1}); }},
      {"amin", [](const Tensor& x) { return x.amin(); }},
      {"var", [](const Tensor& x) { return x.var({1}); }},
      {"std", [](const Tensor& x) { return x.std(); }},
      {"norm", [](const Tensor& x) { return x.norm(); }},
      {"norm inf", [=](const Tensor& x) { return x.norm(inf, {1}); }},
      {"logsumexp", [](const Tensor& x) { return x.logsumexp({1}); }},
      {"softmax", [](const Tensor& x) { return x.softmax(1); }},
      {"log_softmax", [](const Tensor& x) { return x.log_softmax(0); }},
      {"softmax(dtype float64)", [](const Tensor& x) { return x.softmax(1, kFloat64); }},
      {"log_softmax(dtype float64)", [](const Tensor& x) { return x.log_softmax(1, kFloat64); }},
  };
  for (const Case& op : ops) {
    INFO(op.name);
    Tensor x = leaf(distinct_values(6), {2, 3}, device, kFloat32);
    Tensor y = op.f(x);
    // A weighted loss, so that softmax's gradient is not 0.
    (y * make(distinct_values(y.numel()), y.sizes(), y.dtype(), device)).sum().backward();
    REQUIRE(x.grad().defined());
    CHECK(x.grad().dtype() == kFloat32);
    CHECK(x.grad().device() == device);
    CHECK(x.grad().sizes() == x.sizes());
    // The same gradient as in float64, to float32's precision.
    Tensor x64 = leaf(distinct_values(6), {2, 3}, device);
    Tensor y64 = op.f(x64);
    (y64 * make(distinct_values(y64.numel()), y64.sizes(), kFloat64, device)).sum().backward();
    test::check_close(x.grad(), x64.grad().to(kFloat32));
  }
}

DEVICE_TEST_CASE("reductions: one node per call, named as PyTorch's", "[autograd][reduce]") {
  Tensor x = leaf(distinct_values(6), {2, 3}, device);
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"SumBackward0", [](const Tensor& t) { return t.sum(); }},
      {"SumBackward0", [](const Tensor& t) { return t.sum({1}, true, kFloat32); }},
      {"MeanBackward0", [](const Tensor& t) { return t.mean(); }},
      {"ProdBackward0", [](const Tensor& t) { return t.prod(); }},
      {"ProdBackward0", [](const Tensor& t) { return t.prod(1); }},
      {"MaxBackward1", [](const Tensor& t) { return t.max(); }},
      {"MinBackward1", [](const Tensor& t) { return t.min(); }},
      {"AmaxBackward0", [](const Tensor& t) { return t.amax(); }},
      {"AminBackward0", [](const Tensor& t) { return t.amin({0}); }},
      {"VarBackward0", [](const Tensor& t) { return t.var(); }},
      {"StdBackward0", [](const Tensor& t) { return t.std({1}); }},
      {"NormBackward1", [](const Tensor& t) { return t.norm(); }},
      {"LogsumexpBackward0", [](const Tensor& t) { return t.logsumexp({1}); }},
      {"SoftmaxBackward0", [](const Tensor& t) { return t.softmax(0, kFloat32); }},
      {"LogSoftmaxBackward0", [](const Tensor& t) { return t.log_softmax(1); }},
  };
  for (const auto& [name, f] : ops) {
    INFO(name);
    Tensor y = f(x);
    REQUIRE(y.grad_fn() != nullptr);
    CHECK(std::string(y.grad_fn()->name()) == name);
    // Straight to the leaf's accumulator: the conversions inside are not recorded.
    REQUIRE(y.grad_fn()->next_edges.size() == 1);
    REQUIRE(y.grad_fn()->next_edges[0].valid());
    CHECK(y.grad_fn()->next_edges[0].fn->op == autograd::GradOp::AccumulateGrad);
  }
  // No node without a reason: grad mode off, or an input that does not require grad.
  {
    NoGradGuard no_grad;
    CHECK(x.sum().grad_fn() == nullptr);
  }
  CHECK(x.detach().softmax(0).grad_fn() == nullptr);
  // Integer inputs never require grad: no node on their sums.
  Tensor ints = make({1, 2, 3}, {3}, kInt64, device);
  CHECK_FALSE(ints.sum().requires_grad());
}

DEVICE_TEST_CASE("softmax(dim, dtype=float64) on a float32 input gives a float32 gradient", "[autograd][reduce]") {
  Tensor x = leaf({0.5, -1.0, 2.0, 0.25}, {2, 2}, device, kFloat32);
  Tensor y = x.softmax(1, kFloat64);
  CHECK(y.dtype() == kFloat64);
  (y * make({1, 2, 3, 4}, {2, 2}, kFloat64, device)).sum().backward();
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(x.grad().device() == device);
  // softmax rows [a, 1 - a] weighted by [w0, w1]: d/dx0 = a (1 - a) (w0 - w1).
  auto expect = [](double x0, double x1, double w0, double w1) {
    double a = 1 / (1 + std::exp(x1 - x0));
    double d = a * (1 - a) * (w0 - w1);
    return std::vector<double>{d, -d};
  };
  std::vector<double> r0 = expect(0.5, -1.0, 1, 2), r1 = expect(2.0, 0.25, 3, 4);
  check_values(x.grad(), {r0[0], r0[1], r1[0], r1[1]});
}

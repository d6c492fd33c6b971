// The losses of nn/functional/loss.h: forward values and gradients against
// PyTorch 1.13 (tests/data/nn_loss_reference.txt, written by
// scripts/gen_nn_loss_reference.py) on every device in float64 and float32,
// gradcheck and gradgradcheck of each loss, hand-computed values, every
// error message, and the options' API.
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "helpers.h"
#include "reference_data.h"

using namespace tandem;
namespace F = tandem::nn::functional;
using Catch::Contains;

namespace {

using test::non_contiguous;
using test::waited;

// ---------------------------------------------------------------- reference data

struct Case : test::ReferenceCase {
  std::string loss;  // ce, nll, mse, l1, bce
  nn::Reduction reduction = nn::Reduction::Mean;
  int64_t ignore_index = -100;
  double label_smoothing = 0;
  Tensor input, target, weight, pos_weight, seed, output, grad_input, grad_target;
};

const std::string kFile = "nn_loss_reference.txt";

nn::Reduction parse_reduction(const std::string& s) {
  if (s == "none") return nn::Reduction::None;
  if (s == "mean") return nn::Reduction::Mean;
  if (s == "sum") return nn::Reduction::Sum;
  throw std::runtime_error(kFile + ": unknown reduction " + s);
}

std::vector<Case> load_cases() {
  test::ReferenceReader file(kFile);
  std::vector<Case> cases;
  auto next_tensor = [&] { return file.next_tensor(); };
  for (Case c; file.next_case(c); c = Case()) {
    c.loss = c.attr("loss");
    c.reduction = parse_reduction(c.attr("reduction"));
    c.ignore_index = c.int_attr("ignore_index");
    c.label_smoothing = c.double_attr("label_smoothing");
    c.input = next_tensor();
    c.target = next_tensor();
    if (c.flag("weight")) c.weight = next_tensor();
    if (c.flag("pos_weight")) c.pos_weight = next_tensor();
    if (c.flag("seed")) c.seed = next_tensor();
    c.output = next_tensor();
    c.grad_input = next_tensor();
    if (c.flag("target_grad")) c.grad_target = next_tensor();
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = load_cases();
  return c;
}

// The case's loss with its options, in Tandem.
Tensor run_loss(const Case& c, const Tensor& input, const Tensor& target, const Tensor& weight,
                const Tensor& pos_weight) {
  if (c.loss == "ce") {
    return F::cross_entropy(input, target,
                            F::CrossEntropyFuncOptions()
                                .weight(weight)
                                .ignore_index(c.ignore_index)
                                .reduction(c.reduction)
                                .label_smoothing(c.label_smoothing));
  }
  if (c.loss == "nll") {
    return F::nll_loss(input, target,
                       F::NLLLossFuncOptions().weight(weight).ignore_index(c.ignore_index).reduction(c.reduction));
  }
  if (c.loss == "mse") return F::mse_loss(input, target, F::MSELossFuncOptions().reduction(c.reduction));
  if (c.loss == "l1") return F::l1_loss(input, target, F::L1LossFuncOptions(c.reduction));
  if (c.loss == "bce") {
    return F::binary_cross_entropy_with_logits(
        input, target,
        F::BinaryCrossEntropyWithLogitsFuncOptions().weight(weight).pos_weight(pos_weight).reduction(c.reduction));
  }
  throw std::runtime_error(kFile + ": unknown loss " + c.loss);
}

// float64: PyTorch and Tandem may order sums and evaluate exp/log differently
// (a wrong formula is off by far more than 1e-10). float32 inputs against the
// float64 reference: one op's float32 tolerance (helpers.h) holds.
test::Tolerance tolerance_for(Dtype dtype) {
  if (dtype == kFloat64) return {1e-10, 1e-12};
  return test::tolerance(dtype);
}

// One case on one device in dtype: the output, then the gradients that
// autograd::grad returns and those backward() accumulates.
void check_case(const Case& c, const Device& device, Dtype dtype, bool strided) {
  INFO("case " << c.name << " on " << device.str() << " in " << dtype << " with " << (strided ? "non-" : "")
               << "contiguous input");
  Tensor input = c.input.to(device, dtype);
  if (strided) input = non_contiguous(input);
  input = input.detach().requires_grad_();
  Tensor target = c.target.is_floating_point() ? c.target.to(device, dtype) : c.target.to(device);
  target = target.detach();
  std::vector<Tensor> leaves{input};
  if (c.grad_target.defined()) {
    target.requires_grad_();
    leaves.push_back(target);
  }
  Tensor weight = c.weight.defined() ? c.weight.to(device, dtype) : Tensor();
  Tensor pos_weight = c.pos_weight.defined() ? c.pos_weight.to(device, dtype) : Tensor();

  Tensor out = run_loss(c, input, target, weight, pos_weight);
  CHECK(out.device() == device);
  REQUIRE(out.dtype() == dtype);
  REQUIRE(out.requires_grad());
  test::check_close(out, c.output, tolerance_for(dtype));

  std::vector<Tensor> seed;
  if (c.seed.defined()) seed.push_back(c.seed.to(device, dtype));
  std::vector<Tensor> got = autograd::grad({out}, leaves, seed, /*retain_graph=*/true);
  out.backward(seed.empty() ? Tensor() : seed[0]);
  const std::vector<Tensor> expected{c.grad_input, c.grad_target};
  for (size_t k = 0; k < leaves.size(); ++k) {
    INFO((k == 0 ? "d(loss)/d(input)" : "d(loss)/d(target)"));
    REQUIRE(got[k].defined());
    REQUIRE(leaves[k].grad().defined());
    CHECK(got[k].device() == device);
    CHECK(got[k].dtype() == dtype);
    test::check_close(got[k], expected[k], tolerance_for(dtype));
    test::check_close(leaves[k].grad(), expected[k], tolerance_for(dtype));
  }
}

Tensor ids(const std::vector<double>& values, IntArrayRef shape, Device device) {
  return test::make(values, shape, kInt64, device);
}

}  // namespace

// First in the file: the warning is printed once per loss per process, and
// the reference cases below broadcast too.
TEST_CASE("mse_loss and l1_loss warn once about a target that only broadcasts", "[nn][loss]") {
  Tensor x = test::make({1, 2, 3, 4, 5, 6}, {3, 2}, kFloat64);
  Tensor y = test::make({1, 1}, {2}, kFloat64);
  for (const char* op : {"mse_loss", "l1_loss"}) {
    INFO(op);
    auto call = [&] { std::string(op) == "mse_loss" ? F::mse_loss(x, y) : F::l1_loss(x, y); };
    std::string first = test::captured_cerr(call);
    CHECK_THAT(first, Contains(std::string("tandem: warning: ") + op +
                               ": Using a target size ([2]) that is different to the input size ([3, 2]). This "
                               "will likely lead to incorrect results due to broadcasting."));
    CHECK(test::captured_cerr(call).empty());
    CHECK(test::captured_cerr([&] { F::mse_loss(x, x); }).empty());
  }
}

TEST_CASE("the reference file covers every loss and option", "[nn][loss][reference]") {
  REQUIRE(cases().size() >= 300);
  std::set<std::string> names, losses;
  int smoothed = 0, weighted = 0, ignoring = 0, probabilities = 0, spatial = 0;
  for (const Case& c : cases()) {
    INFO("case " << c.name);
    CHECK(names.insert(c.name).second);
    losses.insert(c.loss);
    CHECK(c.seed.defined() == (c.output.dim() > 0));
    CHECK(c.grad_input.sizes() == c.input.sizes());
    smoothed += c.label_smoothing > 0;
    weighted += c.weight.defined();
    ignoring += c.target.dtype() == kInt64 && (c.target.eq(c.ignore_index).sum().item<int64_t>() > 0);
    probabilities += c.loss == "ce" && c.target.is_floating_point();
    spatial += c.loss == "ce" && c.input.dim() >= 3;
  }
  CHECK(losses == std::set<std::string>{"ce", "nll", "mse", "l1", "bce"});
  CHECK(smoothed >= 20);
  CHECK(weighted >= 50);
  CHECK(ignoring >= 50);
  CHECK(probabilities >= 20);
  CHECK(spatial >= 40);
}

// Each case in its own section, so that one failing case does not hide the others.
DEVICE_TEST_CASE("losses and their gradients match PyTorch's", "[nn][loss][reference]") {
  for (const Case& c : cases()) {
    DYNAMIC_SECTION(c.name) {
      check_case(c, device, kFloat64, false);
      check_case(c, device, kFloat64, true);
      check_case(c, device, kFloat32, false);
    }
  }
}

// ---------------------------------------------------------------- hand-computed values

DEVICE_TEST_CASE("cross_entropy of equal logits is log(C) for any target and smoothing", "[nn][loss]") {
  Tensor x = zeros({3, 5}, TensorOptions(kFloat64).device(device));
  Tensor t = ids({4, 0, 2}, {3}, device);
  for (double ls : {0.0, 0.1, 1.0}) {
    test::check_values(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().label_smoothing(ls)), {std::log(5.0)});
    test::check_values(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().label_smoothing(ls).reduction(kSum)),
                       {3 * std::log(5.0)});
    test::check_values(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().label_smoothing(ls).reduction(kNone)),
                       {std::log(5.0), std::log(5.0), std::log(5.0)});
  }
}

DEVICE_TEST_CASE("nll_loss picks -weight[t] * input[n, t] and means over the target weights", "[nn][loss]") {
  // input: (2, 3, 2); targets (2, 2) = [[2, 0], [1, ignored]]
  Tensor x = test::make({-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12}, {2, 3, 2}, kFloat64, device);
  Tensor t = ids({2, 0, 1, 9}, {2, 2}, device);
  Tensor w = test::make({1, 2, 4}, {3}, kFloat64, device);
  auto opts = F::NLLLossFuncOptions().weight(w).ignore_index(9);
  // x[0, 2, 0] = -5 (w 4), x[0, 0, 1] = -2 (w 1), x[1, 1, 0] = -9 (w 2)
  test::check_values(F::nll_loss(x, t, opts.reduction(kNone)), {20, 2, 18, 0});
  test::check_values(F::nll_loss(x, t, opts.reduction(kSum)), {40});
  test::check_values(F::nll_loss(x, t, opts.reduction(kMean)), {40.0 / 7.0});
  // An ignore_index outside [0, C) is no error when only ignored targets hold it.
  test::check_values(F::nll_loss(x, ids({2, 0, 1, -1}, {2, 2}, device), F::NLLLossFuncOptions().ignore_index(-1)),
                     {(5.0 + 2 + 9) / 3});
}

DEVICE_TEST_CASE("mse_loss and l1_loss by hand", "[nn][loss]") {
  Tensor x = test::make({1, -2, 3, 0.5}, {2, 2}, kFloat64, device);
  Tensor y = test::make({0, 1, 1, 0.5}, {2, 2}, kFloat64, device);
  test::check_values(F::mse_loss(x, y), {(1 + 9 + 4 + 0) / 4.0});
  test::check_values(F::mse_loss(x, y, kSum), {14});
  test::check_values(F::mse_loss(x, y, kNone), {1, 9, 4, 0});
  test::check_values(F::l1_loss(x, y), {(1 + 3 + 2 + 0) / 4.0});
  test::check_values(F::l1_loss(x, y, F::L1LossFuncOptions().reduction(kSum)), {6});
  test::check_values(F::l1_loss(x, y, kNone), {1, 3, 2, 0});
  // An integer target promotes, as in PyTorch.
  test::check_values(F::mse_loss(x, test::make({0, 1, 1, 0}, {2, 2}, kInt64, device), kSum), {14.25});
  // |x - y| at 0 has gradient 0 (PyTorch's sign(0)).
  Tensor leaf = test::leaf({1, -2, 3, 0.5}, {2, 2}, device);
  F::l1_loss(leaf, y, kSum).backward();
  test::check_values(leaf.grad(), {1, -1, 1, 0});
}

DEVICE_TEST_CASE("binary_cross_entropy_with_logits at 0 and at huge logits", "[nn][loss]") {
  // At x = 0: log(2) * (1 + (pos_weight - 1) * t) - ... ; d/dx = (1 - t) * 0.5 - pos_weight * t * 0.5.
  Tensor x = test::leaf({0, 0, 0}, {3}, device);
  Tensor t = test::make({0, 1, 0.25}, {3}, kFloat64, device);
  Tensor pw = test::make({3, 3, 3}, {3}, kFloat64, device);
  Tensor loss = F::binary_cross_entropy_with_logits(
      x, t, F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(pw).reduction(kNone));
  const double l2 = std::log(2.0);
  test::check_values(loss, {l2, 3 * l2, 1.5 * l2});
  loss.sum().backward();
  test::check_values(x.grad(), {0.5, -1.5, 0.75 * 0.5 - 0.75 * 0.5});
  // Logits of +-1000 in float32: no inf, no NaN.
  Tensor big = test::make({1000, -1000, 1000, -1000}, {4}, kFloat32, device);
  Tensor labels = test::make({1, 0, 0, 1}, {4}, kFloat32, device);
  test::check_values(
      F::binary_cross_entropy_with_logits(big, labels, F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(kNone)),
      {0, 0, 1000, 1000});
}

DEVICE_TEST_CASE("losses of float32 inputs stay float32 and on the input's device", "[nn][loss]") {
  Tensor x = test::make({0.5, -1, 2, 0.25, 1, -0.5}, {2, 3}, kFloat32, device);
  Tensor t = ids({2, 0}, {2}, device);
  for (const Tensor& l : {F::cross_entropy(x, t), F::nll_loss(x, t), F::mse_loss(x, x * 2), F::l1_loss(x, x * 2),
                          F::binary_cross_entropy_with_logits(x, x.sigmoid())}) {
    CHECK(l.dtype() == kFloat32);
    CHECK(l.device() == device);
    CHECK(l.dim() == 0);
  }
}

// ---------------------------------------------------------------- gradcheck

DEVICE_TEST_CASE("gradcheck: cross_entropy with class indices, weight and smoothing", "[nn][loss][gradcheck]") {
  // input (2, 3, 2), target (2, 2) with one ignored; the weight requires grad too
  Tensor x = test::leaf({0.3, -1.2, 0.8, 0.1, -0.4, 1.5, 2.0, -0.7, 0.2, 0.9, -1.1, 0.6}, {2, 3, 2}, device);
  Tensor w = test::leaf({0.5, 1.5, 2.0}, {3}, device);
  Tensor t = ids({2, 0, -100, 1}, {2, 2}, device);
  for (nn::Reduction r : {kNone, kMean, kSum}) {
    for (double ls : {0.0, 0.3}) {
      INFO("reduction " << nn::reduction_name(r) << ", label_smoothing " << ls);
      test::check_gradients(
          [&](const std::vector<Tensor>& in) {
            return F::cross_entropy(in[0], t,
                                    F::CrossEntropyFuncOptions().weight(in[1]).reduction(r).label_smoothing(ls));
          },
          {x, w});
    }
  }
  // (C) input with a 0-dim target
  Tensor v = test::leaf({0.3, -1.2, 0.8, 0.1}, {4}, device);
  test::check_gradients([&](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], ids({2}, {}, device)); },
                        {v});
}

DEVICE_TEST_CASE("gradcheck: cross_entropy with class probabilities", "[nn][loss][gradcheck]") {
  Tensor x = test::leaf({0.3, -1.2, 0.8, 0.1, -0.4, 1.5}, {2, 3}, device);
  Tensor p = test::leaf({0.2, 0.5, 0.3, 0.6, 0.1, 0.3}, {2, 3}, device);
  Tensor w = test::make({0.5, 1.5, 2.0}, {3}, kFloat64, device);
  for (nn::Reduction r : {kNone, kMean, kSum}) {
    INFO("reduction " << nn::reduction_name(r));
    test::check_gradients(
        [&](const std::vector<Tensor>& in) {
          return F::cross_entropy(in[0], in[1],
                                  F::CrossEntropyFuncOptions().weight(w).reduction(r).label_smoothing(0.2));
        },
        {x, p});
  }
}

DEVICE_TEST_CASE("gradcheck: nll_loss", "[nn][loss][gradcheck]") {
  Tensor x = test::leaf({-0.3, -1.2, -0.8, -0.1, -0.4, -1.5, -2.0, -0.7}, {4, 2}, device);
  Tensor w = test::leaf({0.5, 1.5}, {2}, device);
  Tensor t = ids({1, 0, 3, 1}, {4}, device);
  for (nn::Reduction r : {kNone, kMean, kSum}) {
    INFO("reduction " << nn::reduction_name(r));
    test::check_gradients(
        [&](const std::vector<Tensor>& in) {
          return F::nll_loss(in[0], t, F::NLLLossFuncOptions().weight(in[1]).ignore_index(3).reduction(r));
        },
        {x, w});
  }
}

DEVICE_TEST_CASE("gradcheck: mse_loss and l1_loss, input and target", "[nn][loss][gradcheck]") {
  Tensor x = test::leaf({0.3, -1.2, 0.8, 0.1, -0.4, 1.5}, {2, 3}, device);
  Tensor y = test::leaf({1.3, 0.2, -0.8, 0.6, -1.4, 0.5}, {2, 3}, device);
  Tensor row = test::leaf({1.0, -0.5, 0.25}, {3}, device);  // broadcast against x
  for (nn::Reduction r : {kNone, kMean, kSum}) {
    INFO("reduction " << nn::reduction_name(r));
    test::check_gradients([&](const std::vector<Tensor>& in) { return F::mse_loss(in[0], in[1], r); }, {x, y});
    test::check_gradients([&](const std::vector<Tensor>& in) { return F::l1_loss(in[0], in[1], r); }, {x, y});
    test::check_gradients([&](const std::vector<Tensor>& in) { return F::mse_loss(in[0], in[1], r); }, {x, row});
  }
}

DEVICE_TEST_CASE("gradcheck: binary_cross_entropy_with_logits, every argument", "[nn][loss][gradcheck]") {
  Tensor x = test::leaf({0.0, -3.2, 0.8, 25.0, -0.4, 1.5}, {2, 3}, device);
  Tensor t = test::leaf({0.2, 0.9, 0.3, 0.6, 0.1, 0.5}, {2, 3}, device);
  Tensor w = test::leaf({0.5, 1.5, 2.0}, {3}, device);
  Tensor pw = test::leaf({2.0, 0.7, 1.3}, {3}, device);
  for (nn::Reduction r : {kNone, kMean, kSum}) {
    INFO("reduction " << nn::reduction_name(r));
    test::check_gradients(
        [&](const std::vector<Tensor>& in) {
          return F::binary_cross_entropy_with_logits(
              in[0], in[1], F::BinaryCrossEntropyWithLogitsFuncOptions().weight(in[2]).pos_weight(in[3]).reduction(r));
        },
        {x, t, w, pw});
  }
}

// ---------------------------------------------------------------- errors

DEVICE_TEST_CASE("cross_entropy and nll_loss name a target out of bounds", "[nn][loss][errors]") {
  Tensor x = test::make({0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2}, {3, 4}, kFloat32, device);
  // On a cuda device a kernel finds the target, and the error comes at the
  // next wait (kernels/cuda/device_check.h): waited() is one.
  REQUIRE_THROWS_AS(waited(F::cross_entropy(x, ids({0, 5, 1}, {3}, device))), IndexError);
  REQUIRE_THROWS_WITH(waited(F::cross_entropy(x, ids({0, 5, 1}, {3}, device))),
                      Contains("Target 5 is out of bounds.") && Contains("cross_entropy") &&
                          Contains("class indices must lie in [0, 4)"));
  REQUIRE_THROWS_WITH(waited(F::cross_entropy(x, ids({0, 1, -3}, {3}, device))),
                      Contains("Target -3 is out of bounds."));
  // The first bad target in order, past an ignored one, on the cpu; on a
  // cuda device whichever thread got there first.
  if (device.is_cuda()) {
    REQUIRE_THROWS_WITH(
        waited(F::nll_loss(x, ids({-100, 4, 7}, {3}, device))),
        (Contains("Target 4 is out of bounds.") || Contains("Target 7 is out of bounds.")) && Contains("nll_loss"));
  } else {
    REQUIRE_THROWS_WITH(F::nll_loss(x, ids({-100, 4, 7}, {3}, device)),
                        Contains("Target 4 is out of bounds.") && Contains("nll_loss"));
  }
  REQUIRE_THROWS_WITH(waited(F::nll_loss(x, ids({-100, 1, 2}, {3}, device), F::NLLLossFuncOptions().ignore_index(1))),
                      Contains("Target -100 is out of bounds.") && Contains("ignore_index=1"));
  // Spatial targets, smoothing and weights take the same check.
  Tensor s = zeros({2, 3, 2}, TensorOptions(kFloat64).device(device));
  Tensor w = ones({3}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_WITH(waited(F::cross_entropy(s, ids({0, 1, 2, 3}, {2, 2}, device),
                                              F::CrossEntropyFuncOptions().weight(w).label_smoothing(0.1))),
                      Contains("Target 3 is out of bounds."));
}

DEVICE_TEST_CASE("cross_entropy and nll_loss check dtypes", "[nn][loss][errors]") {
  Tensor x = test::make({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {2, 3}, kFloat64, device);
  Tensor t = ids({0, 2}, {2}, device);
  REQUIRE_THROWS_AS(F::cross_entropy(x, t.to(kInt32)), DtypeError);
  REQUIRE_THROWS_WITH(F::cross_entropy(x, t.to(kInt32)),
                      Contains("expected scalar type Long but found Int") && Contains("target.to(kInt64)"));
  REQUIRE_THROWS_WITH(F::nll_loss(x, t.to(kFloat64)), Contains("expected scalar type Long but found Double"));
  // A floating target that is not the input's shape is neither kind.
  REQUIRE_THROWS_WITH(F::cross_entropy(x, t.to(kFloat32)), Contains("expected scalar type Long but found Float") &&
                                                               Contains("must have the input's shape [2, 3], got [2]"));
  REQUIRE_THROWS_WITH(F::cross_entropy(x, x.to(kInt64)),
                      Contains("Expected floating point type for target with class probabilities, got Long") &&
                          Contains("class indices have shape [2]"));
  REQUIRE_THROWS_WITH(F::cross_entropy(x.to(kInt64), t),
                      Contains("cross_entropy: expected a floating-point input (logits), got int64"));
  REQUIRE_THROWS_WITH(F::nll_loss(x.to(kInt32), t),
                      Contains("nll_loss: expected a floating-point input (log-probabilities), got int32"));
  Tensor w32 = ones({3}, TensorOptions(kFloat32).device(device));
  REQUIRE_THROWS_AS(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().weight(w32)), DtypeError);
  REQUIRE_THROWS_WITH(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().weight(w32)),
                      Contains("expected scalar type Double but found Float") && Contains("weight.to(input.dtype())"));
  REQUIRE_THROWS_WITH(F::nll_loss(x, t, F::NLLLossFuncOptions().weight(w32)),
                      Contains("expected scalar type Double but found Float"));
}

DEVICE_TEST_CASE("cross_entropy and nll_loss check shapes", "[nn][loss][errors]") {
  Tensor x = zeros({3, 4}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_AS(F::cross_entropy(x, ids({0, 1}, {2}, device)), ShapeError);
  REQUIRE_THROWS_WITH(F::cross_entropy(x, ids({0, 1}, {2}, device)),
                      Contains("Expected input batch_size (3) to match target batch_size (2).") &&
                          Contains("takes a target of shape [3]"));
  REQUIRE_THROWS_WITH(F::nll_loss(x, ids({0, 1, 2}, {3, 1}, device)),
                      Contains("0D or 1D target tensor expected, multi-target not supported"));
  REQUIRE_THROWS_WITH(F::nll_loss(x, ids({1}, {}, device)), Contains("Expected target size [3], got []"));
  Tensor s = zeros({2, 4, 3}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_WITH(F::cross_entropy(s, zeros({2, 5}, TensorOptions(kInt64).device(device))),
                      Contains("Expected target size [2, 3], got [2, 5]"));
  Tensor v = zeros({4}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_WITH(F::cross_entropy(v, ids({1}, {1}, device)),
                      Contains("size mismatch (got input: [4], target: [1])") && Contains("0-dim target"));
  Tensor scalar = zeros({}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_WITH(F::cross_entropy(scalar, ids({0}, {}, device)),
                      Contains("Expected 1 or more dimensions (got 0)"));
  REQUIRE_THROWS_WITH(F::nll_loss(scalar, ids({0}, {}, device)), Contains("Expected 1 or more dimensions (got 0)"));
  Tensor w3 = ones({3}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_WITH(F::cross_entropy(x, ids({0, 1, 2}, {3}, device), F::CrossEntropyFuncOptions().weight(w3)),
                      Contains("weight tensor should be defined either for all 4 classes or no classes but got "
                               "weight tensor of shape: [3]"));
  REQUIRE_THROWS_WITH(F::nll_loss(x, ids({0, 1, 2}, {3}, device), F::NLLLossFuncOptions().weight(w3.view({1, 3}))),
                      Contains("no classes but got weight tensor of shape: [1, 3]"));
  // Class probabilities: the same weight rule, and no ignore_index.
  REQUIRE_THROWS_WITH(F::cross_entropy(x, x, F::CrossEntropyFuncOptions().weight(w3)),
                      Contains("cross_entropy: weight tensor should be defined either for all 4 classes"));
  REQUIRE_THROWS_AS(F::cross_entropy(x, x, F::CrossEntropyFuncOptions().ignore_index(1)), ValueError);
  REQUIRE_THROWS_WITH(F::cross_entropy(x, x, F::CrossEntropyFuncOptions().ignore_index(1)),
                      Contains("ignore_index is not supported for floating point target"));
}

DEVICE_TEST_CASE("cross_entropy checks label_smoothing", "[nn][loss][errors]") {
  Tensor x = zeros({3, 4}, TensorOptions(kFloat64).device(device));
  Tensor t = ids({0, 1, 2}, {3}, device);
  REQUIRE_THROWS_AS(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().label_smoothing(1.5)), ValueError);
  REQUIRE_THROWS_WITH(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().label_smoothing(1.5)),
                      Contains("label_smoothing must be between 0.0 and 1.0. Got: 1.5"));
  REQUIRE_THROWS_WITH(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().label_smoothing(-0.5)),
                      Contains("label_smoothing must be between 0.0 and 1.0. Got: -0.5"));
  REQUIRE_THROWS_WITH(F::cross_entropy(x, x, F::CrossEntropyFuncOptions().label_smoothing(2)),
                      Contains("label_smoothing must be between 0.0 and 1.0. Got: 2"));
}

DEVICE_TEST_CASE("mse_loss, l1_loss and binary_cross_entropy_with_logits check their arguments", "[nn][loss][errors]") {
  Tensor x = zeros({3, 4}, TensorOptions(kFloat64).device(device));
  Tensor y5 = zeros({5}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_AS(F::mse_loss(x, y5), ShapeError);
  REQUIRE_THROWS_WITH(F::mse_loss(x, y5),
                      Contains("mse_loss: the size of tensor a (4) must match the size of tensor b (5)"));
  REQUIRE_THROWS_WITH(F::l1_loss(x, y5), Contains("l1_loss: the size of tensor a (4)"));
  Tensor i = zeros({3, 4}, TensorOptions(kInt64).device(device));
  REQUIRE_THROWS_AS(F::mse_loss(i, i), DtypeError);
  REQUIRE_THROWS_WITH(F::mse_loss(i, i), Contains("mse_loss: expected a floating-point input or target, got int64 "
                                                  "and int64"));
  REQUIRE_THROWS_WITH(F::l1_loss(i, i.to(kInt32)), Contains("l1_loss: expected a floating-point input or target"));

  const char* bce = "binary_cross_entropy_with_logits";
  REQUIRE_THROWS_AS(F::binary_cross_entropy_with_logits(x, zeros({4}, TensorOptions(kFloat64).device(device))),
                    ShapeError);
  REQUIRE_THROWS_WITH(F::binary_cross_entropy_with_logits(x, zeros({4}, TensorOptions(kFloat64).device(device))),
                      Contains("Target size ([4]) must be the same as input size ([3, 4])") && Contains(bce));
  REQUIRE_THROWS_WITH(F::binary_cross_entropy_with_logits(x, i),
                      Contains(std::string(bce) + ": expected a floating-point target (probabilities in [0, 1]), "
                                                  "got int64"));
  REQUIRE_THROWS_WITH(F::binary_cross_entropy_with_logits(i, x),
                      Contains(std::string(bce) + ": expected a floating-point input (logits)"));
  auto opts = F::BinaryCrossEntropyWithLogitsFuncOptions();
  Tensor w3 = ones({3}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_AS(F::binary_cross_entropy_with_logits(x, x, opts.weight(w3)), ShapeError);
  REQUIRE_THROWS_WITH(
      F::binary_cross_entropy_with_logits(x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().weight(w3)),
      Contains(std::string(bce) + ": weight of shape [3] does not broadcast to the input's shape "
                                  "[3, 4]"));
  REQUIRE_THROWS_WITH(
      F::binary_cross_entropy_with_logits(x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(w3)),
      Contains("pos_weight of shape [3] does not broadcast"));
  Tensor w4f = ones({4}, TensorOptions(kFloat32).device(device));
  REQUIRE_THROWS_AS(
      F::binary_cross_entropy_with_logits(x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(w4f)),
      DtypeError);
  REQUIRE_THROWS_WITH(
      F::binary_cross_entropy_with_logits(x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().weight(w4f)),
      Contains("expected scalar type Double but found Float") && Contains("weight.to(input.dtype())"));
}

DEVICE_TEST_CASE("losses name themselves and the argument on another device", "[nn][loss][errors]") {
  std::optional<Device> other = test::other_device(device);
  if (!other) return;
  Tensor x = zeros({2, 3}, TensorOptions(kFloat64).device(device));
  Tensor t = ids({0, 2}, {2}, device);
  Tensor w = ones({3}, TensorOptions(kFloat64).device(device));
  const std::string same = "Expected all tensors to be on the same device";
  REQUIRE_THROWS_AS(F::cross_entropy(x, t.to(*other)), DeviceError);
  REQUIRE_THROWS_WITH(F::cross_entropy(x, t.to(*other)),
                      Contains(same) && Contains("(when checking argument 'target' of cross_entropy)"));
  REQUIRE_THROWS_WITH(F::cross_entropy(x, t, F::CrossEntropyFuncOptions().weight(w.to(*other))),
                      Contains(same) && Contains("(when checking argument 'weight' of cross_entropy)"));
  REQUIRE_THROWS_WITH(F::cross_entropy(x, x.to(*other)), Contains("argument 'target' of cross_entropy"));
  REQUIRE_THROWS_WITH(F::nll_loss(x, t.to(*other)), Contains("argument 'target' of nll_loss"));
  REQUIRE_THROWS_WITH(F::nll_loss(x, t, F::NLLLossFuncOptions().weight(w.to(*other))),
                      Contains("argument 'weight' of nll_loss"));
  REQUIRE_THROWS_WITH(F::mse_loss(x, x.to(*other)), Contains(same) && Contains("argument 'target' of mse_loss"));
  REQUIRE_THROWS_WITH(F::l1_loss(x, x.to(*other)), Contains("argument 'target' of l1_loss"));
  const char* bce = "binary_cross_entropy_with_logits";
  REQUIRE_THROWS_WITH(F::binary_cross_entropy_with_logits(x, x.to(*other)),
                      Contains(std::string("argument 'target' of ") + bce));
  REQUIRE_THROWS_WITH(
      F::binary_cross_entropy_with_logits(x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().weight(w.to(*other))),
      Contains(std::string("argument 'weight' of ") + bce));
  REQUIRE_THROWS_WITH(
      F::binary_cross_entropy_with_logits(x, x, F::BinaryCrossEntropyWithLogitsFuncOptions().pos_weight(w.to(*other))),
      Contains(std::string("argument 'pos_weight' of ") + bce));
}

TEST_CASE("losses refuse undefined tensors", "[nn][loss][errors]") {
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(F::cross_entropy(x, Tensor()),
                      Contains("cross_entropy: argument 'target' is an undefined tensor"));
  REQUIRE_THROWS_WITH(F::nll_loss(Tensor(), x), Contains("nll_loss: argument 'input' is an undefined tensor"));
  REQUIRE_THROWS_WITH(F::mse_loss(x, Tensor()), Contains("mse_loss: argument 'target' is an undefined tensor"));
  REQUIRE_THROWS_WITH(F::l1_loss(Tensor(), x), Contains("l1_loss: argument 'input' is an undefined tensor"));
  REQUIRE_THROWS_WITH(F::binary_cross_entropy_with_logits(x, Tensor()),
                      Contains("binary_cross_entropy_with_logits: argument 'target' is an undefined tensor"));
}

// ---------------------------------------------------------------- options

TEST_CASE("loss options chain as libtorch's and keep their defaults", "[nn][loss]") {
  Tensor w = ones({3});
  nn::CrossEntropyLossOptions ce = nn::CrossEntropyLossOptions().weight(w).ignore_index(-1).reduction(kSum);
  CHECK(ce.weight().is_same(w));
  CHECK(ce.ignore_index() == -1);
  CHECK(ce.reduction() == nn::Reduction::Sum);
  CHECK(ce.label_smoothing() == 0.0);
  F::CrossEntropyFuncOptions defaults;
  CHECK_FALSE(defaults.weight().defined());
  CHECK(defaults.ignore_index() == -100);
  CHECK(defaults.reduction() == kMean);
  CHECK(F::NLLLossFuncOptions().ignore_index() == -100);
  CHECK(nn::MSELossOptions(kNone).reduction() == nn::Reduction::None);
  CHECK(nn::L1LossOptions().reduction() == kMean);
  nn::BCEWithLogitsLossOptions bce = nn::BCEWithLogitsLossOptions().pos_weight(w);
  CHECK(bce.pos_weight().is_same(w));
  CHECK_FALSE(bce.weight().defined());
  CHECK(std::string(nn::reduction_name(kNone)) == "none");
  CHECK(std::string(nn::reduction_name(kMean)) == "mean");
  CHECK(std::string(nn::reduction_name(kSum)) == "sum");
}

// ---------------------------------------------------------------- modules

TEST_CASE("loss modules print as PyTorch's and hold their weights as buffers", "[nn][loss][module]") {
  Tensor w = test::make({1, 2, 3}, {3}, kFloat64);
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(w).label_smoothing(0.1));
  std::ostringstream s;
  s << ce << " " << nn::NLLLoss() << " " << nn::MSELoss() << " " << nn::L1Loss(kSum) << " " << nn::BCEWithLogitsLoss();
  CHECK(s.str() == "CrossEntropyLoss() NLLLoss() MSELoss() L1Loss() BCEWithLogitsLoss()");
  // The buffer is the module's own tensor over the caller's storage, and the
  // options name the buffer.
  CHECK_FALSE(ce->weight.is_same(w));
  CHECK(ce->weight.storage() == w.storage());
  CHECK(ce->options.weight().is_same(ce->weight));
  CHECK(w.origin().label == nullptr);
  CHECK(ce->options.label_smoothing() == 0.1);
  CHECK(ce->parameters().empty());
  auto buffers = ce->named_buffers();
  REQUIRE(buffers.size() == 1);
  CHECK(buffers.contains("weight"));
  CHECK(ce->state_dict().contains("weight"));
  // Without weights nothing is registered, as PyTorch's None buffers.
  CHECK(nn::CrossEntropyLoss()->named_buffers().size() == 0);
  CHECK(nn::NLLLoss()->state_dict().size() == 0);
  nn::BCEWithLogitsLoss bce(nn::BCEWithLogitsLossOptions().pos_weight(w));
  CHECK(bce->named_buffers().size() == 1);
  CHECK(bce->named_buffers().contains("pos_weight"));
  CHECK_FALSE(bce->weight.defined());
}

DEVICE_TEST_CASE("loss modules compute their functional with their options", "[nn][loss][module]") {
  Tensor x = test::make({0.5, -1, 2, 0.25, 1, -0.5, 0.3, 0.2, -0.1}, {3, 3}, kFloat64, device);
  Tensor t = ids({2, 0, 1}, {3}, device);
  Tensor w = test::make({0.5, 2, 1}, {3}, kFloat64, device);
  auto ce_opts = nn::CrossEntropyLossOptions().weight(w).ignore_index(0).reduction(kSum).label_smoothing(0.2);
  test::check_close(nn::CrossEntropyLoss(ce_opts)(x, t), F::cross_entropy(x, t, ce_opts));
  auto nll_opts = nn::NLLLossOptions().weight(w).reduction(kNone);
  test::check_close(nn::NLLLoss(nll_opts)(x, t), F::nll_loss(x, t, nll_opts));
  Tensor y = x.sigmoid();
  test::check_close(nn::MSELoss(kSum)(x, y), F::mse_loss(x, y, kSum));
  test::check_close(nn::L1Loss()(x, y), F::l1_loss(x, y));
  auto bce_opts = nn::BCEWithLogitsLossOptions().weight(w).pos_weight(w * 2).reduction(kNone);
  test::check_close(nn::BCEWithLogitsLoss(bce_opts)(x, y), F::binary_cross_entropy_with_logits(x, y, bce_opts));
}

// A criterion built on the cpu and moved with the model: its weights follow.
DEVICE_TEST_CASE("a moved loss module takes its weights along; a forgotten one names the loss", "[nn][loss][module]") {
  if (device.is_cpu()) return;
  Tensor x = test::make({0.5, -1, 2, 0.25, 1, -0.5}, {2, 3}, kFloat64, device);
  Tensor t = ids({2, 0}, {2}, device);
  Tensor w = test::make({0.5, 2, 1}, {3}, kFloat64);
  Tensor expected = F::cross_entropy(x.cpu(), t.cpu(), F::CrossEntropyFuncOptions().weight(w));

  nn::CrossEntropyLoss forgotten(nn::CrossEntropyLossOptions().weight(w.clone()));
  REQUIRE_THROWS_AS(forgotten(x, t), DeviceError);
  REQUIRE_THROWS_WITH(forgotten(x, t), Contains("Expected all tensors to be on the same device") &&
                                           Contains("(when checking argument 'weight' of cross_entropy)") &&
                                           Contains("buffer 'weight'"));
  nn::BCEWithLogitsLoss bce_forgotten(nn::BCEWithLogitsLossOptions().pos_weight(w.clone()));
  REQUIRE_THROWS_WITH(bce_forgotten(x, x.sigmoid()),
                      Contains("(when checking argument 'pos_weight' of binary_cross_entropy_with_logits)") &&
                          Contains("buffer 'pos_weight'"));
  nn::NLLLoss nll_forgotten(nn::NLLLossOptions().weight(w.clone()));
  REQUIRE_THROWS_WITH(nll_forgotten(x, t), Contains("(when checking argument 'weight' of nll_loss)"));

  nn::CrossEntropyLoss moved(nn::CrossEntropyLossOptions().weight(w.clone()));
  moved->to(device);
  CHECK(moved->weight.device() == device);
  CHECK(moved->options.weight().device() == device);
  CHECK(moved->named_buffers()["weight"].device() == device);
  Tensor loss = moved(x, t);
  CHECK(loss.device() == device);
  test::check_close(loss, expected);

  nn::BCEWithLogitsLoss bce(nn::BCEWithLogitsLossOptions().weight(w.clone()).pos_weight(w.clone()));
  bce->to(device);
  CHECK(bce->weight.device() == device);
  CHECK(bce->pos_weight.device() == device);
  CHECK(bce->options.weight().device() == device);
  CHECK(bce->options.pos_weight().device() == device);
  test::check_close(bce(x, x.sigmoid()), F::binary_cross_entropy_with_logits(
                                             x.cpu(), x.cpu().sigmoid(),
                                             F::BinaryCrossEntropyWithLogitsFuncOptions().weight(w).pos_weight(w)));
}

// to() moves the module's buffers, never the caller's tensors (PyTorch's
// module.to() leaves the tensor it was given where it was).
DEVICE_TEST_CASE("moving a loss module leaves the caller's weight tensors where they were", "[nn][loss][module]") {
  if (device.is_cpu()) return;
  Tensor w = test::make({0.5, 2, 1}, {3}, kFloat64);
  Tensor pw = test::make({3, 1, 0.25}, {3}, kFloat64);
  Tensor x = test::make({0.5, -1, 2, 0.25, 1, -0.5}, {2, 3}, kFloat64, device);
  Tensor t = ids({2, 0}, {2}, device);

  const Origin w_origin = w.origin(), pw_origin = pw.origin();

  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(w));
  nn::NLLLoss nll(nn::NLLLossOptions().weight(w));
  nn::BCEWithLogitsLoss bce(nn::BCEWithLogitsLossOptions().weight(w).pos_weight(pw));
  ce->to(device);
  nll->to(device);
  bce->to(device);
  for (const auto& [given, before] : {std::pair{w, w_origin}, std::pair{pw, pw_origin}}) {
    CHECK(given.device() == Device(kCPU));
    CHECK(given.origin().kind == before.kind);
    CHECK(std::string(given.origin().op) == before.op);
    CHECK(given.origin().label == nullptr);
  }
  test::check_values(w, {0.5, 2, 1});
  test::check_values(pw, {3, 1, 0.25});
  // The modules' buffers moved, with their own labels.
  CHECK(ce->weight.device() == device);
  CHECK(nll->weight.device() == device);
  CHECK(bce->weight.device() == device);
  CHECK(bce->pos_weight.device() == device);
  CHECK(std::string(bce->pos_weight.origin().label) == "buffer 'pos_weight'");
  test::check_close(ce(x, t), F::cross_entropy(x, t, F::CrossEntropyFuncOptions().weight(w.to(device))));
  // The caller's cpu weight with the cuda input is still the caller's mistake.
  REQUIRE_THROWS_WITH(F::nll_loss(x, t, F::NLLLossFuncOptions().weight(w)),
                      Contains("(when checking argument 'weight' of nll_loss)"));
}

// A criterion registered in a model moves with it.
TEST_CASE("a loss module inside a model moves with the model", "[nn][loss][module]") {
  std::optional<Device> gpu;
  for (const Device& d : test::devices())
    if (d.is_cuda()) gpu = d;
  if (!gpu) return;
  struct NetImpl : nn::Module {
    NetImpl()
        : criterion(register_module("criterion", nn::CrossEntropyLoss(nn::CrossEntropyLossOptions().weight(
                                                     test::make({1, 2, 3}, {3}, kFloat64))))) {}
    nn::CrossEntropyLoss criterion;
  };
  auto net = std::make_shared<NetImpl>();
  CHECK(net->named_buffers().contains("criterion.weight"));
  net->to(*gpu);
  CHECK(net->criterion->weight.device() == *gpu);
  Tensor x = test::make({0.5, -1, 2}, {1, 3}, kFloat64, *gpu);
  CHECK(net->criterion(x, ids({1}, {1}, *gpu)).device() == *gpu);
}

// Autocast (tensor/ops/autocast.h): every op of the policy table
// (TANDEM_AUTOCAST_OPS) gives the dtype its policy says on every device and
// for both lower-precision dtypes; the cpu's bfloat16 results against
// PyTorch's cpu autocast (tests/data/autocast_reference.txt, from
// scripts/gen_autocast_reference.py); the guard's nesting, enabled flag,
// thread-locality and errors; the cast cache, NoGradGuard included.
#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "helpers.h"
#include "reference_data.h"
#include "tensor/core/shape.h"

using namespace tandem;
using autocast::Policy;
namespace F = tandem::nn::functional;

namespace {

// How the table test calls each listed op: its inputs for a floating dtype
// (the first floating input in it; the ops with a second floating input of
// another dtype take it in `second`), and the call.
struct OpCall {
  std::function<std::vector<Tensor>(Dtype, Dtype, Device)> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> run;
};

Tensor values(IntArrayRef shape, Dtype dtype, Device device, double scale = 0.25) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<double>((i * 7) % 11 - 5);
  return test::make(v, shape, dtype, device);
}

std::map<std::string, OpCall> op_calls() {
  auto one = [](IntArrayRef shape) {
    Shape s = shape.vec();
    return [s](Dtype dt, Dtype, Device d) { return std::vector<Tensor>{values(s, dt, d)}; };
  };
  auto two = [](IntArrayRef a, IntArrayRef b) {
    Shape sa = a.vec(), sb = b.vec();
    return [sa, sb](Dtype dt, Dtype, Device d) {
      return std::vector<Tensor>{values(sa, dt, d), values(sb, dt, d, 0.5)};
    };
  };
  auto mixed = [](IntArrayRef shape) {
    Shape s = shape.vec();
    return [s](Dtype dt, Dtype second, Device d) {
      return std::vector<Tensor>{values(s, dt, d), values(s, second, d)};
    };
  };
  auto with_labels = [](Dtype dt, Dtype, Device d) {
    return std::vector<Tensor>{values({4, 5}, dt, d), test::make({2, 0, 3, 1}, {4}, kInt64, d)};
  };
  using In = const std::vector<Tensor>&;
  return {
      {"matmul", {two({3, 4}, {4, 2}), [](In x) { return matmul(x[0], x[1]); }}},
      {"mm", {two({3, 4}, {4, 2}), [](In x) { return mm(x[0], x[1]); }}},
      {"bmm", {two({2, 3, 4}, {2, 4, 2}), [](In x) { return bmm(x[0], x[1]); }}},
      {"linear", {two({3, 4}, {2, 4}), [](In x) { return F::linear(x[0], x[1]); }}},
      {"conv2d", {two({1, 2, 4, 4}, {3, 2, 3, 3}), [](In x) { return conv2d(x[0], x[1]); }}},
      {"exp", {one({5}), [](In x) { return x[0].exp(); }}},
      {"log", {one({5}), [](In x) { return x[0].abs().add(1).log(); }}},
      {"log1p", {one({5}), [](In x) { return x[0].abs().log1p(); }}},
      {"rsqrt", {one({5}), [](In x) { return x[0].abs().add(1).rsqrt(); }}},
      {"pow", {two({5}, {5}), [](In x) { return x[0].abs().add(1).pow(x[1]); }}},
      {"softplus", {one({5}), [](In x) { return softplus(x[0]); }}},
      {"sum", {one({2, 3}), [](In x) { return x[0].sum(); }}},
      {"prod", {one({2, 3}), [](In x) { return x[0].add(2).prod(); }}},
      {"softmax", {one({2, 3}), [](In x) { return x[0].softmax(1); }}},
      {"log_softmax", {one({2, 3}), [](In x) { return x[0].log_softmax(1); }}},
      {"logsumexp", {one({2, 3}), [](In x) { return x[0].logsumexp({1}); }}},
      {"norm", {one({2, 3}), [](In x) { return x[0].norm(); }}},
      {"layer_norm", {one({2, 3}), [](In x) { return layer_norm(x[0], {3}); }}},
      {"cross_entropy", {with_labels, [](In x) { return F::cross_entropy(x[0], x[1]); }}},
      {"nll_loss", {with_labels, [](In x) { return F::nll_loss(x[0], x[1]); }}},
      {"mse_loss", {two({2, 3}, {2, 3}), [](In x) { return F::mse_loss(x[0], x[1]); }}},
      {"l1_loss", {two({2, 3}, {2, 3}), [](In x) { return F::l1_loss(x[0], x[1]); }}},
      {"binary_cross_entropy_with_logits",
       {two({2, 3}, {2, 3}), [](In x) { return F::binary_cross_entropy_with_logits(x[0], x[1].sigmoid()); }}},
      {"cat",
       {mixed({2, 3}),
        [](In x) {
          return cat({x[0], x[1]});
        }}},
      {"stack",
       {mixed({2, 3}),
        [](In x) {
          return stack({x[0], x[1]});
        }}},
      {"where", {mixed({2, 3}), [](In x) { return where(x[1].gt(0), x[0], x[1]); }}},
      {"scatter_add",
       {[](Dtype dt, Dtype second, Device d) {
          return std::vector<Tensor>{values({2, 3}, dt, d), test::make({0, 1, 2, 2, 1, 0}, {2, 3}, kInt64, d),
                                     values({2, 3}, second, d)};
        },
        [](In x) { return x[0].scatter_add(1, x[1], x[2]); }}},
  };
}

// The dtype the table promises for an op whose first floating input is `in`
// (a Promote op's second is float32).
Dtype expected_dtype(Policy policy, Dtype in, Dtype lower) {
  if (in == kFloat64) return kFloat64;  // never cast (Promote: float64 with float32 is float64)
  switch (policy) {
    case Policy::Lower: return lower;
    case Policy::Float32: return kFloat32;
    case Policy::Promote: return kFloat32;
    case Policy::None: return in;
  }
  return in;
}

std::vector<Tensor> as_float32(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.is_floating_point() && t.dtype() != kFloat64 ? t.to(kFloat32) : t);
  return out;
}

}  // namespace

DEVICE_TEST_CASE("autocast: every op of the table gives its policy's dtype, for float16 and bfloat16", "[autocast]") {
  const std::map<std::string, OpCall> calls = op_calls();
  for (const char* name : autocast::listed_ops()) {
    INFO(name);
    REQUIRE(calls.count(name) == 1);  // every entry is tested
  }
  for (Dtype lower : {kFloat16, kBFloat16}) {
    for (const auto& [name, call] : calls) {
      const Policy policy = autocast::policy(name.c_str(), device.type());
      for (Dtype in : {kFloat32, lower, kFloat64}) {
        INFO(name << " (" << autocast::policy_name(policy) << ") on " << device.str() << ", autocast to " << lower
                  << ", input " << in);
        // A Promote op's second input is float32 beside a 16-bit or float32
        // first; otherwise all take `in` (as in PyTorch, scatter_add refuses
        // mixed dtypes where it is not listed, and float64 with float32).
        const Dtype second = policy == Policy::Promote && in != kFloat64 ? kFloat32 : in;
        const std::vector<Tensor> inputs = call.inputs(in, second, device);
        const Tensor plain = call.run(as_float32(inputs));  // outside the guard, in float32
        Tensor out;
        {
          AutocastGuard guard(device.type(), lower);
          out = call.run(inputs);
        }
        CHECK(out.dtype() == expected_dtype(policy, in, lower));
        CHECK(out.device() == device);
        // The values are the float32 ones within the lower precision's reach.
        if (in != kFloat64) test::check_close(out.to(kFloat64), plain.to(kFloat64), test::Tolerance{3e-2, 3e-2});
      }
    }
  }
}

DEVICE_TEST_CASE("autocast touches only the device type it is on, and no integer, bool or float64 tensor",
                 "[autocast]") {
  Tensor a = values({3, 4}, kFloat32, device), b = values({4, 2}, kFloat32, device);
  const DeviceType other = device.is_cuda() ? kCPU : kCUDA;
  {
    AutocastGuard guard(other);
    CHECK(matmul(a, b).dtype() == kFloat32);
    CHECK(autocast::is_enabled(other));
    CHECK_FALSE(autocast::is_enabled(device.type()));
  }
  AutocastGuard guard(device.type());
  CHECK(matmul(a, b).dtype() == (device.is_cuda() ? kFloat16 : kBFloat16));
  Tensor i = test::make({1, 2, 3, 4}, {2, 2}, kInt64, device);
  CHECK(matmul(i, i).dtype() == kInt64);
  CHECK(i.sum().dtype() == kInt64);
  CHECK(matmul(a.to(kFloat64), b.to(kFloat64)).dtype() == kFloat64);
  CHECK(a.to(kFloat64).exp().dtype() == kFloat64);
  // where is not listed: a 0-dim float32 fill does not widen a 16-bit
  // tensor (PyTorch's promotion), the attention-mask pattern.
  Tensor h = a.to(kFloat16);
  CHECK(where(h.gt(0), h, full({}, -1e4, TensorOptions(kFloat32).device(device))).dtype() == kFloat16);
}

TEST_CASE("AutocastGuard nests, restores what was before it, and is off with enabled=false", "[autocast]") {
  CHECK_FALSE(autocast::is_enabled(kCPU));
  CHECK(autocast::get_dtype(kCPU) == kBFloat16);
  CHECK(autocast::get_dtype(kCUDA) == kFloat16);
  Tensor a = values({2, 2}, kFloat32, Device(kCPU));
  {
    AutocastGuard outer(kCPU);
    CHECK(autocast::is_enabled(kCPU));
    CHECK(matmul(a, a).dtype() == kBFloat16);
    {
      AutocastGuard inner(kCPU, kFloat16);
      CHECK(autocast::get_dtype(kCPU) == kFloat16);
      CHECK(matmul(a, a).dtype() == kFloat16);
      {
        AutocastGuard off(kCPU, kFloat32, /*enabled=*/false);  // any dtype when disabled
        CHECK_FALSE(autocast::is_enabled(kCPU));
        CHECK(matmul(a, a).dtype() == kFloat32);
      }
      CHECK(matmul(a, a).dtype() == kFloat16);
    }
    CHECK(autocast::get_dtype(kCPU) == kBFloat16);
    CHECK(matmul(a, a).dtype() == kBFloat16);
  }
  CHECK_FALSE(autocast::is_enabled(kCPU));
  CHECK(matmul(a, a).dtype() == kFloat32);
}

TEST_CASE("AutocastGuard is per thread", "[autocast]") {
  Tensor a = values({2, 2}, kFloat32, Device(kCPU));
  AutocastGuard guard(kCPU);
  Dtype in_thread = kInt64;
  bool enabled_in_thread = true;
  std::thread t([&] {
    enabled_in_thread = autocast::is_enabled(kCPU);
    in_thread = matmul(a, a).dtype();
  });
  t.join();
  CHECK_FALSE(enabled_in_thread);
  CHECK(in_thread == kFloat32);
  CHECK(matmul(a, a).dtype() == kBFloat16);
}

TEST_CASE("AutocastGuard refuses a dtype it cannot cast to", "[autocast][errors]") {
  CHECK_THROWS_AS(AutocastGuard(kCUDA, kFloat32), ValueError);
  CHECK_THROWS_WITH(AutocastGuard(kCUDA, kFloat32),
                    "AutocastGuard: autocast on cuda casts to float16 or bfloat16, but got dtype float32 (for float32 "
                    "everywhere, leave autocast off: AutocastGuard(cuda, std::nullopt, /*enabled=*/false))");
  CHECK_THROWS_WITH(AutocastGuard(kCPU, kInt64),
                    Catch::StartsWith("AutocastGuard: autocast on cpu casts to float16 or bfloat16, but got dtype "
                                      "int64"));
  CHECK_FALSE(autocast::is_enabled(kCPU));  // a refused guard changes nothing
}

DEVICE_TEST_CASE(
    "autocast's cast cache: a weight is cast once per region, apart under NoGradGuard, again after an "
    "in-place change",
    "[autocast]") {
  manual_seed(5);
  nn::Linear lin(4, 3);
  lin->to(device);
  Tensor x = values({2, 4}, kFloat32, device);
  const Dtype lower = device.is_cuda() ? kFloat16 : kBFloat16;

  // The gradients without autocast's cache in the way: a region of one forward.
  Tensor reference_grad;
  {
    AutocastGuard guard(device.type());
    Tensor y = lin->forward(x);
    CHECK(y.dtype() == lower);
    CHECK(autocast::cache_size() == 2);  // weight and bias; x does not require grad
    y.to(kFloat32).sum().backward();
  }
  CHECK(autocast::cache_size() == 0);  // cleared by the outermost guard's end
  reference_grad = lin->weight.grad().clone();
  CHECK(reference_grad.dtype() == kFloat32);
  lin->zero_grad();

  {
    AutocastGuard guard(device.type());
    {
      NoGradGuard no_grad;  // an evaluation forward first (pytorch/pytorch#112583)
      Tensor e = lin->forward(x);
      CHECK(e.dtype() == lower);
      CHECK_FALSE(e.requires_grad());
    }
    CHECK(autocast::cache_size() == 2);
    {
      AutocastGuard nested(device.type());  // an inner guard keeps the outer one's cache
      Tensor y = lin->forward(x);
      Tensor y2 = lin->forward(x);
      CHECK(autocast::cache_size() == 4);  // the grad-mode casts, made once for two forwards
      REQUIRE(y.requires_grad());
      (y.to(kFloat32).sum() + y2.to(kFloat32).sum()).backward();
    }
    CHECK(autocast::cache_size() == 4);
  }
  REQUIRE(lin->weight.grad().defined());
  test::check_close(lin->weight.grad(), reference_grad * 2, test::Tolerance{1e-2, 1e-2});

  // An in-place change of the weight is seen by the next forward in the region.
  {
    AutocastGuard guard(device.type());
    Tensor before = lin->forward(x).to(kFloat32);
    {
      NoGradGuard no_grad;
      lin->weight.mul_(2);
    }
    Tensor after = lin->forward(x).to(kFloat32);
    Tensor bias = lin->bias.to(lower).to(kFloat32);
    test::check_close(after - bias, (before - bias) * 2, test::Tolerance{2e-2, 2e-2});
    CHECK(autocast::cache_size() == 2);
  }
  // set_data (what Module::to does) swaps the storage under the same tensor:
  // the next use casts the new values, whatever the versions say.
  {
    AutocastGuard guard(device.type());
    Tensor before = lin->forward(x).to(kFloat32);
    Tensor w = lin->weight.detach().clone();
    {
      NoGradGuard no_grad;
      lin->weight.set_data(w * 2);
    }
    Tensor after = lin->forward(x).to(kFloat32);
    Tensor bias = lin->bias.to(lower).to(kFloat32);
    test::check_close(after - bias, (before - bias) * 2, test::Tolerance{2e-2, 2e-2});
  }
  // With the cache off nothing is kept.
  {
    AutocastGuard guard(device.type(), std::nullopt, true, /*cache_enabled=*/false);
    CHECK_FALSE(autocast::is_cache_enabled());
    lin->forward(x);
    CHECK(autocast::cache_size() == 0);
  }
  CHECK(autocast::is_cache_enabled());
}

DEVICE_TEST_CASE("autocast: backward runs outside it in the forward's dtypes; float32 weights get float32 gradients",
                 "[autocast]") {
  manual_seed(6);
  nn::Sequential model(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 3));
  model->to(device);
  Tensor x = values({4, 6}, kFloat32, device);
  Tensor y = test::make({0, 2, 1, 2}, {4}, kInt64, device);
  Tensor loss;
  {
    AutocastGuard guard(device.type());
    Tensor logits = model->forward(x);
    CHECK(logits.dtype() == (device.is_cuda() ? kFloat16 : kBFloat16));
    loss = F::cross_entropy(logits, y);
    CHECK(loss.dtype() == kFloat32);
  }
  loss.backward();
  std::vector<Tensor> amp_grads;
  for (const Tensor& p : model->parameters()) {
    REQUIRE(p.grad().defined());
    CHECK(p.grad().dtype() == kFloat32);
    amp_grads.push_back(p.grad().clone());
  }
  model->zero_grad();
  F::cross_entropy(model->forward(x), y).backward();
  const std::vector<Tensor> params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    test::check_close(amp_grads[i], params[i].grad(), test::Tolerance{3e-2, 3e-2});
}

// ---------------------------------------------------------------- PyTorch's cpu autocast

namespace {

Tensor run_reference_op(const std::string& op, const std::vector<Tensor>& x) {
  if (op == "matmul") return matmul(x[0], x[1]);
  if (op == "mm") return mm(x[0], x[1]);
  if (op == "bmm") return bmm(x[0], x[1]);
  if (op == "linear") return F::linear(x[0], x[1], x[2]);
  if (op == "conv2d") return conv2d(x[0], x[1], x[2], 1, 1);
  if (op == "cross_entropy") return F::cross_entropy(x[0], x[1]);
  if (op == "nll_loss") return F::nll_loss(x[0], x[1]);
  if (op == "mse_loss") return F::mse_loss(x[0], x[1]);
  if (op == "l1_loss") return F::l1_loss(x[0], x[1]);
  if (op == "binary_cross_entropy_with_logits") return F::binary_cross_entropy_with_logits(x[0], x[1]);
  if (op == "prod") return x[0].prod();
  if (op == "cat") return cat({x[0], x[1]});
  if (op == "stack") return stack({x[0], x[1]});
  if (op == "softmax") return x[0].softmax(1);
  if (op == "exp") return x[0].exp();
  if (op == "sum") return x[0].sum();
  if (op == "relu") return x[0].relu();
  throw std::runtime_error("autocast_reference.txt: no call for op " + op);
}

}  // namespace

DEVICE_TEST_CASE(
    "autocast: PyTorch's cpu autocast's dtypes (bfloat16), and the exact values and gradients of its casts",
    "[autocast]") {
  test::ReferenceReader reader("autocast_reference.txt");
  test::ReferenceCase c;
  int cases = 0;
  while (reader.next_case(c)) {
    const std::string op = c.attr("op");
    INFO(c.name << " on " << device.str());
    std::vector<Tensor> inputs;
    for (int64_t i = 0; i < c.int_attr("inputs"); ++i) inputs.push_back(reader.next_tensor().to(device));
    const Tensor expected = reader.next_tensor();
    const int64_t n_grads = c.int_attr("grads");
    std::vector<Tensor> expected_grads;
    for (int64_t i = 0; i < n_grads; ++i) expected_grads.push_back(reader.next_tensor());
    ++cases;
    // On a cuda device, autocast to bfloat16 too: the ops whose policy the
    // two devices share give PyTorch's cpu results.
    if (autocast::policy(op.c_str(), kCUDA) != autocast::policy(op.c_str(), kCPU) && device.is_cuda()) continue;
    for (int64_t i = 0; i < n_grads; ++i) inputs[static_cast<size_t>(i)].requires_grad_(true);
    Tensor out;
    {
      AutocastGuard guard(device.type(), kBFloat16);
      out = run_reference_op(op, inputs);
    }
    CHECK(out.dtype() == expected.dtype());
    test::check_close(out.cpu().to(kFloat64), expected.to(kFloat64), test::Tolerance{1e-2, 1e-2});
    if (n_grads == 0) continue;
    const int64_t n = out.numel();
    std::vector<double> seed(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) seed[static_cast<size_t>(i)] = 0.5 * static_cast<double>(i + 1) * (i % 2 ? -1 : 1);
    (out.to(kFloat32) * test::make(seed, out.sizes(), kFloat32, device)).sum().backward();
    for (int64_t i = 0; i < n_grads; ++i) {
      INFO("gradient of input " << i);
      const Tensor& g = inputs[static_cast<size_t>(i)].grad();
      REQUIRE(g.defined());
      CHECK(g.dtype() == expected_grads[static_cast<size_t>(i)].dtype());
      test::check_close(g.cpu().to(kFloat64), expected_grads[static_cast<size_t>(i)].to(kFloat64),
                        test::Tolerance{2e-2, 2e-2});
    }
  }
  CHECK(cases == 19);
}

TEST_CASE("docs/autocast.md's table says what the policy table does", "[autocast][docs]") {
  std::ifstream doc(std::string(TANDEM_SOURCE_DIR) + "/docs/autocast.md");
  REQUIRE(doc);
  std::map<std::string, std::pair<std::string, std::string>> rows;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream in(line.substr(1));
    for (std::string cell; std::getline(in, cell, '|');) {
      const size_t b = cell.find_first_not_of(" `"), e = cell.find_last_not_of(" `");
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    REQUIRE(cells.size() >= 3);
    rows[cells[0]] = {cells[1], cells[2]};
  }
  const std::vector<const char*> ops = autocast::listed_ops();
  CHECK(rows.size() == ops.size());
  for (const char* op : ops) {
    INFO(op);
    REQUIRE(rows.count(op) == 1);
    CHECK(rows[op].first == autocast::policy_name(autocast::policy(op, kCUDA)));
    CHECK(rows[op].second == autocast::policy_name(autocast::policy(op, kCPU)));
  }
}

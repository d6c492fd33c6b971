// Batch norm, layer norm and embedding (tensor/ops/norm.h, nn/functional/norm.h,
// nn/modules/norm.h, nn/modules/embedding.h): forward values, gradients and
// running statistics against PyTorch 1.13 (tests/data/nn_norm_reference.txt,
// written by scripts/gen_nn_norm_reference.py) on every device in float64
// and float32; gradcheck and gradgradcheck of each op; both kernel walks and
// the threaded paths against the composite formulas; 16-bit inputs; the
// CUDA launch plans (kernels/cuda/norm_plan.h), run on the CPU; the
// modules' parameters, buffers, modes, printing and state dicts; every
// error message.
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "helpers.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cuda/norm_plan.h"
#include "kernels/embedding.h"
#include "kernels/norm.h"
#include "reference_data.h"

using namespace tandem;
namespace F = tandem::nn::functional;
using Catch::Contains;

namespace {

using test::non_contiguous;
using test::waited;

// ---------------------------------------------------------------- reference data

struct Case : test::ReferenceCase {
  std::string op;
  std::map<std::string, Tensor> tensors;

  bool has(const std::string& key) const { return tensors.count(key) != 0; }
  const Tensor& at(const std::string& key) const {
    auto it = tensors.find(key);
    if (it == tensors.end()) throw std::runtime_error(file + ": case " + name + " has no tensor " + key);
    return it->second;
  }
};

const std::string kFile = "nn_norm_reference.txt";

std::vector<Case> load_cases() {
  test::ReferenceReader file(kFile);
  std::vector<Case> cases;
  for (Case c; file.next_case(c); c = Case()) {
    c.op = c.attr("op");
    std::istringstream names(c.attr("tensors"));
    for (std::string name; std::getline(names, name, ',');) c.tensors[name] = file.next_tensor();
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = load_cases();
  return c;
}

std::vector<const Case*> cases_of(const std::string& prefix) {
  std::vector<const Case*> out;
  for (const Case& c : cases())
    if (c.op.rfind(prefix, 0) == 0) out.push_back(&c);
  return out;
}

// float64: PyTorch and Tandem order their sums differently; float32 inputs
// against the float64 reference: a few float32 roundings (normalising divides
// by a standard deviation, which scales the inputs' rounding up a little).
test::Tolerance tolerance_for(Dtype dtype) {
  if (dtype == kFloat64) return {1e-10, 1e-12};
  return {1e-4, 1e-5};
}

// A fresh copy on device in dtype (never the case's own tensor: leaves and
// in-place rescales must not touch the reference).
Tensor on(const Tensor& t, const Device& device, Dtype dtype) { return t.detach().to(device, dtype).clone(); }

// Runs one batch norm case through nn::BatchNorm1d / 2d: every batch in
// order, then the gradients of sum(output * seed) at the last one.
void check_batch_norm_case(const Case& c, const Device& device, Dtype dtype, bool strided) {
  INFO("case " << c.name << " on " << device.str() << " in " << dtype << (strided ? ", non-contiguous" : ""));
  const int64_t C = c.at("input0").size(1);
  const bool affine = c.flag("affine"), track = c.flag("track"), training = c.flag("training");
  nn::BatchNormOptions options(C);
  options.eps(c.double_attr("eps")).momentum(c.optional_double("momentum")).affine(affine).track_running_stats(track);
  std::shared_ptr<nn::BatchNormImplBase> m;
  if (c.op == "bn2d")
    m = nn::BatchNorm2d(options).ptr();
  else
    m = nn::BatchNorm1d(options).ptr();
  m->to(device, dtype);
  {
    NoGradGuard no_grad;
    if (affine) {
      m->weight.copy_(c.at("weight"));
      m->bias.copy_(c.at("bias"));
    }
    if (track) {
      m->running_mean.copy_(c.at("running_mean"));
      m->running_var.copy_(c.at("running_var"));
    }
  }
  m->train(training);
  const int steps = static_cast<int>(c.int_attr("steps"));
  Tensor x, out;
  for (int i = 0; i < steps; ++i) {
    x = on(c.at("input" + std::to_string(i)), device, dtype);
    if (strided) x = non_contiguous(x);
    x.requires_grad_();
    out = m->forward(x);
  }
  CHECK(out.device() == device);
  REQUIRE(out.dtype() == dtype);
  test::check_close(out, c.at("output"), tolerance_for(dtype));
  CHECK(std::string(out.grad_fn()->name()) == "NativeBatchNormBackward0");

  std::vector<Tensor> leaves{x};
  std::vector<std::string> expected{"grad_input"};
  if (affine) {
    leaves.insert(leaves.end(), {m->weight, m->bias});
    expected.insert(expected.end(), {"grad_weight", "grad_bias"});
  }
  const std::vector<Tensor> got = autograd::grad({out}, leaves, {on(c.at("seed"), device, dtype)});
  for (size_t k = 0; k < leaves.size(); ++k) {
    INFO(expected[k]);
    CHECK(got[k].device() == device);
    CHECK(got[k].dtype() == dtype);
    test::check_close(got[k], c.at(expected[k]), tolerance_for(dtype));
  }
  if (track) {
    test::check_close(m->running_mean, c.at("running_mean_after"), tolerance_for(dtype));
    test::check_close(m->running_var, c.at("running_var_after"), tolerance_for(dtype));
    CHECK(m->num_batches_tracked.item<int64_t>() == c.int_attr("batches"));
    CHECK(m->running_mean.device() == device);
  }
}

void check_layer_norm_case(const Case& c, const Device& device, Dtype dtype, bool strided) {
  INFO("case " << c.name << " on " << device.str() << " in " << dtype << (strided ? ", non-contiguous" : ""));
  const std::vector<int64_t> shape = c.ints_attr("shape");
  Tensor x = on(c.at("input"), device, dtype);
  if (strided) x = non_contiguous(x);
  x.requires_grad_();
  std::vector<Tensor> leaves{x};
  std::vector<std::string> expected{"grad_input"};
  Tensor w, b;
  if (c.flag("affine")) {
    w = on(c.at("weight"), device, dtype).requires_grad_();
    b = on(c.at("bias"), device, dtype).requires_grad_();
    leaves.insert(leaves.end(), {w, b});
    expected.insert(expected.end(), {"grad_weight", "grad_bias"});
  }
  Tensor out = F::layer_norm(x, F::LayerNormFuncOptions(shape).weight(w).bias(b).eps(c.double_attr("eps")));
  CHECK(out.device() == device);
  REQUIRE(out.dtype() == dtype);
  test::check_close(out, c.at("output"), tolerance_for(dtype));
  CHECK(std::string(out.grad_fn()->name()) == "NativeLayerNormBackward0");
  const std::vector<Tensor> got = autograd::grad({out}, leaves, {on(c.at("seed"), device, dtype)});
  for (size_t k = 0; k < leaves.size(); ++k) {
    INFO(expected[k]);
    CHECK(got[k].dtype() == dtype);
    test::check_close(got[k], c.at(expected[k]), tolerance_for(dtype));
  }
}

void check_embedding_case(const Case& c, const Device& device, Dtype dtype, Dtype index_dtype) {
  INFO("case " << c.name << " on " << device.str() << " in " << dtype << " with " << index_dtype << " indices");
  Tensor w = on(c.at("weight"), device, dtype).requires_grad_();
  Tensor idx = c.at("indices").to(device, index_dtype);
  F::EmbeddingFuncOptions options;
  if (c.attr("padding_idx") != "none") options.padding_idx(c.int_attr("padding_idx"));
  options.scale_grad_by_freq(c.flag("scale_grad_by_freq")).max_norm(c.optional_double("max_norm"));
  Tensor out = F::embedding(idx, w, options);
  CHECK(out.device() == device);
  REQUIRE(out.dtype() == dtype);
  test::check_close(out, c.at("output"), tolerance_for(dtype));
  if (c.has("weight_after")) test::check_close(w, c.at("weight_after"), tolerance_for(dtype));
  CHECK(std::string(out.grad_fn()->name()) == "EmbeddingBackward0");
  out.backward(on(c.at("seed"), device, dtype));
  REQUIRE(w.grad().defined());
  test::check_close(w.grad(), c.at("grad_weight"), tolerance_for(dtype));
}

Tensor ids(const std::vector<double>& values, IntArrayRef shape, Device device, Dtype dtype = kInt64) {
  return test::make(values, shape, dtype, device);
}

// Deterministic, far-from-zero-mean values of a shape (gradcheck wants
// distinct, smooth inputs; the statistics want a mean to remove).
std::vector<double> values(int64_t n, double offset = 0.5) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = offset + std::sin(1.3 * static_cast<double>(i) + 0.4) * (1 + 0.1 * (i % 7));
  return v;
}

// The batch-norm forward as ops, in float64: (x - mean) / sqrt(var + eps) * w + b.
Tensor batch_norm_composite(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  std::vector<int64_t> dims;
  Shape channel(x.dim(), 1);
  channel[1] = x.size(1);
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  Tensor mean = x.mean(dims, true);
  Tensor var = (x - mean).pow(2).mean(dims, true);
  return (x - mean) * (var + eps).rsqrt() * w.reshape(channel) + b.reshape(channel);
}

struct Threads {
  explicit Threads(int n) { cpu::set_num_threads(n); }
  ~Threads() { cpu::set_num_threads(0); }
};

}  // namespace

// ---------------------------------------------------------------- reference

TEST_CASE("the reference file covers every layer and option", "[nn][norm][reference]") {
  REQUIRE(cases().size() >= 30);
  std::set<std::string> ops;
  int eval = 0, untracked = 0, no_affine = 0, padded = 0, two_steps = 0;
  for (const Case& c : cases()) {
    ops.insert(c.op);
    if (c.op.rfind("bn", 0) == 0) {
      eval += !c.flag("training");
      untracked += !c.flag("track");
      no_affine += !c.flag("affine");
      two_steps += c.int_attr("steps") >= 2;
    }
    if (c.op == "emb") padded += c.attr("padding_idx") != "none";
  }
  CHECK(ops == std::set<std::string>{"bn1d", "bn2d", "ln", "emb"});
  CHECK(eval >= 5);
  CHECK(untracked >= 2);
  CHECK(no_affine >= 3);
  CHECK(two_steps >= 5);
  CHECK(padded >= 3);
}

DEVICE_TEST_CASE("BatchNorm1d and BatchNorm2d match PyTorch: outputs, gradients, running statistics",
                 "[nn][norm][reference]") {
  for (const Case* c : cases_of("bn")) {
    for (Dtype dtype : {kFloat64, kFloat32}) check_batch_norm_case(*c, device, dtype, false);
    check_batch_norm_case(*c, device, kFloat64, true);
  }
}

DEVICE_TEST_CASE("layer_norm matches PyTorch over one and two trailing dims", "[nn][norm][reference]") {
  for (const Case* c : cases_of("ln")) {
    for (Dtype dtype : {kFloat64, kFloat32}) check_layer_norm_case(*c, device, dtype, false);
    check_layer_norm_case(*c, device, kFloat64, true);
  }
}

DEVICE_TEST_CASE("embedding matches PyTorch: padding_idx, repeated indices, scale_grad_by_freq, max_norm",
                 "[nn][norm][reference]") {
  for (const Case* c : cases_of("emb")) {
    for (Dtype dtype : {kFloat64, kFloat32}) check_embedding_case(*c, device, dtype, kInt64);
    check_embedding_case(*c, device, kFloat64, kInt32);
  }
}

DEVICE_TEST_CASE("batch_norm as an op: running statistics after two steps, by hand", "[nn][norm]") {
  // Channel 0 holds 1, 3, 5 (mean 3, biased var 8/3, unbiased 4); channel 1
  // holds 2, 2, 8 (mean 4, biased var 8, unbiased 12).
  Tensor x = test::make({1, 2, 3, 2, 5, 8}, {3, 2}, kFloat64, device);
  Tensor rm = test::make({0, 1}, {2}, kFloat64, device), rv = test::make({1, 2}, {2}, kFloat64, device);
  Tensor y = batch_norm(x, {}, {}, rm, rv, /*training=*/true, /*momentum=*/0.5, /*eps=*/0.0);
  const double s0 = std::sqrt(8.0 / 3), s1 = std::sqrt(8.0);
  test::check_values(y, {-2 / s0, -2 / s1, 0, -2 / s1, 2 / s0, 4 / s1});
  test::check_values(rm, {1.5, 2.5});  // 0.5 * running + 0.5 * mean
  test::check_values(rv, {2.5, 7});    // 0.5 * running + 0.5 * unbiased var
  const uint64_t version = rm._version();
  batch_norm(x, {}, {}, rm, rv, true, 0.5, 0.0);
  test::check_values(rm, {2.25, 3.25});
  test::check_values(rv, {3.25, 9.5});
  CHECK(rm._version() > version);
  // eval: the running statistics normalise and stay as they are.
  Tensor z = batch_norm(x, {}, {}, rm, rv, /*training=*/false, 0.5, 0.0);
  test::check_values(z, {(1 - 2.25) / std::sqrt(3.25), (2 - 3.25) / std::sqrt(9.5), (3 - 2.25) / std::sqrt(3.25),
                         (2 - 3.25) / std::sqrt(9.5), (5 - 2.25) / std::sqrt(3.25), (8 - 3.25) / std::sqrt(9.5)});
  test::check_values(rm, {2.25, 3.25});
}

DEVICE_TEST_CASE("batch_norm updates running statistics that are strided or of another dtype", "[nn][norm]") {
  Tensor x = test::make(values(24), {4, 3, 2}, kFloat32, device);
  Tensor expected_rm = zeros({3}, TensorOptions().device(device)),
         expected_rv = ones({3}, TensorOptions().device(device));
  batch_norm(x, {}, {}, expected_rm, expected_rv, true, 0.1, 1e-5);
  // Every other element of a (6) buffer: updated through a copy, written back.
  Tensor buf_m = zeros({6}, TensorOptions().device(device)), buf_v = ones({6}, TensorOptions().device(device));
  Tensor rm = buf_m.slice(0, 0, 6, 2), rv = buf_v.slice(0, 0, 6, 2);
  REQUIRE_FALSE(rm.is_contiguous());
  batch_norm(x, {}, {}, rm, rv, true, 0.1, 1e-5);
  test::check_close(rm, expected_rm);
  test::check_close(rv, expected_rv);
  test::check_values(buf_m.slice(0, 1, 6, 2), {0, 0, 0});
  // float16 input with float16 running statistics: float32 inside, stored rounded.
  Tensor rm16 = zeros({3}, TensorOptions().device(device).dtype(kFloat16));
  Tensor rv16 = ones({3}, TensorOptions().device(device).dtype(kFloat16));
  batch_norm(x.to(kFloat16), {}, {}, rm16, rv16, true, 0.1, 1e-5);
  CHECK(rm16.dtype() == kFloat16);
  test::check_close(rm16.to(kFloat32), expected_rm, test::Tolerance{1e-2, 1e-3});
  test::check_close(rv16.to(kFloat32), expected_rv, test::Tolerance{1e-2, 1e-3});
}

DEVICE_TEST_CASE("embedding by hand: rows, repeated indices, padding_idx, int32 indices", "[nn][norm]") {
  Tensor w = test::leaf({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}, device);
  Tensor idx = ids({3, 1, 1, 0, 2, 1}, {2, 3}, device, kInt32);
  Tensor out = embedding(w, idx, /*padding_idx=*/1);
  CHECK(out.sizes() == IntArrayRef{2, 3, 2});
  test::check_values(out, {30, 31, 10, 11, 10, 11, 0, 1, 20, 21, 10, 11});
  out.backward(test::make(values(12), {2, 3, 2}, kFloat64, device));
  const std::vector<double> g = values(12);
  test::check_values(w.grad(), {g[6], g[7], 0, 0, g[8], g[9], g[0], g[1]});  // row 1 (padding) gets none
  // Without padding_idx, row 1 sums its three gradient rows.
  Tensor w2 = test::leaf({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}, device);
  embedding(w2, idx).backward(test::make(values(12), {2, 3, 2}, kFloat64, device));
  test::check_values(w2.grad(), {g[6], g[7], g[2] + g[4] + g[10], g[3] + g[5] + g[11], g[8], g[9], g[0], g[1]});
  // Any table dtype can be looked up (a gradient needs a floating one).
  Tensor table = test::make({1, 2, 3, 4, 5, 6}, {3, 2}, kInt64, device);
  Tensor rows = embedding(table, ids({2, 0}, {2}, device));
  CHECK(rows.dtype() == kInt64);
  test::check_values(rows, {5, 6, 1, 2});
  // No indices: a (0, 2) output and a zero gradient.
  Tensor w3 = test::leaf({1, 2, 3, 4}, {2, 2}, device);
  Tensor none = embedding(w3, ids({}, {0}, device));
  CHECK(none.sizes() == IntArrayRef{0, 2});
  none.sum().backward();
  test::check_values(w3.grad(), {0, 0, 0, 0});
}

// ---------------------------------------------------------------- gradcheck

DEVICE_TEST_CASE("gradcheck and gradgradcheck of batch_norm", "[nn][norm][gradcheck]") {
  Tensor x = test::leaf(values(24), {4, 3, 2}, device);
  Tensor w = test::leaf({0.8, 1.3, -0.6}, {3}, device);
  Tensor b = test::leaf({0.1, -0.2, 0.3}, {3}, device);
  // Training: the batch statistics depend on x (no running statistics:
  // gradcheck calls the function many times).
  test::check_gradients(
      [](const std::vector<Tensor>& in) { return batch_norm(in[0], in[1], in[2], {}, {}, true, 0.1, 1e-5); },
      {x, w, b});
  test::check_gradients(
      [](const std::vector<Tensor>& in) { return batch_norm(in[0], {}, {}, {}, {}, true, 0.1, 1e-5); }, {x});
  // Eval: the running statistics are constants.
  Tensor rm = test::make({0.2, -0.1, 0.4}, {3}, kFloat64, device),
         rv = test::make({0.7, 1.5, 2.0}, {3}, kFloat64, device);
  test::check_gradients(
      [&](const std::vector<Tensor>& in) { return batch_norm(in[0], in[1], in[2], rm, rv, false, 0.1, 1e-5); },
      {x, w, b});
  // (N, C) and (N, C, H, W) inputs, the row walk and the per-channel walk.
  Tensor x2 = test::leaf(values(12), {4, 3}, device);
  test::check_gradients(
      [&](const std::vector<Tensor>& in) { return batch_norm(in[0], in[1], in[2], {}, {}, true, 0.1, 1e-5); },
      {x2, w, b});
  Tensor x4 = test::leaf(values(2 * 3 * 4 * 5), {2, 3, 4, 5}, device);
  test::check_gradients(
      [&](const std::vector<Tensor>& in) { return batch_norm(in[0], in[1], in[2], {}, {}, true, 0.1, 1e-5); },
      {x4, w, b});
}

DEVICE_TEST_CASE("gradcheck and gradgradcheck of layer_norm", "[nn][norm][gradcheck]") {
  Tensor x = test::leaf(values(24), {2, 3, 4}, device);
  Tensor w = test::leaf(values(4, 1.0), {4}, device), b = test::leaf(values(4, -0.3), {4}, device);
  test::check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1], in[2]); }, {x, w, b});
  test::check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}); }, {x});
  Tensor w2 = test::leaf(values(12, 1.0), {3, 4}, device), b2 = test::leaf(values(12, 0.2), {3, 4}, device);
  test::check_gradients(
      [](const std::vector<Tensor>& in) {
        return layer_norm(in[0], {3, 4}, in[1], in[2]);
      },
      {x, w2, b2});
  // No leading dims: one row, the weight gradient without a sum.
  Tensor x1 = test::leaf(values(12), {3, 4}, device);
  test::check_gradients(
      [](const std::vector<Tensor>& in) {
        return layer_norm(in[0], {3, 4}, in[1], in[2]);
      },
      {x1, w2, b2});
}

DEVICE_TEST_CASE("gradcheck and gradgradcheck of embedding", "[nn][norm][gradcheck]") {
  Tensor w = test::leaf(values(15), {5, 3}, device);
  Tensor idx = ids({4, 1, 1, 0, 3, 1, 4, 2}, {2, 4}, device);
  test::check_gradients([&](const std::vector<Tensor>& in) { return embedding(in[0], idx); }, {w});
  // padding_idx and scale_grad_by_freq change the gradient on purpose (it is
  // no longer the derivative, here as in PyTorch): only the backward's own
  // derivative is checked.
  for (auto [pad, scale] : {std::pair{std::optional<int64_t>(1), false}, std::pair{std::optional<int64_t>(), true},
                            std::pair{std::optional<int64_t>(-1), true}}) {
    INFO("padding_idx " << pad.value_or(-100) << ", scale_grad_by_freq " << scale);
    auto fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{embedding(in[0], idx, pad, scale)}; };
    CHECK(autograd::gradgradcheck(fn, {w}) == "");
  }
}

DEVICE_TEST_CASE("the fused backward kernels agree with the composite formulas", "[nn][norm][gradcheck]") {
  // create_graph takes the composite path, a plain backward the fused one.
  Tensor x = test::leaf(values(60), {3, 4, 5}, device);
  Tensor w = test::leaf(values(4, 1.0), {4}, device), b = test::leaf(values(4, 0.0), {4}, device);
  Tensor seed = test::make(values(60, -0.2), {3, 4, 5}, kFloat64, device);
  for (bool training : {true, false}) {
    INFO("batch_norm training=" << training);
    Tensor rm = test::make({0.1, 0.2, 0.3, 0.4}, {4}, kFloat64, device);
    Tensor rv = test::make({1.1, 1.2, 1.3, 1.4}, {4}, kFloat64, device);
    Tensor y = batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5);
    auto fused = autograd::grad({y}, {x, w, b}, {seed}, true);
    auto composite = autograd::grad({y}, {x, w, b}, {seed}, true, /*create_graph=*/true);
    for (size_t k = 0; k < 3; ++k) test::check_close(fused[k], composite[k].detach());
  }
  Tensor wl = test::leaf(values(5, 1.0), {5}, device), bl = test::leaf(values(5, 0.0), {5}, device);
  Tensor y = layer_norm(x, {5}, wl, bl);
  auto fused = autograd::grad({y}, {x, wl, bl}, {seed}, true);
  auto composite = autograd::grad({y}, {x, wl, bl}, {seed}, true, true);
  for (size_t k = 0; k < 3; ++k) test::check_close(fused[k], composite[k].detach());
  Tensor we = test::leaf(values(12), {6, 2}, device);
  Tensor idx = ids({5, 0, 5, 2, 5, 1}, {3, 2}, device);
  Tensor e = embedding(we, idx, 0, true);
  Tensor eseed = test::make(values(12), {3, 2, 2}, kFloat64, device);
  test::check_close(autograd::grad({e}, {we}, {eseed}, true)[0],
                    autograd::grad({e}, {we}, {eseed}, true, true)[0].detach());
}

// ---------------------------------------------------------------- sizes, threads, dtypes

DEVICE_TEST_CASE("large inputs: both batch-norm walks, row blocks and threads against the formula", "[nn][norm]") {
  // (20000, 3): rows of 3, several row blocks. (16, 4, 700): planes of 700,
  // channels split across threads. (9, 5, 7): short planes.
  for (Shape shape : {Shape{20000, 3}, Shape{16, 4, 700}, Shape{9, 5, 7}, Shape{2, 3, 40, 45}}) {
    INFO("shape " << shape_str(shape));
    const int64_t C = shape[1];
    Tensor x64 = (randn(shape, TensorOptions().dtype(kFloat64)) * 3 + 5).to(device);
    Tensor w = test::make(values(C, 1.0), {C}, kFloat64, device), b = test::make(values(C, 0.0), {C}, kFloat64, device);
    Tensor expected = batch_norm_composite(x64, w, b, 1e-5);
    for (Dtype dtype : {kFloat64, kFloat32}) {
      INFO(dtype);
      Tensor x = x64.to(dtype).requires_grad_();
      Tensor y = batch_norm(x, w.to(dtype), b.to(dtype), {}, {}, true, 0.1, 1e-5);
      test::check_close(y, expected, tolerance_for(dtype));
      // grad_input of sum(y * seed) against the composite formula (create_graph).
      Tensor seed = randn(shape, TensorOptions().dtype(dtype).device(device));
      Tensor fused = autograd::grad({y}, {x}, {seed}, true)[0];
      Tensor composite = autograd::grad({y}, {x}, {seed}, true, true)[0].detach();
      test::check_close(fused, composite,
                        dtype == kFloat64 ? test::Tolerance{1e-9, 1e-10} : test::Tolerance{1e-3, 1e-4});
    }
  }
}

DEVICE_TEST_CASE("large layer norms: row blocks of the weight gradient against the formula", "[nn][norm]") {
  Tensor x64 = (randn({1500, 70}, TensorOptions().dtype(kFloat64)) * 2 - 1).to(device);
  Tensor w64 = test::make(values(70, 1.0), {70}, kFloat64, device),
         b64 = test::make(values(70), {70}, kFloat64, device);
  Tensor seed64 = randn({1500, 70}, TensorOptions().dtype(kFloat64)).to(device);
  Tensor mean = x64.mean({1}, true);
  Tensor expected = (x64 - mean) * ((x64 - mean).pow(2).mean({1}, true) + 1e-5).rsqrt() * w64 + b64;
  for (Dtype dtype : {kFloat64, kFloat32}) {
    INFO(dtype);
    Tensor x = x64.to(dtype).requires_grad_(), w = w64.to(dtype).requires_grad_(), b = b64.to(dtype).requires_grad_();
    Tensor y = layer_norm(x, {70}, w, b);
    test::check_close(y, expected, tolerance_for(dtype));
    auto fused = autograd::grad({y}, {x, w, b}, {seed64.to(dtype)}, true);
    auto composite = autograd::grad({y}, {x, w, b}, {seed64.to(dtype)}, true, true);
    for (size_t k = 0; k < 3; ++k)
      test::check_close(fused[k], composite[k].detach(),
                        dtype == kFloat64 ? test::Tolerance{1e-9, 1e-10} : test::Tolerance{1e-3, 1e-3});
  }
}

// ---------------------------------------------------------------- the CUDA launch plans

namespace {

// Runs the grid of a channel-sums plan as kernels/cuda/norm.cu launches it,
// writing nothing: each block's partial-sum indices (planes: c * S + s;
// bands: j * S + s for the slots j < C * L of its 32 lanes). Every index
// must fall in [0, plan.partials), among its own channel's parts (where the
// fold reads it), and be written once; and every one must be written, since
// plan.partials is what the launcher allocates.
void check_partials_written(const Nchw& s, const cuda::ChannelSumsPlan& plan) {
  INFO("N " << s.N << ", C " << s.C << ", L " << s.L << (plan.planes ? ": planes" : ": bands") << ", grid ("
            << plan.grid_x << ", " << plan.splits << "), parts " << plan.parts);
  REQUIRE(plan.partials == s.C * plan.parts);
  REQUIRE(plan.grid_x <= INT32_MAX);
  REQUIRE(plan.splits >= 1);
  REQUIRE(plan.splits <= std::min<int64_t>(cuda::kNormMaxGridY, s.N));
  std::vector<uint8_t> writes(static_cast<size_t>(plan.partials), 0);
  int64_t outside = 0, foreign = 0;
  auto write = [&](int64_t index, int64_t channel) {
    if (index < 0 || index >= plan.partials) {
      ++outside;
      return;
    }
    if (index / plan.parts != channel) ++foreign;
    ++writes[static_cast<size_t>(index)];
  };
  const int64_t S = plan.splits;
  for (int64_t x = 0; x < plan.grid_x; ++x)
    for (int64_t y = 0; y < S; ++y) {
      if (plan.planes) {
        write(x * S + y, x);
        continue;
      }
      for (int64_t lane = 0; lane < cuda::kNormBandX; ++lane) {
        const int64_t j = x * cuda::kNormBandX + lane;
        if (j < s.C * s.L) write(j * S + y, j / s.L);
      }
    }
  CHECK(outside == 0);
  CHECK(foreign == 0);
  CHECK(std::count(writes.begin(), writes.end(), uint8_t{1}) == plan.partials);
}

}  // namespace

TEST_CASE("the CUDA batch-norm plan allocates exactly the partial sums its kernels write", "[nn][norm][plan]") {
  const int64_t sms = 132;  // an H200
  // (32, 256, 20) float32: planes of 20, so bands of 32 slots of the 5120 of
  // a row; 160 bands fill the GPU, one split: 5120 pairs of floats, 40 KiB
  // (the earlier bound reserved 5120 * 8 * 132 pairs, 43 MB).
  const cuda::ChannelSumsPlan bands = cuda::channel_sums_plan({32, 256, 20}, sms);
  CHECK_FALSE(bands.planes);
  CHECK(bands.grid_x == 160);
  CHECK(bands.splits == 1);
  CHECK(bands.partials == 5120);
  CHECK(bands.partials * 2 * sizeof(float) == 40960);
  // 70000 channels of 1000 values: the plane kernel (channels on grid x,
  // so past grid y's 65535), one part each, 70000 pairs: 560 kB in float32
  // (the earlier bound, on the bands path, 70000 * 1000 * 8 * 132 pairs:
  // 591 GB).
  const cuda::ChannelSumsPlan wide = cuda::channel_sums_plan({2, 70000, 1000}, sms);
  CHECK(wide.planes);
  CHECK(wide.grid_x == 70000);
  CHECK(wide.splits == 1);
  CHECK(wide.partials == 70000);
  CHECK(wide.partials * 2 * sizeof(float) == 560000);
  // Tall inputs split their rows: (4096, 64) takes 2 bands of 32 slots,
  // min(ceil(8 * 132 / 2), ceil(4096 / 128)) = 32 splits; (256, 16, 1024)
  // min(ceil(256 * 1024 / 4096), ceil(4 * 132 / 16)) = 33.
  const cuda::ChannelSumsPlan tall = cuda::channel_sums_plan({4096, 64, 1}, sms);
  CHECK_FALSE(tall.planes);
  CHECK(tall.grid_x == 2);
  CHECK(tall.splits == 32);
  CHECK(tall.partials == 64 * 32);
  const cuda::ChannelSumsPlan deep = cuda::channel_sums_plan({256, 16, 1024}, sms);
  CHECK(deep.planes);
  CHECK(deep.splits == 33);
  CHECK(deep.partials == 16 * 33);
  // Many channels of short planes: one split, a row's worth of slots.
  const cuda::ChannelSumsPlan many = cuda::channel_sums_plan({8, 70000, 20}, sms);
  CHECK_FALSE(many.planes);
  CHECK(many.splits == 1);
  CHECK(many.partials == 70000 * 20);

  for (const Nchw& s : {Nchw{32, 256, 20}, Nchw{2, 70000, 1000}, Nchw{4096, 64, 1}, Nchw{256, 16, 1024},
                        Nchw{8, 70000, 20}, Nchw{1, 1, 1}, Nchw{1, 3, 31}, Nchw{2, 3, 32}, Nchw{100000, 3, 1},
                        Nchw{5000, 7, 9}, Nchw{3, 70000, 33}, Nchw{1000, 1, 1000}, Nchw{2, 200000, 1}})
    for (int64_t cores : {int64_t{1}, int64_t{132}}) check_partials_written(s, cuda::channel_sums_plan(s, cores));
  // Both see an input the same way: (N, C, *) with L the product of the rest.
  const Nchw s = nchw_of({4, 3, 5, 7});
  CHECK(s.N == 4);
  CHECK(s.C == 3);
  CHECK(s.L == 35);
  CHECK(nchw_of({6, 2}).L == 1);
  CHECK(nchw_of({0, 2, 5}).L == 0);
}

TEST_CASE("the CUDA layer-norm plan splits the rows of its column sums", "[nn][norm][plan]") {
  // 4096 rows of 1024: 32 bands; min(ceil(8 * 132 / 32), ceil(4096 / 128)) = 32.
  CHECK(cuda::layer_norm_param_splits(4096, 1024, 132) == 32);
  CHECK(cuda::layer_norm_param_splits(4096, 100000, 132) == 1);  // bands enough
  CHECK(cuda::layer_norm_param_splits(100, 8, 132) == 1);        // too few rows to split
  CHECK(cuda::layer_norm_param_splits(0, 8, 132) == 1);          // no rows: the sums are zeros
  CHECK(cuda::layer_norm_param_splits(int64_t{1} << 40, 1, 132) == 1056);
  CHECK(cuda::band_splits(1, int64_t{1} << 40, 100000) == cuda::kNormMaxGridY);
}

TEST_CASE("the cpu kernels give the same bits on one thread and on several", "[nn][norm]") {
  Tensor x = randn({3000, 40}, TensorOptions().dtype(kFloat32)).requires_grad_();
  Tensor w = randn({40}).requires_grad_(), b = randn({40}).requires_grad_();
  Tensor xb = randn({5000, 7}, TensorOptions().dtype(kFloat32)).requires_grad_();
  Tensor table = randn({50, 16}).requires_grad_();
  Tensor idx = randint(50, {4000});
  auto run = [&] {
    Tensor y = layer_norm(x, {40}, w, b);
    Tensor z = batch_norm(xb, {}, {}, {}, {}, true, 0.1, 1e-5);
    Tensor e = embedding(table, idx);
    std::vector<Tensor> out{y, z, e};
    for (const Tensor& g : autograd::grad({y.sum(), z.pow(2).sum(), e.pow(2).sum()}, {x, w, b, xb, table}))
      out.push_back(g);
    return out;
  };
  std::vector<Tensor> one, many;
  {
    Threads threads(1);
    one = run();
  }
  {
    Threads threads(4);
    many = run();
  }
  for (size_t k = 0; k < one.size(); ++k) {
    INFO("result " << k);
    test::check_equal(many[k], one[k]);
  }
}

TEST_CASE("the cpu kernels write every element of their outputs", "[nn][norm]") {
  // Outputs poisoned with NaN; every input finite, so a NaN left is an element not written.
  const double nan = std::nan("");
  auto poisoned = [&](IntArrayRef shape, Dtype dtype = kFloat32) { return full(shape, nan, TensorOptions(dtype)); };
  auto unwritten = [](const Tensor& t) { return t.ne(t).sum().item<int64_t>(); };
  for (Shape shape : {Shape{64, 5}, Shape{6, 3, 40}, Shape{20000, 3}, Shape{16, 4, 700}}) {
    INFO("batch norm of " << shape_str(shape));
    const int64_t C = shape[1];
    Tensor x = randn(shape), g = randn(shape), w = randn({C}), b = randn({C});
    Tensor rm = zeros({C}), rv = ones({C});
    for (bool training : {true, false}) {
      Tensor out = poisoned(shape), mean = poisoned({C}), invstd = poisoned({C});
      cpu::batch_norm(out, mean, invstd, x, w, b, rm, rv, training, 0.1, 1e-5);
      CHECK(unwritten(out) + unwritten(mean) + unwritten(invstd) == 0);
      Tensor gx = poisoned(shape), gw = poisoned({C}), gb = poisoned({C});
      cpu::batch_norm_backward(gx, gw, gb, g, x, w, mean, invstd, training);
      CHECK(unwritten(gx) + unwritten(gw) + unwritten(gb) == 0);
    }
  }
  for (Shape shape : {Shape{7, 5}, Shape{1500, 70}}) {
    INFO("layer norm of " << shape_str(shape));
    const int64_t rows = shape[0], D = shape[1];
    Tensor x = randn(shape), g = randn(shape), w = randn({D}), b = randn({D});
    Tensor out = poisoned(shape), mean = poisoned({rows}), invstd = poisoned({rows});
    cpu::layer_norm(out, mean, invstd, x, w, b, 1e-5);
    CHECK(unwritten(out) + unwritten(mean) + unwritten(invstd) == 0);
    Tensor gx = poisoned(shape), gw = poisoned({D}), gb = poisoned({D});
    cpu::layer_norm_backward(gx, gw, gb, g, x, w, mean, invstd);
    CHECK(unwritten(gx) + unwritten(gw) + unwritten(gb) == 0);
  }
  Tensor table = randn({9, 4}), idx = randint(9, {30});
  Tensor rows = poisoned({30, 4});
  cpu::embedding(rows, table, idx);
  CHECK(unwritten(rows) == 0);
  Tensor grad_table = poisoned({9, 4});
  cpu::embedding_backward(grad_table, randn({30, 4}), idx, 2, true);
  CHECK(unwritten(grad_table) == 0);
}

DEVICE_TEST_CASE("float16 and bfloat16 inputs compute in float32", "[nn][norm]") {
  Tensor w = test::make({0.5, 1.5, -1}, {3}, kFloat32, device), b = test::make({0.1, 0.2, 0.3}, {3}, kFloat32, device);
  Tensor wl = test::make(values(4, 1.0), {4}, kFloat32, device), bl = test::make(values(4), {4}, kFloat32, device);
  Tensor seed32 = test::make(values(48, 0.1), {4, 3, 4}, kFloat32, device);
  for (Dtype dtype : {kFloat16, kBFloat16}) {
    INFO(dtype);
    const test::Tolerance tol = test::tolerance(dtype);
    // The 16-bit values exactly, in float32: the reference computes on those.
    Tensor x = test::make(values(48), {4, 3, 4}, kFloat32, device).to(dtype).requires_grad_();
    Tensor x_ref = x.detach().to(kFloat32).requires_grad_();
    Tensor seed = seed32.to(dtype);
    // batch_norm with float32 parameters, and with 16-bit ones.
    Tensor expected = batch_norm(x_ref, w, b, {}, {}, true, 0.1, 1e-5);
    Tensor expected_grad = autograd::grad({expected}, {x_ref}, {seed.to(kFloat32)})[0];
    for (bool half_params : {false, true}) {
      INFO("16-bit parameters: " << half_params);
      Tensor y = batch_norm(x, half_params ? w.to(dtype) : w, half_params ? b.to(dtype) : b, {}, {}, true, 0.1, 1e-5);
      CHECK(y.dtype() == dtype);
      test::check_close(y.to(kFloat32), expected, tol);
      Tensor gx = autograd::grad({y}, {x}, {seed})[0];
      CHECK(gx.dtype() == dtype);
      test::check_close(gx.to(kFloat32), expected_grad, test::Tolerance{tol.rtol, 4 * tol.atol});
    }
    // layer_norm, and its weight gradient in the weight's dtype.
    Tensor wl_leaf = wl.clone().requires_grad_();
    Tensor y = layer_norm(x, {4}, wl_leaf, bl);
    CHECK(y.dtype() == dtype);
    Tensor expected_ln = layer_norm(x_ref, {4}, wl, bl);
    test::check_close(y.to(kFloat32), expected_ln, tol);
    auto grads = autograd::grad({y}, {x, wl_leaf}, {seed});
    CHECK(grads[1].dtype() == kFloat32);
    Tensor wl_ref = wl.clone().requires_grad_();
    auto ref = autograd::grad({layer_norm(x_ref, {4}, wl_ref, bl)}, {x_ref, wl_ref}, {seed.to(kFloat32)});
    test::check_close(grads[0].to(kFloat32), ref[0], test::Tolerance{tol.rtol, 4 * tol.atol});
    test::check_close(grads[1], ref[1], test::Tolerance{tol.rtol, 4 * tol.atol});
    // embedding: the rows exactly; the gradient rows summed.
    Tensor table = test::make(values(12), {4, 3}, kFloat32, device).to(dtype).requires_grad_();
    Tensor e = embedding(table, ids({2, 0, 2}, {3}, device));
    test::check_equal(e.detach(), table.detach().index_select(0, ids({2, 0, 2}, {3}, device)));
    e.backward(ones({3, 3}, TensorOptions().device(device).dtype(dtype)));
    test::check_values(table.grad(), {1, 1, 1, 0, 0, 0, 2, 2, 2, 0, 0, 0});
  }
}

DEVICE_TEST_CASE("empty inputs: empty outputs, zero parameter gradients, running statistics kept", "[nn][norm]") {
  const TensorOptions f64 = TensorOptions().dtype(kFloat64).device(device);
  for (Shape shape : {Shape{0, 3}, Shape{2, 3, 0}, Shape{0, 3, 4, 4}}) {
    INFO("batch_norm of " << shape_str(shape));
    Tensor x = zeros(shape, f64).requires_grad_();
    Tensor w = test::leaf({1, 2, 3}, {3}, device), b = test::leaf({0, 0, 0}, {3}, device);
    Tensor rm = test::make({1, 2, 3}, {3}, kFloat64, device), rv = test::make({4, 5, 6}, {3}, kFloat64, device);
    Tensor y = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    CHECK(y.sizes() == IntArrayRef(shape));
    test::check_values(rm, {1, 2, 3});
    test::check_values(rv, {4, 5, 6});
    auto g = autograd::grad({y.sum()}, {x, w, b});
    CHECK(g[0].sizes() == IntArrayRef(shape));
    test::check_values(g[1], {0, 0, 0});
    test::check_values(g[2], {0, 0, 0});
  }
  Tensor x = zeros({0, 4}, f64).requires_grad_();
  Tensor w = test::leaf({1, 2, 3, 4}, {4}, device);
  Tensor y = layer_norm(x, {4}, w);
  CHECK(y.sizes() == IntArrayRef{0, 4});
  auto g = autograd::grad({y.sum()}, {x, w});
  CHECK(g[0].sizes() == IntArrayRef{0, 4});
  test::check_values(g[1], {0, 0, 0, 0});
}

// ---------------------------------------------------------------- errors

DEVICE_TEST_CASE("batch_norm's errors, in PyTorch's words", "[nn][norm][errors]") {
  const TensorOptions opts = TensorOptions().device(device);
  Tensor x = test::make(values(12), {4, 3}, kFloat32, device);
  Tensor c3 = ones({3}, opts), c4 = ones({4}, opts);
  REQUIRE_THROWS_AS(batch_norm(ones({3}, opts), {}, {}, {}, {}, true), ShapeError);
  REQUIRE_THROWS_WITH(batch_norm(ones({3}, opts), {}, {}, {}, {}, true),
                      Contains("batch_norm(): expected an input of shape (N, C) or (N, C, *), but got a 1-D input of "
                               "shape [3]; add the batch dim, e.g. input.unsqueeze(0)"));
  REQUIRE_THROWS_AS(batch_norm(ones({4, 3}, TensorOptions().dtype(kInt64).device(device)), {}, {}, {}, {}, true),
                    DtypeError);
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}, TensorOptions().dtype(kInt64).device(device)), {}, {}, {}, {}, true),
                      Contains("\"batch_norm\" not implemented for 'Long': batch_norm() needs a floating input"));
  REQUIRE_THROWS_AS(batch_norm(x, {}, {}, c4, c3, true), ShapeError);
  REQUIRE_THROWS_WITH(batch_norm(x, {}, {}, c4, c3, true),
                      Contains("running_mean should contain 3 elements not 4 (batch_norm: one per channel, the input's "
                               "size(1); input shape [4, 3])"));
  REQUIRE_THROWS_WITH(batch_norm(x, {}, {}, c3, c4, true), Contains("running_var should contain 3 elements not 4"));
  REQUIRE_THROWS_WITH(batch_norm(x, c4, {}, {}, {}, true), Contains("weight should contain 3 elements not 4"));
  REQUIRE_THROWS_WITH(batch_norm(x, {}, ones({2}, opts), {}, {}, true),
                      Contains("bias should contain 3 elements not 2"));
  Tensor w64 = ones({3}, TensorOptions().dtype(kFloat64).device(device));
  REQUIRE_THROWS_AS(batch_norm(x, w64, {}, {}, {}, true), DtypeError);
  REQUIRE_THROWS_WITH(batch_norm(x, w64, {}, {}, {}, true),
                      Contains("batch_norm(): expected weight to have the input's dtype float32, but got float64; "
                               "convert one of them, e.g. input.to(float64) or, for a module, module->to(float32)"));
  REQUIRE_THROWS_WITH(
      batch_norm(x.to(kFloat16), {}, {}, w64, c3.to(kFloat16), true),
      Contains("expected running_mean to have the input's dtype float16 (or float32), but got float64"));
  REQUIRE_THROWS_AS(batch_norm(x, {}, {}, {}, c3, false), ValueError);
  REQUIRE_THROWS_WITH(batch_norm(x, {}, {}, {}, c3, false),
                      Contains("running_mean must be defined in evaluation mode"));
  REQUIRE_THROWS_WITH(batch_norm(x, {}, {}, c3, {}, false), Contains("running_var must be defined in evaluation mode"));
  for (Shape shape : {Shape{1, 3}, Shape{1, 3, 1}}) {
    REQUIRE_THROWS_AS(batch_norm(ones(shape, opts), {}, {}, {}, {}, true), ValueError);
    REQUIRE_THROWS_WITH(batch_norm(ones(shape, opts), {}, {}, {}, {}, true),
                        Contains("Expected more than 1 value per channel when training, got input size " +
                                 shape_str(shape) + " (the variance of one value is undefined"));
  }
  CHECK_NOTHROW(batch_norm(ones({1, 3}, opts), {}, {}, c3, c3, false));  // eval needs no batch
  REQUIRE_THROWS_WITH(batch_norm(Tensor(), {}, {}, {}, {}, true),
                      Contains("batch_norm: argument 'input' is an undefined tensor"));
  auto other = test::other_device(device);
  if (!other) return;
  Tensor x_other = x.to(*other);
  REQUIRE_THROWS_AS(batch_norm(x_other, c3, c3, {}, {}, true), DeviceError);
  REQUIRE_THROWS_WITH(
      batch_norm(x_other, c3, c3, {}, {}, true),
      Contains("Expected all tensors to be on the same device, but found at least two devices, " + device.str() +
               " and " + other->str() + "! (when checking argument 'input' of batch_norm)"));
  REQUIRE_THROWS_WITH(batch_norm(x_other, c3, c3, {}, {}, true), Contains("input = input.to(weight.device())"));
  REQUIRE_THROWS_WITH(batch_norm(x, c3, {}, c3.to(*other), c3, true),
                      Contains("(when checking argument 'running_mean' of batch_norm)"));
}

DEVICE_TEST_CASE("the fused backward ops check their arguments", "[nn][norm][errors]") {
  const TensorOptions opts = TensorOptions().device(device);
  Tensor x = test::make(values(12), {4, 3}, kFloat32, device);
  Tensor mean = zeros({3}, opts), invstd = ones({3}, opts);
  const std::array<bool, 3> all{true, true, true};
  REQUIRE_THROWS_AS(detail::batch_norm_backward(ones({4, 2}, opts), x, {}, mean, invstd, true, all), ShapeError);
  REQUIRE_THROWS_WITH(detail::batch_norm_backward(ones({4, 2}, opts), x, {}, mean, invstd, true, all),
                      Contains("batch_norm_backward(): expected grad_out of the input's shape [4, 3], but got [4, 2]"));
  REQUIRE_THROWS_WITH(detail::batch_norm_backward(x.to(kFloat64), x, {}, mean, invstd, true, all),
                      Contains("batch_norm_backward(): expected grad_out of the input's dtype float32, but got "
                               "float64; convert it first, e.g. grad_out.to(input.dtype())"));
  REQUIRE_THROWS_WITH(detail::batch_norm_backward(x, x, {}, zeros({2}, opts), invstd, true, all),
                      Contains("batch_norm_backward(): expected mean of 3 values of dtype float32 (the forward's "
                               "statistics), but got shape [2] of dtype float32"));
  REQUIRE_THROWS_WITH(detail::batch_norm_backward(x, x, {}, mean, invstd.to(kFloat64), true, all),
                      Contains("expected invstd of 3 values of dtype float32"));
  REQUIRE_THROWS_WITH(detail::batch_norm_backward(x, ones({3}, opts), {}, mean, invstd, true, all),
                      Contains("batch_norm_backward(): expected an input of shape (N, C, *), but got [3]"));
  Tensor xg = x.clone().requires_grad_();
  REQUIRE_THROWS_AS(detail::batch_norm_backward(x, xg, {}, mean, invstd, true, all), ValueError);
  REQUIRE_THROWS_WITH(detail::batch_norm_backward(x, xg, {}, mean, invstd, true, all),
                      Contains("batch_norm_backward(): records no graph, but grad mode is on and input requires grad; "
                               "call it inside a NoGradGuard, or differentiate batch_norm itself"));
  {
    NoGradGuard no_grad;
    CHECK_NOTHROW(detail::batch_norm_backward(x, xg, {}, mean, invstd, true, all));
  }
  Tensor rows_mean = zeros({4}, opts), rows_invstd = ones({4}, opts);
  REQUIRE_THROWS_WITH(
      detail::layer_norm_backward(x, x, {2}, {}, rows_mean, rows_invstd, all),
      Contains("Given normalized_shape=[2], expected input with shape [*, 2], but got input of size[4, 3]"));
  REQUIRE_THROWS_WITH(detail::layer_norm_backward(ones({4, 2}, opts), x, {3}, {}, rows_mean, rows_invstd, all),
                      Contains("layer_norm_backward(): expected grad_out of the input's shape [4, 3], but got [4, 2]"));
  REQUIRE_THROWS_WITH(detail::layer_norm_backward(x.to(kFloat64), x, {3}, {}, rows_mean, rows_invstd, all),
                      Contains("layer_norm_backward(): expected grad_out of the input's dtype float32"));
  REQUIRE_THROWS_WITH(detail::layer_norm_backward(x, x, {3}, {}, mean, rows_invstd, all),
                      Contains("layer_norm_backward(): expected mean of 4 values (one per row) of dtype float32 (the "
                               "forward's statistics), but got shape [3] of dtype float32"));
  REQUIRE_THROWS_WITH(detail::layer_norm_backward(x, xg, {3}, {}, rows_mean, rows_invstd, all),
                      Contains("layer_norm_backward(): records no graph, but grad mode is on and input requires grad"));
  Tensor idx = ids({1, 2}, {2}, device);
  REQUIRE_THROWS_AS(detail::embedding_backward(ones({3, 4}, opts), idx, 5, std::nullopt, false), ShapeError);
  REQUIRE_THROWS_WITH(detail::embedding_backward(ones({3, 4}, opts), idx, 5, std::nullopt, false),
                      Contains("embedding_backward(): expected grad_out of shape (indices' shape..., embedding_dim), "
                               "the indices having shape [2], but got [3, 4]"));
  REQUIRE_THROWS_WITH(detail::embedding_backward(ones({2, 4}, opts), idx, 5, 5, false),
                      Contains("embedding_backward(): padding_idx must be in [0, num_weights = 5), got 5"));
  REQUIRE_THROWS_WITH(detail::embedding_backward(ones({2, 4}, opts), idx, -1, std::nullopt, false),
                      Contains("embedding_backward(): num_weights must be non-negative, got -1"));
  REQUIRE_THROWS_WITH(detail::embedding_backward(ones({2, 4}, TensorOptions().dtype(kInt64).device(device)), idx, 5,
                                                 std::nullopt, false),
                      Contains("embedding_backward(): expected a floating grad_out, but got int64"));
  REQUIRE_THROWS_WITH(
      detail::embedding_backward(ones({2, 4}, opts).requires_grad_(), idx, 5, std::nullopt, false),
      Contains("embedding_backward(): records no graph, but grad mode is on and grad_out requires grad"));
  REQUIRE_THROWS_WITH(
      detail::embedding_backward(ones({2, 4}, opts), idx.to(kFloat32), 5, std::nullopt, false),
      Contains("'indices' to have one of the following scalar types: Long, Int; but got float32 instead "
               "(while checking arguments for embedding_backward)"));
}

DEVICE_TEST_CASE("layer_norm's errors, in PyTorch's words", "[nn][norm][errors]") {
  const TensorOptions opts = TensorOptions().device(device);
  Tensor x = test::make(values(12), {4, 3}, kFloat32, device);
  REQUIRE_THROWS_AS(layer_norm(x, IntArrayRef{}), ShapeError);
  REQUIRE_THROWS_WITH(layer_norm(x, IntArrayRef{}),
                      Contains("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                               "element, but got normalized_shape = []"));
  REQUIRE_THROWS_AS(layer_norm(x, {5}), ShapeError);
  REQUIRE_THROWS_WITH(layer_norm(x, {5}), Contains("Given normalized_shape=[5], expected input with shape [*, 5], but "
                                                   "got input of size[4, 3] (layer_norm normalises over the input's "
                                                   "last 1 dims)"));
  REQUIRE_THROWS_WITH(layer_norm(ones({2, 3, 4}, opts), {2, 4}),
                      Contains("Given normalized_shape=[2, 4], expected input with shape [*, 2, 4], but got input of "
                               "size[2, 3, 4]"));
  REQUIRE_THROWS_WITH(layer_norm(x, {2, 4, 3}), Contains("Given normalized_shape=[2, 4, 3]"));
  REQUIRE_THROWS_WITH(layer_norm(x, {3}, ones({4}, opts)),
                      Contains("Expected weight to be of same shape as normalized_shape, but got weight of shape [4] "
                               "and normalized_shape = [3]"));
  REQUIRE_THROWS_WITH(
      layer_norm(x, {3}, {}, ones({1, 3}, opts)),
      Contains("Expected bias to be of same shape as normalized_shape, but got bias of shape [1, 3] and "
               "normalized_shape = [3]"));
  REQUIRE_THROWS_AS(layer_norm(x.to(kInt64), {3}), DtypeError);
  REQUIRE_THROWS_WITH(layer_norm(x.to(kInt64), {3}), Contains("\"LayerNormKernelImpl\" not implemented for 'Long'"));
  REQUIRE_THROWS_WITH(layer_norm(x, {3}, ones({3}, TensorOptions().dtype(kFloat64).device(device))),
                      Contains("layer_norm(): expected weight to have the input's dtype float32, but got float64"));
  auto other = test::other_device(device);
  if (!other) return;
  REQUIRE_THROWS_WITH(layer_norm(x.to(*other), {3}, ones({3}, opts)),
                      Contains("! (when checking argument 'input' of layer_norm)"));
}

DEVICE_TEST_CASE("embedding's errors: indices out of range on every device", "[nn][norm][errors]") {
  const TensorOptions opts = TensorOptions().device(device);
  Tensor w = test::make(values(30), {10, 3}, kFloat32, device);
  for (Dtype index_dtype : {kInt64, kInt32}) {
    INFO(index_dtype);
    // On a cuda device the error comes at the next wait (waited()).
    REQUIRE_THROWS_AS(waited(embedding(w, ids({1, 10, 2}, {3}, device, index_dtype))), IndexError);
    REQUIRE_THROWS_WITH(waited(embedding(w, ids({1, 10, 2}, {3}, device, index_dtype))),
                        Contains("index out of range in self (index 10 of a table of 10 rows, num_embeddings; valid "
                                 "indices are 0 to 9)"));
    REQUIRE_THROWS_WITH(waited(embedding(w, ids({1, 2, -1, 0}, {2, 2}, device, index_dtype))),
                        Contains("index out of range in self (index -1 of a table of 10 rows"));
  }
  REQUIRE_THROWS_AS(embedding(w, ids({1}, {1}, device, kFloat32)), DtypeError);
  REQUIRE_THROWS_WITH(embedding(w, ids({1}, {1}, device, kFloat32)),
                      Contains("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                               "Long, Int; but got float32 instead (while checking arguments for embedding); convert "
                               "the indices first, e.g. indices.to(kInt64)"));
  REQUIRE_THROWS_AS(embedding(ones({10}, opts), ids({1}, {1}, device)), ShapeError);
  REQUIRE_THROWS_WITH(embedding(ones({10}, opts), ids({1}, {1}, device)),
                      Contains("'weight' must be 2-D (num_embeddings, embedding_dim), but got shape [10]"));
  for (int64_t bad : {10, -11}) {
    REQUIRE_THROWS_AS(embedding(w, ids({1}, {1}, device), bad), ValueError);
    REQUIRE_THROWS_WITH(embedding(w, ids({1}, {1}, device), bad),
                        Contains("Padding_idx must be within num_embeddings (padding_idx " + std::to_string(bad) +
                                 " with num_embeddings 10; valid: -10 to 9)"));
  }
  REQUIRE_THROWS_AS(F::embedding(ids({1}, {1}, device), w, F::EmbeddingFuncOptions().sparse(true)),
                    NotImplementedError);
  REQUIRE_THROWS_WITH(F::embedding(ids({1}, {1}, device), w, F::EmbeddingFuncOptions().sparse(true)),
                      Contains("embedding: sparse gradients (sparse=true) are not supported"));
  // max_norm rescales in place: a bad index is reported before anything changes.
  Tensor before = w.clone();
  REQUIRE_THROWS_AS(F::embedding(ids({0, 12}, {2}, device), w, F::EmbeddingFuncOptions().max_norm(0.1)), IndexError);
  REQUIRE_THROWS_WITH(F::embedding(ids({0, 12}, {2}, device), w, F::EmbeddingFuncOptions().max_norm(0.1)),
                      Contains("index out of range in self (index 12 of a table of 10 rows"));
  REQUIRE_THROWS_WITH(F::embedding(ids({0, -3}, {2}, device), w, F::EmbeddingFuncOptions().max_norm(0.1)),
                      Contains("index out of range in self (index -3 of a table of 10 rows"));
  test::check_equal(w, before);
  REQUIRE_THROWS_WITH(F::embedding(ids({0}, {1}, device), w.to(kInt64), F::EmbeddingFuncOptions().max_norm(0.1)),
                      Contains("embedding: max_norm needs a floating weight, but got int64"));
  REQUIRE_THROWS_WITH(F::embedding(ids({0}, {1}, device, kFloat64), w, F::EmbeddingFuncOptions().max_norm(0.1)),
                      Contains("but got float64 instead (while checking arguments for embedding)"));
  REQUIRE_THROWS_WITH(F::embedding(ids({0}, {1}, device), ones({3}, opts), F::EmbeddingFuncOptions().max_norm(0.1)),
                      Contains("'weight' must be 2-D"));
  auto other = test::other_device(device);
  if (!other) return;
  REQUIRE_THROWS_AS(embedding(w, ids({1}, {1}, *other)), DeviceError);
  REQUIRE_THROWS_WITH(embedding(w, ids({1}, {1}, *other)),
                      Contains("! (when checking argument 'indices' of embedding)"));
  REQUIRE_THROWS_WITH(embedding(w, ids({1}, {1}, *other)), Contains("indices = indices.to(weight.device())"));
  REQUIRE_THROWS_WITH(F::embedding(ids({1}, {1}, *other), w, F::EmbeddingFuncOptions().max_norm(1.0)),
                      Contains("! (when checking argument 'input' of embedding)"));
}

DEVICE_TEST_CASE("embedding_backward checks its indices: at once on the cpu, at the next wait on a cuda device",
                 "[nn][norm][errors]") {
  const TensorOptions opts = TensorOptions().device(device);
  Tensor g = test::make({0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5}, {3, 4}, kFloat32, device);
  for (Dtype index_dtype : {kInt64, kInt32})
    for (bool by_freq : {false, true}) {
      INFO(index_dtype << (by_freq ? ", scale_grad_by_freq" : ""));
      REQUIRE_THROWS_AS(
          waited(detail::embedding_backward(g, ids({0, 5, 2}, {3}, device, index_dtype), 5, std::nullopt, by_freq)),
          IndexError);
      REQUIRE_THROWS_WITH(
          waited(detail::embedding_backward(g, ids({0, 5, 2}, {3}, device, index_dtype), 5, std::nullopt, by_freq)),
          Contains("embedding_backward(): index out of range in self (index 5 of a table of 5 rows, num_weights; "
                   "valid indices are 0 to 4; pass the num_weights of the forward's table)"));
      // Two bad indices: the first on the cpu, either on a cuda device.
      REQUIRE_THROWS_WITH(
          waited(detail::embedding_backward(g, ids({1, -1, 7}, {3}, device, index_dtype), 5, 1, by_freq)),
          Contains("embedding_backward(): index out of range in self (index -1 of a table of 5 rows") ||
              (Contains("embedding_backward(): index out of range in self (index 7 of a table") &&
               Contains("found by a kernel on cuda:")));
      REQUIRE_THROWS_WITH(
          waited(detail::embedding_backward(g.reshape({3, 1, 4}), ids({2, 9, 0}, {3, 1}, device, index_dtype), 9,
                                            std::nullopt, by_freq)),
          Contains("index out of range in self (index 9 of a table of 9 rows, num_weights; valid indices are 0 to 8"));
      // The last row and the first are in range: row 4 sums grad rows 0
      // and 2 (halved by their count of 2 with scale_grad_by_freq).
      Tensor grad = detail::embedding_backward(g, ids({4, 0, 4}, {3}, device, index_dtype), 5, std::nullopt, by_freq);
      const double k = by_freq ? 0.5 : 1.0;
      test::check_values(grad, {4.5,
                                5.5,
                                6.5,
                                7.5,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                (0.5 + 8.5) * k,
                                (1.5 + 9.5) * k,
                                (2.5 + 10.5) * k,
                                (3.5 + 11.5) * k});
    }
  // No indices: nothing to check, even against an empty table.
  Tensor empty = detail::embedding_backward(zeros({0, 4}, opts), ids({}, {0}, device), 0, std::nullopt, false);
  CHECK(empty.sizes() == Shape{0, 4});
  REQUIRE_THROWS_WITH(waited(detail::embedding_backward(g, ids({0, 0, 0}, {3}, device), 0, std::nullopt, false)),
                      Contains("(index 0 of a table of 0 rows, num_weights; valid indices are 0 to -1"));
}

// ---------------------------------------------------------------- modules

TEST_CASE("the modules print as PyTorch's", "[nn][norm][module]") {
  auto str = [](const auto& m) {
    std::ostringstream s;
    s << m;
    return s.str();
  };
  CHECK(str(nn::BatchNorm2d(32)) == "BatchNorm2d(32, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
  CHECK(str(nn::BatchNorm1d(nn::BatchNormOptions(8).momentum(std::nullopt).affine(false))) ==
        "BatchNorm1d(8, eps=1e-05, momentum=None, affine=false, track_running_stats=true)");
  CHECK(str(nn::BatchNorm1d(nn::BatchNormOptions(4).eps(1e-3).momentum(0.01).track_running_stats(false))) ==
        "BatchNorm1d(4, eps=0.001, momentum=0.01, affine=true, track_running_stats=false)");
  CHECK(str(nn::LayerNorm(std::vector<int64_t>{64})) == "LayerNorm([64], eps=1e-05, elementwise_affine=true)");
  CHECK(str(nn::LayerNorm(nn::LayerNormOptions({4, 5}).elementwise_affine(false))) ==
        "LayerNorm([4, 5], eps=1e-05, elementwise_affine=false)");
  CHECK(str(nn::Embedding(10, 3)) == "Embedding(10, 3)");
  CHECK(str(nn::Embedding(nn::EmbeddingOptions(10, 3).padding_idx(0))) == "Embedding(10, 3, padding_idx=0)");
  CHECK(str(nn::Embedding(nn::EmbeddingOptions(10, 3).padding_idx(-2))) == "Embedding(10, 3, padding_idx=8)");
  CHECK(str(nn::Embedding(nn::EmbeddingOptions(10, 3).max_norm(1.0).scale_grad_by_freq(true))) ==
        "Embedding(10, 3, max_norm=1, scale_grad_by_freq=true)");
  nn::Sequential seq(nn::Linear(4, 4), nn::BatchNorm1d(4));
  CHECK_THAT(str(seq), Contains("(1): BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)"));
}

DEVICE_TEST_CASE("BatchNorm: PyTorch's parameters, buffers and state dict keys; buffers move with to()",
                 "[nn][norm][module]") {
  auto keys = [](const nn::Module& m) {
    std::vector<std::string> k;
    for (const auto& item : m.state_dict()) k.push_back(item.first);
    return k;
  };
  nn::BatchNorm2d bn(3);
  CHECK(keys(*bn) == std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  CHECK(keys(*nn::BatchNorm2d(nn::BatchNormOptions(3).track_running_stats(false))) ==
        std::vector<std::string>{"weight", "bias"});
  CHECK(keys(*nn::BatchNorm1d(nn::BatchNormOptions(3).affine(false))) ==
        std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  CHECK(bn->parameters().size() == 2);
  CHECK(bn->buffers().size() == 3);
  test::check_values(bn->weight, {1, 1, 1});
  test::check_values(bn->bias, {0, 0, 0});
  test::check_values(bn->running_mean, {0, 0, 0});
  test::check_values(bn->running_var, {1, 1, 1});
  CHECK(bn->num_batches_tracked.dtype() == kInt64);
  CHECK(bn->num_batches_tracked.dim() == 0);
  CHECK(bn->weight.requires_grad());
  CHECK_FALSE(bn->running_mean.requires_grad());

  bn->to(device);
  for (const Tensor& t : bn->buffers()) CHECK(t.device() == device);
  for (const Tensor& t : bn->parameters()) CHECK(t.device() == device);
  bn->to(kFloat64);
  CHECK(bn->running_var.dtype() == kFloat64);
  CHECK(bn->num_batches_tracked.dtype() == kInt64);  // only floating tensors change dtype
  // The moved buffers are the ones forward() updates.
  Tensor x = test::make(values(2 * 3 * 2 * 2), {2, 3, 2, 2}, kFloat64, device);
  bn->forward(x);
  CHECK(bn->num_batches_tracked.item<int64_t>() == 1);
  CHECK(bn->state_dict()["num_batches_tracked"].item<int64_t>() == 1);
  CHECK(bn->running_mean.device() == device);
  CHECK(bn->running_mean.abs().sum().item<double>() > 0);

  // load_state_dict carries the running statistics and the count.
  nn::BatchNorm2d copy(3);
  copy->to(device, kFloat64);
  copy->load_state_dict(bn->state_dict());
  test::check_equal(copy->running_mean, bn->running_mean);
  test::check_equal(copy->running_var, bn->running_var);
  CHECK(copy->num_batches_tracked.item<int64_t>() == 1);
}

DEVICE_TEST_CASE("BatchNorm: train() normalises by the batch and updates; eval() uses the running statistics",
                 "[nn][norm][module]") {
  nn::BatchNorm1d bn(2);
  bn->to(device, kFloat64);
  // Channel 0: 1, 3 (mean 2, biased var 1, unbiased 2); channel 1: 0, 4 (mean 2, var 4, unbiased 8).
  Tensor x = test::make({1, 0, 3, 4}, {2, 2}, kFloat64, device);
  const double e = 1e-5;
  Tensor y = bn->forward(x);
  test::check_values(y, {-1 / std::sqrt(1 + e), -2 / std::sqrt(4 + e), 1 / std::sqrt(1 + e), 2 / std::sqrt(4 + e)});
  test::check_values(bn->running_mean, {0.2, 0.2});
  test::check_values(bn->running_var, {0.9 + 0.2, 0.9 + 0.8});
  bn->eval();
  Tensor z = bn->forward(x);
  test::check_values(z, {(1 - 0.2) / std::sqrt(1.1 + e), (0 - 0.2) / std::sqrt(1.7 + e), (3 - 0.2) / std::sqrt(1.1 + e),
                         (4 - 0.2) / std::sqrt(1.7 + e)});
  test::check_values(bn->running_mean, {0.2, 0.2});  // eval changes nothing
  CHECK(bn->num_batches_tracked.item<int64_t>() == 1);
  // A single sample is fine in eval().
  CHECK(bn->forward(test::make({1, 2}, {1, 2}, kFloat64, device)).sizes() == IntArrayRef{1, 2});
  // Without running statistics, eval() normalises by the batch.
  nn::BatchNorm1d untracked(nn::BatchNormOptions(2).track_running_stats(false));
  untracked->to(device, kFloat64);
  untracked->eval();
  test::check_close(untracked->forward(x), y);
  // momentum None: a cumulative average (1/1, then 1/2).
  nn::BatchNorm1d cumulative(nn::BatchNormOptions(2).momentum(std::nullopt));
  cumulative->to(device, kFloat64);
  cumulative->forward(x);
  test::check_values(cumulative->running_mean, {2, 2});
  cumulative->forward(test::make({5, 0, 7, 0}, {2, 2}, kFloat64, device));
  test::check_values(cumulative->running_mean, {4, 1});
  test::check_values(cumulative->running_var, {2, 4});  // unbiased: (2 + 2) / 2 and (8 + 0) / 2
  // reset_running_stats
  cumulative->reset_running_stats();
  test::check_values(cumulative->running_mean, {0, 0});
  CHECK(cumulative->num_batches_tracked.item<int64_t>() == 0);
}

DEVICE_TEST_CASE("a BatchNorm on one device and input on another: the error names the parameter",
                 "[nn][norm][module]") {
  auto other = test::other_device(device);
  if (!other) return;
  nn::Sequential net(nn::Linear(3, 3), nn::BatchNorm1d(3));
  net->to(device);
  Tensor x = ones({4, 3}, TensorOptions().device(*other));
  try {
    net->ptr<nn::BatchNorm1dImpl>(1)->forward(x);
    FAIL("no DeviceError");
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Contains("Expected all tensors to be on the same device, but found at least two devices, " +
                           device.str() + " and " + other->str() + "! (when checking argument 'input' of batch_norm)"));
    CHECK_THAT(m, Contains("weight is on " + device.str() + ": parameter '1.weight', moved by Module::to() at"));
    CHECK_THAT(m, Contains("input = input.to(weight.device())"));
  }
  // Without affine, the running statistics are named.
  nn::BatchNorm2d plain(nn::BatchNormOptions(3).affine(false));
  plain->to(device);
  REQUIRE_THROWS_WITH(
      plain->forward(ones({2, 3, 2, 2}, TensorOptions().device(*other))),
      Contains("running_mean is on " + device.str() + ": buffer 'running_mean', moved by Module::to()"));
}

TEST_CASE("the modules check their inputs and options", "[nn][norm][module][errors]") {
  nn::BatchNorm1d bn1(3);
  REQUIRE_THROWS_AS(bn1->forward(ones({2, 3, 4, 5})), ValueError);
  REQUIRE_THROWS_WITH(
      bn1->forward(ones({2, 3, 4, 5})),
      Contains("expected 2D or 3D input (got 4D input) in BatchNorm1d, which takes (N, C) or (N, C, L)"));
  REQUIRE_THROWS_WITH(bn1->forward(ones({3})), Contains("expected 2D or 3D input (got 1D input)"));
  nn::BatchNorm2d bn2(3);
  REQUIRE_THROWS_AS(bn2->forward(ones({2, 3, 4})), ValueError);
  REQUIRE_THROWS_WITH(bn2->forward(ones({2, 3, 4})),
                      Contains("expected 4D input (got 3D input) in BatchNorm2d, which takes (N, C, H, W)"));
  // PyTorch's order: the input's channel count, then the parameter's.
  REQUIRE_THROWS_WITH(bn2->forward(ones({2, 4, 3, 3})), Contains("running_mean should contain 4 elements not 3"));
  CHECK(bn2->num_batches_tracked.item<int64_t>() == 0);  // a rejected input is not counted
  REQUIRE_THROWS_WITH(nn::BatchNorm2d(-1), Contains("BatchNorm: num_features must be non-negative, got -1"));
  REQUIRE_THROWS_WITH(nn::LayerNorm(std::vector<int64_t>{4, -1}),
                      Contains("LayerNorm: normalized_shape must hold non-negative sizes, got [4, -1]"));
  REQUIRE_THROWS_AS(nn::Embedding(nn::EmbeddingOptions(10, 3).padding_idx(10)), ValueError);
  REQUIRE_THROWS_WITH(nn::Embedding(nn::EmbeddingOptions(10, 3).padding_idx(-11)),
                      Contains("Padding_idx must be within num_embeddings (padding_idx -11 with num_embeddings 10"));
  REQUIRE_THROWS_WITH(nn::Embedding(-1, 3),
                      Contains("Embedding: num_embeddings and embedding_dim must be non-negative, got -1 and 3"));
  REQUIRE_THROWS_WITH(nn::Embedding(nn::EmbeddingOptions(10, 3)._weight(ones({10, 4}))),
                      Contains("Shape of weight does not match num_embeddings and embedding_dim: expected [10, 3], got "
                               "[10, 4]"));
  REQUIRE_THROWS_WITH(nn::Embedding::from_pretrained(ones({10})),
                      Contains("Embeddings parameter is expected to be 2-dimensional (num_embeddings, embedding_dim), "
                               "got [10]"));
}

DEVICE_TEST_CASE("LayerNorm: ones and zeros of normalized_shape; forward is F::layer_norm", "[nn][norm][module]") {
  nn::LayerNorm ln(nn::LayerNormOptions({3, 4}).eps(1e-3));
  CHECK(ln->weight.sizes() == IntArrayRef{3, 4});
  test::check_values(ln->weight, std::vector<double>(12, 1));
  test::check_values(ln->bias, std::vector<double>(12, 0));
  ln->to(device, kFloat64);
  Tensor x = test::make(values(24), {2, 3, 4}, kFloat64, device);
  test::check_close(ln->forward(x), layer_norm(x, {3, 4}, {}, {}, 1e-3));
  CHECK(ln->named_parameters().keys() == std::vector<std::string>{"weight", "bias"});
  nn::LayerNorm plain(nn::LayerNormOptions({4}).elementwise_affine(false));
  CHECK(plain->parameters().empty());
  CHECK(plain->state_dict().size() == 0);
}

DEVICE_TEST_CASE("Embedding: N(0, 1) rows, the padding row zeroed; from_pretrained", "[nn][norm][module]") {
  manual_seed(7);
  nn::Embedding e(nn::EmbeddingOptions(2000, 50).padding_idx(3));
  e->to(device);
  Tensor w = e->weight.detach();
  CHECK(w.sizes() == IntArrayRef{2000, 50});
  test::check_values(w.select(0, 3), std::vector<double>(50, 0));
  CHECK(std::abs(w.mean().item<double>()) < 0.01);
  CHECK(std::abs(w.std().item<double>() - 1) < 0.01);
  Tensor idx = ids({3, 5, 3}, {3}, device);
  Tensor out = e->forward(idx);
  out.sum().backward();
  test::check_values(e->weight.grad().select(0, 3), std::vector<double>(50, 0));
  test::check_values(e->weight.grad().select(0, 5), std::vector<double>(50, 1));

  Tensor table = test::make(values(12), {4, 3}, kFloat32, device);
  nn::Embedding frozen = nn::Embedding::from_pretrained(table);
  CHECK_FALSE(frozen->weight.requires_grad());
  test::check_equal(frozen->weight, table);
  test::check_equal(frozen->forward(ids({2}, {1}, device)), table.slice(0, 2, 3));
  CHECK_FALSE(frozen->forward(ids({2}, {1}, device)).requires_grad());
  nn::Embedding trained =
      nn::Embedding::from_pretrained(table, nn::EmbeddingFromPretrainedOptions().freeze(false).padding_idx(1));
  CHECK(trained->weight.requires_grad());
  CHECK(*trained->options.padding_idx() == 1);
  test::check_equal(trained->weight.detach(), table);  // the padding row kept as given
}

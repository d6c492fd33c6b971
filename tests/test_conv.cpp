// Convolution and pooling: conv2d, max_pool2d (with indices), avg_pool2d and
// adaptive_avg_pool2d forward and backward against PyTorch 1.13
// (tests/data/conv_reference.txt, written by scripts/gen_conv_reference.py)
// on every device in float64, float32 and the 16-bit types, contiguous and
// not, through the ops and through nn::functional; a direct convolution
// written here for shapes past the CPU kernel's threading threshold;
// gradcheck; max pooling's ties, NaNs and double backward; empty tensors;
// poisoned outputs; every error message; and the modules (Conv2d,
// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d).
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "helpers.h"
#include "kernels/conv.h"
#include "kernels/cpu/parallel.h"
#include "kernels/pool.h"
#include "reference_data.h"

using namespace tandem;
namespace F = tandem::nn::functional;
using Catch::Contains;

namespace {

using test::non_contiguous;

// ---------------------------------------------------------------- reference data

struct Case : test::ReferenceCase {
  std::string op;
  Tensor input, weight, bias, seed, output, indices, grad_input, grad_weight, grad_bias;
};

const std::string kFile = "conv_reference.txt";

std::vector<Case> load_cases() {
  test::ReferenceReader file(kFile);
  std::vector<Case> cases;
  auto next_tensor = [&] { return file.next_tensor(); };
  for (Case c; file.next_case(c); c = Case()) {
    c.op = c.attr("op");
    const bool conv = c.op == "conv2d";
    c.input = next_tensor();
    if (conv) c.weight = next_tensor();
    if (conv && c.flag("bias")) c.bias = next_tensor();
    c.seed = next_tensor();
    c.output = next_tensor();
    if (c.op == "max_pool2d") c.indices = next_tensor();
    c.grad_input = next_tensor();
    if (conv) c.grad_weight = next_tensor();
    if (c.bias.defined()) c.grad_bias = next_tensor();
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = load_cases();
  return c;
}

const Case& find_case(const std::string& name) {
  for (const Case& c : cases())
    if (c.name == name) return c;
  throw std::runtime_error(kFile + ": no case " + name);
}

struct Outputs {
  Tensor out, indices;
};

// The case's op with its options, in Tandem: through the tensor ops, or
// through nn::functional and its option structs.
Outputs run_op(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b, bool functional) {
  if (c.op == "conv2d") {
    const Shape stride = c.pair_attr("stride"), dilation = c.pair_attr("dilation");
    const int64_t groups = c.int_attr("groups");
    const std::string padding = c.attr("padding");
    const bool named = padding == "same" || padding == "valid";
    if (functional) {
      F::Conv2dFuncOptions o;
      o.bias(b).stride({stride[0], stride[1]}).dilation({dilation[0], dilation[1]}).groups(groups);
      if (named) {
        o.padding(padding);
      } else {
        const Shape p = c.pair_attr("padding");
        o.padding({p[0], p[1]});
      }
      return {F::conv2d(x, w, o), {}};
    }
    if (named) return {conv2d(x, w, b, stride, padding, dilation, groups), {}};
    return {conv2d(x, w, b, stride, c.pair_attr("padding"), dilation, groups), {}};
  }
  if (c.op == "max_pool2d") {
    const Shape kernel = c.pair_attr("kernel");
    const Shape stride = c.pair_attr("stride"), padding = c.pair_attr("padding"), dilation = c.pair_attr("dilation");
    const bool ceil = c.int_attr("ceil_mode") != 0;
    if (functional) {
      auto [out, idx] = F::max_pool2d_with_indices(x, F::MaxPool2dFuncOptions({kernel[0], kernel[1]})
                                                          .stride({stride[0], stride[1]})
                                                          .padding({padding[0], padding[1]})
                                                          .dilation({dilation[0], dilation[1]})
                                                          .ceil_mode(ceil));
      return {out, idx};
    }
    auto [out, idx] = max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil);
    return {out, idx};
  }
  if (c.op == "avg_pool2d") {
    const Shape kernel = c.pair_attr("kernel");
    const Shape stride = c.pair_attr("stride"), padding = c.pair_attr("padding");
    const bool ceil = c.int_attr("ceil_mode") != 0, count_pad = c.int_attr("count_include_pad") != 0;
    const int64_t div = c.int_attr("divisor_override");
    const std::optional<int64_t> divisor = div != 0 ? std::optional<int64_t>(div) : std::nullopt;
    if (functional) {
      return {F::avg_pool2d(x, F::AvgPool2dFuncOptions({kernel[0], kernel[1]})
                                   .stride({stride[0], stride[1]})
                                   .padding({padding[0], padding[1]})
                                   .ceil_mode(ceil)
                                   .count_include_pad(count_pad)
                                   .divisor_override(divisor)),
              {}};
    }
    return {avg_pool2d(x, kernel, stride, padding, ceil, count_pad, divisor), {}};
  }
  if (c.op == "adaptive_avg_pool2d") {
    const Shape size = c.pair_attr("output_size");
    if (functional) return {F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({size[0], size[1]})), {}};
    return {adaptive_avg_pool2d(x, size), {}};
  }
  throw std::runtime_error(kFile + ": unknown op " + c.op);
}

// float64: PyTorch and Tandem sum in other orders (a wrong formula is off by
// far more). float32 against the float64 reference: sums of up to ~100
// products of O(1) values.
test::Tolerance tolerance_for(Dtype dtype) {
  if (dtype == kFloat64) return {1e-10, 1e-12};
  if (dtype == kFloat32) return {1e-5, 2e-5};
  return test::tolerance(dtype);
}

// A tensor of the case on device in dtype, laid out as asked, as a leaf.
Tensor leaf_of(const Tensor& t, const Device& device, Dtype dtype, bool strided) {
  if (!t.defined()) return {};
  Tensor x = t.to(device, dtype);
  if (strided) x = non_contiguous(x);
  return x.detach().requires_grad_();
}

// One case on one device: the output (and indices), then the gradients that
// autograd::grad returns and those backward() accumulates. expected_* default
// to the case's reference values.
void check_case(const Case& c, const Device& device, Dtype dtype, bool strided, bool functional) {
  INFO("case " << c.name << " on " << device.str() << " in " << dtype << ", " << (strided ? "non-" : "")
               << "contiguous, through " << (functional ? "nn::functional" : "the ops"));
  const Tensor x = leaf_of(c.input, device, dtype, strided), w = leaf_of(c.weight, device, dtype, strided),
               b = leaf_of(c.bias, device, dtype, false);
  Outputs r = run_op(c, x, w, b, functional);
  CHECK(r.out.device() == device);
  REQUIRE(r.out.dtype() == dtype);
  REQUIRE(r.out.requires_grad());
  test::check_close(r.out, c.output, tolerance_for(dtype));
  if (c.indices.defined()) {
    REQUIRE(r.indices.defined());
    CHECK(r.indices.device() == device);
    test::check_equal(r.indices, c.indices);
  }
  std::vector<Tensor> leaves{x}, expected{c.grad_input};
  if (w.defined()) leaves.push_back(w), expected.push_back(c.grad_weight);
  if (b.defined()) leaves.push_back(b), expected.push_back(c.grad_bias);
  const Tensor seed = c.seed.to(device, dtype);
  std::vector<Tensor> got = autograd::grad({r.out}, leaves, {seed}, /*retain_graph=*/true);
  r.out.backward(seed);
  const char* names[] = {"input", "weight", "bias"};
  for (size_t k = 0; k < leaves.size(); ++k) {
    INFO("d(out)/d(" << names[k] << ")");
    REQUIRE(got[k].defined());
    CHECK(got[k].device() == device);
    CHECK(got[k].dtype() == dtype);
    test::check_close(got[k], expected[k], tolerance_for(dtype));
    test::check_close(leaves[k].grad(), expected[k], tolerance_for(dtype));
  }
}

Tensor randn_on(IntArrayRef shape, const Device& device, Dtype dtype = kFloat64) {
  return randn(shape, TensorOptions(dtype).device(device));
}

// ---------------------------------------------------------------- a direct convolution

// out[n, co, oh, ow] = b[co] + sum over the group's ci, i, j of
// x[n, ci, oh * s - p + i * d, ...] * w[co, ci - group start, i, j], with
// sum(out * seed)'s gradients, all in float64 on the host.
struct DirectConv {
  std::vector<double> out, grad_x, grad_w, grad_b;
};

DirectConv direct_conv(const Tensor& xt, const Tensor& wt, const Tensor& bt, const Tensor& seedt, Conv2dParams p) {
  const std::vector<double> x = xt.to_vector<double>(), w = wt.to_vector<double>(), seed = seedt.to_vector<double>();
  const std::vector<double> b = bt.defined() ? bt.to_vector<double>() : std::vector<double>();
  const int64_t N = xt.size(0), C = xt.size(1), H = xt.size(2), W = xt.size(3);
  const int64_t CO = wt.size(0), CG = wt.size(1), KH = wt.size(2), KW = wt.size(3);
  const int64_t OH = seedt.size(2), OW = seedt.size(3), COG = CO / p.groups;
  DirectConv r;
  r.out.assign(static_cast<size_t>(N * CO * OH * OW), 0);
  r.grad_x.assign(x.size(), 0);
  r.grad_w.assign(w.size(), 0);
  r.grad_b.assign(static_cast<size_t>(CO), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < CO; ++co)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t o = ((n * CO + co) * OH + oh) * OW + ow;
          double acc = b.empty() ? 0 : b[co];
          for (int64_t cg = 0; cg < CG; ++cg)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t ci = (co / COG) * CG + cg;
                const int64_t xi = ((n * C + ci) * H + ih) * W + iw, wi = ((co * CG + cg) * KH + i) * KW + j;
                acc += x[xi] * w[wi];
                r.grad_x[xi] += seed[o] * w[wi];
                r.grad_w[wi] += seed[o] * x[xi];
              }
          r.out[o] = acc;
          r.grad_b[co] += seed[o];
        }
  return r;
}

}  // namespace

// ---------------------------------------------------------------- against PyTorch

DEVICE_TEST_CASE("conv2d and pooling match PyTorch, forward and backward", "[nn][conv][reference]") {
  REQUIRE(cases().size() >= 50);
  for (const Case& c : cases()) {
    check_case(c, device, kFloat64, false, false);
    check_case(c, device, kFloat64, true, true);
    check_case(c, device, kFloat32, false, true);
    check_case(c, device, kFloat32, true, false);
  }
}

// With cuDNN switched off a cuDNN build takes the im2col + cuBLAS path, which
// nothing else runs there (the simulated build and builds without cuDNN
// always take it).
DEVICE_TEST_CASE("conv2d matches PyTorch with cuDNN switched off (im2col + cuBLAS)", "[nn][conv][reference][im2col]") {
  if (!device.is_cuda()) return;
  struct Off {
    Off() { cuda::set_cudnn_enabled(false); }
    ~Off() { cuda::set_cudnn_enabled(true); }
  } off;
  CHECK_FALSE(cuda::cudnn_enabled());
  int convs = 0;
  for (const Case& c : cases()) {
    if (c.op != "conv2d") continue;
    ++convs;
    check_case(c, device, kFloat64, true, false);
    check_case(c, device, kFloat32, false, true);
  }
  CHECK(convs >= 10);
}

// float16 / bfloat16 accumulate in float32 and round once: against Tandem's
// float64 result on the same (rounded) values.
DEVICE_TEST_CASE("conv2d and pooling compute float16 and bfloat16 in float32", "[nn][conv][reduced]") {
  for (const char* name :
       {"conv_3x3_pad1", "conv_groups2", "conv_depthwise", "conv_1x1", "conv_stride2_pad_1_2_kernel_3x2",
        "max_k3_s2_p1", "max_ties", "avg_k3_s2_p1_nopadcount", "avg_divisor", "adaptive_non_divisible"}) {
    const Case& c = find_case(name);
    for (Dtype dt : {kFloat16, kBFloat16}) {
      INFO(name << " in " << dt << " on " << device.str());
      auto rounded = [&](const Tensor& t) { return t.defined() ? t.to(dt).to(kFloat64) : Tensor(); };
      Case ref = c;
      ref.input = rounded(c.input), ref.weight = rounded(c.weight), ref.bias = rounded(c.bias);
      ref.seed = rounded(c.seed);
      const Tensor x64 = leaf_of(ref.input, device, kFloat64, false),
                   w64 = leaf_of(ref.weight, device, kFloat64, false), b64 = leaf_of(ref.bias, device, kFloat64, false);
      Outputs r64 = run_op(ref, x64, w64, b64, false);
      const Tensor x = leaf_of(ref.input, device, dt, false), w = leaf_of(ref.weight, device, dt, false),
                   b = leaf_of(ref.bias, device, dt, false);
      Outputs r = run_op(ref, x, w, b, false);
      REQUIRE(r.out.dtype() == dt);
      test::check_close(r.out, r64.out, test::tolerance(dt));
      if (r.indices.defined()) test::check_equal(r.indices, r64.indices);
      std::vector<Tensor> leaves{x}, leaves64{x64};
      if (w.defined()) leaves.push_back(w), leaves64.push_back(w64);
      if (b.defined()) leaves.push_back(b), leaves64.push_back(b64);
      std::vector<Tensor> g = autograd::grad({r.out}, leaves, {ref.seed.to(device, dt)});
      std::vector<Tensor> g64 = autograd::grad({r64.out}, leaves64, {ref.seed.to(device)});
      for (size_t k = 0; k < g.size(); ++k) {
        CHECK(g[k].dtype() == dt);
        test::check_close(g[k], g64[k], test::tolerance(dt));
      }
    }
  }
}

// Shapes on both sides of the CPU kernel's threshold for splitting the batch
// across threads (2^18 multiply-adds an item), one thread and all of them,
// against a convolution written out here.
DEVICE_TEST_CASE("conv2d matches a direct convolution on larger shapes and every thread count", "[nn][conv]") {
  struct Config {
    Shape x, w;
    Conv2dParams p;
    bool bias;
  };
  const Config configs[] = {
      {{3, 16, 12, 12}, {32, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, true},  // 32 x 144 x 144 an item: threaded by the GEMM
      {{4, 8, 10, 9}, {12, 4, 3, 2}, {2, 1, 1, 0, 1, 2, 2}, true},     // small items: the batch is split
      {{5, 6, 7, 7}, {6, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 6}, false},      // depthwise
      {{3, 24, 9, 9}, {48, 24, 1, 1}, {1, 1, 0, 0, 1, 1, 1}, true},    // 1x1: the input is its own column matrix
  };
  const int threads = cpu::num_threads();
  manual_seed(7);
  for (const Config& cfg : configs) {
    const Tensor x = randn_on(cfg.x, device).requires_grad_(), w = randn_on(cfg.w, device).requires_grad_();
    const Tensor b = cfg.bias ? randn_on({cfg.w[0]}, device).requires_grad_() : Tensor();
    const Conv2dParams& p = cfg.p;
    for (int t : {1, threads}) {
      INFO("input " << shape_str(cfg.x) << ", weight " << shape_str(cfg.w) << ", " << t << " threads");
      cpu::set_num_threads(t);
      Tensor out =
          conv2d(x, w, b, {p.stride_h, p.stride_w}, {p.pad_h, p.pad_w}, {p.dilation_h, p.dilation_w}, p.groups);
      const Tensor seed = randn_on(out.sizes(), device);
      const DirectConv ref = direct_conv(x, w, b, seed, p);
      test::check_values(out, ref.out, tolerance_for(kFloat64));
      std::vector<Tensor> leaves{x, w};
      if (b.defined()) leaves.push_back(b);
      std::vector<Tensor> g = autograd::grad({out}, leaves, {seed});
      test::check_values(g[0], ref.grad_x, tolerance_for(kFloat64));
      test::check_values(g[1], ref.grad_w, tolerance_for(kFloat64));
      if (b.defined()) test::check_values(g[2], ref.grad_b, tolerance_for(kFloat64));
    }
    cpu::set_num_threads(0);
  }
}

// ---------------------------------------------------------------- gradcheck

DEVICE_TEST_CASE("conv2d gradients match finite differences", "[nn][conv][gradcheck]") {
  manual_seed(11);
  struct Config {
    Shape x, w;
    Shape stride, padding, dilation;
    int64_t groups;
    bool bias;
  };
  const Config configs[] = {
      {{2, 3, 5, 5}, {2, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{1, 4, 6, 5}, {4, 2, 2, 3}, {2, 1}, {1, 0}, {2, 1}, 2, true},
      {{2, 2, 4, 4}, {4, 1, 3, 3}, {1, 2}, {0, 1}, {1, 1}, 2, false},
      {{3, 5, 5}, {2, 3, 2, 2}, {1, 1}, {0, 0}, {1, 1}, 1, true},  // unbatched
  };
  for (const Config& c : configs) {
    INFO("input " << shape_str(c.x) << ", weight " << shape_str(c.w));
    std::vector<Tensor> in{randn_on(c.x, device).requires_grad_(), randn_on(c.w, device).requires_grad_()};
    if (c.bias) in.push_back(randn_on({c.w[0]}, device).requires_grad_());
    test::check_gradients(
        [&](const std::vector<Tensor>& t) {
          return conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
        },
        in, /*second_order=*/false);
  }
  // padding="same" with an even kernel: the extra zero row and column.
  std::vector<Tensor> in{randn_on({1, 2, 4, 5}, device).requires_grad_(),
                         randn_on({2, 2, 2, 4}, device).requires_grad_()};
  test::check_gradients([](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], {}, 1, "same"); }, in, false);
}

DEVICE_TEST_CASE("pooling gradients match finite differences (max pooling to second order)", "[nn][pool][gradcheck]") {
  manual_seed(12);
  // Random values: no two in a window within a finite-difference step.
  const Tensor x = randn_on({2, 2, 6, 5}, device).requires_grad_();
  test::check_gradients(
      [](const std::vector<Tensor>& t) {
        return max_pool2d(t[0], {3, 2}, {2, 1}, {1, 1}, 1, true);
      },
      {x}, /*second_order=*/true);
  test::check_gradients([](const std::vector<Tensor>& t) { return max_pool2d(t[0], 2, 1, 0, 2); }, {x}, true);
  test::check_gradients([](const std::vector<Tensor>& t) { return avg_pool2d(t[0], 3, 2, 1, true, false); }, {x},
                        false);
  test::check_gradients(
      [](const std::vector<Tensor>& t) {
        return avg_pool2d(t[0], {2, 3}, 1, {1, 1}, false, true, 5);
      },
      {x}, false);
  test::check_gradients([](const std::vector<Tensor>& t) { return adaptive_avg_pool2d(t[0], {4, 3}); }, {x}, false);
  test::check_gradients([](const std::vector<Tensor>& t) { return adaptive_avg_pool2d(t[0], {7, 7}); }, {x}, false);
  const Tensor unbatched = randn_on({2, 5, 4}, device).requires_grad_();
  test::check_gradients([](const std::vector<Tensor>& t) { return max_pool2d(t[0], 2); }, {unbatched}, true);
  test::check_gradients([](const std::vector<Tensor>& t) { return avg_pool2d(t[0], 2); }, {unbatched}, false);
}

// ---------------------------------------------------------------- max pooling by hand

DEVICE_TEST_CASE("max_pool2d: the first of equal maxima wins, a NaN wins (the last one)", "[nn][pool]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Windows of 2x2: {1, nan; nan, 2} (two NaNs), {0, 3; 3, 3} (ties), {5, 5; 5, 4}, {-1, -2; -3, -2}.
  const std::vector<double> values{1, nan, 0, 3, nan, 2, 3, 3, 5, 5, -1, -2, 5, 4, -3, -2};
  for (Dtype dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    INFO(dt);
    Tensor x = test::make(values, {1, 1, 4, 4}, dt, device).requires_grad_();
    auto [out, idx] = max_pool2d_with_indices(x, 2);
    test::check_values(out, {nan, 3, 5, -1});
    test::check_values(idx, {4, 3, 8, 10});
    out.sum().backward();
    test::check_values(x.grad(), {0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0});
  }
  // Overlapping windows: each output's gradient goes to its own maximum, and
  // an element that is several windows' maximum sums their gradients.
  Tensor x = test::leaf({1, 2, 3, 4, 9, 6, 7, 8, 5}, {1, 1, 3, 3}, device);
  auto [out, idx] = max_pool2d_with_indices(x, 2, 1);
  test::check_values(out, {9, 9, 9, 9});
  test::check_values(idx, {4, 4, 4, 4});
  (out * test::make({1, 2, 3, 4}, {1, 1, 2, 2}, kFloat64, device)).sum().backward();
  test::check_values(x.grad(), {0, 0, 0, 0, 10, 0, 0, 0, 0});
}

DEVICE_TEST_CASE("avg_pool2d and adaptive_avg_pool2d by hand", "[nn][pool]") {
  const Tensor x = test::make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3}, kFloat64, device);
  // Padding 1, kernel 2, stride 2: windows {pad, pad; pad, 1}, {pad, pad; 2, 3}, ...
  test::check_values(avg_pool2d(x, 2, 2, 1), {0.25, 1.25, 2.75, 7.0});
  test::check_values(avg_pool2d(x, 2, 2, 1, false, false), {1, 2.5, 5.5, 7.0});
  test::check_values(avg_pool2d(x, 2, 2, 1, false, true, 2), {0.5, 2.5, 5.5, 14.0});
  test::check_values(adaptive_avg_pool2d(x, {2, 2}), {3, 4, 6, 7});
  test::check_values(adaptive_avg_pool2d(x, 1), {5});
  // ceil_mode keeps a last window that starts inside the input.
  CHECK(max_pool2d(x, 2, 2, 0, 1, true).sizes() == IntArrayRef({1, 2, 2}));
  test::check_values(max_pool2d(x, 2, 2, 0, 1, true), {5, 6, 8, 9});
  CHECK(max_pool2d(x, 2, 2, 0, 1, false).sizes() == IntArrayRef({1, 1, 1}));
}

// ---------------------------------------------------------------- double backward

DEVICE_TEST_CASE("double backward: max pooling has it, conv2d and average pooling refuse", "[nn][conv][autograd]") {
  manual_seed(3);
  const Tensor x = randn_on({1, 2, 5, 5}, device).requires_grad_();
  const Tensor w = randn_on({3, 2, 3, 3}, device).requires_grad_();
  auto first = [](const Tensor& y, const Tensor& in) {
    return autograd::grad({y}, {in}, {}, std::nullopt, /*create_graph=*/true)[0];
  };
  REQUIRE_THROWS_AS(first(conv2d(x, w).pow(2).sum(), x), NotImplementedError);
  REQUIRE_THROWS_WITH(first(conv2d(x, w).pow(2).sum(), w),
                      Contains("double backward of conv2d is not implemented") &&
                          Contains("Take first-order gradients only (create_graph=false)"));
  REQUIRE_THROWS_WITH(first(avg_pool2d(x, 2).pow(2).sum(), x),
                      Contains("double backward of avg_pool2d is not implemented"));
  REQUIRE_THROWS_WITH(first(adaptive_avg_pool2d(x, 3).pow(2).sum(), x),
                      Contains("double backward of adaptive_avg_pool2d is not implemented"));
  // Under create_graph, a gradient that needs no graph is still computed,
  // and the bias's gradient (a sum) has one.
  const Tensor g = first(avg_pool2d(x, 2).sum(), x);
  CHECK_FALSE(g.requires_grad());
  const Tensor x2 = x.detach().requires_grad_();
  test::check_close(g, autograd::grad({avg_pool2d(x2, 2).sum()}, {x2})[0]);
  const Tensor b = randn_on({3}, device).requires_grad_();
  const Tensor gb = first(conv2d(x.detach(), w.detach(), b).pow(2).sum(), b);
  CHECK(gb.requires_grad());
  test::check_close(first(gb.sum(), b), full({3}, 2.0 * 9, TensorOptions(kFloat64).device(device)));
  // Max pooling: the gradient of its gradient (a gather of the outer seed).
  const Tensor gx = first(max_pool2d(x, 2, 1).pow(2).sum(), x);
  CHECK(gx.requires_grad());
  const Tensor ggx = first(gx.sum(), x);
  CHECK(ggx.sizes() == x.sizes());
}

// ---------------------------------------------------------------- empty tensors

DEVICE_TEST_CASE("conv2d and pooling of empty tensors", "[nn][conv][empty]") {
  const TensorOptions f64 = TensorOptions(kFloat64).device(device);
  // An empty batch.
  Tensor x = zeros({0, 3, 5, 5}, f64).requires_grad_();
  Tensor w = randn_on({4, 3, 3, 3}, device).requires_grad_(), b = randn_on({4}, device).requires_grad_();
  Tensor y = conv2d(x, w, b, 1, 1);
  CHECK(y.sizes() == IntArrayRef({0, 4, 5, 5}));
  y.sum().backward();
  test::check_close(w.grad(), zeros({4, 3, 3, 3}, f64));
  test::check_close(b.grad(), zeros({4}, f64));
  CHECK(x.grad().sizes() == x.sizes());
  CHECK(max_pool2d(x, 2).sizes() == IntArrayRef({0, 3, 2, 2}));
  CHECK(avg_pool2d(x, 2).sizes() == IntArrayRef({0, 3, 2, 2}));
  CHECK(adaptive_avg_pool2d(x, 3).sizes() == IntArrayRef({0, 3, 3, 3}));
  // No input channels: the output is the bias.
  Tensor x0 = zeros({2, 0, 4, 4}, f64).requires_grad_();
  Tensor w0 = zeros({3, 0, 3, 3}, f64).requires_grad_(), b0 = test::leaf({1, 2, 3}, {3}, device);
  Tensor y0 = conv2d(x0, w0, b0);
  CHECK(y0.sizes() == IntArrayRef({2, 3, 2, 2}));
  test::check_close(y0, b0.detach().view({1, 3, 1, 1}).expand({2, 3, 2, 2}));
  y0.sum().backward();
  test::check_values(b0.grad(), {8, 8, 8});
  CHECK(w0.grad().sizes() == w0.sizes());
  // An adaptive output of size 0.
  Tensor xa = randn_on({2, 3, 4, 4}, device).requires_grad_();
  Tensor ya = adaptive_avg_pool2d(xa, {0, 2});
  CHECK(ya.sizes() == IntArrayRef({2, 3, 0, 2}));
  ya.sum().backward();
  test::check_close(xa.grad(), zeros({2, 3, 4, 4}, f64));
}

// ---------------------------------------------------------------- kernels

// Every element of every output is written: outputs start as NaN, inputs
// are finite.
TEST_CASE("CPU conv and pooling kernels write every element of a poisoned output", "[nn][conv][kernels]") {
  manual_seed(5);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Dtype dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    INFO(dt);
    auto poisoned = [&](IntArrayRef shape) { return full(shape, nan, dt); };
    auto all_finite = [](const Tensor& t) {
      for (double v : t.to_vector<double>())
        if (!std::isfinite(v)) return false;
      return true;
    };
    struct Config {
      Conv2dParams p;
      int64_t kh, kw;
    };
    // 3x3 padded; strided, dilated and grouped; 1x1 (the direct path).
    for (const Config& c : {Config{{1, 1, 1, 1, 1, 1, 1}, 3, 3}, Config{{2, 1, 0, 2, 1, 2, 2}, 3, 2},
                            Config{{1, 1, 0, 0, 1, 1, 2}, 1, 1}}) {
      const Conv2dParams& p = c.p;
      const Tensor x = randn({3, 4, 7, 6}, dt), w = randn({6, 4 / p.groups, c.kh, c.kw}, dt);
      const Tensor b = randn({6}, dt);
      const int64_t OH = conv_output_size(7, w.size(2), p.stride_h, p.pad_h, p.dilation_h);
      const int64_t OW = conv_output_size(6, w.size(3), p.stride_w, p.pad_w, p.dilation_w);
      Tensor out = poisoned({3, 6, OH, OW});
      cpu::conv2d(out, x, w, b, p);
      CHECK(all_finite(out));
      Tensor gy = randn({3, 6, OH, OW}, dt), gx = poisoned({3, 4, 7, 6}), gw = poisoned(w.sizes());
      cpu::conv2d_backward_input(gx, gy, w, p);
      cpu::conv2d_backward_weight(gw, gy, x, p);
      CHECK(all_finite(gx));
      CHECK(all_finite(gw));
    }
    Pool2dParams p;
    p.kernel_h = 3, p.kernel_w = 2, p.stride_h = 2, p.stride_w = 1, p.pad_h = 1, p.pad_w = 1, p.ceil_mode = true;
    const Tensor x = randn({2, 3, 7, 6}, dt);
    const int64_t OH = pool_output_size(7, 3, 2, 1, 1, true), OW = pool_output_size(6, 2, 1, 1, 1, true);
    Tensor out = poisoned({2, 3, OH, OW}), idx = full({2, 3, OH, OW}, -7, kInt64);
    cpu::max_pool2d(out, idx, x, p);
    CHECK(all_finite(out));
    CHECK(idx.min().item<int64_t>() >= 0);
    Tensor gy = randn({2, 3, OH, OW}, dt), gx = poisoned({2, 3, 7, 6});
    cpu::max_pool2d_backward(gx, gy, idx, p);
    CHECK(all_finite(gx));
    out = poisoned({2, 3, OH, OW});
    cpu::avg_pool2d(out, x, p);
    CHECK(all_finite(out));
    gx = poisoned({2, 3, 7, 6});
    cpu::avg_pool2d_backward(gx, gy, p);
    CHECK(all_finite(gx));
    out = poisoned({2, 3, 4, 5});
    cpu::adaptive_avg_pool2d(out, x);
    CHECK(all_finite(out));
    gx = poisoned({2, 3, 7, 6});
    cpu::adaptive_avg_pool2d_backward(gx, randn({2, 3, 4, 5}, dt));
    CHECK(all_finite(gx));
  }
}

DEVICE_TEST_CASE("the fused backward ops give autograd's gradients and check their arguments", "[nn][conv][backward]") {
  manual_seed(9);
  const Tensor x = randn_on({2, 4, 6, 5}, device).requires_grad_(), w = randn_on({6, 2, 3, 2}, device).requires_grad_();
  Tensor y = conv2d(x, w, {}, {2, 1}, {1, 0}, {1, 2}, 2);
  const Tensor seed = randn_on(y.sizes(), device);
  std::vector<Tensor> g = autograd::grad({y}, {x, w}, {seed});
  {
    NoGradGuard no_grad;
    test::check_close(detail::conv2d_backward_input(seed, w, x.sizes(), {2, 1}, {1, 0}, {1, 2}, 2), g[0]);
    test::check_close(detail::conv2d_backward_weight(seed, x, w.sizes(), {2, 1}, {1, 0}, {1, 2}, 2), g[1]);
    // Non-contiguous grad_out.
    test::check_close(detail::conv2d_backward_input(non_contiguous(seed), w, x.sizes(), {2, 1}, {1, 0}, {1, 2}, 2),
                      g[0]);
  }
  REQUIRE_THROWS_WITH(detail::conv2d_backward_input(seed, w, x.sizes(), {2, 1}, {1, 0}, {1, 2}, 2),
                      Contains("conv2d_backward_input(): records no graph, but grad mode is on and weight requires "
                               "grad; call it inside a NoGradGuard"));
  NoGradGuard no_grad;
  REQUIRE_THROWS_WITH(detail::conv2d_backward_input(seed, w, {2, 4, 6, 6}, {2, 1}, {1, 0}, {1, 2}, 2),
                      Contains("conv2d_backward_input(): expected grad_out of size [2, 6, 3, 4] (the output of conv2d "
                               "on input [2, 4, 6, 6]), but got [2, 6, 3, 3]"));
  REQUIRE_THROWS_WITH(detail::conv2d_backward_weight(seed, x, {6, 2, 3}, {2, 1}, {1, 0}, {1, 2}, 2),
                      Contains("conv2d_backward_weight(): expected 4-D input, weight and grad_out, but got input size "
                               "[2, 4, 6, 5], weight size [6, 2, 3]"));
  REQUIRE_THROWS_WITH(detail::conv2d_backward_input(seed, w, {2, 6, 6, 5}, {2, 1}, {1, 0}, {1, 2}, 2),
                      Contains("conv2d_backward_input(): given groups=2, weight of size [6, 2, 3, 2] expects input "
                               "with 4 channels, but the input size is [2, 6, 6, 5]"));
  REQUIRE_THROWS_WITH(
      detail::conv2d_backward_input(seed.to(kInt64), w.detach().to(kInt64), x.sizes(), {2, 1}, {1, 0}, {1, 2}, 2),
      Contains("\"conv2d_backward_input\" not implemented for 'Long'"));
  REQUIRE_THROWS_WITH(detail::conv2d_backward_weight(seed.to(kFloat32), x, w.sizes(), {2, 1}, {1, 0}, {1, 2}, 2),
                      Contains("conv2d_backward_weight(): expected grad_out of the input's dtype float64, but got "
                               "float32"));

  // Pooling.
  auto [out, idx] = max_pool2d_with_indices(x.detach(), 2, 1, 1, 1, true);
  const Tensor gy = randn_on(out.sizes(), device);
  Tensor xl = x.detach().requires_grad_();
  Tensor gref;
  {
    EnableGradGuard grad;
    gref = autograd::grad({max_pool2d(xl, 2, 1, 1, 1, true)}, {xl}, {gy})[0];
  }
  test::check_close(detail::max_pool2d_backward(gy, idx, x.sizes(), 2, 1, 1, 1, true), gref);
  REQUIRE_THROWS_WITH(detail::max_pool2d_backward(gy, idx, x.sizes(), 2, 2, 1, 1, true),
                      Contains("max_pool2d_backward(): expected grad_out of size [2, 4, 4, 3] (the forward's output "
                               "for input [2, 4, 6, 5]), but got [2, 4, 7, 6]"));
  REQUIRE_THROWS_WITH(detail::max_pool2d_backward(gy, idx.to(kInt32), x.sizes(), 2, 1, 1, 1, true),
                      Contains("max_pool2d_backward(): expected int64 indices of grad_out's size [2, 4, 7, 6], but "
                               "got int32 indices of size [2, 4, 7, 6]"));
  REQUIRE_THROWS_WITH(detail::avg_pool2d_backward(gy, {4, 6, 5}, 2, 1, 1, true, true, std::nullopt),
                      Contains("avg_pool2d_backward(): expected 4-D input sizes without empty channel or spatial "
                               "dims, but got [4, 6, 5]"));
  REQUIRE_THROWS_WITH(detail::avg_pool2d_backward(gy, x.sizes(), 2, 1, 1, true, true, 0),
                      Contains("divisor must be not zero (avg_pool2d_backward)"));
  REQUIRE_THROWS_WITH(detail::adaptive_avg_pool2d_backward(gy.to(kInt64), x.sizes()),
                      "\"adaptive_avg_pool2d_backward\" not implemented for 'Long' (adaptive_avg_pool2d_backward "
                      "computes in a floating dtype on " +
                          device.str() + "; convert the tensors first, e.g. .to(kFloat32))");
  REQUIRE_THROWS_WITH(detail::adaptive_avg_pool2d_backward(gy[0], x.sizes()),
                      Contains("adaptive_avg_pool2d_backward(): expected a 4-D grad_out, but got size [4, 7, 6]"));
  {
    EnableGradGuard grad;
    REQUIRE_THROWS_WITH(
        detail::avg_pool2d_backward(gy.detach().requires_grad_(), x.sizes(), 2, 1, 1, true, true, std::nullopt),
        Contains("avg_pool2d_backward(): records no graph, but grad mode is on and grad_out requires "
                 "grad"));
  }
}

// ---------------------------------------------------------------- errors

DEVICE_TEST_CASE("conv2d's errors, in PyTorch's words", "[nn][conv][errors]") {
  const Tensor x = randn_on({2, 4, 5, 5}, device), w = randn_on({8, 3, 3, 3}, device);
  const Tensor x3 = randn_on({2, 3, 5, 5}, device);
  REQUIRE_THROWS_WITH(conv2d(x, w), Contains("Given groups=1, weight of size [8, 3, 3, 3], expected input[2, 4, 5, 5] "
                                             "to have 3 channels, but got 4 channels instead"));
  REQUIRE_THROWS_AS(conv2d(x, w), ShapeError);
  REQUIRE_THROWS_WITH(conv2d(randn_on({2, 6, 5, 5}, device), w, {}, 1, 0, 1, 4),
                      Contains("Given groups=4, weight of size [8, 3, 3, 3], expected input[2, 6, 5, 5] to have 12 "
                               "channels, but got 6 channels instead"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, 1, 0, 1, 0), Contains("non-positive groups is not supported"));
  REQUIRE_THROWS_WITH(conv2d(randn_on({2, 6, 5, 5}, device), randn_on({9, 3, 3, 3}, device), {}, 1, 0, 1, 2),
                      Contains("Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of "
                               "size [9, 3, 3, 3] instead"));
  REQUIRE_THROWS_WITH(conv2d(x3, randn_on({0, 3, 3, 3}, device)),
                      Contains("Given groups=1, expected weight to be at least 1 at dimension 0, but got weight of "
                               "size [0, 3, 3, 3] instead"));
  REQUIRE_THROWS_WITH(conv2d(x3, randn_on({8, 3, 0, 3}, device)),
                      Contains("conv2d: expected a kernel of at least 1 x 1, but got weight of size [8, 3, 0, 3]"));
  REQUIRE_THROWS_WITH(conv2d(x3, randn_on({8, 3, 3}, device)),
                      Contains("conv2d: expected weight to be 4-D (out_channels, in_channels / groups, kH, kW), but "
                               "got weight of size [8, 3, 3]"));
  REQUIRE_THROWS_WITH(
      conv2d(randn_on({3, 5}, device), w),
      Contains("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 5]"));
  REQUIRE_THROWS_WITH(conv2d(randn_on({2, 3, 5, 5, 5}, device), w),
                      Contains("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
                               "[2, 3, 5, 5, 5]"));
  REQUIRE_THROWS_WITH(conv2d(randn_on({2, 3, 2, 2}, device), w),
                      Contains("Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size "
                               "can't be greater than actual input size"));
  REQUIRE_THROWS_WITH(conv2d(randn_on({2, 3, 4, 4}, device), w, {}, 1, 0, 2),
                      Contains("Calculated padded input size per channel: (4 x 4). Kernel size: (5 x 5)."));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, 0), Contains("non-positive stride is not supported"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, {1, -1}), Contains("non-positive stride is not supported"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, 1, -1), Contains("negative padding is not supported"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, 1, 0, 0), Contains("non-positive dilation is not supported"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, {1, 1, 1}),
                      Contains("expected stride to be a single integer value or a list of 2 values to match the "
                               "convolution dimensions, but got stride=[1, 1, 1]"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, 1, {1, 1, 1}),
                      Contains("expected padding to be a single integer value or a list of 2 values"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, 1, 0, {}),
                      Contains("expected dilation to be a single integer value or a list of 2 values to match the "
                               "convolution dimensions, but got dilation=[]"));
  REQUIRE_THROWS_AS(conv2d(x3, w, {}, 1, 0, {}), ValueError);
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, {1, 1, 1}, "same"), Contains("but got stride=[1, 1, 1]"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, randn_on({7}, device)),
                      Contains("Given weight of size [8, 3, 3, 3], expected bias to be 1-dimensional with 8 elements, "
                               "but got bias of size [7] instead"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, randn_on({8, 1}, device)), Contains("but got bias of size [8, 1] instead"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, 2, "same"), Contains("padding='same' is not supported for strided "
                                                             "convolutions"));
  REQUIRE_THROWS_WITH(conv2d(x3, w, {}, 1, "foo"), Contains("Invalid padding string: 'foo'"));
  REQUIRE_THROWS_AS(conv2d(x3, w, {}, 1, "foo"), ValueError);
  const std::string type = device.is_cuda() ? "torch.cuda." : "torch.";
  REQUIRE_THROWS_WITH(conv2d(x3.to(kFloat32), w), Contains("Input type (" + type + "FloatTensor) and weight type (" +
                                                           type + "DoubleTensor) should be the same") &&
                                                      Contains("convert the input, e.g. input.to(float64)"));
  REQUIRE_THROWS_AS(conv2d(x3.to(kFloat32), w), DtypeError);
  REQUIRE_THROWS_WITH(conv2d(x3, w, randn_on({8}, device, kFloat32)),
                      Contains("Input type (double) and bias type (float) should be the same"));
  REQUIRE_THROWS_WITH(conv2d(x3.to(kInt64), w.to(kInt64)),
                      "\"conv2d\" not implemented for 'Long' (conv2d computes in a floating dtype on " + device.str() +
                          "; convert the tensors first, e.g. .to(kFloat32))");
  REQUIRE_THROWS_AS(conv2d(x3.to(kInt64), w.to(kInt64)), NotImplementedError);
  REQUIRE_THROWS_WITH(conv2d(Tensor(), w), Contains("conv2d: argument 'input' is an undefined tensor"));
  if (auto other = test::other_device(device)) {
    REQUIRE_THROWS_AS(conv2d(x3.to(*other), w), DeviceError);
    REQUIRE_THROWS_WITH(conv2d(x3, w, randn_on({8}, *other)), Contains("(when checking argument 'bias' of conv2d)"));
  }
}

DEVICE_TEST_CASE("pooling's errors, in PyTorch's words", "[nn][pool][errors]") {
  const Tensor x = randn_on({2, 3, 5, 5}, device);
  REQUIRE_THROWS_WITH(max_pool2d(x, 0), Contains("stride should not be zero"));
  REQUIRE_THROWS_WITH(max_pool2d(x, 0, 1), Contains("kernel size should be greater than zero, but got kH: 0 kW: 0"));
  REQUIRE_THROWS_WITH(avg_pool2d(x, {0, 2}, 1),
                      Contains("kernel size should be greater than zero, but got kH: 0 kW: 2"));
  REQUIRE_THROWS_WITH(max_pool2d(x, 2, -1), Contains("stride should be greater than zero, but got dH: -1 dW: -1"));
  REQUIRE_THROWS_WITH(max_pool2d(x, 2, {}, 0, 0),
                      Contains("dilation should be greater than zero, but got dilationH: 0 dilationW: 0"));
  REQUIRE_THROWS_WITH(max_pool2d(x, 3, {}, 2), Contains("pad should be at most half of kernel size, but got pad=2 "
                                                        "and kernel_size=3"));
  REQUIRE_THROWS_WITH(avg_pool2d(x, 2, {}, {1, 2}), Contains("pad should be at most half of kernel size, but got "
                                                             "pad=2 and kernel_size=2"));
  REQUIRE_THROWS_WITH(max_pool2d(x, 3, {}, -1), Contains("pad must be non-negative, but got pad: -1"));
  REQUIRE_THROWS_WITH(max_pool2d(randn_on({2, 3, 1, 1}, device), 3),
                      Contains("Given input size: (3x1x1). Calculated output size: (3x0x0). Output size is too small"));
  REQUIRE_THROWS_WITH(avg_pool2d(randn_on({2, 3, 1, 1}, device), 3), Contains("Output size is too small"));
  REQUIRE_THROWS_WITH(max_pool2d(randn_on({5, 5}, device), 2),
                      Contains("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but "
                               "got:[5, 5]"));
  REQUIRE_THROWS_WITH(avg_pool2d(randn_on({2, 0, 5, 5}, device), 2),
                      Contains("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but "
                               "got:[2, 0, 5, 5]"));
  REQUIRE_THROWS_WITH(max_pool2d(randn_on({2, 3, 0, 5}, device), 2), Contains("but got:[2, 3, 0, 5]"));
  REQUIRE_THROWS_WITH(max_pool2d(x, {2, 2, 2}),
                      "max_pool2d: kernel_size must either be a single int, or a tuple of two ints, but got "
                      "kernel_size=[2, 2, 2]");
  REQUIRE_THROWS_AS(max_pool2d(x, {2, 2, 2}), ValueError);
  REQUIRE_THROWS_WITH(avg_pool2d(x, 2, {1, 1, 1}),
                      "avg_pool2d: stride must either be omitted, a single int, or a tuple of two ints, but got "
                      "stride=[1, 1, 1]");
  REQUIRE_THROWS_WITH(avg_pool2d(x, 2, {}, {1, 1, 1}),
                      Contains("avg_pool2d: padding must either be a single int, or a tuple of two ints"));
  REQUIRE_THROWS_WITH(max_pool2d(x, 2, {}, 0, {1, 1, 1}),
                      Contains("max_pool2d: dilation must either be a single int, or a tuple of two ints"));
  REQUIRE_THROWS_WITH(max_pool2d(x.to(kInt64), 2),
                      "\"max_pool2d\" not implemented for 'Long' (max_pool2d computes in a floating dtype on " +
                          device.str() + "; convert the input first, e.g. .to(kFloat32))");
  REQUIRE_THROWS_AS(max_pool2d(x.to(kInt64), 2), NotImplementedError);
  REQUIRE_THROWS_WITH(avg_pool2d(x.to(kInt32), 2), Contains("\"avg_pool2d\" not implemented for 'Int'"));
  REQUIRE_THROWS_WITH(avg_pool2d(x, 2, {}, 0, false, true, 0), Contains("divisor must be not zero"));
  REQUIRE_THROWS_WITH(adaptive_avg_pool2d(x, {-1, 2}),
                      Contains("adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but "
                               "received {-1, 2}"));
  REQUIRE_THROWS_WITH(adaptive_avg_pool2d(x, {1, 2, 3}),
                      "adaptive_avg_pool2d: output_size must be 2 (or one value for both dims), but got "
                      "output_size=[1, 2, 3]");
  REQUIRE_THROWS_AS(adaptive_avg_pool2d(x, {1, 2, 3}), ValueError);
  REQUIRE_THROWS_WITH(adaptive_avg_pool2d(randn_on({5, 5}, device), 2),
                      Contains("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [5, 5]"));
  REQUIRE_THROWS_WITH(adaptive_avg_pool2d(randn_on({2, 3, 0, 5}, device), 2),
                      Contains("adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
                               "but input has sizes [2, 3, 0, 5] with dimension 2 being empty"));
  REQUIRE_THROWS_WITH(adaptive_avg_pool2d(x.to(kUInt8), 2),
                      Contains("\"adaptive_avg_pool2d\" not implemented for 'Byte'"));
  REQUIRE_THROWS_WITH(max_pool2d(Tensor(), 2), Contains("max_pool2d: argument 'input' is an undefined tensor"));
}

// ---------------------------------------------------------------- modules

namespace {
std::string printed(const nn::Module& m) {
  std::ostringstream s;
  s << m;
  return s.str();
}
}  // namespace

TEST_CASE("Conv2d: parameters, PyTorch's initialisation and printing", "[nn][conv][module]") {
  manual_seed(1);
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3).padding(1));
  CHECK(conv->weight.sizes() == IntArrayRef({8, 3, 3, 3}));
  CHECK(conv->bias.sizes() == IntArrayRef({8}));
  CHECK(conv->weight.requires_grad());
  const OrderedDict<std::string, Tensor> params = conv->named_parameters();
  CHECK(params.keys() == std::vector<std::string>{"weight", "bias"});
  // Both U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 3 * 3 * 3.
  const double bound = 1 / std::sqrt(27.0);
  CHECK(conv->weight.abs().max().item<double>() <= bound);
  CHECK(conv->weight.abs().max().item<double>() > 0.9 * bound);
  CHECK(conv->bias.abs().max().item<double>() <= bound);
  CHECK(printed(*conv) == "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");

  nn::Conv2d grouped(nn::Conv2dOptions(4, 8, {3, 5}).stride(2).dilation(2).groups(2).bias(false));
  CHECK(grouped->weight.sizes() == IntArrayRef({8, 2, 3, 5}));
  CHECK_FALSE(grouped->bias.defined());
  CHECK(grouped->named_parameters().keys() == std::vector<std::string>{"weight"});
  CHECK(grouped->weight.abs().max().item<double>() <= 1 / std::sqrt(30.0));
  CHECK(printed(*grouped) == "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), dilation=(2, 2), groups=2, bias=false)");
  CHECK(printed(*nn::Conv2d(nn::Conv2dOptions(4, 8, 3).padding("same"))) ==
        "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=same)");
  CHECK(printed(*nn::Conv2d(nn::Conv2dOptions(4, 8, 2).padding(kValid))) ==
        "Conv2d(4, 8, kernel_size=(2, 2), stride=(1, 1), padding=valid)");
  CHECK(printed(*nn::Conv2d(nn::Conv2dOptions(4, 8, 2).padding({0, 1}))) ==
        "Conv2d(4, 8, kernel_size=(2, 2), stride=(1, 1), padding=(0, 1))");
  CHECK(printed(*nn::Conv2d(1, 32, 3)) == "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))");

  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::MaxPool2d(2),
                     nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(1).padding(1)), nn::AdaptiveAvgPool2d(1));
  CHECK(printed(*net) ==
        "Sequential(\n"
        "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)\n"
        "  (2): AvgPool2d(kernel_size=3, stride=1, padding=1)\n"
        "  (3): AdaptiveAvgPool2d(output_size=1)\n"
        ")");
  CHECK(net->forward(randn({2, 1, 8, 8})).sizes() == IntArrayRef({2, 4, 1, 1}));
}

TEST_CASE("Conv2d's option errors", "[nn][conv][module][errors]") {
  REQUIRE_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).groups(2)), Contains("in_channels must be divisible by "
                                                                                 "groups"));
  REQUIRE_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(4, 6, 3).groups(4)),
                      Contains("out_channels must be divisible by groups"));
  REQUIRE_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(4, 8, 3).groups(0)), Contains("groups must be a positive integer"));
  REQUIRE_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(-1, 8, 3)),
                      Contains("Conv2d: in_channels and out_channels must be non-negative, got -1 and 8"));
  REQUIRE_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(4, 8, {3, 0})),
                      Contains("Conv2d: kernel_size must be positive, got (3, 0)"));
  REQUIRE_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(4, 8, 3).stride(2).padding(kSame)),
                      Contains("padding='same' is not supported for strided convolutions"));
  REQUIRE_THROWS_WITH(nn::Conv2d(nn::Conv2dOptions(4, 8, 3).padding_mode(kReflect)),
                      Contains("Conv2d: padding_mode='reflect' is not implemented in Tandem, only 'zeros'"));
  REQUIRE_THROWS_AS(nn::Conv2d(nn::Conv2dOptions(4, 8, 3).padding_mode(kCircular)), NotImplementedError);
  REQUIRE_THROWS_WITH(nn::Conv2dOptions(4, 8, 3).padding("foo"),
                      Contains("Invalid padding string 'foo', should be one of {'valid', 'same'}"));
  REQUIRE_THROWS_WITH(nn::Conv2dOptions(4, 8, {3, 3, 3}),
                      Contains("expected one value for both dims or two values {h, w}, but got 3 values"));
}

TEST_CASE("Pooling modules: forward is the functional, PyTorch's printing", "[nn][pool][module]") {
  manual_seed(2);
  const Tensor x = randn({2, 3, 7, 6});
  nn::MaxPool2d max_pool(nn::MaxPool2dOptions({2, 3}).stride(1).padding(1).dilation(2).ceil_mode(true));
  CHECK(printed(*max_pool) == "MaxPool2d(kernel_size=(2, 3), stride=1, padding=1, dilation=2, ceil_mode=true)");
  test::check_equal(max_pool(x), max_pool2d(x, {2, 3}, 1, 1, 2, true));
  auto [values, indices] = max_pool->forward_with_indices(x);
  test::check_equal(indices, std::get<1>(max_pool2d_with_indices(x, {2, 3}, 1, 1, 2, true)));
  nn::AvgPool2d avg_pool(nn::AvgPool2dOptions(3).stride(2).padding(1).count_include_pad(false).divisor_override(4));
  CHECK(printed(*avg_pool) == "AvgPool2d(kernel_size=3, stride=2, padding=1)");
  test::check_equal(avg_pool(x), avg_pool2d(x, 3, 2, 1, false, false, 4));
  nn::AdaptiveAvgPool2d adaptive(nn::AdaptiveAvgPool2dOptions({5, 7}));
  CHECK(printed(*adaptive) == "AdaptiveAvgPool2d(output_size=(5, 7))");
  test::check_equal(adaptive(x), adaptive_avg_pool2d(x, {5, 7}));
  CHECK(printed(*nn::MaxPool2d(3)) == "MaxPool2d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=false)");
  CHECK(nn::MaxPool2d(2)->parameters().empty());
}

DEVICE_TEST_CASE("Conv2d moves with to(device) and names its weight when the input is elsewhere",
                 "[nn][conv][module][device]") {
  manual_seed(4);
  nn::Conv2d conv(nn::Conv2dOptions(2, 3, 3).padding(1));
  const Tensor x_cpu = randn({2, 2, 5, 5}), y_cpu = conv(x_cpu);
  conv->to(device);
  CHECK(conv->weight.device() == device);
  CHECK(conv->bias.device() == device);
  const Tensor y = conv(x_cpu.to(device));
  CHECK(y.device() == device);
  test::check_close(y, y_cpu);
  y.sum().backward();
  CHECK(conv->weight.grad().device() == device);
  CHECK(conv->bias.grad().device() == device);
  if (auto other = test::other_device(device)) {
    std::string message;
    try {
      conv(x_cpu.to(*other));
    } catch (const DeviceError& e) {
      message = e.what();
    }
    CHECK_THAT(message,
               Contains("Expected all tensors to be on the same device, but found at least two devices, " +
                        device.str() + " and " + other->str() + "! (when checking argument 'input' of conv2d)"));
    CHECK_THAT(message, Contains("weight is on " + device.str()));
  }
}

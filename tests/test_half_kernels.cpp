// Float16 and bfloat16 kernels on every device against the float32 cpu result
// from the same rounded inputs, within one stated bound (half_bound): the
// forward ops, the backward passes and the optimizer steps of a training step.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"

using namespace tandem;
namespace F = tandem::nn::functional;

namespace {

constexpr Dtype kHalfDtypes[] = {kFloat16, kBFloat16};

// The bound of every comparison in this file, for a result of a dtype with
// unit roundoff u (2^-11 float16, 2^-8 bfloat16, 2^-24 float32):
//
//   |got - ref| <= c * (u * (|ref| + scale) + tiny) + 2 * k * 2^-24 * scale,   c = 4
//
// - A 16-bit kernel loads its inputs into float32, computes there and rounds
//   once on store: it is within u * |exact| of the exact result of its
//   inputs. The reference is float32 from the same rounded inputs. For an
//   elementwise op that is all: scale = 0, k = 1.
// - A reduction or GEMM of k terms errs in proportion to the sum of |terms|,
//   not to its result (which may cancel): scale is that sum. Each of the two
//   float32 accumulations, the kernel's and the reference's, is within
//   (k - 1) * 2^-24 * scale (recursive summation's worst case): the last
//   term, at most u * scale for a 16-bit result and k <= 4096.
// - An op built of several ops rounds intermediates to 16 bits (softmax's
//   output, which its backward reads; log_softmax's inside cross_entropy; an
//   optimizer's state), each within u of its own magnitude: scale also sums
//   those magnitudes.
// - c = 4: to first order the error is at most u times |ref| + scale, one u
//   per rounding counted there. The factor covers the second-order terms,
//   float32 transcendentals (a few float32 ulps: far below a 16-bit u), and
//   a chain of roundings on one element (mse_loss rounds d, d^2 and their
//   mean: 4u |ref|, against the 8u |ref| its bound allows).
// - tiny, the smallest subnormal: float16 rounds to absolute steps of 2^-24
//   below 2^-14.
//
// A kernel that accumulates a long row in a 16-bit running sum (which
// stalls), or reads an operand swapped, is far outside it: the last test
// case shows both. A 16-bit sum in a pairwise tree errs by at most log2(k)
// u * scale and may pass: the bound measures accuracy, not the kernel's
// order of additions.
constexpr double kBoundFactor = 4;

struct Roundoff {
  double u, tiny;
};
Roundoff roundoff(Dtype dtype) {
  if (dtype == kFloat16) return {0x1p-11, 0x1p-24};
  if (dtype == kBFloat16) return {0x1p-8, 0x1p-133};
  REQUIRE(dtype == kFloat32);
  return {0x1p-24, 0x1p-149};
}

// The element farthest outside the bound, as error / bound (NaN counts as
// infinitely far).
struct Excess {
  double ratio = 0, error = 0, bound = 0, got = 0, ref = 0;
  int64_t index = -1;
};

// got: the kernel's result (any device, 16-bit or float32); ref: float32 on
// the cpu; scale: float32 on the cpu, broadcast to ref's shape (undefined:
// 0); k: the terms each element accumulates (1: none).
Excess half_bound(const Tensor& got, const Tensor& ref, const Tensor& scale = {}, int64_t k = 1) {
  REQUIRE(got.sizes().vec() == ref.sizes().vec());
  const Roundoff r = roundoff(got.dtype());
  const std::vector<double> g = got.to_vector<double>(), e = ref.to_vector<double>();
  const std::vector<double> s =
      scale.defined() ? scale.expand(ref.sizes()).to_vector<double>() : std::vector<double>(e.size(), 0.0);
  Excess worst;
  for (size_t i = 0; i < e.size(); ++i) {
    const double bound =
        kBoundFactor * (r.u * (std::abs(e[i]) + s[i]) + r.tiny) + 2.0 * static_cast<double>(k) * 0x1p-24 * s[i];
    const double error = std::abs(g[i] - e[i]);
    const double ratio = std::isnan(error) ? std::numeric_limits<double>::infinity() : error / bound;
    if (ratio > worst.ratio || worst.index < 0) worst = {ratio, error, bound, g[i], e[i], static_cast<int64_t>(i)};
  }
  return worst;
}

void check_bound(const Tensor& got, const Tensor& ref, const Tensor& scale = {}, int64_t k = 1) {
  const Excess x = half_bound(got, ref, scale, k);
  std::ostringstream ss;
  ss.precision(9);
  ss << got.dtype() << " on " << got.device() << ": element " << x.index << " is " << x.got << ", float32 gives "
     << x.ref << ": error " << x.error << ", bound " << x.bound;
  INFO(ss.str());
  CHECK(x.ratio <= 1);
}

// Ops that only select or move values return the inputs' bits.
void check_exact(const Tensor& got, const Tensor& ref) { test::check_equal(got.to(kFloat32), ref); }

// Normal values (float32, cpu) of a fixed seed: mean + std * N(0, 1).
Tensor normal(IntArrayRef shape, uint64_t seed, double mean = 0, double std = 1) {
  Generator gen(seed);
  return randn(shape, gen) * std + mean;
}

// One input twice: rounded to dtype (16-bit, or float32 for a parameter
// that stays float32) on the device, and those values as float32 on the cpu
// (the reference's), so that only the kernel's own error is measured.
struct Rounded {
  Tensor half, ref;
};
Rounded rounded(const Tensor& x, Dtype dtype, Device device) {
  Tensor r = x.to(dtype);
  return {r.to(device).clone(), r.to(kFloat32)};
}
// The same as new leaves that require grad.
Rounded leaves(const Rounded& r) { return {r.half.detach().requires_grad_(), r.ref.detach().requires_grad_()}; }

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// fn of the 16-bit inputs against fn of the float32 ones, for an fn whose
// every output is a sum of products of input elements with non-negative
// coefficients (a GEMM, a convolution with its bias, a sum, a mean, an
// average pool): fn of the inputs' absolute values is then each output's
// sum of |terms|, the scale. k: the terms an output sums.
void check_linear_op(const Fn& fn, const std::vector<Rounded>& in, int64_t k, Dtype out_dtype, Device device) {
  std::vector<Tensor> half, ref, abs;
  for (const Rounded& r : in) {
    half.push_back(r.half);
    ref.push_back(r.ref);
    abs.push_back(r.ref.abs());
  }
  Tensor got = fn(half);
  CHECK(got.dtype() == out_dtype);
  CHECK(got.device() == device);
  check_bound(got, fn(ref), fn(abs), k);
}

// The gradients of such an fn with respect to every input, from grad_out
// into its output. Each gradient is again a sum of products with
// non-negative coefficients (of grad_out and the other inputs), so the
// gradients of fn at the absolute values, from |grad_out|, are their scales.
void check_linear_grads(const Fn& fn, const std::vector<Rounded>& in, const Rounded& grad_out, int64_t k,
                        Device device) {
  std::vector<Tensor> half, ref, abs;
  for (const Rounded& r : in) {
    half.push_back(r.half.detach().requires_grad_());
    ref.push_back(r.ref.detach().requires_grad_());
    abs.push_back(r.ref.abs().requires_grad_());
  }
  fn(half).backward(grad_out.half);
  fn(ref).backward(grad_out.ref);
  fn(abs).backward(grad_out.ref.abs());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("the gradient of input " << i);
    REQUIRE(half[i].grad().defined());
    CHECK(half[i].grad().dtype() == half[i].dtype());
    CHECK(half[i].grad().device() == device);
    check_bound(half[i].grad(), ref[i].grad(), abs[i].grad(), k);
  }
}

// Statistics of x (float32) over dims, kept: (x - mean) * invstd.
Tensor normalized(const Tensor& x, IntArrayRef dims, double eps, Tensor* invstd) {
  Tensor centered = x - x.mean(dims, true);
  *invstd = ((centered * centered).mean(dims, true) + eps).rsqrt();
  return centered * *invstd;
}

// log_softmax's backward, g - exp(z) * sum(g) over dim, reads its 16-bit
// output z (an absolute error u|z|, so exp(z) a relative one): its scale.
Tensor log_softmax_grad_scale(const Tensor& z, const Tensor& grad, int64_t dim) {
  return grad.abs() + z.exp() * (z.abs() + 1) * grad.abs().sum({dim}, true);
}

}  // namespace

// ---------------------------------------------------------------- forward

DEVICE_TEST_CASE("16-bit kernels: mm, matmul, bmm, linear and conv2d sum in float32", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded a = rounded(normal({5, 24}, 1), dtype, device);      // a: (5, 24)
    Rounded b = rounded(normal({24, 7}, 2), dtype, device);      // b: (24, 7)
    Rounded a3 = rounded(normal({3, 5, 24}, 3), dtype, device);  // a3: (3, 5, 24)
    Rounded b3 = rounded(normal({3, 24, 7}, 4), dtype, device);  // b3: (3, 24, 7)
    check_linear_op([](const auto& v) { return mm(v[0], v[1]); }, {a, b}, 24, dtype, device);
    check_linear_op([](const auto& v) { return matmul(v[0], v[1]); }, {a3, b}, 24, dtype, device);  // broadcast b
    check_linear_op([](const auto& v) { return bmm(v[0], v[1]); }, {a3, b3}, 24, dtype, device);
    Rounded w = rounded(normal({7, 24}, 5), dtype, device);  // w: (out, in)
    Rounded bias = rounded(normal({7}, 6), dtype, device);   // bias: (out)
    check_linear_op([](const auto& v) { return F::linear(v[0], v[1], v[2]); }, {a, w, bias}, 25, dtype, device);

    Rounded x = rounded(normal({2, 3, 9, 9}, 7), dtype, device);   // x: (N, C_in, H, W)
    Rounded wc = rounded(normal({4, 3, 3, 3}, 8), dtype, device);  // wc: (C_out, C_in, kH, kW)
    Rounded bc = rounded(normal({4}, 9), dtype, device);           // bc: (C_out)
    check_linear_op([](const auto& v) { return conv2d(v[0], v[1], v[2], 2, 1); }, {x, wc, bc}, 3 * 3 * 3 + 1, dtype,
                    device);
  }
}

DEVICE_TEST_CASE("16-bit kernels: relu, sigmoid, tanh and gelu round once", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = rounded(normal({6, 33}, 11, 0, 2.5), dtype, device);  // x: (6, 33)
    Tensor y = relu(x.half);
    CHECK(y.dtype() == dtype);
    check_exact(y, relu(x.ref));
    CHECK(x.half.sigmoid().dtype() == dtype);
    check_bound(x.half.sigmoid(), x.ref.sigmoid());
    check_bound(x.half.tanh(), x.ref.tanh());
    CHECK(gelu(x.half).dtype() == dtype);
    check_bound(gelu(x.half), gelu(x.ref));
    check_bound(gelu(x.half, "tanh"), gelu(x.ref, "tanh"));
  }
}

DEVICE_TEST_CASE("16-bit kernels: add, sub, mul and div broadcast and round once", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded a = rounded(normal({3, 4, 5}, 21), dtype, device);  // a: (3, 4, 5)
    Rounded b = rounded(normal({4, 1}, 22), dtype, device);     // b: (4, 1), broadcast over dims 0 and 2
    Tensor r = normal({5}, 23);
    Rounded d = rounded(r + r / r.abs() * 0.5, dtype, device);  // d: (5), |d| >= 0.5, a divisor
    Tensor sum = a.half + b.half;
    CHECK(sum.dtype() == dtype);
    CHECK(sum.sizes().vec() == Shape{3, 4, 5});
    check_bound(sum, a.ref + b.ref);
    check_bound(a.half - b.half, a.ref - b.ref);
    check_bound(b.half - a.half, b.ref - a.ref);
    check_bound(a.half * b.half, a.ref * b.ref);
    check_bound(a.half / d.half, a.ref / d.ref);
    Rounded den = rounded(normal({3, 4, 5}, 24).abs() + 0.5, dtype, device);  // den: (3, 4, 5), >= 0.5
    check_bound(d.half / den.half, d.ref / den.ref);
  }
}

DEVICE_TEST_CASE("16-bit kernels: softmax and log_softmax", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    // (4, 37) over either dim, and rows of 2000 (a CUDA block per row).
    const std::vector<std::pair<Shape, int64_t>> cases = {{{4, 37}, 1}, {{4, 37}, 0}, {{2, 2000}, 1}};
    for (const auto& [shape, dim] : cases) {
      INFO("shape (" << shape[0] << ", " << shape[1] << "), dim " << dim);
      Rounded x = rounded(normal(shape, 31, 0.5, 2), dtype, device);
      Tensor p = x.ref.softmax(dim), z = x.ref.log_softmax(dim);
      Tensor got = x.half.softmax(dim);
      CHECK(got.dtype() == dtype);
      // A quotient by a sum of positive terms: relative to p itself.
      check_bound(got, p, p, shape[dim]);
      // z = (x - max) - log(sum): the terms |x - max| and log(sum).
      Tensor centered = x.ref - x.ref.amax({dim}, true);
      Tensor lse = centered.exp().sum({dim}, true).log();
      got = x.half.log_softmax(dim);
      CHECK(got.dtype() == dtype);
      check_bound(got, z, centered.abs() + lse, shape[dim]);
    }
  }
}

DEVICE_TEST_CASE("16-bit kernels: sum and mean over rows of 4096 accumulate in float32", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    // Positive terms in [1, 5), where a 16-bit running sum stalls: past 4096
    // in float16 (and 512 in bfloat16) a term below 2 is under half a step.
    Rounded rows = rounded(normal({2, 4096}, 41).abs() + 1, dtype, device);  // rows: (2, 4096)
    Rounded cols = rounded(normal({4096, 3}, 42).abs() + 1, dtype, device);  // cols: (4096, 3), summed over dim 0
    Rounded mixed = rounded(normal({3, 4096}, 43), dtype, device);           // mixed: (3, 4096), both signs
    check_linear_op([](const auto& v) { return v[0].sum({1}); }, {rows}, 4096, dtype, device);
    check_linear_op([](const auto& v) { return v[0].mean({1}); }, {rows}, 4096, dtype, device);
    check_linear_op([](const auto& v) { return v[0].sum({0}); }, {cols}, 4096, dtype, device);
    check_linear_op([](const auto& v) { return v[0].mean({0}); }, {cols}, 4096, dtype, device);
    check_linear_op([](const auto& v) { return v[0].sum({1}); }, {mixed}, 4096, dtype, device);
    check_linear_op([](const auto& v) { return v[0].mean(); }, {rows}, 2 * 4096, dtype, device);
    // An explicit dtype gives float32, held to float32's roundoff.
    check_linear_op([](const auto& v) { return v[0].sum({1}, false, kFloat32); }, {rows}, 4096, kFloat32, device);
  }
}

DEVICE_TEST_CASE("16-bit kernels: cross_entropy, nll_loss and mse_loss", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = rounded(normal({8, 10}, 51, 0, 2), dtype, device);  // x: (N, C) logits
    Tensor target = test::make({3, 0, 9, 4, 4, 7, 1, 2}, {8}, kInt64);
    Tensor loss = F::cross_entropy(x.half, target.to(device));
    CHECK(loss.dtype() == dtype);
    CHECK(loss.dim() == 0);
    // The mean over n of lse_n - (x_t - max_n), log_softmax rounded to 16
    // bits on the way.
    Tensor centered = x.ref - x.ref.amax({1}, true);
    Tensor lse = centered.exp().sum({1}).log();
    Tensor picked = centered.gather(1, target.unsqueeze(1)).squeeze(1);
    check_bound(loss, F::cross_entropy(x.ref, target), (picked.abs() + lse).mean(), 10 + 8);

    Rounded logp = rounded(normal({8, 10}, 52).log_softmax(1), dtype, device);  // logp: (N, C) log-probabilities
    loss = F::nll_loss(logp.half, target.to(device));
    CHECK(loss.dtype() == dtype);
    Tensor ref = F::nll_loss(logp.ref, target);
    check_bound(loss, ref, ref.abs(), 8);  // a mean of terms of one sign

    Rounded a = rounded(normal({6, 7}, 53), dtype, device);  // a, b: (6, 7)
    Rounded b = rounded(normal({6, 7}, 54), dtype, device);
    loss = F::mse_loss(a.half, b.half);
    CHECK(loss.dtype() == dtype);
    ref = F::mse_loss(a.ref, b.ref);
    check_bound(loss, ref, ref, 42);  // a mean of positive terms
  }
}

DEVICE_TEST_CASE("16-bit kernels: batch_norm in training with float32 parameters and running statistics",
                 "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = rounded(normal({4, 3, 5, 5}, 61, 0.5, 1.5), dtype, device);  // x: (N, C, H, W)
    Tensor weight = normal({3}, 62, 1, 0.5), bias = normal({3}, 63);         // (C), float32
    Tensor running_mean = normal({3}, 64), running_var = normal({3}, 65).abs() + 0.5;
    Tensor mean_dev = running_mean.to(device).clone(), var_dev = running_var.to(device).clone();
    Tensor mean_ref = running_mean.clone(), var_ref = running_var.clone();
    Tensor y = batch_norm(x.half, weight.to(device), bias.to(device), mean_dev, var_dev, true, 0.1, 1e-5);
    CHECK(y.dtype() == dtype);
    Tensor ref = batch_norm(x.ref, weight, bias, mean_ref, var_ref, true, 0.1, 1e-5);
    Tensor invstd;
    Tensor xhat = normalized(x.ref, {0, 2, 3}, 1e-5, &invstd);
    const int64_t k = 4 * 5 * 5;  // values per channel
    check_bound(y, ref, (xhat * weight.view({1, 3, 1, 1})).abs() + bias.abs().view({1, 3, 1, 1}), k);
    // The statistics are float32 sums of the 16-bit values.
    CHECK(mean_dev.dtype() == kFloat32);
    CHECK(var_dev.dtype() == kFloat32);
    check_bound(mean_dev, mean_ref, running_mean.abs() * 0.9 + x.ref.abs().mean({0, 2, 3}) * 0.1, k);
    check_bound(var_dev, var_ref, var_ref, k);  // positive terms
  }
}

DEVICE_TEST_CASE("16-bit kernels: layer_norm with 16-bit or float32 parameters", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    for (Dtype param_dtype : {dtype, kFloat32}) {
      INFO(dtype << " input, " << param_dtype << " parameters");
      Rounded x = rounded(normal({6, 20}, 71, 0.3, 2), dtype, device);  // x: (rows, 20)
      Rounded w = rounded(normal({20}, 72, 1, 0.5), param_dtype, device);
      Rounded b = rounded(normal({20}, 73), param_dtype, device);
      Tensor y = layer_norm(x.half, {20}, w.half, b.half);
      CHECK(y.dtype() == dtype);
      Tensor invstd;
      Tensor xhat = normalized(x.ref, {1}, 1e-5, &invstd);
      check_bound(y, layer_norm(x.ref, {20}, w.ref, b.ref), (xhat * w.ref).abs() + b.ref.abs(), 20);
    }
  }
}

DEVICE_TEST_CASE("16-bit kernels: max_pool2d, avg_pool2d and adaptive_avg_pool2d", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = rounded(normal({2, 3, 9, 9}, 81), dtype, device);  // x: (N, C, H, W)
    Tensor y = max_pool2d(x.half, 3, 2, 1);
    CHECK(y.dtype() == dtype);
    check_exact(y, max_pool2d(x.ref, 3, 2, 1));
    check_linear_op([](const auto& v) { return avg_pool2d(v[0], 3, 2, 1); }, {x}, 9, dtype, device);
    check_linear_op([](const auto& v) { return adaptive_avg_pool2d(v[0], {4, 3}); }, {x}, 9 * 9, dtype, device);
  }
}

DEVICE_TEST_CASE("16-bit kernels: embedding and cat copy the values; cat with float32 gives float32",
                 "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded table = rounded(normal({10, 6}, 91), dtype, device);  // table: (num_embeddings, embedding_dim)
    Tensor indices = test::make({3, 0, 9, 3, 7, 1}, {2, 3}, kInt64);
    Tensor rows = embedding(table.half, indices.to(device));
    CHECK(rows.dtype() == dtype);
    check_exact(rows, embedding(table.ref, indices));

    Rounded a = rounded(normal({2, 3}, 92), dtype, device);  // a: (2, 3), b: (2, 5)
    Rounded b = rounded(normal({2, 5}, 93), dtype, device);
    Tensor c = normal({2, 4}, 94);  // c: (2, 4), float32
    Tensor joined = cat({a.half, b.half}, 1);
    CHECK(joined.dtype() == dtype);
    check_exact(joined, cat({a.ref, b.ref}, 1));
    joined = cat({a.half, c.to(device), b.half}, 1);  // promotes, as PyTorch's cat
    CHECK(joined.dtype() == kFloat32);
    check_exact(joined, cat({a.ref, c, b.ref}, 1));
  }
}

// ---------------------------------------------------------------- backward

DEVICE_TEST_CASE("16-bit kernels: linear and conv2d backward", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = rounded(normal({6, 20}, 101), dtype, device);  // x: (N, in)
    Rounded w = rounded(normal({8, 20}, 102), dtype, device);  // w: (out, in)
    Rounded b = rounded(normal({8}, 103), dtype, device);      // b: (out)
    Rounded g = rounded(normal({6, 8}, 104), dtype, device);   // g: (N, out)
    check_linear_grads([](const auto& v) { return F::linear(v[0], v[1], v[2]); }, {x, w, b}, g, 20, device);

    Rounded xc = rounded(normal({2, 3, 7, 7}, 105), dtype, device);  // xc: (N, C_in, H, W)
    Rounded wc = rounded(normal({4, 3, 3, 3}, 106), dtype, device);  // wc: (C_out, C_in, kH, kW)
    Rounded bc = rounded(normal({4}, 107), dtype, device);           // bc: (C_out)
    Rounded gc = rounded(normal({2, 4, 4, 4}, 108), dtype, device);  // gc: (N, C_out, OH, OW), stride 2, padding 1
    // grad_input sums C_out * kH * kW terms, grad_weight and grad_bias N * OH * OW.
    check_linear_grads([](const auto& v) { return conv2d(v[0], v[1], v[2], 2, 1); }, {xc, wc, bc}, gc, 36, device);
  }
}

DEVICE_TEST_CASE("16-bit kernels: relu, softmax and log_softmax backward", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = leaves(rounded(normal({4, 37}, 111, 0, 2), dtype, device));  // x: (4, 37)
    Rounded g = rounded(normal({4, 37}, 112), dtype, device);                // g: the gradient into the output
    relu(x.half).backward(g.half);
    relu(x.ref).backward(g.ref);
    CHECK(x.half.grad().dtype() == dtype);
    check_exact(x.half.grad(), x.ref.grad());

    // softmax: p * (g - sum(g * p)), p read back in 16 bits.
    x = leaves(x);
    x.half.softmax(1).backward(g.half);
    Tensor p = x.ref.softmax(1);
    p.backward(g.ref);
    CHECK(x.half.grad().dtype() == dtype);
    Tensor pa = p.detach().abs(), ga = g.ref.abs();
    check_bound(x.half.grad(), x.ref.grad(), pa * (ga + (ga * pa).sum({1}, true)), 37);

    x = leaves(x);
    x.half.log_softmax(1).backward(g.half);
    Tensor z = x.ref.log_softmax(1);
    z.backward(g.ref);
    CHECK(x.half.grad().dtype() == dtype);
    check_bound(x.half.grad(), x.ref.grad(), log_softmax_grad_scale(z.detach(), g.ref, 1), 37);
  }
}

DEVICE_TEST_CASE("16-bit kernels: cross_entropy backward", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = leaves(rounded(normal({8, 10}, 121, 0, 2), dtype, device));  // x: (N, C) logits
    Tensor target = test::make({3, 0, 9, 4, 4, 7, 1, 2}, {8}, kInt64);
    F::cross_entropy(x.half, target.to(device)).backward();
    F::cross_entropy(x.ref, target).backward();
    CHECK(x.half.grad().dtype() == dtype);
    // (softmax(x) - onehot) / N: log_softmax's backward from -onehot / N.
    Tensor g = one_hot(target, 10).to(kFloat32) * (-1.0 / 8);
    check_bound(x.half.grad(), x.ref.grad(), log_softmax_grad_scale(x.ref.detach().log_softmax(1), g, 1), 10);
  }
}

DEVICE_TEST_CASE("16-bit kernels: batch_norm backward with float32 parameters", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = leaves(rounded(normal({4, 3, 5, 5}, 131, 0.5, 1.5), dtype, device));  // x: (N, C, H, W)
    Rounded g = rounded(normal({4, 3, 5, 5}, 132), dtype, device);                    // g: the gradient into y
    Tensor weight = normal({3}, 133, 1, 0.5), bias = normal({3}, 134);                // (C), float32
    Rounded w{weight.to(device).clone().requires_grad_(), weight.clone().requires_grad_()};
    Rounded b{bias.to(device).clone().requires_grad_(), bias.clone().requires_grad_()};
    Tensor mean_dev = zeros({3}, TensorOptions().device(device)), var_dev = ones({3}, TensorOptions().device(device));
    Tensor mean_ref = zeros({3}), var_ref = ones({3});
    batch_norm(x.half, w.half, b.half, mean_dev, var_dev, true).backward(g.half);
    batch_norm(x.ref, w.ref, b.ref, mean_ref, var_ref, true).backward(g.ref);
    CHECK(x.half.grad().dtype() == dtype);
    CHECK(w.half.grad().dtype() == kFloat32);
    CHECK(b.half.grad().dtype() == kFloat32);
    // grad_x = weight * invstd * (g - mean(g) - xhat * mean(g * xhat)) over
    // (N, H, W); grad_weight = sum(g * xhat); grad_bias = sum(g).
    Tensor invstd;
    Tensor xhat = normalized(x.ref.detach(), {0, 2, 3}, 1e-5, &invstd).abs();
    Tensor ga = g.ref.abs();
    Tensor scale = weight.abs().view({1, 3, 1, 1}) * invstd *
                   (ga + ga.mean({0, 2, 3}, true) + xhat * (ga * xhat).mean({0, 2, 3}, true));
    const int64_t k = 4 * 5 * 5;
    check_bound(x.half.grad(), x.ref.grad(), scale, k);
    check_bound(w.half.grad(), w.ref.grad(), (ga * xhat).sum({0, 2, 3}), k);
    check_bound(b.half.grad(), b.ref.grad(), ga.sum({0, 2, 3}), k);
  }
}

DEVICE_TEST_CASE("16-bit kernels: layer_norm backward", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = leaves(rounded(normal({6, 20}, 141, 0.3, 2), dtype, device));  // x: (rows, 20)
    Rounded w = leaves(rounded(normal({20}, 142, 1, 0.5), dtype, device));     // w, b: (20)
    Rounded b = leaves(rounded(normal({20}, 143), dtype, device));
    Rounded g = rounded(normal({6, 20}, 144), dtype, device);  // g: the gradient into y
    layer_norm(x.half, {20}, w.half, b.half).backward(g.half);
    layer_norm(x.ref, {20}, w.ref, b.ref).backward(g.ref);
    // grad_x = invstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w,
    // over each row; grad_w = sum over rows of g * xhat; grad_b = sum of g.
    Tensor invstd;
    Tensor xhat = normalized(x.ref.detach(), {1}, 1e-5, &invstd).abs();
    Tensor ga = g.ref.abs(), gwa = ga * w.ref.detach().abs();
    Tensor scale = invstd * (gwa + gwa.mean({1}, true) + xhat * (gwa * xhat).mean({1}, true));
    for (const Tensor& t : {x.half, w.half, b.half}) CHECK(t.grad().dtype() == dtype);
    check_bound(x.half.grad(), x.ref.grad(), scale, 20);
    check_bound(w.half.grad(), w.ref.grad(), (ga * xhat).sum({0}), 6);
    check_bound(b.half.grad(), b.ref.grad(), ga.sum({0}), 6);
  }
}

DEVICE_TEST_CASE("16-bit kernels: max_pool2d backward sums overlapping windows", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded x = leaves(rounded(normal({2, 3, 9, 9}, 151), dtype, device));  // x: (N, C, H, W)
    Rounded g = rounded(normal({2, 3, 5, 5}, 152), dtype, device);          // g: (N, C, OH, OW)
    max_pool2d(x.half, 3, 2, 1).backward(g.half);
    max_pool2d(x.ref, 3, 2, 1).backward(g.ref);
    CHECK(x.half.grad().dtype() == dtype);
    // An input that is the maximum of several windows sums their g: the same
    // backward from |g| is the sum of |terms|.
    Tensor x_abs = x.ref.detach().requires_grad_();
    max_pool2d(x_abs, 3, 2, 1).backward(g.ref.abs());
    check_bound(x.half.grad(), x.ref.grad(), x_abs.grad(), 4);
  }
}

// ---------------------------------------------------------------- optimizers

DEVICE_TEST_CASE(
    "16-bit kernels: SGD with momentum and Adam (plain and fused) on 16-bit parameters against float32 copies",
    "[half_kernels]") {
  const double lr_sgd = 0.1, momentum = 0.9, lr_adam = 0.05;
  for (Dtype dtype : kHalfDtypes) {
    for (const std::string kind : {"SGD", "Adam", "fused Adam"}) {
      INFO(dtype << " " << kind);
      Rounded p = leaves(rounded(normal({6, 5}, 161), dtype, device));  // p: (6, 5), a parameter
      const bool adam = kind != "SGD";
      auto make = [&](const Tensor& param) -> std::unique_ptr<optim::Optimizer> {
        if (adam)
          return std::make_unique<optim::Adam>(std::vector<Tensor>{param},
                                               optim::AdamOptions(lr_adam).fused(kind == "fused Adam"));
        return std::make_unique<optim::SGD>(std::vector<Tensor>{param}, optim::SGDOptions(lr_sgd).momentum(momentum));
      };
      std::unique_ptr<optim::Optimizer> opt_half = make(p.half), opt_ref = make(p.ref);
      // Each step rounds p (u |p|) and the state. SGD: the buffer's rounding
      // errors decay by momentum and enter p times lr, so a step adds
      // |p| + lr * sum_j momentum^(k-j) |buf_j|. Adam: a step moves p by at
      // most about lr (|m_hat| <= sqrt(v_hat)), by a few u more with the
      // 16-bit moments, so a step adds |p| + lr.
      Tensor scale = zeros({6, 5}), buf, buf_abs = zeros({6, 5});
      for (int step = 1; step <= 4; ++step) {
        INFO("step " << step);
        // |grad| >= 0.5: (1 - beta2) * grad^2 stays a normal float16.
        Tensor r = normal({6, 5}, 170 + static_cast<uint64_t>(step));
        Rounded grad = rounded(r + r / r.abs() * 0.5, dtype, device);
        p.half.mutable_grad() = grad.half;
        p.ref.mutable_grad() = grad.ref;
        opt_half->step();
        opt_ref->step();
        if (adam) {
          scale = scale + p.ref.detach().abs() + lr_adam;
        } else {
          buf = step == 1 ? grad.ref : buf * momentum + grad.ref;
          buf_abs = buf_abs * momentum + buf.abs();
          scale = scale + p.ref.detach().abs() + buf_abs * lr_sgd;
        }
        CHECK(p.half.dtype() == dtype);
        CHECK(p.half.device() == device);
        check_bound(p.half, p.ref.detach(), scale);
      }
    }
  }
}

// ---------------------------------------------------------------- the bound can fail

TEST_CASE("16-bit kernels: the bound rejects a 16-bit running sum and a swapped operand", "[half_kernels]") {
  for (Dtype dtype : kHalfDtypes) {
    INFO(dtype);
    Rounded row = rounded(normal({4096}, 41).abs() + 1, dtype, Device(kCPU));  // row: (4096), as the sum case's
    // The row in a 16-bit running sum, rounded after each add: it stalls far
    // below the true sum, while Tandem's sum stays within the bound.
    float running = 0;
    for (float v : row.ref.to_vector<float>()) {
      running = dtype == kFloat16 ? static_cast<float>(Half(running + v)) : static_cast<float>(BFloat16(running + v));
    }
    Tensor naive = full({}, running, TensorOptions(dtype));
    const Excess stalled = half_bound(naive, row.ref.sum(), row.ref.abs().sum(), 4096);
    CHECK(stalled.ratio > 10);
    CHECK(half_bound(row.half.sum(), row.ref.sum(), row.ref.abs().sum(), 4096).ratio <= 1);

    Rounded a = rounded(normal({5, 24}, 1), dtype, Device(kCPU));   // as the GEMM case's
    Rounded b = rounded(normal({24, 24}, 2), dtype, Device(kCPU));  // square, so that b.t() fits
    const Tensor scale = mm(a.ref.abs(), b.ref.abs());
    CHECK(half_bound(mm(a.half, b.half), mm(a.ref, b.ref), scale, 24).ratio <= 1);
    CHECK(half_bound(mm(a.half, b.half.t()), mm(a.ref, b.ref), scale, 24).ratio > 1);
    Rounded c = rounded(normal({5, 24}, 3), dtype, Device(kCPU));  // c: (5, 24)
    CHECK(half_bound(a.half - c.half, a.ref - c.ref).ratio <= 1);
    CHECK(half_bound(c.half - a.half, a.ref - c.ref).ratio > 1);
  }
}

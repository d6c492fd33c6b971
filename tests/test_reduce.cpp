// Reductions and softmax: hand-computed values on every dtype, keepdim,
// negative and multiple dims, non-contiguous and expanded inputs, empty and
// 0-dim tensors, NaN handling, the accuracy of long float sums, the thread
// splits of the CPU engine, every error message, the fused softmax backward
// (detail::softmax_backward_data) against its composite formula, and the
// host-side planning of the CUDA reductions (kernels/cuda/reduce_plan.h).
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "helpers.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cuda/reduce_plan.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "tensor/core/shape.h"

using namespace tandem;
using test::check_values;
using test::make;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Shape shape(const Tensor& t) { return t.sizes().vec(); }

// 0, 1, ..., n-1 as a tensor of the given shape.
Tensor iota(IntArrayRef sizes, Dtype dtype, Device device) {
  std::vector<double> v(static_cast<size_t>(shape_numel(sizes)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return make(v, sizes, dtype, device);
}

// Runs a block with n CPU threads, so the engine's thread splits are taken
// even on a one-core machine.
struct Threads {
  explicit Threads(int n) { cpu::set_num_threads(n); }
  ~Threads() { cpu::set_num_threads(0); }
};

const Dtype kFloatDtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16};
const Dtype kAllDtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8};

}  // namespace

// ---------------------------------------------------------------- sum
DEVICE_TEST_CASE("sum over all dims, one dim, keepdim and negative dims", "[reduce][sum]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, dt, device);
    Dtype out_dt = is_floating_point(dt) ? dt : kInt64;
    Tensor all = x.sum();
    CHECK(all.dtype() == out_dt);
    CHECK(all.device() == x.device());
    CHECK(shape(all).empty());
    check_values(all, {21});
    check_values(x.sum({1}), {6, 15});
    CHECK(shape(x.sum({1})) == Shape{2});
    Tensor kept = x.sum({1}, true);
    CHECK(shape(kept) == Shape{2, 1});
    check_values(kept, {6, 15});
    check_values(x.sum({-2}), {5, 7, 9});
    check_values(x.sum({0, 1}), {21});
    check_values(sum(x, {-1, 0}, true), {21});
    CHECK(shape(sum(x, {-1, 0}, true)) == Shape{1, 1});
  }
}

DEVICE_TEST_CASE("sum of bool counts, and dtype converts the input first", "[reduce][sum]") {
  Tensor b = make({1, 0, 1, 1, 0, 1}, {2, 3}, kBool, device);
  CHECK(b.sum().dtype() == kInt64);
  check_values(b.sum(), {4});
  check_values(b.sum({0}), {2, 0, 2});
  Tensor i = make({1, 2, 3}, {3}, kInt32, device);
  Tensor d = i.sum(kFloat64);
  CHECK(d.dtype() == kFloat64);
  check_values(d, {6});
  Tensor i32 = sum(i, {0}, false, kInt32);
  CHECK(i32.dtype() == kInt32);
  check_values(i32, {6});
  Tensor f = make({1.5, 2.75}, {2}, kFloat32, device);
  CHECK(f.sum(kInt64).dtype() == kInt64);
  check_values(f.sum(kInt64), {3});  // 1 + 2: the input is converted first, as torch
  // uint8 sums to int64, so it does not wrap at 256.
  check_values(make({200, 100}, {2}, kUInt8, device).sum(), {300});
}

DEVICE_TEST_CASE("sum over several dims of a 3-d tensor", "[reduce][sum]") {
  // x[a][b][c] = 12a + 4b + c
  Tensor x = iota({2, 3, 4}, kFloat32, device);
  check_values(x.sum({0, 2}), {60, 92, 124});
  check_values(x.sum({2, 0}, true), {60, 92, 124});
  CHECK(shape(x.sum({2, 0}, true)) == Shape{1, 3, 1});
  check_values(x.sum({1}), {12, 15, 18, 21, 48, 51, 54, 57});
  check_values(x.sum({0, 1}), {60, 66, 72, 78});
  check_values(x.sum(), {276});
  check_values(x.to(kInt64).sum({0, 2}), {60, 92, 124});
}

DEVICE_TEST_CASE("sum of transposed, sliced, permuted and expanded inputs", "[reduce][sum]") {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor t = x.t();  // (3, 2): [[1, 4], [2, 5], [3, 6]]
  check_values(t.sum({0}), {6, 15});
  check_values(t.sum({1}), {5, 7, 9});
  check_values(t.sum(), {21});

  Tensor y = iota({2, 6}, kFloat64, device).slice(1, 0, 6, 2);  // [[0, 2, 4], [6, 8, 10]]
  CHECK_FALSE(y.is_contiguous());
  check_values(y.sum({1}), {6, 24});
  check_values(y.sum({0}), {6, 10, 14});
  check_values(y.sum(), {30});

  Tensor z = iota({2, 3, 4}, kInt64, device).permute({2, 0, 1});  // (4, 2, 3), z[c][a][b] = 12a + 4b + c
  check_values(z.sum({1}), {12, 20, 28, 14, 22, 30, 16, 24, 32, 18, 26, 34});
  check_values(z.sum({0, 2}), {66, 210});

  Tensor e = make({1, 2, 3}, {3}, kFloat32, device).expand({4, 3});
  check_values(e.sum({0}), {4, 8, 12});
  check_values(e.sum({1}), {6, 6, 6, 6});
  check_values(e.sum(), {24});
  Tensor col = make({1, 2}, {2, 1}, kInt32, device).expand({2, 5});
  check_values(col.sum({1}), {5, 10});
  check_values(col.sum({0}), {3, 3, 3, 3, 3});
}

DEVICE_TEST_CASE("sum of empty and 0-dim tensors", "[reduce][sum]") {
  Tensor e = zeros({0, 3}, TensorOptions(kFloat32).device(device));
  check_values(e.sum(), {0});
  CHECK(shape(e.sum({0})) == Shape{3});
  check_values(e.sum({0}), {0, 0, 0});
  CHECK(shape(e.sum({1})) == Shape{0});
  CHECK(shape(e.sum({1}, true)) == Shape{0, 1});
  check_values(zeros({0}, TensorOptions(kInt32).device(device)).sum(), {0});

  Tensor s = make({5}, {}, kFloat32, device);
  check_values(s.sum(), {5});
  CHECK(shape(s.sum({0})).empty());
  check_values(s.sum({-1}, true), {5});
  CHECK(shape(s.sum({-1}, true)).empty());
}

DEVICE_TEST_CASE("float16 and bfloat16 sums accumulate in float32", "[reduce][sum]") {
  // 2048 + 1 + ... is not representable in float16 step by step (spacing 2),
  // but the float32 accumulator keeps every 1.
  std::vector<double> v(2049, 1.0);
  v[0] = 2048;
  for (Dtype dt : {kFloat16, kBFloat16}) {
    INFO(dt);
    Tensor x = make(v, {2049}, dt, device);
    CHECK(x.sum().dtype() == dt);
    check_values(x.sum(), {4096}, test::Tolerance{0, 0});
    check_values(x.sum(kFloat32), {4096}, test::Tolerance{0, 0});
    check_values(make({0.1, 0.2, 0.3}, {3}, dt, device).sum(), {0.6});
  }
}

DEVICE_TEST_CASE("long float32 sums are accurate on every path", "[reduce][sum][accuracy]") {
  TensorOptions f32 = TensorOptions(kFloat32).device(device);
  check_values(ones({10000000}, f32).sum(), {1e7}, test::Tolerance{0, 0});
  // float(0.1) ten million times: a naive float loop drifts by about 10%.
  const double tenth = static_cast<double>(0.1f);
  check_values(full({10000000}, 0.1, f32).sum(), {1e7 * tenth}, test::Tolerance{1e-6, 0});
  for (int threads : {1, 4}) {
    INFO("threads " << threads);
    Threads guard(threads);
    // rows, one long fold split across threads
    check_values(full({3, 1000000}, 0.1, f32).sum({1}), std::vector<double>(3, 1e6 * tenth), test::Tolerance{1e-6, 0});
    // columns, few of them: row bands across threads
    check_values(full({1000000, 3}, 0.1, f32).sum({0}), std::vector<double>(3, 1e6 * tenth), test::Tolerance{1e-6, 0});
    // columns, many of them, over several outer outputs
    check_values(full({2, 20000, 100}, 0.1, f32).sum({1}), std::vector<double>(200, 2e4 * tenth),
                 test::Tolerance{1e-6, 0});
    // many short rows
    check_values(full({30000, 7}, 0.1, f32).sum({1}), std::vector<double>(30000, 7 * tenth), test::Tolerance{1e-6, 0});
    // a strided inner run (reduced dim 0 of a transposed tensor)
    check_values(full({300, 2000}, 0.1, f32).t().sum({1}), std::vector<double>(2000, 300 * tenth),
                 test::Tolerance{1e-6, 0});
  }
}

DEVICE_TEST_CASE("reductions of many dims", "[reduce][sum]") {
  // Size-1 dims cost nothing: 20 dims, 3 of them real.
  Shape sizes(20, 1);
  sizes[3] = 2;
  sizes[10] = 3;
  sizes[19] = 2;
  // Views only: the elementwise engine (copies) takes at most 16 dims.
  Tensor x = iota({2, 3, 2}, kFloat32, device).view(sizes);  // x[a][b][c] = 6a + 2b + c
  check_values(x.sum({3, -1}).reshape({-1}), {14, 22, 30});
  check_values(x.amax({10}, true).reshape({-1}), {4, 5, 10, 11});
  CHECK(shape(x.sum({0, 1, 2})).size() == 17);
  Tensor y = zeros({1 << 17}, TensorOptions(kFloat32).device(device)).view(Shape(17, 2));
  CHECK_THROWS_AS(y.sum(), ShapeError);
  CHECK_THROWS_WITH(y.sum({0}), Catch::StartsWith("reductions support at most 16 dimensions of size other than 1, "
                                                  "but the input has shape [2, 2, 2"));
}

// ---------------------------------------------------------------- mean, prod
DEVICE_TEST_CASE("mean on floating dtypes", "[reduce][mean]") {
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, dt, device);
    CHECK(x.mean().dtype() == dt);
    check_values(x.mean(), {3.5});
    check_values(x.mean({1}), {2, 5});
    check_values(x.mean({-2}, true), {2.5, 3.5, 4.5});
    CHECK(shape(x.mean({-2}, true)) == Shape{1, 3});
    check_values(x.t().mean({1}), {2.5, 3.5, 4.5});
    check_values(mean(x, {0, 1}), {3.5});
  }
  Tensor i = make({1, 2, 4}, {3}, kInt64, device);
  Tensor m = i.mean(kFloat32);
  CHECK(m.dtype() == kFloat32);
  check_values(m, {7.0 / 3});
  check_values(mean(i, {0}, false, kFloat64), {7.0 / 3});
  check_values(make({1, 2, 3}, {3}, kFloat16, device).mean(kFloat32), {2});
  // The mean of nothing is NaN; of a 0-dim tensor, its value.
  check_values(zeros({0}, TensorOptions(kFloat32).device(device)).mean(), {kNaN});
  check_values(zeros({0, 2}, TensorOptions(kFloat64).device(device)).mean({0}), {kNaN, kNaN});
  check_values(make({4}, {}, kFloat32, device).mean(), {4});
}

DEVICE_TEST_CASE("prod, whole tensor and along a dim", "[reduce][prod]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, dt, device);
    Dtype out_dt = is_floating_point(dt) ? dt : kInt64;
    CHECK(x.prod().dtype() == out_dt);
    check_values(x.prod(), {720});
    check_values(x.prod(1), {6, 120});
    check_values(x.prod(-2, true), {4, 10, 18});
    CHECK(shape(x.prod(-2, true)) == Shape{1, 3});
    check_values(x.t().prod(1), {4, 10, 18});
  }
  check_values(make({1, 0, 1}, {3}, kBool, device).prod(), {0});
  CHECK(make({1, 1}, {2}, kBool, device).prod().dtype() == kInt64);
  check_values(make({2, 3}, {2}, kInt32, device).prod(kFloat64), {6});
  check_values(prod(make({2, 3}, {2}, kInt32, device), 0, false, kInt32), {6});
  check_values(zeros({0, 2}, TensorOptions(kFloat32).device(device)).prod(), {1});
  check_values(zeros({0, 2}, TensorOptions(kInt64).device(device)).prod(0), {1, 1});
  check_values(make({-3}, {}, kFloat32, device).prod(0), {-3});
}

DEVICE_TEST_CASE("mean and prod errors", "[reduce][mean][errors]") {
  Tensor i = make({1, 2}, {2}, kInt64, device);
  CHECK_THROWS_AS(i.mean(), DtypeError);
  CHECK_THROWS_WITH(i.mean(), Catch::Contains("mean(): could not infer output dtype. Input dtype must be either a "
                                              "floating point or complex dtype. Got: Long (int64)") &&
                                  Catch::Contains("pass dtype=kFloat32"));
  CHECK_THROWS_WITH(make({1}, {1}, kBool, device).mean({0}), Catch::Contains("Got: Bool (bool)"));
  CHECK_THROWS_WITH(make({1}, {1}, kUInt8, device).mean(), Catch::Contains("Got: Byte (uint8)"));
  CHECK_THROWS_AS(make({1}, {1}, kFloat32, device).mean(kInt32), DtypeError);
  CHECK_THROWS_WITH(make({1}, {1}, kFloat32, device).mean(kInt32),
                    Catch::Contains("mean(): could not infer output dtype. Optional dtype must be either a floating "
                                    "point or complex dtype. Got: Int (int32)"));
  CHECK_THROWS_AS(i.prod(1), IndexError);
  CHECK_THROWS_WITH(i.prod(1), "prod: dimension out of range (expected to be in range of [-1, 0], but got 1)");
}

// ---------------------------------------------------------------- max, min, amax, amin
DEVICE_TEST_CASE("max and min of the whole tensor", "[reduce][max]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor x = make({3, 1, 4, 1, 5, 9, 2, 6}, {2, 4}, dt, device);
    Tensor mx = x.max();
    CHECK(mx.dtype() == dt);
    CHECK(shape(mx).empty());
    check_values(mx, {9});
    check_values(x.min(), {1});
    check_values(max(x.t()), {9});
    check_values(min(x.slice(1, 1, 4, 2)), {1});
  }
  check_values(make({0, 1, 0}, {3}, kBool, device).max(), {1});
  check_values(make({0, 1, 0}, {3}, kBool, device).min(), {0});
  check_values(make({-kInf, -kInf}, {2}, kFloat32, device).max(), {-kInf});
  check_values(make({7}, {}, kInt32, device).max(), {7});
  for (Dtype dt : kFloatDtypes) {
    check_values(make({1, kNaN, 3}, {3}, dt, device).max(), {kNaN});
    check_values(make({1, 3, kNaN}, {3}, dt, device).min(), {kNaN});
  }
}

DEVICE_TEST_CASE("max and min along a dim return values and first indices", "[reduce][max]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor x = make({1, 5, 5, 7, 2, 7}, {2, 3}, dt, device);
    auto [v, i] = x.max(1);
    CHECK(v.dtype() == dt);
    CHECK(i.dtype() == kInt64);
    CHECK(shape(v) == Shape{2});
    check_values(v, {5, 7});
    check_values(i, {1, 0});
    auto [v0, i0] = x.max(0);  // the columns path of the engine
    check_values(v0, {7, 5, 7});
    check_values(i0, {1, 0, 1});
    auto [w, j] = x.min(-1, true);
    CHECK(shape(w) == Shape{2, 1});
    CHECK(shape(j) == Shape{2, 1});
    check_values(w, {1, 2});
    check_values(j, {0, 1});
    auto [w0, j0] = min(x, 0);
    check_values(w0, {1, 2, 5});
    check_values(j0, {0, 1, 0});
    // Transposed: rows of x become columns.
    auto [vt, it] = max(x.t(), 0);
    check_values(vt, {5, 7});
    check_values(it, {1, 0});
  }
  // Ties everywhere: index 0.
  auto [tv, ti] = make({2, 2, 2, 2}, {4}, kFloat32, device).max(0);
  check_values(tv, {2});
  check_values(ti, {0});
  auto [ev, ei] = make({1, 2, 3}, {3}, kFloat32, device).expand({2, 3}).min(0);
  check_values(ev, {1, 2, 3});
  check_values(ei, {0, 0, 0});
}

DEVICE_TEST_CASE("max(dim) and min(dim): NaN wins with its first index", "[reduce][max][nan]") {
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    Tensor x = make({1, kNaN, 3, kNaN, 0, 2, 5, -1}, {2, 4}, dt, device);
    auto [v, i] = x.max(1);
    check_values(v, {kNaN, 5});
    check_values(i, {1, 2});
    auto [w, j] = x.min(1);
    check_values(w, {kNaN, -1});
    check_values(j, {1, 3});
    auto [v0, i0] = x.max(0);
    check_values(v0, {1, kNaN, 5, kNaN});
    check_values(i0, {0, 0, 1, 0});
  }
}

DEVICE_TEST_CASE("max(dim) of 0-dim and empty tensors", "[reduce][max]") {
  auto [v, i] = make({5}, {}, kFloat32, device).max(0);
  CHECK(shape(v).empty());
  check_values(v, {5});
  check_values(i, {0});
  auto [ve, ie] = zeros({0, 3}, TensorOptions(kFloat32).device(device)).max(1);
  CHECK(shape(ve) == Shape{0});
  CHECK(shape(ie) == Shape{0});
}

DEVICE_TEST_CASE("amax and amin over lists of dims", "[reduce][amax]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor x = iota({2, 3, 4}, dt, device);  // x[a][b][c] = 12a + 4b + c
    check_values(x.amax(), {23});
    check_values(x.amin(), {0});
    check_values(x.amax({0, 2}), {15, 19, 23});
    check_values(x.amin({-1, 0}, true), {0, 4, 8});
    CHECK(shape(x.amin({-1, 0}, true)) == Shape{1, 3, 1});
    check_values(amax(x, {1}), {8, 9, 10, 11, 20, 21, 22, 23});
    check_values(amin(x.permute({2, 0, 1}), {0}), {0, 4, 8, 12, 16, 20});
    CHECK(x.amax().dtype() == dt);
  }
  check_values(make({0, 1, 1, 0}, {2, 2}, kBool, device).amax({1}), {1, 1});
  check_values(make({0, 1, 1, 1}, {2, 2}, kBool, device).amin({1}), {0, 1});
  check_values(make({1, kNaN, 3, 4}, {2, 2}, kFloat32, device).amax({1}), {kNaN, 4});
  check_values(make({1, kNaN, 3, 4}, {2, 2}, kFloat64, device).amin({0}), {1, kNaN});
  check_values(make({2}, {}, kFloat32, device).amax({0}), {2});
  CHECK(shape(zeros({0, 3}, TensorOptions(kFloat32).device(device)).amax({1})) == Shape{0});
}

// The CPU engine folds amax and amin in 16 independent lanes and tracks NaN
// beside them: the extreme and any NaN must be found in every lane, in the
// tail past the last full round of lanes, in a strided row and across the
// threads' chunks of one long fold.
DEVICE_TEST_CASE("amax and amin find the extreme and NaN in every lane and the tail", "[reduce][amax][nan]") {
  const int64_t n = 16 * 3 + 5;
  std::vector<double> base(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) base[static_cast<size_t>(i)] = static_cast<double>((i * 7) % n + 1);  // 1..53
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    check_values(make(base, {n}, dt, device).amax(), {53});
    check_values(make(base, {n}, dt, device).amin(), {1});
    for (int64_t pos = 0; pos < n; ++pos) {
      INFO("position " << pos);
      std::vector<double> hi = base, lo = base;
      hi[static_cast<size_t>(pos)] = 100;
      lo[static_cast<size_t>(pos)] = 0;
      check_values(make(hi, {n}, dt, device).amax(), {100});
      check_values(make(hi, {n}, dt, device).max(), {100});
      check_values(make(lo, {n}, dt, device).amin(), {0});
      check_values(make(lo, {n}, dt, device).min(), {0});
    }
  }
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    for (int64_t pos = 0; pos < n; ++pos) {
      INFO("position " << pos);
      std::vector<double> v = base;
      v[static_cast<size_t>(pos)] = kNaN;
      Tensor x = make(v, {n}, dt, device);
      check_values(x.amax(), {kNaN});
      check_values(x.amin(), {kNaN});
      check_values(x.max(), {kNaN});
      check_values(x.min(), {kNaN});
      // Row 0 holds the NaN, row 1 does not: one fold per output row.
      std::vector<double> rows = v;
      rows.insert(rows.end(), base.begin(), base.end());
      Tensor r = make(rows, {2, n}, dt, device);
      check_values(r.amax({1}), {kNaN, 53});
      check_values(r.amin({1}), {kNaN, 1});
      // Every other element of a row twice as long: a strided fold.
      std::vector<double> wide(static_cast<size_t>(2 * n), -1000);
      for (int64_t i = 0; i < n; ++i) wide[static_cast<size_t>(2 * i)] = v[static_cast<size_t>(i)];
      Tensor s = make(wide, {2 * n}, dt, device).slice(0, 0, 2 * n, 2);
      check_values(s.amax(), {kNaN});
      check_values(s.amin(), {kNaN});
    }
    // Infinities are values, not NaN.
    check_values(make({1, kInf, -kInf, 2}, {4}, dt, device).amax(), {kInf});
    check_values(make({1, kInf, -kInf, 2}, {4}, dt, device).amin(), {-kInf});
  }
  // One long fold split across threads: a NaN in the last chunk and in the tail.
  for (int threads : {1, 4}) {
    INFO("threads " << threads);
    Threads guard(threads);
    std::vector<double> v(200003);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 1000);
    check_values(make(v, {200003}, kFloat32, device).amax(), {999});
    check_values(make(v, {200003}, kFloat64, device).amin(), {0});
    for (size_t pos : {size_t{170001}, size_t{200002}}) {
      INFO("NaN at " << pos);
      std::vector<double> w = v;
      w[pos] = kNaN;
      check_values(make(w, {200003}, kFloat32, device).amax(), {kNaN});
      check_values(make(w, {200003}, kFloat64, device).amin(), {kNaN});
    }
  }
}

DEVICE_TEST_CASE("argmax and argmin", "[reduce][argmax]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor x = make({3, 1, 4, 1, 5, 9}, {2, 3}, dt, device);
    Tensor a = x.argmax();
    CHECK(a.dtype() == kInt64);
    CHECK(shape(a).empty());
    check_values(a, {5});
    check_values(x.argmin(), {1});  // the first 1
    // Flattened in the logical order of a transposed view: [3, 1, 1, 5, 4, 9].
    check_values(x.t().argmax(), {5});
    check_values(x.t().argmin(), {1});
    check_values(x.argmax(0), {0, 1, 1});
    check_values(x.argmin(1), {1, 0});
    check_values(argmax(x, -1, true), {2, 2});
    CHECK(shape(argmax(x, -1, true)) == Shape{2, 1});
    Tensor k = argmin(x, std::nullopt, true);
    CHECK(shape(k) == Shape{1, 1});
    check_values(k, {1});
  }
  check_values(make({0, 1, 1}, {3}, kBool, device).argmax(), {1});
  check_values(make({1, kNaN, kNaN, 5}, {4}, kFloat32, device).argmax(), {1});
  check_values(make({1, kNaN, kNaN, -5}, {4}, kFloat16, device).argmin(), {1});
  check_values(make({7}, {}, kFloat32, device).argmax(), {0});
  check_values(make({7}, {}, kFloat32, device).argmin(0), {0});
}

DEVICE_TEST_CASE("arg reductions across threads keep the first occurrence", "[reduce][argmax]") {
  std::vector<double> v(200000, 0.0);
  v[150001] = 3;
  v[20000] = 3;
  v[90000] = -3;
  v[180000] = -3;
  for (int threads : {1, 4}) {
    INFO("threads " << threads);
    Threads guard(threads);
    Tensor x = make(v, {200000}, kFloat32, device);
    check_values(x.argmax(), {20000});
    check_values(x.argmin(), {90000});
    auto [cv, ci] = x.view({100000, 2}).max(0);  // few columns: row bands
    check_values(cv, {3, 3});
    check_values(ci, {10000, 75000});
    std::vector<double> n = v;
    n[170000] = kNaN;
    n[160000] = kNaN;
    check_values(make(n, {200000}, kFloat32, device).argmax(), {160000});
  }
}

DEVICE_TEST_CASE("max, min and arg errors", "[reduce][max][errors]") {
  Tensor e = zeros({0}, TensorOptions(kFloat32).device(device));
  CHECK_THROWS_AS(e.max(), ValueError);
  CHECK_THROWS_WITH(e.max(),
                    "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                    "reduction dim with the 'dim' argument.");
  CHECK_THROWS_WITH(e.min(), Catch::StartsWith("min(): Expected reduction dim to be specified"));
  Tensor e2 = zeros({0, 3}, TensorOptions(kFloat32).device(device));
  CHECK_THROWS_AS(e2.max(0), IndexError);
  CHECK_THROWS_WITH(e2.max(0), "max(): Expected reduction dim 0 to have non-zero size (input shape [0, 3])");
  CHECK_THROWS_WITH(e2.min(-2, true), Catch::StartsWith("min(): Expected reduction dim 0 to have non-zero size"));
  CHECK_THROWS_WITH(e2.amax(), Catch::StartsWith("amax(): Expected reduction dim 0 to have non-zero size"));
  CHECK_THROWS_WITH(e2.amin({0}), Catch::StartsWith("amin(): Expected reduction dim 0 to have non-zero size"));
  CHECK_THROWS_AS(e2.argmax(0), IndexError);
  CHECK_THROWS_WITH(e2.argmin(0), Catch::StartsWith("argmin(): Expected reduction dim 0 to have non-zero size"));
  CHECK_THROWS_AS(e2.argmax(), ValueError);
  CHECK_THROWS_WITH(e2.argmax(), "argmax(): Expected reduction dim to be specified for input.numel() == 0.");
  Tensor x = make({1, 2, 3, 4}, {2, 2}, kFloat32, device);
  CHECK_THROWS_AS(x.max(2), IndexError);
  CHECK_THROWS_WITH(x.max(2), "max: dimension out of range (expected to be in range of [-2, 1], but got 2)");
  CHECK_THROWS_WITH(x.argmin(-3), "argmin: dimension out of range (expected to be in range of [-2, 1], but got -3)");
  CHECK_THROWS_AS(x.amax({0, -2}), ValueError);
  CHECK_THROWS_WITH(x.amax({0, -2}), "amax: dim 0 appears multiple times in the list of dims");
  CHECK_THROWS_WITH(x.sum({1, 1}), "sum: dim 1 appears multiple times in the list of dims");
  CHECK_THROWS_WITH(x.mean({5}), "mean: dimension out of range (expected to be in range of [-2, 1], but got 5)");
  CHECK_THROWS_WITH(max(Tensor()), "max: argument 'self' is an undefined tensor (a default-constructed Tensor)");
  CHECK_THROWS_WITH(sum(Tensor()), Catch::StartsWith("sum: argument 'self' is an undefined tensor"));
}

// ---------------------------------------------------------------- var, std
DEVICE_TEST_CASE("var and std with corrections", "[reduce][var]") {
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    Tensor x = make({1, 2, 3, 4}, {4}, dt, device);
    CHECK(x.var().dtype() == dt);
    check_values(x.var(), {5.0 / 3});
    check_values(x.var({0}, 0), {1.25});
    check_values(x.std(), {std::sqrt(5.0 / 3)});
    check_values(tandem::std(x, {}, 0), {std::sqrt(1.25)});
    Tensor m = make({1, 2, 3, 4, 6, 8}, {2, 3}, dt, device);
    check_values(m.var({1}), {1, 4});
    check_values(m.var({-1}, 1, true), {1, 4});
    CHECK(shape(m.var({-1}, 1, true)) == Shape{2, 1});
    check_values(m.var({0}, 0), {2.25, 4, 6.25});
    check_values(m.t().std({0}), {1, 2});
    check_values(var(m, {0, 1}, 2), {34.0 / 4});  // mean 4, squared deviations sum to 34
  }
  // N - correction <= 0: nan when all deviations are 0, inf otherwise.
  check_values(make({5}, {1}, kFloat32, device).var(), {kNaN});
  check_values(make({1, 2}, {2}, kFloat32, device).var({0}, 3), {kInf});
  check_values(make({1, 1}, {2}, kFloat64, device).var({0}, 3), {kNaN});
  check_values(make({1, 2}, {2}, kFloat64, device).std({0}, 2), {kInf});
  check_values(zeros({0, 2}, TensorOptions(kFloat32).device(device)).var({0}), {kNaN, kNaN});
  check_values(make({1, kNaN, 3}, {3}, kFloat32, device).var(), {kNaN});
  check_values(make({3}, {}, kFloat64, device).var({}, 0), {0});
  check_values(make({1, 2, 3}, {3}, kFloat32, device).expand({2, 3}).var({1}), {1, 1});
}

DEVICE_TEST_CASE("var is stable for large offsets and long inputs", "[reduce][var][accuracy]") {
  // Mean 10 plus an offset, deviations -6, -3, 3, 6: var 30 whatever the offset.
  check_values(make({1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16}, {4}, kFloat64, device).var(), {30});
  check_values(make({10004, 10007, 10013, 10016}, {4}, kFloat32, device).var(), {30});
  std::vector<double> v(300000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1000 + (i % 2 ? 1.0 : -1.0);
  for (int threads : {1, 4}) {
    INFO("threads " << threads);
    Threads guard(threads);
    Tensor x = make(v, {300000}, kFloat32, device);
    check_values(x.var({0}, 0), {1});
    check_values(x.view({150000, 2}).var({0}, 0), {0, 0});
    check_values(x.view({150000, 2}).t().std({1}, 0), {0, 0});
    check_values(x.view({1000, 300}).var({1}, 0), std::vector<double>(1000, 1));
  }
}

DEVICE_TEST_CASE("var and std errors", "[reduce][var][errors]") {
  Tensor i = make({1, 2}, {2}, kInt64, device);
  CHECK_THROWS_AS(i.var(), DtypeError);
  CHECK_THROWS_WITH(i.var(),
                    "var(): std and var only support floating point and complex dtypes, but the input is "
                    "int64; convert it first, e.g. x.to(kFloat32)");
  CHECK_THROWS_WITH(make({1}, {1}, kBool, device).std(), Catch::StartsWith("std(): std and var only support"));
  CHECK_THROWS_WITH(make({1, 2}, {2}, kFloat32, device).var({1}),
                    "var: dimension out of range (expected to be in range of [-1, 0], but got 1)");
}

// ---------------------------------------------------------------- norm
DEVICE_TEST_CASE("vector norms of every order", "[reduce][norm]") {
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    Tensor x = make({3, -4, 0, 1, -2, 2}, {2, 3}, dt, device);
    check_values(x.norm(), {std::sqrt(34.0)});
    check_values(x.norm(2, {1}), {5, 3});
    check_values(x.norm(1, {1}), {7, 5});
    check_values(x.norm(kInf, {1}), {4, 2});
    check_values(x.norm(-kInf, {1}), {0, 1});
    check_values(x.norm(0, {1}), {2, 3});
    check_values(x.norm(3, {-1}, true), {std::cbrt(91.0), std::cbrt(17.0)});
    CHECK(shape(x.norm(3, {-1}, true)) == Shape{2, 1});
    check_values(x.norm(0.5, {0}),
                 {std::pow(std::sqrt(3.0) + 1, 2), std::pow(2 + std::sqrt(2.0), 2), std::pow(std::sqrt(2.0), 2)});
    check_values(norm(x.t(), 2, {0}), {5, 3});
    CHECK(x.norm().dtype() == dt);
  }
  check_values(make({kNaN, 1}, {2}, kFloat32, device).norm(kInf), {kNaN});
  check_values(make({1, 2}, {2}, kFloat32, device).expand({3, 2}).norm(1), {9});
  check_values(zeros({0, 2}, TensorOptions(kFloat32).device(device)).norm(2, {0}), {0, 0});
  check_values(make({-2}, {}, kFloat64, device).norm(), {2});
}

DEVICE_TEST_CASE("norm errors", "[reduce][norm][errors]") {
  CHECK_THROWS_AS(make({1, 2}, {2}, kInt64, device).norm(), DtypeError);
  CHECK_THROWS_WITH(make({1, 2}, {2}, kInt64, device).norm(),
                    "norm(): expected a floating point input, but got int64 (PyTorch: linalg.vector_norm: Expected "
                    "a floating point or complex tensor as input. Got Long); convert it first, e.g. x.to(kFloat32)");
  Tensor e = zeros({0, 2}, TensorOptions(kFloat32).device(device));
  CHECK_THROWS_AS(e.norm(kInf), ValueError);
  CHECK_THROWS_WITH(e.norm(kInf), Catch::StartsWith("norm(): linalg.vector_norm cannot compute the inf norm on an "
                                                    "empty tensor because the operation does not have an identity"));
  CHECK_THROWS_WITH(e.norm(-1, {0}), Catch::Contains("cannot compute the -1 norm on an empty tensor"));
  check_values(e.norm(kInf, {1}), {});  // nothing is reduced over an empty dim: no error
  CHECK_THROWS_AS(make({1}, {1}, kFloat32, device).norm(kNaN), ValueError);
  CHECK_THROWS_WITH(make({1}, {1}, kFloat32, device).norm(kNaN), "norm(): the order p must be a number, got nan");
}

// ---------------------------------------------------------------- logsumexp
DEVICE_TEST_CASE("logsumexp is stable", "[reduce][logsumexp]") {
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    Tensor x = make({1, 2, 3, 1000, 1000, -kInf}, {2, 3}, dt, device);
    CHECK(x.logsumexp({1}).dtype() == dt);
    check_values(x.logsumexp({1}), {3.4076059644443806, 1000.6931471805599});
    check_values(x.logsumexp({-1}, true), {3.4076059644443806, 1000.6931471805599});
    CHECK(shape(x.logsumexp({-1}, true)) == Shape{2, 1});
    check_values(x.logsumexp({0}), {1000, 1000, 3});
    check_values(x.t().logsumexp({0}), {3.4076059644443806, 1000.6931471805599});
  }
  check_values(make({-kInf, -kInf}, {2}, kFloat32, device).logsumexp({0}), {-kInf});
  check_values(make({kInf, kInf, 1}, {3}, kFloat32, device).logsumexp({0}), {kInf});
  check_values(make({1, kNaN, 1}, {3}, kFloat64, device).logsumexp({0}), {kNaN});
  check_values(zeros({0}, TensorOptions(kFloat32).device(device)).logsumexp({0}), {-kInf});
  check_values(make({2}, {}, kFloat32, device).logsumexp({0}), {2});
  Tensor i = make({0, 0, 0, 0}, {2, 2}, kInt64, device);
  CHECK(logsumexp(i, {0, 1}).dtype() == kFloat32);
  check_values(logsumexp(i, {0, 1}), {std::log(4.0)});
  check_values(make({1, 0}, {2}, kBool, device).logsumexp({0}), {std::log(std::exp(1.0) + 1)});
  // Long rows through the cascade and the thread split.
  Threads guard(4);
  check_values(zeros({200000}, TensorOptions(kFloat32).device(device)).logsumexp({0}), {std::log(200000.0)});
  check_values(zeros({100000, 3}, TensorOptions(kFloat32).device(device)).logsumexp({0}),
               std::vector<double>(3, std::log(100000.0)));
}

// ---------------------------------------------------------------- softmax
DEVICE_TEST_CASE("softmax and log_softmax along the last dim", "[reduce][softmax]") {
  const std::vector<double> p = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
  const std::vector<double> lp = {-2.4076059644443806, -1.4076059644443804, -0.40760596444438046};
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    // Shifting by the max makes large rows as good as small ones (1001 is not
    // a 16-bit float, 11 is).
    double big = is_reduced_float(dt) ? 10 : 1000;
    Tensor x = make({1, 2, 3, big + 1, big + 2, big + 3}, {2, 3}, dt, device);
    Tensor s = x.softmax(1);
    CHECK(s.dtype() == dt);
    CHECK(shape(s) == Shape{2, 3});
    std::vector<double> both = p;
    both.insert(both.end(), p.begin(), p.end());
    std::vector<double> lboth = lp;
    lboth.insert(lboth.end(), lp.begin(), lp.end());
    check_values(s, both);
    check_values(x.log_softmax(-1), lboth);
    check_values(softmax(x.t(), 0), {p[0], p[0], p[1], p[1], p[2], p[2]});
    check_values(log_softmax(x.t(), 0), {lp[0], lp[0], lp[1], lp[1], lp[2], lp[2]});
  }
}

DEVICE_TEST_CASE("softmax along inner and middle dims", "[reduce][softmax]") {
  const double a = 0.11920292202211755, b = 0.8807970779778823;
  Tensor x = make({1, 2, 3, 3, 2, 1}, {2, 3}, kFloat32, device);
  check_values(x.softmax(0), {a, 0.5, b, b, 0.5, a});
  check_values(x.log_softmax(-2), {std::log(a), std::log(0.5), std::log(b), std::log(b), std::log(0.5), std::log(a)});
  // (2, 2, 3) over the middle dim: outer 2, inner 3.
  Tensor y = make({1, 2, 3, 3, 2, 1, 0, 0, 0, 0, 0, 0}, {2, 2, 3}, kFloat64, device);
  check_values(y.softmax(1), {a, 0.5, b, b, 0.5, a, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5});
  check_values(y.permute({2, 0, 1}).softmax(2), {a, b, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, b, a, 0.5, 0.5});
  // 100 columns: one chunk of 64 and one of 36.
  Tensor z = zeros({4, 100}, TensorOptions(kFloat32).device(device));
  check_values(z.softmax(0), std::vector<double>(400, 0.25));
  check_values(z.log_softmax(0), std::vector<double>(400, std::log(0.25)));
  const double c = 0.2689414213699951, d = 0.7310585786300049;
  check_values(make({1, 2}, {2}, kFloat32, device).expand({3, 2}).softmax(1), {c, d, c, d, c, d});
}

DEVICE_TEST_CASE("softmax edge cases: infinities, NaN, 0-dim, empty, dtype", "[reduce][softmax]") {
  check_values(make({0, -kInf}, {2}, kFloat32, device).softmax(0), {1, 0});
  check_values(make({0, -kInf}, {2}, kFloat32, device).log_softmax(0), {0, -kInf});
  // As torch: an all -inf row, or one holding +inf or NaN, is all NaN.
  check_values(make({-kInf, -kInf}, {2}, kFloat32, device).softmax(0), {kNaN, kNaN});
  check_values(make({kInf, 1}, {2}, kFloat32, device).softmax(0), {kNaN, kNaN});
  check_values(make({kNaN, 1}, {2}, kFloat16, device).log_softmax(0), {kNaN, kNaN});
  Tensor s = make({5}, {}, kFloat32, device);
  check_values(s.softmax(0), {1});
  check_values(s.log_softmax(-1), {0});
  CHECK(shape(s.softmax(0)).empty());
  Tensor e = zeros({0, 3}, TensorOptions(kFloat32).device(device));
  CHECK(shape(e.softmax(1)) == Shape{0, 3});
  CHECK(shape(e.log_softmax(0)) == Shape{0, 3});
  Tensor i = make({1, 2, 3}, {3}, kInt64, device);
  Tensor si = i.softmax(0, kFloat32);
  CHECK(si.dtype() == kFloat32);
  check_values(si, {0.09003057317038046, 0.24472847105479767, 0.6652409557748219});
  Tensor h = make({1, 2, 3}, {3}, kFloat16, device).log_softmax(0, kFloat64);
  CHECK(h.dtype() == kFloat64);
  check_values(h, {-2.4076059644443806, -1.4076059644443804, -0.40760596444438046});
  // Long rows across threads.
  Threads guard(4);
  Tensor big = zeros({3, 50000}, TensorOptions(kFloat32).device(device));
  check_values(big.softmax(1), std::vector<double>(150000, 1.0 / 50000));
  check_values(big.log_softmax(0), std::vector<double>(150000, std::log(1.0 / 3)));
}

DEVICE_TEST_CASE("softmax errors", "[reduce][softmax][errors]") {
  Tensor i = make({1, 2}, {2}, kInt64, device);
  CHECK_THROWS_AS(i.softmax(0), DtypeError);
  CHECK_THROWS_WITH(i.softmax(0),
                    "softmax(): needs a floating dtype to compute in, but got int64 (the input's "
                    "dtype); PyTorch fails with \"softmax_lastdim_kernel_impl\" not implemented for "
                    "'Long'. Pass dtype=kFloat32, e.g. x.softmax(0, kFloat32)");
  CHECK_THROWS_WITH(make({1}, {1}, kFloat32, device).log_softmax(-1, kInt32),
                    Catch::StartsWith("log_softmax(): needs a floating dtype to compute in, but got int32 (the dtype "
                                      "argument)"));
  CHECK_THROWS_WITH(make({1}, {1}, kBool, device).log_softmax(0), Catch::Contains("'Bool'"));
  CHECK_THROWS_AS(make({1, 2}, {2}, kFloat32, device).softmax(1), IndexError);
  CHECK_THROWS_WITH(make({1, 2}, {2}, kFloat32, device).softmax(1),
                    "softmax: dimension out of range (expected to be in range of [-1, 0], but got 1)");
  CHECK_THROWS_WITH(make({1}, {}, kFloat32, device).log_softmax(1),
                    "log_softmax: dimension out of range (expected to be in range of [-1, 0], but got 1)");
}

// ---------------------------------------------------------------- softmax backward
namespace {

// n values in [lo, hi) from a fixed seed.
std::vector<double> uniform_values(int64_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

// The composite formula the fused op replaces, in float64 on the values of
// grad and output (as the autograd rule writes it when it records).
Tensor composite_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, bool log) {
  const Tensor g = grad.to(kFloat64), y = output.to(kFloat64);
  if (log) return g - exp(y) * g.sum({dim}, /*keepdim=*/true);
  return y * (g - (g * y).sum({dim}, /*keepdim=*/true));
}

// detail::softmax_backward_data against the composite, to the dtype's tolerance.
void check_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, bool log) {
  INFO((log ? "log_softmax" : "softmax") << " backward over dim " << dim << " of " << shape_str(output.sizes())
                                         << ", grad strides " << shape_str(grad.strides()) << ", output strides "
                                         << shape_str(output.strides()) << ", " << output.dtype());
  Tensor got = detail::softmax_backward_data(grad, output, dim, log);
  CHECK(got.dtype() == output.dtype());
  CHECK(got.device() == output.device());
  CHECK(got.is_contiguous());
  test::check_close(got, composite_softmax_backward(grad, output, dim, log));
}

}  // namespace

DEVICE_TEST_CASE("softmax_backward_data: hand-computed values", "[reduce][softmax][backward]") {
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    Tensor y = make({0.25, 0.75, 0.5, 0.5}, {2, 2}, dt, device);
    Tensor g = make({1, 0, 2, -2}, {2, 2}, dt, device);
    // Rows: sum(g * y) = 0.25 and 0, so y * (g - sum) = [0.1875, -0.1875] and [1, -1].
    check_values(detail::softmax_backward_data(g, y, 1, false), {0.1875, -0.1875, 1, -1});
    // Columns: sums 1.25 and -1: [0.25 * -0.25, 0.75 * 1] over [0.5 * 0.75, 0.5 * -1].
    check_values(detail::softmax_backward_data(g, y, 0, false), {-0.0625, 0.75, 0.375, -0.5});
    // log_softmax, out = log(y): g - y * sum(g), sums 1 and 0 over the rows, 3 and -2 over the columns.
    Tensor out = make({std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)}, {2, 2}, dt, device);
    check_values(detail::softmax_backward_data(g, out, -1, true), {0.75, -0.75, 2, -2});
    check_values(detail::softmax_backward_data(g, out, 0, true), {1 - 0.75, 0 + 1.5, 2 - 1.5, -2 + 1});
  }
}

DEVICE_TEST_CASE("softmax_backward_data matches the composite formula on every dim and layout",
                 "[reduce][softmax][backward]") {
  for (Dtype dt : kFloatDtypes) {
    for (bool log : {false, true}) {
      auto forward = [&](const Tensor& x, int64_t dim) { return log ? x.log_softmax(dim) : x.softmax(dim); };
      // (3, 5, 7): the last dim (rows), the first and the middle one (an inner dim after it).
      Tensor x = make(uniform_values(105, -4, 4, 1), {3, 5, 7}, dt, device);
      Tensor g = make(uniform_values(105, -1, 1, 2), {3, 5, 7}, dt, device);
      for (int64_t dim : {2, 0, 1, -1, -3}) check_softmax_backward(g, forward(x, dim), dim, log);
      // Non-contiguous: a permuted output, a grad sliced out of a wider tensor
      // (a storage offset and strided rows), an expanded grad (stride 0).
      Tensor xt = make(uniform_values(105, -4, 4, 3), {7, 5, 3}, dt, device);
      Tensor g_wide = make(uniform_values(135, -1, 1, 4), {3, 5, 9}, dt, device).narrow(2, 1, 7);
      Tensor g_expanded = make(uniform_values(35, -1, 1, 5), {1, 5, 7}, dt, device).expand({3, 5, 7});
      Tensor g_transposed = make(uniform_values(105, -1, 1, 6), {3, 7, 5}, dt, device).transpose(1, 2);
      for (int64_t dim : {0, 1, 2}) {
        Tensor y = forward(xt, 2 - dim).permute({2, 1, 0});
        REQUIRE_FALSE(y.is_contiguous());
        check_softmax_backward(g_wide, y, dim, log);
        check_softmax_backward(g_expanded, y, dim, log);
        check_softmax_backward(g_transposed, forward(x, dim), dim, log);
      }
    }
  }
}

DEVICE_TEST_CASE("softmax_backward_data: long rows and columns across threads", "[reduce][softmax][backward]") {
  Threads guard(4);
  for (Dtype dt : {kFloat32, kBFloat16}) {
    for (bool log : {false, true}) {
      // (37, 5003) over dim 1: rows split over threads, a lane tail of 3;
      // (3, 100, 301) over dim 1: fewer outer slices than threads, narrow bands;
      // (2000, 40) over dim 0: one outer slice, a long walk down the columns.
      const std::vector<std::pair<Shape, int64_t>> cases = {{{37, 5003}, 1}, {{3, 100, 301}, 1}, {{2000, 40}, 0}};
      uint32_t seed = 10;
      for (const auto& [shape, dim] : cases) {
        const int64_t n = shape_numel(shape);
        Tensor x = make(uniform_values(n, -4, 4, seed++), shape, dt, device);
        Tensor g = make(uniform_values(n, -1, 1, seed++), shape, dt, device);
        check_softmax_backward(g, log ? x.log_softmax(dim) : x.softmax(dim), dim, log);
      }
    }
  }
}

DEVICE_TEST_CASE("softmax_backward_data of empty, size-1 and 0-dim inputs", "[reduce][softmax][backward]") {
  for (bool log : {false, true}) {
    for (const Shape& sizes : {Shape{0, 3}, Shape{3, 0}}) {
      for (int64_t dim : {0, 1}) {
        Tensor e = zeros(sizes, TensorOptions(kFloat32).device(device));
        Tensor r = detail::softmax_backward_data(e, e, dim, log);
        CHECK(shape(r) == sizes);
        CHECK(r.device() == device);
      }
    }
    // A softmax over a dim of size 1 is constant (1, or 0 for log_softmax):
    // its gradient is 0 whatever grad is.
    const double y1 = log ? 0 : 1;
    Tensor g = make({0.5, -2, 3, 7, -1, 4}, {2, 1, 3}, kFloat64, device);
    check_values(detail::softmax_backward_data(g, full({2, 1, 3}, y1, TensorOptions(kFloat64).device(device)), 1, log),
                 std::vector<double>(6, 0.0));
    Tensor s = detail::softmax_backward_data(make({5}, {}, kFloat32, device), make({y1}, {}, kFloat32, device), 0, log);
    CHECK(shape(s).empty());
    check_values(s, {0});
  }
}

DEVICE_TEST_CASE("softmax_backward_data errors", "[reduce][softmax][backward][errors]") {
  Tensor y = make({0.25, 0.75, 0.5, 0.5}, {2, 2}, kFloat32, device);
  Tensor g = make({1, 0, 2, -2}, {2, 2}, kFloat32, device);
  CHECK_THROWS_AS(detail::softmax_backward_data(g.reshape({4}), y, 0, false), ShapeError);
  CHECK_THROWS_WITH(detail::softmax_backward_data(g.reshape({4}), y, 0, false),
                    "softmax_backward_data(): expected grad of the output's shape [2, 2], but got [4]");
  CHECK_THROWS_AS(detail::softmax_backward_data(g.to(kFloat64), y, 1, true), DtypeError);
  CHECK_THROWS_WITH(detail::softmax_backward_data(g.to(kFloat64), y, 1, true),
                    "log_softmax_backward_data(): expected grad of the output's dtype float32, but got float64; "
                    "convert it first, e.g. grad.to(output.dtype())");
  CHECK_THROWS_AS(detail::softmax_backward_data(g.to(kInt64), y.to(kInt64), 1, false), DtypeError);
  CHECK_THROWS_WITH(detail::softmax_backward_data(g.to(kInt64), y.to(kInt64), 1, false),
                    "softmax_backward_data(): expected a floating output (a softmax result), but got int64");
  CHECK_THROWS_AS(detail::softmax_backward_data(g, y, 2, false), IndexError);
  CHECK_THROWS_WITH(detail::softmax_backward_data(g, y, -3, true),
                    "log_softmax_backward_data: dimension out of range (expected to be in range of [-2, 1], but got "
                    "-3)");
  CHECK_THROWS_AS(detail::softmax_backward_data(Tensor(), y, 0, false), ValueError);
  CHECK_THROWS_WITH(detail::softmax_backward_data(g, Tensor(), 0, false),
                    "softmax_backward_data: argument 'output' is an undefined tensor (a default-constructed Tensor)");
  if (std::optional<Device> other = test::other_device(device)) {
    CHECK_THROWS_AS(detail::softmax_backward_data(g, y.to(*other), 1, false), DeviceError);
    CHECK_THROWS_WITH(detail::softmax_backward_data(g, y.to(*other), 1, false),
                      Catch::Contains("(when checking argument 'output' of softmax_backward_data)"));
  }
  // It records nothing, so an input that requires grad is refused while grad mode is on.
  Tensor y_leaf = y.clone().requires_grad_();
  CHECK_THROWS_AS(detail::softmax_backward_data(g, y_leaf, 1, false), ValueError);
  CHECK_THROWS_WITH(detail::softmax_backward_data(g, y_leaf, 1, false),
                    "softmax_backward_data(): records no graph, but grad mode is on and output requires grad; call "
                    "it inside a NoGradGuard, or write the gradient with differentiable ops (output * (grad - (grad "
                    "* output).sum(dim, true)))");
  CHECK_THROWS_WITH(detail::softmax_backward_data(g.clone().requires_grad_(), y, 1, true),
                    Catch::Contains("grad mode is on and grad requires grad; call it inside a NoGradGuard, or write "
                                    "the gradient with differentiable ops (grad - exp(output) * grad.sum(dim, true))"));
  NoGradGuard no_grad;
  check_values(detail::softmax_backward_data(g, y_leaf, 1, false), {0.1875, -0.1875, 1, -1});
}

TEST_CASE("the CPU softmax backward kernel writes every element", "[reduce][softmax][backward]") {
  Threads guard(4);
  const std::vector<std::pair<Shape, int64_t>> cases = {{{5, 7}, 1},        {{1, 3, 1}, 1},  {{37, 5003}, 1},
                                                        {{3, 100, 301}, 1}, {{2000, 40}, 0}, {{4, 3, 70}, 0}};
  uint32_t seed = 20;
  for (Dtype dt : kFloatDtypes) {
    for (const auto& [shape, dim] : cases) {
      for (bool log : {false, true}) {
        INFO(dt << (log ? " log_softmax" : " softmax") << " over dim " << dim << " of " << shape_str(shape));
        const int64_t n = shape_numel(shape);
        Tensor x = make(uniform_values(n, -4, 4, seed++), shape, dt);
        Tensor g = make(uniform_values(n, -1, 1, seed++), shape, dt);
        Tensor y = log ? x.log_softmax(dim) : x.softmax(dim);
        Tensor got = full(shape, 77, TensorOptions(dt));  // poisoned
        cpu::softmax_backward(got, g, y, dim, log);
        test::check_close(got, composite_softmax_backward(g, y, dim, log));
      }
    }
  }
}

// ---------------------------------------------------------------- results keep device and origin
DEVICE_TEST_CASE("reductions return new tensors on the input's device", "[reduce]") {
  Tensor x = make({1, 2, 3, 4}, {2, 2}, kFloat32, device);
  for (const Tensor& r : {x.sum(), x.mean({0}), x.amax({1}), x.var(), x.norm(), x.softmax(0), x.logsumexp({0}),
                          std::get<0>(x.max(0)), std::get<1>(x.min(1)), x.argmax()}) {
    CHECK(r.device() == device);
    CHECK_FALSE(r.shares_storage(x));
    CHECK(r.is_contiguous());
  }
  CHECK(x.sum().origin().kind == Origin::Kind::Computed);
  CHECK(std::string(x.sum({0}).origin().op) == "sum");
}

// ---------------------------------------------------------------- CUDA planning, checked on the host
TEST_CASE("IndexDivider divides like the 64-bit division", "[reduce][gpu-plan]") {
  const uint64_t k32 = uint64_t{1} << 32;
  std::vector<uint64_t> divisors = {1,
                                    2,
                                    3,
                                    5,
                                    7,
                                    10,
                                    31,
                                    32,
                                    33,
                                    1000,
                                    65535,
                                    65536,
                                    65537,
                                    1u << 30,
                                    k32 / 2 - 1,
                                    k32 / 2,
                                    k32 / 2 + 1,
                                    k32 - 2,
                                    k32 - 1,
                                    k32,
                                    k32 + 1,
                                    k32 * 3,
                                    uint64_t{12345678901}};
  std::mt19937_64 rng(7);
  for (uint64_t d : divisors) {
    INFO("d = " << d);
    cuda::IndexDivider div(d);
    std::vector<uint64_t> ns = {0,     1,       2,       d - 1, d,       d + 1,      2 * d - 1,
                                2 * d, k32 - 2, k32 - 1, k32,   k32 + 1, k32 * 5 + 3};
    for (int i = 0; i < 2000; ++i) {
      ns.push_back(rng() % k32);
      ns.push_back(rng() % (d * 70 + 1));
      ns.push_back(rng() >> (rng() % 64));
    }
    for (uint64_t n : ns) {
      if (div.div(n) != n / d) FAIL("n = " << n << ": got " << div.div(n) << ", expected " << n / d);
    }
  }
  CHECK_THROWS_AS(cuda::IndexDivider(0), InternalError);
}

namespace {

// Folds in (float64, cpu) with the layout's offsets alone, as the CUDA
// kernels index it, and compares with the CPU engine's sum; every output
// offset must come up exactly once.
void check_layout_sums(const Tensor& in, IntArrayRef dims) {
  INFO("input " << shape_str(in.sizes()) << " strides " << shape_str(in.strides()) << ", dims " << shape_str(dims));
  Tensor expected = in.sum(dims, true);
  Tensor out = zeros(expected.sizes(), kFloat64);
  const cuda::ReduceLayout l = cuda::make_reduce_layout(out, in);
  REQUIRE(l.num_outputs == out.numel());
  if (l.num_outputs == 0) return;
  REQUIRE(l.reduce_numel == in.numel() / out.numel());
  const double* x = in.data_ptr<double>();
  std::vector<double> got(static_cast<size_t>(out.numel()), std::nan(""));
  std::vector<int> hits(got.size(), 0);
  for (int64_t o = 0; o < l.num_outputs; ++o) {
    int64_t in_off, out_off;
    l.kept.offsets(static_cast<uint64_t>(o), in_off, out_off);
    REQUIRE(out_off >= 0);
    REQUIRE(out_off < out.numel());
    ++hits[static_cast<size_t>(out_off)];
    double sum = 0;
    for (int64_t r = 0; r < l.reduce_numel; ++r) sum += x[in_off + l.reduced.in_offset(static_cast<uint64_t>(r))];
    got[static_cast<size_t>(out_off)] = sum;
  }
  for (int h : hits) REQUIRE(h == 1);
  check_values(expected, got, test::Tolerance{0, 0});
}

}  // namespace

TEST_CASE("the CUDA reduction layout indexes every output and element", "[reduce][gpu-plan]") {
  Tensor a = iota({4, 5, 6}, kFloat64, Device(kCPU));
  for (std::vector<int64_t> dims :
       std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}}) {
    check_layout_sums(a, dims);
    check_layout_sums(a.permute({2, 0, 1}), dims);
    check_layout_sums(a.transpose(0, 2), dims);
    check_layout_sums(a.slice(2, 1, 6, 2), dims);
    check_layout_sums(a.narrow(1, 1, 3), dims);
    check_layout_sums(a.select(1, 2).reshape({4, 1, 6}).expand({4, 3, 6}), dims);
  }
  Tensor b = iota({2, 3, 2, 3, 2, 2}, kFloat64, Device(kCPU));
  check_layout_sums(b, {1, 3, 5});
  check_layout_sums(b.permute({5, 3, 1, 0, 2, 4}), {0, 2, 4});
  check_layout_sums(b, {0, 1, 2, 3, 4, 5});
  check_layout_sums(iota({3, 0, 2}, kFloat64, Device(kCPU)), {1});
  check_layout_sums(iota({3, 0, 2}, kFloat64, Device(kCPU)), {0});
  check_layout_sums(iota({}, kFloat64, Device(kCPU)), {});
}

TEST_CASE("the CUDA reduction layout picks rows or columns", "[reduce][gpu-plan]") {
  auto layout = [](const Tensor& in, IntArrayRef dims) {
    Tensor out = zeros(in.sum(dims, true).sizes(), in.dtype());
    return cuda::make_reduce_layout(out, in);
  };
  Tensor m = zeros({64, 1000});
  cuda::ReduceLayout last = layout(m, {1});  // sum over the last dim
  CHECK_FALSE(last.columns);
  CHECK(last.contiguous_run);
  CHECK(last.num_outputs == 64);
  CHECK(last.reduce_numel == 1000);
  cuda::ReduceLayout first = layout(m, {0});  // sum over the first dim
  CHECK(first.columns);
  CHECK(first.kept.in_strides[0] == 1);
  CHECK(first.reduced.in_strides[0] == 1000);
  cuda::ReduceLayout all = layout(zeros({8, 9, 10}), {0, 1, 2});
  CHECK(all.kept.n == 0);
  CHECK(all.reduced.n == 1);
  CHECK(all.contiguous_run);
  CHECK(all.reduce_numel == 720);
  CHECK(layout(m.t(), {0}).columns == false);  // the reduced dim is the contiguous one
  CHECK(layout(m.t(), {1}).columns);
  CHECK(layout(zeros({4, 5, 64}), {1}).columns);          // a middle dim under a wide inner one
  CHECK_FALSE(layout(zeros({4, 5, 6}), {1}).columns);     // narrow inner dims: rows
  CHECK_FALSE(layout(zeros({7, 1000}), {0, 1}).columns);  // merged into one run
  cuda::ReduceLayout empty = layout(zeros({3, 0}), {1});
  CHECK(empty.num_outputs == 3);
  CHECK(empty.reduce_numel == 0);
  CHECK(layout(zeros({0, 3}), {1}).num_outputs == 0);
  std::vector<int64_t> many(17, 2);
  CHECK_THROWS_WITH(layout(zeros(many), {0}), Catch::StartsWith("reductions support at most 16 dimensions"));
}

namespace {

// The invariants every launch of plan_reduce_launch must keep.
void check_launch(const cuda::ReduceLayout& l, const cuda::ReduceLaunch& L, int vec) {
  auto pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
  const int64_t N = l.num_outputs, R = l.reduce_numel;
  if (N == 0) return;  // nothing is launched
  CHECK(pow2(L.block_x));
  CHECK(pow2(L.block_y));
  CHECK(L.block_x * L.block_y <= cuda::kReduceThreads);
  CHECK(L.block_x * L.block_y % 32 == 0);
  CHECK(L.grid_x >= 1);
  CHECK(L.grid_x < (int64_t{1} << 31));
  if (l.columns) {
    CHECK((L.vec_outputs == 1 || L.vec_outputs == vec));
    CHECK(N % L.vec_outputs == 0);
    CHECK(L.grid_x * L.block_x * L.vec_outputs >= N);
    CHECK((L.grid_x - 1) * L.block_x * L.vec_outputs < N);
  } else {
    CHECK(L.vec_outputs == 1);
    CHECK(L.grid_x * L.block_y >= N);
    CHECK((L.grid_x - 1) * L.block_y < N);
  }
  CHECK(L.splits >= 1);
  CHECK(L.splits <= cuda::kMaxSplits);
  CHECK(L.split_size * L.splits >= R);
  if (L.splits > 1) {
    CHECK(L.split_size * (L.splits - 1) < R);
    CHECK(L.finalize_x * L.finalize_y == 256);
    CHECK(L.finalize_grid * L.finalize_y >= N);
    if (!l.columns && l.contiguous_run) CHECK(L.split_size % vec == 0);
  }
}

}  // namespace

TEST_CASE("CUDA reduction launches fill the GPU and keep their invariants", "[reduce][gpu-plan]") {
  const int64_t resident = 132 * 4 * 512;  // an H200 at four 512-thread blocks per multiprocessor
  auto plan = [&](IntArrayRef shape, IntArrayRef dims, int vec = 4, bool aligned = true) {
    Tensor in = empty(shape, kFloat32);
    Tensor out = empty(in.sum(dims, true).sizes(), kFloat32);
    cuda::ReduceLayout l = cuda::make_reduce_layout(out, in);
    cuda::ReduceLaunch L = cuda::plan_reduce_launch(l, vec, aligned, resident);
    INFO("shape " << shape_str(shape) << ", dims " << shape_str(dims));
    check_launch(l, L, vec);
    return L;
  };
  // A full reduction of 2^28 elements: one wave of blocks over the whole GPU.
  cuda::ReduceLaunch full = plan({int64_t{1} << 28}, {0});
  CHECK(full.block_x == 512);
  CHECK(full.splits * 512 <= resident);
  CHECK(full.splits * 512 > resident * 9 / 10);
  // Rows of 1024: a warp per row; rows of 32768: a block per row.
  CHECK(plan({16384, 1024}, {1}).block_x == 32);
  CHECK(plan({512, 32768}, {1}).block_x == 512);
  CHECK(plan({512, 32768}, {1}).splits == 1);
  // Few long rows: split across blocks.
  CHECK(plan({4, 1 << 20}, {1}).splits > 1);
  // Columns: vectors of outputs when aligned, split when the outputs are few.
  cuda::ReduceLaunch cols = plan({4096, 4096}, {0});
  CHECK(cols.vec_outputs == 4);
  CHECK(cols.block_x == 32);
  CHECK(cols.splits > 1);
  CHECK(cols.grid_x * cols.splits * cols.block_x * cols.block_y <= resident);  // one wave
  CHECK(plan({4096, 4096}, {0}, 4, false).vec_outputs == 1);
  CHECK(plan({4096, 4098}, {0}).vec_outputs == 1);
  CHECK(plan({1 << 20, 4}, {0}).splits > 1);
  // Tiny rows pack several outputs per warp; an empty reduction still launches.
  cuda::ReduceLaunch tiny = plan({1 << 20, 2}, {1});
  CHECK(tiny.block_x == 1);
  CHECK(tiny.block_y == 512);
  CHECK(plan({5, 0}, {1}).splits == 1);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{33}, int64_t{1000}, (int64_t{1} << 20) + 3})
    for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{n}, {3, n}, {n, 3}, {n, 33}, {33, n}})
      for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
        for (int vec : {2, 4, 8}) plan(shape, {d}, vec);
}

TEST_CASE("CUDA softmax launches cover every row element once", "[reduce][gpu-plan]") {
  // (vec, per_thread): float rows of the forward (4, 32) and of the backward
  // (4, 16: a lane holds grad and out), double backward rows (2, 8), 16-bit
  // backward rows (8, 16).
  const std::pair<int, int> lanes[] = {{4, 32}, {4, 16}, {2, 8}, {8, 16}};
  for (int64_t n : {1, 7, 32, 33, 1000, 1024, 5000, 8192, 8193, 16384, 32768, 40000}) {
    for (const auto& [vec, per_thread] : lanes) {
      for (bool aligned : {false, true}) {
        cuda::SoftmaxLaunch L = cuda::plan_softmax(37, n, 1, vec, per_thread, aligned);
        INFO("n " << n << ", vec " << vec << ", per_thread " << per_thread);
        CHECK(L.vectorized == (aligned && n % vec == 0));
        CHECK(L.block_x * L.block_y % 32 == 0);
        CHECK(L.block_x * L.block_y <= cuda::kSoftmaxThreads);
        if (n > int64_t{per_thread} * cuda::kSoftmaxThreads) {
          CHECK(L.kind == cuda::SoftmaxLaunch::Online);
          CHECK(L.grid == 37);
          continue;
        }
        REQUIRE(L.kind == cuda::SoftmaxLaunch::Registers);
        CHECK(L.grid * L.block_y >= 37);
        std::vector<int> hits(static_cast<size_t>(n), 0);
        for (int64_t lane = 0; lane < L.block_x; ++lane)
          for (int s = 0; s < per_thread; ++s) {
            int64_t i = cuda::softmax_slot_index(s, lane, L.block_x, vec, L.vectorized);
            if (i < n) ++hits[static_cast<size_t>(i)];
          }
        for (int h : hits) REQUIRE(h == 1);
      }
    }
  }
  CHECK(cuda::plan_softmax(64, 1024, 1, 4, 32, true).block_x == 32);  // a warp per row of 1024
  cuda::SoftmaxLaunch cols = cuda::plan_softmax(3, 100, 7, 4, 32, true);
  CHECK(cols.kind == cuda::SoftmaxLaunch::Columns);
  CHECK(cols.grid == 3);
  CHECK(cols.block_x * cols.block_y % 32 == 0);
  CHECK(cols.block_x * cols.block_y <= cuda::kSoftmaxColumnThreads);
}

// Matrix products: mm, bmm and matmul's rank rules on every dtype and device,
// with transposed, sliced, expanded and empty operands, checked against
// hand-computed values and a naive float64 reference; and every error.
#include <cmath>
#include <cstdint>
#include <iterator>
#include <utility>

#include "helpers.h"
#include "tandem/version.h"
#include "tensor/core/shape.h"
#include "tensor/ops/parallel.h"

#if TANDEM_WITH_OPENBLAS
#include <cblas.h>
#endif

using namespace tandem;
using test::check_values;
using test::make;

namespace {

const Dtype kNumericDtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8};

// Deterministic, non-trivial values in about [-1, 1], different per seed.
std::vector<double> wave(int64_t n, double seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(0.731 * static_cast<double>(i) + seed) * std::cos(0.17 * seed * i);
  return v;
}

// Small integers in [lo, lo + 10], for exact integer products.
std::vector<double> ints(int64_t n, int64_t lo, int64_t step) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(lo + (i * step + 3) % 11);
  return v;
}

// Naive float64 reference: a (B, M, K) @ b (B, K, N), values in row-major order.
std::vector<double> ref_bmm(const std::vector<double>& a, const std::vector<double>& b, int64_t B, int64_t M, int64_t K,
                            int64_t N) {
  std::vector<double> c(static_cast<size_t>(B * M * N), 0.0);
  for (int64_t p = 0; p < B; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[(p * M + i) * K + k] * b[(p * K + k) * N + j];
        c[(p * M + i) * N + j] = s;
      }
  return c;
}

// The reference for 2-D or 3-D operands of any layout, read in logical order.
std::vector<double> ref_of(const Tensor& a, const Tensor& b) {
  int64_t B = a.dim() == 3 ? a.size(0) : 1;
  return ref_bmm(a.to_vector<double>(), b.to_vector<double>(), B, a.size(-2), a.size(-1), b.size(-1));
}

// |got - ref| within tol of the scale of the terms (sum of |a_ik * b_kj|),
// which is what bounds the rounding of a dot product.
void check_against(const Tensor& out, const Tensor& a, const Tensor& b, double tol) {
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  for (double& x : av) x = std::abs(x);
  for (double& x : bv) x = std::abs(x);
  int64_t B = a.dim() == 3 ? a.size(0) : 1;
  std::vector<double> scale = ref_bmm(av, bv, B, a.size(-2), a.size(-1), b.size(-1));
  std::vector<double> ref = ref_of(a, b), got = out.to_vector<double>();
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", expected " << ref[i]);
    CHECK(std::abs(got[i] - ref[i]) <= tol * (scale[i] + 1e-30));
  }
}

// Rounding bound per dtype for check_against (the 16-bit ones also round
// their result once).
double product_tol(Dtype d) {
  switch (d) {
    case kFloat64: return 1e-14;
    case kFloat32: return 1e-6;
    case kFloat16: return 1e-3;
    case kBFloat16: return 8e-3;
    default: return 0;
  }
}

}  // namespace

// ---------------------------------------------------------------- mm, bmm

DEVICE_TEST_CASE("mm of small integer matrices, every dtype", "[linalg]") {
  for (Dtype dt : kNumericDtypes) {
    INFO(dt);
    Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, dt, device);
    Tensor b = make({7, 8, 9, 10, 11, 12}, {3, 2}, dt, device);
    Tensor c = mm(a, b);
    CHECK(c.dtype() == dt);
    CHECK(c.device() == device);
    CHECK(c.sizes().vec() == Shape{2, 2});
    check_values(c, {58, 64, 139, 154}, test::Tolerance{0, 0});
    check_values(a.mm(b), {58, 64, 139, 154}, test::Tolerance{0, 0});
    check_values(matmul(a, b), {58, 64, 139, 154}, test::Tolerance{0, 0});
    // b @ a: (3, 2) @ (2, 3)
    check_values(b.matmul(a), {39, 54, 69, 49, 68, 87, 59, 82, 105}, test::Tolerance{0, 0});
  }
}

DEVICE_TEST_CASE("mm of fractional floating matrices", "[linalg]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    // [[0.5, -1.25], [2, 0.75]] @ [[4, -0.5, 1], [0.25, 2, -3]]
    Tensor a = make({0.5, -1.25, 2, 0.75}, {2, 2}, dt, device);
    Tensor b = make({4, -0.5, 1, 0.25, 2, -3}, {2, 3}, dt, device);
    check_values(mm(a, b), {1.6875, -2.75, 4.25, 8.1875, 0.5, -0.25});
  }
}

DEVICE_TEST_CASE("integer products wrap around as PyTorch's", "[linalg]") {
  // 200 + 100 = 300 = 44 mod 256
  check_values(mm(make({200, 100}, {1, 2}, kUInt8, device), make({1, 1}, {2, 1}, kUInt8, device)), {44});
  // 65536 * 65536 + 3 = 2^32 + 3 = 3 mod 2^32
  check_values(mm(make({65536, 1}, {1, 2}, kInt32, device), make({65536, 3}, {2, 1}, kInt32, device)), {3});
  check_values(mm(make({-3, 7}, {1, 2}, kInt64, device), make({5, -2}, {2, 1}, kInt64, device)), {-29});
}

DEVICE_TEST_CASE("bmm multiplies batch by batch", "[linalg]") {
  for (Dtype dt : kNumericDtypes) {
    INFO(dt);
    // batch 0: [[1, 2]] @ [[1, 0], [0, 1]]; batch 1: [[3, 4]] @ [[2, 1], [1, 2]]
    Tensor a = make({1, 2, 3, 4}, {2, 1, 2}, dt, device);
    Tensor b = make({1, 0, 0, 1, 2, 1, 1, 2}, {2, 2, 2}, dt, device);
    Tensor c = bmm(a, b);
    CHECK(c.sizes().vec() == Shape{2, 1, 2});
    CHECK(c.dtype() == dt);
    check_values(c, {1, 2, 10, 11}, test::Tolerance{0, 0});
    check_values(a.bmm(b), {1, 2, 10, 11}, test::Tolerance{0, 0});
  }
}

// ---------------------------------------------------------------- matmul's rank rules

DEVICE_TEST_CASE("matmul 1-D x 1-D is a 0-dim dot product", "[linalg]") {
  for (Dtype dt : kNumericDtypes) {
    INFO(dt);
    Tensor c = matmul(make({1, 2, 3}, {3}, dt, device), make({4, 5, 6}, {3}, dt, device));
    CHECK(c.dim() == 0);
    CHECK(c.dtype() == dt);
    check_values(c, {32}, test::Tolerance{0, 0});
  }
}

DEVICE_TEST_CASE("matmul 2-D x 1-D and 1-D x 2-D", "[linalg]") {
  for (Dtype dt : kNumericDtypes) {
    INFO(dt);
    Tensor m = make({1, 2, 3, 4, 5, 6}, {2, 3}, dt, device);
    Tensor mv = matmul(m, make({3, 1, 2}, {3}, dt, device));  // [3+2+6, 12+5+12]
    CHECK(mv.sizes().vec() == Shape{2});
    check_values(mv, {11, 29}, test::Tolerance{0, 0});
    Tensor vm = matmul(make({2, 1}, {2}, dt, device), m);  // [2+4, 4+5, 6+6]
    CHECK(vm.sizes().vec() == Shape{3});
    check_values(vm, {6, 9, 12}, test::Tolerance{0, 0});
  }
}

DEVICE_TEST_CASE("matmul N-D x 1-D and 1-D x N-D", "[linalg]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kInt64, kUInt8}) {
    INFO(dt);
    // (2, 2, 3) @ (3): each row dotted with [1, 0, 2]
    Tensor a = make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3}, dt, device);
    Tensor r = matmul(a, make({1, 0, 2}, {3}, dt, device));
    CHECK(r.sizes().vec() == Shape{2, 2});
    check_values(r, {7, 16, 25, 34}, test::Tolerance{0, 0});
    // (2) @ (2, 2, 3): [1, 2] @ each (2, 3) matrix
    Tensor l = matmul(make({1, 2}, {2}, dt, device), a);
    CHECK(l.sizes().vec() == Shape{2, 3});
    check_values(l, {9, 12, 15, 27, 30, 33}, test::Tolerance{0, 0});
  }
}

DEVICE_TEST_CASE("matmul N-D x 2-D folds the batch; 2-D x N-D broadcasts the matrix", "[linalg]") {
  for (Dtype dt : {kFloat32, kFloat64, kBFloat16, kInt32}) {
    INFO(dt);
    Tensor a = make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3}, dt, device);
    Tensor w = make({1, 0, 0, 1, 1, 1}, {3, 2}, dt, device);  // cols: x0 + x2, x1 + x2
    Tensor r = matmul(a, w);
    CHECK(r.sizes().vec() == Shape{2, 2, 2});
    check_values(r, {4, 5, 10, 11, 16, 17, 22, 23}, test::Tolerance{0, 0});
    // (2, 3) @ (2, 3, 2): the same (2, 3) matrix times each of a's transposes
    Tensor m = make({1, 0, 0, 0, 1, 1}, {2, 3}, dt, device);  // rows: y0, y1 + y2
    Tensor at = a.transpose(1, 2);                            // (2, 3, 2)
    Tensor l = matmul(m, at);
    CHECK(l.sizes().vec() == Shape{2, 2, 2});
    check_values(l, {1, 4, 5, 11, 7, 10, 17, 23}, test::Tolerance{0, 0});
  }
}

DEVICE_TEST_CASE("matmul broadcasts batch dims", "[linalg]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kInt64}) {
    INFO(dt);
    Tensor a = make(ints(2 * 3 * 4, -5, 7), {2, 1, 3, 4}, dt, device);
    Tensor b = make(ints(5 * 4 * 6, -4, 5), {5, 4, 6}, dt, device);
    Tensor c = matmul(a, b);
    REQUIRE(c.sizes().vec() == Shape{2, 5, 3, 6});
    CHECK(c.dtype() == dt);
    Tensor ae = a.expand({2, 5, 3, 4}).reshape({10, 3, 4});
    Tensor be = b.expand({2, 5, 4, 6}).reshape({10, 4, 6});
    // Integer operands with products and sums well inside float16's exact range.
    check_values(c, ref_of(ae, be), test::Tolerance{0, 0});
    // The broadcast dims the other way round: (5, 3, 4) @ (2, 1, 4, 6).
    Tensor p = make(ints(5 * 3 * 4, -3, 4), {5, 3, 4}, dt, device);
    Tensor q = make(ints(2 * 4 * 6, -5, 3), {2, 1, 4, 6}, dt, device);
    Tensor d = matmul(p, q);
    REQUIRE(d.sizes().vec() == Shape{2, 5, 3, 6});
    check_values(d, ref_of(p.expand({2, 5, 3, 4}).reshape({10, 3, 4}), q.expand({2, 5, 4, 6}).reshape({10, 4, 6})),
                 test::Tolerance{0, 0});
  }
}

DEVICE_TEST_CASE("matmul batched shapes match a naive reference", "[linalg]") {
  // a and b, each expanded to the broadcast batch shape, and the result.
  struct Case {
    Shape a, b, a_expanded, b_expanded, out;
  };
  const Case cases[] = {
      {{3, 4}, {4, 5}, {1, 3, 4}, {1, 4, 5}, {3, 5}},
      {{2, 3, 4}, {4, 5}, {2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{3, 4}, {2, 4, 5}, {2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{1, 3, 4}, {2, 4, 5}, {2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{2, 1, 3, 4}, {1, 3, 4, 5}, {2, 3, 3, 4}, {2, 3, 4, 5}, {2, 3, 3, 5}},
      {{6, 1, 4}, {4, 5}, {6, 1, 4}, {6, 4, 5}, {6, 1, 5}},
      {{3, 2, 1, 4}, {2, 4, 1}, {3, 2, 1, 4}, {3, 2, 4, 1}, {3, 2, 1, 1}},
  };
  for (const Case& cs : cases) {
    INFO(shape_str(cs.a) << " @ " << shape_str(cs.b));
    Tensor a = make(wave(shape_numel(cs.a), 1.0), cs.a, kFloat64, device);
    Tensor b = make(wave(shape_numel(cs.b), 2.0), cs.b, kFloat64, device);
    Tensor c = matmul(a, b);
    REQUIRE(c.sizes().vec() == cs.out);
    int64_t batch = shape_numel(cs.out) / (cs.out.end()[-2] * cs.out.back());
    Tensor ae = a.expand(cs.a_expanded).reshape({batch, cs.a.end()[-2], cs.a.back()});
    Tensor be = b.expand(cs.b_expanded).reshape({batch, cs.b.end()[-2], cs.b.back()});
    check_values(c, ref_of(ae, be));
  }
}

// ---------------------------------------------------------------- layouts

namespace {

// Values for dt whose products are exact in integers (uint8 kept small so
// that no sum wraps) and non-trivial in floats.
std::vector<double> values_for(Dtype dt, int64_t n, double seed) {
  if (dt == kUInt8) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 5 + static_cast<int64_t>(seed)) % 4);
    return v;
  }
  if (is_integral(dt, false)) return ints(n, -5, 2 + static_cast<int64_t>(seed));
  return wave(n, seed);
}

Tensor values_tensor(Dtype dt, IntArrayRef shape, double seed, Device device) {
  return make(values_for(dt, shape_numel(shape), seed), shape, dt, device);
}

}  // namespace

DEVICE_TEST_CASE("mm with transposed, sliced and expanded operands", "[linalg]") {
  for (Dtype dt : kNumericDtypes) {
    INFO(dt);
    // (5, 4) operands: row-major, column-major (a transpose), unit-stride
    // rows with a gap (row slice), stride-2 columns (neither layout), both
    // strides non-unit, and an expanded column (stride 0).
    std::vector<Tensor> as = {
        values_tensor(dt, {5, 4}, 1, device),
        values_tensor(dt, {4, 5}, 2, device).t(),
        values_tensor(dt, {10, 4}, 3, device).slice(0, 0, 10, 2),
        values_tensor(dt, {5, 8}, 4, device).slice(1, 0, 8, 2),
        values_tensor(dt, {4, 10}, 5, device).t().slice(0, 0, 10, 2),
        values_tensor(dt, {5, 1}, 6, device).expand({5, 4}),
    };
    // (4, 6) operands, the same kinds.
    std::vector<Tensor> bs = {
        values_tensor(dt, {4, 6}, 7, device),
        values_tensor(dt, {6, 4}, 8, device).t(),
        values_tensor(dt, {8, 6}, 9, device).slice(0, 0, 8, 2),
        values_tensor(dt, {4, 12}, 10, device).slice(1, 0, 12, 2),
        values_tensor(dt, {1, 6}, 11, device).expand({4, 6}),
    };
    // Matrix-vector shapes: a (4, 1) column with row stride 3, a (1, 4) row
    // with column stride 2, and their transposed forms.
    Tensor col = values_tensor(dt, {4, 3}, 12, device).slice(1, 1, 2);
    Tensor row = values_tensor(dt, {3, 8}, 13, device).slice(0, 1, 2).slice(1, 0, 8, 2);
    Tensor col_t = values_tensor(dt, {1, 4}, 14, device).t();
    Tensor row_t = values_tensor(dt, {4, 1}, 15, device).t();
    double tol = product_tol(dt);
    for (size_t i = 0; i < as.size(); ++i) {
      for (size_t j = 0; j < bs.size(); ++j) {
        INFO("a kind " << i << ", b kind " << j);
        Tensor c = mm(as[i], bs[j]);
        REQUIRE(c.sizes().vec() == Shape{5, 6});
        check_against(c, as[i], bs[j], tol);
      }
      INFO("a kind " << i << " times columns");
      check_against(mm(as[i], col), as[i], col, tol);
      check_against(mm(as[i], col_t), as[i], col_t, tol);
    }
    for (size_t j = 0; j < bs.size(); ++j) {
      INFO("rows times b kind " << j);
      check_against(mm(row, bs[j]), row, bs[j], tol);
      check_against(mm(row_t, bs[j]), row_t, bs[j], tol);
    }
    check_against(mm(row, col), row, col, tol);
    // 1-D operands with stride 2 and stride 0.
    Tensor v = values_tensor(dt, {8}, 16, device).slice(0, 0, 8, 2);
    Tensor v0 = values_tensor(dt, {1}, 17, device).expand({4});
    for (const Tensor& x : {v, v0}) {
      Tensor mv = matmul(as[1], x);
      REQUIRE(mv.sizes().vec() == Shape{5});
      check_against(mv.unsqueeze(1), as[1], x.unsqueeze(1), tol);
      Tensor vm = matmul(x, bs[1]);
      REQUIRE(vm.sizes().vec() == Shape{6});
      check_against(vm.unsqueeze(0), x.unsqueeze(0), bs[1], tol);
    }
  }
}

DEVICE_TEST_CASE("bmm and matmul with expanded and permuted batches", "[linalg]") {
  for (Dtype dt : {kFloat32, kFloat64, kBFloat16, kInt64, kUInt8}) {
    INFO(dt);
    double tol = product_tol(dt);
    Tensor a = values_tensor(dt, {5, 3, 4}, 1, device);
    Tensor b = values_tensor(dt, {5, 4, 2}, 2, device);
    Tensor a1 = values_tensor(dt, {3, 4}, 3, device).expand({5, 3, 4});  // batch stride 0
    Tensor b1 = values_tensor(dt, {4, 2}, 4, device).expand({5, 4, 2});
    Tensor ap = values_tensor(dt, {3, 5, 4}, 5, device).transpose(0, 1);     // batches do not stack into rows
    Tensor bp = values_tensor(dt, {2, 5, 4}, 6, device).permute({1, 2, 0});  // (5, 4, 2), column-major
    const std::pair<Tensor, Tensor> pairs[] = {{a, b},  {a1, b},  {a, b1}, {a1, b1},
                                               {ap, b}, {ap, b1}, {a, bp}, {ap, bp}};
    for (size_t i = 0; i < std::size(pairs); ++i) {
      INFO("pair " << i);
      const auto& [x, y] = pairs[i];
      Tensor c = bmm(x, y);
      REQUIRE(c.sizes().vec() == Shape{5, 3, 2});
      check_against(c, x, y, tol);
      check_against(matmul(x, y), x, y, tol);
    }
    // (5, 3, 4) @ (4, 2) through matmul: a folded into (15, 4), and ap not.
    Tensor w = values_tensor(dt, {4, 2}, 7, device);
    check_against(matmul(a, w), a, w.expand({5, 4, 2}), tol);
    check_against(matmul(ap, w), ap, w.expand({5, 4, 2}), tol);
    check_against(matmul(ap, w.t().contiguous().t()), ap, w.expand({5, 4, 2}), tol);
  }
}

// ---------------------------------------------------------------- empty and k = 0

DEVICE_TEST_CASE("products over k = 0 are zeros", "[linalg]") {
  for (Dtype dt : kNumericDtypes) {
    INFO(dt);
    Tensor c = mm(make({}, {3, 0}, dt, device), make({}, {0, 4}, dt, device));
    REQUIRE(c.sizes().vec() == Shape{3, 4});
    check_values(c, std::vector<double>(12, 0.0), test::Tolerance{0, 0});
    Tensor d = matmul(make({}, {0}, dt, device), make({}, {0}, dt, device));
    CHECK(d.dim() == 0);
    check_values(d, {0}, test::Tolerance{0, 0});
    Tensor e = bmm(make({}, {2, 3, 0}, dt, device), make({}, {2, 0, 2}, dt, device));
    REQUIRE(e.sizes().vec() == Shape{2, 3, 2});
    check_values(e, std::vector<double>(12, 0.0), test::Tolerance{0, 0});
    Tensor f = matmul(make({}, {3, 0}, dt, device), make({}, {0}, dt, device));
    REQUIRE(f.sizes().vec() == Shape{3});
    check_values(f, {0, 0, 0}, test::Tolerance{0, 0});
  }
}

DEVICE_TEST_CASE("products with an empty dim are empty", "[linalg]") {
  for (Dtype dt : {kFloat32, kFloat16, kInt32}) {
    INFO(dt);
    Tensor m34 = values_tensor(dt, {3, 4}, 1, device);
    CHECK(mm(make({}, {0, 3}, dt, device), m34).sizes().vec() == Shape{0, 4});
    CHECK(mm(m34, make({}, {4, 0}, dt, device)).sizes().vec() == Shape{3, 0});
    CHECK(bmm(make({}, {0, 2, 3}, dt, device), make({}, {0, 3, 4}, dt, device)).sizes().vec() == Shape{0, 2, 4});
    CHECK(matmul(make({}, {2, 0, 3, 3}, dt, device), m34).sizes().vec() == Shape{2, 0, 3, 4});
    CHECK(matmul(make({}, {0, 3}, dt, device), values_tensor(dt, {3}, 2, device)).sizes().vec() == Shape{0});
    CHECK(matmul(make({}, {0, 1, 4}, dt, device), make({}, {1, 4, 0}, dt, device)).sizes().vec() == Shape{0, 1, 0});
  }
}

// ---------------------------------------------------------------- larger products

DEVICE_TEST_CASE("float32 GEMM matches a float64 reference", "[linalg]") {
  Tensor a = make(wave(67 * 129, 0.3), {67, 129}, kFloat32, device);
  Tensor b = make(wave(129 * 45, 0.7), {129, 45}, kFloat32, device);
  check_against(mm(a, b), a, b, 1e-6);
  // Large enough for OpenBLAS's threads, and transposed on both sides.
  Tensor p = make(wave(300 * 257, 1.1), {300, 257}, kFloat32, device);
  Tensor q = make(wave(190 * 257, 1.9), {190, 257}, kFloat32, device);
  check_against(mm(p, q.t()), p, q.t(), 1e-6);
  check_against(mm(q, p.t()), q, p.t(), 1e-6);
  Tensor pd = p.to(kFloat64), qd = q.to(kFloat64);
  check_against(mm(pd, qd.t()), pd, qd.t(), 1e-14);
}

DEVICE_TEST_CASE("integer GEMM large enough to split rows across threads", "[linalg]") {
  for (Dtype dt : {kInt32, kInt64}) {
    INFO(dt);
    Tensor a = values_tensor(dt, {97, 200}, 1, device);
    Tensor b = values_tensor(dt, {200, 81}, 2, device);
    check_against(mm(a, b), a, b, 0);
    check_against(mm(a, b.t().contiguous().t()), a, b, 0);
  }
}

DEVICE_TEST_CASE("many small GEMMs split across threads", "[linalg]") {
  for (Dtype dt : {kFloat32, kFloat16, kInt64}) {
    INFO(dt);
    Tensor a = values_tensor(dt, {3000, 8, 8}, 1, device);
    Tensor b = values_tensor(dt, {3000, 8, 8}, 2, device);
    check_against(bmm(a, b), a, b, product_tol(dt));
  }
}

DEVICE_TEST_CASE("float16 and bfloat16 products", "[linalg]") {
  for (Dtype dt : {kFloat16, kBFloat16}) {
    INFO(dt);
    Tensor a = make(wave(33 * 70, 0.4), {33, 70}, dt, device);
    Tensor b = make(wave(70 * 21, 0.9), {70, 21}, dt, device);
    Tensor c = mm(a, b);
    CHECK(c.dtype() == dt);
    check_against(c, a, b, product_tol(dt));
    // The reference in float64, rounded once to dt: within dt's tolerance.
    check_values(c, ref_of(a, b), test::Tolerance{test::tolerance(dt).rtol, 0.05});
    // Sums accumulate in float32: 4096 ones would stop at 2048 (float16) or
    // 256 (bfloat16) if accumulated in the 16-bit type.
    Tensor ones_row = make(std::vector<double>(4096, 1.0), {1, 4096}, dt, device);
    check_values(mm(ones_row, ones_row.t()), {4096}, test::Tolerance{0, 0});
    check_values(matmul(ones_row[0], ones_row[0]), {4096}, test::Tolerance{0, 0});
  }
}

// ---------------------------------------------------------------- errors

DEVICE_TEST_CASE("mm errors", "[linalg][errors]") {
  Tensor a = make(wave(320, 1), {32, 10}, kFloat32, device);
  Tensor b = make(wave(1280, 2), {20, 64}, kFloat32, device);
  CHECK_THROWS_AS(mm(a, b), ShapeError);
  CHECK_THROWS_WITH(mm(a, b), "mat1 and mat2 shapes cannot be multiplied (32x10 and 20x64)");
  CHECK_THROWS_WITH(a.mm(b), "mat1 and mat2 shapes cannot be multiplied (32x10 and 20x64)");
  Tensor t3 = make(wave(24, 3), {2, 3, 4}, kFloat32, device);
  CHECK_THROWS_AS(mm(t3, b), ShapeError);
  CHECK_THROWS_WITH(mm(t3, b),
                    "self must be a matrix, but got a 3-D tensor of shape [2, 3, 4] (mm takes two 2-D "
                    "tensors; use matmul for other ranks)");
  CHECK_THROWS_WITH(mm(a, make({1, 2}, {2}, kFloat32, device)),
                    Catch::StartsWith("mat2 must be a matrix, but got a 1-D tensor of shape [2]"));
  CHECK_THROWS_WITH(mm(a, a.to(kFloat64)),
                    Catch::StartsWith("expected m1 and m2 to have the same dtype, but got: float != double") &&
                        Catch::Contains("mm: mat1 is float32, mat2 is float64"));
  CHECK_THROWS_AS(mm(a, a.to(kFloat64)), DtypeError);
  Tensor m = make({1, 2, 3, 4}, {2, 2}, kBool, device);
  CHECK_THROWS_AS(mm(m, m), NotImplementedError);
  CHECK_THROWS_WITH(mm(m, m), Catch::StartsWith("mm is not implemented for dtype bool"));
  CHECK_THROWS_AS(mm(Tensor(), a), ValueError);
  CHECK_THROWS_WITH(mm(a, Tensor()), Catch::Contains("argument 'mat2' is an undefined tensor"));
}

DEVICE_TEST_CASE("bmm errors", "[linalg][errors]") {
  Tensor a = make(wave(24, 1), {2, 3, 4}, kFloat32, device);
  Tensor b = make(wave(24, 2), {3, 4, 2}, kFloat32, device);
  CHECK_THROWS_AS(bmm(a, b), ShapeError);
  CHECK_THROWS_WITH(bmm(a, b),
                    "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [3, 4].");
  CHECK_THROWS_WITH(bmm(a, make(wave(30, 2), {2, 5, 3}, kFloat32, device)),
                    "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5].");
  CHECK_THROWS_WITH(bmm(a[0], b),
                    "batch1 must be a 3D tensor, but got a 2-D tensor of shape [3, 4] (bmm takes "
                    "(B, M, K) and (B, K, N) tensors; use matmul for other ranks)");
  CHECK_THROWS_WITH(a.bmm(b.unsqueeze(0)), Catch::StartsWith("batch2 must be a 3D tensor, but got a 4-D tensor"));
  CHECK_THROWS_AS(bmm(a, a.to(kInt64)), DtypeError);
  CHECK_THROWS_WITH(bmm(a.to(kInt64), a.to(kInt32)),
                    Catch::StartsWith("expected m1 and m2 to have the same dtype, but got: long int != int"));
  CHECK_THROWS_WITH(bmm(a.to(kBool), a.to(kBool)), Catch::StartsWith("bmm is not implemented for dtype bool"));
}

DEVICE_TEST_CASE("matmul errors", "[linalg][errors]") {
  auto t = [&](Shape shape) { return make(wave(shape_numel(shape), 1), shape, kFloat32, device); };
  CHECK_THROWS_AS(matmul(t({}), t({2, 2})), ShapeError);
  CHECK_THROWS_WITH(matmul(t({}), t({2, 2})),
                    "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
  CHECK_THROWS_WITH(matmul(t({3}), t({})), "both arguments to matmul need to be at least 1D, but they are 1D and 0D");
  CHECK_THROWS_WITH(matmul(t({3}), t({4})),
                    "inconsistent tensor size, expected tensor [3] and src [4] to have the "
                    "same number of elements, but got 3 and 4 elements respectively");
  CHECK_THROWS_WITH(matmul(t({2, 3}), t({4})), "size mismatch, got input (2), mat (2x3), vec (4)");
  CHECK_THROWS_WITH(matmul(t({2, 3, 4}), t({5})), "size mismatch, got input (6), mat (6x4), vec (5)");
  CHECK_THROWS_WITH(matmul(t({4}), t({3, 2})), "mat1 and mat2 shapes cannot be multiplied (1x4 and 3x2)");
  CHECK_THROWS_WITH(matmul(t({2, 3}), t({4, 2})), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)");
  CHECK_THROWS_WITH(t({2, 3, 4}).matmul(t({5, 6})), "mat1 and mat2 shapes cannot be multiplied (6x4 and 5x6)");
  CHECK_THROWS_WITH(matmul(t({2, 3, 4}), t({2, 5, 6})),
                    "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5].");
  CHECK_THROWS_WITH(matmul(t({4}), t({3, 5, 6})),
                    "Expected size for first two dimensions of batch2 tensor to be: [3, 4] but got: [3, 5].");
  CHECK_THROWS_WITH(matmul(t({2, 1, 3, 4}), t({5, 3, 6})),
                    "Expected size for first two dimensions of batch2 tensor to be: [10, 4] but got: [10, 3].");
  CHECK_THROWS_AS(matmul(t({2, 3, 4}), t({3, 4, 5})), ShapeError);
  CHECK_THROWS_WITH(matmul(t({2, 3, 4}), t({3, 4, 5})),
                    Catch::StartsWith("matmul: the size of tensor a (2) must match the size of tensor b (3) at "
                                      "non-singleton dimension 0"));
  CHECK_THROWS_AS(matmul(t({2, 2}), t({2, 2}).to(kFloat64)), DtypeError);
  CHECK_THROWS_WITH(matmul(t({2, 2}), t({2, 2}).to(kFloat64)),
                    "expected m1 and m2 to have the same dtype, but got: float != double (matmul: self is float32, "
                    "other is float64; matmul does not promote, convert one first, e.g. other.to(self.dtype()))");
  CHECK_THROWS_WITH(matmul(t({2}).to(kFloat16), t({2}).to(kBFloat16)),
                    Catch::StartsWith("expected m1 and m2 to have the same dtype, but got: c10::Half != "
                                      "c10::BFloat16"));
  CHECK_THROWS_WITH(matmul(t({2}).to(kUInt8), t({2})),
                    Catch::StartsWith("expected m1 and m2 to have the same dtype, but got: unsigned char != float"));
  CHECK_THROWS_AS(matmul(t({2}).to(kBool), t({2}).to(kBool)), NotImplementedError);
  CHECK_THROWS_WITH(matmul(t({2}).to(kBool), t({2}).to(kBool)),
                    "matmul is not implemented for dtype bool (convert the operands to a numeric dtype first, e.g. "
                    ".to(kFloat32))");
  CHECK_THROWS_WITH(matmul(Tensor(), t({2})), Catch::Contains("argument 'self' is an undefined tensor"));
}

TEST_CASE("matrix products reject operands on two devices", "[linalg][errors][device]") {
  if (cuda::device_count() == 0) return;
  Tensor a = make({1, 2, 3, 4}, {2, 2}, kFloat32, Device(kCPU));
  Tensor b = make({1, 2, 3, 4}, {2, 2}, kFloat32, Device(kCUDA, 0));
  const char* same = "Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0!";
  CHECK_THROWS_AS(matmul(a, b), DeviceError);
  CHECK_THROWS_WITH(matmul(a, b),
                    Catch::StartsWith(same) && Catch::Contains("(when checking argument 'other' of matmul)"));
  CHECK_THROWS_WITH(b.matmul(a), Catch::Contains("cuda:0 and cpu!") && Catch::Contains("argument 'other' of matmul"));
  CHECK_THROWS_AS(mm(a, b), DeviceError);
  CHECK_THROWS_WITH(mm(a, b), Catch::StartsWith(same) && Catch::Contains("(when checking argument 'mat2' of mm)"));
  Tensor a3 = a.unsqueeze(0), b3 = b.unsqueeze(0);
  CHECK_THROWS_AS(bmm(a3, b3), DeviceError);
  CHECK_THROWS_WITH(bmm(a3, b3),
                    Catch::StartsWith(same) && Catch::Contains("(when checking argument 'batch2' of bmm)"));
  // The device rule comes before the dtype and shape checks.
  CHECK_THROWS_AS(matmul(a, make({1, 2, 3}, {3}, kFloat64, Device(kCUDA, 0))), DeviceError);
  if (cuda::device_count() > 1) {
    Tensor c = make({1, 2, 3, 4}, {2, 2}, kFloat32, Device(kCUDA, 1));
    CHECK_THROWS_WITH(matmul(b, c), Catch::Contains("cuda:0 and cuda:1!"));
  }
}

DEVICE_TEST_CASE("products record where their result was computed", "[linalg]") {
  Tensor a = make({1, 2, 3, 4}, {2, 2}, kFloat32, device);
  CHECK_THAT(matmul(a, a).origin().describe(), Catch::Contains("matmul"));
  CHECK_THAT(mm(a, a).origin().describe(), Catch::Contains("mm"));
  CHECK_THAT(bmm(a.unsqueeze(0), a.unsqueeze(0)).origin().describe(), Catch::Contains("bmm"));
}

TEST_CASE("set_num_threads bounds Tandem's loops and OpenBLAS's GEMMs alike; 0 restores the defaults", "[linalg]") {
#if TANDEM_WITH_OPENBLAS
  const int blas_default = openblas_get_num_threads();
#endif
  const int default_threads = get_num_threads();
  set_num_threads(1);
  CHECK(get_num_threads() == 1);
#if TANDEM_WITH_OPENBLAS
  CHECK(openblas_get_num_threads() == 1);
#endif
  Tensor a = randn({64, 64}, kFloat32), b = randn({64, 64}, kFloat32);
  Tensor one = a.mm(b);
  set_num_threads(2);
  CHECK(get_num_threads() == 2);
#if TANDEM_WITH_OPENBLAS
  CHECK(openblas_get_num_threads() == 2);
#endif
  test::check_close(a.mm(b), one);
  set_num_threads(0);
  CHECK(get_num_threads() == default_threads);
#if TANDEM_WITH_OPENBLAS
  CHECK(openblas_get_num_threads() == blas_default);
#endif
  REQUIRE_THROWS_WITH(set_num_threads(-1),
                      "set_num_threads: expected a thread count >= 0 (0 for the default), but got -1");
}

TEST_CASE("cpu float16/bfloat16 GEMM: the float32 GEMM of the same values, rounded once, for every operand layout",
          "[linalg][half]") {
  // The 16-bit operands are widened as they lie (row-major, column-major)
  // or packed (any other strides) before one float32 GEMM: the result is
  // float32's bit for bit, whatever the layout.
  const Tensor a = make(wave(40 * 70, 1.0), {40, 70}, kFloat32), b = make(wave(70 * 30, 2.0), {70, 30}, kFloat32);
  const Tensor bt = make(wave(30 * 70, 3.0), {30, 70}, kFloat32);  // used transposed: (70, 30) column-major
  const Tensor wide = make(wave(80 * 140, 4.0), {80, 140}, kFloat32);
  for (Dtype dt : {kFloat16, kBFloat16}) {
    INFO(dt);
    struct Case {
      const char* name;
      Tensor x, y;
    } cases[] = {
        {"row-major", a, b},
        {"transposed second", a, bt.t()},
        {"transposed first", b.t(), a.t()},
        {"strided both", wide.slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 2),
         wide.slice(0, 1, 71).slice(1, 0, std::nullopt, 5)},
    };
    for (const Case& c : cases) {
      INFO(c.name);
      const Tensor x16 = c.x.to(dt), y16 = c.y.to(dt);
      const Tensor got = x16.mm(y16), want = x16.to(kFloat32).mm(y16.to(kFloat32)).to(dt);
      CHECK(got.dtype() == dt);
      test::check_equal(got, want);
      // As a batch: (2, M, K) @ (K, N) folds into one GEMM; (2, M, K) @ (2, K, N) runs two.
      const Tensor xb = tandem::stack({x16, x16}), yb = tandem::stack({y16, y16});
      test::check_equal(xb.matmul(y16), tandem::stack({want, want}));
      test::check_equal(xb.matmul(yb), tandem::stack({want, want}));
    }
  }
}

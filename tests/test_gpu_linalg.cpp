// Matrix products on a real GPU against the CPU backend: every dtype, the
// ranks of mm/bmm/matmul, transposed, sliced and packed operands, broadcast
// batches, empty and degenerate sizes; the kernel called straight into
// poisoned outputs; float32 accumulation of the 16-bit types; the TF32
// switch; other streams and threads. Skipped (exit 77) without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "helpers.h"
#include "kernels/cuda/linalg.h"
#include "kernels/cuda/stream.h"

using namespace tandem;

namespace {

const Device kGpu("cuda:0");
const Dtype kNumericDtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8};

// Values in about [-1, 1] for the floating dtypes; small integers (exact
// products; uint8 sums wrap, identically on both backends) otherwise.
Tensor input(IntArrayRef shape, Dtype dtype, double seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double x = static_cast<double>(i);
    if (is_floating_point(dtype)) {
      v[static_cast<size_t>(i)] = std::sin(0.731 * x + seed) * std::cos(0.117 * x * seed + 0.3);
    } else {
      int64_t k = (i * 7 + static_cast<int64_t>(seed) * 13) % 11;
      v[static_cast<size_t>(i)] = static_cast<double>(dtype == kUInt8 ? k : k - 5);
    }
  }
  return test::make(v, shape, dtype);
}

// Bound on |gpu - cpu| relative to sum_k |a_ik * b_kj| (what bounds the
// rounding of a dot product): float32 sums in another order on each side,
// the 16-bit types also round their result once on each side (1 ulp apart
// at most), TF32 rounds every input to 10 mantissa bits.
double product_tol(Dtype dtype, bool tf32 = false) {
  switch (dtype) {
    case kFloat64: return 1e-13;
    case kFloat32: return tf32 ? 3e-3 : 2e-5;
    case kFloat16: return 2e-3;
    case kBFloat16: return 1.2e-2;
    case kInt64:
    case kInt32:
    case kUInt8:
    case kBool: return 0;
  }
  return 0;
}

// got (on the GPU) against ref (cpu); scale: sum_k |a_ik * b_kj| in float64,
// for the floating dtypes. Reports the first element out of tolerance.
void check_matches(const Tensor& got, const Tensor& ref, const Tensor& scale, double tol) {
  REQUIRE(got.device() == kGpu);
  REQUIRE(got.dtype() == ref.dtype());
  REQUIRE(got.sizes().vec() == ref.sizes().vec());
  std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
  std::vector<double> s = scale.defined() ? scale.to_vector<double>() : std::vector<double>(r.size(), 0.0);
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = std::isfinite(g[i]) && std::abs(g[i] - r[i]) <= tol * s[i] + 1e-300;
    if (!ok && first < 0) first = static_cast<int64_t>(i);
    bad += ok ? 0 : 1;
  }
  if (first >= 0) {
    auto f = static_cast<size_t>(first);
    INFO("element " << first << ": gpu " << g[f] << ", cpu " << r[f] << ", scale " << s[f] << ", tol " << tol);
    CHECK(bad == 0);
  }
}

using Product = std::function<Tensor(const Tensor&, const Tensor&)>;

// f applied to inputs of the given shapes on the cpu and on the GPU (f makes
// its views itself, so both sides see the same layouts), compared.
void compare(Dtype dtype, IntArrayRef a_shape, IntArrayRef b_shape, const Product& f,
             std::optional<double> tol = std::nullopt) {
  Tensor a = input(a_shape, dtype, 1), b = input(b_shape, dtype, 2);
  Tensor ref = f(a, b);
  Tensor got = f(a.to(kGpu), b.to(kGpu));
  Tensor scale = is_floating_point(dtype) ? f(a.to(kFloat64).abs(), b.to(kFloat64).abs()) : Tensor();
  check_matches(got, ref, scale, tol.value_or(product_tol(dtype)));
}

// Restores the TF32 switch and this thread's stream at the end of a test.
struct TF32Guard {
  bool saved = cuda::matmul_allow_tf32();
  ~TF32Guard() { cuda::set_matmul_allow_tf32(saved); }
};
struct StreamGuard {
  cuda::detail::StreamRef saved = cuda::detail::current_stream(0);
  ~StreamGuard() { cuda::detail::set_current_stream(saved); }
};

struct Sizes {
  int64_t m, k, n;
};
// Vectors, odd sizes, sizes not multiples of 8, and a few tensor-core shapes.
const Sizes kSizes[] = {{1, 1, 1},  {1, 37, 1},   {1, 19, 23}, {23, 1, 17},     {33, 65, 1},
                        {7, 13, 5}, {64, 64, 64}, {17, 8, 24}, {127, 129, 131}, {200, 300, 100}};

}  // namespace

TEST_CASE("gpu mm matches the cpu for every dtype, size and layout", "[gpu][linalg]") {
  for (Dtype dt : kNumericDtypes) {
    for (Sizes s : kSizes) {
      INFO(dt << " M " << s.m << " K " << s.k << " N " << s.n);
      auto mm_ = [](const Tensor& a, const Tensor& b) { return mm(a, b); };
      compare(dt, {s.m, s.k}, {s.k, s.n}, mm_);
      // transposed operands (column-major), either or both: cuBLAS's op flag
      auto at = [](const Tensor& a, const Tensor& b) { return mm(a.t(), b); };
      auto bt = [](const Tensor& a, const Tensor& b) { return mm(a, b.t()); };
      auto both = [](const Tensor& a, const Tensor& b) { return mm(a.t(), b.t()); };
      compare(dt, {s.k, s.m}, {s.k, s.n}, at);
      compare(dt, {s.m, s.k}, {s.n, s.k}, bt);
      compare(dt, {s.k, s.m}, {s.n, s.k}, both);
      // column slices (rows further apart than their length), read in place
      int64_t k = s.k, n = s.n;
      compare(dt, {s.m, s.k + 3}, {s.k, s.n + 5},
              [k, n](const Tensor& a, const Tensor& b) { return mm(a.narrow(1, 2, k), b.narrow(1, 4, n)); });
      // every other row and column: both strides non-unit, packed first
      compare(dt, {2 * s.m, 2 * s.k}, {2 * s.k, 3 * s.n}, [](const Tensor& a, const Tensor& b) {
        return mm(a.slice(0, 1, std::nullopt, 2).slice(1, 0, std::nullopt, 2),
                  b.slice(0, 0, std::nullopt, 2).slice(1, 2, std::nullopt, 3));
      });
      // a row expanded to M rows (stride 0): packed
      compare(dt, {1, s.k}, {s.k, s.n}, [m = s.m, k](const Tensor& a, const Tensor& b) {
        return mm(a.expand({m, k}), b);
      });
    }
  }
}

TEST_CASE("gpu matmul's ranks and batches match the cpu", "[gpu][linalg]") {
  auto mat = [](const Tensor& a, const Tensor& b) { return matmul(a, b); };
  for (Dtype dt : kNumericDtypes) {
    INFO(dt);
    // dot, matrix-vector, vector-matrix, batched with a vector on either side
    compare(dt, {37}, {37}, mat);
    compare(dt, {13, 37}, {37}, mat);
    compare(dt, {37}, {37, 11}, mat);
    compare(dt, {3, 5, 37}, {37}, mat);
    compare(dt, {37}, {3, 37, 11}, mat);
    // bmm, contiguous and with transposed matrices
    compare(dt, {4, 9, 13}, {4, 13, 7}, [](const Tensor& a, const Tensor& b) { return bmm(a, b); });
    compare(dt, {4, 13, 9}, {4, 7, 13},
            [](const Tensor& a, const Tensor& b) { return bmm(a.transpose(1, 2), b.transpose(1, 2)); });
    // batch dims broadcast: b shared (folded into one GEMM), a shared (stride 0)
    compare(dt, {2, 3, 9, 13}, {13, 7}, mat);
    compare(dt, {6, 1, 13}, {13, 7}, mat);
    compare(dt, {9, 13}, {5, 13, 7}, mat);
    // b shared, a's matrices transposed: no fold, b's batch stride 0
    compare(dt, {5, 13, 9}, {13, 7}, [](const Tensor& a, const Tensor& b) { return matmul(a.transpose(1, 2), b); });
    // batch dims that do not merge: a loop of strided batches
    compare(dt, {2, 3, 9, 13}, {3, 13, 7}, mat);
    compare(dt, {3, 1, 9, 13}, {1, 4, 13, 7}, mat);
    compare(dt, {4, 2, 3, 9, 13}, {2, 4, 3, 13, 7}, [](const Tensor& a, const Tensor& b) {
      return matmul(a.permute({1, 0, 2, 3, 4}), b);
    });
    // packed operands inside a batch, one shared
    compare(dt, {3, 18, 26}, {26, 21}, [](const Tensor& a, const Tensor& b) {
      return matmul(a.slice(1, 0, std::nullopt, 2).slice(2, 1, std::nullopt, 2),
                    b.slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 3).expand({3, 13, 7}));
    });
    compare(dt, {18, 26}, {3, 26, 21}, [](const Tensor& a, const Tensor& b) {
      return matmul(a.slice(0, 0, std::nullopt, 2).slice(1, 1, std::nullopt, 2).expand({3, 9, 13}),
                    b.slice(1, 0, std::nullopt, 2).slice(2, 0, std::nullopt, 3));
    });
  }
}

TEST_CASE("gpu matmul of empty operands and K = 0", "[gpu][linalg]") {
  for (Dtype dt : kNumericDtypes) {
    INFO(dt);
    Tensor c = mm(input({0, 5}, dt, 1).to(kGpu), input({5, 3}, dt, 2).to(kGpu));
    CHECK(c.sizes().vec() == Shape{0, 3});
    c = mm(input({3, 5}, dt, 1).to(kGpu), input({5, 0}, dt, 2).to(kGpu));
    CHECK(c.sizes().vec() == Shape{3, 0});
    // an empty sum is zero
    c = mm(input({4, 0}, dt, 1).to(kGpu), input({0, 3}, dt, 2).to(kGpu));
    test::check_equal(c.cpu(), zeros({4, 3}, dt));
    c = bmm(input({0, 2, 3}, dt, 1).to(kGpu), input({0, 3, 4}, dt, 2).to(kGpu));
    CHECK(c.sizes().vec() == Shape{0, 2, 4});
    c = matmul(input({0}, dt, 1).to(kGpu), input({0}, dt, 2).to(kGpu));
    test::check_equal(c.cpu(), zeros(Shape{}, dt));
  }
}

TEST_CASE("cuda::matmul writes every element of a poisoned output", "[gpu][linalg]") {
  // out, a, b at one batch shape, as the front end hands them over.
  struct Case {
    const char* what;
    Shape a_shape, b_shape;
    std::function<std::pair<Tensor, Tensor>(const Tensor&, const Tensor&)> views;
  };
  const Case cases[] = {
      {"2-D",
       {37, 29},
       {29, 41},
       [](const Tensor& a, const Tensor& b) {
         return std::pair{a, b};
       }},
      {"K = 0",
       {5, 0},
       {0, 6},
       [](const Tensor& a, const Tensor& b) {
         return std::pair{a, b};
       }},
      {"transposed",
       {29, 37},
       {41, 29},
       [](const Tensor& a, const Tensor& b) {
         return std::pair{a.t(), b.t()};
       }},
      {"packed",
       {38, 58},
       {58, 41},
       [](const Tensor& a, const Tensor& b) {
         return std::pair{a.slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 2), b.slice(0, 1, std::nullopt, 2)};
       }},
      {"b shared",
       {3, 19, 29},
       {29, 41},
       [](const Tensor& a, const Tensor& b) {
         return std::pair{a, b.expand({3, 29, 41})};
       }},
      {"a shared",
       {19, 29},
       {3, 29, 41},
       [](const Tensor& a, const Tensor& b) {
         return std::pair{a.expand({3, 19, 29}), b};
       }},
      {"looped batches",
       {2, 1, 19, 29},
       {1, 3, 29, 41},
       [](const Tensor& a, const Tensor& b) {
         return std::pair{a.expand({2, 3, 19, 29}), b.expand({2, 3, 29, 41})};
       }},
  };
  for (Dtype dt : kNumericDtypes) {
    for (const Case& c : cases) {
      INFO(dt << " " << c.what);
      Tensor a = input(c.a_shape, dt, 1), b = input(c.b_shape, dt, 2);
      auto [av, bv] = c.views(a, b);
      auto [ag, bg] = c.views(a.to(kGpu), b.to(kGpu));
      Tensor ref = matmul(av, bv);
      // NaN for the floating dtypes; 0x5A in every byte of the integers
      Tensor out = full(ref.sizes(), is_floating_point(dt) ? std::nan("") : 0x5A, dt).to(kGpu);
      cuda::matmul(out, ag, bg, false);
      Tensor scale = is_floating_point(dt) ? matmul(av.to(kFloat64).abs(), bv.to(kFloat64).abs()) : Tensor();
      check_matches(out, ref, scale, product_tol(dt));
    }
  }
}

TEST_CASE("gpu float16 and bfloat16 products accumulate in float32", "[gpu][linalg]") {
  // 4096 ones: a 16-bit running sum would stop at 2048 (float16) or 256
  // (bfloat16), where adding 1 no longer changes it; 4096 itself is exact.
  for (Dtype dt : {kFloat16, kBFloat16}) {
    INFO(dt);
    Tensor a = ones({3, 4096}, dt).to(kGpu), b = ones({4096, 5}, dt).to(kGpu);
    test::check_equal(mm(a, b).cpu(), full({3, 5}, 4096, dt));
    test::check_equal(matmul(a[0], b.t()[0]).cpu(), full(Shape{}, 4096, dt));
  }
}

TEST_CASE("the TF32 switch: off by default, on rounds float32 inputs", "[gpu][linalg]") {
  TF32Guard guard;
  cuda::set_matmul_allow_tf32(false);
  CHECK_FALSE(cuda::matmul_allow_tf32());
  // 1 + 2^-12 is a float32 but not a TF32 (10 mantissa bits): a TF32 product
  // sees 1. Every partial sum of the 1024 terms is exact in float32.
  const double x = 1.0 + std::ldexp(1.0, -12);
  Tensor a = full({256, 1024}, x, kFloat32).to(kGpu), b = ones({1024, 256}, kFloat32).to(kGpu);
  std::vector<float> exact = mm(a, b).to_vector<float>();
  CHECK(std::all_of(exact.begin(), exact.end(), [](float v) { return v == 1024.25f; }));

  cuda::set_matmul_allow_tf32(true);
  CHECK(cuda::matmul_allow_tf32());
  std::vector<float> tf32 = mm(a, b).to_vector<float>();
  INFO("tf32 result [0]: " << tf32[0]);
  CHECK(std::all_of(tf32.begin(), tf32.end(), [](float v) { return v == 1024.0f; }));
  // and within the TF32 tolerance of the cpu on general values, batched too
  compare(
      kFloat32, {300, 257}, {257, 129}, [](const Tensor& a, const Tensor& b) { return mm(a, b); },
      product_tol(kFloat32, true));
  compare(
      kFloat32, {4, 65, 257}, {4, 257, 33}, [](const Tensor& a, const Tensor& b) { return bmm(a, b); },
      product_tol(kFloat32, true));
  // the other dtypes ignore it
  compare(kFloat64, {65, 257}, {257, 33}, [](const Tensor& a, const Tensor& b) { return mm(a, b); });

  cuda::set_matmul_allow_tf32(false);
  std::vector<float> again = mm(a, b).to_vector<float>();
  CHECK(std::all_of(again.begin(), again.end(), [](float v) { return v == 1024.25f; }));
}

TEST_CASE("gpu matmul on another stream, and from several threads", "[gpu][linalg]") {
  Tensor a = input({129, 257}, kFloat32, 1), b = input({257, 65}, kFloat32, 2);
  Tensor ref = mm(a, b), scale = mm(a.to(kFloat64).abs(), b.to(kFloat64).abs());
  {
    StreamGuard guard;
    cuda::detail::set_current_stream(cuda::detail::stream_from_pool(0));
    Tensor ag = a.to(kGpu), bg = b.to(kGpu);
    Tensor c = mm(ag, bg);
    cuda::synchronize();
    check_matches(c, ref, scale, product_tol(kFloat32));
  }
  // Each thread has its own cuBLAS handle; Catch2's checks run on this thread.
  constexpr int kThreads = 4;
  std::vector<double> max_err(kThreads, -1.0);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  std::vector<double> r = ref.to_vector<double>(), s = scale.to_vector<double>();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        Tensor ag = a.to(kGpu), bg = b.to(kGpu);
        double worst = 0;
        for (int rep = 0; rep < 8; ++rep) {
          std::vector<double> g = mm(ag, bg).to_vector<double>();
          for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - r[i]) / (s[i] + 1e-300));
        }
        max_err[t] = worst;
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << errors[t]);
    CHECK(errors[t].empty());
    CHECK(max_err[t] >= 0);
    CHECK(max_err[t] <= product_tol(kFloat32));
  }
}

TEST_CASE("gpu matmul past the grid's y and z limits", "[gpu][linalg][large]") {
  // More than 65535 GEMMs in a batch, and more than 65535 row tiles of the
  // integer kernel: both walked by loops inside the kernels.
  for (Dtype dt : {kFloat32, kInt32}) {
    INFO(dt);
    compare(dt, {70000, 2, 3}, {70000, 3, 2}, [](const Tensor& a, const Tensor& b) { return bmm(a, b); });
    compare(dt, {70000 * 64 + 5, 3}, {3, 2}, [](const Tensor& a, const Tensor& b) { return mm(a, b); });
  }
  // A larger tensor-core product of each floating dtype
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    compare(dt, {8, 256, 512}, {8, 512, 384}, [](const Tensor& a, const Tensor& b) { return bmm(a, b); });
  }
}

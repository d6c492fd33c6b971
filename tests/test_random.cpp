// Random numbers: Philox4x32-10 against Random123's known answers, the
// element map of tensor/ops/random.h recomputed here from the raw words, the
// generators, reproducibility across seeds, threads and devices, the
// distributions' statistics, the in-place fills, and every error.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "helpers.h"
#include "kernels/cpu/parallel.h"
#include "tensor/core/philox.h"

using namespace tandem;

namespace {

constexpr test::Tolerance kExact{0, 0};

struct Stats {
  double mean, std, min, max;
};

Stats stats(const std::vector<double>& v) {
  double sum = 0, sq = 0, lo = v.at(0), hi = v.at(0);
  for (double x : v) {
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  double mean = sum / static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / static_cast<double>(v.size() - 1)), lo, hi};
}

Philox4x32 words(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return Philox4x32{{a, b, c, d}}; }

void check_words(const Philox4x32& got, const Philox4x32& want) {
  for (int k = 0; k < 4; ++k) {
    INFO("word " << k);
    CHECK(got.w[k] == want.w[k]);
  }
}

// The values random.h defines for a fill of n elements from (seed, offset),
// computed here from the raw Philox words, independently of the kernels.
std::vector<double> expected_uniform(uint64_t seed, uint64_t offset, int64_t n, Dtype dtype) {
  std::vector<double> out;
  int digits = dtype == kFloat16 ? 11 : dtype == kBFloat16 ? 8 : 24;
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == kFloat64) {
      Philox4x32 r = philox(offset + static_cast<uint64_t>(i / 2), 0, seed);
      int w = static_cast<int>(2 * (i % 2));
      uint64_t x = (static_cast<uint64_t>(r.w[w + 1]) << 32) | r.w[w];
      out.push_back(std::ldexp(static_cast<double>(x >> 11), -53));
    } else {
      Philox4x32 r = philox(offset + static_cast<uint64_t>(i / 4), 0, seed);
      out.push_back(std::ldexp(static_cast<double>(r.w[i % 4] >> (32 - digits)), -digits));
    }
  }
  return out;
}

std::vector<double> expected_normal(uint64_t seed, uint64_t offset, int64_t n, Dtype dtype) {
  std::vector<double> out;
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < n; ++i) {
    Philox4x32 r = philox(offset + static_cast<uint64_t>(i), 0, seed);
    double u1, u2;
    if (dtype == kFloat64) {
      u1 = std::ldexp(static_cast<double>(((static_cast<uint64_t>(r.w[1]) << 32) | r.w[0]) >> 11) + 1, -53);
      u2 = std::ldexp(static_cast<double>(((static_cast<uint64_t>(r.w[3]) << 32) | r.w[2]) >> 11), -53);
    } else {
      u1 = std::ldexp(static_cast<double>(r.w[0]) + 1, -32);
      u2 = std::ldexp(static_cast<double>(r.w[1]), -32);
    }
    double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * pi * u2);
    // Rounded like the kernel: once to float for the 32- and 16-bit dtypes.
    out.push_back(dtype == kFloat64 ? z : static_cast<double>(static_cast<float>(z)));
  }
  return out;
}

std::vector<double> expected_randint(uint64_t seed, uint64_t offset, int64_t n, int64_t low, int64_t high) {
  std::vector<double> out;
  uint64_t range = static_cast<uint64_t>(high - low);
  for (int64_t i = 0; i < n; ++i) {
    Philox4x32 r = philox(offset + static_cast<uint64_t>(i / 2), 0, seed);
    int w = static_cast<int>(2 * (i % 2));
    uint64_t x = (static_cast<uint64_t>(r.w[w + 1]) << 32) | r.w[w];
    out.push_back(static_cast<double>(low + static_cast<int64_t>(x % range)));
  }
  return out;
}

// Rounds reference doubles to dtype, as a tensor of that dtype holds them.
std::vector<double> rounded(const std::vector<double>& v, Dtype dtype) {
  return test::make(v, {static_cast<int64_t>(v.size())}, kFloat64).to(dtype).to_vector<double>();
}

struct ThreadCount {
  explicit ThreadCount(int n) { cpu::set_num_threads(n); }
  ~ThreadCount() { cpu::set_num_threads(0); }
};

}  // namespace

// ---------------------------------------------------------------- Philox

TEST_CASE("Philox4x32-10 gives Random123's known answers", "[random][philox]") {
  // Random123's kat_vectors for philox4x32_10.
  check_words(philox4x32_10(words(0, 0, 0, 0), 0, 0), words(0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8));
  check_words(philox4x32_10(words(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), 0xffffffff, 0xffffffff),
              words(0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd));
  check_words(philox4x32_10(words(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), 0xa4093822, 0x299f31d0),
              words(0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1));
}

TEST_CASE("philox(counter, subsequence, key) lays out the 64-bit halves as cuRAND", "[random][philox]") {
  check_words(philox(0, 0, 0), words(0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8));
  check_words(philox(~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}), words(0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd));
  check_words(philox(0x85a308d3243f6a88ull, 0x0370734413198a2eull, 0x299f31d0a4093822ull),
              words(0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1));
}

TEST_CASE("The word maps stay inside their ranges", "[random][philox]") {
  CHECK(uniform_from_u32(0, 24) == 0.0f);
  CHECK(uniform_from_u32(0xffffffffu, 24) == 1.0f - 0x1p-24f);
  CHECK(uniform_from_u32(0xffffffffu, 11) == 1.0f - 0x1p-11f);
  CHECK(static_cast<float>(Half(uniform_from_u32(0xffffffffu, 11))) < 1.0f);
  CHECK(static_cast<float>(BFloat16(uniform_from_u32(0xffffffffu, 8))) < 1.0f);
  CHECK(uniform_from_u64(~uint64_t{0}) == 1.0 - 0x1p-53);
  // u1 = 1 (the largest word) gives log 1 = 0; the smallest u1 stays finite.
  CHECK(normal_from_philox32(words(0xffffffffu, 0, 0, 0)) == 0.0);
  CHECK(std::isfinite(normal_from_philox32(words(0, 0, 0, 0))));
  CHECK(normal_from_philox32(words(0, 0, 0, 0)) == Approx(std::sqrt(-2 * std::log(0x1p-32))));
  CHECK(std::isfinite(normal_from_philox64(words(0, 0, 0, 0))));
  CHECK(randint_from_u64(7, -3, 5) == -1);
  CHECK(randint_from_u64(~uint64_t{0}, std::numeric_limits<int64_t>::min(), ~uint64_t{0}) ==
        std::numeric_limits<int64_t>::min());
}

// ---------------------------------------------------------------- the element map

DEVICE_TEST_CASE("rand follows the element map of random.h for every floating dtype", "[random][rand]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    manual_seed(1234);
    default_generator(device).set_offset(10);
    Tensor t = rand({3, 7}, TensorOptions(dt).device(device));
    CHECK(t.dtype() == dt);
    CHECK(t.device() == device);
    CHECK(t.sizes() == IntArrayRef{3, 7});
    test::check_values(t, expected_uniform(1234, 10, 21, dt), kExact);
    // 21 elements take ceil(21 / 4) counters, or ceil(21 / 2) for float64.
    CHECK(default_generator(device).offset() == 10 + (dt == kFloat64 ? 11u : 6u));
  }
}

DEVICE_TEST_CASE("randn follows the element map of random.h for every floating dtype", "[random][randn]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    manual_seed(99);
    Tensor t = randn({5, 5}, TensorOptions(dt).device(device));
    CHECK(t.dtype() == dt);
    test::check_values(t, rounded(expected_normal(99, 0, 25, dt), dt), kExact);
    CHECK(default_generator(device).offset() == 25);
  }
}

DEVICE_TEST_CASE("randint follows the element map of random.h for every dtype", "[random][randint]") {
  for (Dtype dt : {kInt64, kInt32, kUInt8, kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    manual_seed(5);
    int64_t low = dt == kUInt8 ? 3 : -40;
    Tensor t = randint(low, 100, {13}, TensorOptions(dt).device(device));
    CHECK(t.dtype() == dt);
    test::check_values(t, expected_randint(5, 0, 13, low, 100), kExact);
    CHECK(default_generator(device).offset() == 7);
  }
  manual_seed(5);
  Tensor b = randint(0, 2, {9}, TensorOptions(kBool).device(device));
  CHECK(b.dtype() == kBool);
  test::check_values(b, expected_randint(5, 0, 9, 0, 2), kExact);
  // The full int64 range: the range high - low wraps to 2^64 - 1 without overflow.
  manual_seed(6);
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> got = randint(lo, hi, {4}, device).to_vector<int64_t>();
  for (int64_t i = 0; i < 4; ++i) {
    Philox4x32 r = philox(static_cast<uint64_t>(i / 2), 0, 6);
    uint64_t x = (static_cast<uint64_t>(r.w[2 * (i % 2) + 1]) << 32) | r.w[2 * (i % 2)];
    CHECK(got[static_cast<size_t>(i)] == static_cast<int64_t>(static_cast<uint64_t>(lo) + x % ~uint64_t{0}));
  }
}

// ---------------------------------------------------------------- generators

TEST_CASE("Generator seeds, offsets and reservations", "[random][generator]") {
  Generator g(42);
  CHECK(g.initial_seed() == 42);
  CHECK(g.offset() == 0);
  PhiloxState s = g.reserve(5);
  CHECK(s.seed == 42);
  CHECK(s.offset == 0);
  CHECK(g.reserve(3).offset == 5);
  CHECK(g.offset() == 8);
  g.set_offset(100);
  CHECK(g.reserve(1).offset == 100);
  g.manual_seed(7);
  CHECK(g.initial_seed() == 7);
  CHECK(g.offset() == 0);
  uint64_t seed = g.seed();
  CHECK(g.initial_seed() == seed);
  CHECK(g.offset() == 0);
  CHECK(Generator().initial_seed() == Generator::kDefaultSeed);

  manual_seed(11);
  CHECK(initial_seed() == 11);
  CHECK(default_generator().initial_seed() == 11);
  CHECK(default_generator(Device(kCUDA, 3)).initial_seed() == 11);
  rand({10});
  CHECK(default_generator().offset() == 3);
  CHECK(default_generator(Device(kCUDA, 0)).offset() == 0);  // one generator per device, as torch
  randn({0, 4});
  CHECK(default_generator().offset() == 3);  // empty fills reserve nothing
  rand({});
  CHECK(default_generator().offset() == 4);  // a 0-dim tensor is one element
}

TEST_CASE("Concurrent draws reserve disjoint counters", "[random][generator]") {
  Generator g(3);
  std::vector<std::vector<double>> drawn(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&g, &drawn, k] {
      for (int j = 0; j < 200; ++j) {
        std::vector<double> v = rand({8}, g, kFloat64).to_vector<double>();
        drawn[static_cast<size_t>(k)].insert(drawn[static_cast<size_t>(k)].end(), v.begin(), v.end());
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(g.offset() == 4 * 200 * 4);
  std::set<double> all;
  for (const auto& v : drawn) all.insert(v.begin(), v.end());
  CHECK(all.size() == 4 * 200 * 8);  // no counter used twice
}

DEVICE_TEST_CASE("An explicit generator gives its own reproducible stream", "[random][generator]") {
  manual_seed(1);
  Generator g1(2024), g2(2024);
  std::vector<double> a = rand({50}, g1, device).to_vector<double>();
  std::vector<double> b = rand({50}, g1, device).to_vector<double>();
  CHECK(a != b);
  CHECK(rand({50}, g2, device).to_vector<double>() == a);
  CHECK(rand({50}, g2, device).to_vector<double>() == b);
  test::check_values(randn({6}, g1, device), rounded(expected_normal(2024, 26, 6, kFloat32), kFloat32), kExact);
  test::check_values(randint(-5, 5, {6}, g1, device), expected_randint(2024, 32, 6, -5, 5), kExact);
  CHECK(default_generator(device).offset() == 0);  // the default generator was not touched
  CHECK(std::string(rand({2}, g1, device).origin().op) == "tandem::rand");
}

// ---------------------------------------------------------------- reproducibility

DEVICE_TEST_CASE("Same seed, same numbers; different seeds or calls, different numbers", "[random]") {
  manual_seed(77);
  std::vector<double> a = rand({1000}, device).to_vector<double>();
  std::vector<double> a2 = rand({1000}, device).to_vector<double>();
  manual_seed(77);
  CHECK(rand({1000}, device).to_vector<double>() == a);
  CHECK(rand({1000}, device).to_vector<double>() == a2);
  CHECK(a != a2);
  manual_seed(78);
  std::vector<double> b = rand({1000}, device).to_vector<double>();
  size_t same = 0;
  for (size_t k = 0; k < a.size(); ++k) same += a[k] == b[k];
  CHECK(same < 5);

  manual_seed(77);
  std::vector<double> n1 = randn({300}, device).to_vector<double>();
  manual_seed(77);
  CHECK(randn({300}, device).to_vector<double>() == n1);
  manual_seed(77);
  std::vector<double> i1 = randint(1000000, {300}, device).to_vector<double>();
  manual_seed(77);
  CHECK(randint(1000000, {300}, device).to_vector<double>() == i1);
}

DEVICE_TEST_CASE("Every device draws the cpu's numbers for the same seed", "[random]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    manual_seed(31);
    Tensor u_cpu = rand({257}, dt), n_cpu = randn({3, 33}, dt);
    manual_seed(31);
    Tensor u = rand({257}, TensorOptions(dt).device(device)), n = randn({3, 33}, TensorOptions(dt).device(device));
    CHECK(u.device() == device);
    test::check_close(u, u_cpu, kExact);
    test::check_close(n, n_cpu, kExact);
  }
  manual_seed(31);
  Tensor r_cpu = randint(-9, 9, {2, 50});
  manual_seed(31);
  test::check_close(randint(-9, 9, {2, 50}, device), r_cpu, kExact);
}

TEST_CASE("Numbers do not depend on the thread count", "[random][threads]") {
  const int64_t n = 300001;  // several parallel chunks, and a partial last counter
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2, 5}) {
    ThreadCount tc(threads);
    manual_seed(8);
    std::vector<double> v = rand({n}).to_vector<double>();
    std::vector<double> w = rand({n}, kFloat64).to_vector<double>();
    std::vector<double> z = randn({n / 3}).to_vector<double>();
    std::vector<double> k = randint(-1000, 1000, {n}).to_vector<double>();
    v.insert(v.end(), w.begin(), w.end());
    v.insert(v.end(), z.begin(), z.end());
    v.insert(v.end(), k.begin(), k.end());
    runs.push_back(std::move(v));
  }
  CHECK(runs[0] == runs[1]);
  CHECK(runs[0] == runs[2]);
  // And the parallel result is the map of random.h (spot checks at the chunk seams).
  std::vector<double> want = expected_uniform(8, 0, n, kFloat32);
  for (int64_t i : {int64_t{0}, int64_t{8191}, int64_t{8192}, n / 2, n / 2 + 1, n - 2, n - 1})
    CHECK(runs[2][static_cast<size_t>(i)] == static_cast<double>(static_cast<float>(want[static_cast<size_t>(i)])));
}

// ---------------------------------------------------------------- statistics

DEVICE_TEST_CASE("rand is uniform on [0, 1)", "[random][rand][stats]") {
  manual_seed(2);
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    std::vector<double> v = rand({100000}, TensorOptions(dt).device(device)).to_vector<double>();
    Stats s = stats(v);
    CHECK(s.min >= 0.0);
    CHECK(s.max < 1.0);
    CHECK(std::abs(s.mean - 0.5) < 0.01);
    CHECK(std::abs(s.std - std::sqrt(1.0 / 12)) < 0.01);
    // Each tenth of the interval gets a tenth of the draws.
    std::vector<int> bins(10);
    for (double x : v) ++bins[static_cast<size_t>(x * 10)];
    for (int b : bins) CHECK(std::abs(b - 10000) < 600);
  }
}

DEVICE_TEST_CASE("randn is standard normal", "[random][randn][stats]") {
  manual_seed(3);
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    std::vector<double> v = randn({100000}, TensorOptions(dt).device(device)).to_vector<double>();
    Stats s = stats(v);
    CHECK(std::abs(s.mean) < 0.02);
    CHECK(std::abs(s.std - 1.0) < 0.02);
    CHECK(std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }));
    double within1 = 0, within2 = 0;
    for (double x : v) {
      within1 += std::abs(x) < 1;
      within2 += std::abs(x) < 2;
    }
    CHECK(std::abs(within1 / 100000 - 0.6827) < 0.01);
    CHECK(std::abs(within2 / 100000 - 0.9545) < 0.01);
  }
}

DEVICE_TEST_CASE("randint covers [low, high) evenly", "[random][randint][stats]") {
  manual_seed(4);
  Tensor t = randint(-3, 4, {7000}, device);
  CHECK(t.dtype() == kInt64);
  std::vector<int64_t> v = t.to_vector<int64_t>();
  std::vector<int> count(7);
  for (int64_t x : v) {
    REQUIRE(x >= -3);
    REQUIRE(x < 4);
    ++count[static_cast<size_t>(x + 3)];
  }
  for (int c : count) CHECK(std::abs(c - 1000) < 150);
  std::vector<int64_t> u = randint(256, {5000}, TensorOptions(kUInt8).device(device)).to_vector<int64_t>();
  CHECK(*std::min_element(u.begin(), u.end()) == 0);
  CHECK(*std::max_element(u.begin(), u.end()) == 255);
  std::vector<int64_t> one = randint(5, 6, {100}, device).to_vector<int64_t>();
  CHECK(std::all_of(one.begin(), one.end(), [](int64_t x) { return x == 5; }));
  std::vector<double> f = randint(-2048, 2049, {3000}, TensorOptions(kFloat16).device(device)).to_vector<double>();
  CHECK(std::all_of(f.begin(), f.end(), [](double x) { return x == std::floor(x) && x >= -2048 && x <= 2048; }));
}

// ---------------------------------------------------------------- like and in place

DEVICE_TEST_CASE("rand_like and randn_like take shape, dtype and device from the tensor", "[random]") {
  Tensor src = zeros({2, 3}, TensorOptions(kFloat64).device(device));
  manual_seed(12);
  Tensor a = rand_like(src);
  CHECK(a.sizes() == IntArrayRef{2, 3});
  CHECK(a.dtype() == kFloat64);
  CHECK(a.device() == device);
  test::check_values(a, expected_uniform(12, 0, 6, kFloat64), kExact);
  Tensor b = randn_like(src, kFloat16);
  CHECK(b.dtype() == kFloat16);
  CHECK(b.device() == device);
  test::check_values(b, rounded(expected_normal(12, 3, 6, kFloat16), kFloat16), kExact);
  CHECK(std::string(a.origin().op) == "tandem::rand_like");
  CHECK(std::string(b.origin().op) == "tandem::randn_like");
  Tensor c = rand_like(zeros({4}, kInt64), TensorOptions(kFloat32).device(device));
  CHECK(c.dtype() == kFloat32);
  CHECK(c.device() == device);
}

DEVICE_TEST_CASE("Random factories record where they were called", "[random]") {
  Tensor a = rand({2}, device);
  const uint32_t line_a = __LINE__ - 1;  // the line above
  Tensor b = randn({2}, device);
  const uint32_t line_b = __LINE__ - 1;  // the line above
  Tensor c = randint(3, {2}, device);
  const uint32_t line_c = __LINE__ - 1;  // the line above
  CHECK(std::string(a.origin().op) == "tandem::rand");
  CHECK(std::string(b.origin().op) == "tandem::randn");
  CHECK(std::string(c.origin().op) == "tandem::randint");
  CHECK(a.origin().kind == Origin::Kind::Created);
  CHECK(a.origin().line == line_a);
  CHECK(b.origin().line == line_b);
  CHECK(c.origin().line == line_c);
  CHECK(std::string(a.origin().file).find("test_random.cpp") != std::string::npos);
}

DEVICE_TEST_CASE("uniform_, normal_ and random_ fill in place, views included", "[random][inplace]") {
  manual_seed(21);
  Tensor x = empty({3, 4}, device);
  uint64_t version = x.storage()->version();
  uniform_(x, -2.0, 3.0);
  CHECK(x.storage()->version() > version);
  std::vector<double> u = expected_uniform(21, 0, 12, kFloat32);
  std::vector<double> want;
  for (double v : u) want.push_back(static_cast<float>(static_cast<float>(v) * 5.0f + -2.0f));
  test::check_values(x, want, kExact);

  // A transposed view gets the numbers in its own row-major order.
  manual_seed(21);
  Tensor base = zeros({4, 3}, TensorOptions(kFloat64).device(device));
  Tensor view = base.t();
  normal_(view, 10.0, 0.5);
  std::vector<double> z = expected_normal(21, 0, 12, kFloat64);
  for (double& v : z) v = v * 0.5 + 10.0;
  test::check_values(view, z, kExact);

  Tensor ints = zeros({10}, TensorOptions(kInt32).device(device));
  Tensor every_other = ints.slice(0, 0, std::nullopt, 2);
  random_(every_other, 7, 9);
  std::vector<int64_t> iv = ints.to_vector<int64_t>();
  for (size_t k = 0; k < iv.size(); ++k) {
    if (k % 2)
      CHECK(iv[k] == 0);
    else
      CHECK((iv[k] == 7 || iv[k] == 8));
  }

  Generator g(5);
  Tensor y = empty({6}, device);
  normal_(y, 0.0, 1.0, &g);
  CHECK(g.offset() == 6);
  test::check_values(y, rounded(expected_normal(5, 0, 6, kFloat32), kFloat32), kExact);
}

// ---------------------------------------------------------------- errors

TEST_CASE("Random factories reject bad dtypes and bounds", "[random][errors]") {
  CHECK_THROWS_AS(rand({3}, kInt64), DtypeError);
  CHECK_THROWS_WITH(rand({3}, kInt64),
                    "\"check_uniform_bounds\" not implemented for 'Long': rand draws floating point numbers and needs "
                    "dtype float32, float64, float16 or bfloat16, got int64. Use randint for integers");
  CHECK_THROWS_WITH(rand({3}, kBool), Catch::StartsWith("\"check_uniform_bounds\" not implemented for 'Bool'"));
  CHECK_THROWS_AS(randn({3}, kInt32), DtypeError);
  CHECK_THROWS_WITH(randn({3}, kInt32), Catch::StartsWith("\"normal_kernel_cpu\" not implemented for 'Int': randn "
                                                          "draws floating point numbers"));
  CHECK_THROWS_WITH(rand_like(zeros({2}, kUInt8)),
                    Catch::StartsWith("\"check_uniform_bounds\" not implemented for 'Byte': rand_like draws"));
  CHECK_THROWS_WITH(randn_like(zeros({2}, kInt64)),
                    Catch::StartsWith("\"normal_kernel_cpu\" not implemented for 'Long': randn_like draws"));
  CHECK_THROWS_AS(rand_like(Tensor()), ValueError);
  CHECK_THROWS_WITH(rand_like(Tensor()), Catch::StartsWith("rand_like: argument 'input' is an undefined tensor"));
  CHECK_THROWS_WITH(randn_like(Tensor()), Catch::StartsWith("randn_like: argument 'input' is an undefined tensor"));
  CHECK_THROWS_AS(rand({-1}), ShapeError);

  CHECK_THROWS_AS(randint(5, 5, {3}), ValueError);
  CHECK_THROWS_WITH(randint(5, 5, {3}), "random_ expects 'from' to be less than 'to', but got from=5 >= to=5");
  CHECK_THROWS_WITH(randint(6, 5, {3}), "random_ expects 'from' to be less than 'to', but got from=6 >= to=5");
  CHECK_THROWS_WITH(randint(0, {3}), "random_ expects 'from' to be less than 'to', but got from=0 >= to=0");
  CHECK_THROWS_AS(randint(0, 300, {3}, kUInt8), ValueError);
  CHECK_THROWS_WITH(randint(0, 300, {3}, kUInt8),
                    "randint: to - 1 is out of bounds for uint8: got to=300, but uint8 holds [0, 255]");
  CHECK_THROWS_WITH(randint(-1, 3, {3}, kUInt8),
                    "randint: from is out of bounds for uint8: got from=-1, but uint8 holds [0, 255]");
  CHECK_THROWS_WITH(randint(0, 3, {3}, kBool),
                    "randint: to - 1 is out of bounds for bool: got to=3, but bool holds [0, 1]");
  CHECK_THROWS_WITH(randint(0, int64_t{1} << 40, {3}, kInt32),
                    "randint: to - 1 is out of bounds for int32: got to=1099511627776, but int32 holds "
                    "[-2147483648, 2147483647]");
  CHECK_THROWS_WITH(randint(0, 3000, {3}, kFloat16),
                    "randint: to - 1 is out of bounds for float16: got to=3000, but float16 holds every integer only "
                    "in [-2048, 2048]");
  CHECK_THROWS_WITH(randint(-300, 0, {3}, kBFloat16),
                    "randint: from is out of bounds for bfloat16: got from=-300, but bfloat16 holds every integer "
                    "only in [-256, 256]");
  CHECK_NOTHROW(randint(0, (int64_t{1} << 24) + 1, {3}, kFloat32));
  CHECK_THROWS_WITH(randint(0, (int64_t{1} << 24) + 2, {3}, kFloat32),
                    Catch::StartsWith("randint: to - 1 is out of bounds for float32"));

  CHECK_THROWS_AS(default_generator(Device(kCUDA, 64)), DeviceError);
  CHECK_THROWS_WITH(default_generator(Device(kCUDA, 64)),
                    "default_generator: device cuda:64 is beyond the 64 cuda generators Tandem keeps");
}

TEST_CASE("In-place fills reject bad arguments", "[random][errors]") {
  Tensor t = zeros({4});
  CHECK_THROWS_AS(uniform_(t, 1.0, 0.0), ValueError);
  CHECK_THROWS_WITH(uniform_(t, 1.0, 0.0), "uniform_ expects to return a [from, to) range, but found from=1 > to=0");
  CHECK_THROWS_WITH(uniform_(t, 0.0, std::numeric_limits<double>::infinity()),
                    "uniform_: expects finite bounds, got from=0, to=inf");
  CHECK_THROWS_AS(normal_(t, 0.0, -1.0), ValueError);
  CHECK_THROWS_WITH(normal_(t, 0.0, -1.0), "normal_ expects std >= 0.0, but found std -1");
  CHECK_THROWS_WITH(normal_(t, std::nan(""), 1.0), "normal_: expects a finite mean and std, got mean=nan, std=1");
  CHECK_THROWS_WITH(random_(t, 3, 3), "random_ expects 'from' to be less than 'to', but got from=3 >= to=3");
  CHECK_THROWS_WITH(random_(t, 0, 1 << 25), Catch::StartsWith("random_: to - 1 is out of bounds for float32"));
  Tensor i = zeros({4}, kInt64);
  CHECK_THROWS_AS(uniform_(i), DtypeError);
  CHECK_THROWS_WITH(uniform_(i), Catch::StartsWith("\"check_uniform_bounds\" not implemented for 'Long': uniform_"));
  CHECK_THROWS_WITH(normal_(i), Catch::StartsWith("\"normal_kernel_cpu\" not implemented for 'Long': normal_"));
  Tensor undefined;
  CHECK_THROWS_WITH(uniform_(undefined), Catch::StartsWith("uniform_: argument 'self' is an undefined tensor"));
  CHECK_THROWS_WITH(normal_(undefined), Catch::StartsWith("normal_: argument 'self' is an undefined tensor"));
  CHECK_THROWS_WITH(random_(undefined, 0, 2), Catch::StartsWith("random_: argument 'self' is an undefined tensor"));
  Tensor expanded = zeros({1, 3}).expand({4, 3});
  CHECK_THROWS_AS(uniform_(expanded), ValueError);
  CHECK_THROWS_WITH(uniform_(expanded), Catch::StartsWith("uniform_: unsupported operation: more than one element"));
  // Nothing was drawn or written by the failed calls.
  test::check_values(t, {0, 0, 0, 0}, kExact);
}

TEST_CASE("Random factories reject pinned cuda tensors and missing devices", "[random][errors]") {
  if (cuda::device_count() == 0) {
    CHECK_THROWS_AS(rand({2}, Device("cuda")), DeviceError);
    CHECK_THROWS_WITH(randn({2}, Device("cuda:0")), Catch::StartsWith("tandem::randn: cannot use device 'cuda:0'"));
    return;
  }
  TensorOptions pinned = TensorOptions(Device("cuda:0")).pinned_memory(true);
  CHECK_THROWS_AS(rand({2}, pinned), DeviceError);
  CHECK_THROWS_WITH(rand({2}, pinned), "tandem::rand: only cpu tensors can be pinned, but device is cuda:0");
  CHECK_THROWS_WITH(randint(0, 5, {2}, pinned),
                    "tandem::randint: only cpu tensors can be pinned, but device is cuda:0");
}

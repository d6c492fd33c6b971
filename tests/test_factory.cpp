// Value factories: arange, linspace, eye and tensor() from nested lists,
// against PyTorch 1.13's values (Debian's python3-torch), on every device and
// dtype, with their dtype inference, origins and every error.
#include <algorithm>
#include <cmath>
#include <limits>

#include "helpers.h"

using namespace tandem;

namespace {

struct RangeCase {
  Scalar a, b, c;  // arange: start, end, step; linspace: start, end, steps
  Dtype dtype;
  std::vector<double> values;
};

// torch.arange(a, b, c, dtype=...).tolist()
const std::vector<RangeCase> kArange = {
    {-1.5,
     2.7,
     0.3,
     kFloat32,
     {-1.5, -1.2000000476837158, -0.8999999761581421, -0.6000000238418579, -0.30000001192092896, -5.551115123125783e-17,
      0.30000001192092896, 0.6000000238418579, 0.8999999761581421, 1.2000000476837158, 1.5, 1.7999999523162842,
      2.0999999046325684, 2.4000000953674316, 2.700000047683716}},
    {-1.5,
     2.7,
     0.3,
     kFloat64,
     {-1.5, -1.2, -0.9, -0.6000000000000001, -0.30000000000000004, -5.551115123125783e-17, 0.29999999999999993,
      0.5999999999999999, 0.8999999999999999, 1.2, 1.5, 1.7999999999999998, 2.0999999999999996, 2.4,
      2.6999999999999997}},
    {-1.5,
     2.7,
     0.3,
     kFloat16,
     {-1.5, -1.2001953125, -0.89990234375, -0.60009765625, -0.300048828125, 5.960464477539063e-08, 0.300048828125,
      0.60009765625, 0.89990234375, 1.2001953125, 1.5, 1.7998046875, 2.099609375, 2.400390625, 2.69921875}},
    {-1.5,
     2.7,
     0.3,
     kBFloat16,
     {-1.5, -1.203125, -0.8984375, -0.6015625, -0.30078125, 5.960464477539063e-08, 0.30078125, 0.6015625, 0.8984375,
      1.203125, 1.5, 1.796875, 2.09375, 2.40625, 2.703125}},
    {0,
     1,
     0.1,
     kFloat32,
     {0.0, 0.10000000149011612, 0.20000000298023224, 0.30000001192092896, 0.4000000059604645, 0.5, 0.6000000238418579,
      0.699999988079071, 0.800000011920929, 0.8999999761581421}},
    {0,
     1,
     0.1,
     kFloat64,
     {0.0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001, 0.7000000000000001, 0.8, 0.9}},
    {0,
     1,
     0.1,
     kFloat16,
     {0.0, 0.0999755859375, 0.199951171875, 0.300048828125, 0.39990234375, 0.5, 0.60009765625, 0.7001953125,
      0.7998046875, 0.89990234375}},
    {0,
     1,
     0.1,
     kBFloat16,
     {0.0, 0.10009765625, 0.2001953125, 0.30078125, 0.400390625, 0.5, 0.6015625, 0.69921875, 0.80078125, 0.8984375}},
    {-3, 4, 2, kFloat32, {-3.0, -1.0, 1.0, 3.0}},
    {-3, 4, 2, kFloat64, {-3.0, -1.0, 1.0, 3.0}},
    {-3, 4, 2, kFloat16, {-3.0, -1.0, 1.0, 3.0}},
    {-3, 4, 2, kBFloat16, {-3.0, -1.0, 1.0, 3.0}},
    {-3, 4, 2, kInt64, {-3, -1, 1, 3}},
    {-3, 4, 2, kInt32, {-3, -1, 1, 3}},
    {10, 0, -3, kFloat32, {10.0, 7.0, 4.0, 1.0}},
    {10, 0, -3, kFloat64, {10.0, 7.0, 4.0, 1.0}},
    {10, 0, -3, kFloat16, {10.0, 7.0, 4.0, 1.0}},
    {10, 0, -3, kBFloat16, {10.0, 7.0, 4.0, 1.0}},
    {10, 0, -3, kInt64, {10, 7, 4, 1}},
    {10, 0, -3, kInt32, {10, 7, 4, 1}},
    {10, 0, -3, kUInt8, {10, 7, 4, 1}},
    {0.5, 3, 1, kFloat32, {0.5, 1.5, 2.5}},
    {0.5, 3, 1, kFloat64, {0.5, 1.5, 2.5}},
    {0.5, 3, 1, kFloat16, {0.5, 1.5, 2.5}},
    {0.5, 3, 1, kBFloat16, {0.5, 1.5, 2.5}},
    {0.5, 3, 1, kInt64, {0, 1, 2}},
    {0.5, 3, 1, kInt32, {0, 1, 2}},
    {0.5, 3, 1, kUInt8, {0, 1, 2}},
    {2, 20, 4.5, kFloat32, {2.0, 6.5, 11.0, 15.5}},
    {2, 20, 4.5, kFloat64, {2.0, 6.5, 11.0, 15.5}},
    {2, 20, 4.5, kFloat16, {2.0, 6.5, 11.0, 15.5}},
    {2, 20, 4.5, kBFloat16, {2.0, 6.5, 11.0, 15.5}},
    {2, 20, 4.5, kInt64, {2, 6, 10, 14, 18}},
    {0, 7, 1, kFloat32, {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0}},
    {0, 7, 1, kFloat64, {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0}},
    {0, 7, 1, kFloat16, {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0}},
    {0, 7, 1, kBFloat16, {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0}},
    {0, 7, 1, kInt64, {0, 1, 2, 3, 4, 5, 6}},
    {0, 7, 1, kInt32, {0, 1, 2, 3, 4, 5, 6}},
    {0, 7, 1, kUInt8, {0, 1, 2, 3, 4, 5, 6}},
};

// torch.linspace(a, b, c, dtype=...).tolist()
const std::vector<RangeCase> kLinspace = {
    {-3.3,
     17.1,
     7,
     kFloat32,
     {-3.299999952316284, 0.09999990463256836, 3.499999761581421, 6.90000057220459, 10.30000114440918,
      13.700000762939453, 17.100000381469727}},
    {-3.3, 17.1, 7, kFloat64, {-3.3, 0.10000000000000053, 3.500000000000001, 6.9, 10.3, 13.700000000000001, 17.1}},
    {-3.3, 17.1, 7, kFloat16, {-3.30078125, 0.09765625, 3.49609375, 6.8984375, 10.296875, 13.6953125, 17.09375}},
    {-3.3, 17.1, 7, kBFloat16, {-3.296875, 0.09375, 3.484375, 6.9375, 10.375, 13.75, 17.125}},
    {-3.3, 17.1, 7, kInt64, {-3, 0, 3, 7, 10, 13, 17}},
    {-3.3, 17.1, 7, kInt32, {-3, 0, 3, 7, 10, 13, 17}},
    {-3.3, 17.1, 5, kFloat32, {-3.299999952316284, 1.7999999523162842, 6.90000057220459, 12.0, 17.100000381469727}},
    {-3.3, 17.1, 5, kFloat64, {-3.3, 1.8000000000000007, 6.9, 12.0, 17.1}},
    {-3.3, 17.1, 5, kFloat16, {-3.30078125, 1.796875, 6.8984375, 12.0, 17.09375}},
    {-3.3, 17.1, 5, kBFloat16, {-3.296875, 1.796875, 6.9375, 12.0, 17.125}},
    {-3.3, 17.1, 5, kInt64, {-3, 2, 7, 12, 17}},
    {-3.3, 17.1, 5, kInt32, {-3, 2, 7, 12, 17}},
    {-3.3,
     17.1,
     10,
     kFloat32,
     {-3.299999952316284, -1.0333333015441895, 1.2333333492279053, 3.5, 5.766666412353516, 8.033333778381348,
      10.300000190734863, 12.566667556762695, 14.833333969116211, 17.100000381469727}},
    {-3.3,
     17.1,
     10,
     kFloat64,
     {-3.3, -1.0333333333333328, 1.2333333333333343, 3.500000000000001, 5.766666666666668, 8.033333333333335,
      10.300000000000002, 12.56666666666667, 14.833333333333334, 17.1}},
    {-3.3,
     17.1,
     10,
     kFloat16,
     {-3.30078125, -1.03515625, 1.23046875, 3.49609375, 5.76171875, 8.03125, 10.296875, 12.5625, 14.828125, 17.09375}},
    {-3.3,
     17.1,
     10,
     kBFloat16,
     {-3.296875, -1.03125, 1.234375, 3.515625, 5.75, 8.0625, 10.3125, 12.625, 14.875, 17.125}},
    {-3.3, 17.1, 10, kInt32, {-3, 0, 1, 3, 5, 8, 10, 12, 14, 17}},
    {0,
     1,
     7,
     kFloat32,
     {0.0, 0.1666666716337204, 0.3333333432674408, 0.5, 0.6666666269302368, 0.8333333134651184, 1.0}},
    {0,
     1,
     7,
     kFloat64,
     {0.0, 0.16666666666666666, 0.3333333333333333, 0.5, 0.6666666666666667, 0.8333333333333334, 1.0}},
    {0, 1, 7, kFloat16, {0.0, 0.1666259765625, 0.333251953125, 0.5, 0.6669921875, 0.83349609375, 1.0}},
    {0, 1, 7, kBFloat16, {0.0, 0.1669921875, 0.333984375, 0.5, 0.6640625, 0.83203125, 1.0}},
    {0, 1, 7, kInt64, {0, 0, 0, 0, 0, 0, 1}},
    {0, 1, 7, kInt32, {0, 0, 0, 0, 0, 0, 1}},
    {0, 1, 7, kUInt8, {0, 0, 0, 0, 0, 0, 1}},
    {0, 255, 7, kFloat32, {0.0, 42.5, 85.0, 127.5, 170.0, 212.5, 255.0}},
    {0, 255, 7, kFloat64, {0.0, 42.5, 85.0, 127.5, 170.0, 212.5, 255.0}},
    {0, 255, 7, kFloat16, {0.0, 42.5, 85.0, 127.5, 170.0, 212.5, 255.0}},
    {0, 255, 7, kBFloat16, {0.0, 42.5, 85.0, 127.5, 170.0, 212.0, 255.0}},
    {0, 255, 7, kInt64, {0, 42, 85, 127, 170, 212, 255}},
    {0, 255, 7, kInt32, {0, 42, 85, 127, 170, 212, 255}},
    {0, 255, 7, kUInt8, {0, 42, 85, 127, 170, 212, 255}},
    {10, 0, 4, kFloat32, {10.0, 6.6666669845581055, 3.3333332538604736, 0.0}},
    {10, 0, 4, kFloat64, {10.0, 6.666666666666666, 3.3333333333333335, 0.0}},
    {10, 0, 4, kFloat16, {10.0, 6.6640625, 3.333984375, 0.0}},
    {10, 0, 4, kBFloat16, {10.0, 6.6875, 3.328125, 0.0}},
    {10, 0, 4, kInt64, {10, 6, 3, 0}},
    {10, 0, 4, kInt32, {10, 6, 3, 0}},
    {10, 0, 4, kUInt8, {10, 6, 3, 0}},
    {-1, 1, 5, kFloat32, {-1.0, -0.5, 0.0, 0.5, 1.0}},
    {-1, 1, 5, kFloat64, {-1.0, -0.5, 0.0, 0.5, 1.0}},
    {-1, 1, 5, kFloat16, {-1.0, -0.5, 0.0, 0.5, 1.0}},
    {-1, 1, 5, kBFloat16, {-1.0, -0.5, 0.0, 0.5, 1.0}},
    {-1, 1, 5, kInt64, {-1, 0, 0, 0, 1}},
    {-1, 1, 5, kInt32, {-1, 0, 0, 0, 1}},
    {2, 7, 1, kFloat32, {2.0}},
    {2, 7, 1, kFloat64, {2.0}},
    {2, 7, 1, kFloat16, {2.0}},
    {2, 7, 1, kBFloat16, {2.0}},
    {2, 7, 1, kInt64, {2}},
    {2, 7, 1, kInt32, {2}},
    {2, 7, 1, kUInt8, {2}},
    {1, -1, 2, kFloat32, {1.0, -1.0}},
    {1, -1, 2, kFloat64, {1.0, -1.0}},
    {1, -1, 2, kFloat16, {1.0, -1.0}},
    {1, -1, 2, kBFloat16, {1.0, -1.0}},
    {1, -1, 2, kInt64, {1, -1}},
    {1, -1, 2, kInt32, {1, -1}},
    {0, 1, 3, kFloat32, {0.0, 0.5, 1.0}},
    {0, 1, 3, kFloat64, {0.0, 0.5, 1.0}},
    {0, 1, 3, kFloat16, {0.0, 0.5, 1.0}},
    {0, 1, 3, kBFloat16, {0.0, 0.5, 1.0}},
    {0, 1, 3, kInt64, {0, 0, 1}},
    {0, 1, 3, kInt32, {0, 0, 1}},
    {0, 1, 3, kUInt8, {0, 0, 1}},
};

constexpr test::Tolerance kExact{0, 0};

}  // namespace

// ---------------------------------------------------------------- arange

DEVICE_TEST_CASE("arange matches torch.arange for every dtype", "[factory][arange]") {
  for (const RangeCase& c : kArange) {
    INFO("arange(" << c.a << ", " << c.b << ", " << c.c << ", " << c.dtype << ")");
    Tensor t = arange(c.a, c.b, c.c, TensorOptions(c.dtype).device(device));
    CHECK(t.dtype() == c.dtype);
    CHECK(t.device() == device);
    REQUIRE(t.sizes() == IntArrayRef{static_cast<int64_t>(c.values.size())});
    test::check_values(t, c.values, kExact);
  }
}

DEVICE_TEST_CASE("arange infers int64 from integers and float32 otherwise", "[factory][arange]") {
  Tensor a = arange(5, device);
  CHECK(a.dtype() == kInt64);
  test::check_values(a, {0, 1, 2, 3, 4}, kExact);
  Tensor b = arange(5.0, device);
  CHECK(b.dtype() == kFloat32);
  test::check_values(b, {0, 1, 2, 3, 4}, kExact);
  CHECK(arange(0, 3, 1, device).dtype() == kInt64);
  CHECK(arange(0, 3, 0.5, device).dtype() == kFloat32);
  CHECK(arange(0.0, 3, 1, device).dtype() == kFloat32);
  CHECK(arange(true, 3, 1, device).dtype() == kInt64);
  Tensor d = arange(4, TensorOptions(kFloat64).device(device));
  CHECK(d.dtype() == kFloat64);
  test::check_values(d, {0, 1, 2, 3}, kExact);
  // Large int64 values stay exact (no trip through double).
  int64_t big = (int64_t{1} << 60) + 1;
  test::check_values(arange(big, big + 3, 1, device).sub(big), {0, 1, 2}, kExact);
}

DEVICE_TEST_CASE("arange empty ranges, uint8 and truncated integer steps", "[factory][arange]") {
  Tensor e = arange(3, 3, 1, device);
  CHECK(e.sizes() == IntArrayRef{0});
  CHECK(e.dtype() == kInt64);
  CHECK(arange(2.5, 2.5, -1, device).numel() == 0);
  test::check_values(arange(250, 256, 2, TensorOptions(kUInt8).device(device)), {250, 252, 254}, kExact);
  // Integer dtypes count from the truncated bounds and step, for every
  // integer dtype alike (torch sizes int32 from the untruncated ones and gets
  // 4 elements here, but 5 for int64).
  for (Dtype dt : {kInt64, kInt32, kUInt8}) {
    INFO(dt);
    test::check_values(arange(2, 20, 4.5, TensorOptions(dt).device(device)), {2, 6, 10, 14, 18}, kExact);
  }
}

DEVICE_TEST_CASE("arange records where it was called", "[factory][arange]") {
  Tensor t = arange(3, device);
  const uint32_t line = __LINE__ - 1;  // the line above
  CHECK(t.origin().kind == Origin::Kind::Created);
  CHECK(std::string(t.origin().op) == "tandem::arange");
  CHECK(t.origin().line == line);
  CHECK(std::string(t.origin().file).find("test_factory.cpp") != std::string::npos);
}

TEST_CASE("arange errors", "[factory][arange][errors]") {
  CHECK_THROWS_AS(arange(0, 5, 0), ValueError);
  CHECK_THROWS_WITH(arange(0, 5, 0),
                    "step must be nonzero: arange got start=0, end=5, step=0 (int64 truncates it to 0)");
  CHECK_THROWS_WITH(arange(0.0, 5, 0.0), "step must be nonzero: arange got start=0, end=5, step=0");
  CHECK_THROWS_WITH(arange(0, 1, 0.5, kInt64),
                    Catch::Contains("step must be nonzero") && Catch::Contains("int64 truncates it to 0"));
  CHECK_THROWS_AS(arange(0, 5, -1), ValueError);
  CHECK_THROWS_WITH(arange(0, 5, -1),
                    "upper bound and larger bound inconsistent with step sign: arange got start=0, end=5, step=-1");
  CHECK_THROWS_WITH(arange(5.0, 0, 0.5),
                    "upper bound and larger bound inconsistent with step sign: arange got start=5, end=0, step=0.5");
  CHECK_THROWS_AS(arange(0, std::numeric_limits<double>::infinity()), ValueError);
  CHECK_THROWS_WITH(arange(0, std::numeric_limits<double>::infinity()),
                    "unsupported range: 0 -> inf (arange needs a finite start and end)");
  CHECK_THROWS_AS(arange(5, kBool), DtypeError);
  CHECK_THROWS_WITH(arange(5, kBool), "\"arange_cpu\" not implemented for 'Bool': arange needs a numeric dtype");
  CHECK_THROWS_AS(arange(250, 300, 10, kUInt8), ValueError);
  CHECK_THROWS_WITH(arange(250, 300, 10, kUInt8),
                    "arange: value 290 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(arange(-2, 3, 1, kUInt8), "arange: value -2 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_AS(arange(0.0, 1e300, 1e-300), ValueError);
  CHECK_THROWS_WITH(arange(0.0, 1e300, 1e-300), Catch::StartsWith("invalid size, possible overflow?: arange from 0"));
}

// ---------------------------------------------------------------- linspace

DEVICE_TEST_CASE("linspace matches torch.linspace for every dtype", "[factory][linspace]") {
  for (const RangeCase& c : kLinspace) {
    INFO("linspace(" << c.a << ", " << c.b << ", " << c.c << ", " << c.dtype << ")");
    Tensor t = linspace(c.a, c.b, c.c.to_int(), TensorOptions(c.dtype).device(device));
    CHECK(t.dtype() == c.dtype);
    CHECK(t.device() == device);
    REQUIRE(t.sizes() == IntArrayRef{c.c.to_int()});
    // torch's AVX2 loop takes 8 float64 at a time and then counts from a
    // vector's first element, which rounds differently from its scalar loop
    // (ours, for every element); bit-exact only where torch is scalar too.
    bool torch_simd = c.dtype == kFloat64 && c.values.size() >= 8;
    test::check_values(t, c.values, torch_simd ? test::tolerance(kFloat64) : kExact);
  }
}

DEVICE_TEST_CASE("linspace endpoints are exact and the default dtype is float32", "[factory][linspace]") {
  for (int64_t steps : {2, 3, 7, 100, 101, 70001}) {
    INFO(steps);
    Tensor t = linspace(-0.1, 0.7, steps, device);
    CHECK(t.dtype() == kFloat32);
    std::vector<float> v = t.to_vector<float>();
    CHECK(v.front() == -0.1f);
    CHECK(v.back() == 0.7f);
    CHECK(std::adjacent_find(v.begin(), v.end(), [](float x, float y) { return y <= x; }) == v.end());
  }
  Tensor one = linspace(3, 9, 1, device);
  CHECK(one.sizes() == IntArrayRef{1});
  test::check_values(one, {3}, kExact);
  Tensor none = linspace(0, 1, 0, device);
  CHECK(none.sizes() == IntArrayRef{0});
  CHECK(none.dtype() == kFloat32);
  CHECK(std::string(none.origin().op) == "tandem::linspace");
}

TEST_CASE("linspace errors", "[factory][linspace][errors]") {
  CHECK_THROWS_AS(linspace(0, 1, -1), ValueError);
  CHECK_THROWS_WITH(linspace(0, 1, -1), "number of steps must be non-negative: linspace got steps=-1");
  CHECK_THROWS_AS(linspace(0, 1, 3, kBool), DtypeError);
  CHECK_THROWS_WITH(linspace(0, 1, 3, kBool),
                    "\"linspace_cpu\" not implemented for 'Bool': linspace needs a numeric dtype");
  CHECK_THROWS_AS(linspace(-1, 3, 3, kUInt8), ValueError);
  CHECK_THROWS_WITH(linspace(-1, 3, 3, kUInt8),
                    "linspace: value -1 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(linspace(0, 3e9, 3, kInt32),
                    "linspace: value 3e+09 cannot be converted to type int32 without overflow");
}

// ---------------------------------------------------------------- eye

DEVICE_TEST_CASE("eye for every dtype and shape", "[factory][eye]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    for (auto [n, m] : {std::pair<int64_t, int64_t>{3, 3}, {2, 4}, {4, 2}, {1, 1}, {0, 3}, {3, 0}}) {
      INFO(dt << " " << n << "x" << m);
      Tensor t = eye(n, m, TensorOptions(dt).device(device));
      CHECK(t.dtype() == dt);
      CHECK(t.device() == device);
      REQUIRE(t.sizes() == IntArrayRef{n, m});
      std::vector<double> want;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) want.push_back(i == j ? 1 : 0);
      test::check_values(t, want, kExact);
    }
  }
  Tensor sq = eye(2, device);
  CHECK(sq.dtype() == kFloat32);
  CHECK(std::string(sq.origin().op) == "tandem::eye");
  test::check_values(sq, {1, 0, 0, 1}, kExact);
  // Big enough to split over threads.
  Tensor big = eye(300, 200, device);
  std::vector<float> v = big.to_vector<float>();
  double ones = 0;
  for (float x : v) ones += x;
  CHECK(ones == 200);
  CHECK(v[199 * 200 + 199] == 1.0f);
  CHECK(v[199 * 200 + 198] == 0.0f);
}

TEST_CASE("eye errors", "[factory][eye][errors]") {
  CHECK_THROWS_AS(eye(-1), ValueError);
  CHECK_THROWS_WITH(eye(-1), "n must be greater or equal to 0, got -1");
  CHECK_THROWS_AS(eye(2, -3), ValueError);
  CHECK_THROWS_WITH(eye(2, -3), "m must be greater or equal to 0, got -3");
}

// ---------------------------------------------------------------- tensor()

DEVICE_TEST_CASE("tensor() infers shape and dtype from nested lists", "[factory][tensor]") {
  Tensor a = tensor({{1, 2}, {3, 4}}, device);
  CHECK(a.dtype() == kInt64);
  CHECK(a.device() == device);
  CHECK(a.sizes() == IntArrayRef{2, 2});
  test::check_values(a, {1, 2, 3, 4}, kExact);

  Tensor b = tensor({1.5, 2}, device);  // any float makes float32
  CHECK(b.dtype() == kFloat32);
  test::check_values(b, {1.5, 2}, kExact);
  Tensor c = tensor({true, 2}, device);  // any integer over bools makes int64
  CHECK(c.dtype() == kInt64);
  test::check_values(c, {1, 2}, kExact);
  Tensor d = tensor({true, false}, device);
  CHECK(d.dtype() == kBool);
  test::check_values(d, {1, 0}, kExact);
  Tensor e = tensor({true, 2.5f}, device);
  CHECK(e.dtype() == kFloat32);
  test::check_values(e, {1, 2.5}, kExact);

  Tensor s = tensor(3.5, device);
  CHECK(s.dim() == 0);
  CHECK(s.dtype() == kFloat32);
  CHECK(s.item<double>() == 3.5);
  Tensor si = tensor(int64_t{-7}, device);
  CHECK(si.dim() == 0);
  CHECK(si.dtype() == kInt64);
  CHECK(si.item<int64_t>() == -7);

  Tensor empty = tensor({}, device);
  CHECK(empty.sizes() == IntArrayRef{0});
  CHECK(empty.dtype() == kFloat32);
  Tensor empty2 = tensor({{}, {}}, device);
  CHECK(empty2.sizes() == IntArrayRef{2, 0});
  CHECK(empty2.dtype() == kFloat32);

  Tensor deep = tensor({{{1, 2}}, {{3, 4}}, {{5, 6}}}, device);
  CHECK(deep.sizes() == IntArrayRef{3, 1, 2});
  test::check_values(deep, {1, 2, 3, 4, 5, 6}, kExact);

  Tensor from_vec = tensor(std::vector<float>{0.25f, -1.0f}, device);
  CHECK(from_vec.dtype() == kFloat32);
  test::check_values(from_vec, {0.25, -1}, kExact);

  CHECK(std::string(a.origin().op) == "tandem::tensor");
  CHECK(a.origin().kind == Origin::Kind::Created);
}

DEVICE_TEST_CASE("tensor() converts to the dtype the options give", "[factory][tensor]") {
  auto on = [&](Dtype dt) { return TensorOptions(dt).device(device); };
  Tensor f = tensor({1, 2}, on(kFloat64));
  CHECK(f.dtype() == kFloat64);
  test::check_values(f, {1, 2}, kExact);
  test::check_values(tensor({1.7, -2.7}, on(kInt32)), {1, -2}, kExact);  // truncates, as torch
  test::check_values(tensor({2, 0, -1}, on(kBool)), {1, 0, 1}, kExact);
  test::check_values(tensor({0.1}, on(kFloat16)), {static_cast<float>(Half(0.1f))}, kExact);
  test::check_values(tensor({0.1}, on(kBFloat16)), {static_cast<float>(BFloat16(0.1f))}, kExact);
  test::check_values(tensor({0, 255}, on(kUInt8)), {0, 255}, kExact);
  test::check_values(tensor({1e300}, on(kFloat32)), {std::numeric_limits<double>::infinity()}, kExact);
  int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(tensor({big}, on(kInt64)).to_vector<int64_t>()[0] == big);
  CHECK(tensor({0.1}, on(kFloat64)).to_vector<double>()[0] == 0.1);
}

TEST_CASE("tensor() errors", "[factory][tensor][errors]") {
  CHECK_THROWS_AS(tensor({{1, 2}, {3, 4, 5}}), ShapeError);
  CHECK_THROWS_WITH(tensor({{1, 2}, {3, 4, 5}}), "tensor: expected sequence of length 2 at dim 1 (got 3)");
  CHECK_THROWS_WITH(tensor({{1, 2}, {}}), "tensor: expected sequence of length 2 at dim 1 (got 0)");
  CHECK_THROWS_WITH(tensor({{{1, 2}}, {{3}}}), "tensor: expected sequence of length 2 at dim 2 (got 1)");
  CHECK_THROWS_AS(tensor({{1, 2}, 3}), ShapeError);
  CHECK_THROWS_WITH(tensor({{1, 2}, 3}), "tensor: expected sequence of length 2 at dim 1 (got the number 3)");
  CHECK_THROWS_AS(tensor({1, {2, 3}}), ShapeError);
  CHECK_THROWS_WITH(tensor({1, {2, 3}}), "tensor: expected a number at dim 1 (got a sequence of length 2)");
  CHECK_THROWS_AS(tensor({300}, kUInt8), ValueError);
  CHECK_THROWS_WITH(tensor({300}, kUInt8), "tensor: value 300 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(tensor({-1}, kUInt8), "tensor: value -1 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(tensor({256.0}, kUInt8), "tensor: value 256 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(tensor({int64_t{1} << 40}, kInt32),
                    "tensor: value 1099511627776 cannot be converted to type int32 without overflow");
  CHECK_THROWS_WITH(tensor({std::nan("")}, kInt64),
                    "tensor: value nan cannot be converted to type int64 without overflow");
  CHECK_THROWS_WITH(tensor({1e19}, kInt64), "tensor: value 1e+19 cannot be converted to type int64 without overflow");
}

// ---------------------------------------------------------------- devices

TEST_CASE("Value factories reject pinned cuda tensors and missing devices", "[factory][errors]") {
  if (cuda::device_count() == 0) {
    CHECK_THROWS_AS(arange(3, Device("cuda")), DeviceError);
    CHECK_THROWS_WITH(eye(2, Device("cuda:0")), Catch::StartsWith("tandem::eye: cannot use device 'cuda:0'"));
    return;
  }
  TensorOptions pinned = TensorOptions(Device("cuda:0")).pinned_memory(true);
  CHECK_THROWS_AS(eye(2, pinned), DeviceError);
  CHECK_THROWS_WITH(eye(2, pinned), "tandem::eye: only cpu tensors can be pinned, but device is cuda:0");
  CHECK_THROWS_WITH(linspace(0, 1, 3, pinned),
                    "tandem::linspace: only cpu tensors can be pinned, but device is cuda:0");
  CHECK_THROWS_WITH(tensor({1}, pinned), "tandem::tensor: only cpu tensors can be pinned, but device is cuda:0");
  int n = cuda::device_count();
  CHECK_THROWS_WITH(arange(3, Device(kCUDA, n)),
                    Catch::StartsWith("tandem::arange: invalid device 'cuda:" + std::to_string(n) + "'"));
}

// Conversions: to(dtype) for every pair of dtypes, to(device) between cpu and
// the cuda devices, copy_ (broadcasting, dtypes, devices, strided
// destinations), item(), to_vector(), cpu()/cuda(), and the origins that
// factories, .to() and ops record.
#include <cmath>
#include <limits>
#include <string>

#include "helpers.h"
#include "kernels/cpu/parallel.h"

using namespace tandem;
using Catch::Contains;
using test::check_equal;
using test::check_values;
using test::make;

namespace {

const std::vector<Dtype> kAllDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool};
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const test::Tolerance kExact{0, 0};

// What converting the double v (already representable in the source dtype)
// to dtype gives, by PyTorch's rules: floats round to nearest even (through
// float32, as c10::Half does), floats to integers truncate toward zero, to
// uint8 through int64 and wrapping, anything non-zero is true.
double converted(double v, Dtype dtype) {
  switch (dtype) {
    case kFloat64: return v;
    case kFloat32: return static_cast<float>(v);
    case kFloat16: return static_cast<float>(Half(static_cast<float>(v)));
    case kBFloat16: return static_cast<float>(BFloat16(static_cast<float>(v)));
    case kInt64:
    case kInt32: return std::trunc(v);
    case kUInt8: return static_cast<double>(((static_cast<int64_t>(std::trunc(v)) % 256) + 256) % 256);
    case kBool: return v != 0 ? 1 : 0;
  }
  return 0;
}

std::vector<double> converted(const std::vector<double>& v, Dtype dtype) {
  std::vector<double> out;
  for (double x : v) out.push_back(converted(x, dtype));
  return out;
}

// n source values that differ from their neighbours and that every dtype
// holds exactly, but for bool: integers in [0, 250], or for a floating source
// halves in [-60, 65] (negatives wrap in uint8, fractions truncate). 251,
// never among them, poisons destinations.
std::vector<double> pattern(int64_t n, Dtype from) {
  const bool floating = from == kFloat32 || from == kFloat64 || from == kFloat16 || from == kBFloat16;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const double m = static_cast<double>((k * 37) % 251);
    v[static_cast<size_t>(k)] = floating ? m * 0.5 - 60 : m;
  }
  return v;
}

// The (from, to) pairs the transposed-copy tests run: every dtype to itself,
// and conversions between kinds and widths.
std::vector<std::pair<Dtype, Dtype>> copy_pairs() {
  std::vector<std::pair<Dtype, Dtype>> pairs;
  for (Dtype dt : kAllDtypes) pairs.emplace_back(dt, dt);
  pairs.insert(pairs.end(), {{kFloat32, kFloat16},
                             {kFloat32, kFloat64},
                             {kFloat64, kFloat32},
                             {kFloat16, kFloat32},
                             {kBFloat16, kFloat16},
                             {kFloat32, kInt64},
                             {kFloat32, kUInt8},
                             {kInt32, kFloat32},
                             {kUInt8, kInt64},
                             {kBool, kFloat32},
                             {kFloat64, kBool}});
  return pairs;
}

// Runs a block with n CPU threads, so that the parallel split of a copy is
// taken even on a one-core machine.
struct Threads {
  explicit Threads(int n) { cpu::set_num_threads(n); }
  ~Threads() { cpu::set_num_threads(0); }
};

// Appended to, not built with operator+: GCC 12 warns about operator+ on
// an rvalue string here (-Warray-bounds, a false positive, GCC PR 105329).
std::string where_from(int line) {
  std::string s = __FILE__;
  s += ':';
  s += std::to_string(line);
  return s;
}

}  // namespace

DEVICE_TEST_CASE("to(dtype) converts between every pair of dtypes", "[convert][dtype]") {
  // Integral values, fractions to truncate, negatives (wrap in uint8), zero,
  // values that round in 16-bit floats.
  const std::vector<double> vals = {0, 1, 2.7, -1.5, 100.25, 200.9, -3, 0.1, 255, 1025};
  for (Dtype from : kAllDtypes) {
    Tensor src = make(vals, {2, 5}, from, device);
    std::vector<double> held = src.to_vector<double>();
    for (Dtype to : kAllDtypes) {
      INFO(from << " -> " << to);
      Tensor dst = src.to(to);
      CHECK(dst.dtype() == to);
      CHECK(dst.device() == device);
      CHECK(dst.sizes().vec() == Shape{2, 5});
      check_values(dst, converted(held, to), kExact);
      // A strided source converts the same.
      check_values(src.t().to(to), converted(src.t().contiguous().to_vector<double>(), to), kExact);
    }
  }
}

DEVICE_TEST_CASE("to(dtype) rounding and truncation, value by value", "[convert][dtype]") {
  Tensor f = make({-2.7, 2.7, -0.5, 0.5, -0.0, 1e-3}, {6}, kFloat32, device);
  check_values(f.to(kInt64), {-2, 2, 0, 0, 0, 0}, kExact);
  check_values(f.to(kInt32), {-2, 2, 0, 0, 0, 0}, kExact);
  check_values(f.to(kBool), {1, 1, 1, 1, 0, 1}, kExact);
  check_values(make({kNaN, kInf, 0}, {3}, kFloat32, device).to(kBool), {1, 1, 0}, kExact);
  // Negative floats reach uint8 through int64, as torch: -1.5 -> -1 -> 255.
  check_values(make({-1.5, 300.7, -0.5}, {3}, kFloat32, device).to(kUInt8), {255, 44, 0}, kExact);
  check_values(make({1, 0}, {2}, kBool, device).to(kFloat32), {1, 0}, kExact);
  check_values(make({1, 0}, {2}, kBool, device).to(kBFloat16), {1, 0}, kExact);
  // Large int64 to float16: ties to even at 2049 and 2051, overflow to inf.
  Tensor big = make({65519, 65520, 2049, 2051, 100000, -70000}, {6}, kInt64, device);
  check_values(big.to(kFloat16), {65504, kInf, 2048, 2052, kInf, -kInf}, kExact);
  int64_t huge = (int64_t{1} << 62) + 1;
  Tensor h = from_blob(&huge, {1}, kInt64).to(device, false, true);
  check_values(h.to(kBFloat16), {4611686018427387904.0}, kExact);  // 2^62, as torch
  check_values(h.to(kFloat32), {4611686018427387904.0}, kExact);
  CHECK(h.to(kFloat64).to(kInt64).item<int64_t>() == int64_t{1} << 62);
  // 0.1 in the 16-bit floats (torch: 0.0999755859375 and 0.10009765625).
  check_values(make({0.1}, {1}, kFloat32, device).to(kFloat16), {0.0999755859375}, kExact);
  check_values(make({0.1}, {1}, kFloat32, device).to(kBFloat16), {0.10009765625}, kExact);
  check_values(make({0.1}, {1}, kFloat64, device).to(kFloat16), {0.0999755859375}, kExact);
  check_values(make({0.1}, {1}, kFloat64, device).to(kFloat32), {static_cast<float>(0.1)}, kExact);
  // NaN and infinities survive float conversions.
  Tensor special = make({kNaN, kInf, -kInf}, {3}, kFloat64, device);
  for (Dtype dt : {kFloat32, kFloat16, kBFloat16}) check_values(special.to(dt), {kNaN, kInf, -kInf}, kExact);
  // Empty and 0-dim tensors convert too.
  CHECK(zeros({0, 2}, device).to(kInt32).sizes().vec() == Shape{0, 2});
  Tensor s = make({3.9}, {}, kFloat32, device).to(kInt64);
  CHECK(s.dim() == 0);
  CHECK(s.item<int64_t>() == 3);
}

DEVICE_TEST_CASE("to() returns self when nothing changes, a copy when asked", "[convert]") {
  Tensor a = make({1, 2, 3}, {3}, kFloat32, device);
  CHECK(a.to(kFloat32).is_same(a));
  CHECK(a.to(device).is_same(a));
  CHECK(a.to(device, kFloat32).is_same(a));
  CHECK(a.to(TensorOptions()).is_same(a));
  CHECK(a.to(TensorOptions(kFloat32).device(device)).is_same(a));
  CHECK(a.to(a.options()).is_same(a));
  Tensor c = a.to(kFloat32, false, true);
  CHECK_FALSE(c.is_same(a));
  CHECK_FALSE(c.shares_storage(a));
  check_equal(c, a);
  Tensor d = a.to(device, false, true);
  CHECK_FALSE(d.shares_storage(a));
  check_equal(d, a);
  d.fill_(0);
  check_values(a, {1, 2, 3});
  // A non-contiguous tensor comes back as is too (to() does not make contiguous).
  Tensor t = make({1, 2, 3, 4}, {2, 2}, kFloat32, device).t();
  CHECK(t.to(kFloat32).is_same(t));
  Tensor tc = t.to(kFloat32, false, true);
  CHECK(tc.is_contiguous());
  check_values(tc, {1, 3, 2, 4});
  // Options with only a dtype keep the device, and the other way round.
  Tensor h = a.to(TensorOptions(kFloat16));
  CHECK(h.dtype() == kFloat16);
  CHECK(h.device() == device);
  CHECK_THROWS_WITH(Tensor().to(kFloat32), "to: argument 'self' is an undefined tensor (a default-constructed Tensor)");
}

DEVICE_TEST_CASE("to(device) moves between cpu and the cuda devices", "[convert][device]") {
  int n = cuda::device_count();
  Tensor a = make({1.5, -2, 3.25, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor c = a.to(Device(kCPU));
  CHECK(c.device() == Device(kCPU));
  check_equal(c, a.cpu());
  check_values(c, {1.5, -2, 3.25, 4, 5, 6});
  CHECK(a.cpu().is_same(a) == device.is_cpu());
  if (n == 0) {
    CHECK_THROWS_AS(a.to(Device("cuda")), DeviceError);
    CHECK_THROWS_WITH(a.to(Device("cuda")),
                      Contains("to: cannot use device 'cuda': CUDA is not available") &&
                          Contains("Use the cpu device, or set TANDEM_EMULATE_CUDA=1 to emulate one"));
    CHECK_THROWS_WITH(a.cuda(), Contains("CUDA is not available"));
    return;
  }
  for (int i = 0; i < n; ++i) {
    Device target(kCUDA, i);
    INFO(target);
    Tensor g = a.to(target);
    CHECK(g.device() == target);
    CHECK(g.is_cuda());
    CHECK(g.is_same(a) == (device == target));
    CHECK(g.shares_storage(a) == (device == target));
    check_values(g, {1.5, -2, 3.25, 4, 5, 6});
    check_values(g.to(Device(kCPU)), {1.5, -2, 3.25, 4, 5, 6});
    // Device and dtype together, from a strided source.
    Tensor gi = a.t().to(target, kInt64);
    CHECK(gi.device() == target);
    CHECK(gi.dtype() == kInt64);
    check_values(gi, {1, 4, -2, 5, 3, 6});
    CHECK(a.cuda(i).device() == target);
    CHECK(a.to(target.str().c_str()).device() == target);
  }
  CHECK(a.cuda().device() == Device(kCUDA, 0));  // "cuda" is cuda:0
  CHECK(a.to(Device("cuda")).device() == Device(kCUDA, 0));
  if (n >= 2) {
    Tensor g1 = a.to(Device("cuda:1")).to(Device("cuda:0"));
    CHECK(g1.device() == Device(kCUDA, 0));
    check_values(g1, {1.5, -2, 3.25, 4, 5, 6});
    for (Dtype dt : {kFloat64, kFloat16, kBFloat16, kInt32, kUInt8, kBool}) {
      INFO(dt);
      Tensor x = make({0, 1, 2, 3}, {4}, dt, Device("cuda:0"));
      check_equal(x.to(Device("cuda:1")), x);
    }
  }
  std::string bad = "cuda:" + std::to_string(n);
  CHECK_THROWS_AS(a.to(Device(bad)), DeviceError);
  CHECK_THROWS_WITH(a.to(Device(bad)), Contains("to: invalid device '" + bad + "'"));
}

DEVICE_TEST_CASE("copy_ broadcasts, converts and crosses devices", "[convert][copy]") {
  Tensor dst = zeros({2, 3}, device);
  Tensor& r = dst.copy_(make({1, 2, 3}, {3}, kFloat32, device));
  CHECK(&r == &dst);
  check_values(dst, {1, 2, 3, 1, 2, 3});
  dst.copy_(make({7}, {}, kInt64, device));
  check_values(dst, {7, 7, 7, 7, 7, 7});
  dst.copy_(make({1.5, -2.5}, {2, 1}, kFloat64, device));
  check_values(dst, {1.5, 1.5, 1.5, -2.5, -2.5, -2.5});
  // Into an int tensor: truncation.
  Tensor idst = zeros({3}, TensorOptions(kInt32).device(device));
  idst.copy_(make({2.9, -2.9, 0.5}, {3}, kFloat32, device));
  check_values(idst, {2, -2, 0}, kExact);
  // Into non-contiguous destinations.
  Tensor base = zeros({3, 4}, device);
  base.t().copy_(make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}, kFloat32, device));
  check_values(base, {1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12});
  base.slice(1, 0, std::nullopt, 2).copy_(make({-1, -2}, {2}, kFloat16, device));
  check_values(base, {-1, 4, -2, 10, -1, 5, -2, 11, -1, 6, -2, 12});
  base.select(1, 1).copy_(base.select(1, 3));
  check_values(base.select(1, 1), {10, 11, 12});
  // Overlapping source and destination in different layouts.
  Tensor sq = make({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3}, kFloat32, device);
  sq.copy_(sq.t());
  check_values(sq, {0, 3, 6, 1, 4, 7, 2, 5, 8});
  sq.copy_(sq);
  check_values(sq, {0, 3, 6, 1, 4, 7, 2, 5, 8});
  // Across devices, with a dtype change, broadcasting and strided ends.
  for (const Device& other : test::devices()) {
    INFO(device << " <- " << other);
    Tensor src = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64, other);
    Tensor d = zeros({3, 2}, TensorOptions(kFloat32).device(device));
    d.copy_(src.t());
    CHECK(d.device() == device);
    check_values(d, {1, 4, 2, 5, 3, 6});
    Tensor dt = zeros({3, 2}, TensorOptions(kInt64).device(device)).t();
    dt.copy_(src);
    check_values(dt, {1, 2, 3, 4, 5, 6});
    Tensor db = zeros({2, 2, 3}, TensorOptions(kFloat16).device(device));
    db.copy_(src.select(0, 1));
    check_values(db, {4, 5, 6, 4, 5, 6, 4, 5, 6, 4, 5, 6});
    CHECK(src.device() == other);  // the source stays where it was
  }
  // Errors.
  CHECK_THROWS_AS(zeros({3}, device).copy_(zeros({2, 3}, device)), ShapeError);
  CHECK_THROWS_WITH(zeros({3}, device).copy_(zeros({2, 3}, device)),
                    "copy_: the source of shape [2, 3] cannot be broadcast to the destination's shape [3]");
  CHECK_THROWS_WITH(zeros({2, 3}, device).copy_(zeros({4}, device)),
                    "copy_: the size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1 "
                    "(shapes [2, 3] and [4] cannot be broadcast together)");
  CHECK_THROWS_WITH(zeros({3}, device).copy_(Tensor()),
                    "copy_: argument 'src' is an undefined tensor (a default-constructed Tensor)");
}

// Copies through a transpose take tiles on the CPU (edge tiles, blocks cut
// by the edge, batch dims outside the transposed pair, threads): every element
// is checked against its source element, computed here index by index.
DEVICE_TEST_CASE("transposed copies, element by element", "[convert][copy][transpose]") {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 70},  {70, 1},   {3, 5},   {8, 8},   {64, 64},
                                                           {65, 63}, {130, 67}, {7, 200}, {200, 9}, {129, 128}};
  for (auto [from, to] : copy_pairs()) {
    for (auto [rows, cols] : shapes) {
      INFO(from << " -> " << to << ", (" << rows << ", " << cols << ")");
      const std::vector<double> held = test::as_dtype(pattern(rows * cols, from), from);
      // x(i, j) = held[j * rows + i]: the transpose of a contiguous (cols, rows).
      Tensor x = make(held, {cols, rows}, from, device).t();
      std::vector<double> expected(held.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          expected[static_cast<size_t>(i * cols + j)] = converted(held[static_cast<size_t>(j * rows + i)], to);
      Tensor out = x.to(to, false, true);
      CHECK(out.is_contiguous());
      check_values(out, expected, kExact);
      // The other way round: a contiguous source into a transposed destination,
      // d(i, j) = storage[j * rows + i].
      Tensor storage = full({cols, rows}, 251, TensorOptions(to).device(device));
      storage.t().copy_(make(held, {rows, cols}, from, device));
      std::vector<double> stored(held.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          stored[static_cast<size_t>(j * rows + i)] = converted(held[static_cast<size_t>(i * cols + j)], to);
      check_values(storage, stored, kExact);
    }
  }
}

DEVICE_TEST_CASE("transposed copies with batch dims and threads", "[convert][copy][transpose]") {
  for (int threads : {1, 2}) {
    INFO("threads " << threads);
    Threads guard(threads);
    for (auto [from, to] : {std::pair{kFloat32, kFloat32}, std::pair{kFloat64, kFloat64}, std::pair{kInt64, kInt64},
                            std::pair{kUInt8, kUInt8}, std::pair{kFloat16, kFloat16}, std::pair{kFloat32, kBFloat16}}) {
      INFO(from << " -> " << to);
      // base(b, j, i) = held[(b * C + j) * R + i]; x = base.transpose(1, 2) is
      // (B, R, C) with its last two dims transposed; big enough for threads.
      const int64_t B = 3, R = 70, C = 250;
      const std::vector<double> held = test::as_dtype(pattern(B * R * C, from), from);
      Tensor base = make(held, {B, C, R}, from, device);
      auto at = [&](int64_t b, int64_t j, int64_t i) { return held[static_cast<size_t>((b * C + j) * R + i)]; };
      std::vector<double> expected;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < R; ++i)
          for (int64_t j = 0; j < C; ++j) expected.push_back(converted(at(b, j, i), to));
      check_values(base.transpose(1, 2).to(to, false, true), expected, kExact);
      // Every other batch: an outer dim whose stride does not merge.
      std::vector<double> sliced;
      for (int64_t b = 0; b < B; b += 2)
        for (int64_t i = 0; i < R; ++i)
          for (int64_t j = 0; j < C; ++j) sliced.push_back(converted(at(b, j, i), to));
      check_values(base.slice(0, 0, B, 2).transpose(1, 2).to(to, false, true), sliced, kExact);
      // The batch dim moved inside: permute(2, 0, 1) is (R, B, C), contiguous
      // along its first dim; (B, C) merge into one dim of the copy.
      std::vector<double> permuted;
      for (int64_t i = 0; i < R; ++i)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t j = 0; j < C; ++j) permuted.push_back(converted(at(b, j, i), to));
      check_values(base.permute({2, 0, 1}).to(to, false, true), permuted, kExact);
      // A transposed matrix expanded along a new batch dim (stride 0).
      Tensor m = base.select(0, 1).t();  // (R, C)
      std::vector<double> expanded;
      for (int64_t e = 0; e < 2; ++e)
        for (int64_t i = 0; i < R; ++i)
          for (int64_t j = 0; j < C; ++j) expanded.push_back(converted(at(1, j, i), to));
      Tensor dst = full({2, R, C}, 251, TensorOptions(to).device(device));
      dst.copy_(m);
      check_values(dst, expanded, kExact);
      // Into the transposed last dims of a 4-d destination, from a source
      // expanded along the first of its two batch dims.
      Tensor d4 = full({2, B, C, R}, 251, TensorOptions(to).device(device));
      d4.transpose(2, 3).copy_(base.transpose(1, 2).contiguous().expand({2, B, R, C}));
      std::vector<double> back;
      for (int64_t e = 0; e < 2; ++e)
        for (double v : held) back.push_back(converted(v, to));
      check_values(d4, back, kExact);
    }
  }
}

DEVICE_TEST_CASE("item() for every dtype", "[convert][item]") {
  CHECK(make({2.5}, {}, kFloat32, device).item<double>() == 2.5);
  CHECK(make({2.5}, {}, kFloat32, device).item().is_floating_point());
  CHECK(make({-1.25}, {1}, kFloat64, device).item<double>() == -1.25);
  CHECK(make({0.1}, {1, 1}, kFloat16, device).item<double>() == 0.0999755859375);
  CHECK(make({0.1}, {}, kBFloat16, device).item<float>() == 0.10009765625f);
  CHECK(make({0.1}, {}, kBFloat16, device).item().is_floating_point());
  Scalar i = make({-7}, {}, kInt64, device).item();
  CHECK(i.is_integral());
  CHECK(i.to_int() == -7);
  int64_t odd = 9007199254740993;  // 2^53 + 1: not a double, so item() must not go through one
  CHECK(from_blob(&odd, {}, kInt64).to(device, false, true).item<int64_t>() == odd);
  CHECK(make({-123}, {}, kInt32, device).item<int>() == -123);
  CHECK(make({-123}, {}, kInt32, device).item().is_integral());
  CHECK(make({200}, {}, kUInt8, device).item<int>() == 200);
  CHECK(make({200}, {}, kUInt8, device).item().is_integral());
  Scalar b = make({1}, {}, kBool, device).item();
  CHECK(b.is_bool());
  CHECK(b.to<bool>());
  CHECK_FALSE(make({0}, {}, kBool, device).item<bool>());
  // Through a view: the element the view starts at.
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  CHECK(a[1][2].item<double>() == 6);
  CHECK(a.t()[2][0].item<double>() == 3);
  CHECK(a.slice(1, 2).select(0, 1).item<double>() == 6);
  CHECK_THROWS_AS(a.item(), ValueError);
  CHECK_THROWS_WITH(a.item(), "item(): a Tensor with 6 elements cannot be converted to Scalar (shape [2, 3])");
  CHECK_THROWS_WITH(zeros({0}, device).item(),
                    "item(): a Tensor with 0 elements cannot be converted to Scalar (shape "
                    "[0])");
  CHECK_THROWS_WITH(a.item<float>(), Contains("6 elements cannot be converted"));
}

DEVICE_TEST_CASE("to_vector and cpu()", "[convert]") {
  Tensor a = make({1.5, 2, 3, 4}, {2, 2}, kFloat32, device);
  CHECK(a.to_vector<float>() == std::vector<float>{1.5f, 2, 3, 4});
  CHECK(a.t().to_vector<double>() == std::vector<double>{1.5, 3, 2, 4});
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(a.to_vector<bool>() == std::vector<bool>{true, true, true, true});
  CHECK(make({1, 0}, {2}, kBool, device).to_vector<uint8_t>() == std::vector<uint8_t>{1, 0});
  CHECK(zeros({0}, device).to_vector<float>().empty());
  CHECK(make({5}, {}, kInt32, device).to_vector<int32_t>() == std::vector<int32_t>{5});
  Tensor h = a.cpu();
  CHECK(h.is_cpu());
  check_equal(h, a);
}

DEVICE_TEST_CASE("origins of created, moved and computed tensors", "[convert][origin]") {
  Tensor z = zeros({2, 3}, device);
  const int line = __LINE__ - 1;  // the line above
  const std::string created = "created by tandem::zeros at " + where_from(line);
  CHECK(z.origin().describe() == created);
  CHECK_THAT(z.origin().describe(), Contains("test_convert.cpp"));
  // Views and same-device conversions keep pointing at the factory.
  CHECK(z.t().origin().describe() == created);
  CHECK(z[0].origin().describe() == created);
  CHECK(z.to(kFloat64).origin().describe() == "computed by to from a tensor " + created);
  // Results of ops say which op, and where the tensor upstream came from.
  Tensor o = ones({3}, device);
  const int line_o = __LINE__ - 1;  // the line above
  CHECK((z + o).origin().describe() == "computed by add from a tensor " + created);
  CHECK((o + z).origin().describe() ==
        "computed by add from a tensor created by tandem::ones at " + where_from(line_o));
  CHECK(exp(z * 2).origin().describe() == "computed by exp from a tensor " + created);
  CHECK((2 - z).origin().describe() == "computed by sub from a tensor " + created);
  CHECK((2 / z).origin().describe() == "computed by div from a tensor " + created);
  CHECK(pow(2, z).origin().describe() == "computed by pow from a tensor " + created);
  CHECK(where(z.gt(0), 1.0, z).origin().describe() == "computed by where from a tensor " + created);
  CHECK(z.clone().origin().describe() == "computed by clone from a tensor " + created);
  CHECK(z.masked_fill(z.eq(0), 1).origin().describe() == "computed by masked_fill from a tensor " + created);
  // .to() another device records the line of the move.
  Tensor c = z.cpu();
  const int line_c = __LINE__ - 1;  // the line above
  if (device.is_cpu()) {
    CHECK(c.origin().describe() == created);
  } else {
    CHECK(c.origin().describe() == "moved by .to() at " + where_from(line_c));
  }
  for (int i = 0; i < cuda::device_count(); ++i) {
    Device target(kCUDA, i);
    if (target == device) continue;
    Tensor m = z.to(target);
    const int line_m = __LINE__ - 1;  // the line above
    const std::string moved = "moved by .to() at " + where_from(line_m);
    CHECK(m.origin().describe() == moved);
    CHECK((m + 1).origin().describe() == "computed by add from a tensor " + moved);
    CHECK(z.cuda(i).origin().describe() == "moved by .to() at " + where_from(__LINE__));
    CHECK(z.to(target, kInt64).origin().describe() == "moved by .to() at " + where_from(__LINE__));
  }
}

namespace {

// The value of 16-bit pattern h with `mant` mantissa bits and exponent bias
// `bias` (float16: 10, 15; bfloat16: 7, 127), decoded by the formula.
double decoded(uint16_t h, int mant, int bias) {
  const int exp_bits = 15 - mant;
  const int e = (h >> mant) & ((1 << exp_bits) - 1);
  const int m = h & ((1 << mant) - 1);
  const double sign = (h & 0x8000) ? -1 : 1;
  if (e == (1 << exp_bits) - 1) return m == 0 ? sign * kInf : kNaN;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - mant);
  return sign * std::ldexp((1 << mant) + m, e - bias - mant);
}

// v rounded to the nearest value with `mant` mantissa bits and exponent
// bias `bias`, ties to even, by arithmetic in double (exact for these sizes).
double rounded_to(double v, int mant, int bias) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  const int e = std::max(std::ilogb(v), 1 - bias);  // subnormals share the smallest exponent
  const double ulp = std::ldexp(1.0, e - mant);
  const double r = std::nearbyint(v / ulp) * ulp;  // the default rounding mode: to nearest even
  const double largest = std::ldexp(2.0 - std::ldexp(1.0, -mant), bias);
  return std::abs(r) > largest ? std::copysign(kInf, v) : r;
}

}  // namespace

TEST_CASE("float16 and bfloat16 conversions: every 16-bit value, every tie and its neighbours, a grid of floats",
          "[convert][half]") {
  struct Kind {
    const char* name;
    int mant, bias;
    uint16_t (*to16)(float);
    float (*from16)(uint16_t);
  } kinds[] = {{"float16", 10, 15, detail::float_to_half_bits, detail::half_bits_to_float},
               {"bfloat16", 7, 127, detail::float_to_bfloat16_bits, detail::bfloat16_bits_to_float}};
  for (const Kind& k : kinds) {
    INFO(k.name);
    int64_t bad = 0;
    auto check = [&](float f) {
      const uint16_t h = k.to16(f);
      const double want = rounded_to(f, k.mant, k.bias), got = decoded(h, k.mant, k.bias);
      const bool ok = std::isnan(want) ? std::isnan(got) : (got == want && std::signbit(got) == std::signbit(want));
      if (!ok && bad++ < 5) FAIL_CHECK(f << " (bits " << std::hex << detail::float_bits(f) << ") gave " << h);
    };
    for (uint32_t h = 0; h < 65536; ++h) {
      const double v = decoded(static_cast<uint16_t>(h), k.mant, k.bias);
      const float f = k.from16(static_cast<uint16_t>(h));
      if (std::isnan(v) ? !std::isnan(f) : (static_cast<double>(f) != v || std::signbit(f) != std::signbit(v)))
        if (bad++ < 5) FAIL_CHECK("decoding " << h << " gave " << f);
      if (std::isnan(v)) {
        CHECK(std::isnan(decoded(k.to16(f), k.mant, k.bias)));  // a nan stays a nan
        continue;
      }
      check(f);
      // The tie halfway to the next value up in magnitude, and the floats
      // on either side of it.
      const double next = decoded(static_cast<uint16_t>(h + 1), k.mant, k.bias);
      if (!std::isinf(v) && !std::isnan(next) && !std::isinf(next) && std::signbit(next) == std::signbit(v)) {
        const float tie = static_cast<float>((v + next) / 2);
        REQUIRE(static_cast<double>(tie) == (v + next) / 2);
        check(tie);
        check(std::nextafter(tie, 0.0f));
        check(std::nextafter(tie, std::copysign(std::numeric_limits<float>::infinity(), tie)));
      }
    }
    // Every 4099th float bit pattern (a prime step: every exponent, both
    // signs, nans and infinities).
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) check(detail::bits_float(static_cast<uint32_t>(u)));
    CHECK(bad == 0);
  }
}

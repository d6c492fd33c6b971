// View ops: sizes, strides and offsets, shared storage (writes through a view
// reach the base), when reshape copies, contiguous/clone, and every error
// message, on every device.
#include "helpers.h"

using namespace tandem;
using Catch::Contains;
using test::check_values;
using test::make;

namespace {
// 0, 1, ..., n-1 as float32, shaped.
Tensor iota(IntArrayRef shape, Device device, Dtype dtype = kFloat32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(static_cast<double>(k));
  return make(v, shape, dtype, device);
}
std::vector<double> range(int64_t n) {
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(static_cast<double>(k));
  return v;
}
}  // namespace

DEVICE_TEST_CASE("transpose shares storage", "[views]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor t = a.t();
  CHECK(t.sizes().vec() == Shape{3, 2});
  CHECK(t.strides().vec() == Shape{1, 3});
  CHECK(t.shares_storage(a));
  CHECK_FALSE(t.is_contiguous());
  check_values(t.contiguous(), {1, 4, 2, 5, 3, 6});
}

DEVICE_TEST_CASE("views keep dtype, device and origin", "[views]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    INFO(dt);
    Tensor a = iota({2, 3}, device, dt);
    for (const Tensor& v : {a.view({3, 2}), a.t(), a[1], a.unsqueeze(0), a.expand({4, 2, 3}), a.slice(1, 1),
                            a.permute({1, 0}), a.narrow(0, 1, 1), a.flatten(), a.squeeze()}) {
      CHECK(v.dtype() == dt);
      CHECK(v.device() == device);
      CHECK(v.shares_storage(a));
      CHECK(v.origin().describe() == a.origin().describe());
    }
  }
}

DEVICE_TEST_CASE("view", "[views][view]") {
  Tensor a = iota({2, 3}, device);
  Tensor v = a.view({3, 2});
  CHECK(v.sizes().vec() == Shape{3, 2});
  CHECK(v.strides().vec() == Shape{2, 1});
  CHECK(v.shares_storage(a));
  check_values(v, range(6));
  CHECK(a.view({-1}).sizes().vec() == Shape{6});
  CHECK(a.view({-1, 2}).sizes().vec() == Shape{3, 2});
  CHECK(a.view({1, -1, 1}).sizes().vec() == Shape{1, 6, 1});
  CHECK(a.view({6, 1}).strides().vec() == Shape{1, 1});
  CHECK(a.view_as(zeros({3, 2}, device)).sizes().vec() == Shape{3, 2});
  // 0-dim <-> one element.
  Tensor s = make({5}, {}, kFloat32, device);
  CHECK(s.view({1}).sizes().vec() == Shape{1});
  CHECK(s.view({-1}).sizes().vec() == Shape{1});
  CHECK(s.view({1, 1}).sizes().vec() == Shape{1, 1});
  CHECK(s.view({1}).view({}).dim() == 0);
  CHECK(s.view({}).item<double>() == 5);
  // Empty.
  Tensor e = zeros({0, 3}, device);
  CHECK(e.view({-1}).sizes().vec() == Shape{0});
  CHECK(e.view({3, 0, 2}).sizes().vec() == Shape{3, 0, 2});
  // A transposed tensor can be viewed when the new shape only splits or
  // adds size-1 dims inside its layout.
  Tensor t = a.t();  // (3, 2), strides (1, 3)
  Tensor tv = t.view({3, 2, 1});
  CHECK(tv.strides().vec() == Shape{1, 3, 3});
  CHECK(tv.shares_storage(a));
  check_values(tv, {0, 3, 1, 4, 2, 5});
  Tensor t3 = iota({2, 3, 4}, device).transpose(0, 1);  // (3, 2, 4): the last dim stays contiguous
  Tensor split = t3.view({3, 2, 2, 2});
  CHECK(split.strides().vec() == Shape{4, 12, 2, 1});
  check_values(split.select(0, 1).select(0, 1), {16, 17, 18, 19});
  // ... but not when a merged dim spans two separate chunks.
  const char* msg =
      "view size is not compatible with input tensor's size and stride (size [3, 2], stride [1, 3]): at "
      "least one dimension spans across two contiguous subspaces. Use .reshape(...) instead";
  CHECK_THROWS_AS(t.view({6}), ShapeError);
  CHECK_THROWS_WITH(t.view({6}), msg);
  CHECK_THROWS_WITH(t.view({-1}), msg);
  CHECK_THROWS_WITH(t3.view({6, 4}), Contains("size [3, 2, 4], stride [4, 12, 1]"));
  CHECK_THROWS_WITH(iota({4, 4}, device).slice(1, 0, 3).view({12}), Contains("view size is not compatible"));
  // A step slice whose rows are evenly spaced is one strided run: viewable.
  Tensor every_other = iota({4, 4}, device).slice(1, 0, std::nullopt, 2);
  CHECK(every_other.view({8}).strides().vec() == Shape{2});
  check_values(every_other.view({8}), {0, 2, 4, 6, 8, 10, 12, 14});
  // Invalid sizes.
  CHECK_THROWS_AS(a.view({4, -1}), ShapeError);
  CHECK_THROWS_WITH(a.view({4, -1}), "view: shape '[4, -1]' is invalid for input of size 6");
  CHECK_THROWS_WITH(a.view({7}), "view: shape '[7]' is invalid for input of size 6");
  CHECK_THROWS_WITH(a.view({-1, -1}), "view: only one dimension can be inferred (shape [-1, -1])");
  CHECK_THROWS_WITH(a.view({-2, 3}), "view: invalid shape dimension -2 in [-2, 3]");
  CHECK_THROWS_WITH(e.view({-1, 0}), "view: shape '[-1, 0]' is invalid for input of size 0");
  CHECK_THROWS_WITH(Tensor().view({1}), "view: argument 'self' is an undefined tensor (a default-constructed Tensor)");
}

DEVICE_TEST_CASE("reshape views when it can and copies when it must", "[views][reshape]") {
  Tensor a = iota({2, 3}, device);
  Tensor r = a.reshape({3, 2});
  CHECK(r.shares_storage(a));
  CHECK(r.reshape({-1}).shares_storage(a));
  Tensor t = a.t();
  Tensor c = t.reshape({6});  // impossible as a view: a contiguous copy
  CHECK_FALSE(c.shares_storage(a));
  CHECK(c.is_contiguous());
  check_values(c, {0, 3, 1, 4, 2, 5});
  Tensor tv = t.reshape({3, 2, 1});  // possible as a view
  CHECK(tv.shares_storage(a));
  CHECK(t.reshape_as(zeros({2, 3}, device)).sizes().vec() == Shape{2, 3});
  check_values(t.reshape({2, 3}), {0, 3, 1, 4, 2, 5});
  check_values(a.expand({2, 2, 3}).reshape({4, 3}), {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5});
  CHECK(make({7}, {}, kFloat32, device).reshape({1, 1}).sizes().vec() == Shape{1, 1});
  CHECK(zeros({0, 4}, device).reshape({2, 0, 3}).sizes().vec() == Shape{2, 0, 3});
  // -1 is ambiguous with zero elements (torch refuses it too).
  CHECK_THROWS_WITH(zeros({0, 4}, device).reshape({2, 0, -1}),
                    "reshape: shape '[2, 0, -1]' is invalid for input "
                    "of size 0");
  CHECK_THROWS_AS(a.reshape({4}), ShapeError);
  CHECK_THROWS_WITH(a.reshape({4}), "reshape: shape '[4]' is invalid for input of size 6");
  CHECK_THROWS_WITH(a.reshape({-1, -1}), "reshape: only one dimension can be inferred (shape [-1, -1])");
  CHECK_THROWS_WITH(a.reshape({0, -1}), "reshape: shape '[0, -1]' is invalid for input of size 6");
}

DEVICE_TEST_CASE("flatten", "[views][flatten]") {
  Tensor a = iota({2, 3, 4}, device);
  CHECK(a.flatten().sizes().vec() == Shape{24});
  CHECK(a.flatten().shares_storage(a));
  CHECK(a.flatten(1).sizes().vec() == Shape{2, 12});
  CHECK(a.flatten(0, 1).sizes().vec() == Shape{6, 4});
  CHECK(a.flatten(-2, -1).sizes().vec() == Shape{2, 12});
  CHECK(a.flatten(1, 1).sizes().vec() == Shape{2, 3, 4});
  CHECK(make({3}, {}, kFloat32, device).flatten().sizes().vec() == Shape{1});
  Tensor t = a.transpose(0, 2);  // (4, 3, 2)
  Tensor f = t.flatten();
  CHECK_FALSE(f.shares_storage(a));
  std::vector<double> expected;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) expected.push_back(i * 12 + j * 4 + k);
  check_values(f, expected);
  CHECK_THROWS_AS(a.flatten(2, 1), IndexError);
  CHECK_THROWS_WITH(a.flatten(2, 1), "flatten: start_dim (2) cannot come after end_dim (1)");
  CHECK_THROWS_WITH(a.flatten(-1, 0), "flatten: start_dim (-1) cannot come after end_dim (0)");
  CHECK_THROWS_AS(a.flatten(3), IndexError);
  CHECK_THROWS_WITH(a.flatten(3), "flatten: dimension out of range (expected to be in range of [-3, 2], but got 3)");
  CHECK_THROWS_WITH(a.flatten(0, -4),
                    "flatten: dimension out of range (expected to be in range of [-3, 2], but got -4)");
}

DEVICE_TEST_CASE("squeeze and unsqueeze", "[views][squeeze]") {
  Tensor a = iota({1, 3, 1, 2}, device);
  CHECK(a.squeeze().sizes().vec() == Shape{3, 2});
  CHECK(a.squeeze().strides().vec() == Shape{2, 1});
  CHECK(a.squeeze(0).sizes().vec() == Shape{3, 1, 2});
  CHECK(a.squeeze(-2).sizes().vec() == Shape{1, 3, 2});
  CHECK(a.squeeze(1).sizes().vec() == Shape{1, 3, 1, 2});  // not size 1: unchanged
  CHECK(a.squeeze(1).shares_storage(a));
  CHECK(make({4}, {}, kFloat32, device).squeeze().dim() == 0);
  CHECK(make({4}, {}, kFloat32, device).squeeze(0).dim() == 0);
  CHECK(make({4}, {}, kFloat32, device).squeeze(-1).dim() == 0);
  CHECK(iota({1, 1}, device).squeeze().dim() == 0);
  check_values(a.squeeze(), range(6));
  CHECK_THROWS_AS(a.squeeze(4), IndexError);
  CHECK_THROWS_WITH(a.squeeze(4), "squeeze: dimension out of range (expected to be in range of [-4, 3], but got 4)");
  CHECK_THROWS_WITH(make({4}, {}, kFloat32, device).squeeze(1),
                    "squeeze: dimension out of range (expected to be in range of [-1, 0], but got 1)");

  Tensor b = iota({2, 3}, device);
  CHECK(b.unsqueeze(0).sizes().vec() == Shape{1, 2, 3});
  CHECK(b.unsqueeze(0).strides().vec() == Shape{6, 3, 1});
  CHECK(b.unsqueeze(1).sizes().vec() == Shape{2, 1, 3});
  CHECK(b.unsqueeze(1).strides().vec() == Shape{3, 3, 1});
  CHECK(b.unsqueeze(2).sizes().vec() == Shape{2, 3, 1});
  CHECK(b.unsqueeze(-1).sizes().vec() == Shape{2, 3, 1});
  CHECK(b.unsqueeze(-1).strides().vec() == Shape{3, 1, 1});
  CHECK(b.unsqueeze(-3).sizes().vec() == Shape{1, 2, 3});
  CHECK(b.t().unsqueeze(1).strides().vec() == Shape{1, 6, 3});  // as torch
  CHECK(make({4}, {}, kFloat32, device).unsqueeze(0).sizes().vec() == Shape{1});
  CHECK(make({4}, {}, kFloat32, device).unsqueeze(-1).sizes().vec() == Shape{1});
  check_values(b.unsqueeze(1), range(6));
  CHECK_THROWS_AS(b.unsqueeze(3), IndexError);
  CHECK_THROWS_WITH(b.unsqueeze(3),
                    "unsqueeze: dimension out of range (expected to be in range of [-3, 2], but got 3)");
  CHECK_THROWS_WITH(b.unsqueeze(-4),
                    "unsqueeze: dimension out of range (expected to be in range of [-3, 2], but got -4)");
}

DEVICE_TEST_CASE("permute, transpose and t", "[views][permute]") {
  Tensor a = iota({2, 3, 4}, device);
  Tensor p = a.permute({2, 0, 1});
  CHECK(p.sizes().vec() == Shape{4, 2, 3});
  CHECK(p.strides().vec() == Shape{1, 12, 4});
  CHECK(p.shares_storage(a));
  std::vector<double> expected;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) expected.push_back(i * 12 + j * 4 + k);
  check_values(p, expected);
  CHECK(a.permute({-1, 0, 1}).strides().vec() == Shape{1, 12, 4});
  CHECK(a.permute({0, 1, 2}).strides().vec() == Shape{12, 4, 1});
  CHECK(make({1}, {}, kFloat32, device).permute({}).dim() == 0);
  CHECK_THROWS_AS(a.permute({0, 1}), ShapeError);
  CHECK_THROWS_WITH(a.permute({0, 1}),
                    "permute: number of dims don't match in permute (input has 3 dims, dims has 2: [0, 1])");
  CHECK_THROWS_WITH(a.permute({0, 1, 2, 3}), Contains("input has 3 dims, dims has 4"));
  CHECK_THROWS_AS(a.permute({0, 0, 1}), ValueError);
  CHECK_THROWS_WITH(a.permute({0, 0, 1}), "permute: repeated dim 0 in [0, 0, 1]");
  CHECK_THROWS_WITH(a.permute({2, 0, -1}), "permute: repeated dim 2 in [2, 0, -1]");
  CHECK_THROWS_AS(a.permute({0, 1, 3}), IndexError);
  CHECK_THROWS_WITH(a.permute({0, 1, 3}),
                    "permute: dimension out of range (expected to be in range of [-3, 2], but "
                    "got 3)");

  Tensor t = a.transpose(0, 2);
  CHECK(t.sizes().vec() == Shape{4, 3, 2});
  CHECK(t.strides().vec() == Shape{1, 4, 12});
  CHECK(a.transpose(-1, 0).strides().vec() == Shape{1, 4, 12});
  CHECK(a.transpose(1, 1).strides().vec() == Shape{12, 4, 1});
  check_values(a.transpose(1, 2).select(0, 1).select(0, 3), {15, 19, 23});
  CHECK(make({1}, {}, kFloat32, device).transpose(0, -1).dim() == 0);
  CHECK_THROWS_AS(a.transpose(0, 3), IndexError);
  CHECK_THROWS_WITH(a.transpose(0, 3),
                    "transpose: dimension out of range (expected to be in range of [-3, 2], but "
                    "got 3)");
  CHECK_THROWS_WITH(a.transpose(-4, 0), Contains("but got -4"));

  Tensor m = iota({2, 3}, device);
  CHECK(m.t().sizes().vec() == Shape{3, 2});
  CHECK(m.t().t().strides().vec() == Shape{3, 1});
  CHECK(iota({5}, device).t().sizes().vec() == Shape{5});
  CHECK(make({2}, {}, kFloat32, device).t().dim() == 0);
  CHECK_THROWS_AS(a.t(), ShapeError);
  CHECK_THROWS_WITH(a.t(), "t() expects a tensor with <= 2 dimensions, but self is 3D");
}

DEVICE_TEST_CASE("expand and expand_as", "[views][expand]") {
  Tensor c = make({1, 2, 3}, {3, 1}, kFloat32, device);
  Tensor e = c.expand({3, 4});
  CHECK(e.sizes().vec() == Shape{3, 4});
  CHECK(e.strides().vec() == Shape{1, 0});
  CHECK(e.shares_storage(c));
  check_values(e, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  CHECK(c.expand({-1, 4}).strides().vec() == Shape{1, 0});
  Tensor lead = c.expand({2, 3, 4});
  CHECK(lead.sizes().vec() == Shape{2, 3, 4});
  CHECK(lead.strides().vec() == Shape{0, 1, 0});
  CHECK(c.expand({3, 1}).strides().vec() == Shape{1, 1});
  CHECK(c.expand({0, 3, 0}).numel() == 0);
  CHECK(make({7}, {}, kFloat32, device).expand({2, 2}).strides().vec() == Shape{0, 0});
  check_values(make({7}, {}, kFloat32, device).expand({2, 2}), {7, 7, 7, 7});
  CHECK(c.expand_as(zeros({5, 3, 2}, device)).sizes().vec() == Shape{5, 3, 2});
  // Writes into the base show through every expanded element.
  c.select(0, 1).fill_(9);
  check_values(e.select(0, 1), {9, 9, 9, 9});
  CHECK_THROWS_AS(c.expand({4}), ShapeError);
  CHECK_THROWS_WITH(c.expand({4}),
                    "expand: the number of sizes provided (1) must be greater or equal to the number "
                    "of dimensions in the tensor (2)");
  CHECK_THROWS_WITH(c.expand({4, 4}),
                    "expand: the expanded size of the tensor (4) must match the existing size (3) "
                    "at non-singleton dimension 0.  Target sizes: [4, 4].  Tensor sizes: [3, 1]");
  CHECK_THROWS_WITH(c.expand({-1, 3, 4}),
                    "expand: the expanded size of the tensor (-1) isn't allowed in a leading, "
                    "non-existing dimension 0");
  CHECK_THROWS_WITH(c.expand({3, -2}),
                    "expand: invalid size -2 at dimension 1 (sizes must be non-negative, or -1 to "
                    "keep the existing size).  Target sizes: [3, -2].  Tensor sizes: [3, 1]");
  CHECK_THROWS_WITH(c.expand_as(zeros({2, 2}, device)), Contains("must match the existing size (3)"));
}

DEVICE_TEST_CASE("narrow", "[views][narrow]") {
  Tensor a = iota({3, 4}, device);
  Tensor n = a.narrow(1, 1, 2);
  CHECK(n.sizes().vec() == Shape{3, 2});
  CHECK(n.storage_offset() == 1);
  CHECK(n.shares_storage(a));
  check_values(n, {1, 2, 5, 6, 9, 10});
  check_values(a.narrow(0, -1, 1), {8, 9, 10, 11});
  check_values(a.narrow(-1, 3, 1), {3, 7, 11});
  CHECK(a.narrow(0, 3, 0).sizes().vec() == Shape{0, 4});
  CHECK(a.narrow(0, 0, 0).numel() == 0);
  CHECK_THROWS_AS(a.narrow(0, 4, 0), IndexError);
  CHECK_THROWS_WITH(a.narrow(0, 4, 0), "narrow: start (4) is out of bounds for dimension 0 of size 3");
  CHECK_THROWS_WITH(a.narrow(1, -5, 1), "narrow: start (-5) is out of bounds for dimension 1 of size 4");
  CHECK_THROWS_WITH(a.narrow(0, 1, 3), "narrow: start (1) + length (3) exceeds dimension size (3)");
  CHECK_THROWS_WITH(a.narrow(0, -1, 2), "narrow: start (2) + length (2) exceeds dimension size (3)");
  CHECK_THROWS_WITH(a.narrow(0, 0, -1), "narrow: length must be non-negative, got -1");
  CHECK_THROWS_WITH(a.narrow(2, 0, 1),
                    "narrow: dimension out of range (expected to be in range of [-2, 1], but got 2)");
  CHECK_THROWS_WITH(make({1}, {}, kFloat32, device).narrow(0, 0, 1), "narrow() cannot be applied to a 0-dim tensor");
}

DEVICE_TEST_CASE("slice", "[views][slice]") {
  Tensor x = iota({10}, device);
  check_values(x.slice(0, -3, -1), {7, 8});
  check_values(x.slice(0, 2, 100), {2, 3, 4, 5, 6, 7, 8, 9});
  check_values(x.slice(0, -100, 3), {0, 1, 2});
  check_values(x.slice(0, 1, std::nullopt, 3), {1, 4, 7});
  check_values(x.slice(0, std::nullopt, std::nullopt, 4), {0, 4, 8});
  check_values(x.slice(0, 7), {7, 8, 9});
  check_values(x.slice(0, std::nullopt, -8), {0, 1});
  CHECK(x.slice(0, 8, 2).sizes().vec() == Shape{0});
  CHECK(x.slice(0, 20).sizes().vec() == Shape{0});
  CHECK(x.slice(0, 3, 3).numel() == 0);
  Tensor s = x.slice(0, 2, 9, 3);
  CHECK(s.storage_offset() == 2);
  CHECK(s.strides().vec() == Shape{3});
  CHECK(s.sizes().vec() == Shape{3});
  check_values(s.slice(0, 1), {5, 8});  // slices compose
  CHECK(s.slice(0, 1).storage_offset() == 5);
  Tensor m = iota({3, 4}, device);
  Tensor ms = m.slice(1, 1, std::nullopt, 2);
  CHECK(ms.sizes().vec() == Shape{3, 2});
  CHECK(ms.strides().vec() == Shape{4, 2});
  check_values(ms, {1, 3, 5, 7, 9, 11});
  check_values(m.slice(-2, 1), {4, 5, 6, 7, 8, 9, 10, 11});
  CHECK_THROWS_AS(x.slice(0, 0, 5, 0), ValueError);
  CHECK_THROWS_WITH(x.slice(0, 0, 5, 0), "slice: step must be positive, got 0");
  CHECK_THROWS_WITH(x.slice(0, 0, 5, -1), "slice: step must be positive, got -1");
  CHECK_THROWS_AS(x.slice(1), IndexError);
  CHECK_THROWS_WITH(x.slice(1), "slice: dimension out of range (expected to be in range of [-1, 0], but got 1)");
  CHECK_THROWS_WITH(make({1}, {}, kFloat32, device).slice(0), "slice() cannot be applied to a 0-dim tensor");
}

DEVICE_TEST_CASE("select and operator[]", "[views][select]") {
  Tensor a = iota({2, 3, 4}, device);
  Tensor s = a.select(1, 2);
  CHECK(s.sizes().vec() == Shape{2, 4});
  CHECK(s.strides().vec() == Shape{12, 1});
  CHECK(s.storage_offset() == 8);
  check_values(s, {8, 9, 10, 11, 20, 21, 22, 23});
  check_values(a.select(-1, -1), {3, 7, 11, 15, 19, 23});
  check_values(a.select(0, -2).select(0, 0), {0, 1, 2, 3});
  CHECK(a[1].sizes().vec() == Shape{3, 4});
  check_values(a[1][2], {20, 21, 22, 23});
  CHECK(a[1][2][3].dim() == 0);
  CHECK(a[1][2][3].item<double>() == 23);
  CHECK(a[-1][-1][-1].item<double>() == 23);
  CHECK_THROWS_AS(a.select(0, 2), IndexError);
  CHECK_THROWS_WITH(a.select(0, 2), "select(): index 2 out of range for tensor of size [2, 3, 4] at dimension 0");
  CHECK_THROWS_WITH(a.select(-1, -5), "select(): index -5 out of range for tensor of size [2, 3, 4] at dimension 2");
  CHECK_THROWS_WITH(a[2], "select(): index 2 out of range for tensor of size [2, 3, 4] at dimension 0");
  CHECK_THROWS_WITH(a.select(3, 0), "select: dimension out of range (expected to be in range of [-3, 2], but got 3)");
  CHECK_THROWS_AS(a[0][0][0][0], IndexError);
  CHECK_THROWS_WITH(a[0][0][0][0], "select() cannot be applied to a 0-dim tensor");
  CHECK_THROWS_WITH(zeros({0}, device)[0], "select(): index 0 out of range for tensor of size [0] at dimension 0");
}

DEVICE_TEST_CASE("contiguous and clone", "[views][contiguous]") {
  Tensor a = iota({2, 3}, device);
  CHECK(a.contiguous().is_same(a));  // already contiguous: the same tensor
  Tensor t = a.t();
  Tensor c = t.contiguous();
  CHECK_FALSE(c.is_same(t));
  CHECK_FALSE(c.shares_storage(a));
  CHECK(c.is_contiguous());
  CHECK(c.strides().vec() == Shape{2, 1});
  CHECK(c.device() == device);
  check_values(c, {0, 3, 1, 4, 2, 5});
  CHECK(a.expand({2, 2, 3}).contiguous().strides().vec() == Shape{6, 3, 1});
  check_values(a.slice(1, 0, std::nullopt, 2).contiguous(), {0, 2, 3, 5});
  // clone: same values, its own storage, always contiguous.
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    INFO(dt);
    Tensor x = iota({2, 3}, device, dt);
    Tensor y = x.clone();
    CHECK_FALSE(y.is_same(x));
    CHECK_FALSE(y.shares_storage(x));
    CHECK(y.dtype() == dt);
    CHECK(y.device() == device);
    test::check_equal(y, x);
    y.zero_();
    test::check_equal(x, iota({2, 3}, device, dt));  // the original is untouched
    Tensor yt = x.t().clone();
    CHECK(yt.is_contiguous());
    test::check_equal(yt, x.t());
  }
  Tensor e = zeros({0, 3}, device).clone();
  CHECK(e.sizes().vec() == Shape{0, 3});
  Tensor s = make({4}, {}, kFloat32, device).clone();
  CHECK(s.dim() == 0);
  CHECK(s.item<double>() == 4);
  CHECK_THROWS_WITH(Tensor().clone(), "clone: argument 'self' is an undefined tensor (a default-constructed Tensor)");
  CHECK_THROWS_WITH(Tensor().contiguous(), Contains("contiguous: argument 'self' is an undefined tensor"));
}

DEVICE_TEST_CASE("writes through views reach the base", "[views][write]") {
  Tensor a = iota({3, 4}, device);
  a.view({12}).slice(0, 0, std::nullopt, 5).fill_(-1);  // elements 0, 5, 10
  check_values(a, {-1, 1, 2, 3, 4, -1, 6, 7, 8, 9, -1, 11});
  a.t()[3].add_(100);  // column 3
  check_values(a.select(1, 3), {103, 107, 111});
  a[1].copy_(make({10, 20, 30, 40}, {4}, kFloat32, device));
  check_values(a[1], {10, 20, 30, 40});
  a.narrow(0, 2, 1).squeeze(0).unsqueeze(1).mul_(2);  // row 2, seen as a column
  check_values(a[2], {16, 18, -2, 222});
  a.permute({1, 0}).slice(0, 1, 3).zero_();  // columns 1 and 2
  check_values(a, {-1, 0, 0, 103, 10, 0, 0, 40, 16, 0, 0, 222});
  a.reshape({2, 6})[1].fill_(5);  // reshape of a contiguous tensor is a view
  check_values(a, {-1, 0, 0, 103, 10, 0, 5, 5, 5, 5, 5, 5});
  // A copy made by reshape is not a view: writes to it stay there.
  Tensor copy = a.t().reshape({12});
  copy.fill_(0);
  check_values(a[0], {-1, 0, 0, 103});
  // And the base's writes are visible in every view.
  Tensor v = a.view({4, 3});
  a.fill_(3);
  check_values(v, std::vector<double>(12, 3));
}

// cat, stack, split and chunk: values, dims, dtype promotion, non-contiguous
// and empty inputs, views sharing storage, and every error message.
#include <string>

#include "helpers.h"

using namespace tandem;
using test::check_values;
using test::make;

using test::as_dtype;
using test::kAllDtypes;
using test::other_device;

// ---------------------------------------------------------------- cat
DEVICE_TEST_CASE("cat joins along dim 0, 1 and negative dims", "[shape_ops][cat]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor b = make({7, 8, 9}, {1, 3}, kFloat32, device);
  Tensor c = cat({a, b});
  CHECK(c.sizes().vec() == Shape{3, 3});
  CHECK(c.device() == device);
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.shares_storage(a));
  check_values(c, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(std::string(c.origin().op) == "cat");

  Tensor d = make({10, 20}, {2, 1}, kFloat32, device);
  Tensor e = cat({a, d, a}, 1);
  CHECK(e.sizes().vec() == Shape{2, 7});
  check_values(e, {1, 2, 3, 10, 1, 2, 3, 4, 5, 6, 20, 4, 5, 6});
  check_values(cat({a, d}, -1), {1, 2, 3, 10, 4, 5, 6, 20});
  check_values(cat({a, b}, -2), {1, 2, 3, 4, 5, 6, 7, 8, 9});

  // One tensor: a copy, not the same storage.
  Tensor one = cat({a});
  CHECK_FALSE(one.shares_storage(a));
  check_values(one, {1, 2, 3, 4, 5, 6});

  // 3-D along the middle dim.
  Tensor x = make({1, 2, 3, 4}, {2, 1, 2}, kFloat32, device);
  Tensor y = make({5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 2}, kFloat32, device);
  Tensor z = cat({x, y}, 1);
  CHECK(z.sizes().vec() == Shape{2, 3, 2});
  check_values(z, {1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12});
}

DEVICE_TEST_CASE("cat works for every dtype", "[shape_ops][cat]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor a = make({1, 0, 3}, {3}, dt, device);
    Tensor b = make({4, 5}, {2}, dt, device);
    Tensor c = cat({a, b});
    CHECK(c.dtype() == dt);
    check_values(c, as_dtype({1, 0, 3, 4, 5}, dt));
    Tensor m = cat({a.reshape({3, 1}), b.reshape({2, 1}).expand({2, 2}).slice(1, 0, 1)}, 0);
    check_values(m, as_dtype({1, 0, 3, 4, 5}, dt));
  }
}

DEVICE_TEST_CASE("cat promotes dtypes across all inputs", "[shape_ops][cat]") {
  Tensor i32 = make({1, 2}, {2}, kInt32, device);
  Tensor i64 = make({3}, {1}, kInt64, device);
  Tensor f16 = make({0.5}, {1}, kFloat16, device);
  Tensor bf16 = make({1.5}, {1}, kBFloat16, device);
  Tensor u8 = make({200}, {1}, kUInt8, device);
  Tensor b = make({1, 0}, {2}, kBool, device);
  Tensor f64 = make({2.25}, {1}, kFloat64, device);

  Tensor c = cat({i32, i64});
  CHECK(c.dtype() == kInt64);
  check_values(c, {1, 2, 3});
  c = cat({i32, f16, i64});
  CHECK(c.dtype() == kFloat16);
  check_values(c, {1, 2, 0.5, 3});
  c = cat({f16, bf16});
  CHECK(c.dtype() == kFloat32);
  check_values(c, {0.5, 1.5});
  c = cat({b, u8});
  CHECK(c.dtype() == kUInt8);
  check_values(c, {1, 0, 200});
  c = cat({u8, i32});
  CHECK(c.dtype() == kInt32);
  check_values(c, {200, 1, 2});
  c = cat({b, b});
  CHECK(c.dtype() == kBool);
  check_values(c, {1, 0, 1, 0});
  c = cat({bf16, i64, f64});
  CHECK(c.dtype() == kFloat64);
  check_values(c, {1.5, 3, 2.25});
}

DEVICE_TEST_CASE("cat reads non-contiguous and expanded inputs", "[shape_ops][cat]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device).t();  // (3, 2): 1 4 / 2 5 / 3 6
  REQUIRE_FALSE(a.is_contiguous());
  Tensor b = make({7, 8}, {1, 2}, kFloat64, device).expand({2, 2});  // 7 8 / 7 8
  Tensor c = cat({a, b});
  CHECK(c.dtype() == kFloat64);
  CHECK(c.sizes().vec() == Shape{5, 2});
  check_values(c, {1, 4, 2, 5, 3, 6, 7, 8, 7, 8});
  Tensor d = cat({a, a.slice(1, 1, 2)}, 1);  // a column of a
  check_values(d, {1, 4, 4, 2, 5, 5, 3, 6, 6});
  Tensor stepped = make({0, 1, 2, 3, 4, 5, 6, 7}, {8}, kInt32, device).slice(0, 1, 8, 3);  // 1 4 7
  check_values(cat({stepped, stepped}), {1, 4, 7, 1, 4, 7});
}

DEVICE_TEST_CASE("cat handles empty tensors", "[shape_ops][cat]") {
  Tensor a = make({1, 2, 3, 4}, {2, 2}, kFloat32, device);
  // The legacy rule: 1-D tensors of shape [0] are skipped whatever the other shapes,
  // but still take part in the dtype promotion.
  Tensor legacy = empty({0}, TensorOptions(kFloat64).device(device));
  Tensor c = cat({legacy, a, legacy}, 1);
  CHECK(c.sizes().vec() == Shape{2, 2});
  CHECK(c.dtype() == kFloat64);
  check_values(c, {1, 2, 3, 4});
  // All skipped: an empty [0] result.
  Tensor e = cat({legacy, empty({0}, TensorOptions(kInt32).device(device))});
  CHECK(e.sizes().vec() == Shape{0});
  CHECK(e.dtype() == kFloat64);
  CHECK(e.device() == device);
  // An empty tensor of matching rank is not skipped: it must match and adds nothing.
  Tensor none = empty({2, 0}, TensorOptions(kFloat32).device(device));
  Tensor d = cat({none, a, none}, 1);
  CHECK(d.sizes().vec() == Shape{2, 2});
  check_values(d, {1, 2, 3, 4});
  Tensor rows = cat({empty({0, 2}, TensorOptions().device(device)), a});
  check_values(rows, {1, 2, 3, 4});
  Tensor both = cat({none, none}, 0);
  CHECK(both.sizes().vec() == Shape{4, 0});
}

DEVICE_TEST_CASE("cat errors", "[shape_ops][cat]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor b = make({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, kFloat32, device);
  CHECK_THROWS_AS(cat({}), ValueError);
  CHECK_THROWS_WITH(cat({}), "cat(): expected a non-empty list of Tensors");

  CHECK_THROWS_AS(cat({a, b}), ShapeError);
  CHECK_THROWS_WITH(cat({a, b}),
                    "cat(): Sizes of tensors must match except in dimension 0. Expected size 3 but got "
                    "size 4 for tensor number 1 in the list.");
  Tensor c = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, kFloat32, device);
  CHECK_THROWS_WITH(cat({a, c}, 1),
                    "cat(): Sizes of tensors must match except in dimension 1. Expected size 2 but "
                    "got size 3 for tensor number 1 in the list.");
  // The tensor number counts skipped tensors too.
  Tensor legacy = empty({0}, TensorOptions().device(device));
  CHECK_THROWS_WITH(cat({legacy, a, a, b}), Catch::Contains("Expected size 3 but got size 4 for tensor number 3"));

  Tensor v = make({1, 2, 3}, {3}, kFloat32, device);
  CHECK_THROWS_AS(cat({a, v}), ShapeError);
  CHECK_THROWS_WITH(cat({a, v}), Catch::StartsWith("cat(): Tensors must have same number of dimensions: got 2 and 1"));

  Tensor s = make({1}, {}, kFloat32, device);
  CHECK_THROWS_AS(cat({a, s}), ShapeError);
  CHECK_THROWS_WITH(cat({a, s}), Catch::StartsWith("cat(): zero-dimensional tensor (at position 1) cannot be "
                                                   "concatenated"));

  CHECK_THROWS_AS(cat({a, a}, 2), IndexError);
  CHECK_THROWS_WITH(cat({a, a}, 2), "cat: dimension out of range (expected to be in range of [-2, 1], but got 2)");
  CHECK_THROWS_WITH(cat({a, a}, -3), Catch::Contains("but got -3"));

  CHECK_THROWS_AS(cat({a, Tensor()}), ValueError);
  CHECK_THROWS_WITH(cat({a, Tensor()}), Catch::StartsWith("cat: argument 'tensors[1]' is an undefined tensor"));
}

DEVICE_TEST_CASE("cat and stack require one device", "[shape_ops][device]") {
  auto other = other_device(device);
  if (!other) return;
  Tensor a = make({1, 2}, {2}, kFloat32, device);
  Tensor b = make({3, 4}, {2}, kFloat32, *other);
  for (auto f :
       {+[](const std::vector<Tensor>& l) { return cat(l); }, +[](const std::vector<Tensor>& l) { return stack(l); }}) {
    CHECK_THROWS_AS(f({a, a, b}), DeviceError);
    CHECK_THROWS_WITH(f({a, a, b}),
                      Catch::StartsWith("Expected all tensors to be on the same device, but found at least two "
                                        "devices, " +
                                        device.str() + " and " + other->str() + "!") &&
                          Catch::Contains("argument 'tensors[2]'") && Catch::Contains("tensors[0] is on"));
  }
  CHECK_THROWS_WITH(cat({a, b}), Catch::Contains("of cat)"));
  CHECK_THROWS_WITH(stack({a, b}), Catch::Contains("of stack)"));
}

// ---------------------------------------------------------------- stack
DEVICE_TEST_CASE("stack adds a new dim", "[shape_ops][stack]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor b = make({7, 8, 9, 10, 11, 12}, {2, 3}, kFloat32, device);
  Tensor s0 = stack({a, b});
  CHECK(s0.sizes().vec() == Shape{2, 2, 3});
  check_values(s0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor s1 = stack({a, b}, 1);
  CHECK(s1.sizes().vec() == Shape{2, 2, 3});
  check_values(s1, {1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12});
  Tensor s2 = stack({a, b}, -1);
  CHECK(s2.sizes().vec() == Shape{2, 3, 2});
  check_values(s2, {1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12});
  check_values(stack({a, b}, 2), {1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12});
  check_values(stack({a, b}, -3), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  CHECK(std::string(s0.origin().op) == "stack");

  // Non-contiguous inputs and promotion.
  Tensor t = a.t();  // (3, 2)
  Tensor u = make({1, 0, 1, 1, 0, 0}, {3, 2}, kBool, device);
  Tensor s = stack({t, u}, 1);
  CHECK(s.dtype() == kFloat32);
  CHECK(s.sizes().vec() == Shape{3, 2, 2});
  check_values(s, {1, 4, 1, 0, 2, 5, 1, 1, 3, 6, 0, 0});

  // 0-dim tensors stack to a vector; 1-D empty ones are not skipped.
  Tensor x = make({2.5}, {}, kFloat64, device), y = make({-1}, {}, kInt32, device);
  Tensor v = stack({x, y, x});
  CHECK(v.sizes().vec() == Shape{3});
  CHECK(v.dtype() == kFloat64);
  check_values(v, {2.5, -1, 2.5});
  Tensor e = stack({empty({0}, TensorOptions().device(device)), empty({0}, TensorOptions().device(device))});
  CHECK(e.sizes().vec() == Shape{2, 0});

  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor p = make({1, 0}, {2}, dt, device), q = make({3, 4}, {2}, dt, device);
    Tensor r = stack({p, q}, 1);
    CHECK(r.dtype() == dt);
    check_values(r, as_dtype({1, 3, 0, 4}, dt));
  }
}

DEVICE_TEST_CASE("stack errors", "[shape_ops][stack]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor b = make({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, kFloat32, device);
  CHECK_THROWS_AS(stack({}), ValueError);
  CHECK_THROWS_WITH(stack({}), "stack(): expected a non-empty list of Tensors");
  CHECK_THROWS_AS(stack({a, b}), ShapeError);
  CHECK_THROWS_WITH(stack({a, b}),
                    "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] "
                    "at entry 1");
  CHECK_THROWS_WITH(stack({a, a, a.t()}),
                    "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and "
                    "[3, 2] at entry 2");
  CHECK_THROWS_AS(stack({a, a}, 3), IndexError);
  CHECK_THROWS_WITH(stack({a, a}, 3), "stack: dimension out of range (expected to be in range of [-3, 2], but got 3)");
  CHECK_THROWS_WITH(stack({Tensor()}), Catch::StartsWith("stack: argument 'tensors[0]' is an undefined tensor"));
}

// ---------------------------------------------------------------- split / chunk
namespace {
void check_sizes_along(const std::vector<Tensor>& parts, int64_t dim, const Shape& expected) {
  REQUIRE(parts.size() == expected.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    INFO("piece " << i);
    CHECK(parts[i].size(dim) == expected[i]);
  }
}
}  // namespace

DEVICE_TEST_CASE("split returns views of split_size", "[shape_ops][split]") {
  Tensor a = make({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2}, kFloat32, device);
  auto parts = split(a, 2);
  check_sizes_along(parts, 0, {2, 2, 1});
  check_values(parts[0], {0, 1, 2, 3});
  check_values(parts[1], {4, 5, 6, 7});
  check_values(parts[2], {8, 9});
  for (const Tensor& p : parts) {
    CHECK(p.shares_storage(a));
    CHECK(p.sizes()[1] == 2);
  }
  CHECK(parts[1].storage_offset() == 4);
  CHECK(parts[2].storage_offset() == 8);
  // Writes through a piece land in the base.
  parts[1].fill_(-1);
  check_values(a, {0, 1, 2, 3, -1, -1, -1, -1, 8, 9});

  // Along a negative dim, a split_size equal to or larger than the size.
  auto cols = a.split(1, -1);
  check_sizes_along(cols, 1, {1, 1});
  check_values(cols[1], {1, 3, -1, -1, 9});
  CHECK(cols[1].stride(0) == 2);
  check_sizes_along(split(a, 5), 0, {5});
  check_sizes_along(split(a, 7), 0, {5});

  // Non-contiguous input.
  Tensor t = a.t();  // (2, 5)
  auto tp = t.split(3, 1);
  check_sizes_along(tp, 1, {3, 2});
  check_values(tp[1], {-1, 8, -1, 9});
  CHECK(tp[1].shares_storage(a));

  // Empty dims: one empty piece, also for split_size 0.
  Tensor e = empty({0, 3}, TensorOptions().device(device));
  check_sizes_along(split(e, 2), 0, {0});
  check_sizes_along(split(e, 0), 0, {0});
  CHECK(split(e, 0)[0].sizes().vec() == Shape{0, 3});

  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor x = make({1, 0, 3, 4, 5}, {5}, dt, device);
    auto xs = x.split(2);
    check_sizes_along(xs, 0, {2, 2, 1});
    CHECK(xs[2].dtype() == dt);
    check_values(xs[1], as_dtype({3, 4}, dt));
  }
}

DEVICE_TEST_CASE("split with sizes", "[shape_ops][split]") {
  Tensor a = make({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 6}, kInt64, device);
  auto parts = split(a, IntArrayRef{1, 3, 0, 2}, 1);
  check_sizes_along(parts, 1, {1, 3, 0, 2});
  check_values(parts[0], {0, 6});
  check_values(parts[1], {1, 2, 3, 7, 8, 9});
  CHECK(parts[2].sizes().vec() == Shape{2, 0});
  check_values(parts[3], {4, 5, 10, 11});
  for (const Tensor& p : parts) CHECK(p.shares_storage(a));
  auto rows = a.split({1, 1}, -2);
  check_sizes_along(rows, 0, {1, 1});
  check_values(rows[1], {6, 7, 8, 9, 10, 11});
  auto same = split_with_sizes(a.t(), {4, 2});
  check_sizes_along(same, 0, {4, 2});
  check_values(same[1], {4, 10, 5, 11});
}

DEVICE_TEST_CASE("split errors", "[shape_ops][split]") {
  Tensor a = make({0, 1, 2, 3, 4, 5}, {2, 3}, kFloat32, device);
  Tensor s = make({1}, {}, kFloat32, device);
  CHECK_THROWS_AS(split(s, 1), ShapeError);
  CHECK_THROWS_WITH(split(s, 1), "split expects at least a 1-dimensional tensor, but got a 0-dim tensor");
  CHECK_THROWS_AS(split(a, -1), ValueError);
  CHECK_THROWS_WITH(split(a, -1), "split expects split_size be non-negative, but got split_size=-1");
  CHECK_THROWS_AS(split(a, 0, 1), ValueError);
  CHECK_THROWS_WITH(split(a, 0, 1), "split_size can only be 0 if dimension size is 0, but got dimension size of 3");
  CHECK_THROWS_AS(split(a, 1, 2), IndexError);
  CHECK_THROWS_WITH(split(a, 1, 2), "split: dimension out of range (expected to be in range of [-2, 1], but got 2)");

  CHECK_THROWS_AS(a.split({1, 1}, 1), ValueError);
  CHECK_THROWS_WITH(a.split({1, 1}, 1),
                    "split_with_sizes expects split_sizes to sum exactly to 3 (input tensor's "
                    "size at dimension 1), but got split_sizes=[1, 1] which sum to 2");
  CHECK_THROWS_WITH(a.split({4, -1}, 1),
                    "split_with_sizes expects split_sizes have only non-negative entries, but "
                    "got split_sizes=[4, -1]");
  CHECK_THROWS_WITH(a.split({2, 2}), Catch::Contains("sum exactly to 2 (input tensor's size at dimension 0)") &&
                                         Catch::Contains("split_sizes=[2, 2]"));
  CHECK_THROWS_AS(split_with_sizes(s, {1}), ShapeError);
  CHECK_THROWS_WITH(split_with_sizes(s, {1}), Catch::StartsWith("split_with_sizes expects at least a 1-dimensional"));
  CHECK_THROWS_WITH(split(Tensor(), 1), Catch::StartsWith("split: argument 'self' is an undefined tensor"));
}

DEVICE_TEST_CASE("chunk follows PyTorch's piece sizes", "[shape_ops][chunk]") {
  Tensor a = make({0, 1, 2, 3, 4}, {5}, kFloat32, device);
  auto c = chunk(a, 3);
  check_sizes_along(c, 0, {2, 2, 1});
  check_values(c[0], {0, 1});
  check_values(c[2], {4});
  for (const Tensor& p : c) CHECK(p.shares_storage(a));
  // 6 into 4: ceil(6/4) = 2 per chunk, so only 3 chunks come back.
  Tensor b = make({0, 1, 2, 3, 4, 5}, {1, 6}, kFloat32, device);
  auto d = b.chunk(4, -1);
  check_sizes_along(d, 1, {2, 2, 2});
  check_values(d[2], {4, 5});
  // More chunks than elements.
  check_sizes_along(chunk(a, 8), 0, {1, 1, 1, 1, 1});
  check_sizes_along(chunk(a, 1), 0, {5});
  // An empty dim still gives `chunks` empty pieces.
  Tensor e = empty({2, 0}, TensorOptions().device(device));
  auto ec = e.chunk(3, 1);
  check_sizes_along(ec, 1, {0, 0, 0});
  CHECK(ec[0].sizes().vec() == Shape{2, 0});
  // Non-contiguous input.
  Tensor t = make({0, 1, 2, 3, 4, 5}, {2, 3}, kInt32, device).t();  // 0 3 / 1 4 / 2 5
  auto tc = t.chunk(2);
  check_sizes_along(tc, 0, {2, 1});
  check_values(tc[1], {2, 5});
  tc[1].fill_(9);
  check_values(t, {0, 3, 1, 4, 9, 9});
}

DEVICE_TEST_CASE("chunk errors", "[shape_ops][chunk]") {
  Tensor a = make({0, 1, 2}, {3}, kFloat32, device);
  CHECK_THROWS_AS(chunk(a, 0), ValueError);
  CHECK_THROWS_WITH(chunk(a, 0), "chunk expects `chunks` to be greater than 0, got: 0");
  CHECK_THROWS_WITH(a.chunk(-2), "chunk expects `chunks` to be greater than 0, got: -2");
  Tensor s = make({1}, {}, kFloat32, device);
  CHECK_THROWS_AS(chunk(s, 1), ShapeError);
  CHECK_THROWS_WITH(chunk(s, 1), "chunk expects at least a 1-dimensional tensor, but got a 0-dim tensor");
  CHECK_THROWS_AS(chunk(a, 2, 1), IndexError);
  CHECK_THROWS_WITH(chunk(a, 2, 1), "chunk: dimension out of range (expected to be in range of [-1, 0], but got 1)");
}

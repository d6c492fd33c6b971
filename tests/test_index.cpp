// gather, scatter_add, index_select and one_hot: hand-computed values, every
// dtype, negative dims, non-contiguous inputs and indices, empty and 0-dim
// tensors, the parallel path, and every error message.
#include <string>

#include "helpers.h"

using namespace tandem;
using test::check_values;
using test::make;

using test::as_dtype;
using test::kAllDtypes;
using test::kernel_error;
using test::other_device;
using test::waited;

namespace {
// An index tensor (int64 unless dt says otherwise).
Tensor idx(const std::vector<double>& values, IntArrayRef shape, const Device& device, Dtype dt = kInt64) {
  return make(values, shape, dt, device);
}
}  // namespace

// ---------------------------------------------------------------- gather
DEVICE_TEST_CASE("gather picks along a dim", "[index][gather]") {
  // t = [[1, 2, 3], [4, 5, 6]]
  Tensor t = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor g1 = gather(t, 1, idx({2, 0, 1, 1}, {2, 2}, device));
  CHECK(g1.sizes().vec() == Shape{2, 2});
  CHECK(g1.dtype() == kFloat32);
  CHECK(g1.device() == device);
  check_values(g1, {3, 1, 5, 5});
  CHECK(std::string(g1.origin().op) == "gather");
  check_values(t.gather(-1, idx({2, 0, 1, 1}, {2, 2}, device)), {3, 1, 5, 5});

  Tensor g0 = gather(t, 0, idx({1, 0, 1}, {1, 3}, device));
  check_values(g0, {4, 2, 6});
  check_values(t.gather(-2, idx({1, 0, 1, 0, 0, 0, 1, 1, 1}, {3, 3}, device)), {4, 2, 6, 1, 2, 3, 4, 5, 6});
  // index smaller than t in the other dim: rows of t beyond index's are unused.
  check_values(gather(t, 1, idx({1, 1, 0}, {1, 3}, device)), {2, 2, 1});

  // 3-D along the middle dim: t3[i][j][k] = 100 i + 10 j + k.
  std::vector<double> v3;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) v3.push_back(100 * i + 10 * j + k);
  Tensor t3 = make(v3, {2, 3, 2}, kInt64, device);
  Tensor g3 = gather(t3, 1, idx({2, 0, 1, 2}, {2, 1, 2}, device));
  CHECK(g3.sizes().vec() == Shape{2, 1, 2});
  check_values(g3, {20, 1, 110, 121});
}

DEVICE_TEST_CASE("gather works for every dtype", "[index][gather]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor t = make({1, 0, 3, 4, 5, 0}, {2, 3}, dt, device);
    Tensor g = gather(t, 1, idx({1, 2, 0, 2, 2, 0}, {2, 3}, device));
    CHECK(g.dtype() == dt);
    check_values(g, as_dtype({0, 3, 1, 0, 0, 4}, dt));
  }
}

DEVICE_TEST_CASE("gather reads non-contiguous inputs and indices", "[index][gather]") {
  Tensor base = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64, device);
  Tensor t = base.t();                                     // (3, 2): 1 4 / 2 5 / 3 6
  Tensor i = idx({1, 0, 0, 1, 1, 1}, {2, 3}, device).t();  // (3, 2): 1 1 / 0 1 / 0 1
  REQUIRE_FALSE(t.is_contiguous());
  REQUIRE_FALSE(i.is_contiguous());
  check_values(gather(t, 1, i), {4, 4, 2, 5, 3, 6});
  check_values(gather(t, 0, i), {2, 5, 1, 5, 1, 5});
  // An expanded index and a stepped slice of t.
  Tensor e = idx({2, 0}, {1, 2}, device).expand({3, 2});
  check_values(gather(t, 0, e), {3, 4, 3, 4, 3, 4});
  Tensor stepped = make({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10}, kInt32, device).slice(0, 1, 10, 2);  // 1 3 5 7 9
  check_values(gather(stepped, 0, idx({4, 0, 2}, {3}, device)), {9, 1, 5});
}

DEVICE_TEST_CASE("gather with empty and 0-dim tensors", "[index][gather]") {
  Tensor t = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor g = gather(t, 1, empty({2, 0}, TensorOptions(kInt64).device(device)));
  CHECK(g.sizes().vec() == Shape{2, 0});
  // An empty index is not checked, as PyTorch (any dtype, any shape).
  CHECK(gather(t, 1, empty({0}, TensorOptions(kInt32).device(device))).sizes().vec() == Shape{0});
  // 0-dim tensors count as 1-dim of size 1.
  Tensor s = make({7}, {}, kFloat32, device);
  Tensor gs = gather(s, 0, idx({0}, {}, device));
  CHECK(gs.dim() == 0);
  check_values(gs, {7});
  check_values(gather(s, -1, idx({0, 0, 0}, {3}, device)), {7, 7, 7});
  Tensor v = make({5, 6, 7}, {3}, kFloat32, device);
  Tensor gv = gather(v, 0, idx({2}, {}, device));
  CHECK(gv.dim() == 0);
  check_values(gv, {7});
  CHECK_THROWS_WITH(waited(gather(s, 0, idx({1}, {1}, device))),
                    kernel_error("gather(): index 1 is out of bounds for dimension 0 with "
                                 "size 1",
                                 device));
}

DEVICE_TEST_CASE("gather errors", "[index][gather]") {
  Tensor t = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  CHECK_THROWS_AS(gather(t, 1, idx({0, 1}, {2, 1}, device, kInt32)), DtypeError);
  CHECK_THROWS_WITH(gather(t, 1, idx({0, 1}, {2, 1}, device, kInt32)),
                    "gather(): Expected dtype int64 for index, but got int32");
  CHECK_THROWS_WITH(gather(t, 1, idx({0, 1}, {2, 1}, device, kFloat32)),
                    "gather(): Expected dtype int64 for index, but got float32");
  CHECK_THROWS_AS(gather(t, 1, idx({0, 1}, {2}, device)), ShapeError);
  CHECK_THROWS_WITH(gather(t, 1, idx({0, 1}, {2}, device)),
                    "gather(): Index tensor must have the same number of dimensions as input tensor (index [2], "
                    "input [2, 3])");
  CHECK_THROWS_AS(gather(t, 1, idx({0, 0, 0}, {3, 1}, device)), ShapeError);
  CHECK_THROWS_WITH(gather(t, 1, idx({0, 0, 0}, {3, 1}, device)),
                    "gather(): Size does not match at dimension 0 expected index [3, 1] to be smaller than self "
                    "[2, 3] apart from dimension 1");
  CHECK_THROWS_AS(waited(gather(t, 1, idx({0, 5}, {2, 1}, device))), IndexError);
  CHECK_THROWS_WITH(waited(gather(t, 1, idx({0, 5}, {2, 1}, device))),
                    kernel_error("gather(): index 5 is out of bounds for dimension 1 with size 3", device));
  CHECK_THROWS_WITH(waited(gather(t, 0, idx({0, -1, 0}, {1, 3}, device))),
                    kernel_error("gather(): index -1 is out of bounds for dimension 0 with size 2", device));
  CHECK_THROWS_AS(gather(t, 2, idx({0}, {1, 1}, device)), IndexError);
  CHECK_THROWS_WITH(gather(t, 2, idx({0}, {1, 1}, device)),
                    "gather: dimension out of range (expected to be in range of [-2, 1], but got 2)");
  CHECK_THROWS_WITH(gather(t, 0, Tensor()), Catch::StartsWith("gather: argument 'index' is an undefined tensor"));
  if (auto other = other_device(device)) {
    Tensor i = idx({0}, {1, 1}, *other);
    CHECK_THROWS_AS(gather(t, 0, i), DeviceError);
    CHECK_THROWS_WITH(gather(t, 0, i), Catch::StartsWith("Expected all tensors to be on the same device, but found "
                                                         "at least two devices, " +
                                                         device.str() + " and " + other->str() +
                                                         "! (when checking argument 'index' of "
                                                         "gather)"));
  }
}

// ---------------------------------------------------------------- scatter_add
DEVICE_TEST_CASE("scatter_add accumulates duplicates", "[index][scatter_add]") {
  Tensor self = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor src = make({10, 20, 30, 40, 50, 60}, {2, 3}, kFloat32, device);
  // dim 1: row 0 adds 10+30 into column 0 and 20 into column 2.
  Tensor i1 = idx({0, 2, 0, 1, 1, 1}, {2, 3}, device);
  Tensor r1 = scatter_add(self, 1, i1, src);
  check_values(r1, {41, 2, 23, 4, 155, 6});
  check_values(self, {1, 2, 3, 4, 5, 6});  // out-of-place leaves self alone
  CHECK_FALSE(r1.shares_storage(self));
  CHECK(std::string(r1.origin().op) == "scatter_add");
  check_values(self.scatter_add(-1, i1, src), {41, 2, 23, 4, 155, 6});

  // dim 0 with an index smaller than src: only src[0, :2] is used.
  Tensor i0 = idx({1, 1}, {1, 2}, device);
  check_values(scatter_add(self, 0, i0, src), {1, 2, 3, 14, 25, 6});
  check_values(scatter_add(self, -2, idx({1, 0, 1, 1, 1, 0}, {2, 3}, device), src),
               {1, 2 + 20, 3 + 60, 4 + 10 + 40, 5 + 50, 6 + 30});

  // In place: returns self and bumps its version.
  Tensor s = self.clone();
  uint64_t v = s.storage()->version();
  Tensor& r = s.scatter_add_(1, i1, src);
  CHECK(&r == &s);
  CHECK(s.storage()->version() > v);
  check_values(s, {41, 2, 23, 4, 155, 6});
  s.scatter_add_(1, i1, src);
  check_values(s, {81, 2, 43, 4, 305, 6});
}

DEVICE_TEST_CASE("scatter_add works for every dtype", "[index][scatter_add]") {
  for (Dtype dt : kAllDtypes) {
    INFO(dt);
    Tensor self = make({1, 0, 3, 0, 2, 0}, {2, 3}, dt, device);
    Tensor src = make({1, 2, 0, 4, 0, 6}, {2, 3}, dt, device);
    Tensor r = scatter_add(self, 1, idx({0, 0, 1, 2, 1, 2}, {2, 3}, device), src);
    CHECK(r.dtype() == dt);
    if (dt == kBool) {
      // Addition on bool is a logical or.
      check_values(r, {1, 0, 1, 0, 1, 1});
    } else {
      check_values(r, {4, 0, 3, 0, 2, 10});
    }
  }
  // 16-bit floats accumulate and round to their precision.
  Tensor h = make({0.5, 0.25}, {2}, kFloat16, device);
  check_values(scatter_add(h, 0, idx({1, 1, 0}, {3}, device), make({1.5, 2, 0.125}, {3}, kFloat16, device)),
               {0.625, 0.25 + 1.5 + 2});
  Tensor b = make({0.5, 0.25}, {2}, kBFloat16, device);
  check_values(scatter_add(b, 0, idx({0, 0}, {2}, device), make({1, 2}, {2}, kBFloat16, device)), {3.5, 0.25});
}

DEVICE_TEST_CASE("scatter_add with non-contiguous self, index and src", "[index][scatter_add]") {
  Tensor base = zeros({3, 2}, TensorOptions(kFloat64).device(device));
  Tensor self = base.t();                                               // (2, 3), a transposed view
  Tensor src = make({1, 2, 3, 4, 5, 6}, {3, 2}, kFloat64, device).t();  // 1 3 5 / 2 4 6
  Tensor index = idx({2, 0, 2, 1, 0, 0}, {3, 2}, device).t();           // 2 2 0 / 0 1 0
  self.scatter_add_(1, index, src);
  // row 0: col 2 += 1 + 3, col 0 += 5; row 1: col 0 += 2 + 6, col 1 += 4.
  check_values(self, {5, 0, 4, 8, 4, 0});
  check_values(base, {5, 8, 0, 4, 4, 0});  // the write went through the view
  // Expanded index and src (read-only operands may repeat memory).
  Tensor e = idx({1, 1, 0}, {1, 3}, device).expand({2, 3});
  Tensor ones2 = make({1}, {1, 1}, kFloat64, device).expand({2, 3});
  check_values(scatter_add(zeros({2, 3}, TensorOptions(kFloat64).device(device)), 0, e, ones2), {0, 0, 2, 2, 2, 0});
}

DEVICE_TEST_CASE("scatter_add with empty and 0-dim tensors", "[index][scatter_add]") {
  Tensor self = make({1, 2, 3}, {3}, kFloat32, device);
  // An empty index changes nothing and is not checked further.
  Tensor r =
      scatter_add(self, 0, empty({0}, TensorOptions(kInt32).device(device)), make({1}, {1, 1}, kFloat32, device));
  check_values(r, {1, 2, 3});
  // 0-dim self, index and src act as 1-dim of size 1.
  Tensor s = make({5}, {}, kFloat32, device);
  Tensor rs = scatter_add(s, 0, idx({0, 0}, {2}, device), make({1, 2}, {2}, kFloat32, device));
  CHECK(rs.dim() == 0);
  check_values(rs, {8});
  check_values(scatter_add(self, 0, idx({2}, {}, device), make({10}, {}, kFloat32, device)), {1, 2, 13});
}

DEVICE_TEST_CASE("scatter_add errors", "[index][scatter_add]") {
  Tensor self = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor src = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor index = idx({0, 1, 2, 0, 1, 2}, {2, 3}, device);

  CHECK_THROWS_AS(scatter_add(self, 1, index, src.to(kFloat64)), DtypeError);
  CHECK_THROWS_WITH(scatter_add(self, 1, index, src.to(kFloat64)),
                    Catch::StartsWith("scatter_add(): Expected self.dtype to be equal to src.dtype (self is float32, "
                                      "src is float64)"));
  Tensor s = self.clone();
  CHECK_THROWS_AS(s.scatter_add_(1, index, src.to(kInt64)), DtypeError);
  CHECK_THROWS_WITH(s.scatter_add_(1, index, src.to(kInt64)),
                    Catch::StartsWith("scatter_add(): Expected self.dtype to be equal to src.dtype"));
  CHECK_THROWS_AS(scatter_add(self, 1, index.to(kInt32), src), DtypeError);
  CHECK_THROWS_WITH(scatter_add(self, 1, index.to(kInt32), src),
                    "scatter_add(): Expected dtype int64 for index, but got int32");

  CHECK_THROWS_AS(scatter_add(self, 1, idx({0, 1}, {2}, device), src), ShapeError);
  CHECK_THROWS_WITH(scatter_add(self, 1, idx({0, 1}, {2}, device), src),
                    "scatter_add(): Index tensor must have the same number of dimensions as self tensor (index [2], "
                    "self [2, 3])");
  CHECK_THROWS_WITH(scatter_add(self, 1, index, make({1, 2, 3}, {3}, kFloat32, device)),
                    "scatter_add(): Index tensor must have the same number of dimensions as src tensor (index "
                    "[2, 3], src [3])");
  CHECK_THROWS_AS(scatter_add(self, 1, idx({0, 0, 0}, {3, 1}, device), src), ShapeError);
  CHECK_THROWS_WITH(scatter_add(self, 1, idx({0, 0, 0}, {3, 1}, device), src),
                    "scatter_add(): Expected index [3, 1] to be smaller than self [2, 3] apart from dimension 1 and "
                    "to be smaller size than src [2, 3]");
  // Along dim itself the index may exceed self, not src.
  CHECK_THROWS_WITH(scatter_add(self, 1, idx({0, 0, 0, 0}, {1, 4}, device), src),
                    Catch::StartsWith("scatter_add(): Expected index [1, 4] to be smaller than self [2, 3]"));
  check_values(scatter_add(self, 1, idx({0, 0, 0, 0}, {1, 4}, device), make({1, 1, 1, 1}, {1, 4}, kFloat32, device)),
               {5, 2, 3, 4, 5, 6});

  CHECK_THROWS_AS(waited(scatter_add(self, 1, idx({0, 3}, {1, 2}, device), src)), IndexError);
  CHECK_THROWS_WITH(waited(scatter_add(self, 1, idx({0, 3}, {1, 2}, device), src)),
                    kernel_error("scatter_add(): index 3 is out of bounds for dimension 1 with size 3", device));
  CHECK_THROWS_WITH(waited(s.scatter_add_(0, idx({-1}, {1, 1}, device), src)),
                    kernel_error("scatter_add(): index -1 is out of bounds for dimension 0 with size 2", device));
  CHECK_THROWS_AS(scatter_add(self, -3, index, src), IndexError);
  CHECK_THROWS_WITH(scatter_add(self, -3, index, src),
                    "scatter_add: dimension out of range (expected to be in range of [-2, 1], but got -3)");

  Tensor expanded = make({0, 0, 0}, {1, 3}, kFloat32, device).expand({2, 3});
  CHECK_THROWS_AS(expanded.scatter_add_(1, index, src), ValueError);
  CHECK_THROWS_WITH(expanded.scatter_add_(1, index, src),
                    Catch::StartsWith("scatter_add_: unsupported operation: more than one element of the written-to "
                                      "tensor refers to a single memory location"));
  CHECK_THROWS_WITH(scatter_add(self, 1, index, Tensor()),
                    Catch::StartsWith("scatter_add: argument 'src' is an undefined tensor"));

  if (auto other = other_device(device)) {
    CHECK_THROWS_AS(scatter_add(self, 1, index.to(*other), src), DeviceError);
    CHECK_THROWS_WITH(scatter_add(self, 1, index.to(*other), src),
                      Catch::Contains("(when checking argument 'index' of scatter_add)"));
    CHECK_THROWS_WITH(s.scatter_add_(1, index, src.to(*other)),
                      Catch::StartsWith("Expected all tensors to be on the same device") &&
                          Catch::Contains("(when checking argument 'src' of scatter_add_)"));
  }
}

// ---------------------------------------------------------------- index_select
DEVICE_TEST_CASE("index_select picks rows and columns", "[index][index_select]") {
  Tensor t = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, kFloat32, device);
  Tensor rows = index_select(t, 0, idx({2, 0, 2, 1}, {4}, device));
  CHECK(rows.sizes().vec() == Shape{4, 3});
  check_values(rows, {7, 8, 9, 1, 2, 3, 7, 8, 9, 4, 5, 6});
  CHECK(std::string(rows.origin().op) == "index_select");
  Tensor cols = t.index_select(-1, idx({1, 1, 0}, {3}, device, kInt32));
  CHECK(cols.sizes().vec() == Shape{3, 3});
  check_values(cols, {2, 2, 1, 5, 5, 4, 8, 8, 7});
  // 3-D along the middle dim.
  Tensor t3 = make({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2}, kInt64, device);
  Tensor m = index_select(t3, 1, idx({2, 0}, {2}, device));
  CHECK(m.sizes().vec() == Shape{2, 2, 2});
  check_values(m, {4, 5, 0, 1, 10, 11, 6, 7});
}

DEVICE_TEST_CASE("index_select works for every dtype and both index dtypes", "[index][index_select]") {
  for (Dtype dt : kAllDtypes) {
    for (Dtype it : {kInt64, kInt32}) {
      INFO(dt << " " << it);
      Tensor t = make({1, 0, 3, 4, 5, 0}, {3, 2}, dt, device);
      Tensor r = index_select(t, 0, idx({2, 2, 0}, {3}, device, it));
      CHECK(r.dtype() == dt);
      check_values(r, as_dtype({5, 0, 5, 0, 1, 0}, dt));
      check_values(index_select(t, 1, idx({1}, {1}, device, it)), as_dtype({0, 4, 0}, dt));
    }
  }
}

DEVICE_TEST_CASE("index_select reads non-contiguous inputs and indices", "[index][index_select]") {
  Tensor t = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64, device).t();  // (3, 2): 1 4 / 2 5 / 3 6
  Tensor i = idx({2, 9, 0, 9, 1}, {5}, device).slice(0, 0, 5, 2);     // 2 0 1, stride 2
  REQUIRE_FALSE(i.is_contiguous());
  check_values(index_select(t, 0, i), {3, 6, 1, 4, 2, 5});
  check_values(index_select(t, 1, idx({1, 0, 1}, {3}, device)), {4, 1, 4, 5, 2, 5, 6, 3, 6});
  Tensor e = make({7, 8}, {2, 1}, kInt32, device).expand({2, 4});  // 7 7 7 7 / 8 8 8 8
  check_values(index_select(e, 0, idx({1, 0}, {2}, device)), {8, 8, 8, 8, 7, 7, 7, 7});
}

DEVICE_TEST_CASE("index_select with empty and 0-dim tensors", "[index][index_select]") {
  Tensor t = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor none = index_select(t, 1, empty({0}, TensorOptions(kInt64).device(device)));
  CHECK(none.sizes().vec() == Shape{2, 0});
  // A 0-dim index acts as a vector of one.
  Tensor one = index_select(t, 0, idx({1}, {}, device));
  CHECK(one.sizes().vec() == Shape{1, 3});
  check_values(one, {4, 5, 6});
  // A 0-dim self gives a 0-dim result.
  Tensor s = make({9}, {}, kFloat32, device);
  Tensor rs = index_select(s, 0, idx({0}, {1}, device));
  CHECK(rs.dim() == 0);
  check_values(rs, {9});
  CHECK(index_select(s, -1, idx({0}, {}, device)).dim() == 0);
  CHECK_THROWS_WITH(waited(index_select(s, 0, idx({1}, {}, device))),
                    kernel_error("index_select(): index 1 is out of bounds for dimension 0 with size 1", device));
  // An empty self with a non-empty result still checks the index.
  Tensor empty_rows = empty({0, 3}, TensorOptions().device(device));
  CHECK(index_select(empty_rows, 1, idx({2, 0}, {2}, device)).sizes().vec() == Shape{0, 2});
  CHECK_THROWS_WITH(waited(index_select(empty_rows, 0, idx({0}, {1}, device))),
                    kernel_error("index_select(): index 0 is out of bounds for dimension 0 with size 0", device));
}

DEVICE_TEST_CASE("index_select errors", "[index][index_select]") {
  Tensor t = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  CHECK_THROWS_AS(index_select(t, 0, idx({0, 1}, {1, 2}, device)), IndexError);
  CHECK_THROWS_WITH(index_select(t, 0, idx({0, 1}, {1, 2}, device)),
                    "index_select(): Index is supposed to be a vector, but got index of shape [1, 2]");
  Tensor s = make({9}, {}, kFloat32, device);
  CHECK_THROWS_AS(index_select(s, 0, idx({0, 0}, {2}, device)), IndexError);
  CHECK_THROWS_WITH(index_select(s, 0, idx({0, 0}, {2}, device)),
                    "index_select(): Index to scalar can have only 1 value, got 2 value(s)");
  for (Dtype bad : {kFloat32, kUInt8, kBool, kFloat16}) {
    INFO(bad);
    CHECK_THROWS_AS(index_select(t, 0, idx({0}, {1}, device, bad)), DtypeError);
    CHECK_THROWS_WITH(index_select(t, 0, idx({0}, {1}, device, bad)),
                      std::string("index_select(): Expected dtype int32 or int64 for index, but got ") +
                          std::string(dtype_name(bad)));
  }
  CHECK_THROWS_AS(waited(index_select(t, 1, idx({0, 3}, {2}, device))), IndexError);
  CHECK_THROWS_WITH(waited(index_select(t, 1, idx({0, 3}, {2}, device))),
                    kernel_error("index_select(): index 3 is out of bounds for dimension 1 with size 3", device));
  CHECK_THROWS_WITH(waited(index_select(t, 0, idx({-1}, {1}, device, kInt32))),
                    kernel_error("index_select(): index -1 is out of bounds for dimension 0 with size 2", device));
  CHECK_THROWS_AS(index_select(t, 2, idx({0}, {1}, device)), IndexError);
  CHECK_THROWS_WITH(index_select(t, 2, idx({0}, {1}, device)),
                    "index_select: dimension out of range (expected to be in range of [-2, 1], but got 2)");
  if (auto other = other_device(device)) {
    CHECK_THROWS_AS(index_select(t, 0, idx({0}, {1}, *other)), DeviceError);
    CHECK_THROWS_WITH(index_select(t, 0, idx({0}, {1}, *other)),
                      Catch::Contains("(when checking argument 'index' of index_select)"));
  }
}

// ---------------------------------------------------------------- one_hot
DEVICE_TEST_CASE("one_hot encodes class values", "[index][one_hot]") {
  Tensor y = idx({2, 0, 1}, {3}, device);
  Tensor o = one_hot(y);
  CHECK(o.dtype() == kInt64);
  CHECK(o.device() == device);
  CHECK(o.sizes().vec() == Shape{3, 3});
  check_values(o, {0, 0, 1, 1, 0, 0, 0, 1, 0});
  Tensor o5 = one_hot(y, 5);
  CHECK(o5.sizes().vec() == Shape{3, 5});
  check_values(o5, {0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0});
  // 2-D, non-contiguous input.
  Tensor y2 = idx({0, 3, 1, 1}, {2, 2}, device).t();  // 0 1 / 3 1
  Tensor o2 = one_hot(y2, 4);
  CHECK(o2.sizes().vec() == Shape{2, 2, 4});
  check_values(o2, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0});
  // 0-dim input: a vector.
  Tensor o0 = one_hot(idx({1}, {}, device), 3);
  CHECK(o0.sizes().vec() == Shape{3});
  check_values(o0, {0, 1, 0});
  // Empty input with num_classes: an empty result of the right shape.
  Tensor oe = one_hot(empty({0, 2}, TensorOptions(kInt64).device(device)), 4);
  CHECK(oe.sizes().vec() == Shape{0, 2, 4});
  CHECK(oe.dtype() == kInt64);
}

DEVICE_TEST_CASE("one_hot errors", "[index][one_hot]") {
  CHECK_THROWS_AS(one_hot(idx({0, 1}, {2}, device, kInt32)), DtypeError);
  CHECK_THROWS_WITH(one_hot(idx({0, 1}, {2}, device, kInt32)),
                    "one_hot is only applicable to index tensor of type LongTensor (int64), but got int32");
  CHECK_THROWS_AS(one_hot(idx({0, -1}, {2}, device)), ValueError);
  CHECK_THROWS_WITH(one_hot(idx({0, -1}, {2}, device)),
                    "one_hot: Class values must be non-negative. Got a class value of -1");
  CHECK_THROWS_WITH(one_hot(idx({0, -1}, {2}, device), 5), Catch::Contains("Class values must be non-negative."));
  CHECK_THROWS_AS(one_hot(idx({0, 3}, {2}, device), 3), ValueError);
  CHECK_THROWS_WITH(one_hot(idx({0, 3}, {2}, device), 3),
                    "one_hot: Class values must be smaller than num_classes. Got a class value of 3 with "
                    "num_classes = 3");
  CHECK_THROWS_WITH(one_hot(idx({0}, {1}, device), -2),
                    Catch::Contains("Class values must be smaller than num_classes."));
  Tensor e = empty({0}, TensorOptions(kInt64).device(device));
  CHECK_THROWS_AS(one_hot(e), ValueError);
  CHECK_THROWS_WITH(one_hot(e),
                    "one_hot: Can not infer total number of classes from empty tensor (num_classes = "
                    "-1); pass num_classes explicitly");
  CHECK_THROWS_WITH(one_hot(e, 0), Catch::StartsWith("one_hot: Can not infer total number of classes"));
  CHECK_THROWS_WITH(one_hot(Tensor()), Catch::StartsWith("one_hot: argument 'self' is an undefined tensor"));
}

// ---------------------------------------------------------------- large inputs (the parallel path)
DEVICE_TEST_CASE("gather, scatter_add and index_select on large inputs", "[index][large]") {
  // (R, C) with values v(r, c) = r * 7 + c % 5; exact in float32.
  const int64_t R = 300, C = 257;
  std::vector<double> tv(R * C), iv(R * C), sv(R * C);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      tv[r * C + c] = static_cast<double>(r * 7 + c % 5);
      iv[r * C + c] = static_cast<double>((r * 31 + c * 17) % R);
      sv[r * C + c] = static_cast<double>((r + c) % 3);
    }
  }
  Tensor t = make(tv, {R, C}, kFloat32, device);
  Tensor i = make(iv, {R, C}, kInt64, device);
  Tensor s = make(sv, {R, C}, kFloat32, device);

  std::vector<double> g(R * C), acc(tv);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      int64_t k = static_cast<int64_t>(iv[r * C + c]);
      g[r * C + c] = tv[k * C + c];
      acc[k * C + c] += sv[r * C + c];
    }
  }
  check_values(gather(t, 0, i), g);
  check_values(scatter_add(t, 0, i, s), acc);

  std::vector<double> sel;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) sel.push_back(tv[static_cast<int64_t>(iv[r * C]) * C + c]);
  check_values(index_select(t, 0, i.select(1, 0)), sel);

  // One bad value deep inside a parallel loop is still reported.
  Tensor bad = i.clone();
  bad.select(0, R - 2).select(0, 100).fill_(R + 4);
  CHECK_THROWS_WITH(waited(gather(t, 0, bad)),
                    kernel_error("gather(): index 304 is out of bounds for dimension 0 with size 300", device));
  CHECK_THROWS_WITH(waited(scatter_add(t, 0, bad, s)),
                    kernel_error("scatter_add(): index 304 is out of bounds for dimension 0 with "
                                 "size 300",
                                 device));
}

// View ops: shapes, strides, shared storage, and their errors.
#include "helpers.h"

using namespace tandem;
using test::check_values;
using test::make;

DEVICE_TEST_CASE("transpose shares storage", "[views]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor t = a.t();
  CHECK(t.sizes().vec() == Shape{3, 2});
  CHECK(t.strides().vec() == Shape{1, 3});
  CHECK(t.shares_storage(a));
  CHECK_FALSE(t.is_contiguous());
  check_values(t.contiguous(), {1, 4, 2, 5, 3, 6});
}

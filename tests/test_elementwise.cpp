// Elementwise ops: values, broadcasting, type promotion, in-place forms and
// their errors, on every device.
#include <cmath>

#include "helpers.h"

using namespace tandem;
using test::check_values;
using test::make;

DEVICE_TEST_CASE("add broadcasts and promotes", "[elementwise]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor b = make({10, 20, 30}, {3}, kInt64, device);
  Tensor c = add(a, b, 2);
  CHECK(c.dtype() == kFloat32);
  CHECK(c.device() == a.device());
  CHECK(c.sizes().vec() == Shape{2, 3});
  check_values(c, {21, 42, 63, 24, 45, 66});
}

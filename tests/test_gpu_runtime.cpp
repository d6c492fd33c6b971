// Real-GPU checks of the device runtime: queries, allocation and copies
// through the CUDA runtime. Skipped (exit 77) where there is no GPU.
#include "helpers.h"

using namespace tandem;

TEST_CASE("a real GPU answers the queries", "[gpu]") {
  REQUIRE(cuda::is_built());
  REQUIRE(cuda::device_count() > 0);
  auto p = cuda::get_device_properties(0);
  CHECK_FALSE(p.emulated);
  CHECK_FALSE(p.name.empty());
  CHECK(p.major >= 7);
  if (cuda::is_simulated())
    CHECK(p.total_memory == size_t{256} << 20);  // the simulated suite's TANDEM_EMULATE_CUDA_MEMORY
  else
    CHECK(p.total_memory > (size_t{1} << 30));
  CHECK(p.multi_processor_count > 0);
}

TEST_CASE("copies to and from a real GPU keep the values", "[gpu]") {
  for (Dtype dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    INFO(dtype);
    Tensor host = test::make({1, 0, 3, 1, 5, 0, 7, 1}, {2, 4}, dtype);
    Tensor dev = host.to(Device("cuda:0"));
    CHECK(dev.device() == Device("cuda:0"));
    CHECK(dev.dtype() == dtype);
    test::check_equal(dev.to(Device(kCPU)), host);
    if (cuda::device_count() > 1) test::check_equal(dev.to(Device("cuda:1")).cpu(), host);
  }
}

TEST_CASE("the same-device rule holds on a real GPU", "[gpu]") {
  Tensor g = zeros({2}, Device("cuda:0"));
  Tensor c = zeros({2});
  CHECK_THROWS_WITH(g + c, Catch::StartsWith("Expected all tensors to be on the same device, but found at least two "
                                             "devices, cuda:0 and cpu!"));
}

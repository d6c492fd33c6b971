// Core types: Device, Dtype and promotion, Half/BFloat16 conversion, shapes,
// and the device runtime's emulation switch.
#include <cmath>
#include <cstring>
#include <limits>

#include "helpers.h"
#include "tensor/core/shape.h"
#include "tensor/ops/runtime.h"

using namespace tandem;

TEST_CASE("Device parses and prints", "[core][device]") {
  CHECK(Device("cpu").str() == "cpu");
  CHECK(Device("cpu").is_cpu());
  CHECK(Device("cuda").str() == "cuda");
  CHECK(Device("cuda").index() == -1);
  CHECK(Device("cuda:1").index() == 1);
  CHECK(Device("cuda:1").str() == "cuda:1");
  CHECK(Device(kCUDA, 3).str() == "cuda:3");
  CHECK(Device("cuda:0") == Device(kCUDA, 0));
  CHECK(Device("cuda:0") != Device(kCPU));
  std::ostringstream ss;
  ss << Device("cuda:2");
  CHECK(ss.str() == "cuda:2");
}

TEST_CASE("Device rejects bad strings", "[core][device]") {
  const char* msg = "Expected 'cpu', 'cuda' or 'cuda:N' with N a non-negative device index";
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "", "CPU", "cpu:1", "cuda:0:1"}) {
    INFO(bad);
    CHECK_THROWS_AS(Device(bad), ValueError);
    CHECK_THROWS_WITH(Device(bad), Catch::Contains(msg) && Catch::Contains(std::string("'") + bad + "'"));
  }
  CHECK_THROWS_WITH(Device(kCUDA, -2), "Device index must be -1 or non-negative, got -2");
}

TEST_CASE("Dtype sizes, names and promotion", "[core][dtype]") {
  CHECK(element_size(kFloat32) == 4);
  CHECK(element_size(kFloat64) == 8);
  CHECK(element_size(kFloat16) == 2);
  CHECK(element_size(kBFloat16) == 2);
  CHECK(element_size(kInt64) == 8);
  CHECK(element_size(kInt32) == 4);
  CHECK(element_size(kUInt8) == 1);
  CHECK(element_size(kBool) == 1);
  CHECK(dtype_name(kBFloat16) == "bfloat16");
  // Spot checks of torch.promote_types.
  CHECK(promote_types(kInt32, kFloat16) == kFloat16);
  CHECK(promote_types(kFloat16, kBFloat16) == kFloat32);
  CHECK(promote_types(kUInt8, kInt32) == kInt32);
  CHECK(promote_types(kBool, kUInt8) == kUInt8);
  CHECK(promote_types(kInt64, kFloat32) == kFloat32);
  CHECK(promote_types(kFloat64, kBFloat16) == kFloat64);
  for (int i = 0; i < kNumDtypes; ++i)
    for (int j = 0; j < kNumDtypes; ++j) CHECK(promote_types(Dtype(i), Dtype(j)) == promote_types(Dtype(j), Dtype(i)));
}

static uint16_t half_bits(float f) { return Half(f).x; }
static uint16_t bf16_bits(float f) { return BFloat16(f).x; }

TEST_CASE("Half converts with round-to-nearest-even", "[core][half]") {
  CHECK(half_bits(1.0f) == 0x3c00);
  CHECK(half_bits(-2.0f) == 0xc000);
  CHECK(half_bits(65504.0f) == 0x7bff);
  CHECK(half_bits(65519.0f) == 0x7bff);  // below the rounding midpoint to inf
  CHECK(half_bits(65520.0f) == 0x7c00);  // midpoint rounds to even: inf
  CHECK(half_bits(1e6f) == 0x7c00);
  CHECK(half_bits(-INFINITY) == 0xfc00);
  CHECK((half_bits(NAN) & 0x7c00) == 0x7c00);
  CHECK((half_bits(NAN) & 0x03ff) != 0);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  CHECK(half_bits(1.0f + 0x1p-11f) == 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9: ties to even (0x3c02).
  CHECK(half_bits(1.0f + 3 * 0x1p-11f) == 0x3c02);
  CHECK(half_bits(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);  // just above the tie
  // Subnormals: smallest is 2^-24; 2^-25 ties to even (0); 3*2^-26 rounds up.
  CHECK(half_bits(0x1p-24f) == 0x0001);
  CHECK(half_bits(0x1p-25f) == 0x0000);
  CHECK(half_bits(3 * 0x1p-26f) == 0x0001);
  CHECK(half_bits(3 * 0x1p-25f) == 0x0002);  // 1.5 * 2^-24 ties to even: 2
  CHECK(half_bits(0x1p-14f) == 0x0400);      // smallest normal
  CHECK(half_bits(-0.0f) == 0x8000);
  // Round trip of every finite half value.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7c00) == 0x7c00) continue;
    Half h = Half::from_bits(static_cast<uint16_t>(b));
    REQUIRE(Half(static_cast<float>(h)).x == b);
  }
  CHECK(static_cast<float>(Half::from_bits(0x0001)) == 0x1p-24f);
  CHECK(static_cast<float>(Half::from_bits(0x3555)) == 0.333251953125f);
}

TEST_CASE("BFloat16 converts with round-to-nearest-even", "[core][half]") {
  CHECK(bf16_bits(1.0f) == 0x3f80);
  CHECK(bf16_bits(1.0f + 0x1p-8f) == 0x3f80);                     // tie to even
  CHECK(bf16_bits(1.0f + 3 * 0x1p-8f) == 0x3f82);                 // tie to even, up
  CHECK(bf16_bits(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);          // above the tie
  CHECK(bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to inf
  CHECK((bf16_bits(NAN) & 0x7f80) == 0x7f80);
  CHECK((bf16_bits(NAN) & 0x007f) != 0);
  CHECK(static_cast<float>(BFloat16::from_bits(0x4049)) == 3.140625f);
}

TEST_CASE("Shape helpers", "[core][shape]") {
  CHECK(shape_numel({2, 3, 4}) == 24);
  CHECK(shape_numel({}) == 1);
  CHECK(shape_numel({3, 0}) == 0);
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(broadcast_shapes({3, 1}, {1, 4}, "add") == Shape{3, 4});
  CHECK(broadcast_shapes({5, 1, 4}, {3, 1}, "add") == Shape{5, 3, 4});
  CHECK(broadcast_shapes({}, {2, 2}, "add") == Shape{2, 2});
  CHECK_THROWS_AS(broadcast_shapes({2, 3}, {4}, "add"), ShapeError);
  CHECK_THROWS_WITH(broadcast_shapes({2, 3}, {4}, "add"),
                    "add: the size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1 "
                    "(shapes [2, 3] and [4] cannot be broadcast together)");
  CHECK(wrap_dim(-1, 3, "sum") == 2);
  CHECK(wrap_dim(0, 0, "sum") == 0);
  CHECK_THROWS_WITH(wrap_dim(3, 3, "sum"),
                    "sum: dimension out of range (expected to be in range of [-3, 2], but got 3)");
  CHECK_THROWS_AS(wrap_dim(-4, 3, "sum"), IndexError);
}

TEST_CASE("cuda queries never crash", "[core][cuda]") {
  int n = cuda::device_count();
  CHECK(n >= 0);
  CHECK(cuda::is_available() == (n > 0));
  if (cuda::is_emulated()) {
    CHECK(n == 2);  // the suite's emulated run sets TANDEM_EMULATE_CUDA=2
    CHECK_THAT(cuda::get_device_name(0), Catch::Contains("emulated"));
    CHECK(cuda::get_device_properties(1).emulated);
    CHECK(cuda::get_device_properties(0).total_memory == 256u * 1024 * 1024);
  }
  CHECK_THROWS_AS(cuda::get_device_properties(n), DeviceError);
  CHECK_THROWS_WITH(cuda::get_device_name(n + 3),
                    Catch::Contains(n == 0 ? "CUDA is not available" : "invalid device " + std::to_string(n + 3)));
}

TEST_CASE("Allocating on a missing device is a clear error", "[core][cuda]") {
  int n = cuda::device_count();
  if (n == 0) {
    CHECK_THROWS_AS(zeros({2}, Device("cuda")), DeviceError);
    CHECK_THROWS_WITH(zeros({2}, Device("cuda")),
                      Catch::Contains("CUDA is not available") && Catch::Contains("TANDEM_EMULATE_CUDA=1"));
  }
  std::string bad = "cuda:" + std::to_string(n);
  CHECK_THROWS_AS(zeros({2}, Device(bad)), DeviceError);
}

TEST_CASE("Version query", "[core]") {
  CHECK(std::string(version()) == TANDEM_VERSION_STRING);
  CHECK(TANDEM_VERSION_MAJOR == 0);
}

TEST_CASE("the emulation variables are parsed strictly", "[core][cuda]") {
  using detail::parse_emulated_count;
  using detail::parse_emulated_memory;
  CHECK(parse_emulated_count(nullptr) == 0);
  CHECK(parse_emulated_count("") == 0);
  CHECK(parse_emulated_count("2") == 2);
  CHECK(parse_emulated_count("16") == 16);
  for (const char* bad : {"17", "-1", "two", "2x"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_emulated_count(bad), ValueError);
    CHECK_THROWS_WITH(
        parse_emulated_count(bad),
        "TANDEM_EMULATE_CUDA must be a number of devices between 0 and 16, got '" + std::string(bad) + "'");
  }
  CHECK(parse_emulated_memory(nullptr) == 0);
  CHECK(parse_emulated_memory("4096") == 4096);
  CHECK(parse_emulated_memory("2K") == 2048);
  CHECK(parse_emulated_memory("256M") == 256u * 1024 * 1024);
  CHECK(parse_emulated_memory("1.5GiB") == 1536u * 1024 * 1024);
  CHECK_THROWS_WITH(parse_emulated_memory("12 apples"),
                    "TANDEM_EMULATE_CUDA_MEMORY must be a byte count with an optional K, M or G suffix (e.g. 512M), "
                    "got '12 apples'");
  for (const char* bad : {"0", "-5M", "M"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_emulated_memory(bad),
                      "TANDEM_EMULATE_CUDA_MEMORY must be a positive byte count, got '" + std::string(bad) + "'");
  }
}

TEST_CASE("a storage whose deleter throws warns instead of terminating the program", "[core]") {
  static int buffer[4];
  bool called = false;
  {
    Storage s(buffer, sizeof buffer, Device(kCPU), [&called](void*) {
      called = true;
      throw CudaError("CUDA error: driver shutting down (test)");
    });
  }  // without the destructor's catch, std::terminate ends the test binary here
  CHECK(called);
}

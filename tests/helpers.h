// Shared test helpers: run a test body on every device present, compare
// tensors with per-dtype tolerances, and build inputs.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tandem/tandem.h"

namespace tandem::test {

// cpu, then every cuda device present (real, or emulated under
// TANDEM_EMULATE_CUDA).
std::vector<Device> devices();

// Relative and absolute tolerance for comparing results of dtype.
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(Dtype dtype);

// Elementwise |a - e| <= atol + rtol * |e| (NaNs must match), after moving
// both to the cpu as float64. Shapes must match exactly.
void check_close(const Tensor& actual, const Tensor& expected, std::optional<Tolerance> tol = std::nullopt);
void check_equal(const Tensor& actual, const Tensor& expected);  // exact, shape and dtype too
// Compare with values given in row-major order.
void check_values(const Tensor& actual, const std::vector<double>& expected,
                  std::optional<Tolerance> tol = std::nullopt);

// Every dtype Tandem has.
inline constexpr Dtype kAllDtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool};

// The values as a tensor of dtype holds them (bool keeps only zero/non-zero).
std::vector<double> as_dtype(std::vector<double> values, Dtype dtype);

// Another device than `device`, when there is one (for device-rule checks).
std::optional<Device> other_device(const Device& device);

// A tensor of the given shape filled with the values, of dtype, on device.
Tensor make(const std::vector<double>& values, IntArrayRef shape, Dtype dtype = kFloat32, Device device = Device(kCPU));

// make(values, shape, dtype, device) as a leaf that requires grad (float64
// by default: gradcheck needs it).
Tensor leaf(const std::vector<double>& values, IntArrayRef shape, Device device, Dtype dtype = kFloat64);

// fn's first derivatives at inputs against finite differences
// (autograd::gradcheck), and its second ones (gradgradcheck) unless
// second_order is false; a mismatch fails a CHECK that prints the report.
void check_gradients(const autograd::GradcheckFn& fn, const std::vector<Tensor>& inputs, bool second_order = true,
                     const autograd::GradcheckOptions& options = {});
// The same for a function with one output.
void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                     bool second_order = true, const autograd::GradcheckOptions& options = {});

// Every fused activation backward of the op table
// (TANDEM_ACTIVATION_BACKWARD_OPS), in its order, each with the parameters
// the tests run it with: not the defaults, so that a kernel that ignores
// them fails. The CPU functor tests and the GPU tests share the list.
std::vector<std::pair<BinaryOp, UnaryParams>> activation_backward_ops();

// Errors a kernel finds in the values (an index out of range) come at once
// on the cpu, and at the next wait for the device on a cuda one
// (kernels/cuda/device_check.h). waited(t) is t copied to the host, and a
// wait for its device (an empty t's copy waits for nothing), so `CHECK_THROWS_WITH(waited(gather(...)),
// kernel_error(msg, device))` tests one on every device. kernel_error matches msg exactly on the cpu, and on a cuda
// device msg followed by the deferred report's note.
Tensor waited(const Tensor& t);
class KernelErrorMatcher : public Catch::MatcherBase<std::string> {
 public:
  KernelErrorMatcher(std::string message, Device device) : message_(std::move(message)), device_(device) {}
  bool match(const std::string& what) const override;
  std::string describe() const override;

 private:
  std::string message_;
  Device device_;
};
KernelErrorMatcher kernel_error(const std::string& message, const Device& device);

// A fresh folder under the system's temporary one (mkdtemp: unique, so the
// cpu and emulated runs of one test binary can go in parallel), removed with
// everything in it when the TempDir goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  // The path of `name` inside the folder.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // The names of the files in it, sorted (to check that no temporary file is
  // left behind).
  std::vector<std::string> listing() const;

 private:
  std::filesystem::path path_;
};

// What fn printed on std::cerr (restored if fn throws).
std::string captured_cerr(const std::function<void()>& fn);

}  // namespace tandem::test

#define TANDEM_CAT_(a, b) a##b
#define TANDEM_CAT(a, b) TANDEM_CAT_(a, b)

// DEVICE_TEST_CASE("name", "[tags]") { ... `device` is in scope ... }
// The body runs once per device in test::devices(), each in its own section.
#define DEVICE_TEST_CASE_IMPL(fn, name, tags)                     \
  static void fn(const ::tandem::Device& device);                 \
  TEST_CASE(name, tags) {                                         \
    for (const ::tandem::Device& d : ::tandem::test::devices()) { \
      DYNAMIC_SECTION("on " << d.str()) { fn(d); }                \
    }                                                             \
  }                                                               \
  static void fn([[maybe_unused]] const ::tandem::Device& device)
#define DEVICE_TEST_CASE(name, tags) DEVICE_TEST_CASE_IMPL(TANDEM_CAT(device_test_, __LINE__), name, tags)

// REQUIRE_THROWS_ERROR(expr, ErrorType, "part of the message"): the
// exception's type and a part of its message. expr is evaluated once (an
// `++it` in it runs once); an exception of another type propagates and fails
// the test as unexpected.
#define REQUIRE_THROWS_ERROR(expr, Type, text)                                \
  do {                                                                        \
    try {                                                                     \
      static_cast<void>(expr);                                                \
    } catch (const Type& tandem_error_) {                                     \
      REQUIRE_THAT(std::string(tandem_error_.what()), Catch::Contains(text)); \
      break;                                                                  \
    }                                                                         \
    FAIL("REQUIRE_THROWS_ERROR: " #expr " did not throw; expected " #Type);   \
  } while (0)

// The same-device rule: an op given tensors on two devices throws a
// DeviceError that starts with PyTorch's words, names the op and argument,
// tells where each tensor was made (this file's lines) and how to fix it,
// computes nothing and moves nothing. Without any cuda device, asking for one
// is a clear error instead.
#include <functional>
#include <string>

#include "helpers.h"
#include "tensor/ops/runtime.h"

using namespace tandem;
using Catch::Contains;
using Catch::StartsWith;
using test::check_values;

namespace {

std::string where_from(int line) { return std::string(__FILE__) + ":" + std::to_string(line); }

// The message a failing call threw, or "" when it did not throw a DeviceError.
std::string device_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "";
}

// Bytes held on each emulated device (0 without emulation).
std::vector<size_t> emulated_bytes() {
  std::vector<size_t> out;
  if (cuda::is_emulated())
    for (int i = 0; i < cuda::device_count(); ++i) out.push_back(cuda::memory_allocated(i));
  return out;
}

struct Case {
  const char* op;
  const char* first_arg;                                   // the argument the devices are compared against
  const char* bad_arg;                                     // the first argument on another device
  std::function<void(const Tensor&, const Tensor&)> call;  // call(first, bad)
};

std::vector<Case> cases() {
  return {
      {"add", "self", "other", [](const Tensor& a, const Tensor& b) { (void)add(a, b); }},
      {"add", "self", "other", [](const Tensor& a, const Tensor& b) { (void)(a + b); }},
      {"sub", "self", "other", [](const Tensor& a, const Tensor& b) { (void)(a - b); }},
      {"mul", "self", "other", [](const Tensor& a, const Tensor& b) { (void)a.mul(b); }},
      {"div", "self", "other", [](const Tensor& a, const Tensor& b) { (void)div(a, b); }},
      {"maximum", "self", "other", [](const Tensor& a, const Tensor& b) { (void)maximum(a, b); }},
      {"minimum", "self", "other", [](const Tensor& a, const Tensor& b) { (void)minimum(a, b); }},
      {"pow", "self", "other", [](const Tensor& a, const Tensor& b) { (void)pow(a, b); }},
      {"eq", "self", "other", [](const Tensor& a, const Tensor& b) { (void)(a == b); }},
      {"lt", "self", "other", [](const Tensor& a, const Tensor& b) { (void)a.lt(b); }},
      {"ge", "self", "other", [](const Tensor& a, const Tensor& b) { (void)(a >= b); }},
      {"add", "self", "other",
       [](const Tensor& a, const Tensor& b) {
         Tensor x = a;
         x.add_(b);
       }},
      {"mul", "self", "other",
       [](const Tensor& a, const Tensor& b) {
         Tensor x = a;
         x *= b;
       }},
      {"where", "condition", "input", [](const Tensor& a, const Tensor& b) { (void)where(a.gt(0), b, b); }},
      {"where", "condition", "input", [](const Tensor& a, const Tensor& b) { (void)where(a.gt(0), b, 1.0); }},
      {"where", "condition", "other", [](const Tensor& a, const Tensor& b) { (void)where(a.gt(0), 1.0, b); }},
      {"masked_fill", "self", "mask", [](const Tensor& a, const Tensor& b) { (void)a.masked_fill(b.gt(0), 1); }},
      {"masked_fill_", "self", "mask",
       [](const Tensor& a, const Tensor& b) {
         Tensor x = a;
         x.masked_fill_(b.gt(0), 1);
       }},
  };
}

// Runs every case with `first` (made at first_line) and `bad` (made at
// bad_line) and checks the whole contract of the error.
void check_rule(const Tensor& first, int first_line, const char* first_factory, const Tensor& bad, int bad_line,
                const char* bad_factory) {
  std::string d0 = first.device().str(), d1 = bad.device().str();
  std::vector<double> first_values = first.to_vector<double>(), bad_values = bad.to_vector<double>();
  uint64_t v0 = first.storage()->version(), v1 = bad.storage()->version();
  for (const Case& c : cases()) {
    INFO(c.op << " with " << d0 << " and " << d1);
    std::vector<size_t> before = emulated_bytes();
    std::string msg = device_error([&]() { c.call(first, bad); });
    REQUIRE_FALSE(msg.empty());
    CHECK_THAT(msg, StartsWith("Expected all tensors to be on the same device, but found at least two devices, " + d0 +
                               " and " + d1 + "! (when checking argument '" + c.bad_arg + "' of " + c.op + ")"));
    // Each origin: "created by tandem::ones at <this file>:<line>", or for a
    // mask or condition computed here "computed by gt from a tensor created by ...".
    CHECK_THAT(msg, Contains("\n  " + std::string(c.first_arg) + " is on " + d0 + ": "));
    CHECK_THAT(msg, Contains("created by " + std::string(first_factory) + " at " + where_from(first_line) + "\n"));
    CHECK_THAT(msg, Contains("\n  " + std::string(c.bad_arg) + " is on " + d1 + ": "));
    CHECK_THAT(msg, Contains("created by " + std::string(bad_factory) + " at " + where_from(bad_line) + "\n"));
    CHECK_THAT(msg, Contains(".to(") && Contains("Tandem never moves tensors between devices by itself"));
    // Nothing was computed or allocated, nothing moved, nothing written.
    CHECK(emulated_bytes() == before);
    CHECK(first.device().str() == d0);
    CHECK(bad.device().str() == d1);
    CHECK(first.storage()->version() == v0);
    CHECK(bad.storage()->version() == v1);
    CHECK(first.to_vector<double>() == first_values);
    CHECK(bad.to_vector<double>() == bad_values);
  }
}

}  // namespace

TEST_CASE("ops refuse a cuda tensor with a cpu tensor", "[device_rule]") {
  if (cuda::device_count() == 0) {
    CHECK_FALSE(cuda::is_available());
    CHECK(test::devices().size() == 1);
    return;
  }
  Tensor g = full({2, 3}, 1.5, Device("cuda:0"));
  const int g_line = __LINE__ - 1;  // the line above
  Tensor c = ones({2, 3});
  const int c_line = __LINE__ - 1;  // the line above
  check_rule(g, g_line, "tandem::full", c, c_line, "tandem::ones");
  // The first-named device is the first argument's.
  check_rule(c, c_line, "tandem::ones", g, g_line, "tandem::full");
}

TEST_CASE("ops refuse tensors on two cuda devices", "[device_rule]") {
  if (cuda::device_count() < 2) {
    CHECK(cuda::device_count() == static_cast<int>(test::devices().size()) - 1);
    return;
  }
  Tensor g0 = ones({3}, Device("cuda:0"));
  const int g0_line = __LINE__ - 1;  // the line above
  Tensor g1 = zeros({3}, Device("cuda:1"));
  const int g1_line = __LINE__ - 1;  // the line above
  check_rule(g0, g0_line, "tandem::ones", g1, g1_line, "tandem::zeros");
  check_rule(g1, g1_line, "tandem::zeros", g0, g0_line, "tandem::ones");
}

TEST_CASE("the device error, word for word", "[device_rule]") {
  if (cuda::device_count() == 0) return;
  Tensor a = zeros({2}, Device("cuda"));
  const int a_line = __LINE__ - 1;  // the line above
  Tensor b = zeros({2});
  const int b_line = __LINE__ - 1;  // the line above
  CHECK_THROWS_AS(a + b, DeviceError);
  CHECK_THROWS_WITH(a + b,
                    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 "
                    "and cpu! (when checking argument 'other' of add)\n"
                    "  self is on cuda:0: created by tandem::zeros at " +
                        where_from(a_line) +
                        "\n"
                        "  other is on cpu: created by tandem::zeros at " +
                        where_from(b_line) +
                        "\n"
                        "Tandem never moves tensors between devices by itself. Move one of them first, e.g. "
                        "other = other.to(self.device()), or create both on the same device (for a model, call "
                        "model->to(device) and move each batch with .to(device)).");
  // A moved or computed tensor is described by where it was moved, or what it came from.
  Tensor m = b.to(Device("cuda:0")).to(Device("cpu"));
  const int m_line = __LINE__ - 1;  // the line above
  CHECK_THROWS_WITH(a * m, Contains("  other is on cpu: moved by .to() at " + where_from(m_line)));
  CHECK_THROWS_WITH(exp(a) - b, Contains("  self is on cuda:0: computed by exp from a tensor created by "
                                         "tandem::zeros at " +
                                         where_from(a_line)));
  // Scalars go where the tensor is: no error.
  check_values(a + 1, {1, 1});
  check_values(2 - a, {2, 2});
  check_values(where(a.eq(0), 3, a), {3, 3});
}

TEST_CASE("copy_ and to() are the ways across devices", "[device_rule]") {
  if (cuda::device_count() == 0) return;
  Tensor g = full({3}, 2.5, Device("cuda:0"));
  Tensor c = zeros({3});
  c.copy_(g);  // allowed: copy_ is how data crosses devices
  check_values(c, {2.5, 2.5, 2.5});
  CHECK(c.is_cpu());
  CHECK(g.device() == Device("cuda:0"));
  check_values(g + c.to(g.device()), {5, 5, 5});
}

TEST_CASE("asking for cuda without a device is a clear error", "[device_rule]") {
  int n = cuda::device_count();
  if (n == 0) {
    const char* tail = "). Use the cpu device, or set TANDEM_EMULATE_CUDA=1 to emulate one";
    CHECK_THROWS_AS(zeros({2}, Device("cuda")), DeviceError);
    CHECK_THROWS_WITH(zeros({2}, Device("cuda")),
                      StartsWith("tandem::zeros: cannot use device 'cuda': CUDA is not available (") && Contains(tail));
    CHECK_THROWS_WITH(
        ones({2}, Device("cuda:0")),
        StartsWith("tandem::ones: cannot use device 'cuda:0': CUDA is not available (") && Contains(tail));
    CHECK_THROWS_WITH(full({2}, 1, Device("cuda:1")), StartsWith("tandem::full: cannot use device 'cuda:1'"));
    CHECK_THROWS_WITH(zeros({2}).to(Device("cuda")), StartsWith("to: cannot use device 'cuda': CUDA is not available"));
    CHECK_THROWS_WITH(zeros({2}).cuda(), StartsWith("to: cannot use device 'cuda': CUDA is not available"));
  } else {
    std::string bad = "cuda:" + std::to_string(n);
    std::string count =
        n == 1 ? "there is 1 CUDA device (cuda:0 to cuda:0)"
               : "there are " + std::to_string(n) + " CUDA devices (cuda:0 to cuda:" + std::to_string(n - 1) + ")";
    CHECK_THROWS_AS(zeros({2}, Device(bad)), DeviceError);
    CHECK_THROWS_WITH(zeros({2}, Device(bad)), "tandem::zeros: invalid device '" + bad + "': " + count);
    CHECK_THROWS_WITH(zeros({2}).to(Device(bad)), "to: invalid device '" + bad + "': " + count);
  }
}

// Shared test helpers.
#include "helpers.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <sstream>

namespace tandem::test {

std::vector<Device> devices() {
  std::vector<Device> out{Device(kCPU)};
  for (int i = 0; i < cuda::device_count(); ++i) out.emplace_back(kCUDA, i);
  return out;
}

Tolerance tolerance(Dtype dtype) {
  switch (dtype) {
    case kFloat64: return {1e-12, 1e-12};
    case kFloat32: return {1e-5, 1e-6};
    case kFloat16: return {1e-2, 1e-3};
    case kBFloat16: return {2e-2, 1e-2};
    case kInt64:
    case kInt32:
    case kUInt8:
    case kBool: return {0, 0};
  }
  return {0, 0};
}

static std::vector<double> host_values(const Tensor& t) { return t.to_vector<double>(); }

void check_values(const Tensor& actual, const std::vector<double>& expected, std::optional<Tolerance> tol) {
  Tolerance tl = tol.value_or(tolerance(actual.dtype()));
  std::vector<double> a = host_values(actual);
  REQUIRE(a.size() == expected.size());
  for (size_t i = 0; i < a.size(); ++i) {
    double e = expected[i], v = a[i];
    bool ok;
    if (std::isnan(e))
      ok = std::isnan(v);
    else if (std::isinf(e))
      ok = v == e;
    else
      ok = std::abs(v - e) <= tl.atol + tl.rtol * std::abs(e);
    if (!ok) {
      std::ostringstream ss;
      ss.precision(17);
      ss << "element " << i << ": got " << v << ", expected " << e << " (rtol " << tl.rtol << ", atol " << tl.atol
         << ", dtype " << actual.dtype() << ", device " << actual.device() << ")";
      FAIL(ss.str());
    }
  }
}

void check_close(const Tensor& actual, const Tensor& expected, std::optional<Tolerance> tol) {
  REQUIRE(actual.sizes().vec() == expected.sizes().vec());
  check_values(actual, host_values(expected), tol);
}

void check_equal(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.dtype() == expected.dtype());
  check_close(actual, expected, Tolerance{0, 0});
}

std::vector<double> as_dtype(std::vector<double> values, Dtype dtype) {
  if (dtype == kBool)
    for (double& x : values) x = x != 0 ? 1 : 0;
  return values;
}

std::optional<Device> other_device(const Device& device) {
  if (cuda::device_count() == 0) return std::nullopt;
  return device.is_cpu() ? Device(kCUDA, 0) : Device(kCPU);
}

Tensor waited(const Tensor& t) {
  Tensor host = t.cpu();
  if (t.is_cuda()) cuda::synchronize(t.device().index());  // an empty t's copy has nothing to wait for
  return host;
}

bool KernelErrorMatcher::match(const std::string& what) const {
  if (!device_.is_cuda()) return what == message_;
  const std::string note = detail::str_cat(" [found by a kernel on ", device_.str(), ", reported at ");
  return what.rfind(message_ + note, 0) == 0;
}

std::string KernelErrorMatcher::describe() const {
  return device_.is_cuda() ? "starts with \"" + message_ + " [found by a kernel on " + device_.str() + "\""
                           : "equals \"" + message_ + "\"";
}

KernelErrorMatcher kernel_error(const std::string& message, const Device& device) {
  return KernelErrorMatcher(message, device);
}

Tensor make(const std::vector<double>& values, IntArrayRef shape, Dtype dtype, Device device) {
  Tensor t = from_blob(const_cast<double*>(values.data()), {static_cast<int64_t>(values.size())}, kFloat64);
  return t.to(dtype).reshape(shape).to(device).clone();
}

Tensor leaf(const std::vector<double>& values, IntArrayRef shape, Device device, Dtype dtype) {
  return make(values, shape, dtype, device).requires_grad_();
}

void check_gradients(const autograd::GradcheckFn& fn, const std::vector<Tensor>& inputs, bool second_order,
                     const autograd::GradcheckOptions& options) {
  {
    INFO("first order");
    CHECK(autograd::gradcheck(fn, inputs, options) == "");
  }
  if (second_order) {
    INFO("second order");
    CHECK(autograd::gradgradcheck(fn, inputs, options) == "");
  }
}

void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                     bool second_order, const autograd::GradcheckOptions& options) {
  autograd::GradcheckFn wrapped = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; };
  check_gradients(wrapped, inputs, second_order, options);
}

namespace {
// An op table entry whose parameter struct has no overload here does not
// compile: a new one needs values chosen for its tests.
UnaryParams test_params(NoParams) { return {}; }
UnaryParams test_params(LeakyReluParams) { return LeakyReluParams{0.2}; }
UnaryParams test_params(EluParams) { return EluParams{0.7, 1.5, 2.0}; }
UnaryParams test_params(SoftplusParams) { return SoftplusParams{2.0, 3.0}; }
}  // namespace

std::vector<std::pair<BinaryOp, UnaryParams>> activation_backward_ops() {
  return {
#define X(Name, name, saved, Params) {BinaryOp::Name, test_params(Params{})},
      TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X
  };
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "tandem_test_XXXXXX").string();
  REQUIRE(::mkdtemp(pattern.data()) != nullptr);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::string> TempDir::listing() const {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string captured_cerr(const std::function<void()>& fn) {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  try {
    fn();
  } catch (...) {
    std::cerr.rdbuf(old);
    throw;
  }
  std::cerr.rdbuf(old);
  return captured.str();
}

}  // namespace tandem::test

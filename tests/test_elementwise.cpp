// Elementwise ops: unary math against <cmath> in double, binary ops with
// broadcasting and PyTorch's type promotion, scalar operands, 0-dim, empty,
// non-contiguous and expanded inputs, in-place forms and every error they
// throw, where/clamp/masked_fill/fill_, the parallel path, and the
// activations' fused backward ops against their composite formulas, on every
// device; then the CUDA launcher's index math (kernels/cuda/loops.h), on the
// cpu.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "helpers.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cuda/loops.h"
#include "kernels/elementwise.h"
#include "kernels/functors/visit.h"
#include "tensor/core/shape.h"

using namespace tandem;
using Catch::Contains;
using test::check_close;
using test::check_equal;
using test::check_values;
using test::make;

namespace {

using Fn1 = std::function<double(double)>;
using Fn2 = std::function<double(double, double)>;

const std::vector<Dtype> kFloatDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// The values a tensor of dtype really holds for vals (16-bit floats round).
std::vector<double> held(const std::vector<double>& vals, Dtype dtype) {
  return make(vals, {static_cast<int64_t>(vals.size())}, dtype).to_vector<double>();
}

std::vector<double> map(const std::vector<double>& v, const Fn1& f) {
  std::vector<double> out;
  for (double x : v) out.push_back(f(x));
  return out;
}

// f(a, b) in row-major order at the broadcast shape of a and b (numpy rules),
// computed here independently of the library's broadcasting.
std::vector<double> broadcast_apply(const std::vector<double>& a, const Shape& as, const std::vector<double>& b,
                                    const Shape& bs, const Fn2& f, Shape* out_shape = nullptr) {
  size_t nd = std::max(as.size(), bs.size());
  Shape pa(nd - as.size(), 1), pb(nd - bs.size(), 1), os(nd);
  pa.insert(pa.end(), as.begin(), as.end());
  pb.insert(pb.end(), bs.begin(), bs.end());
  int64_t n = 1;
  for (size_t d = 0; d < nd; ++d) {
    os[d] = pa[d] == 1 ? pb[d] : pa[d];
    n *= os[d];
  }
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t d = nd; d-- > 0;) {
      int64_t idx = rem % os[d];
      rem /= os[d];
      ia += (pa[d] == 1 ? 0 : idx) * sa;
      ib += (pb[d] == 1 ? 0 : idx) * sb;
      sa *= pa[d];
      sb *= pb[d];
    }
    out.push_back(f(a[ia], b[ib]));
  }
  if (out_shape) *out_shape = os;
  return out;
}

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  Fn1 ref;
  std::vector<double> inputs;  // inside the op's domain
};

const std::vector<double> kAny = {-2.5, -1.0, -0.3, 0.0, 0.7, 1.5, 2.25, 3.0};
const std::vector<double> kPositive = {0.05, 0.3, 0.7, 1.0, 1.5, 2.25, 3.0, 7.5};
const std::vector<double> kNonZero = {-2.5, -1.0, -0.3, 0.25, 0.7, 1.5, 2.25, 3.0};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, kAny},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, kAny},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, kAny},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, kPositive},
      {"log1p",
       [](const Tensor& x) { return log1p(x); },
       [](double x) { return std::log1p(x); },
       {-0.9, -0.3, 0.0, 1e-4, 0.7, 1.5, 3.0, 7.5}},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, kPositive},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1.0 / std::sqrt(x); }, kPositive},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, kAny},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, kAny},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, kAny},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, kAny},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; }, kAny},
      {"gelu", [](const Tensor& x) { return gelu(x); }, gelu_ref, kAny},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_tanh_ref, kAny},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, kAny},
      {"pow 2", [](const Tensor& x) { return pow(x, 2); }, [](double x) { return x * x; }, kAny},
      {"pow 0.5", [](const Tensor& x) { return pow(x, 0.5); }, [](double x) { return std::sqrt(x); }, kPositive},
      {"pow 3", [](const Tensor& x) { return pow(x, 3); }, [](double x) { return x * x * x; }, kAny},
      {"pow -1", [](const Tensor& x) { return pow(x, -1); }, [](double x) { return 1 / x; }, kNonZero},
      {"pow -2.0", [](const Tensor& x) { return x.pow(-2.0); }, [](double x) { return 1 / (x * x); }, kNonZero},
      {"pow 1.5", [](const Tensor& x) { return x.pow(1.5); }, [](double x) { return std::pow(x, 1.5); }, kPositive},
      {"pow 0", [](const Tensor& x) { return pow(x, 0); }, [](double) { return 1.0; }, kAny},
  };
}

}  // namespace

// ---------------------------------------------------------------- unary ops

DEVICE_TEST_CASE("unary ops match <cmath> in every floating dtype", "[elementwise][unary]") {
  for (const UnaryCase& c : unary_cases()) {
    for (Dtype dt : kFloatDtypes) {
      INFO(c.name << " " << dt);
      Tensor x = make(c.inputs, {2, 4}, dt, device);
      Tensor y = c.op(x);
      CHECK(y.dtype() == dt);
      CHECK(y.device() == device);
      CHECK(y.sizes().vec() == Shape{2, 4});
      check_values(y, map(held(c.inputs, dt), c.ref));
      // A transposed (non-contiguous) input gives the transposed result.
      Tensor yt = c.op(x.t());
      CHECK(yt.sizes().vec() == Shape{4, 2});
      check_close(yt, y.t());
    }
  }
}

DEVICE_TEST_CASE("unary ops on special values", "[elementwise][unary]") {
  for (Dtype dt : {kFloat32, kFloat64}) {
    INFO(dt);
    Tensor x = make({-kInf, kInf, kNaN, 0.0}, {4}, dt, device);
    check_values(exp(x), {0.0, kInf, kNaN, 1.0});
    check_values(tanh(x), {-1.0, 1.0, kNaN, 0.0});
    check_values(sigmoid(x), {0.0, 1.0, kNaN, 0.5});
    check_values(relu(x), {0.0, kInf, kNaN, 0.0});
    check_values(abs(x), {kInf, kInf, kNaN, 0.0});
    check_values(neg(x), {kInf, -kInf, kNaN, 0.0});
    check_values(gelu(x.slice(0, 1)), {kInf, kNaN, 0.0});
    check_values(silu(x.slice(0, 1)), {kInf, kNaN, 0.0});
    Tensor d = make({0.0, -1.0, -0.5}, {3}, dt, device);
    check_values(log(d), {-kInf, kNaN, kNaN});
    check_values(sqrt(d), {0.0, kNaN, kNaN});
    check_values(rsqrt(d), {kInf, kNaN, kNaN});
    check_values(log1p(make({-1.0, -2.0}, {2}, dt, device)), {-kInf, kNaN});
    check_values(pow(d, 0.5), {0.0, kNaN, kNaN});
  }
}

DEVICE_TEST_CASE("float ops promote integer and bool inputs to float32", "[elementwise][unary][promotion]") {
  std::vector<double> v = {0, 1, 2, 5};
  for (Dtype dt : {kInt64, kInt32, kUInt8}) {
    INFO(dt);
    Tensor x = make(v, {4}, dt, device);
    for (const UnaryCase& c : unary_cases()) {
      std::string name = c.name;
      if (name == "neg" || name == "abs" || name == "relu" || name.rfind("pow", 0) == 0) continue;
      INFO(name);
      Tensor y = c.op(x);
      CHECK(y.dtype() == kFloat32);
      check_values(y, map(v, c.ref));
    }
  }
  Tensor b = make({1, 0}, {2}, kBool, device);
  CHECK(exp(b).dtype() == kFloat32);
  check_values(exp(b), {std::exp(1.0), 1.0});
  check_values(sigmoid(b), {sigmoid_ref(1), 0.5});
}

DEVICE_TEST_CASE("neg, abs and relu keep integer dtypes", "[elementwise][unary]") {
  for (Dtype dt : {kInt64, kInt32}) {
    INFO(dt);
    Tensor x = make({-3, 0, 7, -1}, {4}, dt, device);
    CHECK(neg(x).dtype() == dt);
    check_values(neg(x), {3, 0, -7, 1});
    CHECK(abs(x).dtype() == dt);
    check_values(abs(x), {3, 0, 7, 1});
    CHECK(relu(x).dtype() == dt);
    check_values(relu(x), {0, 0, 7, 0});
    check_values(-x, {3, 0, -7, 1});
  }
  Tensor u = make({1, 250, 0}, {3}, kUInt8, device);
  CHECK(neg(u).dtype() == kUInt8);
  check_values(neg(u), {255, 6, 0});  // wraps, as torch.neg on uint8
  check_values(abs(u), {1, 250, 0});
  check_values(relu(u), {1, 250, 0});
}

DEVICE_TEST_CASE("unary ops reject bool where PyTorch does", "[elementwise][unary][errors]") {
  Tensor b = make({1, 0}, {2}, kBool, device);
  CHECK_THROWS_AS(neg(b), DtypeError);
  CHECK_THROWS_WITH(neg(b),
                    "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                    "invert a mask, use logical_not() or x.eq(false) instead");
  CHECK_THROWS_WITH(-b, Contains("Negation, the `-` operator, on a bool tensor"));
  CHECK_THROWS_AS(abs(b), DtypeError);
  CHECK_THROWS_WITH(abs(b), "abs: bool inputs are not supported; convert with .to(kInt64) or .to(kFloat32) first");
  CHECK_THROWS_AS(relu(b), DtypeError);
  CHECK_THROWS_WITH(relu(b), "relu: bool inputs are not supported; convert with .to(kInt64) or .to(kFloat32) first");
  CHECK_THROWS_WITH(b.neg_(), Contains("Negation"));
  Tensor x = make({1, 2}, {2}, kFloat32, device);
  CHECK_THROWS_AS(gelu(x, "erf"), ValueError);
  CHECK_THROWS_WITH(gelu(x, "erf"), "gelu: approximate must be 'none' or 'tanh', got 'erf'");
  CHECK_THROWS_AS(exp(Tensor()), ValueError);
  CHECK_THROWS_WITH(exp(Tensor()), "exp: argument 'input' is an undefined tensor (a default-constructed Tensor)");
}

// ---------------------------------------------------------------- pow

DEVICE_TEST_CASE("pow with a scalar exponent on integer and bool tensors", "[elementwise][pow]") {
  for (Dtype dt : {kInt64, kInt32, kUInt8}) {
    INFO(dt);
    Tensor x = make({0, 1, 2, 3, 5}, {5}, dt, device);
    CHECK(pow(x, 2).dtype() == dt);  // int exponent keeps the integer dtype
    check_values(pow(x, 2), {0, 1, 4, 9, 25});
    check_values(pow(x, 3), {0, 1, 8, 27, 125});
    check_values(pow(x, 0), {1, 1, 1, 1, 1});
    CHECK(pow(x, 0.5).dtype() == kFloat32);  // float exponent: float32
    check_values(pow(x, 0.5), {0, 1, std::sqrt(2.0), std::sqrt(3.0), std::sqrt(5.0)});
    check_values(pow(x, 2.0), {0, 1, 4, 9, 25});
    CHECK(pow(x, 2.0).dtype() == kFloat32);
    CHECK_THROWS_AS(pow(x, -1), ValueError);
    CHECK_THROWS_WITH(pow(x, -1), Contains("pow: integers to negative integer powers are not allowed") &&
                                      Contains("to the power -1"));
    Tensor y = x.clone();
    CHECK_THROWS_AS(y.pow_(-2), ValueError);
    CHECK_THROWS_WITH(y.pow_(-2), "pow_: integers to negative integer powers are not allowed");
    CHECK_THROWS_AS(y.pow_(0.5), DtypeError);
    CHECK_THROWS_WITH(y.pow_(0.5), std::string("pow_: result type float32 can't be cast to the desired output type ") +
                                       std::string(dtype_name(dt)));
    y.pow_(2);
    check_values(y, {0, 1, 4, 9, 25});
  }
  Tensor b = make({1, 0}, {2}, kBool, device);
  CHECK(pow(b, 2).dtype() == kInt64);
  check_values(pow(b, 2), {1, 0});
  CHECK(pow(b, 2.0).dtype() == kFloat32);
  check_values(pow(b, 2.0), {1, 0});
}

DEVICE_TEST_CASE("pow with tensor exponents and a scalar base", "[elementwise][pow]") {
  // PyTorch's integer pow: negative exponents give 1 for base 1, +-1 for -1, else 0.
  Tensor base = make({2, 1, -1, -1, 0, 3, -2}, {7}, kInt64, device);
  Tensor ex = make({-1, -1, -1, -2, -1, 4, 3}, {7}, kInt64, device);
  CHECK(pow(base, ex).dtype() == kInt64);
  check_values(pow(base, ex), {0, 1, -1, 1, 0, 81, -8});
  check_values(pow(base.to(kInt32), ex.to(kInt32)), {0, 1, -1, 1, 0, 81, -8});
  // Scalar base.
  Tensor e = make({1, -1, 3}, {3}, kInt64, device);
  CHECK(pow(2, e).dtype() == kInt64);
  check_values(pow(2, e), {2, 0, 8});
  CHECK(pow(2.5, e).dtype() == kFloat32);
  check_values(pow(2.5, e), {2.5, 0.4, 15.625});
  // Broadcasting and promotion between float tensors.
  Tensor x = make({4, 9, 0.25, 2}, {2, 2}, kFloat32, device);
  Tensor p = make({0.5, -1}, {2}, kFloat64, device);
  CHECK(pow(x, p).dtype() == kFloat64);
  check_values(pow(x, p), {2, 1.0 / 9, 0.5, 0.5});
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    Tensor a = make({1.5, 2, 0.5, 3}, {2, 2}, dt, device);
    Tensor b = make({2, -1.5}, {2, 1}, dt, device);
    check_values(a.pow(b), broadcast_apply(held({1.5, 2, 0.5, 3}, dt), {2, 2}, held({2, -1.5}, dt), {2, 1},
                                           [](double u, double v) { return std::pow(u, v); }));
  }
}

// ---------------------------------------------------------------- binary ops

namespace {
struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  Fn2 ref;
};

std::vector<BinaryCase> arithmetic_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](double a, double b) { return a + b; }},
      {"add alpha 2", [](const Tensor& a, const Tensor& b) { return add(a, b, 2); },
       [](double a, double b) { return a + 2 * b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](double a, double b) { return a - b; }},
      {"sub alpha 2", [](const Tensor& a, const Tensor& b) { return a.sub(b, 2); },
       [](double a, double b) { return a - 2 * b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); },
       [](double a, double b) { return std::min(a, b); }},
  };
}

std::vector<BinaryCase> comparison_cases() {
  return {
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, [](double a, double b) { return a == b; }},
      {"ne", [](const Tensor& a, const Tensor& b) { return a != b; }, [](double a, double b) { return a != b; }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a.lt(b); }, [](double a, double b) { return a < b; }},
      {"le", [](const Tensor& a, const Tensor& b) { return a <= b; }, [](double a, double b) { return a <= b; }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, [](double a, double b) { return a > b; }},
      {"ge", [](const Tensor& a, const Tensor& b) { return a >= b; }, [](double a, double b) { return a >= b; }},
  };
}
}  // namespace

DEVICE_TEST_CASE("binary arithmetic broadcasts (2,1,3) with (4,1) in every dtype", "[elementwise][binary]") {
  // Chosen so every integer result stays in uint8's range.
  std::vector<double> av = {20, 31, 42, 25, 36, 27}, bv = {1, 4, 2, 3};
  std::vector<double> fa = {1.5, -2.25, 3, 0.5, -1, 2.75}, fb = {0.5, -1.25, 2, 4};
  for (const BinaryCase& c : arithmetic_cases()) {
    for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8}) {
      INFO(c.name << " " << dt);
      bool fl = is_floating_point(dt);
      const auto& va = fl ? fa : av;
      const auto& vb = fl ? fb : bv;
      Tensor a = make(va, {2, 1, 3}, dt, device), b = make(vb, {4, 1}, dt, device);
      Tensor y = c.op(a, b);
      Shape shape;
      auto expected = broadcast_apply(held(va, dt), {2, 1, 3}, held(vb, dt), {4, 1}, c.ref, &shape);
      CHECK(shape == Shape{2, 4, 3});
      CHECK(y.sizes().vec() == shape);
      CHECK(y.device() == device);
      bool true_div = std::string(c.name) == "div" && !fl;
      CHECK(y.dtype() == (true_div ? kFloat32 : dt));
      check_values(y, expected);
      // Operands swapped broadcast the other way round (uint8 results wrap).
      auto swapped = broadcast_apply(held(vb, dt), {4, 1}, held(va, dt), {2, 1, 3}, c.ref);
      if (dt == kUInt8 && !true_div)
        for (double& e : swapped) e = static_cast<double>(((static_cast<int64_t>(e) % 256) + 256) % 256);
      check_values(c.op(b, a), swapped);
    }
  }
}

DEVICE_TEST_CASE("comparisons broadcast and give bool", "[elementwise][binary][comparison]") {
  std::vector<double> av = {1, 2, 3, 4, 5, 6}, bv = {2, 5, 3, 4};
  for (const BinaryCase& c : comparison_cases()) {
    for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8}) {
      INFO(c.name << " " << dt);
      Tensor a = make(av, {2, 1, 3}, dt, device), b = make(bv, {4, 1}, dt, device);
      Tensor y = c.op(a, b);
      CHECK(y.dtype() == kBool);
      CHECK(y.sizes().vec() == Shape{2, 4, 3});
      check_values(y, broadcast_apply(av, {2, 1, 3}, bv, {4, 1}, c.ref));
    }
    INFO(c.name << " int64 vs float32 (compares in float32)");
    Tensor i = make({1, 2, 3}, {3}, kInt64, device);
    Tensor f = make({1.5, 2, 2.5}, {3}, kFloat32, device);
    check_values(c.op(i, f), {c.ref(1, 1.5), c.ref(2, 2), c.ref(3, 2.5)});
    INFO("bool");
    Tensor p = make({1, 0, 1, 0}, {4}, kBool, device), q = make({1, 1, 0, 0}, {4}, kBool, device);
    check_values(c.op(p, q), {c.ref(1, 1), c.ref(0, 1), c.ref(1, 0), c.ref(0, 0)});
  }
  // NaN compares unequal to everything, itself included.
  Tensor n = make({kNaN, 1}, {2}, kFloat32, device);
  check_values(eq(n, n), {0, 1});
  check_values(ne(n, n), {1, 0});
  check_values(lt(n, n), {0, 0});
  check_values(ge(n, n), {0, 1});
}

DEVICE_TEST_CASE("bool arithmetic", "[elementwise][binary][promotion]") {
  Tensor p = make({1, 0, 1, 0}, {4}, kBool, device), q = make({1, 1, 0, 0}, {4}, kBool, device);
  CHECK((p + q).dtype() == kBool);
  check_values(p + q, {1, 1, 1, 0});
  check_values(add(p, q, true), {1, 1, 1, 0});
  CHECK((p * q).dtype() == kBool);
  check_values(p * q, {1, 0, 0, 0});
  CHECK(maximum(p, q).dtype() == kBool);
  check_values(maximum(p, q), {1, 1, 1, 0});
  check_values(minimum(p, q), {1, 0, 0, 0});
  CHECK((p / q).dtype() == kFloat32);
  check_values(p / q, {1, 0, kInf, kNaN});
  CHECK((p + 1).dtype() == kInt64);
  check_values(p + 1, {2, 1, 2, 1});
  CHECK((p + 1.5).dtype() == kFloat32);
  check_values(p + 1.5, {2.5, 1.5, 2.5, 1.5});
  CHECK((p * 3).dtype() == kInt64);
  check_values(p * 3, {3, 0, 3, 0});
}

DEVICE_TEST_CASE("integer division is true division", "[elementwise][binary]") {
  Tensor a = make({1, 0, -1, 7, -7}, {5}, kInt64, device), b = make({2, 0, 0, 2, 2}, {5}, kInt64, device);
  Tensor q = a / b;
  CHECK(q.dtype() == kFloat32);
  check_values(q, {0.5, kNaN, -kInf, 3.5, -3.5});
  Tensor i32 = make({3, 4}, {2}, kInt32, device);
  CHECK(div(i32, i32.to(kUInt8)).dtype() == kFloat32);
  check_values(div(i32, 2), {1.5, 2});
  check_values(i32 / 8, {0.375, 0.5});
}

DEVICE_TEST_CASE("add and sub check alpha as PyTorch", "[elementwise][binary][errors]") {
  Tensor i = make({1, 2}, {2}, kInt64, device), f = make({1, 2}, {2}, kFloat32, device);
  check_values(add(f, i, 2.5), {3.5, 7});
  check_values(add(i, f, 2.5), {3.5, 7});  // float result: a float alpha is fine
  check_values(add(i, 1.5, 2), {4, 5});
  check_values(add(f, 1, 2.5), {3.5, 4.5});
  check_values(sub(i, i, -3), {4, 8});
  CHECK_THROWS_AS(add(i, i, 2.5), DtypeError);
  CHECK_THROWS_WITH(add(i, i, 2.5),
                    "add: for integral input tensors, argument alpha must not be a floating point "
                    "number (got alpha = 2.5, result dtype int64)");
  CHECK_THROWS_WITH(sub(i, 1, 0.5), Contains("sub: for integral input tensors, argument alpha must not be"));
  Tensor j = i.clone();
  CHECK_THROWS_WITH(j.add_(1, 2.5), Contains("add: for integral input tensors"));
  check_values(j, {1, 2});
  CHECK_THROWS_AS(add(f, f, true), DtypeError);
  CHECK_THROWS_WITH(add(f, f, true), "add: boolean alpha is only supported for bool results (result dtype float32)");
  CHECK_THROWS_WITH(f.sub(2, true), Contains("sub: boolean alpha is only supported for bool results"));
}

DEVICE_TEST_CASE("scalar operands on either side", "[elementwise][binary][scalar]") {
  Tensor x = make({1, -2, 3.5}, {3}, kFloat32, device);
  check_values(x + 2, {3, 0, 5.5});
  check_values(2 + x, {3, 0, 5.5});
  check_values(x - 2, {-1, -4, 1.5});
  check_values(2 - x, {1, 4, -1.5});
  check_values(x * 2, {2, -4, 7});
  check_values(2 * x, {2, -4, 7});
  check_values(x / 2, {0.5, -1, 1.75});
  check_values(2 / x, {2, -1, 2 / 3.5});
  check_values(x.add(1, 3), {4, 1, 6.5});
  check_values(x.sub(1, 3), {-2, -5, 0.5});
  check_values(x.mul(-1), {-1, 2, -3.5});
  check_values(x.div(4), {0.25, -0.5, 0.875});
  for (Tensor r : {x + 2, 2 + x, x - 2, 2 - x, x * 2, 2 * x, x / 2, 2 / x}) {
    CHECK(r.dtype() == kFloat32);
    CHECK(r.device() == device);
  }
  Tensor i = make({1, 2, 4}, {3}, kInt64, device);
  CHECK((i + 2).dtype() == kInt64);
  CHECK((2 - i).dtype() == kInt64);
  check_values(2 - i, {1, 0, -2});
  CHECK((i / 2).dtype() == kFloat32);
  check_values(i / 2, {0.5, 1, 2});
  CHECK((2 / i).dtype() == kFloat32);
  check_values(2 / i, {2, 1, 0.5});
  CHECK((2.5 - i).dtype() == kFloat32);
  check_values(2.5 - i, {1.5, 0.5, -1.5});
  CHECK((i * 1.5).dtype() == kFloat32);
  check_values(i * 1.5, {1.5, 3, 6});
  Tensor i32 = make({1, 2, 4}, {3}, kInt32, device);
  CHECK((i32 + 2).dtype() == kInt32);
  CHECK((2 - i32).dtype() == kInt32);
  Tensor u = make({1, 2, 250}, {3}, kUInt8, device);
  CHECK((5 - u).dtype() == kUInt8);
  check_values(5 - u, {4, 3, 11});  // wraps mod 256
  check_values(u + 10, {11, 12, 4});
  Tensor h = make({1, 2}, {2}, kFloat16, device);
  CHECK((1 - h).dtype() == kFloat16);
  CHECK((h * 2.5).dtype() == kFloat16);
  check_values(1 - h, {0, -1});
  // Comparisons with scalars give bool.
  CHECK((x > 0).dtype() == kBool);
  check_values(x > 0, {1, 0, 1});
  check_values(x == 3.5, {0, 0, 1});
  check_values(x != 1, {0, 1, 1});
  check_values(x <= -2, {0, 1, 0});
  check_values(x < 1, {0, 1, 0});
  check_values(x >= 1, {1, 0, 1});
  check_values(i >= 2, {0, 1, 1});
  check_values(i < 1.5, {1, 0, 0});  // compares in float32
  check_values(i.eq(2), {0, 1, 0});
  check_values(i.ne(2), {1, 0, 1});
  check_values(i.lt(4), {1, 1, 0});
  check_values(i.le(2), {1, 1, 0});
  check_values(i.gt(1), {0, 1, 1});
  check_values(i.ge(4), {0, 0, 1});
  // Bool operands of subtraction are refused on either side.
  Tensor b = make({1, 0}, {2}, kBool, device);
  const char* one_bool =
      "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
      "invert a mask, use logical_not() instead";
  const char* two_bools =
      "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
      "logical_xor() operator instead";
  CHECK_THROWS_AS(1 - b, DtypeError);
  CHECK_THROWS_WITH(1 - b, one_bool);
  CHECK_THROWS_WITH(b - 1, one_bool);
  CHECK_THROWS_WITH(x - true, one_bool);
  CHECK_THROWS_WITH(b - make({1, 1}, {2}, kInt64, device), one_bool);
  CHECK_THROWS_WITH(b - b, two_bools);
  CHECK_THROWS_WITH(b - true, two_bools);
  CHECK_THROWS_WITH(true - b, two_bools);
}

DEVICE_TEST_CASE("0-dim and empty tensors", "[elementwise][binary]") {
  Tensor s = make({3}, {}, kFloat32, device), t = make({-0.5}, {}, kFloat32, device);
  Tensor r = s * t;
  CHECK(r.dim() == 0);
  CHECK(r.item<double>() == -1.5);
  CHECK(exp(s).dim() == 0);
  check_values(exp(s), {std::exp(3.0)});
  check_values(s > t, {1});
  Tensor v = make({1, 2, 3}, {3}, kFloat32, device);
  CHECK((s + v).sizes().vec() == Shape{3});
  check_values(s + v, {4, 5, 6});
  check_values(v - s, {-2, -1, 0});
  // Empty tensors broadcast to empty results.
  Tensor e = make({}, {0, 3}, kFloat32, device);
  CHECK((e + v).sizes().vec() == Shape{0, 3});
  CHECK((e + v).numel() == 0);
  CHECK(exp(e).sizes().vec() == Shape{0, 3});
  CHECK(e.eq(v).dtype() == kBool);
  CHECK(e.eq(v).sizes().vec() == Shape{0, 3});
  Tensor c = make({}, {0, 1}, kInt64, device), d = make({1, 2, 3, 4}, {1, 4}, kInt64, device);
  CHECK((c * d).sizes().vec() == Shape{0, 4});
  CHECK((e / 2).dtype() == kFloat32);
  CHECK_THROWS_AS(e + make({1, 2}, {2}, kFloat32, device), ShapeError);
  CHECK_THROWS_WITH(e + make({1, 2}, {2}, kFloat32, device),
                    "add: the size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1 "
                    "(shapes [0, 3] and [2] cannot be broadcast together)");
}

DEVICE_TEST_CASE("non-contiguous and expanded inputs", "[elementwise][binary]") {
  std::vector<double> vals;
  for (int k = 0; k < 12; ++k) vals.push_back(0.5 * k - 2);
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kInt64}) {
    INFO(dt);
    Tensor base = make(vals, {3, 4}, dt, device);
    Tensor t = base.t();                           // (4, 3), strides (1, 4)
    Tensor s = base.slice(1, 0, std::nullopt, 2);  // (3, 2), strides (4, 2)
    Tensor col = make({1, 2, 3}, {3, 1}, dt, device).expand({3, 4});
    REQUIRE_FALSE(t.is_contiguous());
    REQUIRE_FALSE(s.is_contiguous());
    REQUIRE(col.stride(1) == 0);
    check_equal(t * t, t.contiguous() * t.contiguous());
    check_equal(base + col, base + col.contiguous());
    check_equal(s - s.contiguous(), zeros({3, 2}, TensorOptions(dt).device(device)));
    check_equal(maximum(t, col.t()), maximum(t.contiguous(), col.t().contiguous()));
    check_equal(exp(s), exp(s.contiguous()));
    check_equal(t > 0, t.contiguous() > 0);
    // Transposed against sliced, both strided, broadcast against a row.
    Tensor row = base.select(0, 1).slice(0, 1, 4);  // (3,), offset 5
    check_equal(t + row, t.contiguous() + row.contiguous());
    auto expected = broadcast_apply(t.contiguous().to_vector<double>(), {4, 3}, row.to_vector<double>(), {3},
                                    [](double a, double b) { return a + b; });
    check_values(t + row, expected);
    check_values(s, {-2, -1, 0, 1, 2, 3});
  }
}

DEVICE_TEST_CASE("NaN propagates through maximum, minimum, clamp and relu", "[elementwise][nan]") {
  for (Dtype dt : kFloatDtypes) {
    INFO(dt);
    Tensor a = make({1, kNaN, 3, kNaN}, {4}, dt, device), b = make({kNaN, 2, 1, kNaN}, {4}, dt, device);
    check_values(maximum(a, b), {kNaN, kNaN, 3, kNaN});
    check_values(minimum(a, b), {kNaN, kNaN, 1, kNaN});
    check_values(clamp(a, 2, 2.5), {2, kNaN, 2.5, kNaN});
    check_values(relu(b), {kNaN, 2, 1, kNaN});
    check_values(a.clamp_min(0), {1, kNaN, 3, kNaN});
  }
}

// ---------------------------------------------------------------- promotion

DEVICE_TEST_CASE("type promotion follows PyTorch", "[elementwise][promotion]") {
  auto t = [&](std::vector<double> v, Dtype dt) { return make(v, {static_cast<int64_t>(v.size())}, dt, device); };
  auto z = [&](double v, Dtype dt) { return make({v}, {}, dt, device); };
  Tensor i32 = t({1, 2}, kInt32);
  // A Python-style scalar of a higher category gives that category's default.
  CHECK((i32 + 2.5).dtype() == kFloat32);
  check_values(i32 + 2.5, {3.5, 4.5});
  CHECK(result_type(i32, 2.5) == kFloat32);
  CHECK(result_type(i32, 2) == kInt32);
  CHECK(result_type(i32, true) == kInt32);
  // Same category: the scalar does not widen the tensor, and wraps.
  Tensor u8 = t({1, 2}, kUInt8);
  CHECK((u8 + 300).dtype() == kUInt8);
  check_values(u8 + 300, {45, 46});
  check_values(t({44}, kUInt8) == 300, {1});  // 300 wraps to 44 in uint8, as torch
  // 0-dim tensors of the same category do not widen a dimensioned tensor.
  CHECK((i32 + z(5, kInt64)).dtype() == kInt32);
  check_values(i32 + z(5, kInt64), {6, 7});
  CHECK(result_type(i32, z(5, kInt64)) == kInt32);
  // A 0-dim tensor of a higher category keeps its own dtype (torch 1.13:
  // torch.result_type(int32 tensor, float64 0-dim) is float64).
  CHECK((i32 + z(0.5, kFloat64)).dtype() == kFloat64);
  CHECK(result_type(i32, z(0.5, kFloat64)) == kFloat64);
  check_values(i32 + z(0.5, kFloat64), {1.5, 2.5});
  CHECK(result_type(t({1}, kBFloat16), z(1, kFloat64)) == kBFloat16);
  // float16 tensor with a float32 0-dim: float16.
  Tensor h = t({1, 2}, kFloat16);
  CHECK((h + z(0.25, kFloat32)).dtype() == kFloat16);
  check_values(h + z(0.25, kFloat32), {1.25, 2.25});
  // Two 0-dim tensors promote normally.
  CHECK((z(2, kInt32) + z(2.5, kFloat64)).dtype() == kFloat64);
  CHECK((z(2, kInt32) + 2.5).dtype() == kFloat32);
  CHECK((z(2, kInt32) + z(3, kInt64)).dtype() == kInt64);
  // Dimensioned tensors promote by the lattice.
  CHECK((t({1}, kInt64) + t({1}, kFloat16)).dtype() == kFloat16);
  CHECK((t({1}, kFloat16) + t({1}, kBFloat16)).dtype() == kFloat32);
  CHECK((t({1}, kUInt8) + t({1}, kBool)).dtype() == kUInt8);
  CHECK((t({1}, kUInt8) + t({1}, kInt32)).dtype() == kInt32);
  CHECK((t({1}, kInt32) * t({1}, kFloat64)).dtype() == kFloat64);
  CHECK(maximum(t({1, 2}, kInt64), t({1.5}, kFloat32)).dtype() == kFloat32);
  check_values(maximum(t({1, 2}, kInt64), t({1.5}, kFloat32)), {1.5, 2});
  // Bool with bool stays bool; bool with an int scalar is int64.
  CHECK((t({1}, kBool) + t({1}, kBool)).dtype() == kBool);
  CHECK(result_type(t({1}, kBool), 2) == kInt64);
  CHECK(result_type(t({1}, kBool), z(2, kInt32)) == kInt32);
  CHECK(result_type(t({1}, kBool), 2.5) == kFloat32);
}

// ---------------------------------------------------------------- in-place

DEVICE_TEST_CASE("in-place arithmetic writes into self", "[elementwise][inplace]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    INFO(dt);
    Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, dt, device);
    Tensor b = make({1, 2, 3}, {3}, dt, device);
    void* p = a.data_ptr();
    Tensor& r = a.add_(b, 2);
    CHECK(&r == &a);
    CHECK(a.data_ptr() == p);
    check_values(a, {3, 6, 9, 6, 9, 12});
    a.sub_(b);
    check_values(a, {2, 4, 6, 5, 7, 9});
    a.mul_(b);
    check_values(a, {2, 8, 18, 5, 14, 27});
    a.add_(1);
    a.sub_(2, 3);
    check_values(a, {-3, 3, 13, 0, 9, 22});
    a.mul_(2);
    check_values(a, {-6, 6, 26, 0, 18, 44});
    a += b;
    a -= 1;
    a *= make({2}, {}, dt, device);
    check_values(a, {-12, 14, 56, 0, 38, 92});
    a -= b;
    a += 3;
    a *= 1;
    check_values(a, {-10, 15, 56, 2, 39, 92});
    if (is_floating_point(dt)) {
      a.div_(b);
      a /= 2;
      check_values(a, {-5, 3.75, 56.0 / 6, 1, 9.75, 92.0 / 6});
      a /= make({0.5, 1, 2}, {3}, dt, device);
      check_values(a, {-10, 3.75, 56.0 / 12, 2, 9.75, 92.0 / 12});
    }
  }
}

DEVICE_TEST_CASE("in-place ops on views write through", "[elementwise][inplace]") {
  Tensor base = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  base.t().mul_(make({10, 100}, {2}, kFloat32, device));  // column scale through the transpose
  check_values(base, {10, 20, 30, 400, 500, 600});
  base.select(1, 1).add_(1);
  check_values(base, {10, 21, 30, 400, 501, 600});
  base.slice(1, 0, std::nullopt, 2).zero_();
  check_values(base, {0, 21, 0, 0, 501, 0});
  base[1].neg_();
  check_values(base, {0, 21, 0, 0, -501, 0});
  // Operands that overlap self in another layout are read before being overwritten.
  Tensor m = make({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3}, kFloat32, device);
  m.add_(m.t());
  check_values(m, {0, 4, 8, 4, 8, 12, 8, 12, 16});
  Tensor n = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  n.add_(n[0]);
  check_values(n, {2, 4, 6, 5, 7, 9});
  n.mul_(n);  // the very same view is fine
  check_values(n, {4, 16, 36, 25, 49, 81});
}

DEVICE_TEST_CASE("in-place ops keep self's dtype or refuse", "[elementwise][inplace][errors]") {
  Tensor i = make({1, 2}, {2}, kInt64, device);
  Tensor f = make({0.5, 1.5}, {2}, kFloat32, device);
  CHECK_THROWS_AS(i.add_(f), DtypeError);
  CHECK_THROWS_WITH(i.add_(f), "add_: result type float32 can't be cast to the desired output type int64");
  CHECK_THROWS_WITH(i.mul_(2.5), "mul_: result type float32 can't be cast to the desired output type int64");
  CHECK_THROWS_WITH(i.div_(i), "div_: result type float32 can't be cast to the desired output type int64");
  CHECK_THROWS_WITH(i.div_(2), "div_: result type float32 can't be cast to the desired output type int64");
  CHECK_THROWS_WITH(i /= 2, "div_: result type float32 can't be cast to the desired output type int64");
  CHECK_THROWS_WITH(i.exp_(), "exp_: result type float32 can't be cast to the desired output type int64");
  CHECK_THROWS_WITH(i.sqrt_(), "sqrt_: result type float32 can't be cast to the desired output type int64");
  CHECK_THROWS_WITH(i.sigmoid_(), Contains("sigmoid_: result type float32 can't be cast"));
  check_values(i, {1, 2});  // untouched by the failed ops
  Tensor b = make({1, 0}, {2}, kBool, device);
  CHECK_THROWS_WITH(b.add_(i), "add_: result type int64 can't be cast to the desired output type bool");
  CHECK_THROWS_WITH(b.mul_(2), "mul_: result type int64 can't be cast to the desired output type bool");
  CHECK_THROWS_WITH(b.sub_(b), Contains("with two bool tensors is not supported"));
  CHECK_THROWS_WITH(f.sub_(true), Contains("with a bool tensor is not supported"));
  // Lower or equal results cast into self.
  i.add_(make({1, 0}, {2}, kBool, device));
  check_values(i, {2, 2});
  Tensor h = make({1, 2}, {2}, kFloat16, device);
  h.add_(make({1.0001}, {1}, kFloat32, device));
  CHECK(h.dtype() == kFloat16);
  check_values(h, {2, 3});
  f.div_(make({2, 0}, {2}, kInt64, device));
  check_values(f, {0.25, kInf});
  i.neg_();
  check_values(i, {-2, -2});
  i.abs_();
  check_values(i, {2, 2});
  Tensor g = make({-1, 0.25, 4}, {3}, kFloat32, device);
  g.relu_();
  check_values(g, {0, 0.25, 4});
  g.sqrt_();
  check_values(g, {0, 0.5, 2});
  g.exp_();
  check_values(g, {1, std::exp(0.5), std::exp(2.0)});
  g.log_();
  check_values(g, {0, 0.5, 2});
  g.tanh_();
  check_values(g, {0, std::tanh(0.5), std::tanh(2.0)});
  g.sigmoid_();
  check_values(g, {0.5, sigmoid_ref(std::tanh(0.5)), sigmoid_ref(std::tanh(2.0))});
  g.pow_(2);
  check_values(g, {0.25, std::pow(sigmoid_ref(std::tanh(0.5)), 2), std::pow(sigmoid_ref(std::tanh(2.0)), 2)});
}

DEVICE_TEST_CASE("in-place shape and overlap errors", "[elementwise][inplace][errors]") {
  Tensor a = zeros({3}, device);
  CHECK_THROWS_AS(a.add_(zeros({2, 3}, device)), ShapeError);
  CHECK_THROWS_WITH(a.add_(zeros({2, 3}, device)),
                    "add_: output with shape [3] doesn't match the broadcast shape [2, 3]");
  CHECK_THROWS_WITH(a.mul_(zeros({2, 1}, device)),
                    "mul_: output with shape [3] doesn't match the broadcast shape [2, 3]");
  CHECK_THROWS_WITH(a.add_(zeros({4}, device)),
                    Contains("add: the size of tensor a (3) must match the size of tensor b (4)"));
  Tensor e = zeros({3, 1}, device).expand({3, 3});
  const char* expanded =
      "unsupported operation: more than one element of the written-to tensor refers to a single "
      "memory location (it is an expanded view, shape [3, 3]). Call .clone() on it before writing "
      "in place";
  CHECK_THROWS_AS(e.add_(1), ValueError);
  CHECK_THROWS_WITH(e.add_(1), std::string("add: ") + expanded);
  CHECK_THROWS_WITH(e.mul_(ones({3, 3}, device)), std::string("mul: ") + expanded);
  CHECK_THROWS_WITH(e.exp_(), std::string("exp: ") + expanded);
  CHECK_THROWS_WITH(e.clamp_(0, 1), std::string("clamp: ") + expanded);
  CHECK_THROWS_WITH(e.copy_(ones({3, 3}, device)), std::string("copy_: ") + expanded);
  CHECK_THROWS_WITH(e.masked_fill_(ones({3, 3}, TensorOptions(kBool).device(device)), 1),
                    std::string("masked_fill_: ") + expanded);
  // fill_ stores one value everywhere, so an expanded view may be filled (as torch).
  e.fill_(2);
  check_values(e, {2, 2, 2, 2, 2, 2, 2, 2, 2});
  Tensor u;
  CHECK_THROWS_WITH(u.add_(a), "add: argument 'self' is an undefined tensor (a default-constructed Tensor)");
  CHECK_THROWS_WITH(a.add_(u), "add: argument 'other' is an undefined tensor (a default-constructed Tensor)");
}

DEVICE_TEST_CASE("in-place ops bump the storage version", "[elementwise][inplace][version]") {
  Tensor a = make({1, 2, 3, 4}, {2, 2}, kFloat32, device);
  Tensor view = a.t();
  auto version = [&]() { return a.storage()->version(); };
  uint64_t v = version();
  auto bumped = [&](const char* what) {
    INFO(what);
    CHECK(version() > v);
    CHECK(view.storage()->version() == version());
    v = version();
  };
  a.add_(1);
  bumped("add_");
  a.sub_(a);
  bumped("sub_");
  view.mul_(2);
  bumped("mul_ on a view");
  a.div_(3);
  bumped("div_");
  a.fill_(2);
  bumped("fill_");
  a.zero_();
  bumped("zero_");
  a.neg_();
  bumped("neg_");
  a.exp_();
  bumped("exp_");
  a.clamp_(0, 1);
  bumped("clamp_");
  a.pow_(2);
  bumped("pow_");
  a.masked_fill_(make({1, 0}, {2}, kBool, device), 5);
  bumped("masked_fill_");
  a.copy_(ones({2, 2}, device));
  bumped("copy_");
  a += 1;
  bumped("+=");
  // Out-of-place ops and views leave it alone.
  Tensor r = a + 1;
  Tensor s = exp(a);
  Tensor w = a.view({4});
  CHECK(w.shares_storage(a));
  CHECK(version() == v);
  CHECK(r.storage()->version() == 0);
  CHECK(s.storage()->version() == 0);
}

// ---------------------------------------------------------------- where, clamp, masked_fill, fill_

DEVICE_TEST_CASE("where", "[elementwise][where]") {
  Tensor c = make({1, 0, 0, 1, 1, 0}, {2, 3}, kBool, device);
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor b = make({-1, -2, -3}, {3}, kFloat32, device);
  Tensor w = where(c, a, b);
  CHECK(w.dtype() == kFloat32);
  CHECK(w.sizes().vec() == Shape{2, 3});
  check_values(w, {1, -2, -3, 4, 5, -3});
  // cond broadcasts too; the result takes the broadcast of all three.
  Tensor col = make({1, 0}, {2, 1}, kBool, device);
  Tensor w2 = where(col, b, make({7}, {}, kFloat32, device));
  CHECK(w2.sizes().vec() == Shape{2, 3});
  check_values(w2, {-1, -2, -3, 7, 7, 7});
  // Scalar forms and promotion.
  Tensor i = make({1, 2, 3}, {3}, kInt32, device);
  Tensor m = make({1, 0, 1}, {3}, kBool, device);
  CHECK(where(m, i, 2.5).dtype() == kFloat32);
  check_values(where(m, i, 2.5), {1, 2.5, 3});
  CHECK(where(m, 2.5, i).dtype() == kFloat32);
  check_values(where(m, 2.5, i), {2.5, 2, 2.5});
  CHECK(where(m, i, 0).dtype() == kInt32);
  check_values(where(m, i, 0), {1, 0, 3});
  CHECK(where(m, i, b).dtype() == kFloat32);
  check_values(where(m, i, b), {1, -2, 3});
  check_values(where(m, i.t(), make({9}, {1}, kInt64, device)), {1, 9, 3});
  // Non-contiguous cond and inputs.
  check_values(where(c.t(), a.t(), 0.0), {1, 4, 0, 5, 0, 0});
  // Errors.
  CHECK_THROWS_AS(where(i, a, b), DtypeError);
  CHECK_THROWS_WITH(where(i, i, i), "where: expected condition to be a bool tensor, but got a tensor with dtype int32");
  CHECK_THROWS_AS(where(make({1, 0}, {2}, kBool, device), a, b), ShapeError);
  CHECK_THROWS_WITH(where(make({1, 0}, {2}, kBool, device), b, 1),
                    Contains("where: the size of tensor a (2) must match"));
  CHECK_THROWS_AS(where(m, make({1}, {1}, kUInt8, device), 300), ValueError);
  CHECK_THROWS_WITH(where(m, make({1}, {1}, kUInt8, device), 300),
                    "where: value 300 cannot be converted to type uint8 without overflow");
}

DEVICE_TEST_CASE("clamp", "[elementwise][clamp]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    INFO(dt);
    Tensor x = make({-3, -1, 0, 2, 5, 9}, {2, 3}, dt, device);
    CHECK(clamp(x, -1, 4).dtype() == dt);
    check_values(clamp(x, -1, 4), {-1, -1, 0, 2, 4, 4});
    check_values(clamp(x, 0), {0, 0, 0, 2, 5, 9});
    check_values(clamp(x, std::nullopt, 1), {-3, -1, 0, 1, 1, 1});
    check_values(x.clamp_min(2), {2, 2, 2, 2, 5, 9});
    check_values(clamp_max(x, -2), {-3, -2, -2, -2, -2, -2});
    check_values(x.clamp(6, 1), {1, 1, 1, 1, 1, 1});  // min > max: everything is max, as torch
    check_values(clamp(x.t(), 0, 3), {0, 2, 0, 3, 0, 3});
    Tensor y = x.clone();
    y.clamp_(0, 3);
    check_values(y, {0, 0, 0, 2, 3, 3});
  }
  // An integer tensor with a float bound computes in float32.
  Tensor i = make({1, 5}, {2}, kInt64, device);
  CHECK(clamp(i, 0.5).dtype() == kFloat32);
  check_values(clamp(i, 2, 3.5), {2, 3.5});
  CHECK(clamp(i, 2, 3).dtype() == kInt64);
  CHECK_THROWS_AS(i.clamp_(1.5), DtypeError);
  CHECK_THROWS_WITH(i.clamp_(1.5), "clamp_: result type float32 can't be cast to the desired output type int64");
  // Bool: bounds of a higher category promote; bool bounds are refused.
  Tensor b = make({1, 0}, {2}, kBool, device);
  CHECK(clamp(b, 0.5).dtype() == kFloat32);
  check_values(clamp(b, 0.5), {1, 0.5});
  CHECK(clamp(b, 0).dtype() == kInt64);
  CHECK_THROWS_AS(clamp(b, true), DtypeError);
  CHECK_THROWS_WITH(clamp(b, true), "clamp: not supported for bool tensors with bool bounds");
  // uint8 takes a negative int bound the way torch does: it wraps.
  check_values(clamp(make({5, 200}, {2}, kUInt8, device), -1), {255, 255});
  CHECK_THROWS_AS(clamp(make({1}, {1}, kInt32, device), int64_t{1} << 40), ValueError);
  CHECK_THROWS_WITH(clamp(make({1}, {1}, kInt32, device), int64_t{1} << 40),
                    "clamp: value 1099511627776 cannot be converted to type int32 without overflow");
  CHECK_THROWS_WITH(clamp(make({1}, {1}, kFloat16, device), 0, 1e5),
                    "clamp: value 100000 cannot be converted to type float16 without overflow");
  Tensor f = make({1}, {1}, kFloat32, device);
  CHECK_THROWS_AS(clamp(f, std::nullopt, std::nullopt), ValueError);
  CHECK_THROWS_WITH(clamp(f, std::nullopt, std::nullopt), "clamp: at least one of 'min' or 'max' must not be None");
  CHECK_THROWS_WITH(f.clamp_(std::nullopt), "clamp_: at least one of 'min' or 'max' must not be None");
}

DEVICE_TEST_CASE("masked_fill", "[elementwise][masked_fill]") {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device);
  Tensor m = make({1, 0, 1, 0, 0, 1}, {2, 3}, kBool, device);
  check_values(x.masked_fill(m, -1), {-1, 2, -1, 4, 5, -1});
  check_values(masked_fill(x, m, 0.5), {0.5, 2, 0.5, 4, 5, 0.5});
  // The mask broadcasts to x.
  Tensor row = make({0, 1, 0}, {3}, kBool, device);
  check_values(x.masked_fill(row, 9), {1, 9, 3, 4, 9, 6});
  // Out of place, x broadcasts to the mask too (as torch.masked_fill).
  Tensor big = make({1, 0, 0, 0, 1, 1}, {2, 3}, kBool, device);
  Tensor r = make({1, 2, 3}, {3}, kFloat32, device).masked_fill(big, 0);
  CHECK(r.sizes().vec() == Shape{2, 3});
  check_values(r, {0, 2, 3, 1, 0, 0});
  // Non-contiguous x and mask.
  check_values(x.t().masked_fill(m.t(), 0), {0, 4, 2, 5, 0, 0});
  // In place, through a view.
  Tensor y = x.clone();
  y.t().masked_fill_(row.unsqueeze(1), 7);
  check_values(y, {1, 7, 3, 4, 7, 6});
  y.masked_fill_(make({1, 0, 0}, {3}, kBool, device), 0);
  check_values(y, {0, 7, 3, 0, 7, 6});
  // Every dtype; a value is converted to the tensor's dtype.
  for (Dtype dt : {kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    INFO(dt);
    Tensor t = make({1, 0, 1}, {3}, dt, device);
    Tensor mm = make({0, 1, 1}, {3}, kBool, device);
    Tensor out = t.masked_fill(mm, dt == kBool ? Scalar(true) : Scalar(3));
    CHECK(out.dtype() == dt);
    check_values(out, {1, dt == kBool ? 1.0 : 3.0, dt == kBool ? 1.0 : 3.0});
  }
  check_values(make({1, 2}, {2}, kInt64, device).masked_fill(make({1, 0}, {2}, kBool, device), 2.5), {2, 2});
  // Errors.
  CHECK_THROWS_AS(x.masked_fill(x, 1), DtypeError);
  CHECK_THROWS_WITH(x.masked_fill(x.gt(2).to(kUInt8), 1),
                    "masked_fill: only supports boolean masks, but got mask with dtype uint8");
  CHECK_THROWS_WITH(x.masked_fill_(x, 1), "masked_fill_: only supports boolean masks, but got mask with dtype float32");
  Tensor bad = make({1, 0}, {2}, kBool, device);
  CHECK_THROWS_AS(x.masked_fill(bad, 1), ShapeError);
  CHECK_THROWS_WITH(x.masked_fill(bad, 1),
                    "masked_fill: the size of tensor a (3) must match the size of tensor b (2) at non-singleton "
                    "dimension 1 (shapes [2, 3] and [2] cannot be broadcast together)");
  Tensor z = make({1, 2, 3}, {3}, kFloat32, device);
  CHECK_THROWS_AS(z.masked_fill_(big, 0), ShapeError);
  CHECK_THROWS_WITH(z.masked_fill_(big, 0),
                    "masked_fill_: mask of shape [2, 3] cannot be broadcast to the input's "
                    "shape [3]");
  CHECK_THROWS_AS(make({1}, {1}, kUInt8, device).masked_fill(make({1}, {1}, kBool, device), 300), ValueError);
  CHECK_THROWS_WITH(make({1}, {1}, kUInt8, device).masked_fill(make({1}, {1}, kBool, device), 300),
                    "masked_fill: value 300 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(make({1}, {1}, kFloat16, device).masked_fill_(make({1}, {1}, kBool, device), 1e6),
                    "masked_fill_: value 1e+06 cannot be converted to type float16 without overflow");
}

DEVICE_TEST_CASE("fill_ and zero_", "[elementwise][fill]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    INFO(dt);
    Tensor t = make({1, 0, 1, 1, 0, 1}, {2, 3}, dt, device);
    Tensor& r = t.fill_(dt == kBool ? Scalar(true) : Scalar(7));
    CHECK(&r == &t);
    check_values(t, std::vector<double>(6, dt == kBool ? 1 : 7));
    t.zero_();
    check_values(t, std::vector<double>(6, 0));
    // Views fill only their elements.
    t.t().select(0, 1).fill_(1);
    check_values(t, {0, 1, 0, 0, 1, 0});
    t.slice(1, 0, std::nullopt, 2).fill_(1);
    check_values(t, {1, 1, 1, 1, 1, 1});
    t.select(0, 0).zero_();
    check_values(t, {0, 0, 0, 1, 1, 1});
  }
  // Values convert to the dtype as torch: truncation, wrap of negative ints
  // into uint8, anything non-zero is true.
  check_values(zeros({2}, TensorOptions(kInt64).device(device)).fill_(2.5), {2, 2});
  check_values(zeros({2}, TensorOptions(kInt32).device(device)).fill_(-2.9), {-2, -2});
  check_values(zeros({2}, TensorOptions(kUInt8).device(device)).fill_(-1), {255, 255});
  check_values(zeros({2}, TensorOptions(kUInt8).device(device)).fill_(-255), {1, 1});
  check_values(zeros({2}, TensorOptions(kBool).device(device)).fill_(2), {1, 1});
  check_values(zeros({2}, TensorOptions(kBool).device(device)).fill_(0.5), {1, 1});
  check_values(zeros({2}, TensorOptions(kFloat16).device(device)).fill_(kInf), {kInf, kInf});
  check_values(zeros({2}, TensorOptions(kFloat16).device(device)).fill_(65504), {65504, 65504});
  check_values(zeros({1}, TensorOptions(kInt64).device(device)).fill_(std::numeric_limits<int64_t>::min()),
               {-9223372036854775808.0});
  check_values(zeros({2}, device).fill_(true), {1, 1});
  // Values that do not fit are refused, as torch.
  auto filled = [&](Dtype dt, const Scalar& v) { return zeros({2}, TensorOptions(dt).device(device)).fill_(v); };
  CHECK_THROWS_AS(filled(kUInt8, 300), ValueError);
  CHECK_THROWS_WITH(filled(kUInt8, 300), "fill_: value 300 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(filled(kUInt8, -256), "fill_: value -256 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(filled(kUInt8, -1.5), "fill_: value -1.5 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(filled(kUInt8, 255.5), "fill_: value 255.5 cannot be converted to type uint8 without overflow");
  CHECK_THROWS_WITH(filled(kInt32, int64_t{1} << 40),
                    "fill_: value 1099511627776 cannot be converted to type int32 without overflow");
  CHECK_THROWS_WITH(filled(kInt64, 1e19), "fill_: value 1e+19 cannot be converted to type int64 without overflow");
  CHECK_THROWS_WITH(filled(kInt64, kNaN), "fill_: value nan cannot be converted to type int64 without overflow");
  CHECK_THROWS_WITH(filled(kInt32, kInf), "fill_: value inf cannot be converted to type int32 without overflow");
  CHECK_THROWS_WITH(filled(kFloat16, 65519.0), Contains("cannot be converted to type float16 without overflow"));
  CHECK_THROWS_WITH(filled(kFloat16, 100000),
                    "fill_: value 100000 cannot be converted to type float16 without "
                    "overflow");
  CHECK_THROWS_WITH(filled(kBFloat16, 1e300), Contains("to type bfloat16 without overflow"));
  CHECK_THROWS_WITH(filled(kFloat32, 1e300), Contains("to type float32 without overflow"));
  CHECK_THROWS_WITH(full({2}, 300, TensorOptions(kUInt8).device(device)), Contains("to type uint8 without overflow"));
  check_values(filled(kFloat64, 1e300), {1e300, 1e300});
  Tensor u;
  CHECK_THROWS_WITH(u.fill_(1), "fill_: argument 'self' is an undefined tensor (a default-constructed Tensor)");
}

// ---------------------------------------------------------------- the parallel path

DEVICE_TEST_CASE("large tensors take the parallel path and agree with a serial loop", "[elementwise][parallel]") {
  const int64_t rows = 366, cols = 362;  // 132492 elements > 4 * kElementwiseGrain
  static_assert(366 * 362 > 4 * cpu::kElementwiseGrain);
  std::vector<double> av(rows * cols), bv(rows * cols);
  for (int64_t k = 0; k < rows * cols; ++k) {
    av[k] = std::sin(0.001 * k) * 3;
    bv[k] = std::cos(0.0007 * k) + 0.25;
  }
  Tensor a = make(av, {rows, cols}, kFloat32, device), b = make(bv, {rows, cols}, kFloat32, device);
  std::vector<double> ha = held(av, kFloat32), hb = held(bv, kFloat32);
  int saved = cpu::num_threads();
  cpu::set_num_threads(4);
  Tensor sum = add(a, b, 2), ex = exp(a), cmp = a > b;
  // Transposed operands: every inner run is strided.
  Tensor tsum = a.t() * b.t();
  // Step slices and an expanded row.
  Tensor sl = a.slice(1, 1, std::nullopt, 3) - b.slice(1, 0, std::nullopt, 3);
  Tensor ex_row = a + b.select(0, 7).unsqueeze(0).expand({rows, cols});
  Tensor mt = maximum(a.t(), b.slice(0, 0, std::nullopt, 1).t());
  cpu::set_num_threads(1);
  Tensor serial = a.t() * b.t();
  cpu::set_num_threads(saved);

  std::vector<double> e_sum, e_ex, e_cmp, e_tsum, e_row, e_mt;
  for (int64_t k = 0; k < rows * cols; ++k) {
    e_sum.push_back(ha[k] + 2 * hb[k]);
    e_ex.push_back(std::exp(ha[k]));
    e_cmp.push_back(ha[k] > hb[k]);
    e_row.push_back(ha[k] + hb[7 * cols + k % cols]);
  }
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t i = 0; i < rows; ++i) {
      e_tsum.push_back(ha[i * cols + j] * hb[i * cols + j]);
      e_mt.push_back(std::max(ha[i * cols + j], hb[i * cols + j]));
    }
  }
  std::vector<double> e_sl;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < (cols - 1 + 2) / 3; ++j) e_sl.push_back(ha[i * cols + 1 + 3 * j] - hb[i * cols + 3 * j]);
  CHECK(sl.sizes().vec() == Shape{rows, (cols + 1) / 3});
  check_values(sum, e_sum);
  check_values(ex, e_ex);
  check_values(cmp, e_cmp);
  check_values(tsum, e_tsum);
  check_values(sl, e_sl);
  check_values(ex_row, e_row);
  check_values(mt, e_mt);
  check_equal(tsum, serial);
}

namespace {

// The bytes of t, contiguous, on the cpu.
std::string bits_of(const Tensor& t) {
  const Tensor c = t.to(Device(kCPU)).contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

}  // namespace

DEVICE_TEST_CASE("16-bit runs, contiguous, broadcast or strided, across conversion blocks: float32 math rounded once",
                 "[elementwise][half]") {
  // 1000 elements: several of the CPU loop's 256-element conversion blocks
  // and a partial one; special values among them (subnormals of either
  // type, 0, -0, inf, nan, the largest finite values).
  const int64_t n = 1000;
  std::vector<double> av(n), bv(n);
  for (int64_t k = 0; k < n; ++k) {
    av[k] = std::sin(0.37 * static_cast<double>(k)) * std::pow(2.0, static_cast<double>(k % 41) - 20);
    bv[k] = std::cos(0.11 * static_cast<double>(k)) * 3;
  }
  const double specials[] = {0.0, -0.0, kInf, -kInf, kNaN, 65504, -65504, 3e38, 6e-8, 1e-40, -2e-39, 1e-5};
  for (size_t k = 0; k < std::size(specials); ++k) {
    av[300 + 7 * k] = specials[k];
    bv[520 + 5 * k] = specials[k];
  }
  for (Dtype dt : {kFloat16, kBFloat16}) {
    INFO(dt);
    const Tensor a = make(av, {n}, dt, device), b = make(bv, {n}, dt, device);
    const Tensor s = full({}, -0.75, TensorOptions(dt).device(device));
    const Tensor a32 = a.to(kFloat32), b32 = b.to(kFloat32), s32 = s.to(kFloat32);
    CHECK(bits_of(a + b) == bits_of((a32 + b32).to(dt)));
    CHECK(bits_of(a * s) == bits_of((a32 * s32).to(dt)));    // a broadcast 0-dim operand
    CHECK(bits_of(s - a) == bits_of((s32 - a32).to(dt)));    // on the left
    CHECK(bits_of(a.relu()) == bits_of(a32.relu().to(dt)));  // negatives to +0, nan and -0 kept
    CHECK(bits_of(a.exp()) == bits_of(a32.exp().to(dt)));
    CHECK(bits_of(a.gt(s)) == bits_of(a32.gt(s32)));
    CHECK(bits_of(a.gt(0)) == bits_of(a32.gt(0)));
    CHECK(bits_of(a.to(kFloat32)) == bits_of(a32));
    CHECK(bits_of(b32.to(dt)) == bits_of(b));
    // Strided: every other element, and a transposed (25, 40) view.
    const Tensor as = a.slice(0, 0, std::nullopt, 2), bs = b.slice(0, 1, std::nullopt, 2);
    CHECK(bits_of(as * bs) == bits_of((as.to(kFloat32) * bs.to(kFloat32)).to(dt)));
    const Tensor at = a.reshape({40, 25}).t(), bt = b.reshape({40, 25}).t();
    CHECK(bits_of(at - bt) == bits_of((at.to(kFloat32) - bt.to(kFloat32)).to(dt)));
    // In place, self an operand.
    Tensor c = a.clone();
    c.mul_(b);
    CHECK(bits_of(c) == bits_of((a32 * b32).to(dt)));
  }
}

DEVICE_TEST_CASE("many dims of size 1 do not count against the dims limit", "[elementwise]") {
  Shape shape(20, 1);
  shape[3] = 2;
  shape[17] = 3;
  Tensor a = test::make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32, device).reshape(shape);
  Tensor b = a + a;
  CHECK(b.sizes().vec() == shape);
  check_values(b, {2, 4, 6, 8, 10, 12});
  // 17 dims of size 2 in reversed memory order: none can merge, one too many.
  Shape big(17, 2), reversed(17);
  for (int i = 0; i < 17; ++i) reversed[i] = 16 - i;
  Tensor x = zeros(big, TensorOptions(kUInt8).device(device)).permute(reversed);
  CHECK_THROWS_AS(x.contiguous(), ShapeError);
  CHECK_THROWS_WITH(x.contiguous(),
                    Catch::Contains("elementwise ops support at most 16 non-mergeable dimensions of size > 1"));
}

DEVICE_TEST_CASE("signed zeros: relu keeps -0.0, abs gives +0.0, as torch", "[elementwise]") {
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    Tensor z = test::make({-0.0, 0.0}, {2}, dt, device);
    std::vector<double> r = relu(z).to_vector<double>(), a = abs(z).to_vector<double>();
    CHECK(std::signbit(r[0]));
    CHECK_FALSE(std::signbit(r[1]));
    CHECK_FALSE(std::signbit(a[0]));
    CHECK_FALSE(std::signbit(a[1]));
  }
}

// ---------------------------------------------------------------- activation backward (autograd's fused rules)
namespace {

using Fn2T = std::function<Tensor(const Tensor&, const Tensor&)>;

// One of detail::*_backward beside the composite formula autograd's rule
// runs when it records (autograd/rules_elementwise.cpp), written again here.
struct ActivationBackward {
  const char* name;
  std::function<Tensor(const Tensor&)> saved;  // x -> what the rule saves: the output, or x
  Fn2T fused, composite;                       // (grad, saved) -> grad_x
};

Tensor gelu_derivative(const Tensor& x, bool tanh_form) {
  if (tanh_form) {
    const double k = std::sqrt(2 / M_PI);
    Tensor x_sq = x * x;
    Tensor t = tanh((x + x * x_sq * 0.044715) * k);
    return (t + 1) * 0.5 + x * 0.5 * (1 - t * t) * ((x_sq * (3 * 0.044715) + 1) * k);
  }
  Tensor cdf = (erf(x * M_SQRT1_2) + 1) * 0.5;
  Tensor pdf = exp(x * x * -0.5) * (1 / std::sqrt(2 * M_PI));
  return cdf + x * pdf;
}

const std::vector<ActivationBackward>& activation_backwards() {
  static const std::vector<ActivationBackward> all = {
      {"relu", [](const Tensor& x) { return relu(x); }, detail::relu_backward,
       [](const Tensor& g, const Tensor& y) { return where(y.gt(0), g, 0.0); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, detail::tanh_backward,
       [](const Tensor& g, const Tensor& y) { return g * (1 - y * y); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, detail::sigmoid_backward,
       [](const Tensor& g, const Tensor& y) { return g * y * (1 - y); }},
      {"gelu", [](const Tensor& x) { return x; },
       [](const Tensor& g, const Tensor& x) { return detail::gelu_backward(g, x); },
       [](const Tensor& g, const Tensor& x) { return g * gelu_derivative(x, false); }},
      {"gelu tanh", [](const Tensor& x) { return x; },
       [](const Tensor& g, const Tensor& x) { return detail::gelu_backward(g, x, "tanh"); },
       [](const Tensor& g, const Tensor& x) { return g * gelu_derivative(x, true); }},
      {"silu", [](const Tensor& x) { return x; }, detail::silu_backward,
       [](const Tensor& g, const Tensor& x) {
         Tensor s = sigmoid(x);
         return g * s * (x * (1 - s) + 1);
       }},
  };
  return all;
}

// x: zeros of both signs, negative and positive, small and large (every
// dtype holds them exactly); g: no zeros, both signs.
const std::vector<double> kActX = {0.0,    -0.0, -1000, -20, -3, -1.25, -0.5, -0.0625,
                                   0.0625, 0.5,  1.25,  3,   20, 1000,  7.5,  -7.5};
const std::vector<double> kActG = {1.5, -0.75, 2, 0.25, -1.25, 0.5, -2, 1.75, -0.5, 1, -1.5, 0.75, 1.25, -0.25, 2, -1};

}  // namespace

DEVICE_TEST_CASE("activation backward ops match their composite formulas in every floating dtype",
                 "[elementwise][activation_backward]") {
  for (const ActivationBackward& op : activation_backwards()) {
    for (Dtype dt : kFloatDtypes) {
      INFO(op.name << ", " << dt);
      Tensor x = make(kActX, {4, 4}, dt, device), g = make(kActG, {4, 4}, dt, device);
      Tensor s = op.saved(x);
      Tensor got = op.fused(g, s);
      REQUIRE(got.dtype() == dt);
      REQUIRE(got.device() == device);
      REQUIRE(got.sizes() == IntArrayRef{4, 4});
      REQUIRE_FALSE(got.requires_grad());
      // The composite in float64 on the same (exactly widened) values: the
      // fused op rounds once, where the composite in a 16-bit dtype rounds
      // after every op (and overflows x * x at 1000 in float16).
      check_close(got, op.composite(g.to(kFloat64), s.to(kFloat64)), test::tolerance(dt));
      if (dt == kFloat64 || dt == kFloat32) check_close(got, op.composite(g, s), test::tolerance(dt));
    }
  }
}

DEVICE_TEST_CASE("activation backward ops on non-contiguous, expanded, 0-dim and empty inputs",
                 "[elementwise][activation_backward]") {
  const double nan = kNaN;
  for (const ActivationBackward& op : activation_backwards()) {
    for (Dtype dt : {kFloat32, kFloat64}) {
      INFO(op.name << ", " << dt);
      Tensor x = make(kActX, {4, 4}, dt, device), g = make(kActG, {4, 4}, dt, device);
      Tensor s = op.saved(x);
      Tensor expected = op.composite(g, s);
      // g: every other column of a (4, 8) buffer whose other columns are NaN;
      // saved: a transposed view of its transpose, same values.
      std::vector<double> buf;
      for (double v : kActG) {
        buf.push_back(v);
        buf.push_back(nan);
      }
      Tensor g_sliced = make(buf, {4, 8}, dt, device).slice(1, 0, std::nullopt, 2);
      Tensor s_transposed = s.t().contiguous().t();
      REQUIRE_FALSE(g_sliced.is_contiguous());
      REQUIRE_FALSE(s_transposed.is_contiguous());
      check_close(op.fused(g_sliced, s_transposed), expected, test::tolerance(dt));
      check_close(op.fused(g.t(), s.t()), expected.t(), test::tolerance(dt));
      // A gradient expanded from one element (stride 0), as sum().backward() seeds.
      Tensor g_one = make({0.75}, {1, 1}, dt, device).expand({4, 4});
      check_close(op.fused(g_one, s), op.composite(g_one, s), test::tolerance(dt));
      // 0-dim and empty.
      Tensor x0 = make({-0.5}, {}, dt, device), g0 = make({1.5}, {}, dt, device);
      Tensor got0 = op.fused(g0, op.saved(x0));
      REQUIRE(got0.dim() == 0);
      check_close(got0, op.composite(g0, op.saved(x0)), test::tolerance(dt));
      Tensor e = zeros({0, 3}, TensorOptions(dt).device(device));
      REQUIRE(op.fused(e, e).sizes() == IntArrayRef{0, 3});
    }
  }
}

DEVICE_TEST_CASE("activation backward ops at infinities and NaN: PyTorch 1.13's values",
                 "[elementwise][activation_backward][nan]") {
  const double nan = kNaN, inf = kInf;
  // The x values of torch.ops.aten.<op>_backward(torch.full_like(x, 1.5), saved) in float64 (torch 1.13).
  const std::vector<double> xs = {-inf, -1000, -3, -0.5, -0.0, 0.0, 0.5, 3, 1000, inf, nan};
  const std::vector<std::vector<double>> torch_values = {
      // relu (threshold_backward): 1.5 at x = NaN in PyTorch, 0 here (see relu_backward).
      {0, 0, 0, 0, 0, 0, 1.5, 1.5, 1.5, 1.5, 0},
      {0, 0, 0.01479905574816025, 1.179671599448891, 1.5, 1.5, 1.179671599448891, 0.01479905574816025, 0, 0, nan},
      {0, 0, 0.0677649895963682, 0.35250556830239177, 0.375, 0.375, 0.3525055683023917, 0.06776498959636801, 0, 0, nan},
      {nan, 0, -0.017918470806275878, 0.19875731301575567, 0.75, 0.75, 1.3012426869842444, 1.5179184708062758, 1.5, nan,
       nan},
      {nan, 0, -0.017376249946454474, 0.19894514469803648, 0.75, 0.75, 1.3010548553019636, 1.5173762499464543, 1.5, nan,
       nan},
      {nan, 0, -0.13215615902275443, 0.3900582190460222, 0.75, 0.75, 1.1099417809539778, 1.632156159022754, 1.5, nan,
       nan},
  };
  const int64_t n = static_cast<int64_t>(xs.size());
  for (size_t i = 0; i < activation_backwards().size(); ++i) {
    const ActivationBackward& op = activation_backwards()[i];
    INFO(op.name);
    Tensor x = make(xs, {n}, kFloat64, device), g = full({n}, 1.5, TensorOptions(kFloat64).device(device));
    check_values(op.fused(g, op.saved(x)), torch_values[i]);
    // NaN where the composite gives NaN, in float32 too.
    for (Dtype dt : {kFloat64, kFloat32}) {
      INFO(dt);
      Tensor xd = x.to(dt), gd = g.to(dt);
      check_close(op.fused(gd, op.saved(xd)), op.composite(gd, op.saved(xd)));
    }
  }
  // relu_backward passes a NaN gradient where output > 0 and zeroes it elsewhere, as where() and torch.
  Tensor y = make({-1, 0, 2}, {3}, kFloat32, device), g = full({3}, nan, TensorOptions(kFloat32).device(device));
  check_values(detail::relu_backward(g, y), {0, 0, nan});
}

DEVICE_TEST_CASE("activation backward ops check their inputs", "[elementwise][activation_backward][errors]") {
  Tensor y = make({0.5, -0.25, 0.75}, {3}, kFloat32, device);
  REQUIRE_THROWS_WITH(detail::tanh_backward(Tensor(), y),
                      Contains("tanh_backward: argument 'grad_output' is an undefined tensor"));
  REQUIRE_THROWS_WITH(detail::silu_backward(y, Tensor()),
                      Contains("silu_backward: argument 'self' is an undefined tensor"));
  REQUIRE_THROWS_AS(detail::sigmoid_backward(y, y.to(kFloat64)), DtypeError);
  REQUIRE_THROWS_WITH(detail::sigmoid_backward(y, y.to(kFloat64)),
                      Contains("sigmoid_backward: expected grad_output and output of one floating dtype, got float32 "
                               "and float64"));
  Tensor i = make({1, 2, 3}, {3}, kInt64, device);
  REQUIRE_THROWS_WITH(detail::relu_backward(i, i), Contains("relu_backward: expected grad_output and output of one "
                                                            "floating dtype, got int64 and int64"));
  REQUIRE_THROWS_AS(detail::gelu_backward(y, y.view({1, 3})), ShapeError);
  REQUIRE_THROWS_WITH(detail::gelu_backward(y, y.view({1, 3})),
                      Contains("gelu_backward: expected grad_output and self of one shape, got [3] and [1, 3]"));
  REQUIRE_THROWS_WITH(detail::gelu_backward(y, y, "erf"),
                      Contains("gelu_backward: approximate must be 'none' or 'tanh', got 'erf'"));
  Tensor leaf = make({0.5, -0.25, 0.75}, {3}, kFloat32, device).requires_grad_();
  REQUIRE_THROWS_AS(detail::tanh_backward(y, leaf), ValueError);
  REQUIRE_THROWS_WITH(detail::tanh_backward(leaf, y),
                      Contains("tanh_backward: records no graph, so its result cannot be differentiated, but an "
                               "input requires grad; call it under NoGradGuard"));
  {
    NoGradGuard no_grad;
    check_close(detail::tanh_backward(leaf, y), leaf * (1 - y * y));
  }
  if (auto other = test::other_device(device)) {
    REQUIRE_THROWS_AS(detail::silu_backward(y, y.to(*other)), DeviceError);
    REQUIRE_THROWS_WITH(detail::silu_backward(y, y.to(*other)),
                        Contains("Expected all tensors to be on the same device") && Contains("silu_backward"));
  }
}

TEST_CASE("the activation backwards as one functor (the CUDA backend's) match the per-op functors",
          "[elementwise][activation_backward]") {
  const std::vector<std::pair<BinaryOp, UnaryParams>> ops = test::activation_backward_ops();
  for (const auto& [op, params] : ops) {
    for (Dtype dt : {kFloat64, kFloat32}) {
      INFO(op_name(op) << " (" << static_cast<int>(op) << "), " << dt);
      Tensor g = make(kActG, {16}, dt), s = make(kActX, {16}, dt);
      Tensor want = full({16}, kNaN, TensorOptions(dt));
      cpu::binary(op, want, g, s, 1, params);
      std::vector<double> got;
      for (size_t i = 0; i < kActG.size(); ++i) {
        if (dt == kFloat64)
          got.push_back(fn::ActivationBackward<double>::make(op, params)(kActG[i], kActX[i]));
        else
          got.push_back(fn::ActivationBackward<float>::make(op, params)(static_cast<float>(kActG[i]),
                                                                        static_cast<float>(kActX[i])));
      }
      check_values(want, got, test::tolerance(dt));
    }
  }
}

namespace {

// Parameters for each unary op that takes any, chosen off the defaults.
UnaryParams op_set_test_params(UnaryOp op) {
  switch (op) {
    case UnaryOp::PowScalar: return PowScalarParams{3};
    case UnaryOp::Clamp: return ClampParams{Scalar(-0.5), Scalar(0.75)};
    case UnaryOp::LeakyRelu: return LeakyReluParams{0.2};
    case UnaryOp::Elu: return EluParams{0.7, 1.5, 2.0};
    case UnaryOp::Softplus: return SoftplusParams{2.0, 3.0};
    default: return NoParams{};
  }
}

template <typename M>
bool same_value(M a, M b) {
  if constexpr (std::is_floating_point_v<M>)
    return (std::isnan(a) && std::isnan(b)) || a == b;
  else
    return a == b;
}

// The op set's result at each x, against the op's own functor (visit_*).
template <typename M>
void check_unary_set(UnaryOp op, const std::vector<double>& xs) {
  const UnaryParams params = op_set_test_params(op);
  for (double xd : xs) {
    const M x = static_cast<M>(xd);
    M want{}, got{};
    if (is_numeric_unary(op)) {
      fn::visit_numeric_unary<M>(op, params, [&](auto f) { want = f(x); });
      got = fn::NumericUnaryOps<M>::make(op, params)(x);
    } else if constexpr (std::is_floating_point_v<M>) {
      fn::visit_floating_unary<M>(op, params, [&](auto f) { want = f(x); });
      got = fn::FloatingUnaryOps<M>::make(op, params)(x);
    }
    INFO("x = " << xd << ": want " << +want << ", got " << +got);
    CHECK(same_value(want, got));
  }
}

template <typename M>
void check_arithmetic_set(BinaryOp op, const std::vector<std::pair<double, double>>& ab) {
  const Scalar alpha = 2;
  for (const auto& [ad, bd] : ab) {
    const M a = static_cast<M>(ad), b = static_cast<M>(bd);
    M want{};
    fn::visit_arithmetic<M>(op, alpha, NoParams{}, [&](auto f) { want = f(a, b); });
    const M got = fn::ArithmeticOps<M>::make(op, alpha)(a, b);
    INFO("a = " << ad << ", b = " << bd << ": want " << +want << ", got " << +got);
    CHECK(same_value(want, got));
  }
}

}  // namespace

TEST_CASE("the unary and arithmetic op sets (the CUDA backend's) match the per-op functors", "[elementwise][op_set]") {
  const std::vector<double> xs = {-3, -0.75, -0.5, 0, 0.25, 0.5, 1.5, 4, 25};
  const std::vector<double> ints = {-3, -1, 0, 2, 5};
#define X(Name, ...)                                   \
  {                                                    \
    INFO(#Name);                                       \
    check_unary_set<double>(UnaryOp::Name, xs);        \
    check_unary_set<float>(UnaryOp::Name, xs);         \
    if (is_numeric_unary(UnaryOp::Name)) {             \
      check_unary_set<int64_t>(UnaryOp::Name, ints);   \
      check_unary_set<int32_t>(UnaryOp::Name, ints);   \
      check_unary_set<uint8_t>(UnaryOp::Name, {0, 3}); \
    }                                                  \
  }
  TANDEM_UNARY_OPS(X)
#undef X
  const std::vector<std::pair<double, double>> reals = {{1.5, -0.25}, {-3, 2}, {0, 0.5}, {4, 3}, {-0.5, -2}};
  const std::vector<std::pair<double, double>> whole = {{-3, 1}, {0, 2}, {5, 3}, {7, -2}};
#define X(Name, ...)                                                 \
  {                                                                  \
    INFO(#Name);                                                     \
    check_arithmetic_set<double>(BinaryOp::Name, reals);             \
    check_arithmetic_set<float>(BinaryOp::Name, reals);              \
    check_arithmetic_set<int64_t>(BinaryOp::Name, whole);            \
    check_arithmetic_set<int32_t>(BinaryOp::Name, whole);            \
    check_arithmetic_set<uint8_t>(BinaryOp::Name, {{3, 1}, {0, 2}}); \
    check_arithmetic_set<bool>(BinaryOp::Name, {{1, 1}, {0, 1}});    \
  }
  TANDEM_ARITHMETIC_OPS(X)
#undef X
}

// ---------------------------------------------------------------- the CUDA launcher's index math, on the cpu
// kernels/cuda/loops.h is plain C++: its divider, offset calculator, 32-bit
// splitting and vectorization check are proven here, where no GPU is needed.
namespace {

// (byte offset of each operand) for every element of a plan, in the order
// plan_for_each visits them, i.e. by linear index.
template <int N>
std::vector<std::array<int64_t, N>> plan_offsets(const ElementwisePlan<N>& p, const std::array<char*, N>& base) {
  std::vector<std::array<int64_t, N>> out;
  cpu::plan_for_each<N>(p, 0, p.numel, [&](char** ptrs, const int64_t* strides, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      std::array<int64_t, N> o;
      for (int k = 0; k < N; ++k) o[k] = ptrs[k] + i * strides[k] - base[k];
      out.push_back(o);
    }
  });
  return out;
}

template <int N>
std::vector<std::array<int64_t, N>> calculator_offsets(const ElementwisePlan<N>& p, const std::array<char*, N>& base) {
  cuda::OffsetCalculator<N> calc(p);
  std::vector<std::array<int64_t, N>> out;
  for (int64_t i = 0; i < p.numel; ++i) {
    cuda::Offsets<N> off = calc.get(static_cast<uint32_t>(i));
    std::array<int64_t, N> o;
    for (int k = 0; k < N; ++k) o[k] = p.data[k] + off.at[k] - base[k];
    out.push_back(o);
  }
  return out;
}

}  // namespace

TEST_CASE("IntDivider divides every 31-bit numerator exactly", "[elementwise][cuda-index]") {
  std::vector<uint32_t> divisors = {1,
                                    2,
                                    3,
                                    5,
                                    7,
                                    10,
                                    16,
                                    31,
                                    32,
                                    33,
                                    37,
                                    100,
                                    641,
                                    1000,
                                    4095,
                                    4096,
                                    4097,
                                    65535,
                                    65536,
                                    65537,
                                    1u << 20,
                                    (1u << 20) + 1,
                                    1000003,
                                    (1u << 30) - 1,
                                    1u << 30,
                                    (1u << 30) + 1,
                                    0x7fffffffu - 1,
                                    0x7fffffffu};
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);  // 31 bits
  };
  for (int i = 0; i < 200; ++i) divisors.push_back(std::max<uint32_t>(1, next() >> (next() % 31)));
  for (uint32_t d : divisors) {
    cuda::IntDivider div(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, 0x7fffffffu, 0x7ffffffeu, 0x40000000u};
    for (int i = 0; i < 200; ++i) ns.push_back(next());
    for (uint32_t n : ns) {
      if (n > 0x7fffffffu) continue;
      INFO("n = " << n << ", d = " << d);
      REQUIRE(div.div(n) == n / d);
    }
  }
}

TEST_CASE("the offset calculator maps linear indices as the CPU plan walk does", "[elementwise][cuda-index]") {
  Tensor out = empty({4, 5, 6});
  std::vector<std::pair<const char*, Tensor>> inputs = {
      {"contiguous", empty({4, 5, 6})},
      {"permuted", empty({6, 4, 5}).permute({1, 2, 0})},
      {"sliced", empty({4, 10, 13}).slice(1, 1, 10, 2).slice(2, 0, 12, 2)},
      {"broadcast", empty({5, 1}).expand({4, 5, 6})},
      {"0-dim", empty({}).expand({4, 5, 6})},
  };
  for (auto& [name, in] : inputs) {
    INFO(name);
    auto plan = make_plan<2>({&out, &in});
    std::array<char*, 2> base = {plan.data[0], plan.data[1]};
    CHECK(calculator_offsets<2>(plan, base) == plan_offsets<2>(plan, base));
  }
  // A 0-dim plan: one element, every offset 0.
  Tensor s = empty({}), t = empty({});
  auto plan = make_plan<2>({&s, &t});
  CHECK(plan.ndim == 0);
  CHECK(cuda::OffsetCalculator<2>(plan).get(0).at[1] == 0);
  // Over only the outer dims (the tiled copy's matrices).
  auto plan3 = make_plan<2>({&out, &inputs[1].second});
  cuda::OffsetCalculator<2> outer(plan3, 1);
  for (int64_t m = 0; m < 4; ++m) CHECK(outer.get(static_cast<uint32_t>(m)).at[0] == m * plan3.strides[0][0]);
}

TEST_CASE("plans too large for 32-bit indexing split into pieces that cover them once", "[elementwise][cuda-index]") {
  Tensor out = empty({30, 40});
  std::vector<std::pair<const char*, Tensor>> inputs = {
      {"contiguous", empty({30, 40})},
      {"transposed", empty({40, 30}).t()},
      {"broadcast", empty({30, 1}).expand({30, 40})},
  };
  for (auto& [name, in] : inputs) {
    INFO(name);
    auto plan = make_plan<2>({&out, &in});
    std::array<char*, 2> base = {plan.data[0], plan.data[1]};
    for (int64_t limit : {int64_t{100}, int64_t{1000}, int64_t{4795}, int64_t{1} << 20}) {
      INFO("limit " << limit);
      std::vector<std::array<int64_t, 2>> got;
      int pieces = 0;
      for_each_32bit_piece<2>(
          plan,
          [&](const ElementwisePlan<2>& piece) {
            ++pieces;
            CHECK(fits_32bit_indexing(piece, limit));
            auto part = calculator_offsets<2>(piece, base);
            got.insert(got.end(), part.begin(), part.end());
          },
          limit);
      auto want = plan_offsets<2>(plan, base);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      CHECK(got == want);
      CHECK((pieces > 1) == !fits_32bit_indexing(plan, limit));
    }
  }
}

TEST_CASE("a contiguous plan over 2^31 bytes splits into aligned pieces", "[elementwise][cuda-index]") {
  // Not a real tensor: a plan with a fake, 16-byte aligned base is enough.
  char* fake = reinterpret_cast<char*>(uintptr_t{1} << 40);
  const int64_t n = (int64_t{1} << 31) + 77;  // float elements, 8 GiB
  auto plan = strided_plan<2>({n}, {fake, fake + (int64_t{1} << 36)}, {Shape{4}, Shape{4}});
  CHECK_FALSE(fits_32bit_indexing(plan));
  int64_t covered = 0;
  char* next = fake;
  for_each_32bit_piece<2>(plan, [&](const ElementwisePlan<2>& piece) {
    CHECK(fits_32bit_indexing(piece));
    CHECK(piece.data[0] == next);
    CHECK(reinterpret_cast<uintptr_t>(piece.data[0]) % 16 == 0);
    CHECK(piece.data[1] - piece.data[0] == (int64_t{1} << 36));
    next += piece.numel * 4;
    covered += piece.numel;
  });
  CHECK(covered == n);
  // One huge stride with few elements: the dim splits down to size 1.
  auto wide = strided_plan<1>({3, 5}, {fake}, {Shape{int64_t{1} << 33, 4}});
  int64_t seen = 0;
  for_each_32bit_piece<1>(wide, [&](const ElementwisePlan<1>& piece) {
    CHECK(fits_32bit_indexing(piece));
    CHECK(cuda::OffsetCalculator<1>(piece).get(static_cast<uint32_t>(piece.numel - 1)).at[0] == 16);
    seen += piece.numel;
  });
  CHECK(seen == 15);
}

TEST_CASE("the vectorized path takes contiguous, aligned operands only", "[elementwise][cuda-index]") {
  static_assert(cuda::vector_elements<float, float, float>() == 4);
  static_assert(cuda::vector_elements<BFloat16, BFloat16>() == 8);
  static_assert(cuda::vector_elements<bool, double, double>() == 2);
  static_assert(cuda::vector_elements<uint8_t>() == 16);
  const int sizes[3] = {4, 4, 4};
  Tensor a = empty({1027}), b = empty({1027}), base = empty({1028});
  uint32_t broadcast = 99;
  auto plan = make_plan<3>({&a, &a, &b});
  CHECK(cuda::can_vectorize<3>(plan, sizes, 4, &broadcast));
  CHECK(broadcast == 0);
  Tensor scalar = empty({});
  Tensor scalar_b = scalar.expand({1027});
  plan = make_plan<3>({&a, &scalar_b, &b});
  CHECK(cuda::can_vectorize<3>(plan, sizes, 4, &broadcast));
  CHECK(broadcast == 1);
  Tensor misaligned = base.narrow(0, 1, 1027);
  plan = make_plan<3>({&a, &misaligned, &b});
  CHECK_FALSE(cuda::can_vectorize<3>(plan, sizes, 4, &broadcast));
  plan = make_plan<3>({&misaligned, &a, &b});
  CHECK_FALSE(cuda::can_vectorize<3>(plan, sizes, 4, &broadcast));
  Tensor strided = empty({2054}).slice(0, 0, 2054, 2);
  plan = make_plan<3>({&a, &strided, &b});
  CHECK_FALSE(cuda::can_vectorize<3>(plan, sizes, 4, &broadcast));
  Tensor m = empty({30, 40}), mt = empty({40, 30}).t();
  plan = make_plan<3>({&m, &m, &mt});
  CHECK_FALSE(cuda::can_vectorize<3>(plan, sizes, 4, &broadcast));
  Tensor row = empty({40}).expand({30, 40});
  plan = make_plan<3>({&m, &m, &row});
  CHECK_FALSE(cuda::can_vectorize<3>(plan, sizes, 4, &broadcast));
}

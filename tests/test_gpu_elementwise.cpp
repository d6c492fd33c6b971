// Real-GPU checks of the CUDA elementwise kernels (kernels/cuda/elementwise.cu
// and copy.cu) against the CPU backend: every unary and binary op (the
// activation backwards among them), where, masked_fill, clamp, fill and every
// dtype conversion, with contiguous, transposed, sliced, broadcast, 0-dim,
// empty, odd-sized and misaligned operands, into poisoned outputs whose whole
// buffers are compared. The front end's wiring and the 32-bit splitting of
// huge tensors come last.
// Skipped (exit 77) without a real GPU.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "helpers.h"
#include "kernels/elementwise.h"
#include "tensor/core/shape.h"

using namespace tandem;
using test::Tolerance;

namespace {

const Device kGpu("cuda:0");
constexpr Tolerance kExact{0, 0};

// Where an operand's elements sit in its buffer; the values are the same.
enum class Layout { Contiguous, Transposed, Sliced, Misaligned };

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced (stride 2)";
    case Layout::Misaligned: return "misaligned (offset 1 element)";
  }
  return "?";
}

// The values an operand draws from: multiples of 1/8 in [lo, hi] for the
// float dtypes, integers in [lo, hi] (clipped at 0 for uint8), and for bool
// random bits, or all true when lo > 0.
struct Domain {
  double lo = -3, hi = 3;
};

std::vector<double> draw(int64_t n, Dtype dt, Domain d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  const double lo = dt == kUInt8 ? std::max(0.0, d.lo) : d.lo;
  for (double& x : v) {
    if (dt == kBool) {
      x = d.lo > 0 ? 1 : static_cast<double>(rng() % 2);
    } else if (is_floating_point(dt)) {
      const auto steps = static_cast<uint32_t>((d.hi - lo) * 8);
      x = lo + static_cast<double>(rng() % (steps + 1)) / 8;
    } else {
      const auto steps = static_cast<uint32_t>(std::floor(d.hi) - std::ceil(lo));
      x = std::ceil(lo) + static_cast<double>(rng() % (steps + 1));
    }
  }
  return v;
}

// One operand on both backends: views with the same layout over buffers
// with the same bytes.
struct Operand {
  Tensor cpu, gpu;          // the views the kernels see
  Tensor cpu_buf, gpu_buf;  // the whole buffers under them
  const Tensor& on(bool gpu_side) const { return gpu_side ? gpu : cpu; }
};

// The buffer shape for a view of `shape` in layout, and the view over it.
Operand lay_out(IntArrayRef shape, Layout layout, const std::function<Tensor(IntArrayRef)>& make_buffer) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  Shape buf(shape.begin(), shape.end());
  std::function<Tensor(const Tensor&)> view = [](const Tensor& t) { return t; };
  switch (layout) {
    case Layout::Contiguous: break;
    case Layout::Transposed:
      if (nd >= 2) {
        std::swap(buf[nd - 1], buf[nd - 2]);
        view = [nd](const Tensor& t) { return t.transpose(nd - 1, nd - 2); };
      }
      break;
    case Layout::Sliced:
      if (nd >= 1) {
        buf[nd - 1] *= 2;
        view = [nd](const Tensor& t) { return t.slice(nd - 1, 0, std::nullopt, 2); };
      }
      break;
    case Layout::Misaligned: {
      const int64_t n = shape_numel(shape);
      buf = {n + 1};
      Shape s(shape.begin(), shape.end());
      view = [n, s](const Tensor& t) { return t.narrow(0, 1, n).view(s); };
      break;
    }
  }
  Operand op;
  op.cpu_buf = make_buffer(buf);
  op.gpu_buf = op.cpu_buf.to(kGpu);  // a contiguous copy: bytes only, no kernel
  op.cpu = view(op.cpu_buf);
  op.gpu = view(op.gpu_buf);
  REQUIRE(op.cpu.sizes().vec() == Shape(shape.begin(), shape.end()));
  return op;
}

Operand input(IntArrayRef shape, Dtype dt, Layout layout = Layout::Contiguous, Domain d = {}, uint32_t seed = 1) {
  return lay_out(shape, layout,
                 [&](IntArrayRef buf) { return test::make(draw(shape_numel(buf), dt, d, seed), buf, dt); });
}

// Values no kernel writes: an unwritten element fails the comparison. Bool
// has no such value, so bool outputs are poisoned once each way.
std::vector<Scalar> poisons(Dtype dt) {
  if (is_floating_point(dt)) return {std::numeric_limits<double>::quiet_NaN()};
  if (dt == kBool) return {false, true};
  if (dt == kUInt8) return {171};
  return {-77};
}

// Runs run(gpu_side, out) on both backends into poisoned outputs of shape in
// out_layout, then compares the whole output buffers: the elements of the
// view, and that nothing outside it was touched.
void compare(IntArrayRef shape, Dtype out_dt, Layout out_layout, const std::function<void(bool, const Tensor&)>& run,
             std::optional<Tolerance> tol = std::nullopt) {
  for (const Scalar& poison : poisons(out_dt)) {
    INFO("output " << layout_name(out_layout) << ", poison " << poison);
    Operand out = lay_out(shape, out_layout, [&](IntArrayRef buf) { return full(buf, poison, out_dt); });
    run(false, out.cpu);
    run(true, out.gpu);
    cuda::synchronize();
    test::check_close(out.gpu_buf.cpu(), out.cpu_buf, tol);
  }
}

// The operand shapes and layouts every op is tried on. Inputs broadcast to
// the output's shape.
struct Case {
  const char* name;
  Shape out;
  std::vector<Shape> in;  // per input; a shorter list repeats its last entry
  std::vector<Layout> in_layout;
  Layout out_layout = Layout::Contiguous;
};

const std::vector<Case>& cases() {
  using L = Layout;
  static const std::vector<Case> all = {
      {"odd-sized 1-d (vector tail)", {1027}, {{1027}}, {L::Contiguous}},
      {"contiguous 2-d", {37, 64}, {{37, 64}}, {L::Contiguous}},
      {"large (many blocks, tail)", {(1 << 20) + 3}, {{(1 << 20) + 3}}, {L::Contiguous}},
      {"transposed inputs", {37, 64}, {{37, 64}}, {L::Transposed}},
      {"sliced inputs", {37, 64}, {{37, 64}}, {L::Sliced}},
      {"mixed layouts", {37, 64}, {{37, 64}}, {L::Sliced, L::Transposed, L::Contiguous}},
      {"misaligned inputs", {1027}, {{1027}}, {L::Misaligned}},
      {"misaligned output", {1027}, {{1027}}, {L::Contiguous}, L::Misaligned},
      {"transposed output", {37, 64}, {{37, 64}}, {L::Contiguous}, L::Transposed},
      {"sliced output", {37, 64}, {{37, 64}}, {L::Transposed}, L::Sliced},
      {"broadcast row and column", {37, 64}, {{37, 1}, {1, 64}, {64}}, {L::Contiguous}},
      {"0-dim input broadcast (vector path)", {1031}, {{1031}, {}}, {L::Contiguous}},
      {"0-dim input first", {1031}, {{}, {1031}}, {L::Contiguous}},
      {"3-d permuted", {5, 6, 7}, {{5, 6, 7}}, {L::Transposed, L::Contiguous}},
      {"0-dim", {}, {{}}, {L::Contiguous}},
      {"empty", {0, 5}, {{0, 5}}, {L::Contiguous}},
  };
  return all;
}

template <typename T>
const T& nth(const std::vector<T>& v, size_t i) {
  return v[std::min(i, v.size() - 1)];
}

// Inputs of case c with the given dtypes and domains.
std::vector<Operand> inputs(const Case& c, const std::vector<Dtype>& dts, const std::vector<Domain>& domains) {
  std::vector<Operand> ins;
  for (size_t k = 0; k < dts.size(); ++k)
    ins.push_back(input(nth(c.in, k), dts[k], nth(c.in_layout, k), nth(domains, k), static_cast<uint32_t>(k + 7)));
  return ins;
}

// ---- unary

struct UnaryCase {
  const char* name;
  UnaryOp op;
  UnaryParams params;
  bool float_only;
  Domain domain;
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> all = {
      {"neg", UnaryOp::Neg, {}, false, {}},
      {"abs", UnaryOp::Abs, {}, false, {}},
      {"relu", UnaryOp::Relu, {}, false, {}},
      {"pow 2", UnaryOp::PowScalar, PowScalarParams{2}, false, {}},
      {"pow 3", UnaryOp::PowScalar, PowScalarParams{3}, false, {}},
      {"pow 0.5", UnaryOp::PowScalar, PowScalarParams{0.5}, true, {0.125, 4}},
      {"pow -1.5", UnaryOp::PowScalar, PowScalarParams{-1.5}, true, {0.125, 4}},
      {"clamp", UnaryOp::Clamp, ClampParams{-1, 2}, false, {}},
      {"clamp, max only", UnaryOp::Clamp, ClampParams{std::nullopt, 1}, false, {}},
      {"clamp, min only", UnaryOp::Clamp, ClampParams{0.5, std::nullopt}, false, {}},
      {"clamp, min > max", UnaryOp::Clamp, ClampParams{2, 1}, false, {}},
      {"exp", UnaryOp::Exp, {}, true, {}},
      {"log", UnaryOp::Log, {}, true, {0.125, 4}},
      {"log1p", UnaryOp::Log1p, {}, true, {-0.875, 4}},
      {"sqrt", UnaryOp::Sqrt, {}, true, {0, 4}},
      {"rsqrt", UnaryOp::Rsqrt, {}, true, {0.125, 4}},
      {"sin", UnaryOp::Sin, {}, true, {}},
      {"cos", UnaryOp::Cos, {}, true, {}},
      {"tanh", UnaryOp::Tanh, {}, true, {}},
      {"sigmoid", UnaryOp::Sigmoid, {}, true, {}},
      {"gelu", UnaryOp::Gelu, {}, true, {}},
      {"gelu tanh", UnaryOp::GeluTanh, {}, true, {}},
      {"silu", UnaryOp::Silu, {}, true, {}},
      {"leaky_relu", UnaryOp::LeakyRelu, LeakyReluParams{0.2}, true, {}},
      {"elu", UnaryOp::Elu, EluParams{0.7, 1.5, 2.0}, true, {}},
      {"softplus", UnaryOp::Softplus, SoftplusParams{2.0, 3.0}, true, {}},
  };
  return all;
}

const std::vector<Dtype> kNumeric = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8};
const std::vector<Dtype> kFloating = {kFloat32, kFloat64, kFloat16, kBFloat16};

}  // namespace

TEST_CASE("unary ops on the GPU match the CPU", "[gpu][elementwise]") {
  for (const UnaryCase& u : unary_cases()) {
    for (Dtype dt : u.float_only ? kFloating : kNumeric) {
      for (const Case& c : cases()) {
        INFO(u.name << ", " << dt << ", " << c.name);
        auto ins = inputs(c, {dt}, {u.domain});
        compare(c.out, dt, c.out_layout, [&](bool g, const Tensor& out) {
          if (g)
            cuda::unary(u.op, out, ins[0].gpu, u.params);
          else
            cpu::unary(u.op, out, ins[0].cpu, u.params);
        });
      }
    }
  }
}

TEST_CASE("binary ops on the GPU match the CPU", "[gpu][elementwise]") {
  struct BinaryCase {
    BinaryOp op;
    std::vector<Domain> float_domains, int_domains;  // for a and b
  };
  const Domain any{}, positive{0.125, 3}, nonzero_int{1, 5}, small_exp{0, 4};
  const std::vector<BinaryCase> ops = {
      {BinaryOp::Add, {any}, {any}},
      {BinaryOp::Sub, {any}, {any}},
      {BinaryOp::Mul, {any}, {any}},
      {BinaryOp::Div, {any, positive}, {any, nonzero_int}},
      {BinaryOp::Pow, {positive, {-2, 2}}, {any, small_exp}},
      {BinaryOp::Maximum, {any}, {any}},
      {BinaryOp::Minimum, {any}, {any}},
      {BinaryOp::Eq, {any}, {any}},
      {BinaryOp::Ne, {any}, {any}},
      {BinaryOp::Lt, {any}, {any}},
      {BinaryOp::Le, {any}, {any}},
      {BinaryOp::Gt, {any}, {any}},
      {BinaryOp::Ge, {any}, {any}},
  };
  for (const BinaryCase& b : ops) {
    for (Dtype dt : test::kAllDtypes) {
      // alpha 2 (true for bool) tells a + alpha * b from a + b.
      const Scalar alpha = dt == kBool ? Scalar(true) : Scalar(2);
      const Dtype out_dt = is_comparison(b.op) ? kBool : dt;
      for (const Case& c : cases()) {
        INFO(op_name(b.op) << ", " << dt << ", " << c.name);
        auto ins = inputs(c, {dt, dt}, is_floating_point(dt) ? b.float_domains : b.int_domains);
        compare(c.out, out_dt, c.out_layout, [&](bool g, const Tensor& out) {
          if (g)
            cuda::binary(b.op, out, ins[0].gpu, ins[1].gpu, alpha);
          else
            cpu::binary(b.op, out, ins[0].cpu, ins[1].cpu, alpha);
        });
      }
    }
  }
}

TEST_CASE("activation backward ops on the GPU match the CPU", "[gpu][elementwise][activation_backward]") {
  // (grad, saved): saved is the output for relu, tanh and sigmoid, the
  // input for gelu and silu; the kernels take any values of both.
  const std::vector<std::pair<BinaryOp, UnaryParams>> ops = test::activation_backward_ops();
  const std::vector<Domain> domains = {{-3, 3}, {-6, 6}};
  for (const auto& [op, params] : ops) {
    for (Dtype dt : kFloating) {
      for (const Case& c : cases()) {
        INFO(op_name(op) << " (" << static_cast<int>(op) << "), " << dt << ", " << c.name);
        auto ins = inputs(c, {dt, dt}, domains);
        compare(c.out, dt, c.out_layout, [&](bool g, const Tensor& out) {
          if (g)
            cuda::binary(op, out, ins[0].gpu, ins[1].gpu, 1, params);
          else
            cpu::binary(op, out, ins[0].cpu, ins[1].cpu, 1, params);
        });
      }
    }
  }
  // Through the front end and autograd: the rules' fused ops run on the GPU.
  Tensor x = test::make(draw(12, kFloat32, {-4, 4}, 11), {3, 4}, kFloat32);
  Tensor g = test::make(draw(12, kFloat32, {}, 12), {3, 4}, kFloat32);
  for (const std::string approximate : {"none", "tanh"}) {
    Tensor xc = x.clone().requires_grad_(), xg = x.to(kGpu).requires_grad_();
    Tensor gc = autograd::grad({xc.gelu(approximate).tanh().sigmoid().silu().relu()}, {xc}, {g})[0];
    Tensor gg = autograd::grad({xg.gelu(approximate).tanh().sigmoid().silu().relu()}, {xg}, {g.to(kGpu)})[0];
    REQUIRE(gg.device() == kGpu);
    test::check_close(gg.cpu(), gc);
  }
}

TEST_CASE("where and masked_fill on the GPU match the CPU", "[gpu][elementwise]") {
  for (Dtype dt : test::kAllDtypes) {
    const Scalar value = dt == kBool ? Scalar(true) : is_floating_point(dt) ? Scalar(2.5) : Scalar(2);
    for (const Case& c : cases()) {
      INFO(dt << ", " << c.name);
      auto ins = inputs(c, {kBool, dt, dt}, {{}});
      compare(c.out, dt, c.out_layout, [&](bool g, const Tensor& out) {
        if (g)
          cuda::where(out, ins[0].gpu, ins[1].gpu, ins[2].gpu);
        else
          cpu::where(out, ins[0].cpu, ins[1].cpu, ins[2].cpu);
      });
      auto mf = inputs(c, {dt, kBool}, {{}});
      compare(c.out, dt, c.out_layout, [&](bool g, const Tensor& out) {
        if (g)
          cuda::masked_fill(out, mf[0].gpu, mf[1].gpu, value);
        else
          cpu::masked_fill(out, mf[0].cpu, mf[1].cpu, value);
      });
    }
  }
}

TEST_CASE("fill on the GPU matches the CPU", "[gpu][elementwise]") {
  // 0 takes cudaMemsetAsync on contiguous outputs, -0.0 must not (its bytes
  // are not zero), 1-byte types always may.
  const std::vector<Scalar> values = {0, -0.0, 2.5, 3, true, -1};
  for (Dtype dt : test::kAllDtypes) {
    for (const Scalar& v : values) {
      if (dt != kBool && v.is_bool()) continue;
      if (dt == kUInt8 && v.to_double() < 0) continue;
      for (const Case& c : cases()) {
        INFO(dt << ", value " << v << ", " << c.name);
        compare(c.out, dt, c.out_layout, [&](bool g, const Tensor& out) {
          if (g)
            cuda::fill(out, v);
          else
            cpu::fill(out, v);
        });
      }
      // Sliced and transposed outputs.
      for (Layout l : {Layout::Sliced, Layout::Transposed, Layout::Misaligned}) {
        INFO(dt << ", value " << v);
        compare({37, 64}, dt, l, [&](bool g, const Tensor& out) {
          if (g)
            cuda::fill(out, v);
          else
            cpu::fill(out, v);
        });
      }
    }
  }
}

TEST_CASE("copies between every pair of dtypes on the GPU match the CPU", "[gpu][elementwise][copy]") {
  std::vector<Case> copy_cases = cases();
  using L = Layout;
  // Tiled transposes: square, partial tiles, batched, and narrow ones that
  // stay on the strided kernel.
  copy_cases.push_back({"transpose 64x64", {64, 64}, {{64, 64}}, {L::Transposed}});
  copy_cases.push_back({"transpose 300x200 (partial tiles)", {300, 200}, {{300, 200}}, {L::Transposed}});
  copy_cases.push_back({"transpose into 300x200", {300, 200}, {{300, 200}}, {L::Contiguous}, L::Transposed});
  copy_cases.push_back({"transpose 1000x3", {1000, 3}, {{1000, 3}}, {L::Transposed}});
  copy_cases.push_back({"batched transpose", {3, 70, 45}, {{3, 70, 45}}, {L::Transposed}});
  copy_cases.push_back({"sliced batched transpose", {3, 70, 45}, {{3, 70, 45}}, {L::Transposed}, L::Sliced});
  for (Dtype to : test::kAllDtypes) {
    for (Dtype from : test::kAllDtypes) {
      for (const Case& c : copy_cases) {
        INFO(from << " -> " << to << ", " << c.name);
        auto src = inputs(c, {from}, {{-3, 3}});
        compare(
            c.out, to, c.out_layout,
            [&](bool g, const Tensor& dst) {
              if (g)
                cuda::copy(dst, src[0].gpu);
              else
                cpu::copy(dst, src[0].cpu);
            },
            kExact);
      }
    }
  }
}

TEST_CASE("float to 16-bit float conversions round to nearest even, as the CPU", "[gpu][elementwise][copy]") {
  // Halfway cases, subnormals, overflow to inf, signed zeros and NaN.
  std::vector<double> v = {1.0 + 1.0 / 2048,
                           1.0 + 3.0 / 2048,
                           1.0 + 1.0 / 256,
                           1.0 + 3.0 / 256,
                           65504,
                           65519,
                           65520,
                           1e6,
                           -1e6,
                           3e-8,
                           6e-8,
                           1e-40,
                           -0.0,
                           0.0,
                           std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(),
                           3.4e38,
                           1e39};
  for (Dtype from : {kFloat32, kFloat64}) {
    for (Dtype to : {kFloat16, kBFloat16}) {
      INFO(from << " -> " << to);
      Tensor src = test::make(v, {static_cast<int64_t>(v.size())}, from);
      Tensor got = src.to(kGpu).to(to).cpu();
      test::check_close(got, src.to(to), kExact);
      std::vector<double> g = got.to_vector<double>(), e = src.to(to).to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i) CHECK(std::signbit(g[i]) == std::signbit(e[i]));
    }
  }
}

TEST_CASE("the front end runs elementwise ops and conversions on the GPU", "[gpu][elementwise]") {
  Tensor a = test::make(draw(12, kFloat32, {}, 3), {3, 4}, kFloat32);
  Tensor b = test::make(draw(4, kFloat32, {}, 4), {4}, kFloat32);
  Tensor ga = a.to(kGpu), gb = b.to(kGpu);
  test::check_close((ga + gb * 2).cpu(), a + b * 2);
  test::check_close((ga - 1.5).exp().cpu(), (a - 1.5).exp());
  test::check_close(relu(ga.t()).cpu(), relu(a.t()));
  test::check_close(clamp(ga, -1, 1).cpu(), clamp(a, -1, 1));
  test::check_close(where(ga > 0, ga, gb).cpu(), where(a > 0, a, b));
  test::check_close(masked_fill(ga, gb < 0, 7).cpu(), masked_fill(a, b < 0, 7));
  test::check_equal(ga.t().contiguous().cpu(), a.t().contiguous());
  test::check_equal(ga.to(kBFloat16).cpu(), a.to(kBFloat16));
  test::check_equal(ga.to(kInt32).cpu(), a.to(kInt32));
  test::check_equal(ga.clone().cpu(), a);
  CHECK(ga.t().contiguous().device() == kGpu);
  // In place, with an operand overlapping the output in another layout.
  Tensor sq = test::make(draw(16, kFloat32, {}, 5), {4, 4}, kFloat32), gsq = sq.to(kGpu);
  sq.add_(sq.t());
  gsq.add_(gsq.t());
  test::check_close(gsq.cpu(), sq);
  gsq.fill_(0.25);
  test::check_values(gsq, std::vector<double>(16, 0.25));
  gsq.clamp_(std::nullopt, 0.125);
  test::check_values(gsq, std::vector<double>(16, 0.125));
}

TEST_CASE("tensors past 2^31 elements split into 32-bit pieces on the GPU", "[gpu][elementwise][large]") {
  // A contiguous uint8 tensor of 2^31 + 77 elements (2 GiB): the vectorized
  // kernel runs per piece; check around the cuts.
  const int64_t n = (int64_t{1} << 31) + 77;
  Tensor x = full({n}, 3, TensorOptions(kUInt8).device(kGpu));
  Tensor y = x + 1;
  for (int64_t at : {int64_t{0}, (int64_t{1} << 30) - 32, (int64_t{1} << 31) - 64, n - 64}) {
    INFO("at " << at);
    test::check_values(y.narrow(0, at, 64), std::vector<double>(64, 4));
  }
  x = Tensor();
  y = Tensor();
  // A transposed copy of a 46341 x 46341 uint8 matrix (2^31 + 4634 elements):
  // the broadcast copy runs the strided kernel per piece, the transpose the
  // tiled one. x(i, j) = j % 256, so its transpose has rows of i % 256.
  const int64_t side = 46341;
  std::vector<double> row(side);
  for (int64_t j = 0; j < side; ++j) row[j] = static_cast<double>(j % 256);
  Tensor m = test::make(row, {side}, kUInt8).to(kGpu).expand({side, side}).contiguous();
  test::check_values(m.select(0, side - 1).narrow(0, side - 300, 300), std::vector<double>(row.end() - 300, row.end()));
  Tensor mt = m.t().contiguous();
  m = Tensor();
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{23170}, side - 1}) {
    INFO("row " << i);
    test::check_values(mt.select(0, i), std::vector<double>(side, static_cast<double>(i % 256)));
  }
}

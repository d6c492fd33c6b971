// Real-GPU checks of the CUDA reductions and softmax (kernels/cuda/reduce.cu,
// softmax.cu) against the CPU backend: every reduction and arg reduction over
// every dtype it takes, inner, outer, middle, several and all dims, transposed,
// permuted, sliced, misaligned and expanded inputs, sizes 0 to 2^24, splits
// across blocks, NaN and inf; softmax and log_softmax, and their fused
// backward, for rows of 1 to 40000 and inner dims. Kernel outputs are
// poisoned first. The front end's wiring comes last. Skipped (exit 77)
// without a real GPU.
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "helpers.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "tensor/core/shape.h"

using namespace tandem;
using test::Tolerance;

namespace {

const Device kGpu("cuda:0");
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr Dtype kFloats[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

// The same view of a buffer on either device.
using View = std::function<Tensor(const Tensor&)>;
Tensor as_is(const Tensor& t) { return t; }

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Amax: return "amax";
    case ReduceOp::Amin: return "amin";
    case ReduceOp::LogSumExp: return "logsumexp";
    case ReduceOp::Norm: return "norm";
    case ReduceOp::Var: return "var";
    case ReduceOp::Std: return "std";
  }
  return "?";
}

bool floating_only(ReduceOp op) {
  return op != ReduceOp::Sum && op != ReduceOp::Prod && op != ReduceOp::Amax && op != ReduceOp::Amin;
}

// Random values on the cpu: multiples of 1/grain in [lo, hi) for floats
// (coarse, so that ties occur), integers in [lo, hi) otherwise (bool:
// random bits).
Tensor random_cpu(IntArrayRef shape, Dtype dt, double lo, double hi, uint32_t seed, double grain = 16) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  if (dt == kUInt8) lo = std::max(lo, 0.0);
  const bool fl = is_floating_point(dt);
  const auto steps = static_cast<uint32_t>(fl ? (hi - lo) * grain : hi - lo);
  for (double& x : v) {
    const double k = static_cast<double>(rng() % std::max<uint32_t>(steps, 1));
    x = dt == kBool ? static_cast<double>(rng() % 2) : lo + (fl ? k / grain : k);
  }
  return test::make(v, shape, dt);
}

// The values each op is fed: products stay near 1, so that long ones
// neither overflow nor leave the comparison to rounding.
Tensor input_for(ReduceOp op, IntArrayRef shape, Dtype dt, uint32_t seed) {
  if (op == ReduceOp::Prod)
    return is_floating_point(dt) ? random_cpu(shape, dt, 0.999, 1.001, seed, 65536) : random_cpu(shape, dt, 1, 3, seed);
  if (is_floating_point(dt)) return random_cpu(shape, dt, 0.25, 1.25, seed);
  return random_cpu(shape, dt, -20, 20, seed);
}

Shape keep_shape(const Tensor& in, IntArrayRef dims) {
  Shape keep = in.sizes().vec();
  for (int64_t d : dims) keep[static_cast<size_t>(d)] = 1;
  return keep;
}

std::string describe(const Tensor& in, IntArrayRef dims) {
  std::ostringstream s;
  s << "input " << shape_str(in.sizes()) << " strides " << shape_str(in.strides()) << " offset " << in.storage_offset()
    << ", dims " << shape_str(dims) << ", dtype " << in.dtype();
  return s.str();
}

// cuda::reduce against cpu::reduce on the same view of the same values; the
// outputs start poisoned, so that an unwritten element shows.
void compare_reduce(ReduceOp op, const Tensor& base, const View& view, IntArrayRef dims,
                    const ReduceParams& params = {}, std::optional<Tolerance> tol = std::nullopt) {
  const Tensor in_cpu = view(base);
  const Tensor in_gpu = view(base.to(kGpu));
  INFO(reduce_name(op) << " (p " << params.p << ", correction " << params.correction << ") of "
                       << describe(in_cpu, dims));
  const Shape keep = keep_shape(in_cpu, dims);
  Tensor expected = full(keep, 77, base.dtype());
  cpu::reduce(op, expected, in_cpu, params);
  Tensor got = full(keep, 77, base.dtype()).to(kGpu);
  cuda::reduce(op, got, in_gpu, params);
  if (!tol && op == ReduceOp::Prod && is_floating_point(base.dtype()) && expected.numel() > 0) {
    // A product of n factors, in any order, is within (n - 1) u of the exact
    // one (u: the accumulator's unit roundoff, float32's for the 16-bit
    // types), so two orders differ by up to twice that: 33000 factors near 1
    // differ by 1.5e-5 between the GPU's tree and the CPU's lanes, past
    // float32's usual 1e-5 (the simulated GPU showed it).
    const double n = static_cast<double>(in_cpu.numel() / expected.numel());
    const double u = base.dtype() == kFloat64 ? 0x1p-53 : 0x1p-24;
    Tolerance t = test::tolerance(base.dtype());
    t.rtol += 2 * std::max(n - 1, 0.0) * u;
    tol = t;
  }
  test::check_close(got.cpu(), expected, tol);
}

// Every reduction (and every norm order, var and std corrections) of one
// input layout, over the dtypes each takes.
void compare_all_ops(IntArrayRef shape, const View& view, IntArrayRef dims, uint32_t seed) {
  for (Dtype dt : test::kAllDtypes) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Prod, ReduceOp::Amax, ReduceOp::Amin,
                        ReduceOp::LogSumExp, ReduceOp::Norm, ReduceOp::Var, ReduceOp::Std}) {
      if (floating_only(op) && !is_floating_point(dt)) continue;
      const Tensor base = input_for(op, shape, dt, seed++);
      if (op == ReduceOp::Norm) {
        for (double p : {2.0, 1.0, 0.0, 3.0, 0.5, kInf, -kInf}) {
          ReduceParams params;
          params.p = p;
          compare_reduce(op, base, view, dims, params);
        }
      } else if (op == ReduceOp::Var || op == ReduceOp::Std) {
        for (int64_t c : {0, 1, 2}) {
          ReduceParams params;
          params.correction = c;
          compare_reduce(op, base, view, dims, params);
        }
      } else {
        compare_reduce(op, base, view, dims);
      }
    }
  }
}

// cuda::arg_reduce against cpu::arg_reduce over one dim, values and indices.
void compare_arg(bool is_max, const Tensor& base, const View& view, int64_t dim, bool with_values = true) {
  const Tensor in_cpu = view(base);
  const Tensor in_gpu = view(base.to(kGpu));
  INFO((is_max ? "argmax" : "argmin") << " of " << describe(in_cpu, {dim}));
  const Shape keep = keep_shape(in_cpu, {dim});
  Tensor values_cpu = with_values ? full(keep, 77, base.dtype()) : Tensor();
  Tensor indices_cpu = full(keep, -7, kInt64);
  cpu::arg_reduce(is_max, values_cpu, indices_cpu, in_cpu);
  Tensor values_gpu = with_values ? full(keep, 77, base.dtype()).to(kGpu) : Tensor();
  Tensor indices_gpu = full(keep, -7, kInt64).to(kGpu);
  cuda::arg_reduce(is_max, values_gpu, indices_gpu, in_gpu);
  test::check_equal(indices_gpu.cpu(), indices_cpu);
  if (with_values) test::check_equal(values_gpu.cpu(), values_cpu);
}

// cuda::softmax against cpu::softmax, output poisoned.
void compare_softmax(const Tensor& x_cpu, int64_t dim, bool log) {
  INFO((log ? "log_softmax" : "softmax") << " over dim " << dim << " of " << describe(x_cpu, {dim}));
  Tensor expected = full(x_cpu.sizes(), 77, x_cpu.dtype());
  cpu::softmax(expected, x_cpu.contiguous(), dim, log);
  const Tensor x_gpu = x_cpu.to(kGpu);  // contiguous, storage offset 0
  Tensor got = full(x_cpu.sizes(), 77, x_cpu.dtype()).to(kGpu);
  cuda::softmax(got, x_gpu, dim, log);
  test::check_close(got.cpu(), expected);
}

// t (contiguous, on the cpu) on the GPU, one element past a vector
// boundary when misaligned (the kernels' scalar paths).
Tensor on_gpu(const Tensor& t, bool misaligned) {
  if (!misaligned) return t.to(kGpu);
  const Tensor buffer = zeros({t.numel() + 1}, TensorOptions(t.dtype())).to(kGpu);
  Tensor view = buffer.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t.to(kGpu));
  return view;
}

// cuda::softmax_backward against cpu::softmax_backward on the forward's output
// of x_cpu and a grad of multiples of 1/16 in [-1, 1) (or the one given);
// grad_in poisoned.
void compare_softmax_backward(const Tensor& x_cpu, int64_t dim, bool log, uint32_t seed, bool misaligned = false,
                              const Tensor& grad = Tensor()) {
  INFO((log ? "log_softmax" : "softmax") << " backward over dim " << dim << " of " << describe(x_cpu, {dim})
                                         << (misaligned ? ", misaligned" : ""));
  const Tensor out_cpu = log ? x_cpu.log_softmax(dim) : x_cpu.softmax(dim);
  const Tensor grad_cpu = grad.defined() ? grad : random_cpu(x_cpu.sizes(), x_cpu.dtype(), -1, 1, seed);
  Tensor expected = full(x_cpu.sizes(), 77, x_cpu.dtype());
  cpu::softmax_backward(expected, grad_cpu, out_cpu, dim, log);
  Tensor got = full(x_cpu.sizes(), 77, x_cpu.dtype()).to(kGpu);
  cuda::softmax_backward(got, on_gpu(grad_cpu, misaligned), on_gpu(out_cpu, misaligned), dim, log);
  test::check_close(got.cpu(), expected);
}

}  // namespace

// ---------------------------------------------------------------- reductions
TEST_CASE("GPU reductions of 1-D inputs of every size match the CPU", "[gpu][reduce]") {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{33}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
    compare_all_ops({n}, as_is, {0}, 1);
  }
}

TEST_CASE("GPU reductions over inner, outer, middle, several and all dims match the CPU", "[gpu][reduce]") {
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{33, 1000}, {1000, 33}}) {
    for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{0}, {1}, {0, 1}})
      compare_all_ops(shape, as_is, dims, 2);
  }
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{31, 33, 7}, {7, 33, 64}}) {
    for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}})
      compare_all_ops(shape, as_is, dims, 3);
  }
  compare_all_ops({3, 0, 5}, as_is, {1}, 4);  // empty reduction: the identity
  compare_all_ops({3, 0, 5}, as_is, {0}, 4);  // no outputs
  compare_all_ops({}, as_is, {}, 4);          // 0-dim
}

TEST_CASE("GPU reductions of non-contiguous and expanded inputs match the CPU", "[gpu][reduce]") {
  const View transposed = [](const Tensor& t) { return t.t(); };
  const View permuted = [](const Tensor& t) { return t.permute({2, 0, 1}); };
  const View strided = [](const Tensor& t) { return t.slice(1, 1, std::nullopt, 2); };
  const View misaligned = [](const Tensor& t) { return t.narrow(1, 1, t.size(1) - 1); };
  const View expanded_rows = [](const Tensor& t) { return t.narrow(0, 0, 1).expand({33, t.size(1)}); };
  const View expanded_cols = [](const Tensor& t) { return t.narrow(1, 0, 1).expand({t.size(0), 1000}); };
  for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{0}, {1}, {0, 1}}) {
    compare_all_ops({1000, 33}, transposed, dims, 5);
    compare_all_ops({33, 2000}, strided, dims, 6);
    compare_all_ops({33, 1001}, misaligned, dims, 7);
    compare_all_ops({1, 1000}, expanded_rows, dims, 8);
    compare_all_ops({33, 1}, expanded_cols, dims, 9);
  }
  for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {0, 1, 2}})
    compare_all_ops({33, 7, 64}, permuted, dims, 10);
}

TEST_CASE("GPU reductions split across blocks match the CPU", "[gpu][reduce]") {
  // Few long rows, few long columns, many short ones, and a misaligned
  // run, each for the ops whose partials merge differently.
  const View misaligned = [](const Tensor& t) { return t.narrow(1, 3, t.size(1) - 3); };
  for (Dtype dt : {kFloat32, kBFloat16, kFloat64, kInt32}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Amax, ReduceOp::Var, ReduceOp::LogSumExp}) {
      if (floating_only(op) && !is_floating_point(dt)) continue;
      compare_reduce(op, input_for(op, {4, 1 << 20}, dt, 11), as_is, {1});
      compare_reduce(op, input_for(op, {1 << 20, 4}, dt, 12), as_is, {0});
      compare_reduce(op, input_for(op, {1 << 20, 3}, dt, 13), as_is, {0});
      compare_reduce(op, input_for(op, {1024, 1027}, dt, 14), as_is, {0});
      compare_reduce(op, input_for(op, {1024, 1027}, dt, 14), as_is, {1});
      compare_reduce(op, input_for(op, {3, (1 << 20) + 5}, dt, 15), misaligned, {1});
    }
    compare_arg(true, input_for(ReduceOp::Amax, {4, 1 << 20}, dt, 16), as_is, 1);
    compare_arg(false, input_for(ReduceOp::Amax, {1 << 20, 4}, dt, 17), as_is, 0);
  }
}

TEST_CASE("GPU full reductions of 2^24 elements match the CPU", "[gpu][reduce][large]") {
  for (Dtype dt : {kFloat32, kBFloat16}) {
    const Tensor x = random_cpu({int64_t{1} << 24}, dt, 0.25, 1.25, 18);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Amax, ReduceOp::Norm, ReduceOp::Var})
      compare_reduce(op, x, as_is, {0});
    compare_arg(true, x, as_is, 0);
  }
}

TEST_CASE("GPU arg reductions match the CPU: first occurrence, NaN wins", "[gpu][reduce][arg]") {
  for (Dtype dt : test::kAllDtypes) {
    for (bool is_max : {true, false}) {
      for (int64_t n : {1, 31, 33, 1000, (1 << 20) + 3}) {
        // Few distinct values: many ties.
        const Tensor x = random_cpu({n}, dt, -2, 2, 20);
        compare_arg(is_max, x, as_is, 0);
        compare_arg(is_max, x, as_is, 0, false);
      }
      const Tensor m = random_cpu({33, 1000}, dt, -2, 2, 21);
      compare_arg(is_max, m, as_is, 0);
      compare_arg(is_max, m, as_is, 1);
      compare_arg(
          is_max, m, [](const Tensor& t) { return t.t(); }, 0);
      compare_arg(
          is_max, m, [](const Tensor& t) { return t.t(); }, 1);
      compare_arg(
          is_max, m, [](const Tensor& t) { return t.narrow(1, 1, 999); }, 1);
      const Tensor c = random_cpu({31, 33, 7}, dt, -2, 2, 22);
      for (int64_t d : {0, 1, 2}) compare_arg(is_max, c, as_is, d);
      compare_arg(
          is_max, random_cpu({1, 33}, dt, -2, 2, 23),
          [](const Tensor& t) {
            return t.expand({40, 33});
          },
          0);
    }
  }
}

TEST_CASE("GPU reductions handle NaN and inf as the CPU", "[gpu][reduce][nan]") {
  // Rows: NaN first, NaN last, NaN in the middle, +inf, -inf, both infs,
  // all -inf, all +inf, and plain numbers.
  std::vector<double> v;
  const std::vector<std::vector<double>> rows = {
      {kNaN, 1, 2, 3},  {1, 2, 3, kNaN},     {1, kNaN, kNaN, 0},           {1, kInf, 2, 3},
      {1, -kInf, 2, 3}, {kInf, -kInf, 0, 1}, {-kInf, -kInf, -kInf, -kInf}, {kInf, kInf, kInf, kInf},
      {4, 3, 4, 1}};
  for (const auto& r : rows) v.insert(v.end(), r.begin(), r.end());
  // Long rows too: each short row repeated 257 times, so that the folds
  // run vectors and several lanes.
  std::vector<double> longv;
  for (const auto& r : rows)
    for (int k = 0; k < 257; ++k) longv.insert(longv.end(), r.begin(), r.end());
  for (Dtype dt : kFloats) {
    const Tensor x = test::make(v, {9, 4}, dt);
    const Tensor xl = test::make(longv, {9, 4 * 257}, dt);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Prod, ReduceOp::Amax, ReduceOp::Amin,
                        ReduceOp::LogSumExp, ReduceOp::Norm, ReduceOp::Var}) {
      for (const Tensor& t : {x, xl}) {
        compare_reduce(op, t, as_is, {1});
        compare_reduce(op, t, [](const Tensor& a) { return a.t(); }, {0});
      }
    }
    for (double p : {kInf, -kInf, 0.0, 1.0, 3.0}) {
      ReduceParams params;
      params.p = p;
      compare_reduce(ReduceOp::Norm, x, as_is, {1}, params);
      compare_reduce(ReduceOp::Norm, xl, as_is, {1}, params);
    }
    for (bool is_max : {true, false}) {
      compare_arg(is_max, x, as_is, 1);
      compare_arg(is_max, xl, as_is, 1);
      compare_arg(
          is_max, xl, [](const Tensor& a) { return a.t(); }, 0);
    }
  }
}

// ---------------------------------------------------------------- softmax
TEST_CASE("GPU softmax and log_softmax over rows match the CPU", "[gpu][softmax]") {
  for (Dtype dt : kFloats) {
    for (int64_t n : {1, 7, 32, 33, 1024, 5000, 16384, 32768, 40000}) {
      const int64_t rows = n >= 16384 ? 5 : 37;
      const Tensor x = random_cpu({rows, n}, dt, -8, 8, 30);
      for (bool log : {false, true}) compare_softmax(x, 1, log);
    }
    // A row start off the vector boundary: the scalar paths.
    const Tensor flat = random_cpu({37 * 1024 + 1}, dt, -8, 8, 31).to(kGpu);
    for (bool log : {false, true}) {
      const Tensor x = flat.narrow(0, 1, 37 * 1024).reshape({37, 1024});
      INFO("misaligned rows, dtype " << dt);
      Tensor got = full({37, 1024}, 77, dt).to(kGpu);
      cuda::softmax(got, x, 1, log);
      Tensor expected = full({37, 1024}, 77, dt);
      cpu::softmax(expected, x.cpu(), 1, log);
      test::check_close(got.cpu(), expected);
    }
  }
}

TEST_CASE("GPU softmax over outer and middle dims matches the CPU", "[gpu][softmax]") {
  for (Dtype dt : kFloats) {
    const Tensor x = random_cpu({7, 100, 33}, dt, -8, 8, 32);
    for (int64_t dim : {0, 1, 2})
      for (bool log : {false, true}) compare_softmax(x, dim, log);
    const Tensor y = random_cpu({3000, 2}, dt, -8, 8, 33);
    for (bool log : {false, true}) compare_softmax(y, 0, log);
    for (bool log : {false, true}) compare_softmax(random_cpu({}, dt, -8, 8, 34), 0, log);
  }
}

TEST_CASE("GPU softmax handles NaN and inf as the CPU", "[gpu][softmax][nan]") {
  const std::vector<std::vector<double>> rows = {{1, kNaN, 2, 3},      {-kInf, -kInf, -kInf, -kInf}, {kInf, 1, 2, 3},
                                                 {-kInf, 0, 1, -kInf}, {kInf, kInf, 0, 0},           {88, -88, 0, 1},
                                                 {1e4, -1e4, 0, 1}};
  for (Dtype dt : kFloats) {
    for (int64_t repeat : {1, 256, 10000}) {  // registers (scalar, vectors) and the online pass
      std::vector<double> v;
      for (const auto& r : rows)
        for (int64_t k = 0; k < repeat; ++k) v.insert(v.end(), r.begin(), r.end());
      const Tensor x = test::make(v, {7, 4 * repeat}, dt);
      for (bool log : {false, true}) {
        compare_softmax(x, 1, log);
        if (repeat == 1) compare_softmax(x.t().contiguous(), 0, log);
      }
    }
  }
}

// ---------------------------------------------------------------- softmax backward
TEST_CASE("GPU softmax and log_softmax backward over rows match the CPU", "[gpu][softmax][backward]") {
  // Register rows up to 16384 floats and 8192 doubles (a lane holds grad and
  // out), the online pass beyond.
  for (Dtype dt : kFloats) {
    uint32_t seed = 50;
    for (int64_t n : {1, 7, 32, 33, 1024, 5000, 8192, 8193, 16384, 16385, 32768, 40000}) {
      const int64_t rows = n >= 8192 ? 5 : 37;
      const Tensor x = random_cpu({rows, n}, dt, -8, 8, seed++);
      for (bool log : {false, true}) {
        compare_softmax_backward(x, 1, log, seed++);
        if (n == 1024 || n == 40000) compare_softmax_backward(x, 1, log, seed++, /*misaligned=*/true);
      }
    }
  }
}

TEST_CASE("GPU softmax backward over outer and middle dims matches the CPU", "[gpu][softmax][backward]") {
  for (Dtype dt : kFloats) {
    uint32_t seed = 70;
    const Tensor x = random_cpu({7, 100, 33}, dt, -8, 8, seed++);
    for (int64_t dim : {0, 1, 2})
      for (bool log : {false, true}) compare_softmax_backward(x, dim, log, seed++);
    const Tensor y = random_cpu({3000, 2}, dt, -8, 8, seed++);
    for (bool log : {false, true}) compare_softmax_backward(y, 0, log, seed++);
    for (bool log : {false, true}) compare_softmax_backward(random_cpu({}, dt, -8, 8, 80), 0, log, 81);
    for (bool log : {false, true}) compare_softmax_backward(random_cpu({0, 5}, dt, -8, 8, 82), 1, log, 83);
  }
}

TEST_CASE("GPU softmax backward handles NaN and inf as the CPU", "[gpu][softmax][backward][nan]") {
  // Outputs of NaN, -inf (log_softmax of -inf) and 0 (softmax of -inf), and
  // grads holding inf and NaN.
  const std::vector<std::vector<double>> x_rows = {
      {1, kNaN, 2, 3}, {-kInf, 0, 1, -kInf}, {-kInf, 0, 1, 2}, {88, -88, 0, 1}, {0, 1, 2, 3}};
  const std::vector<std::vector<double>> g_rows = {
      {1, 2, 3, 4}, {1, -1, 0.5, 2}, {kInf, 1, 1, 1}, {1, kNaN, 0, 1}, {-kInf, 1, 2, kInf}};
  for (Dtype dt : kFloats) {
    for (int64_t repeat : {1, 256, 10000}) {  // registers (scalar, vectors) and the online pass
      std::vector<double> xv, gv;
      for (size_t r = 0; r < x_rows.size(); ++r)
        for (int64_t k = 0; k < repeat; ++k) {
          xv.insert(xv.end(), x_rows[r].begin(), x_rows[r].end());
          gv.insert(gv.end(), g_rows[r].begin(), g_rows[r].end());
        }
      const int64_t rows = static_cast<int64_t>(x_rows.size());
      const Tensor x = test::make(xv, {rows, 4 * repeat}, dt), g = test::make(gv, {rows, 4 * repeat}, dt);
      for (bool log : {false, true}) {
        compare_softmax_backward(x, 1, log, 0, false, g);
        if (repeat == 1) compare_softmax_backward(x.t().contiguous(), 0, log, 0, false, g.t().contiguous());
      }
    }
  }
}

TEST_CASE("the softmax backward front end and autograd run the CUDA kernel", "[gpu][softmax][backward][frontend]") {
  const Tensor x = random_cpu({6, 5, 4}, kFloat32, -2, 2, 90);
  const Tensor g = random_cpu({4, 5, 6}, kFloat32, -1, 1, 91).permute({2, 1, 0});  // non-contiguous
  for (bool log : {false, true}) {
    for (int64_t dim : {0, 1, 2}) {
      INFO((log ? "log_softmax" : "softmax") << " over dim " << dim);
      const Tensor y = log ? x.log_softmax(dim) : x.softmax(dim);
      const Tensor got = detail::softmax_backward_data(g.to(kGpu), y.to(kGpu), dim, log);
      CHECK(got.device() == kGpu);
      test::check_close(got.cpu(), detail::softmax_backward_data(g, y, dim, log));
      // backward() without create_graph takes the same kernel.
      const Tensor xg = x.to(kGpu).requires_grad_();
      const Tensor w = random_cpu({6, 5, 4}, kFloat32, -1, 1, 92);
      ((log ? xg.log_softmax(dim) : xg.softmax(dim)) * w.to(kGpu)).sum().backward();
      REQUIRE(xg.grad().device() == kGpu);
      test::check_close(xg.grad().cpu(), detail::softmax_backward_data(w, y, dim, log));
    }
  }
}

// ---------------------------------------------------------------- the front end on a GPU
TEST_CASE("the reduction front end runs the CUDA kernels", "[gpu][reduce][frontend]") {
  const Tensor c = random_cpu({6, 5, 4}, kFloat32, -2, 2, 40);
  const Tensor g = c.to(kGpu);
  test::check_close(g.sum().cpu(), c.sum());
  test::check_close(g.sum({1}).cpu(), c.sum({1}));
  test::check_close(g.mean({0, 2}, true).cpu(), c.mean({0, 2}, true));
  test::check_close(g.prod(2).cpu(), c.prod(2));
  test::check_close(g.amax({1}).cpu(), c.amax({1}));
  test::check_close(g.amin({-1}, true).cpu(), c.amin({-1}, true));
  test::check_close(g.var({1}, 0).cpu(), c.var({1}, 0));
  test::check_close(g.std({0, 1}).cpu(), c.std({0, 1}));
  test::check_close(g.norm(3, {2}).cpu(), c.norm(3, {2}));
  test::check_close(g.logsumexp({0}).cpu(), c.logsumexp({0}));
  test::check_close(g.softmax(1).cpu(), c.softmax(1));
  test::check_close(g.log_softmax(-1).cpu(), c.log_softmax(-1));
  test::check_close(g.max().cpu(), c.max());
  auto [gv, gi] = g.max(1, true);
  auto [cv, ci] = c.max(1, true);
  test::check_equal(gv.cpu(), cv);
  test::check_equal(gi.cpu(), ci);
  test::check_equal(g.argmin(2).cpu(), c.argmin(2));
  test::check_equal(g.argmax().cpu(), c.argmax());
  CHECK(g.sum().device() == kGpu);
  CHECK(g.sum({1}).sizes().vec() == Shape{6, 4});
  const Tensor i = random_cpu({5, 7}, kInt32, -9, 9, 41);
  test::check_equal(i.to(kGpu).sum({1}).cpu(), i.sum({1}));
  test::check_equal(i.to(kGpu).argmax(0).cpu(), i.argmax(0));
}

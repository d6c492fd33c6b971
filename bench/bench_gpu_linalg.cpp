// bench_gpu_linalg: tandem::matmul on the GPU beside cuBLAS called directly on the same buffers (same types,
// compute type, math mode and transpose flags) in the same run, per dtype and shape, in TFLOP/s.
// Usage: bench_gpu_linalg [--quick] [--filter SUBSTR]. Prints "no GPU" and exits 0 where there is none.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/gpu_bench.h"
#include "tandem/tandem.h"

using namespace tandem;

namespace {

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, cublasGetStatusString(s));
    std::exit(1);
  }
}

// Tandem launches on the current stream, the default one (null) here, so the
// events and the direct calls use it too.
constexpr cudaStream_t kStream = nullptr;
constexpr double kSampleSeconds = 0.02;  // a sample batches calls until it lasts about this long
constexpr int kSamples = 7;              // per side, alternating

// Seconds of GPU time per call of op and of peer, medians over samples; the
// two sides are sampled alternately so that clocks and temperature drift
// touch both alike.
std::pair<double, double> time_pair(gpu_bench::EventTimer& timer, const std::function<void()>& op,
                                    const std::function<void()>& peer) {
  auto seconds = [&](const std::function<void()>& f, int calls) { return timer.batch_ms(f, calls) * 1e-3 / calls; };
  for (int i = 0; i < 2; ++i) op(), peer();  // warm-up: handles, workspaces, allocator, clocks
  double one = std::max(seconds(op, 1), seconds(peer, 1));
  int calls = static_cast<int>(std::clamp(kSampleSeconds / std::max(one, 1e-7), 1.0, 2000.0));
  std::vector<double> a, b;
  for (int s = 0; s < kSamples; ++s) {
    a.push_back(seconds(op, calls));
    b.push_back(seconds(peer, calls));
  }
  return {gpu_bench::median(a), gpu_bench::median(b)};
}

// How each precision reaches cuBLAS.
struct Precision {
  const char* name;
  Dtype dtype;
  bool tf32;
  cudaDataType_t data;
  cublasComputeType_t compute;
  double tol;  // relative to max |C|, between Tandem's result and cuBLAS's
};
const Precision kPrecisions[] = {
    {"float32", kFloat32, false, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1e-5},
    {"tf32", kFloat32, true, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 5e-3},
    {"float16", kFloat16, false, CUDA_R_16F, CUBLAS_COMPUTE_32F, 1e-2},
    {"bfloat16", kBFloat16, false, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2e-2},
    {"float64", kFloat64, false, CUDA_R_64F, CUBLAS_COMPUTE_64F, 1e-12},
};

// One problem: C (batch, M, N) = A (batch, M, K) @ B (batch, K, N), with b
// given as its transpose (N, K) when b_transposed (x @ W.t(), nn.Linear).
struct Case {
  std::string name;
  int64_t batch, m, k, n;
  bool b_transposed;
};

std::vector<Case> cases_for(const Precision& p, bool quick) {
  std::vector<int64_t> sizes =
      p.dtype == kFloat64 ? std::vector<int64_t>{1024, 2048, 4096} : std::vector<int64_t>{1024, 4096, 8192};
  if (quick) sizes.pop_back();
  std::vector<Case> cases;
  for (int64_t s : sizes) cases.push_back({std::to_string(s) + "^3", 1, s, s, s, false});
  cases.push_back({"64x512^3 batched", 64, 512, 512, 512, false});
  int64_t t = p.dtype == kFloat64 ? 2048 : 4096;
  cases.push_back({"x@W.t() " + std::to_string(t) + "^3", 1, t, t, t, true});
  return cases;
}

// Uniform in [-1, 1) on the cpu, float32, cached per shape: the 16-bit and
// float64 inputs are conversions of the same numbers.
Tensor host_input(const Shape& shape, uint64_t seed) {
  static std::map<std::pair<Shape, uint64_t>, Tensor> cache;
  Tensor& t = cache[{shape, seed}];
  if (!t.defined()) {
    manual_seed(seed);
    t = rand(shape) * 2.0 - 1.0;
  }
  return t;
}

// The same product through cuBLAS directly: C^T = B^T A^T in its
// column-major terms (a row-major matrix is a column-major transpose).
void direct_gemm(cublasHandle_t h, const Precision& p, const Case& c, const void* a, const void* b, void* out) {
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const void* alpha = p.dtype == kFloat64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = p.dtype == kFloat64 ? static_cast<const void*>(&zero_d) : &zero_f;
  int m = static_cast<int>(c.n), n = static_cast<int>(c.m), k = static_cast<int>(c.k);
  cublasOperation_t tb = c.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  int ldb = static_cast<int>(c.b_transposed ? c.k : c.n);
  if (c.batch == 1) {
    check_cublas(cublasGemmEx(h, tb, CUBLAS_OP_N, m, n, k, alpha, b, p.data, ldb, a, p.data, k, beta, out, p.data, m,
                              p.compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  } else {
    check_cublas(cublasGemmStridedBatchedEx(h, tb, CUBLAS_OP_N, m, n, k, alpha, b, p.data, ldb, c.k * c.n, a, p.data, k,
                                            c.m * c.k, beta, out, p.data, m, c.m * c.n, static_cast<int>(c.batch),
                                            p.compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
  }
}

// max |x - y| / max |y| over two results of one shape.
double relative_difference(const Tensor& x, const Tensor& y) {
  std::vector<float> a = x.cpu().to_vector<float>(), b = y.cpu().to_vector<float>();
  double diff = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::abs(static_cast<double>(b[i])));
  }
  return diff / std::max(mag, 1e-30);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Program program{.name = "bench_gpu_linalg",
                               .about = "tandem::matmul on cuda:0 beside cuBLAS called directly on the same buffers",
                               .quick = "Without the 8192^3 (float64: 4096^3) cases"};
  bench::CommandLine line;
  if (const std::optional<int> code = bench::read_command_line(program, argc, argv, line)) return *code;
  const bool quick = line.quick;
  const std::string filter = line.filter;
  if (gpu_bench::why_no_gpu()) {
    std::printf("no GPU\n");
    return 0;
  }
  const Device gpu("cuda:0");
  cuda::DeviceProperties props = cuda::get_device_properties(0);
  int runtime = 0;
  gpu_bench::check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  cublasHandle_t handle;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  check_cublas(cublasSetStream(handle, kStream), "cublasSetStream");
  // The same numerics as Tandem's handles: 16-bit split-K sums stay float32.
  check_cublas(cublasSetMathMode(handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), "cublasSetMathMode");
  int cublas_version = 0;
  check_cublas(cublasGetVersion(handle, &cublas_version), "cublasGetVersion");
  std::printf("# %s, %d SMs, CUDA runtime %d, cuBLAS %d, Tandem %s\n", props.name.c_str(), props.multi_processor_count,
              runtime, cublas_version, version());
  std::printf("# TFLOP/s = 2*batch*M*N*K / median GPU time per call (CUDA events); ratio = tandem / cublas\n");
  std::printf("%-9s %-20s %12s %12s %7s\n", "dtype", "case", "tandem", "cublas", "ratio");

  gpu_bench::EventTimer timer(kStream);
  std::vector<double> ratios;
  double worst = 1e30;
  std::string worst_name;
  for (const Precision& p : kPrecisions) {
    for (const Case& c : cases_for(p, quick)) {
      std::string name = std::string(p.name) + " " + c.name;
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      Shape a_shape = c.batch == 1 ? Shape{c.m, c.k} : Shape{c.batch, c.m, c.k};
      Shape b_shape = c.b_transposed ? Shape{c.n, c.k} : c.batch == 1 ? Shape{c.k, c.n} : Shape{c.batch, c.k, c.n};
      Shape c_shape = c.batch == 1 ? Shape{c.m, c.n} : Shape{c.batch, c.m, c.n};
      Tensor a = host_input(a_shape, 1).to(p.dtype).to(gpu);
      Tensor b = host_input(b_shape, 2).to(p.dtype).to(gpu);
      Tensor b_op = c.b_transposed ? b.t() : b;
      Tensor direct = empty(c_shape, TensorOptions(p.dtype).device(gpu));

      cuda::set_matmul_allow_tf32(p.tf32);
      auto op = [&] { Tensor out = matmul(a, b_op); };
      auto peer = [&] { direct_gemm(handle, p, c, a.data_ptr(), b.data_ptr(), direct.data_ptr()); };
      auto [t_op, t_peer] = time_pair(timer, op, peer);

      double diff = relative_difference(matmul(a, b_op), direct);
      cuda::set_matmul_allow_tf32(false);
      double flops = 2.0 * static_cast<double>(c.batch * c.m * c.n * c.k);
      double ratio = t_peer / t_op;
      std::printf("%-9s %-20s %12.1f %12.1f %7.3f\n", p.name, c.name.c_str(), flops / t_op * 1e-12,
                  flops / t_peer * 1e-12, ratio);
      if (diff > p.tol) std::printf("# WARNING: %s differs from cuBLAS by %.3g of max |C|\n", name.c_str(), diff);
      std::fflush(stdout);
      ratios.push_back(ratio);
      if (ratio < worst) worst = ratio, worst_name = name;
    }
  }
  if (ratios.empty()) {
    std::printf("no case matches --filter %s\n", filter.c_str());
    return 0;
  }
  double log_sum = 0;
  for (double r : ratios) log_sum += std::log(r);
  std::printf("headline: ratio %.3f (geometric mean of %zu cases; lowest %.3f, %s; goal >= 0.97)\n",
              std::exp(log_sum / static_cast<double>(ratios.size())), ratios.size(), worst, worst_name.c_str());
  cublasDestroy(handle);
  return 0;
}

// CUDA matrix products: float32/float64/float16/bfloat16 through cuBLAS, with
// operands read where they lie (a transposed one through cuBLAS's op flag)
// and batches as strided batches; a tiled shared-memory GEMM for the integer
// dtypes, which cuBLAS lacks. The plan (layouts, packing, batch split) is in
// gemm_plan.h; this file holds the handles, the kernels and the launches.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/gemm_plan.h"
#include "kernels/cuda/handle_pool.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/linalg.h"
#include "tensor/core/errors.h"

namespace tandem::cuda {

namespace {

// ---------------------------------------------------------------- cuBLAS handles

// What cuBLAS wants as a user workspace: 32 MiB on Hopper and newer, 4 MiB
// before (cuBLAS's documented recommendation, which is also what its own
// default pool holds).
size_t workspace_bytes(int device) {
  int major = 0;
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

// A cuBLAS handle and a workspace per stream it ran on: a handle's default
// workspace would be shared by the streams of its thread, which may run at
// the same time. Each workspace is allocated on, and only used on, its stream.
struct Handle {
  cublasHandle_t handle = nullptr;
  std::unordered_map<cudaStream_t, std::shared_ptr<Storage>> workspaces;
};

Handle* make_handle() {
  auto h = std::make_unique<Handle>();
  TANDEM_CUBLAS_CHECK(cublasCreate(&h->handle));
  // Split-K partial sums stay in float32 for float16/bfloat16 outputs, as the
  // CPU backend accumulates them (cuBLAS may otherwise reduce in the output type).
  TANDEM_CUBLAS_CHECK(cublasSetMathMode(h->handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  return h.release();
}

// This thread's handle for device (current under the caller's DeviceGuard),
// bound to stream and to that stream's workspace.
cublasHandle_t handle_for(int device, cudaStream_t stream) {
  Handle& h = *thread_handle<Handle*>(device, make_handle);
  // cublasSetStream also resets the workspace to the default one, so the
  // workspace is set after it, every time.
  TANDEM_CUBLAS_CHECK(cublasSetStream(h.handle, stream));
  std::shared_ptr<Storage>& ws = h.workspaces[stream];
  if (!ws) ws = detail::allocate_device(device, workspace_bytes(device));
  TANDEM_CUBLAS_CHECK(cublasSetWorkspace(h.handle, ws->data(), ws->nbytes()));
  return h.handle;
}

// ---------------------------------------------------------------- packing

// dst (count, rows, cols), contiguous = src with strides (batch, rs, cs).
// Elements are moved as unsigned integers of their size.
template <typename U>
__global__ void pack_kernel(const U* __restrict__ src, U* __restrict__ dst, int64_t total, int64_t rows, int64_t cols,
                            int64_t batch, int64_t rs, int64_t cs) {
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    int64_t j = i % cols, r = (i / cols) % rows, p = i / (cols * rows);
    dst[i] = src[p * batch + r * rs + j * cs];
  }
}

void launch_pack(const void* src, void* dst, size_t element_size, const PackedShape& s, int64_t batch, int64_t rs,
                 int64_t cs, int device, cudaStream_t stream) {
  constexpr int kThreads = 256;
  int64_t total = s.numel();
  int blocks = static_cast<int>(std::min<int64_t>(ceil_div(total, kThreads), 16 * multiprocessor_count(device)));
  switch (element_size) {
    case 2:
      TANDEM_LAUNCH(blocks, kThreads, 0, stream, pack_kernel<uint16_t>)
      (static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), total, s.rows, s.cols, batch, rs, cs);
      break;
    case 4:
      TANDEM_LAUNCH(blocks, kThreads, 0, stream, pack_kernel<uint32_t>)
      (static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), total, s.rows, s.cols, batch, rs, cs);
      break;
    case 8:
      TANDEM_LAUNCH(blocks, kThreads, 0, stream, pack_kernel<uint64_t>)
      (static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), total, s.rows, s.cols, batch, rs, cs);
      break;
    default: TANDEM_INTERNAL_ASSERT(false, "pack of ", element_size, "-byte elements");
  }
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------- cuBLAS products

struct CublasTypes {
  cudaDataType_t data;  // of A and B
  cublasComputeType_t compute;
  cudaDataType_t c;  // data's, or CUDA_R_32F for float16/bfloat16 products kept in float32
};

CublasTypes cublas_types(Dtype dtype, Dtype out_dtype, bool allow_tf32) {
  const cudaDataType_t c = out_dtype == kFloat32 ? CUDA_R_32F : CUDA_R_16F;  // only read below for 16-bit inputs
  switch (dtype) {
    case kFloat32: return {CUDA_R_32F, allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case kFloat64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    // Tensor cores, float32 sums, one rounding to the output type.
    case kFloat16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, c};
    case kBFloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, c == CUDA_R_32F ? CUDA_R_32F : CUDA_R_16BF};
    case kInt64:
    case kInt32:
    case kUInt8:
    case kBool: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "no cuBLAS type for ", dtype);
}

void cublas_gemm(cublasHandle_t h, const CublasGemmArgs& g, CublasTypes t, const void* alpha, const void* beta,
                 const void* first, const void* second, void* c) {
  cublasOperation_t ta = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (fits_int32(g)) {
    int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
    int lda = static_cast<int>(g.ld_first), ldb = static_cast<int>(g.ld_second), ldc = static_cast<int>(g.ldc);
    if (g.count == 1) {
      TANDEM_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, alpha, first, t.data, lda, second, t.data, ldb, beta, c, t.c,
                                       ldc, t.compute, CUBLAS_GEMM_DEFAULT));
    } else {
      TANDEM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          h, ta, tb, m, n, k, alpha, first, t.data, lda, g.stride_first, second, t.data, ldb, g.stride_second, beta, c,
          t.c, ldc, g.stride_c, static_cast<int>(g.count), t.compute, CUBLAS_GEMM_DEFAULT));
    }
  } else if (g.count == 1) {
    TANDEM_CUBLAS_CHECK(cublasGemmEx_64(h, ta, tb, g.m, g.n, g.k, alpha, first, t.data, g.ld_first, second, t.data,
                                        g.ld_second, beta, c, t.c, g.ldc, t.compute, CUBLAS_GEMM_DEFAULT));
  } else {
    TANDEM_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
        h, ta, tb, g.m, g.n, g.k, alpha, first, t.data, g.ld_first, g.stride_first, second, t.data, g.ld_second,
        g.stride_second, beta, c, t.c, g.ldc, g.stride_c, g.count, t.compute, CUBLAS_GEMM_DEFAULT));
  }
}

void matmul_cublas(const Tensor& out, const Tensor& a, const Tensor& b, const GemmPlan& plan, bool allow_tf32,
                   bool accumulate) {
  int device = out.device().index();
  cudaStream_t stream = stream_of(out);
  cublasHandle_t handle = handle_for(device, stream);
  CublasTypes types = cublas_types(a.dtype(), out.dtype(), allow_tf32);
  CublasGemmArgs args = cublas_gemm_args(plan);
  // alpha = 1, beta = 0 (1 to accumulate) in the compute type (float64 for
  // float64, else float).
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  bool f64 = out.dtype() == kFloat64;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = accumulate ? alpha : f64 ? static_cast<const void*>(&zero_d) : &zero_f;

  // Element sizes: of the inputs, and of the output (float32 for 16-bit
  // inputs kept in float32).
  size_t es = a.element_size(), c_es = out.element_size();
  const char* a_base = static_cast<const char*>(a.data_ptr());
  const char* b_base = static_cast<const char*>(b.data_ptr());
  char* c_base = static_cast<char*>(out.data_ptr());
  // Packed copies are made per call into one buffer each: the calls run in
  // order on one stream, so the next pack waits for the previous GEMM.
  PackedShape pa = packed_a(plan), pb = packed_b(plan);
  std::shared_ptr<Storage> a_ws, b_ws;
  if (plan.a.pack) a_ws = detail::allocate_device(device, static_cast<size_t>(pa.numel()) * es);
  if (plan.b.pack) b_ws = detail::allocate_device(device, static_cast<size_t>(pb.numel()) * es);

  for_each_gemm_call(plan, [&](int64_t ao, int64_t bo, int64_t co) {
    const void* ap = a_base + ao * static_cast<int64_t>(es);
    const void* bp = b_base + bo * static_cast<int64_t>(es);
    if (plan.a.pack) {
      launch_pack(ap, a_ws->data(), es, pa, plan.a_batch, plan.a_rs, plan.a_cs, device, stream);
      ap = a_ws->data();
    }
    if (plan.b.pack) {
      launch_pack(bp, b_ws->data(), es, pb, plan.b_batch, plan.b_rs, plan.b_cs, device, stream);
      bp = b_ws->data();
    }
    // C^T = B^T @ A^T in cuBLAS's column-major terms: b first, then a.
    cublas_gemm(handle, args, types, alpha, beta, bp, ap, c_base + co * static_cast<int64_t>(c_es));
  });
}

// ---------------------------------------------------------------- integer GEMM

// Integers accumulate in the unsigned type of their width, so that overflow
// wraps as on the CPU (and in PyTorch) instead of being undefined.
template <typename T>
struct IntAcc;
template <>
struct IntAcc<int64_t> {
  using type = uint64_t;
};
template <>
struct IntAcc<int32_t> {
  using type = uint32_t;
};
template <>
struct IntAcc<uint8_t> {
  using type = uint32_t;
};

// A block computes a (kTile x kTile) tile of C: 16 x 16 threads, each a 4 x 4
// grid of outputs kTile / 4 apart (so that a warp reads consecutive shared
// columns of B); A and B come through shared memory kTileK deep.
constexpr int kTile = 64, kTileK = 16, kTileThreads = 256, kPerThread = kTile / 16;
static_assert(kTileThreads == 16 * 16 && kPerThread * 16 == kTile, "16 x 16 threads of 4 x 4 outputs");

struct IntGemmParams {
  int64_t m, n, k;
  int64_t a_rs, a_cs, b_rs, b_cs, ldc;
  int64_t count, a_batch, b_batch, c_batch;
  bool a_k_fast, b_n_fast;  // which way the loads walk, so that neighbours read neighbours
};

template <typename T, typename Acc>
__global__ void __launch_bounds__(kTileThreads)
    int_gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, IntGemmParams p) {
  // +1: the k-major stores of a row-major A do not all hit one bank.
  __shared__ Acc as[kTileK][kTile + 1];
  __shared__ Acc bs[kTileK][kTile + 1];
  const int t = static_cast<int>(threadIdx.x), tx = t % 16, ty = t / 16;
  const int64_t m_tiles = (p.m + kTile - 1) / kTile;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTile;
  // Every loop below has the same trip count in all threads of the block,
  // so the barriers inside are reached by all of them.
  for (int64_t z = blockIdx.z; z < p.count; z += gridDim.z) {
    const T* az = a + z * p.a_batch;
    const T* bz = b + z * p.b_batch;
    T* cz = c + z * p.c_batch;
    for (int64_t tm = blockIdx.y; tm < m_tiles; tm += gridDim.y) {
      const int64_t m0 = tm * kTile;
      Acc acc[kPerThread][kPerThread] = {};
      for (int64_t k0 = 0; k0 < p.k; k0 += kTileK) {
        for (int e = t; e < kTile * kTileK; e += kTileThreads) {
          int r = p.a_k_fast ? e / kTileK : e % kTile;
          int kk = p.a_k_fast ? e % kTileK : e / kTile;
          int64_t gi = m0 + r, gk = k0 + kk;
          as[kk][r] = gi < p.m && gk < p.k ? static_cast<Acc>(az[gi * p.a_rs + gk * p.a_cs]) : Acc(0);
        }
        for (int e = t; e < kTile * kTileK; e += kTileThreads) {
          int col = p.b_n_fast ? e % kTile : e / kTileK;
          int kk = p.b_n_fast ? e / kTile : e % kTileK;
          int64_t gk = k0 + kk, gj = n0 + col;
          bs[kk][col] = gk < p.k && gj < p.n ? static_cast<Acc>(bz[gk * p.b_rs + gj * p.b_cs]) : Acc(0);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTileK; ++kk) {
          Acc av[kPerThread], bv[kPerThread];
#pragma unroll
          for (int r = 0; r < kPerThread; ++r) av[r] = as[kk][ty + 16 * r];
#pragma unroll
          for (int q = 0; q < kPerThread; ++q) bv[q] = bs[kk][tx + 16 * q];
#pragma unroll
          for (int r = 0; r < kPerThread; ++r)
#pragma unroll
            for (int q = 0; q < kPerThread; ++q) acc[r][q] += av[r] * bv[q];
        }
        __syncthreads();
      }
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        int64_t i = m0 + ty + 16 * r;
        if (i >= p.m) continue;
#pragma unroll
        for (int q = 0; q < kPerThread; ++q) {
          int64_t j = n0 + tx + 16 * q;
          if (j < p.n) cz[i * p.ldc + j] = static_cast<T>(acc[r][q]);
        }
      }
    }
  }
}

template <typename T>
void matmul_integer(const Tensor& out, const Tensor& a, const Tensor& b, const GemmPlan& plan) {
  cudaStream_t stream = stream_of(out);
  IntGemmParams p;
  p.m = plan.m, p.n = plan.n, p.k = plan.k;
  p.a_rs = plan.a_rs, p.a_cs = plan.a_cs, p.b_rs = plan.b_rs, p.b_cs = plan.b_cs, p.ldc = plan.n;
  p.count = plan.count, p.a_batch = plan.a_batch, p.b_batch = plan.b_batch, p.c_batch = plan.c_batch;
  p.a_k_fast = plan.a_cs == 1, p.b_n_fast = plan.b_cs == 1;
  // x: column tiles (up to 2^31 - 1); y and z (at most 65535) are walked by
  // the kernel's loops past that.
  dim3 grid(static_cast<unsigned>(ceil_div(plan.n, kTile)),
            static_cast<unsigned>(std::min<int64_t>(ceil_div(plan.m, kTile), 65535)),
            static_cast<unsigned>(std::min<int64_t>(plan.count, 65535)));
  const T* a_base = a.data_ptr<T>();
  const T* b_base = b.data_ptr<T>();
  T* c_base = out.data_ptr<T>();
  for_each_gemm_call(plan, [&](int64_t ao, int64_t bo, int64_t co) {
    TANDEM_LAUNCH(grid, kTileThreads, 0, stream, int_gemm_kernel<T, typename IntAcc<T>::type>)
    (a_base + ao, b_base + bo, c_base + co, p);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

void matmul(const Tensor& out, const Tensor& a, const Tensor& b, bool allow_tf32) {
  matmul_into(out, a, b, allow_tf32, false);
}

void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b, bool allow_tf32, bool accumulate) {
  if (out.numel() == 0) return;
  TANDEM_INTERNAL_ASSERT(!accumulate || is_floating_point(out.dtype()), "matmul: accumulate is for floating dtypes");
  TANDEM_INTERNAL_ASSERT(
      a.dtype() == b.dtype() && (out.dtype() == a.dtype() || (out.dtype() == kFloat32 && is_reduced_float(a.dtype()))),
      "matmul: a ", a.dtype(), ", b ", b.dtype(), " into ", out.dtype());
  DeviceGuard guard(out.device().index());
  int64_t nd = out.dim();
  int64_t M = out.size(nd - 2), N = out.size(nd - 1), K = a.size(nd - 1);
  if (K == 0) {
    if (accumulate) return;  // out += an empty sum
    // An empty sum: zeros (all-zero bits in every dtype).
    TANDEM_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream_of(out)));
    return;
  }
  std::vector<int64_t> batch(out.sizes().begin(), out.sizes().end() - 2);
  std::vector<int64_t> a_batch(a.strides().begin(), a.strides().end() - 2);
  std::vector<int64_t> b_batch(b.strides().begin(), b.strides().end() - 2);
  GemmPlan plan = plan_gemm(batch, a_batch, b_batch, M, N, K, a.stride(nd - 2), a.stride(nd - 1), b.stride(nd - 2),
                            b.stride(nd - 1));
  switch (a.dtype()) {
    case kFloat32:
    case kFloat64:
    case kFloat16:
    case kBFloat16: matmul_cublas(out, a, b, plan, allow_tf32, accumulate); break;
    case kInt64: matmul_integer<int64_t>(out, a, b, plan); break;
    case kInt32: matmul_integer<int32_t>(out, a, b, plan); break;
    case kUInt8: matmul_integer<uint8_t>(out, a, b, plan); break;
    case kBool: TANDEM_INTERNAL_ASSERT(false, "matmul of bool reached the CUDA kernel");
  }
}

}  // namespace tandem::cuda

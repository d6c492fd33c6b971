// The simulated cuBLAS GEMMs. The arguments are checked as cuBLAS checks
// them (CUBLAS_STATUS_INVALID_VALUE, _NOT_SUPPORTED), and every matrix of
// every batch must lie inside one device allocation, or the stream's device
// reports an illegal address, as a GPU would; then the product is queued on
// the handle's stream. It is computed in the compute type: float32 inputs
// through sgemm (rounded to TF32 first under CUBLAS_COMPUTE_32F_FAST_TF32),
// float16 and bfloat16 converted to float32, multiplied with float32 sums and
// rounded once to the output type, float64 through dgemm.
#include "kernels/cuda/sim/cublas.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/sim/half.h"
#include "kernels/cuda/sim/runtime.h"
#include "tandem/version.h"
#include "tensor/core/errors.h"

#if TANDEM_WITH_OPENBLAS
#include <cblas.h>
#endif

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

size_t type_size(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
  }
  return 0;
}

const char* type_name(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
  }
  return "?";
}

// The combinations cublasGemmEx supports that Tandem can ask for: one type
// for A, B and C (or float32 C for float16 or bfloat16 A and B under
// CUBLAS_COMPUTE_32F), and a compute type that fits it.
bool supported(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c, cublasComputeType_t compute) {
  if (a != b || type_size(a) == 0) return false;
  if (a != c) return c == CUDA_R_32F && (a == CUDA_R_16F || a == CUDA_R_16BF) && compute == CUBLAS_COMPUTE_32F;
  switch (compute) {
    case CUBLAS_COMPUTE_64F: return a == CUDA_R_64F;
    case CUBLAS_COMPUTE_32F: return a != CUDA_R_64F;
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF: return a == CUDA_R_32F;
    case CUBLAS_COMPUTE_16F: return false;  // half sums and __half alpha/beta: not simulated
  }
  return false;
}

float to_float(const void* p, cudaDataType_t t, int64_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(p)[i]);
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case CUDA_R_64F: break;
  }
  return 0;
}

void from_float(void* p, cudaDataType_t t, int64_t i, float v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = v; return;
    case CUDA_R_16F: static_cast<__half*>(p)[i] = __float2half_rn(v); return;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); return;
    case CUDA_R_64F: return;
  }
}

// Round to TF32 (10 mantissa bits, nearest even), what the tensor cores read.
float to_tf32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) {
    u += 0xfffu + ((u >> 13) & 1u);
    u &= 0xffffe000u;
  }
  std::memcpy(&v, &u, 4);
  return v;
}

struct Gemm {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t sa = 0, sb = 0, sc = 0, batch = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  cudaDataType_t type = CUDA_R_32F;   // of A and B
  cudaDataType_t ctype = CUDA_R_32F;  // of C
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  double alpha = 1, beta = 0;
};

// Whether OpenBLAS's (32-bit) integers hold the sizes: the _64 forms may
// pass more; the loops below take those.
bool fits_blas(const Gemm& g) {
  const int64_t big = std::max({g.m, g.n, g.k, g.lda, g.ldb, g.ldc});
  return big <= std::numeric_limits<int>::max();
}

// Column-major: C (m x n), op(A) (m x k), op(B) (k x n).
void gemm_float(const Gemm& g, const float* a, const float* b, float* c, float alpha, float beta) {
#if TANDEM_WITH_OPENBLAS
  if (fits_blas(g))
    return cblas_sgemm(CblasColMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.m, g.n, g.k,
                       alpha, a, g.lda, b, g.ldb, beta, c, g.ldc);
#endif
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      float s = 0;
      for (int64_t p = 0; p < g.k; ++p)
        s += a[g.ta ? p + i * g.lda : i + p * g.lda] * b[g.tb ? j + p * g.ldb : p + j * g.ldb];
      float& out = c[i + j * g.ldc];
      out = alpha * s + (beta == 0 ? 0 : beta * out);
    }
}

void gemm_double(const Gemm& g, const double* a, const double* b, double* c) {
#if TANDEM_WITH_OPENBLAS
  if (fits_blas(g))
    return cblas_dgemm(CblasColMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.m, g.n, g.k,
                       g.alpha, a, g.lda, b, g.ldb, g.beta, c, g.ldc);
#endif
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      double s = 0;
      for (int64_t p = 0; p < g.k; ++p)
        s += a[g.ta ? p + i * g.lda : i + p * g.lda] * b[g.tb ? j + p * g.ldb : p + j * g.ldb];
      double& out = c[i + j * g.ldc];
      out = g.alpha * s + (g.beta == 0 ? 0 : g.beta * out);
    }
}

// A stored matrix of `rows` x `cols` (column-major, leading dimension ld)
// as float32, with the same leading dimension.
std::vector<float> widen(const void* p, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, bool tf32) {
  std::vector<float> out(static_cast<size_t>(ld * (cols - 1) + rows));
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) {
      const float v = to_float(p, t, i + j * ld);
      out[static_cast<size_t>(i + j * ld)] = tf32 ? to_tf32(v) : v;
    }
  return out;
}

void run(const Gemm& g) {
  const size_t es = type_size(g.type);
  const int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  for (int64_t i = 0; i < g.batch; ++i) {
    const void* a = static_cast<const char*>(g.a) + i * g.sa * static_cast<int64_t>(es);
    const void* b = static_cast<const char*>(g.b) + i * g.sb * static_cast<int64_t>(es);
    void* c = static_cast<char*>(g.c) + i * g.sc * static_cast<int64_t>(type_size(g.ctype));
    if (g.type == CUDA_R_64F) {
      gemm_double(g, static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(c));
      continue;
    }
    const bool tf32 = g.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    if (g.type == CUDA_R_32F && !tf32) {
      gemm_float(g, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(c),
                 static_cast<float>(g.alpha), static_cast<float>(g.beta));
      continue;
    }
    // Widened inputs; C in float32 (read only when beta is not zero, as cuBLAS).
    std::vector<float> wa = a_rows * a_cols == 0 ? std::vector<float>() : widen(a, g.type, a_rows, a_cols, g.lda, tf32);
    std::vector<float> wb = b_rows * b_cols == 0 ? std::vector<float>() : widen(b, g.type, b_rows, b_cols, g.ldb, tf32);
    std::vector<float> wc(static_cast<size_t>(g.ldc * (g.n - 1) + g.m), 0.0f);
    if (g.beta != 0)
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t r = 0; r < g.m; ++r) wc[static_cast<size_t>(r + j * g.ldc)] = to_float(c, g.ctype, r + j * g.ldc);
    if (g.k == 0) {
      for (float& v : wc) v *= static_cast<float>(g.beta);
    } else {
      gemm_float(g, wa.data(), wb.data(), wc.data(), static_cast<float>(g.alpha), static_cast<float>(g.beta));
    }
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t r = 0; r < g.m; ++r) from_float(c, g.ctype, r + j * g.ldc, wc[static_cast<size_t>(r + j * g.ldc)]);
  }
}

// Bytes from a matrix's first element to one past its last.
int64_t extent(int64_t rows, int64_t cols, int64_t ld, size_t es) {
  return rows == 0 || cols == 0 ? 0 : ((cols - 1) * ld + rows) * static_cast<int64_t>(es);
}

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                    const void* alpha, const void* A, cudaDataType_t at, int64_t lda, long long sa, const void* B,
                    cudaDataType_t bt, int64_t ldb, long long sb, const void* beta, void* C, cudaDataType_t ct,
                    int64_t ldc, long long sc, int64_t batch, cublasComputeType_t compute, const char* call) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const int64_t a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
  const int64_t b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
  if (lda < std::max<int64_t>(1, a_rows) || ldb < std::max<int64_t>(1, b_rows) || ldc < std::max<int64_t>(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(at, bt, ct, compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;

  Gemm g;
  g.ta = ta == CUBLAS_OP_T;
  g.tb = tb == CUBLAS_OP_T;
  g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
  g.sa = sa, g.sb = sb, g.sc = sc, g.batch = batch;
  g.a = A, g.b = B, g.c = C, g.type = at, g.ctype = ct, g.compute = compute;
  // alpha and beta are host scalars (CUBLAS_POINTER_MODE_HOST), read now.
  if (compute == CUBLAS_COMPUTE_64F) {
    g.alpha = *static_cast<const double*>(alpha);
    g.beta = *static_cast<const double*>(beta);
  } else {
    g.alpha = *static_cast<const float*>(alpha);
    g.beta = *static_cast<const float*>(beta);
  }
  // Every batch's matrices inside device memory: what a GPU would fault on.
  const size_t es = type_size(at);
  struct Operand {
    const char* name;
    const void* p;
    int64_t bytes, stride;
    size_t es;
  } ops[] = {{"A", A, extent(a_rows, a_cols, lda, es), sa, es},
             {"B", B, extent(b_rows, b_cols, ldb, es), sb, es},
             {"C", C, extent(m, n, ldc, type_size(ct)), sc, type_size(ct)}};
  for (const Operand& o : ops) {
    if (o.bytes == 0) continue;
    for (int64_t i = 0; i < batch; ++i) {
      const char* p = static_cast<const char*>(o.p) + i * o.stride * static_cast<int64_t>(o.es);
      if (!tandem::sim::in_device_memory(p, static_cast<size_t>(o.bytes))) {
        tandem::sim::fail_device_work(
            h->stream, cudaErrorIllegalAddress,
            tandem::detail::str_cat("simulated ", call, ": matrix ", o.name, " of batch ", i, " (", o.bytes,
                                    " bytes of ", type_name(at), " from ", static_cast<const void*>(p),
                                    ") is not inside one device allocation: check its leading dimension, stride and "
                                    "batch count"));
        return CUBLAS_STATUS_SUCCESS;  // the launch itself succeeds; the fault comes when it runs
      }
    }
  }
  tandem::sim::enqueue_device_work(h->stream, [g] { run(g); });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (tandem::sim::device_count() == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && !tandem::sim::in_device_memory(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

// The simulator is no cuBLAS release: versions() reports none.
cublasStatus_t cublasGetProperty(libraryPropertyType, int*) { return CUBLAS_STATUS_NOT_SUPPORTED; }

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
    default: return "an internal operation failed";
  }
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType_t at, int lda, const void* B,
                            cudaDataType_t bt, int ldb, const void* beta, void* C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, compute, "cublasGemmEx");
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void* alpha, const void* A, cudaDataType_t at, int lda,
                                          long long sa, const void* B, cudaDataType_t bt, int ldb, long long sb,
                                          const void* beta, void* C, cudaDataType_t ct, int ldc, long long sc,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc, batch, compute,
              "cublasGemmStridedBatchedEx");
}

cublasStatus_t cublasGemmEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                               int64_t k, const void* alpha, const void* A, cudaDataType_t at, int64_t lda,
                               const void* B, cudaDataType_t bt, int64_t ldb, const void* beta, void* C,
                               cudaDataType_t ct, int64_t ldc, cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, compute,
              "cublasGemmEx_64");
}

cublasStatus_t cublasGemmStridedBatchedEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                                             int64_t n, int64_t k, const void* alpha, const void* A, cudaDataType_t at,
                                             int64_t lda, long long sa, const void* B, cudaDataType_t bt, int64_t ldb,
                                             long long sb, const void* beta, void* C, cudaDataType_t ct, int64_t ldc,
                                             long long sc, int64_t batch, cublasComputeType_t compute,
                                             cublasGemmAlgo_t) {
  return gemm(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc, batch, compute,
              "cublasGemmStridedBatchedEx_64");
}

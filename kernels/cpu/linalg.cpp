// CPU GEMM: the batch walk (folding batches into rows when b is shared), the
// OpenBLAS calls with transposed and strided operands passed as they lie, a
// blocked C++ GEMM (integers, and floats in a build without OpenBLAS), and
// float16/bfloat16 through float32.
#include "kernels/linalg.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "tandem/version.h"

#if TANDEM_WITH_OPENBLAS
#include <cblas.h>
#endif

namespace tandem::cpu {

namespace {

// Multiply-adds below which a batch of GEMMs is not split across threads; a
// single GEMM above it is threaded on its own (by OpenBLAS, or by rows in the
// blocked GEMM), so batches are split only when each GEMM is small. It is
// also where OpenBLAS starts threading a gemm (65536 x its multithread
// threshold 4), so the gemms called from our threads run single-threaded.
constexpr int64_t kGemmGrain = int64_t{1} << 18;

// A strided matrix operand: element (i, j) at data[i * rs + j * cs].
template <typename T>
struct Mat {
  const T* data;
  int64_t rs, cs;
};

// Contiguous copies of operands that BLAS cannot read in place (and the
// float32 buffers of the 16-bit path), reused across the GEMMs of one task.
template <typename T>
struct Scratch {
  std::vector<T> a, b, c;
};

// m (rows x cols) copied row-major into buf, converted to U.
template <typename U, typename T>
Mat<U> pack_rows(int64_t rows, int64_t cols, Mat<T> m, std::vector<U>& buf) {
  buf.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buf[i * cols + j] = static_cast<U>(m.data[i * m.rs + j * m.cs]);
  return {buf.data(), std::max<int64_t>(cols, 1), 1};
}

// ---------------------------------------------------------------- blocked GEMM

// Integers accumulate in the unsigned type of their width, so that overflow
// wraps (as PyTorch's integer GEMM does) instead of being undefined.
template <typename T>
struct GemmAcc {
  using type = T;
};
template <>
struct GemmAcc<int64_t> {
  using type = uint64_t;
};
template <>
struct GemmAcc<int32_t> {
  using type = uint32_t;
};
template <>
struct GemmAcc<uint8_t> {
  using type = uint32_t;
};

// A (kBlockK x kBlockN) block of B plus four rows of C fit in L1.
constexpr int64_t kBlockK = 128, kBlockN = 512;

// c0..c3 += x0..x3 * b: four rows of C share each load of b.
template <typename T, typename Acc>
void axpy4(int64_t n, const Acc (&x)[4], const T* __restrict b, T* __restrict c0, T* __restrict c1, T* __restrict c2,
           T* __restrict c3) {
  for (int64_t j = 0; j < n; ++j) {
    Acc bj = static_cast<Acc>(b[j]);
    c0[j] = static_cast<T>(static_cast<Acc>(c0[j]) + x[0] * bj);
    c1[j] = static_cast<T>(static_cast<Acc>(c1[j]) + x[1] * bj);
    c2[j] = static_cast<T>(static_cast<Acc>(c2[j]) + x[2] * bj);
    c3[j] = static_cast<T>(static_cast<Acc>(c3[j]) + x[3] * bj);
  }
}

template <typename T, typename Acc>
void axpy1(int64_t n, Acc x, const T* __restrict b, T* __restrict c) {
  for (int64_t j = 0; j < n; ++j) c[j] = static_cast<T>(static_cast<Acc>(c[j]) + x * static_cast<Acc>(b[j]));
}

// Rows [i0, i1) of C = A @ B in i-k-j order over blocks of B, whose rows are
// packed contiguous first unless they already are.
// a: (M, K), b: (K, N), c: (M, N) with row stride ldc.
template <typename T>
void gemm_blocked_rows(int64_t i0, int64_t i1, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c, int64_t ldc) {
  using Acc = typename GemmAcc<T>::type;
  for (int64_t i = i0; i < i1; ++i) std::fill_n(c + i * ldc, N, T(0));
  std::vector<T> pack;
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    int64_t kb = std::min(kBlockK, K - k0);
    for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
      int64_t nb = std::min(kBlockN, N - j0);
      const T* bp = b.data + k0 * b.rs + j0 * b.cs;
      int64_t ldb = b.rs;
      if (b.cs != 1) {
        pack.resize(static_cast<size_t>(kb * nb));
        for (int64_t k = 0; k < kb; ++k)
          for (int64_t j = 0; j < nb; ++j) pack[k * nb + j] = bp[k * b.rs + j * b.cs];
        bp = pack.data();
        ldb = nb;
      }
      int64_t i = i0;
      for (; i + 4 <= i1; i += 4) {
        T* cr = c + i * ldc + j0;
        for (int64_t k = 0; k < kb; ++k) {
          const T* ak = a.data + i * a.rs + (k0 + k) * a.cs;
          const Acc x[4] = {static_cast<Acc>(ak[0]), static_cast<Acc>(ak[a.rs]), static_cast<Acc>(ak[2 * a.rs]),
                            static_cast<Acc>(ak[3 * a.rs])};
          axpy4(nb, x, bp + k * ldb, cr, cr + ldc, cr + 2 * ldc, cr + 3 * ldc);
        }
      }
      for (; i < i1; ++i) {
        T* cr = c + i * ldc + j0;
        for (int64_t k = 0; k < kb; ++k)
          axpy1(nb, static_cast<Acc>(a.data[i * a.rs + (k0 + k) * a.cs]), bp + k * ldb, cr);
      }
    }
  }
}

template <typename T>
void gemm_blocked(int64_t M, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c, int64_t ldc) {
  int64_t grain_rows = std::max<int64_t>(4, kGemmGrain / std::max<int64_t>(1, N * K));
  parallel_for(0, M, grain_rows, [&](int64_t i0, int64_t i1) { gemm_blocked_rows(i0, i1, N, K, a, b, c, ldc); });
}

// ---------------------------------------------------------------- OpenBLAS

#if TANDEM_WITH_OPENBLAS

bool fits_blas(int64_t v) { return v <= static_cast<int64_t>(std::numeric_limits<blasint>::max()); }
blasint bi(int64_t v) { return static_cast<blasint>(v); }

// How BLAS reads a strided (rows x cols) operand in place: row-major (unit
// column stride), or column-major, passed as the transpose of a row-major
// (cols x rows) matrix. ld is the stride between the stored rows; the stride
// of a dim of size <= 1 never matters, so any legal ld serves there.
struct BlasLayout {
  bool ok = false, trans = false;
  int64_t ld = 0;
};

BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  BlasLayout l;
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<int64_t>(1, cols))) {
    l = {true, false, rows <= 1 ? std::max<int64_t>(1, cols) : rs};
  } else if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<int64_t>(1, rows))) {
    l = {true, true, cols <= 1 ? std::max<int64_t>(1, rows) : cs};
  }
  l.ok = l.ok && fits_blas(l.ld);
  return l;
}

CBLAS_TRANSPOSE blas_trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

// C (m x n) = op(A) @ op(B), all row-major.
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, blas_trans(ta), blas_trans(tb), bi(m), bi(n), bi(k), 1.0f, a, bi(lda), b, bi(ldb), 0.0f, c,
              bi(ldc));
}
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
               int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, blas_trans(ta), blas_trans(tb), bi(m), bi(n), bi(k), 1.0, a, bi(lda), b, bi(ldb), 0.0, c,
              bi(ldc));
}
// y = op(A) @ x with A a row-major (rows x cols) matrix.
void blas_gemv(bool ta, int64_t rows, int64_t cols, const float* a, int64_t lda, const float* x, int64_t incx, float* y,
               int64_t incy) {
  cblas_sgemv(CblasRowMajor, blas_trans(ta), bi(rows), bi(cols), 1.0f, a, bi(lda), x, bi(incx), 0.0f, y, bi(incy));
}
void blas_gemv(bool ta, int64_t rows, int64_t cols, const double* a, int64_t lda, const double* x, int64_t incx,
               double* y, int64_t incy) {
  cblas_dgemv(CblasRowMajor, blas_trans(ta), bi(rows), bi(cols), 1.0, a, bi(lda), x, bi(incx), 0.0, y, bi(incy));
}

// C = A @ B through OpenBLAS; false when the sizes exceed its integer type.
// Vector shapes go to gemv, which skips gemm's packing.
template <typename T>
bool gemm_blas(int64_t M, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c, int64_t ldc, Scratch<T>& s) {
  if (!fits_blas(M) || !fits_blas(N) || !fits_blas(K) || !fits_blas(ldc)) return false;
  if (N == 1 && (K == 1 || (b.rs > 0 && fits_blas(b.rs)))) {
    BlasLayout la = blas_layout(M, K, a.rs, a.cs);
    if (la.ok) {
      blas_gemv(la.trans, la.trans ? K : M, la.trans ? M : K, a.data, la.ld, b.data, K == 1 ? 1 : b.rs, c, ldc);
      return true;
    }
  }
  if (M == 1 && (K == 1 || (a.cs > 0 && fits_blas(a.cs)))) {
    // c (N) = B^T @ a: a row-major B is transposed; a column-major one is a
    // row-major (N x K) matrix as it lies.
    BlasLayout lb = blas_layout(K, N, b.rs, b.cs);
    if (lb.ok) {
      blas_gemv(!lb.trans, lb.trans ? N : K, lb.trans ? K : N, b.data, lb.ld, a.data, K == 1 ? 1 : a.cs, c, 1);
      return true;
    }
  }
  BlasLayout la = blas_layout(M, K, a.rs, a.cs);
  if (!la.ok) {
    a = pack_rows(M, K, a, s.a);
    la = {true, false, a.rs};
  }
  BlasLayout lb = blas_layout(K, N, b.rs, b.cs);
  if (!lb.ok) {
    b = pack_rows(K, N, b, s.b);
    lb = {true, false, b.rs};
  }
  blas_gemm(la.trans, lb.trans, M, N, K, a.data, la.ld, b.data, lb.ld, c, ldc);
  return true;
}

#endif  // TANDEM_WITH_OPENBLAS

// ---------------------------------------------------------------- per dtype

// float32 / float64: OpenBLAS when built with it, else the blocked GEMM.
template <typename T>
void gemm_floating(int64_t M, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c, int64_t ldc,
                   [[maybe_unused]] Scratch<T>& s) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i) std::fill_n(c + i * ldc, N, T(0));
    return;
  }
#if TANDEM_WITH_OPENBLAS
  if (gemm_blas(M, N, K, a, b, c, ldc, s)) return;
#endif
  gemm_blocked(M, N, K, a, b, c, ldc);
}

// A 16-bit operand (rows x cols) widened to float32 into buf. One that is
// row-major or column-major (a transposed weight, W.t()) keeps its layout:
// each stored row or column converts in one contiguous, vectorized pass, and
// the GEMM reads the copy transposed where the operand was. Any other goes
// through pack_rows, element by element.
template <typename T>
Mat<float> widen(int64_t rows, int64_t cols, Mat<T> m, std::vector<float>& buf) {
  const bool row_major = (m.cs == 1 || cols <= 1) && (rows <= 1 || m.rs >= cols);
  const bool col_major = !row_major && (m.rs == 1 || rows <= 1) && (cols <= 1 || m.cs >= rows);
  if (!row_major && !col_major) return pack_rows<float>(rows, cols, m, buf);
  buf.resize(static_cast<size_t>(rows * cols));
  if (row_major) {
    for (int64_t i = 0; i < rows; ++i) convert_n(buf.data() + i * cols, m.data + i * m.rs, cols);
    return {buf.data(), std::max<int64_t>(cols, 1), 1};
  }
  for (int64_t j = 0; j < cols; ++j) convert_n(buf.data() + j * rows, m.data + j * m.cs, rows);
  return {buf.data(), 1, std::max<int64_t>(rows, 1)};
}

// float16 / bfloat16: operands widened to float32, one float32 GEMM (so the
// sums accumulate in float32), the result rounded to nearest even.
template <typename T>
void gemm_reduced(int64_t M, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c, int64_t ldc, Scratch<float>& s) {
  if (M == 0 || N == 0) return;
  Mat<float> af = widen(M, K, a, s.a), bf = widen(K, N, b, s.b);
  s.c.resize(static_cast<size_t>(M * N));
  Scratch<float> unused;  // the widened operands are laid out as BLAS reads them
  gemm_floating<float>(M, N, K, af, bf, s.c.data(), N, unused);
  for (int64_t i = 0; i < M; ++i) convert_n(c + i * ldc, s.c.data() + i * N, N);
}

template <typename T>
constexpr bool is_reduced_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
using scratch_t = Scratch<std::conditional_t<is_reduced_v<T>, float, T>>;

template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c, int64_t ldc, scratch_t<T>& s) {
  if constexpr (std::is_floating_point_v<T>) {
    gemm_floating(M, N, K, a, b, c, ldc, s);
  } else if constexpr (is_reduced_v<T>) {
    gemm_reduced(M, N, K, a, b, c, ldc, s);
  } else {
    gemm_blocked(M, N, K, a, b, c, ldc);
  }
}

// ---------------------------------------------------------------- batches

struct BatchDim {
  int64_t size, a_stride, b_stride;
};

template <typename T>
void matmul_typed(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  int64_t nd = out.dim();
  int64_t M = out.size(nd - 2), N = out.size(nd - 1), K = a.size(nd - 1);
  // Batch dims without the size-1 ones, merged where both a and b step
  // uniformly across them; out is contiguous, so batch i is at i * M * N.
  std::vector<BatchDim> dims;
  for (int64_t d = 0; d < nd - 2; ++d) {
    int64_t n = out.size(d), as = a.stride(d), bs = b.stride(d);
    if (n == 1) continue;
    if (!dims.empty() && dims.back().a_stride == as * n && dims.back().b_stride == bs * n) {
      dims.back() = {dims.back().size * n, as, bs};
    } else {
      dims.push_back({n, as, bs});
    }
  }
  Mat<T> am{a.data_ptr<T>(), a.stride(nd - 2), a.stride(nd - 1)};
  Mat<T> bm{b.data_ptr<T>(), b.stride(nd - 2), b.stride(nd - 1)};
  T* c = out.data_ptr<T>();

  // (B, M, K) @ (K, N) where a's matrices stack into one (B*M, K) matrix: one
  // GEMM, as torch.matmul folds it.
  if (dims.empty() || (dims.size() == 1 && dims[0].b_stride == 0 && (M == 1 || dims[0].a_stride == M * am.rs))) {
    int64_t batches = dims.empty() ? 1 : dims[0].size;
    if (M == 1 && !dims.empty()) am.rs = dims[0].a_stride;
    scratch_t<T> s;
    gemm<T>(batches * M, N, K, am, bm, c, N, s);
    return;
  }

  int64_t batches = 1;
  for (const BatchDim& d : dims) batches *= d.size;
  auto run = [&](int64_t b0, int64_t b1) {
    scratch_t<T> s;
    for (int64_t i = b0; i < b1; ++i) {
      int64_t rem = i, ao = 0, bo = 0;
      for (size_t d = dims.size(); d-- > 0;) {
        int64_t idx = rem % dims[d].size;
        rem /= dims[d].size;
        ao += idx * dims[d].a_stride;
        bo += idx * dims[d].b_stride;
      }
      gemm<T>(M, N, K, {am.data + ao, am.rs, am.cs}, {bm.data + bo, bm.rs, bm.cs}, c + i * M * N, N, s);
    }
  };
  int64_t macs = M * N * K;
  if (macs >= kGemmGrain) {
    run(0, batches);
  } else {
    parallel_for(0, batches, std::max<int64_t>(1, kGemmGrain / std::max<int64_t>(1, macs)), run);
  }
}

}  // namespace

// allow_tf32: the CPU has no TF32; float32 products are float32's.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b, bool /*allow_tf32*/) {
  dispatch_numeric(out.dtype(), "matmul (cpu)", [&]<typename T>() { matmul_typed<T>(out, a, b); });
}

}  // namespace tandem::cpu

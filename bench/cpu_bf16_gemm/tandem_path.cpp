// Candidate (a): Tandem's bfloat16 GEMM as kernels/cpu/linalg.cpp (gemm_reduced) and
// kernels/cpu/conv.cpp (as_compute, the rounding of the output) do it, copied from
// /work/main at 2026-12-07. Compiled with the flags meson uses for linalg.cpp
// (see build/compile_commands.json): -std=c++20 -O2 -g -fno-math-errno -g1 -fPIC
// -fopenmp -pthread, no -march. Also (a') the same GEMM with a better conversion:
// contiguous, vectorisable loops and transposed operands passed to sgemm as they lie.
#include "tandem_path.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

// TANDEM_SIMD as in kernels/cpu/parallel.h
#ifdef _OPENMP
#define TANDEM_SIMD _Pragma("omp simd")
#else
#define TANDEM_SIMD
#endif

namespace {

// ---- verbatim from tensor/core/half.h
inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}
inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet nan
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bfloat16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }
struct alignas(2) BFloat16 {
  uint16_t x;
  BFloat16() = default;
  BFloat16(float f) : x(float_to_bfloat16_bits(f)) {}
  operator float() const { return bfloat16_bits_to_float(x); }
};

// ---- verbatim from kernels/cpu/linalg.cpp
template <typename T>
struct Mat {
  const T* data;
  int64_t rs, cs;
};
template <typename U, typename T>
Mat<U> pack_rows(int64_t rows, int64_t cols, Mat<T> m, std::vector<U>& buf) {
  buf.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buf[i * cols + j] = static_cast<U>(m.data[i * m.rs + j * m.cs]);
  return {buf.data(), std::max<int64_t>(cols, 1), 1};
}

Mat<BFloat16> mat(BfOperand o) { return {reinterpret_cast<const BFloat16*>(o.data), o.rs, o.cs}; }

}  // namespace

// gemm_reduced: both operands packed to row-major float32 (strided scalar loops),
// one float32 GEMM (gemm_blas with two contiguous operands: NoTrans/NoTrans sgemm;
// M, N > 1 here so the gemv branches do not apply), the result rounded once.
void tandem_gemm_bf16(int64_t M, int64_t N, int64_t K, BfOperand a, BfOperand b, uint16_t* c, int64_t ldc,
                      TScratch& s) {
  Mat<float> af = pack_rows<float>(M, K, mat(a), s.a), bf = pack_rows<float>(K, N, mat(b), s.b);
  s.c.resize(static_cast<size_t>(M * N));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, af.data, af.rs, bf.data, bf.rs, 0.0f,
              s.c.data(), N);
  BFloat16* cb = reinterpret_cast<BFloat16*>(c);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) cb[i * ldc + j] = BFloat16(s.c[i * N + j]);
}

// The conversions of tandem_gemm_bf16 alone (same loops, no GEMM): the share of (a)
// that a better conversion could win back. c_src is an (M x N) float32 buffer.
void tandem_convert_only(int64_t M, int64_t N, int64_t K, BfOperand a, BfOperand b, const float* c_src, uint16_t* c,
                         int64_t ldc, TScratch& s) {
  pack_rows<float>(M, K, mat(a), s.a);
  pack_rows<float>(K, N, mat(b), s.b);
  BFloat16* cb = reinterpret_cast<BFloat16*>(c);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) cb[i * ldc + j] = BFloat16(c_src[i * N + j]);
}

// ---- (a') better conversion, same flags

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  TANDEM_SIMD
  for (int64_t i = 0; i < n; ++i) dst[i] = bits_float(static_cast<uint32_t>(src[i]) << 16);
}
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  TANDEM_SIMD
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bfloat16_bits(src[i]);
}

namespace {
// An operand converted as it lies in memory (row-major or its transpose), so the
// loop is one contiguous pass; sgemm is told whether to transpose it.
struct Converted {
  const float* data;
  bool trans;
  int64_t ld;
};
Converted convert_as_lies(int64_t rows, int64_t cols, BfOperand o, std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(rows * cols));
  if (o.cs == 1 && o.rs == cols) {
    bf16_to_f32(o.data, buf.data(), rows * cols);
    return {buf.data(), false, cols};
  }
  if (o.rs == 1 && o.cs == rows) {
    bf16_to_f32(o.data, buf.data(), rows * cols);
    return {buf.data(), true, rows};
  }
  // other strides: Tandem's loop
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buf[i * cols + j] = bfloat16_bits_to_float(o.data[i * o.rs + j * o.cs]);
  return {buf.data(), false, cols};
}
}  // namespace

void better_gemm_bf16(int64_t M, int64_t N, int64_t K, BfOperand a, BfOperand b, uint16_t* c, int64_t ldc,
                      TScratch& s) {
  Converted af = convert_as_lies(M, K, a, s.a), bf = convert_as_lies(K, N, b, s.b);
  s.c.resize(static_cast<size_t>(M * N));
  cblas_sgemm(CblasRowMajor, af.trans ? CblasTrans : CblasNoTrans, bf.trans ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
              af.data, af.ld, bf.data, bf.ld, 0.0f, s.c.data(), N);
  for (int64_t i = 0; i < M; ++i) f32_to_bf16(s.c.data() + i * N, c + i * ldc, N);
}

void better_convert_only(int64_t M, int64_t N, int64_t K, BfOperand a, BfOperand b, const float* c_src, uint16_t* c,
                         int64_t ldc, TScratch& s) {
  convert_as_lies(M, K, a, s.a);
  convert_as_lies(K, N, b, s.b);
  for (int64_t i = 0; i < M; ++i) f32_to_bf16(c_src + i * N, c + i * ldc, N);
}

// ---- conv.cpp's conversions (as_compute and the rounding on the way out), verbatim loops
void tandem_as_compute(const uint16_t* src, int64_t n, std::vector<float>& buf) {
  const BFloat16* s = reinterpret_cast<const BFloat16*>(src);
  buf.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<float>(s[i]);
}
void tandem_round_out(const float* src, uint16_t* dst, int64_t rows, int64_t L) {
  BFloat16* d = reinterpret_cast<BFloat16*>(dst);
  for (int64_t co = 0; co < rows; ++co) {
    const float* s = src + co * L;
    BFloat16* row = d + co * L;
    TANDEM_SIMD
    for (int64_t l = 0; l < L; ++l) row[l] = static_cast<BFloat16>(s[l] + 0.0f);
  }
}

// Host-side plan of a batched GEMM on the GPU: how cuBLAS (column-major)
// reads each strided row-major operand in place, which operands are packed
// first, and how the batch dims split into one strided batch per call and a
// host loop over the rest. Plain C++ (no CUDA), so that the CPU tests run it
// against an emulation of cuBLAS's argument semantics.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace tandem::cuda {

// How a strided (rows x cols) operand is read where it lies: row-major (unit
// column stride, `ld` between rows), or with `trans` column-major (unit row
// stride, `ld` between columns). The stride of a dim of size <= 1 never
// matters, so any legal ld serves there. `pack`: neither fits (both strides
// non-unit, or rows that overlap), so the operand is copied into a contiguous
// row-major buffer first, after which trans is false and ld = max(1, cols).
struct GemmOperand {
  bool pack = false;
  bool trans = false;
  int64_t ld = 1;
};

inline GemmOperand gemm_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  int64_t wide = std::max<int64_t>(1, cols), tall = std::max<int64_t>(1, rows);
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= wide)) return {false, false, rows <= 1 ? wide : rs};
  if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= tall)) return {false, true, cols <= 1 ? tall : cs};
  return {true, false, wide};
}

// A batch dim left to the host loop: its size and the operands' strides.
struct GemmLoopDim {
  int64_t size, a_stride, b_stride, c_stride;
};

// out (batch..., M, N), contiguous, = a (batch..., M, K) @ b (batch..., K, N).
struct GemmPlan {
  // One GEMM, row-major: C (m x n, row stride n) = A (m x k) @ B (k x n),
  // A(i, l) at a_rs * i + a_cs * l of the operand as given, B likewise.
  int64_t m = 0, n = 0, k = 0;
  int64_t a_rs = 0, a_cs = 1, b_rs = 0, b_cs = 1;
  GemmOperand a, b;
  // `count` GEMMs per call (one strided batch); the operands' batch strides,
  // 0 where one matrix serves every GEMM of the call.
  int64_t count = 1;
  int64_t a_batch = 0, b_batch = 0, c_batch = 0;
  // The other batch dims, walked on the host (outermost first), one call each.
  std::vector<GemmLoopDim> loops;

  int64_t calls() const {
    int64_t c = 1;
    for (const GemmLoopDim& d : loops) c *= d.size;
    return c;
  }
};

// batch: out's batch sizes; a_batch_strides, b_batch_strides: the operands'
// strides over them (0 where broadcast); a_rs..b_cs: their last two strides.
inline GemmPlan plan_gemm(const std::vector<int64_t>& batch, const std::vector<int64_t>& a_batch_strides,
                          const std::vector<int64_t>& b_batch_strides, int64_t M, int64_t N, int64_t K, int64_t a_rs,
                          int64_t a_cs, int64_t b_rs, int64_t b_cs) {
  GemmPlan p;
  p.m = M, p.n = N, p.k = K;
  p.a_rs = a_rs, p.a_cs = a_cs, p.b_rs = b_rs, p.b_cs = b_cs;
  // Batch dims without the size-1 ones, merged where both operands step
  // uniformly across them (out, contiguous, always does).
  std::vector<GemmLoopDim> dims;
  for (size_t d = 0; d < batch.size(); ++d) {
    int64_t s = batch[d], as = a_batch_strides[d], bs = b_batch_strides[d];
    if (s == 1) continue;
    if (!dims.empty() && dims.back().a_stride == as * s && dims.back().b_stride == bs * s) {
      dims.back() = {dims.back().size * s, as, bs, 0};
    } else {
      dims.push_back({s, as, bs, 0});
    }
  }
  int64_t c_stride = M * N;
  for (size_t d = dims.size(); d-- > 0;) {
    dims[d].c_stride = c_stride;
    c_stride *= dims[d].size;
  }

  // (B, M, K) @ (K, N) with a's matrices stacked at one row stride: one
  // (B*M, K) @ (K, N) GEMM, as torch.matmul folds it; out is contiguous, so
  // its (B, M, N) is the (B*M, N) result. Not when the stacked matrix would
  // need a copy that the separate ones do not.
  if (dims.size() == 1 && dims[0].b_stride == 0 && (M == 1 || dims[0].a_stride == M * a_rs)) {
    int64_t rows = dims[0].size * M, rs = M == 1 ? dims[0].a_stride : a_rs;
    if (!gemm_operand(rows, K, rs, a_cs).pack || gemm_operand(M, K, a_rs, a_cs).pack) {
      p.m = rows, p.a_rs = rs;
      dims.clear();
    }
  }

  // The largest dim (the innermost of equals) is the strided batch of each
  // call; the others are looped over on the host rather than copied into one
  // stride: a broadcast operand is never materialized, and the calls number
  // only the product of the smaller dims (e.g. 2 for (2, 3, M, K) @ (3, K, N)).
  if (!dims.empty()) {
    size_t best = dims.size() - 1;
    for (size_t d = dims.size(); d-- > 0;)
      if (dims[d].size > dims[best].size) best = d;
    p.count = dims[best].size;
    p.a_batch = dims[best].a_stride, p.b_batch = dims[best].b_stride, p.c_batch = dims[best].c_stride;
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(best));
    p.loops = std::move(dims);
  }
  p.a = gemm_operand(p.m, p.k, p.a_rs, p.a_cs);
  p.b = gemm_operand(p.k, p.n, p.b_rs, p.b_cs);
  return p;
}

// Element offsets of the operands for each call: f(a_offset, b_offset, c_offset).
template <typename F>
void for_each_gemm_call(const GemmPlan& p, F&& f) {
  int64_t calls = p.calls();
  for (int64_t i = 0; i < calls; ++i) {
    int64_t rem = i, ao = 0, bo = 0, co = 0;
    for (size_t d = p.loops.size(); d-- > 0;) {
      int64_t idx = rem % p.loops[d].size;
      rem /= p.loops[d].size;
      ao += idx * p.loops[d].a_stride;
      bo += idx * p.loops[d].b_stride;
      co += idx * p.loops[d].c_stride;
    }
    f(ao, bo, co);
  }
}

// What a packed operand's buffer holds per call: `count` (1 when the batch
// stride is 0) contiguous (rows x cols) matrices, `batch` elements apart.
struct PackedShape {
  int64_t count, rows, cols, batch;
  int64_t numel() const { return count * rows * cols; }
};
inline PackedShape packed_a(const GemmPlan& p) {
  return {p.a_batch == 0 ? 1 : p.count, p.m, p.k, p.a_batch == 0 ? 0 : p.m * p.k};
}
inline PackedShape packed_b(const GemmPlan& p) {
  return {p.b_batch == 0 ? 1 : p.count, p.k, p.n, p.b_batch == 0 ? 0 : p.k * p.n};
}

// One call in cuBLAS's column-major terms. A row-major (r x c) matrix is a
// column-major (c x r) one, so C = A @ B is computed as C^T = B^T @ A^T:
// cuBLAS's first operand is our b, its second our a, and its (m, n) our (n, m).
// A transposed (column-major) operand of ours becomes op = T.
struct CublasGemmArgs {
  bool trans_first = false, trans_second = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t ld_first = 1, ld_second = 1, ldc = 1;
  int64_t stride_first = 0, stride_second = 0, stride_c = 0;
  int64_t count = 1;
};

inline CublasGemmArgs cublas_gemm_args(const GemmPlan& p) {
  CublasGemmArgs g;
  g.m = p.n, g.n = p.m, g.k = p.k;
  g.trans_first = p.b.trans, g.ld_first = p.b.ld, g.stride_first = p.b.pack ? packed_b(p).batch : p.b_batch;
  g.trans_second = p.a.trans, g.ld_second = p.a.ld, g.stride_second = p.a.pack ? packed_a(p).batch : p.a_batch;
  g.ldc = std::max<int64_t>(1, p.n), g.stride_c = p.c_batch;
  g.count = p.count;
  return g;
}

// Whether cuBLAS's int-sized API takes the call (else its _64 variant).
inline bool fits_int32(const CublasGemmArgs& g) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return g.m <= kMax && g.n <= kMax && g.k <= kMax && g.ld_first <= kMax && g.ld_second <= kMax && g.ldc <= kMax &&
         g.count <= kMax;
}

}  // namespace tandem::cuda

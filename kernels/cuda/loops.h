// Index math of the CUDA elementwise launcher, in plain C++ that g++ and nvcc
// both compile, so that the CPU tests can prove it: a 32-bit divider by
// multiplication, the offset calculator that maps a linear index of a plan
// piece to each operand's byte offset, and the check for the vectorized path.
#pragma once

#include <cstdint>

#include "kernels/elementwise_plan.h"
#include "tensor/core/macros.h"

namespace tandem::cuda {

// n / d for 0 <= n, d <= 2^31 - 1 (d >= 1) by a multiply-high, add and
// shift: with s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1,
// n / d = (mulhi(n, m) + n) >> s. The sum cannot overflow since n < 2^31.
struct IntDivider {
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;

  IntDivider() = default;
  explicit IntDivider(uint32_t d) : divisor(d) {
    TANDEM_INTERNAL_ASSERT(d >= 1 && d <= uint32_t{kMax32BitIndex}, "IntDivider: divisor ", d, " out of range");
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  TANDEM_HD_INLINE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (t + n) >> shift;
  }
};

// Byte offsets of the N operands of one element.
template <int N>
struct Offsets {
  int32_t at[N];
};

// Linear index -> byte offset of each operand, for a plan piece that fits
// 32-bit indexing (for_each_32bit_piece). Dims are stored innermost first so
// that the unrolled loop indexes the kernel parameters with constants.
template <int N>
struct OffsetCalculator {
  int ndim = 0;
  IntDivider sizes[kMaxDims];
  int32_t strides[kMaxDims][N];

  OffsetCalculator() = default;
  // Over the first `ndim` dims of p (all of them by default).
  explicit OffsetCalculator(const ElementwisePlan<N>& p, int dims = -1) : ndim(dims < 0 ? p.ndim : dims) {
    TANDEM_INTERNAL_ASSERT(fits_32bit_indexing(p), "OffsetCalculator: plan needs 64-bit indexing");
    for (int i = 0; i < ndim; ++i) {
      const int d = ndim - 1 - i;
      sizes[i] = IntDivider(static_cast<uint32_t>(p.sizes[d]));
      // A size-1 dim (left by splitting) never moves; its stride may not fit.
      for (int k = 0; k < N; ++k) strides[i][k] = p.sizes[d] == 1 ? 0 : static_cast<int32_t>(p.strides[d][k]);
    }
  }

  TANDEM_HD_INLINE Offsets<N> get(uint32_t linear) const {
    Offsets<N> off;
    for (int k = 0; k < N; ++k) off.at[k] = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < kMaxDims; ++i) {
      if (i == ndim) break;
      // The outermost dim needs no division: what is left is its index.
      const uint32_t q = i == ndim - 1 ? 0 : sizes[i].div(linear);
      const int32_t idx = static_cast<int32_t>(linear - q * sizes[i].divisor);
      for (int k = 0; k < N; ++k) off.at[k] += idx * strides[i][k];
      linear = q;
    }
    return off;
  }
};

// Bytes per vector access of the vectorized path, and the elements per
// vector for operands of the given sizes: as many as make 16 bytes of the
// widest operand.
constexpr int kVectorBytes = 16;
template <typename... T>
constexpr int vector_elements() {
  int widest = 1;
  ((widest = widest < static_cast<int>(sizeof(T)) ? static_cast<int>(sizeof(T)) : widest), ...);
  return kVectorBytes / widest;
}

// Whether a plan piece can take the vectorized path with `vec` elements per
// vector: one dim, the output contiguous, each input contiguous or a single
// broadcast element (stride 0), and every moving operand's base aligned to
// a whole vector. elem_sizes[k] is operand k's element size. Sets bit k-1 of
// *broadcast for each broadcast input k.
template <int N>
bool can_vectorize(const ElementwisePlan<N>& p, const int (&elem_sizes)[N], int vec, uint32_t* broadcast) {
  if (p.ndim != 1) return false;
  uint32_t mask = 0;
  for (int k = 0; k < N; ++k) {
    const int64_t stride = p.strides[0][k];
    if (k > 0 && stride == 0) {
      mask |= uint32_t{1} << (k - 1);
      continue;
    }
    if (stride != elem_sizes[k]) return false;
    if (reinterpret_cast<uintptr_t>(p.data[k]) % (static_cast<uintptr_t>(elem_sizes[k]) * vec) != 0) return false;
  }
  *broadcast = mask;
  return true;
}

}  // namespace tandem::cuda

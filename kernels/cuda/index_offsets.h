// Linear index -> element offsets of N strided operands, for the CUDA
// indexing and cat kernels. The host builds the table (size-1 dims dropped,
// dims merged where every operand allows it, as the CPU's strided_plan); a
// thread evaluates it for its element. Plain C++ plus host+device marks, so
// g++ compiles it too.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

#include "tensor/core/errors.h"
#include "tensor/core/int_array_ref.h"
#include "tensor/core/macros.h"
#include "tensor/core/shape.h"

namespace tandem::cuda {

// As the CPU's plans (kernels/cpu/loops.h): dims that survive dropping and
// merging, which a tensor of any realistic shape stays under.
constexpr int kMaxOffsetDims = 16;

template <int N>
struct StridedOffsets {
  int ndim = 0;
  int64_t sizes[kMaxOffsetDims];       // innermost last
  int64_t strides[kMaxOffsetDims][N];  // in elements of each operand; 0 where it does not move

  // off[k] = operand k's element offset of row-major index `linear` of the
  // shape. I is the type the divisions run in: uint32_t when the element count
  // fits (a 64-bit division costs several times a 32-bit one on a GPU), else
  // uint64_t. Offsets are always 64-bit: strides can reach far.
  template <typename I>
  TANDEM_HD_INLINE void offsets(I linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const I size = static_cast<I>(sizes[d]);
      const I q = linear / size;
      const int64_t r = static_cast<int64_t>(linear - q * size);
      for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
      linear = q;
    }
    if (ndim > 0) {  // the outermost coordinate is what is left: no division
      for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(linear) * strides[0][k];
    }
  }
};

// Whether a launch over n elements can index them in 32 bits.
inline bool fits_u32(int64_t n) { return n <= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()); }

// The table for `shape` and each operand's element strides at that shape.
// op names the caller in the error for too many dims.
template <int N>
StridedOffsets<N> make_strided_offsets(IntArrayRef shape, const std::array<Shape, N>& strides, const char* op) {
  StridedOffsets<N> t;
  int64_t sizes_rev[kMaxOffsetDims];
  int64_t strides_rev[kMaxOffsetDims][N];
  int nd = 0;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < N && merge; ++k) merge = strides[k][i] == strides_rev[nd - 1][k] * sizes_rev[nd - 1];
    if (merge) {
      sizes_rev[nd - 1] *= shape[i];
      continue;
    }
    TANDEM_CHECK(nd < kMaxOffsetDims, ShapeError, op, ": the CUDA kernel supports at most ", kMaxOffsetDims,
                 " non-mergeable dimensions of size > 1 (shape ", shape_str(shape), ")");
    sizes_rev[nd] = shape[i];
    for (int k = 0; k < N; ++k) strides_rev[nd][k] = strides[k][i];
    ++nd;
  }
  t.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    t.sizes[d] = sizes_rev[nd - 1 - d];
    for (int k = 0; k < N; ++k) t.strides[d][k] = strides_rev[nd - 1 - d][k];
  }
  return t;
}

}  // namespace tandem::cuda

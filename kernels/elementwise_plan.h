// The elementwise plan both backends walk: the output and its inputs viewed
// at the output's shape (broadcast dims get stride 0), size-1 dims dropped
// and dims merged where every operand is contiguous across them. Host code
// only, compiled by g++ and nvcc; kernels/cpu/loops.h and kernels/cuda/loops.h
// apply functors over it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "tensor/core/shape.h"
#include "tensor/core/tensor.h"

namespace tandem {

constexpr int kMaxDims = 16;

// N operands, the output first. Sizes and strides are innermost-last;
// strides are in bytes.
template <int N>
struct ElementwisePlan {
  int ndim = 0;
  int64_t numel = 1;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];
  char* data[N];
};

// A plan over `shape` for N operands given by base pointers and byte strides
// (0 where an operand does not move along a dim). Size-1 dims are dropped and
// a dim is merged into the one inside it when every operand allows it.
template <int N>
ElementwisePlan<N> strided_plan(IntArrayRef shape, const std::array<char*, N>& data,
                                const std::array<Shape, N>& byte_strides) {
  ElementwisePlan<N> p;
  for (int k = 0; k < N; ++k) p.data[k] = data[k];
  p.numel = shape_numel(shape);
  // Walk from the innermost dim outwards.
  int nd = 0;
  int64_t sizes_rev[kMaxDims];
  int64_t strides_rev[kMaxDims][N];
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < N && merge; ++k) merge = byte_strides[k][i] == strides_rev[nd - 1][k] * sizes_rev[nd - 1];
    if (merge) {
      sizes_rev[nd - 1] *= shape[i];
    } else {
      // Only dims that survive dropping and merging count against the limit.
      TANDEM_CHECK(nd < kMaxDims, ShapeError, "elementwise ops support at most ", kMaxDims,
                   " non-mergeable dimensions of size > 1 (shape ", shape_str(shape), ")");
      sizes_rev[nd] = shape[i];
      for (int k = 0; k < N; ++k) strides_rev[nd][k] = byte_strides[k][i];
      ++nd;
    }
  }
  p.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    p.sizes[d] = sizes_rev[nd - 1 - d];
    for (int k = 0; k < N; ++k) p.strides[d][k] = strides_rev[nd - 1 - d][k];
  }
  return p;
}

// The plan for an output (ops[0]) and inputs that broadcast to its shape.
template <int N>
ElementwisePlan<N> make_plan(const std::array<const Tensor*, N>& ops) {
  IntArrayRef shape = ops[0]->sizes();
  std::array<char*, N> data;
  std::array<Shape, N> byte_strides;
  for (int k = 0; k < N; ++k) {
    data[k] = static_cast<char*>(ops[k]->data_ptr());
    byte_strides[k] = broadcast_strides(ops[k]->sizes(), ops[k]->strides(), shape);
    for (int64_t& st : byte_strides[k]) st *= static_cast<int64_t>(ops[k]->element_size());
  }
  return strided_plan<N>(shape, data, byte_strides);
}

// ---- 32-bit indexing (the CUDA launcher's index math)

constexpr int64_t kMax32BitIndex = std::numeric_limits<int32_t>::max();

// Whether every linear index of p and every byte offset of every operand
// (from its base pointer) fits a signed 32-bit int (is at most `limit`,
// which the tests lower).
template <int N>
bool fits_32bit_indexing(const ElementwisePlan<N>& p, int64_t limit = kMax32BitIndex) {
  if (p.numel > limit) return false;
  for (int k = 0; k < N; ++k) {
    int64_t extent = 0;  // the largest |offset| of operand k
    for (int d = 0; d < p.ndim; ++d) {
      extent += (p.sizes[d] - 1) * std::llabs(p.strides[d][k]);
      if (extent > limit) return false;
    }
  }
  return true;
}

// Calls f(piece) for sub-plans that together cover p exactly once and each
// fit 32-bit indexing; p itself when it fits. A plan that does not fit is
// halved along the dim whose largest operand extent is greatest; the
// innermost dim is cut at a multiple of 16 elements where it can be, so that
// a contiguous piece keeps the 16-byte alignment of its base.
template <int N, typename F>
void for_each_32bit_piece(const ElementwisePlan<N>& p, const F& f, int64_t limit = kMax32BitIndex) {
  if (p.numel == 0) return;
  if (fits_32bit_indexing(p, limit)) return f(p);
  int split = -1;
  int64_t best = -1;
  for (int d = 0; d < p.ndim; ++d) {
    if (p.sizes[d] < 2) continue;
    int64_t stride = 1;  // a dim moving no operand still counts by its size
    for (int k = 0; k < N; ++k) stride = std::max<int64_t>(stride, std::llabs(p.strides[d][k]));
    // size * stride cannot overflow: each operand's extent fits in memory.
    const int64_t extent = p.sizes[d] * stride;
    if (extent > best) {
      best = extent;
      split = d;
    }
  }
  // A plan that does not fit has numel > 1, hence a dim of size >= 2.
  TANDEM_INTERNAL_ASSERT(split >= 0, "for_each_32bit_piece: no dim to split");
  int64_t half = p.sizes[split] / 2;
  if (split == p.ndim - 1 && half >= 16) half -= half % 16;
  ElementwisePlan<N> lo = p, hi = p;
  lo.sizes[split] = half;
  hi.sizes[split] = p.sizes[split] - half;
  lo.numel = p.numel / p.sizes[split] * half;
  hi.numel = p.numel - lo.numel;
  for (int k = 0; k < N; ++k) hi.data[k] = p.data[k] + half * p.strides[split][k];
  for_each_32bit_piece<N>(lo, f, limit);
  for_each_32bit_piece<N>(hi, f, limit);
}

}  // namespace tandem

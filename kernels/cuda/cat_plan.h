// cat's launch plan for the CUDA kernel: the parameter blocks that carry
// every input's pointer, sizes and strides, batched so that one launch copies
// up to kCatBatch inputs, and the offset arithmetic a thread runs. Host+device
// plain C++, so the plan and the arithmetic are testable without a GPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/index_offsets.h"
#include "tensor/core/tensor.h"

namespace tandem::cuda {

// Dims kept per input in the parameter block, and inputs per launch: 32
// entries of 112 bytes stay within the classic 4 KB of kernel parameters.
constexpr int kCatDims = 4;
constexpr int kCatBatch = 32;

// An input, or a run of its row-major elements [first, first + numel) when its
// strides need more than kCatDims dims (it is then split along its outer dims
// into several entries, each a strided block of at most kCatDims dims).
struct CatInput {
  const void* data;    // the run's first element
  int64_t first;       // the run's first row-major index within the input
  int64_t numel;       // elements in the run
  int64_t out_offset;  // out's element of the input's first element: its offset along dim times inner
  int64_t chunk;       // the input's elements per outer row: size(dim) * inner
  int32_t ndim;
  int64_t sizes[kCatDims];
  int64_t strides[kCatDims];  // in elements
};

struct CatBatch {
  void* out;
  int64_t out_row;  // out's elements per outer row: out.size(dim) * inner
  int32_t count;
  CatInput inputs[kCatBatch];
};
static_assert(sizeof(CatInput) == 112 && sizeof(CatBatch) <= 4096,
              "cat's parameter block must fit 4 KB of kernel parameters");

// Element j of entry e: its offset in the input's elements (from e.data)...
template <typename I>
TANDEM_HD_INLINE int64_t cat_source_offset(const CatInput& e, I j) {
  int64_t off = 0;
  for (int d = e.ndim - 1; d > 0; --d) {
    const I s = static_cast<I>(e.sizes[d]);
    const I q = j / s;
    off += static_cast<int64_t>(j - q * s) * e.strides[d];
    j = q;
  }
  if (e.ndim > 0) off += static_cast<int64_t>(j) * e.strides[0];
  return off;
}
// ... and its offset in out's elements. I must hold e.first + e.numel.
template <typename I>
TANDEM_HD_INLINE int64_t cat_out_offset(const CatInput& e, int64_t out_row, I j) {
  const I linear = static_cast<I>(e.first) + j;
  const I chunk = static_cast<I>(e.chunk);
  const I row = linear / chunk;
  return static_cast<int64_t>(row) * out_row + e.out_offset + static_cast<int64_t>(linear - row * chunk);
}

// What one launch covers: the batch, the largest entry (for the grid) and
// the largest row-major index (for the index width).
struct CatLaunch {
  CatBatch batch;
  int64_t max_numel = 0;
  int64_t max_index = 0;
};

// The launches that copy inputs into out (contiguous, the cat along dim):
// entries in input order, a 1-D empty input beside a higher-dimensional out
// and inputs without elements skipped.
inline std::vector<CatLaunch> plan_cat(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  std::vector<CatLaunch> launches;
  auto add = [&](const CatInput& e) {
    if (launches.empty() || launches.back().batch.count == kCatBatch) {
      launches.emplace_back();
      CatBatch& b = launches.back().batch;
      b = CatBatch{};
      b.out = out.data_ptr();
      b.out_row = out.size(dim) * inner;
    }
    CatLaunch& l = launches.back();
    l.batch.inputs[l.batch.count++] = e;
    l.max_numel = std::max(l.max_numel, e.numel);
    l.max_index = std::max(l.max_index, e.first + e.numel);
  };

  int64_t offset = 0;  // along dim
  for (const Tensor& t : inputs) {
    if (t.dim() != out.dim()) continue;  // a legacy 1-D empty input
    const int64_t size = t.size(dim);
    if (t.numel() > 0) {
      auto p = make_strided_offsets<1>(t.sizes(), {t.strides().vec()}, "cat");
      // The outer `split` dims become runs: one entry per coordinate.
      const int split = std::max(p.ndim - kCatDims, 0);
      int64_t runs = 1;
      for (int d = 0; d < split; ++d) runs *= p.sizes[d];
      const int64_t run_numel = t.numel() / runs;
      for (int64_t r = 0; r < runs; ++r) {
        int64_t base = 0, rem = r;
        for (int d = split - 1; d >= 0; --d) {
          base += (rem % p.sizes[d]) * p.strides[d][0];
          rem /= p.sizes[d];
        }
        CatInput e{};
        e.data = static_cast<const char*>(t.data_ptr()) + base * static_cast<int64_t>(t.element_size());
        e.first = r * run_numel;
        e.numel = run_numel;
        e.out_offset = offset * inner;
        e.chunk = size * inner;
        e.ndim = p.ndim - split;
        for (int d = 0; d < e.ndim; ++d) {
          e.sizes[d] = p.sizes[split + d];
          e.strides[d] = p.strides[split + d][0];
        }
        add(e);
      }
    }
    offset += size;
  }
  return launches;
}

}  // namespace tandem::cuda

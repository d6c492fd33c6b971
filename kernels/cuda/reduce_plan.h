// Host-side planning of the CUDA reductions and softmax, compiled by nvcc for
// the launchers and by g++ for the CPU unit tests: how the dims of a reduction
// are ordered, merged and indexed (ReduceLayout), and the launch shape chosen
// for them (ReduceLaunch, SoftmaxLaunch). The index arithmetic (IndexDivider,
// OffsetCalc) runs on the device too.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/core/errors.h"
#include "tensor/core/macros.h"
#include "tensor/core/shape.h"
#include "tensor/core/tensor.h"

// Index loops stay rolled on the device: one OffsetCalc is expanded at
// every load site of every kernel instantiation, and unrolled over 16 dims
// it multiplies the compile time; the dims live in the kernel's parameter
// space (__grid_constant__), which takes a register index.
#if defined(__CUDA_ARCH__)
#define TANDEM_NO_UNROLL _Pragma("unroll 1")
#else
#define TANDEM_NO_UNROLL
#endif
#if defined(__CUDACC__)
#define TANDEM_HD_NOINLINE __host__ __device__ __noinline__
#else
#define TANDEM_HD_NOINLINE
#endif

namespace tandem::cuda {

inline constexpr int kMaxReduceDims = 16;   // as the CPU engine
inline constexpr int kReduceThreads = 512;  // most threads in a reduction block
inline constexpr int kMaxSplits = 65535;    // grid y limit
// A thread keeps folding at least this many items (vectors or elements)
// before the planner splits a reduction further across blocks.
inline constexpr int64_t kMinItemsPerThread = 8;
// Softmax rows up to kSoftmaxThreads lanes of kSoftmaxSlotBytes of opmath
// values each (32768 floats, 16384 doubles) live in registers (one read, one
// exp per element); longer rows take two passes.
inline constexpr int kSoftmaxSlotBytes = 128;
inline constexpr int kSoftmaxThreads = 1024;
inline constexpr int kSoftmaxColumnThreads = 512;

namespace plan {
// The 64-bit division, out of line: rare, and long.
TANDEM_HD_NOINLINE inline uint64_t divide_slow(uint64_t n, uint64_t d) { return n / d; }
inline int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }
// The smallest power of two >= n (1 for n <= 1).
inline int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}
}  // namespace plan

// n / d for a divisor fixed when the plan is made. Index arithmetic runs per
// element, and a 64-bit division costs tens of instructions on a GPU; for n
// and d below 2^32 a multiply-high, an add and a shift give the same quotient
// (Granlund and Montgomery's round-up method: with s = ceil(log2 d) and
// magic = floor(2^32 (2^s - d) / d) + 1, n / d = (mulhi(n, magic) + n) >> s,
// where the add is done in 64 bits).
struct IndexDivider {
  uint64_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;
  bool fast = true;  // divisor < 2^32

  IndexDivider() = default;
  explicit IndexDivider(uint64_t d) : divisor(d) {
    TANDEM_INTERNAL_ASSERT(d > 0, "IndexDivider: division by zero");
    fast = d < (uint64_t{1} << 32);
    if (!fast) return;
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  TANDEM_HD_INLINE uint64_t div(uint64_t n) const {
    if (fast && n <= 0xffffffffu) {
      const uint32_t n32 = static_cast<uint32_t>(n);
#if defined(__CUDA_ARCH__)
      const uint32_t hi = __umulhi(n32, magic);
#else
      const uint32_t hi = static_cast<uint32_t>((uint64_t{n32} * magic) >> 32);
#endif
      return (uint64_t{hi} + n32) >> shift;
    }
    return plan::divide_slow(n, divisor);
  }
};

// Input and output element offsets of a linear index over a group of dims,
// stored innermost first (the innermost dim varies fastest with the index).
struct OffsetCalc {
  int n = 0;
  IndexDivider sizes[kMaxReduceDims];
  int64_t in_strides[kMaxReduceDims] = {};
  int64_t out_strides[kMaxReduceDims] = {};

  TANDEM_HD_INLINE void offsets(uint64_t i, int64_t& in_off, int64_t& out_off) const {
    in_off = 0;
    out_off = 0;
    TANDEM_NO_UNROLL
    for (int d = 0; d + 1 < n; ++d) {
      const uint64_t q = sizes[d].div(i);
      const auto idx = static_cast<int64_t>(i - q * sizes[d].divisor);
      in_off += idx * in_strides[d];
      out_off += idx * out_strides[d];
      i = q;
    }
    // The outermost dim takes what is left whole.
    if (n > 0) {
      in_off += static_cast<int64_t>(i) * in_strides[n - 1];
      out_off += static_cast<int64_t>(i) * out_strides[n - 1];
    }
  }
  TANDEM_HD_INLINE int64_t in_offset(uint64_t i) const {
    int64_t off = 0;
    TANDEM_NO_UNROLL
    for (int d = 0; d + 1 < n; ++d) {
      const uint64_t q = sizes[d].div(i);
      off += static_cast<int64_t>(i - q * sizes[d].divisor) * in_strides[d];
      i = q;
    }
    if (n > 0) off += static_cast<int64_t>(i) * in_strides[n - 1];
    return off;
  }
  int64_t size(int d) const { return static_cast<int64_t>(sizes[d].divisor); }
};

// One reduction seen from the device: the kept dims index the outputs, the
// reduced dims each output's elements.
struct ReduceLayout {
  OffsetCalc kept;     // output index -> (input offset, output offset)
  OffsetCalc reduced;  // reduced index -> input offset (from the output's)
  int64_t num_outputs = 1;
  int64_t reduce_numel = 1;
  // Each output's reduced elements form one run of stride 1 (or there is
  // one element): rows fold it with vector loads.
  bool contiguous_run = false;
  // Neighbouring outputs are closer in memory than neighbouring reduced
  // elements: threads own outputs and walk the reduction together.
  bool columns = false;
};

// Views out (the keepdim shape) against in, as the CPU engine does: dims of
// size 1 dropped, reduced dims ordered by input stride (the fold order is
// free, and the smallest stride goes innermost), kept dims likewise (each
// output finds its own offsets, so their order only decides which outputs
// neighbouring threads own), then dims merged where the strides line up.
// A reduction over one dim keeps its index as the linear reduced index,
// which the arg reductions report.
inline ReduceLayout make_reduce_layout(const Tensor& out, const Tensor& in) {
  TANDEM_INTERNAL_ASSERT(out.dim() == in.dim(), "reduce: the output must have the input's rank (keepdim shape)");
  struct Dim {
    int64_t size, in_stride, out_stride;
  };
  Dim kept[kMaxReduceDims], red[kMaxReduceDims];
  int nk = 0, nr = 0;
  bool empty_output = false, empty_reduction = false;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const int64_t size = in.size(d);
    if (size == 1) continue;
    TANDEM_CHECK(nk + nr < kMaxReduceDims, ShapeError, "reductions support at most ", kMaxReduceDims,
                 " dimensions of size other than 1, but the input has shape ", shape_str(in.sizes()));
    if (out.size(d) == 1) {
      red[nr++] = {size, in.stride(d), 0};
      empty_reduction |= size == 0;
    } else {
      kept[nk++] = {size, in.stride(d), out.stride(d)};
      empty_output |= size == 0;
    }
  }
  ReduceLayout l;
  if (empty_output) {
    l.num_outputs = 0;
    return l;
  }
  if (empty_reduction) nr = 0;  // nothing is read: every output is the identity

  // Outermost first: larger strides first, ties broken by the output stride.
  auto outer_first = [](const Dim& a, const Dim& b) {
    return a.in_stride != b.in_stride ? a.in_stride > b.in_stride : a.out_stride > b.out_stride;
  };
  std::stable_sort(kept, kept + nk, outer_first);
  std::stable_sort(red, red + nr, outer_first);
  auto merge = [](Dim* dims, int n) {
    int w = 0;
    for (int d = 0; d < n; ++d) {
      if (w > 0 && dims[w - 1].in_stride == dims[d].in_stride * dims[d].size &&
          dims[w - 1].out_stride == dims[d].out_stride * dims[d].size) {
        dims[w - 1] = {dims[w - 1].size * dims[d].size, dims[d].in_stride, dims[d].out_stride};
      } else {
        dims[w++] = dims[d];
      }
    }
    return w;
  };
  nk = merge(kept, nk);
  nr = merge(red, nr);
  auto fill = [](OffsetCalc& c, const Dim* dims, int n) {
    c.n = n;
    for (int i = 0; i < n; ++i) {
      const Dim& d = dims[n - 1 - i];
      c.sizes[i] = IndexDivider(static_cast<uint64_t>(d.size));
      c.in_strides[i] = d.in_stride;
      c.out_strides[i] = d.out_stride;
    }
  };
  fill(l.kept, kept, nk);
  fill(l.reduced, red, nr);
  for (int i = 0; i < nk; ++i) l.num_outputs *= kept[i].size;
  l.reduce_numel = empty_reduction ? 0 : 1;
  for (int i = 0; i < nr; ++i) l.reduce_numel *= red[i].size;

  l.contiguous_run = nr == 0 || (nr == 1 && red[0].in_stride == 1);
  if (nk > 0 && nr > 0 && !l.contiguous_run) {
    const int64_t kept_stride = l.kept.in_strides[0], red_stride = l.reduced.in_strides[0];
    // With several kept dims, a short innermost one would give each warp
    // many scattered pieces; walking the reduced dim then reads better.
    l.columns = kept_stride < red_stride && red_stride != 1 && (nk == 1 || l.kept.size(0) >= 32);
  }
  return l;
}

// How a reduction is launched.
//  rows: block (block_x, block_y); block_x threads fold each output
//    (lanes over its reduced elements), block_y outputs per block, grid_x
//    blocks of outputs.
//  columns: block_x threads own vec_outputs consecutive outputs each,
//    block_y threads split the reduction, grid_x blocks of outputs.
// splits > 1: grid y splits each reduction in slices of split_size reduced
// indices; every block writes its partial accumulators to a workspace
// [split][output], and a second kernel (block (finalize_x, finalize_y),
// finalize_grid blocks) merges them and writes the outputs.
struct ReduceLaunch {
  int block_x = 1, block_y = 32;
  int64_t grid_x = 1;
  int64_t splits = 1;
  int64_t split_size = 0;
  int vec_outputs = 1;
  int finalize_x = 1, finalize_y = 1;
  int64_t finalize_grid = 0;
};

// vec: elements of the input type per vector load. in_aligned: the input's
// first element sits on a vector boundary. resident_threads: threads the
// whole GPU keeps in flight for this kernel, what the grid should fill.
inline ReduceLaunch plan_reduce_launch(const ReduceLayout& l, int vec, bool in_aligned, int64_t resident_threads) {
  using plan::div_up;
  using plan::pow2_at_least;
  ReduceLaunch L;
  const int64_t N = l.num_outputs, R = l.reduce_numel;
  if (N == 0) return L;
  int64_t bx, by, items;  // items: what each thread folds without splits
  if (!l.columns) {
    const int64_t work = l.contiguous_run ? div_up(R, vec) : R;  // vectors or elements per output
    bx = pow2_at_least(std::clamp<int64_t>(work, 1, 32));
    by = std::min(pow2_at_least(N), kReduceThreads / bx);
    // Widen each output's group while the GPU would otherwise idle and
    // every thread keeps enough to fold (long rows: a block per row).
    while (bx < kReduceThreads && work >= 2 * bx * kMinItemsPerThread && N < resident_threads / bx) {
      bx *= 2;
      by = std::min(by, kReduceThreads / bx);
    }
    by = std::max(by, 32 / bx);  // whole warps
    L.grid_x = div_up(N, by);
    items = div_up(work, bx);
  } else {
    bool vectorize = vec > 1 && in_aligned && l.kept.in_strides[0] == 1 && l.kept.size(0) % vec == 0;
    for (int d = 1; d < l.kept.n; ++d) vectorize = vectorize && l.kept.in_strides[d] % vec == 0;
    for (int d = 0; d < l.reduced.n; ++d) vectorize = vectorize && l.reduced.in_strides[d] % vec == 0;
    L.vec_outputs = vectorize ? vec : 1;
    const int64_t lanes = div_up(N, L.vec_outputs);  // threads across the outputs
    bx = pow2_at_least(std::min<int64_t>(lanes, 32));
    by = std::min(pow2_at_least(R), kReduceThreads / bx);
    bx = std::min(pow2_at_least(lanes), kReduceThreads / by);  // short reductions: more outputs per block
    by = std::max(by, 32 / bx);
    L.grid_x = div_up(lanes, bx);
    items = div_up(R, by);
  }
  L.block_x = static_cast<int>(bx);
  L.block_y = static_cast<int>(by);
  L.split_size = R;
  const int64_t threads = L.grid_x * bx * by;
  // Split only when the blocks would fill at most half the GPU (a second
  // wave of blocks costs less than a workspace and a second kernel), and
  // into at most one wave: a few blocks in a second wave would double the
  // time of the last ones.
  if (R > 0 && 2 * threads <= resident_threads && items >= 2 * kMinItemsPerThread) {
    int64_t splits = std::min({resident_threads / threads, items / kMinItemsPerThread, int64_t{kMaxSplits}});
    // Slices of whole rounds of the block, so that vector runs stay aligned.
    const int64_t granule = l.columns ? by : (l.contiguous_run ? bx * vec : bx);
    L.split_size = div_up(div_up(R, splits), granule) * granule;
    L.splits = div_up(R, L.split_size);
  }
  if (L.splits > 1) {
    L.finalize_x = static_cast<int>(pow2_at_least(std::min<int64_t>(L.splits, 32)));
    L.finalize_y = 256 / L.finalize_x;
    L.finalize_grid = div_up(N, L.finalize_y);
  }
  return L;
}

// How softmax is launched over (outer, n, inner), the input viewed around
// the softmax dim of size n.
//  Registers (inner == 1, n <= per_thread * kSoftmaxThreads): block
//    (block_x, block_y), block_x lanes per row holding up to per_thread
//    elements each in registers, block_y rows per block.
//  Online (inner == 1, longer rows): a block per row, two passes over memory.
//  Columns (inner > 1): block_x threads over the inner index, block_y
//    threads split the softmax dim; grid = outer * ceil(inner / block_x).
struct SoftmaxLaunch {
  enum Kind { Registers, Online, Columns };
  Kind kind = Registers;
  int block_x = 1, block_y = 1;
  int64_t grid = 0;
  bool vectorized = false;  // rows: vector loads and stores
};

// The element of a softmax row that register slot s of lane `lane` (of g
// lanes per row) holds: slots go across the lanes one element at a time, or
// one vector of vec elements at a time.
TANDEM_HD_INLINE int64_t softmax_slot_index(int s, int64_t lane, int64_t g, int vec, bool vectorized) {
  return vectorized ? ((s / vec) * g + lane) * vec + s % vec : s * g + lane;
}

// vec: elements per vector load; per_thread: register slots per lane (a
// multiple of vec); aligned: input and output start on a vector boundary.
inline SoftmaxLaunch plan_softmax(int64_t outer, int64_t n, int64_t inner, int vec, int per_thread, bool aligned) {
  using plan::div_up;
  using plan::pow2_at_least;
  SoftmaxLaunch L;
  if (inner > 1) {
    L.kind = SoftmaxLaunch::Columns;
    int64_t bx = pow2_at_least(std::min<int64_t>(inner, 32));
    int64_t by = std::min(pow2_at_least(n), kSoftmaxColumnThreads / bx);
    by = std::max(by, 32 / bx);
    L.block_x = static_cast<int>(bx);
    L.block_y = static_cast<int>(by);
    L.grid = outer * div_up(inner, bx);
    return L;
  }
  L.vectorized = aligned && n % vec == 0;
  if (n <= int64_t{per_thread} * kSoftmaxThreads) {
    L.kind = SoftmaxLaunch::Registers;
    const int64_t g = pow2_at_least(div_up(n, per_thread));
    L.block_x = static_cast<int>(g);
    L.block_y = static_cast<int>(std::max<int64_t>(1, 128 / g));
    L.grid = div_up(outer, L.block_y);
    return L;
  }
  L.kind = SoftmaxLaunch::Online;
  L.block_x = kSoftmaxThreads;
  L.block_y = 1;
  L.grid = outer;
  return L;
}

}  // namespace tandem::cuda

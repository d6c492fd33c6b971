// The CPU reduction engine and the kernels built on it. A ReducePlan views the
// output (keepdim shape) against the input and splits the dims into kept and
// reduced ones, fused where contiguous. Two loops cover every layout:
//  - rows: each output folds its reduced sub-space run by run, a tight loop
//    when the innermost run is contiguous (sum over the last dim);
//  - columns: the innermost kept dim is contiguous and the reduced dims lie
//    outside it (sum over dim 0 of (N, C)): whole input rows are folded into a
//    row of accumulators instead of walking strided columns.
// Long folds are cascaded (pairwise over blocks) so float sums stay accurate,
// and are split across threads when there are too few outputs to share out.
// Softmax: kernels/cpu/softmax.cpp.
#include "kernels/reduce.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/functors/reduce.h"
#include "tensor/core/shape.h"

namespace tandem::cpu {

namespace {

constexpr int kMaxReduceDims = 16;
// Below this many input elements a reduction runs on one thread.
constexpr int64_t kReduceGrain = 32768;
// Folds this short skip the cascade (its error bound is already small).
constexpr int64_t kShortFold = 16;
// The columns loop folds whole input rows into a row of accumulators up to
// kColumnBytes wide (L1-sized), kRowBlock rows per leaf block. Wide rows keep
// the reads streaming; narrow column strips would jump a row stride per
// element and wait on memory.
constexpr int64_t kColumnBytes = 16384;
constexpr int64_t kRowBlock = 128;
template <typename A>
constexpr int64_t kColumns = std::max<int64_t>(16, kColumnBytes / static_cast<int64_t>(sizeof(A)));

// Sizes and element strides of a group of dims, outermost first.
struct DimGroup {
  int n = 0;
  int64_t sizes[kMaxReduceDims];
  int64_t in_strides[kMaxReduceDims];
  int64_t out_strides[kMaxReduceDims];

  void push(int64_t size, int64_t in_stride, int64_t out_stride) {
    sizes[n] = size;
    in_strides[n] = in_stride;
    out_strides[n] = out_stride;
    ++n;
  }
  int64_t numel() const {
    int64_t total = 1;
    for (int d = 0; d < n; ++d) total *= sizes[d];
    return total;
  }
  // Fuses a dim into the one outside it when both strides line up, so that
  // a contiguous block becomes one long run.
  void merge() {
    int w = 0;
    for (int d = 0; d < n; ++d) {
      if (w > 0 && in_strides[w - 1] == in_strides[d] * sizes[d] && out_strides[w - 1] == out_strides[d] * sizes[d]) {
        sizes[w - 1] *= sizes[d];
        in_strides[w - 1] = in_strides[d];
        out_strides[w - 1] = out_strides[d];
      } else {
        sizes[w] = sizes[d];
        in_strides[w] = in_strides[d];
        out_strides[w] = out_strides[d];
        ++w;
      }
    }
    n = w;
  }
};

struct ReducePlan {
  DimGroup kept;     // the output's dims, in order
  DimGroup reduced;  // by input stride, largest first: the innermost run is the cheapest to walk
  int64_t num_outputs = 1;
  int64_t reduce_numel = 1;

  bool columns() const {
    return kept.n > 0 && reduced.n > 0 && kept.in_strides[kept.n - 1] == 1 && kept.out_strides[kept.n - 1] == 1;
  }
};

ReducePlan make_plan(const Tensor& out, const Tensor& in) {
  TANDEM_INTERNAL_ASSERT(out.dim() == in.dim(), "reduce: the output must have the input's rank (keepdim shape)");
  ReducePlan p;
  for (int64_t d = 0; d < in.dim(); ++d) {
    int64_t size = in.size(d);
    if (size == 1) continue;
    TANDEM_CHECK(p.kept.n + p.reduced.n < kMaxReduceDims, ShapeError, "reductions support at most ", kMaxReduceDims,
                 " dimensions of size other than 1, but the input has shape ", shape_str(in.sizes()));
    if (out.size(d) == 1)
      p.reduced.push(size, in.stride(d), 0);
    else
      p.kept.push(size, in.stride(d), out.stride(d));
  }
  // Reduced dims by input stride, largest first, so that the innermost run is
  // the densest even for a permuted input (the fold order is free).
  DimGroup& r = p.reduced;
  for (int i = 1; i < r.n; ++i) {
    for (int j = i; j > 0 && r.in_strides[j - 1] < r.in_strides[j]; --j) {
      std::swap(r.sizes[j - 1], r.sizes[j]);
      std::swap(r.in_strides[j - 1], r.in_strides[j]);
    }
  }
  p.kept.merge();
  p.reduced.merge();
  p.num_outputs = p.kept.numel();
  p.reduce_numel = p.reduced.numel();
  return p;
}

// A multi-index over the first n dims of a group, with its input and output
// element offsets kept up to date. The dims must be non-empty.
struct Walker {
  const DimGroup& g;
  int n;
  int64_t idx[kMaxReduceDims];
  int64_t in_off = 0, out_off = 0;

  Walker(const DimGroup& group, int ndims, int64_t linear) : g(group), n(ndims) {
    for (int d = n - 1; d >= 0; --d) {
      idx[d] = linear % g.sizes[d];
      linear /= g.sizes[d];
      in_off += idx[d] * g.in_strides[d];
      out_off += idx[d] * g.out_strides[d];
    }
  }
  void next() {
    for (int d = n - 1; d >= 0; --d) {
      in_off += g.in_strides[d];
      out_off += g.out_strides[d];
      if (++idx[d] < g.sizes[d]) return;
      in_off -= g.in_strides[d] * g.sizes[d];
      out_off -= g.out_strides[d] * g.sizes[d];
      idx[d] = 0;
    }
  }
};

// Calls f(in_offset, n, stride, index) for the runs along the innermost
// reduced dim that cover linear indices [r0, r1) of the reduced space.
template <typename F>
void for_each_run(const DimGroup& red, int64_t r0, int64_t r1, const F& f) {
  if (red.n == 0) {
    if (r0 < r1) f(int64_t{0}, int64_t{1}, int64_t{0}, r0);
    return;
  }
  const int last = red.n - 1;
  const int64_t inner = red.sizes[last], stride = red.in_strides[last];
  Walker outer(red, last, r0 / inner);
  int64_t j = r0 % inner;
  for (int64_t pos = r0; pos < r1;) {
    int64_t n = std::min(inner - j, r1 - pos);
    f(outer.in_off + j * stride, n, stride, pos);
    pos += n;
    j = 0;
    outer.next();
  }
}

// Cascade folding: kLanes independent accumulators (instruction-level
// parallelism) fill a leaf block of kBlock elements; finished blocks merge
// pairwise like a binary counter. The error of a float sum then grows with
// kBlock / kLanes + log2(n / kBlock) rather than with n.
template <typename Ops>
class Cascade {
 public:
  using acc_t = typename Ops::acc_t;
  using in_t = typename Ops::in_t;
  static constexpr int kLanes = 8;
  static constexpr int64_t kBlock = 1024;

  explicit Cascade(const Ops& ops) : ops_(ops) { reset(); }

  template <typename In>
  void feed(const In* p, int64_t n, int64_t stride, int64_t index) {
    while (n > 0) {
      const int64_t take = std::min(n, kBlock - fill_);
      acc_t l[kLanes];
      for (int k = 0; k < kLanes; ++k) l[k] = lanes_[k];
      int64_t i = 0;
      if (stride == 1) {
        for (; i + kLanes <= take; i += kLanes)
          for (int k = 0; k < kLanes; ++k) l[k] = ops_.reduce(l[k], static_cast<in_t>(p[i + k]), index + i + k);
      } else {
        for (; i + kLanes <= take; i += kLanes)
          for (int k = 0; k < kLanes; ++k)
            l[k] = ops_.reduce(l[k], static_cast<in_t>(p[(i + k) * stride]), index + i + k);
      }
      for (; i < take; ++i) l[0] = ops_.reduce(l[0], static_cast<in_t>(p[i * stride]), index + i);
      for (int k = 0; k < kLanes; ++k) lanes_[k] = l[k];
      n -= take;
      index += take;
      fill_ += take;
      if (fill_ == kBlock) {
        push(fold_lanes());
        reset();
      }
      if (n > 0) p += take * stride;
    }
  }

  acc_t result() const {
    acc_t r = fold_lanes();
    for (int l = 0; (blocks_ >> l) != 0; ++l)
      if ((blocks_ >> l) & 1) r = ops_.combine(levels_[l], r);
    return r;
  }

 private:
  static_assert(kLanes == 8, "fold_lanes merges exactly eight lanes");
  acc_t fold_lanes() const {
    acc_t a = ops_.combine(ops_.combine(lanes_[0], lanes_[1]), ops_.combine(lanes_[2], lanes_[3]));
    acc_t b = ops_.combine(ops_.combine(lanes_[4], lanes_[5]), ops_.combine(lanes_[6], lanes_[7]));
    return ops_.combine(a, b);
  }
  void reset() {
    for (int k = 0; k < kLanes; ++k) lanes_[k] = ops_.identity();
    fill_ = 0;
  }
  void push(acc_t block) {
    uint64_t k = blocks_++;
    int l = 0;
    for (; k & 1; k >>= 1, ++l) block = ops_.combine(levels_[l], block);
    levels_[l] = block;
  }

  Ops ops_;
  acc_t lanes_[kLanes];
  acc_t levels_[64];
  int64_t fill_ = 0;
  uint64_t blocks_ = 0;
};

// amax and amin fold with fold_min_max; every other op (the inf norms too,
// though built on MaxOps) takes the cascade.
template <typename Ops>
struct MinMaxFold : std::false_type {};
template <typename A>
struct MinMaxFold<fn::MaxOps<A>> : std::true_type {
  static A pick(A a, A x) { return fn::max_skip_nan(a, x); }
};
template <typename A>
struct MinMaxFold<fn::MinOps<A>> : std::true_type {
  static A pick(A a, A x) { return fn::min_skip_nan(a, x); }
};

// Max and min are exact in any order, so they need no cascade, only
// independent lanes folded without branches, which the compiler keeps in
// vector registers (max_nan's NaN tests would keep it on one scalar chain).
// pick skips a NaN, so each lane keeps a mask of the NaNs it saw (all ones,
// as a vector compare gives) and any NaN makes the result NaN, as torch's.
template <typename In, typename Ops>
typename Ops::acc_t fold_min_max(const In* base, const DimGroup& red, int64_t r0, int64_t r1, const Ops& ops) {
  using acc_t = typename Ops::acc_t;
  using Pick = MinMaxFold<Ops>;
  // As wide as acc_t, so that lanes and masks fill vectors alike.
  using mask_t = std::conditional_t<sizeof(acc_t) == 8, int64_t, int32_t>;
  constexpr bool has_nan = std::numeric_limits<acc_t>::has_quiet_NaN;
  constexpr int kLanes = 16;
  acc_t lane[kLanes];
  mask_t nan[kLanes];
  for (int k = 0; k < kLanes; ++k) {
    lane[k] = ops.identity();
    nan[k] = 0;
  }
  for_each_run(red, r0, r1, [&](int64_t off, int64_t n, int64_t stride, int64_t) {
    const In* p = base + off;
    int64_t i = 0;
    if (stride == 1) {
      for (; i + kLanes <= n; i += kLanes) {
        TANDEM_SIMD
        for (int k = 0; k < kLanes; ++k) {
          const acc_t x = static_cast<acc_t>(p[i + k]);
          lane[k] = Pick::pick(lane[k], x);
          if constexpr (has_nan) nan[k] |= -static_cast<mask_t>(x != x);
        }
      }
    }
    for (; i < n; ++i) {
      const acc_t x = static_cast<acc_t>(p[i * stride]);
      lane[0] = Pick::pick(lane[0], x);
      if constexpr (has_nan) nan[0] |= -static_cast<mask_t>(x != x);
    }
  });
  acc_t r = lane[0];
  mask_t any_nan = nan[0];
  for (int k = 1; k < kLanes; ++k) {
    r = Pick::pick(r, lane[k]);
    any_nan |= nan[k];
  }
  if constexpr (has_nan)
    if (any_nan) return std::numeric_limits<acc_t>::quiet_NaN();
  return r;
}

// Folds linear indices [r0, r1) of the reduced space below base.
template <typename In, typename Ops>
typename Ops::acc_t fold(const In* base, const DimGroup& red, int64_t r0, int64_t r1, const Ops& ops) {
  using in_t = typename Ops::in_t;
  if constexpr (MinMaxFold<Ops>::value) return fold_min_max(base, red, r0, r1, ops);
  if (r1 - r0 <= kShortFold) {
    // Two accumulators halve the chain of dependent operations.
    auto even = ops.identity(), odd = ops.identity();
    for_each_run(red, r0, r1, [&](int64_t off, int64_t n, int64_t stride, int64_t index) {
      const In* p = base + off;
      int64_t i = 0;
      for (; i + 2 <= n; i += 2) {
        even = ops.reduce(even, static_cast<in_t>(p[i * stride]), index + i);
        odd = ops.reduce(odd, static_cast<in_t>(p[(i + 1) * stride]), index + i + 1);
      }
      if (i < n) even = ops.reduce(even, static_cast<in_t>(p[i * stride]), index + i);
    });
    return ops.combine(even, odd);
  }
  Cascade<Ops> c(ops);
  for_each_run(red, r0, r1,
               [&](int64_t off, int64_t n, int64_t stride, int64_t index) { c.feed(base + off, n, stride, index); });
  return c.result();
}

// Scratch accumulators (a plain array: acc_t may be bool).
template <typename A>
std::unique_ptr<A[]> scratch(int64_t n) {
  return std::make_unique_for_overwrite<A[]>(static_cast<size_t>(n));
}

// Cascade levels fold_columns needs for a fold of `rows` rows.
int64_t column_levels(int64_t rows) { return std::bit_width(static_cast<uint64_t>(rows / kRowBlock)) + 1; }

// Folds rows [r0, r1) of the reduced space for the w <= kColumns<acc_t> contiguous
// columns at base into result[0, w), cascading over blocks of kRowBlock rows.
// levels holds column_levels(r1 - r0) * kColumns<acc_t> accumulators of
// scratch. Each column sees its rows in increasing order.
template <typename In, typename Ops>
void fold_columns(const In* base, const DimGroup& red, int64_t r0, int64_t r1, int64_t w, const Ops& ops,
                  typename Ops::acc_t* result, typename Ops::acc_t* levels) {
  using acc_t = typename Ops::acc_t;
  using in_t = typename Ops::in_t;
  constexpr int64_t W = kColumns<acc_t>;
  acc_t cur[W];
  for (int64_t j = 0; j < w; ++j) cur[j] = ops.identity();
  uint64_t blocks = 0;
  int64_t fill = 0;
  Walker rows(red, red.n, r0);
  for (int64_t r = r0; r < r1; ++r, rows.next()) {
    const In* row = base + rows.in_off;
    TANDEM_SIMD
    for (int64_t j = 0; j < w; ++j) cur[j] = ops.reduce(cur[j], static_cast<in_t>(row[j]), r);
    if (++fill < kRowBlock) continue;
    uint64_t k = blocks++;
    int64_t l = 0;
    for (; k & 1; k >>= 1, ++l)
      for (int64_t j = 0; j < w; ++j) cur[j] = ops.combine(levels[l * W + j], cur[j]);
    for (int64_t j = 0; j < w; ++j) {
      levels[l * W + j] = cur[j];
      cur[j] = ops.identity();
    }
    fill = 0;
  }
  for (int64_t l = 0; (blocks >> l) != 0; ++l)
    if ((blocks >> l) & 1)
      for (int64_t j = 0; j < w; ++j) cur[j] = ops.combine(levels[l * W + j], cur[j]);
  for (int64_t j = 0; j < w; ++j) result[j] = cur[j];
}

template <typename Ops>
typename Ops::acc_t combine_partials(const typename Ops::acc_t* partial, int64_t chunks, int64_t stride, int64_t q,
                                     const Ops& ops) {
  auto acc = partial[q];
  for (int64_t c = 1; c < chunks; ++c) acc = ops.combine(acc, partial[c * stride + q]);
  return acc;
}

template <typename In, typename Ops, typename Write>
void reduce_rows(const ReducePlan& p, const In* in, const Ops& ops, const Write& write) {
  const int64_t R = p.reduce_numel;
  const int64_t nthreads = num_threads();
  if (nthreads == 1 || p.num_outputs >= nthreads || R < 2 * kReduceGrain) {
    parallel_for(0, p.num_outputs, std::max<int64_t>(1, kReduceGrain / R), [&](int64_t b, int64_t e) {
      Walker out(p.kept, p.kept.n, b);
      for (int64_t o = b; o < e; ++o, out.next()) write(out.out_off, fold(in + out.in_off, p.reduced, 0, R, ops));
    });
    return;
  }
  // Fewer outputs than threads and long folds: split each fold.
  const int64_t chunks = std::min(nthreads, R / kReduceGrain);
  auto partial = scratch<typename Ops::acc_t>(chunks);
  Walker out(p.kept, p.kept.n, 0);
  for (int64_t o = 0; o < p.num_outputs; ++o, out.next()) {
    parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c)
        partial[c] = fold(in + out.in_off, p.reduced, R * c / chunks, R * (c + 1) / chunks, ops);
    });
    write(out.out_off, combine_partials(partial.get(), chunks, 1, 0, ops));
  }
}

template <typename In, typename Ops, typename Write>
void reduce_columns(const ReducePlan& p, const In* in, const Ops& ops, const Write& write) {
  using acc_t = typename Ops::acc_t;
  constexpr int64_t W = kColumns<acc_t>;
  const int64_t R = p.reduce_numel;
  const int64_t m = p.kept.sizes[p.kept.n - 1];
  const int64_t chunks = (m + W - 1) / W;
  const int64_t tasks = (p.num_outputs / m) * chunks;
  const int64_t nthreads = num_threads();
  // Task t covers columns [c0, c0 + w) of outer output o.
  auto task_at = [&](int64_t t, int64_t& c0, int64_t& w) {
    c0 = (t % chunks) * W;
    w = std::min(W, m - c0);
    return Walker(p.kept, p.kept.n - 1, t / chunks);
  };
  if (nthreads == 1 || tasks >= nthreads || R * p.num_outputs < 2 * kReduceGrain) {
    parallel_for(0, tasks, std::max<int64_t>(1, kReduceGrain / (R * W)), [&](int64_t b, int64_t e) {
      auto levels = scratch<acc_t>(column_levels(R) * W);
      acc_t result[W];
      for (int64_t t = b; t < e; ++t) {
        int64_t c0, w;
        Walker outer = task_at(t, c0, w);
        fold_columns(in + outer.in_off + c0, p.reduced, 0, R, w, ops, result, levels.get());
        for (int64_t j = 0; j < w; ++j) write(outer.out_off + c0 + j, result[j]);
      }
    });
    return;
  }
  // Few columns, many rows: each thread folds a band of rows for every
  // output, then the bands are merged.
  const int64_t bands = std::max<int64_t>(1, std::min(nthreads, R / kRowBlock));
  const int64_t outputs = p.num_outputs;
  auto partial = scratch<acc_t>(bands * outputs);
  parallel_for(0, bands, 1, [&](int64_t b, int64_t e) {
    auto levels = scratch<acc_t>(column_levels(R / bands + 1) * W);
    for (int64_t c = b; c < e; ++c) {
      for (int64_t t = 0; t < tasks; ++t) {
        int64_t c0, w;
        Walker outer = task_at(t, c0, w);
        acc_t* dst = partial.get() + c * outputs + (t / chunks) * m + c0;
        fold_columns(in + outer.in_off + c0, p.reduced, R * c / bands, R * (c + 1) / bands, w, ops, dst, levels.get());
      }
    }
  });
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t c0, w;
    Walker outer = task_at(t, c0, w);
    for (int64_t j = 0; j < w; ++j)
      write(outer.out_off + c0 + j, combine_partials(partial.get(), bands, outputs, (t / chunks) * m + c0 + j, ops));
  }
}

// Runs ops over the plan; write(out_offset, acc) stores one result.
template <typename In, typename Ops, typename Write>
void run_reduce(const ReducePlan& p, const In* in, const Ops& ops, const Write& write) {
  if (p.num_outputs == 0) return;
  if (p.reduce_numel == 0) {
    // Nothing to fold: every output is the identity (a sum of nothing is 0).
    Walker out(p.kept, p.kept.n, 0);
    for (int64_t o = 0; o < p.num_outputs; ++o, out.next()) write(out.out_off, ops.identity());
    return;
  }
  if (p.columns())
    reduce_columns(p, in, ops, write);
  else
    reduce_rows(p, in, ops, write);
}

template <typename T, typename Ops>
void reduce_to(const ReducePlan& p, const Tensor& out, const Tensor& in, const Ops& ops) {
  T* o = out.data_ptr<T>();
  run_reduce(p, in.data_ptr<T>(), ops,
             [&](int64_t off, const typename Ops::acc_t& acc) { o[off] = static_cast<T>(ops.project(acc)); });
}

// Integers (and bool) sum and multiply in int64; floats in their opmath type.
template <typename T>
using sum_acc_t = std::conditional_t<is_float_type_v<T>, opmath_t<T>, int64_t>;

template <typename T>
void norm_to(const ReducePlan& plan, const Tensor& out, const Tensor& in, double p) {
  using M = opmath_t<T>;
  if (p == 2) return reduce_to<T>(plan, out, in, fn::Norm2Ops<M>{});
  if (p == 1) return reduce_to<T>(plan, out, in, fn::Norm1Ops<M>{});
  if (p == 0) return reduce_to<T>(plan, out, in, fn::Norm0Ops<M>{});
  if (std::isinf(p) && p > 0) return reduce_to<T>(plan, out, in, fn::NormInfOps<M>{});
  if (std::isinf(p)) return reduce_to<T>(plan, out, in, fn::NormNegInfOps<M>{});
  reduce_to<T>(plan, out, in, fn::NormPOps<M>{{}, static_cast<M>(p)});
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const ReduceParams& params) {
  const ReducePlan p = make_plan(out, in);
  switch (op) {
    case ReduceOp::Sum:
      return dispatch_all(in.dtype(), "sum (cpu)",
                          [&]<typename T>() { reduce_to<T>(p, out, in, fn::SumOps<sum_acc_t<T>>{}); });
    case ReduceOp::Prod:
      return dispatch_all(in.dtype(), "prod (cpu)",
                          [&]<typename T>() { reduce_to<T>(p, out, in, fn::ProdOps<sum_acc_t<T>>{}); });
    case ReduceOp::Mean:
      return dispatch_floating(in.dtype(), "mean (cpu)", [&]<typename T>() {
        using M = opmath_t<T>;
        reduce_to<T>(p, out, in, fn::mean_ops<M>(p.reduce_numel));
      });
    case ReduceOp::Amax:
      return dispatch_all(in.dtype(), "amax (cpu)",
                          [&]<typename T>() { reduce_to<T>(p, out, in, fn::MaxOps<opmath_t<T>>{}); });
    case ReduceOp::Amin:
      return dispatch_all(in.dtype(), "amin (cpu)",
                          [&]<typename T>() { reduce_to<T>(p, out, in, fn::MinOps<opmath_t<T>>{}); });
    case ReduceOp::LogSumExp:
      return dispatch_floating(in.dtype(), "logsumexp (cpu)",
                               [&]<typename T>() { reduce_to<T>(p, out, in, fn::LogSumExpOps<opmath_t<T>>{}); });
    case ReduceOp::Norm:
      return dispatch_floating(in.dtype(), "norm (cpu)", [&]<typename T>() { norm_to<T>(p, out, in, params.p); });
    case ReduceOp::Var:
    case ReduceOp::Std:
      // Welford in double for every float dtype, as PyTorch's CPU kernel.
      return dispatch_floating(in.dtype(), op == ReduceOp::Var ? "var (cpu)" : "std (cpu)", [&]<typename T>() {
        fn::WelfordOps<double> ops{static_cast<double>(params.correction), op == ReduceOp::Std};
        reduce_to<T>(p, out, in, ops);
      });
  }
}

void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in) {
  const ReducePlan p = make_plan(indices, in);
  TANDEM_INTERNAL_ASSERT(p.reduced.n <= 1, "arg_reduce folds one dim; the plan has ", p.reduced.n);
  dispatch_all(in.dtype(), is_max ? "max (cpu)" : "min (cpu)", [&]<typename T>() {
    using M = opmath_t<T>;
    T* v = values.defined() ? values.data_ptr<T>() : nullptr;
    int64_t* ix = indices.data_ptr<int64_t>();
    auto write = [&](int64_t off, const fn::ValueIndex<M>& a) {
      if (v) v[off] = static_cast<T>(a.value);
      ix[off] = a.index;
    };
    if (is_max)
      run_reduce(p, in.data_ptr<T>(), fn::ArgMaxOps<M>{}, write);
    else
      run_reduce(p, in.data_ptr<T>(), fn::ArgMinOps<M>{}, write);
  });
}

}  // namespace tandem::cpu

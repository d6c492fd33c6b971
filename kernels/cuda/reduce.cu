// CUDA reductions (sum, mean, prod, amax, amin, logsumexp, norms, var/std)
// and arg reductions over any dims and strides, with the per-op math of
// kernels/functors/reduce.h. make_reduce_layout (reduce_plan.h) orders and
// merges the dims; the launch takes one of two shapes:
//  - rows: a group of lanes (from one up to a whole block) folds each
//    output's elements, in 16-byte vectors when they form one run;
//  - columns: neighbouring threads own neighbouring outputs (several each,
//    as one vector, when contiguous) and the block's rows split the fold.
// A fold too long for the blocks it gets is split across grid y; partial
// accumulators go to a workspace and a second kernel merges them.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce_plan.h"
#include "kernels/functors/reduce.h"
#include "kernels/reduce.h"

namespace tandem::cuda {

namespace {

template <typename Ops>
struct Combine {
  Ops ops;
  __device__ typename Ops::acc_t operator()(const typename Ops::acc_t& a, const typename Ops::acc_t& b) const {
    return ops.combine(a, b);
  }
};

// out[off] = project(acc), in the output's dtype.
template <typename T>
struct ValueWriter {
  T* out;
  template <typename Ops>
  __device__ void operator()(const Ops& ops, int64_t off, const typename Ops::acc_t& acc) const {
    out[off] = store_as<T>(ops.project(acc));
  }
};

// max(dim) / argmax: the value (when asked for) and the index.
template <typename T>
struct ArgWriter {
  T* values;  // null for argmax / argmin
  int64_t* indices;
  template <typename Ops>
  __device__ void operator()(const Ops&, int64_t off, const typename Ops::acc_t& acc) const {
    if (values) values[off] = store_as<T>(acc.value);
    indices[off] = acc.index;
  }
};

template <typename T, typename Ops, typename Writer>
struct ReduceArgs {
  ReduceLayout layout;
  ReduceLaunch launch;
  const T* in;
  Ops ops;
  Writer write;
  typename Ops::acc_t* partials;  // [split][output] when launch.splits > 1
};

// The accumulator of output o: written out, or kept as this split's partial.
template <typename T, typename Ops, typename Writer>
__device__ void finish(const ReduceArgs<T, Ops, Writer>& a, int64_t o, int64_t out_off,
                       const typename Ops::acc_t& acc) {
  if (a.launch.splits == 1)
    a.write(a.ops, out_off, acc);
  else
    a.partials[blockIdx.y * a.layout.num_outputs + o] = acc;
}

template <typename Ops>
__device__ typename Ops::acc_t combine_lanes(const Ops& ops, typename Ops::acc_t* acc, int n) {
  // Pairwise, as the CPU merges its lanes.
  for (int width = 1; width < n; width *= 2)
    for (int k = 0; k + width < n; k += 2 * width) acc[k] = ops.combine(acc[k], acc[k + width]);
  return acc[0];
}

// Folds indices r, r + step, ... below end, with load(r) giving element r:
// the general strided path, kept plain (one load in flight per thread) to
// keep the compile time of the many instantiations down.
template <typename Ops, typename Load>
__device__ typename Ops::acc_t fold_strided(const Ops& ops, int64_t r, int64_t end, int64_t step, const Load& load) {
  using in_t = typename Ops::in_t;
  typename Ops::acc_t acc = ops.identity();
  for (; r < end; r += step) acc = ops.reduce(acc, load_as<in_t>(load(r)), r);
  return acc;
}

// Vectors in flight per thread in the vector loops: four for the cheap ops,
// which must stream at full bandwidth; two for the ops whose per-element
// math (exp, pow, divisions, compares with indices) dominates, which would
// otherwise multiply the compile time of their many instantiations.
template <typename Ops>
inline constexpr int kUnroll = 2;
template <typename A>
inline constexpr int kUnroll<fn::SumOps<A>> = 4;
template <typename A>
inline constexpr int kUnroll<fn::ProdOps<A>> = 4;
template <typename A>
inline constexpr int kUnroll<fn::MaxOps<A>> = 4;
template <typename A>
inline constexpr int kUnroll<fn::MinOps<A>> = 4;

// Folds the run p[r0, r1) with lanes tid, tid + nthreads, ...: a scalar head
// up to the first vector boundary, aligned vectors (Vec accumulators, one per
// position in the vector, kUnroll vectors in flight), a scalar tail.
template <int Vec, typename T, typename Ops>
__device__ typename Ops::acc_t fold_run(const Ops& ops, const T* p, int64_t r0, int64_t r1, int64_t tid,
                                        int64_t nthreads) {
  using acc_t = typename Ops::acc_t;
  using in_t = typename Ops::in_t;
  using V = Vector<T, Vec>;
  acc_t acc[Vec];
#pragma unroll
  for (int k = 0; k < Vec; ++k) acc[k] = ops.identity();
  const auto misalign = reinterpret_cast<uintptr_t>(p + r0) % sizeof(V);
  const int64_t head = min(r1 - r0, static_cast<int64_t>((sizeof(V) - misalign) % sizeof(V) / sizeof(T)));
  for (int64_t r = r0 + tid; r < r0 + head; r += nthreads) acc[0] = ops.reduce(acc[0], load_as<in_t>(p[r]), r);
  const int64_t b = r0 + head;
  const int64_t nvec = (r1 - b) / Vec;
  const V* pv = reinterpret_cast<const V*>(p + b);
  constexpr int U = kUnroll<Ops>;
  int64_t v = tid;
  for (; v + (U - 1) * nthreads < nvec; v += U * nthreads) {
    V x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) x[u] = pv[v + u * nthreads];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < Vec; ++k)
        acc[k] = ops.reduce(acc[k], load_as<in_t>(x[u].v[k]), b + (v + u * nthreads) * Vec + k);
  }
  for (; v < nvec; v += nthreads) {
    const V x = pv[v];
#pragma unroll
    for (int k = 0; k < Vec; ++k) acc[k] = ops.reduce(acc[k], load_as<in_t>(x.v[k]), b + v * Vec + k);
  }
  for (int64_t r = b + nvec * Vec + tid; r < r1; r += nthreads) acc[0] = ops.reduce(acc[0], load_as<in_t>(p[r]), r);
  return combine_lanes(ops, acc, Vec);
}

// rows: output blockIdx.x * blockDim.y + threadIdx.y, its elements over
// threadIdx.x.
template <int Vec, typename T, typename Ops, typename Writer>
__device__ void reduce_rows(const ReduceArgs<T, Ops, Writer>& a, int64_t r0, int64_t r1, typename Ops::acc_t* smem) {
  const Ops& ops = a.ops;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = o < a.layout.num_outputs;
  typename Ops::acc_t acc = ops.identity();
  int64_t in_off = 0, out_off = 0;
  if (active) {
    a.layout.kept.offsets(o, in_off, out_off);
    const T* base = a.in + in_off;
    if (a.layout.contiguous_run) {
      acc = fold_run<Vec>(ops, base, r0, r1, threadIdx.x, blockDim.x);
    } else {
      const OffsetCalc& red = a.layout.reduced;
      acc = fold_strided(ops, r0 + threadIdx.x, r1, blockDim.x, [&](int64_t r) { return base[red.in_offset(r)]; });
    }
  }
  acc = reduce_x(acc, Combine<Ops>{ops}, ops.identity(), smem);
  if (active && threadIdx.x == 0) finish(a, o, out_off, acc);
}

// Whether the columns epilogue combines its VO accumulators at once: VO
// values per thread in shared memory, within the 48 KiB a launch gets
// without opting in.
template <typename Ops, int VO>
inline constexpr bool wide_columns = VO > 1 && VO* kReduceThreads * sizeof(typename Ops::acc_t) <= 48 * 1024;

// Dynamic shared memory of the reduce kernel for a launch.
template <int Vec, typename Ops>
size_t reduce_smem_bytes(const ReduceLaunch& launch) {
  const bool wide = launch.vec_outputs == Vec && wide_columns<Ops, Vec>;
  return static_cast<size_t>(launch.block_x) * launch.block_y * (wide ? Vec : 1) * sizeof(typename Ops::acc_t);
}

// columns: VO consecutive outputs from (blockIdx.x * blockDim.x +
// threadIdx.x) * VO, loaded as one vector; the fold over threadIdx.y.
template <int VO, typename T, typename Ops, typename Writer>
__device__ void reduce_columns(const ReduceArgs<T, Ops, Writer>& a, int64_t r0, int64_t r1, typename Ops::acc_t* smem) {
  using acc_t = typename Ops::acc_t;
  using in_t = typename Ops::in_t;
  using V = Vector<T, VO>;
  const Ops& ops = a.ops;
  const int64_t o = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * VO;
  const bool active = o < a.layout.num_outputs;
  acc_t acc[VO];
#pragma unroll
  for (int k = 0; k < VO; ++k) acc[k] = ops.identity();
  int64_t in_off = 0, out_off = 0;
  if (active) {
    a.layout.kept.offsets(o, in_off, out_off);
    const T* base = a.in + in_off;
    const OffsetCalc& red = a.layout.reduced;
    const int64_t step = blockDim.y;
    int64_t r = r0 + threadIdx.y;
    // kUnroll vectors in flight per thread; scalar columns (the general
    // layout) stay plain.
    if constexpr (VO > 1) {
      constexpr int U = kUnroll<Ops>;
      for (; r + (U - 1) * step < r1; r += U * step) {
        V x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = load_vector<VO>(base + red.in_offset(r + u * step));
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int k = 0; k < VO; ++k) acc[k] = ops.reduce(acc[k], load_as<in_t>(x[u].v[k]), r + u * step);
      }
    }
    for (; r < r1; r += step) {
      const V x = load_vector<VO>(base + red.in_offset(r));
#pragma unroll
      for (int k = 0; k < VO; ++k) acc[k] = ops.reduce(acc[k], load_as<in_t>(x.v[k]), r);
    }
  }
  // All VO accumulators in one pass when the shared memory holds them.
  if constexpr (wide_columns<Ops, VO>) {
    reduce_y(acc, Combine<Ops>{ops}, smem);
  } else {
#pragma unroll
    for (int k = 0; k < VO; ++k) {
      acc_t one[1] = {acc[k]};
      reduce_y(one, Combine<Ops>{ops}, smem);
      acc[k] = one[0];
    }
  }
  const int64_t out_step = a.layout.kept.out_strides[0];
  if (active && threadIdx.y == 0)
#pragma unroll
    for (int k = 0; k < VO; ++k) finish(a, o + k, out_off + k * out_step, acc[k]);
}

template <int Vec, typename T, typename Ops, typename Writer>
__global__ void __launch_bounds__(kReduceThreads) reduce_kernel(const __grid_constant__ ReduceArgs<T, Ops, Writer> a) {
  TANDEM_DYNAMIC_SHARED(unsigned char, reduce_smem);
  auto* smem = reinterpret_cast<typename Ops::acc_t*>(reduce_smem);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * a.launch.split_size;
  const int64_t r1 = min(a.layout.reduce_numel, r0 + a.launch.split_size);
  if (!a.layout.columns)
    reduce_rows<Vec>(a, r0, r1, smem);
  else if (a.launch.vec_outputs == Vec)
    reduce_columns<Vec>(a, r0, r1, smem);
  else
    reduce_columns<1>(a, r0, r1, smem);
}

// Merges the splits' partials of output blockIdx.x * blockDim.y +
// threadIdx.y over threadIdx.x and writes it.
template <typename Ops, typename Writer>
__global__ void __launch_bounds__(256)
    reduce_finalize_kernel(const __grid_constant__ OffsetCalc kept, int64_t num_outputs, int64_t splits,
                           const typename Ops::acc_t* partials, Ops ops, Writer write) {
  TANDEM_DYNAMIC_SHARED(unsigned char, reduce_smem);
  auto* smem = reinterpret_cast<typename Ops::acc_t*>(reduce_smem);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  typename Ops::acc_t acc = ops.identity();
  if (o < num_outputs)
    for (int64_t s = threadIdx.x; s < splits; s += blockDim.x) acc = ops.combine(acc, partials[s * num_outputs + o]);
  acc = reduce_x(acc, Combine<Ops>{ops}, ops.identity(), smem);
  if (o < num_outputs && threadIdx.x == 0) {
    int64_t in_off, out_off;
    kept.offsets(o, in_off, out_off);
    write(ops, out_off, acc);
  }
}

// Blocks of kReduceThreads threads the kernel keeps resident per
// multiprocessor (registers and shared memory permitting), asked once per
// instantiation: every GPU of a process is assumed to be of one kind.
template <typename Kernel>
int resident_blocks(Kernel kernel, size_t smem_per_block) {
  static const int blocks = [&] {
    int b = 0;
    TANDEM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kReduceThreads, smem_per_block));
    return b > 0 ? b : 1;
  }();
  return blocks;
}

template <typename T, typename Ops, typename Writer>
void launch_reduce(const ReduceLayout& layout, const Tensor& in, const Ops& ops, const Writer& write, int device) {
  using acc_t = typename Ops::acc_t;
  constexpr int Vec = kVecWidth<T>;
  if (layout.num_outputs == 0) return;
  auto kernel = reduce_kernel<Vec, T, Ops, Writer>;
  const int64_t resident =
      int64_t{multiprocessor_count(device)} * resident_blocks(kernel, kReduceThreads * sizeof(acc_t)) * kReduceThreads;
  const T* x = in.data_ptr<T>();
  const bool aligned = reinterpret_cast<uintptr_t>(x) % sizeof(Vector<T, Vec>) == 0;
  const ReduceLaunch launch = plan_reduce_launch(layout, Vec, aligned, resident);
  const cudaStream_t stream = stream_of(in);

  ReduceArgs<T, Ops, Writer> args{layout, launch, x, ops, write, nullptr};
  std::shared_ptr<Storage> workspace;
  if (launch.splits > 1) {
    workspace =
        detail::allocate_device(device, static_cast<size_t>(launch.splits * layout.num_outputs) * sizeof(acc_t));
    args.partials = static_cast<acc_t*>(workspace->data());
  }
  const dim3 grid(static_cast<unsigned>(launch.grid_x), static_cast<unsigned>(launch.splits));
  const dim3 block(launch.block_x, launch.block_y);
  TANDEM_LAUNCH(grid, block, (reduce_smem_bytes<Vec, Ops>(launch)), stream, kernel)(args);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  if (launch.splits > 1) {
    const dim3 fblock(launch.finalize_x, launch.finalize_y);
    TANDEM_LAUNCH(static_cast<unsigned>(launch.finalize_grid), fblock,
                  launch.finalize_x * launch.finalize_y * sizeof(acc_t), stream, reduce_finalize_kernel<Ops, Writer>)
    (layout.kept, layout.num_outputs, launch.splits, args.partials, ops, write);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

template <typename T, typename Ops>
void reduce_to(const ReduceLayout& layout, const Tensor& out, const Tensor& in, const Ops& ops) {
  launch_reduce<T>(layout, in, ops, ValueWriter<T>{out.data_ptr<T>()}, out.device().index());
}

// Integers (and bool) sum and multiply in int64; floats in their opmath type.
template <typename T>
using sum_acc_t = std::conditional_t<is_float_type_v<T>, opmath_t<T>, int64_t>;

// |x|^p for the norms of other orders, out of line: pow is long, and the
// vector loops would inline it at every element of every unrolled load.
template <typename Acc>
__device__ TANDEM_NOINLINE Acc norm_p_reduce(Acc a, Acc x, Acc p) {
  return fn::NormPOps<Acc>{{}, p}.reduce(a, x, 0);
}

// Every vector norm order in one functor, so that each dtype compiles one
// norm kernel instead of six: it applies the shared functor of its order (a
// branch that is the same for every thread).
template <typename Acc>
struct AnyNormOps {
  enum Order : int8_t { Two, One, Zero, Inf, NegInf, P };
  using acc_t = Acc;
  using in_t = Acc;
  Order order;
  Acc p;

  __device__ Acc identity() const {
    if (order == Inf) return fn::NormInfOps<Acc>{}.identity();
    if (order == NegInf) return fn::NormNegInfOps<Acc>{}.identity();
    return fn::Norm2Ops<Acc>{}.identity();
  }
  __device__ Acc reduce(Acc a, Acc x, int64_t i) const {
    switch (order) {
      case Two: return fn::Norm2Ops<Acc>{}.reduce(a, x, i);
      case One: return fn::Norm1Ops<Acc>{}.reduce(a, x, i);
      case Zero: return fn::Norm0Ops<Acc>{}.reduce(a, x, i);
      case Inf: return fn::NormInfOps<Acc>{}.reduce(a, x, i);
      case NegInf: return fn::NormNegInfOps<Acc>{}.reduce(a, x, i);
      case P: break;
    }
    return norm_p_reduce(a, x, p);
  }
  __device__ Acc combine(Acc a, Acc b) const {
    if (order == Inf) return fn::NormInfOps<Acc>{}.combine(a, b);
    if (order == NegInf) return fn::NormNegInfOps<Acc>{}.combine(a, b);
    return fn::Norm2Ops<Acc>{}.combine(a, b);
  }
  __device__ Acc project(Acc a) const {
    switch (order) {
      case Two: return fn::Norm2Ops<Acc>{}.project(a);
      case One: return fn::Norm1Ops<Acc>{}.project(a);
      case Zero: return fn::Norm0Ops<Acc>{}.project(a);
      case Inf: return fn::NormInfOps<Acc>{}.project(a);
      case NegInf: return fn::NormNegInfOps<Acc>{}.project(a);
      case P: break;
    }
    return fn::NormPOps<Acc>{{}, p}.project(a);
  }
};

// The order as the CPU picks it (kernels/cpu/reduce.cpp, norm_to).
template <typename Acc>
AnyNormOps<Acc> norm_ops(double p) {
  using N = AnyNormOps<Acc>;
  if (p == 2) return {N::Two, Acc(2)};
  if (p == 1) return {N::One, Acc(1)};
  if (p == 0) return {N::Zero, Acc(0)};
  if (std::isinf(p)) return {p > 0 ? N::Inf : N::NegInf, Acc(0)};
  return {N::P, static_cast<Acc>(p)};
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const ReduceParams& params) {
  DeviceGuard guard(out.device().index());
  const ReduceLayout l = make_reduce_layout(out, in);
  switch (op) {
    case ReduceOp::Sum:
      return dispatch_all(in.dtype(), "sum (cuda)",
                          [&]<typename T>() { reduce_to<T>(l, out, in, fn::SumOps<sum_acc_t<T>>{}); });
    case ReduceOp::Prod:
      return dispatch_all(in.dtype(), "prod (cuda)",
                          [&]<typename T>() { reduce_to<T>(l, out, in, fn::ProdOps<sum_acc_t<T>>{}); });
    case ReduceOp::Mean:
      return dispatch_floating(in.dtype(), "mean (cuda)", [&]<typename T>() {
        using M = opmath_t<T>;
        reduce_to<T>(l, out, in, fn::mean_ops<M>(l.reduce_numel));
      });
    case ReduceOp::Amax:
      return dispatch_all(in.dtype(), "amax (cuda)",
                          [&]<typename T>() { reduce_to<T>(l, out, in, fn::MaxOps<opmath_t<T>>{}); });
    case ReduceOp::Amin:
      return dispatch_all(in.dtype(), "amin (cuda)",
                          [&]<typename T>() { reduce_to<T>(l, out, in, fn::MinOps<opmath_t<T>>{}); });
    case ReduceOp::LogSumExp:
      return dispatch_floating(in.dtype(), "logsumexp (cuda)",
                               [&]<typename T>() { reduce_to<T>(l, out, in, fn::LogSumExpOps<opmath_t<T>>{}); });
    case ReduceOp::Norm:
      return dispatch_floating(in.dtype(), "norm (cuda)",
                               [&]<typename T>() { reduce_to<T>(l, out, in, norm_ops<opmath_t<T>>(params.p)); });
    case ReduceOp::Var:
    case ReduceOp::Std:
      // Welford in double for every float dtype, as the CPU.
      return dispatch_floating(in.dtype(), op == ReduceOp::Var ? "var (cuda)" : "std (cuda)", [&]<typename T>() {
        fn::WelfordOps<double> ops{static_cast<double>(params.correction), op == ReduceOp::Std};
        reduce_to<T>(l, out, in, ops);
      });
  }
}

void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in) {
  DeviceGuard guard(indices.device().index());
  const ReduceLayout l = make_reduce_layout(indices, in);
  TANDEM_INTERNAL_ASSERT(l.reduced.n <= 1, "arg_reduce folds one dim; the layout has ", l.reduced.n);
  dispatch_all(in.dtype(), is_max ? "max (cuda)" : "min (cuda)", [&]<typename T>() {
    using M = opmath_t<T>;
    const ArgWriter<T> write{values.defined() ? values.data_ptr<T>() : nullptr, indices.data_ptr<int64_t>()};
    if (is_max)
      launch_reduce<T>(l, in, fn::ArgMaxOps<M>{}, write, indices.device().index());
    else
      launch_reduce<T>(l, in, fn::ArgMinOps<M>{}, write, indices.device().index());
  });
}

}  // namespace tandem::cuda

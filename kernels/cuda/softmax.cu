// CUDA softmax and log_softmax along a dim of a contiguous input, with the
// output functors of kernels/functors/reduce.h. plan_softmax
// (reduce_plan.h) picks the kernel:
//  - rows that fit in registers (the softmax dim innermost, up to 32K
//    float elements): a group of lanes per row (a few lanes up to a block),
//    each holding up to 128 bytes of elements; one read, one exp per element;
//  - longer rows: a block per row, an online (max, sum) pass then the output pass;
//  - an inner dim after the softmax dim: threads over the inner index,
//    the softmax dim split over the block's rows, online as well.
// The fused backward (softmax_backward) takes the same three launches, with
// one sum per row instead of (max, sum) and two inputs (grad, out).
// 16-bit floats compute in float and round once on store.
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce_plan.h"
#include "kernels/functors/reduce.h"
#include "kernels/functors/softmax.h"
#include "kernels/softmax.h"
#include "tensor/core/shape.h"

namespace tandem::cuda {

namespace {

// Register slots per lane: 128 bytes of opmath values (32 floats, 16 doubles).
template <typename M>
inline constexpr int softmax_per_thread = kSoftmaxSlotBytes / static_cast<int>(sizeof(M));

template <typename M>
struct MaxNan {
  __device__ M operator()(M a, M b) const { return fn::max_nan(a, b); }
};
template <typename M>
struct Plus {
  __device__ M operator()(M a, M b) const { return a + b; }
};
template <typename M>
struct MaxSumCombine {
  __device__ fn::MaxSum<M> operator()(const fn::MaxSum<M>& a, const fn::MaxSum<M>& b) const {
    return fn::LogSumExpOps<M>{}.combine(a, b);
  }
};

// exp(x - max) of the register kernel. 16-bit rows use the hardware's
// approximate exp (a multiply and ex2): its error (a few float ulps, more
// for arguments far below 0, whose exps hardly count) vanishes when the
// result is rounded to 8 or 11 bits, and the accurate expf would make a
// bfloat16 row compute-bound rather than memory-bound. float and double
// keep the accurate exp.
template <typename T, typename M>
__device__ __forceinline__ M softmax_exp(M x) {
  if constexpr (sizeof(T) == 2)
    return __expf(x);
  else
    return std::exp(x);
}

// An online (max, sum) counts a row maximum of +inf as exp(0) = 1 where
// the CPU's exp(inf - inf) is NaN (softmax then gives NaN everywhere, as
// torch); a NaN max already makes every output NaN.
template <typename M>
__device__ M softmax_sum(const fn::MaxSum<M>& a) {
  return a.max == std::numeric_limits<M>::infinity() ? std::numeric_limits<M>::quiet_NaN() : a.sum;
}

// Rows in registers. Row blockIdx.x * blockDim.y + threadIdx.y; lane
// threadIdx.x of blockDim.x holds slots s < E: element
// s * blockDim.x + lane, or with vectors, vector (s / V) * blockDim.x + lane.
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_kernel(const T* in, T* out, int64_t rows, int64_t n, bool log, bool vectorized) {
  using M = opmath_t<T>;
  constexpr int E = softmax_per_thread<M>;
  constexpr int V = kVecWidth<T>;
  static_assert(E % V == 0, "the register slots hold whole vectors");
  __shared__ M smem[kSoftmaxThreads / 32];
  const int64_t g = blockDim.x, lane = threadIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = row < rows;
  const T* x = in + (active ? row : 0) * n;
  T* y = out + (active ? row : 0) * n;

  M v[E];
  if (vectorized) {
#pragma unroll
    for (int j = 0; j < E / V; ++j) {
      const int64_t i = softmax_slot_index(j * V, lane, g, V, true);
      if (active && i < n) {
        const Vector<T, V> vec = load_vector<V>(x + i);
#pragma unroll
        for (int k = 0; k < V; ++k) v[j * V + k] = load_as<M>(vec.v[k]);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) v[j * V + k] = fn::lowest_value<M>();
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < E; ++s) {
      const int64_t i = softmax_slot_index(s, lane, g, V, false);
      v[s] = active && i < n ? load_as<M>(x[i]) : fn::lowest_value<M>();
    }
  }

  // Padding slots hold -inf, which no max picks. A branch-free max that
  // skips NaN plus a NaN flag gives max_nan's result in fewer instructions.
  M max = fn::lowest_value<M>();
  bool any_nan = false;
#pragma unroll
  for (int s = 0; s < E; ++s) {
    max = fn::max_skip_nan(max, v[s]);
    any_nan |= fn::is_nan(v[s]);
  }
  if (any_nan) max = std::numeric_limits<M>::quiet_NaN();
  max = allreduce_x(max, MaxNan<M>{}, fn::lowest_value<M>(), smem);

  M sum = 0;
#pragma unroll
  for (int s = 0; s < E; ++s) {
    if (softmax_slot_index(s, lane, g, V, vectorized) < n) {
      const M e = softmax_exp<T>(v[s] - max);
      if (!log) v[s] = e;  // softmax reuses exp(x - max): SoftmaxOut without a second exp
      sum += e;
    }
  }
  sum = allreduce_x(sum, Plus<M>{}, M(0), smem);
  if (!active) return;

  const M scale = log ? std::log(sum) : M(1) / sum;
  auto result = [&](int s) { return store_as<T>(log ? fn::LogSoftmaxOut<M>{max, scale}(v[s]) : v[s] * scale); };
  if (vectorized) {
#pragma unroll
    for (int j = 0; j < E / V; ++j) {
      const int64_t i = softmax_slot_index(j * V, lane, g, V, true);
      if (i < n) {
        Vector<T, V> vec;
#pragma unroll
        for (int k = 0; k < V; ++k) vec.v[k] = result(j * V + k);
        store_vector<V>(y + i, vec);
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < E; ++s) {
      const int64_t i = softmax_slot_index(s, lane, g, V, false);
      if (i < n) y[i] = result(s);
    }
  }
}

// Long rows: block blockIdx.x owns a row; (max, sum) online, then the
// outputs from a second read (which the L2 mostly serves).
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_online_kernel(const T* in, T* out, int64_t n, bool log, bool vectorized) {
  using M = opmath_t<T>;
  constexpr int V = kVecWidth<T>;
  __shared__ fn::MaxSum<M> smem[kSoftmaxThreads / 32];
  const fn::LogSumExpOps<M> lse;
  const T* x = in + static_cast<int64_t>(blockIdx.x) * n;
  T* y = out + static_cast<int64_t>(blockIdx.x) * n;
  const int64_t step = blockDim.x;

  fn::MaxSum<M> acc = lse.identity();
  if (vectorized) {
    for (int64_t i = threadIdx.x; i < n / V; i += step) {
      const Vector<T, V> vec = load_vector<V>(x + i * V);
#pragma unroll
      for (int k = 0; k < V; ++k) acc = lse.reduce(acc, load_as<M>(vec.v[k]), 0);
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += step) acc = lse.reduce(acc, load_as<M>(x[i]), 0);
  }
  acc = allreduce_x(acc, MaxSumCombine<M>{}, lse.identity(), smem);
  const M sum = softmax_sum(acc);
  const fn::SoftmaxOut<M> soft{acc.max, M(1) / sum};
  const fn::LogSoftmaxOut<M> logsoft{acc.max, std::log(sum)};

  if (vectorized) {
    for (int64_t i = threadIdx.x; i < n / V; i += step) {
      const Vector<T, V> a = load_vector<V>(x + i * V);
      Vector<T, V> b;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const M xv = load_as<M>(a.v[k]);
        b.v[k] = store_as<T>(log ? logsoft(xv) : soft(xv));
      }
      store_vector<V>(y + i * V, b);
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += step) {
      const M xv = load_as<M>(x[i]);
      y[i] = store_as<T>(log ? logsoft(xv) : soft(xv));
    }
  }
}

// (outer, n, inner), inner > 1: thread (x, y) of block blockIdx.x takes
// inner index (blockIdx.x % chunks) * blockDim.x + threadIdx.x of outer
// slice blockIdx.x / chunks, and softmax elements threadIdx.y, +blockDim.y...
template <typename T>
__global__ void __launch_bounds__(kSoftmaxColumnThreads)
    softmax_columns_kernel(const T* in, T* out, int64_t n, int64_t inner, bool log) {
  using M = opmath_t<T>;
  __shared__ fn::MaxSum<M> smem[kSoftmaxColumnThreads];
  const fn::LogSumExpOps<M> lse;
  const int64_t chunks = (inner + blockDim.x - 1) / blockDim.x;
  const int64_t o = blockIdx.x / chunks;
  const int64_t i = (blockIdx.x % chunks) * blockDim.x + threadIdx.x;
  const bool active = i < inner;
  const T* x = in + o * n * inner + i;
  T* y = out + o * n * inner + i;

  fn::MaxSum<M> acc = lse.identity();
  if (active)
    for (int64_t j = threadIdx.y; j < n; j += blockDim.y) acc = lse.reduce(acc, load_as<M>(x[j * inner]), 0);
  fn::MaxSum<M> col[1] = {acc};
  reduce_y(col, MaxSumCombine<M>{}, smem);
  acc = col[0];
  if (!active) return;
  const M sum = softmax_sum(acc);
  const fn::SoftmaxOut<M> soft{acc.max, M(1) / sum};
  const fn::LogSoftmaxOut<M> logsoft{acc.max, std::log(sum)};
  for (int64_t j = threadIdx.y; j < n; j += blockDim.y) {
    const M xv = load_as<M>(x[j * inner]);
    y[j * inner] = store_as<T>(log ? logsoft(xv) : soft(xv));
  }
}

// ---- backward: grad_in from the forward's output and grad, one sum per row
// (of grad * out for softmax, of grad for log_softmax).

// A lane of the register kernel holds grad and out: half the forward's slots
// each, so that a lane keeps the forward's 128 bytes (its registers are
// capped at 64 by the 1024-thread launch bound).
template <typename M>
inline constexpr int softmax_backward_per_thread = softmax_per_thread<M> / 2;

// The shared terms (kernels/functors/softmax.h) with log known at run time:
// one kernel serves both ops, the branch uniform across the launch.
template <typename M>
__device__ __forceinline__ M softmax_grad_term(M g, M y, bool log) {
  return log ? fn::softmax_grad_term<true>(g, y) : fn::softmax_grad_term<false>(g, y);
}
// exp(out) of log_softmax as the forward's register kernel takes it.
template <typename T, typename M>
__device__ __forceinline__ M softmax_grad_out(M g, M y, M sum, bool log) {
  auto exp = [](M v) { return softmax_exp<T>(v); };
  return log ? fn::softmax_grad_out<true>(g, y, sum, exp) : fn::softmax_grad_out<false>(g, y, sum, exp);
}

// Rows in registers, laid out as softmax_rows_kernel.
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_backward_rows_kernel(const T* grad, const T* out, T* grad_in, int64_t rows, int64_t n, bool log,
                                 bool vectorized) {
  using M = opmath_t<T>;
  constexpr int E = softmax_backward_per_thread<M>;
  constexpr int V = kVecWidth<T>;
  static_assert(E % V == 0, "the register slots hold whole vectors");
  __shared__ M smem[kSoftmaxThreads / 32];
  const int64_t lanes = blockDim.x, lane = threadIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = row < rows;
  const int64_t base = (active ? row : 0) * n;
  const T* g = grad + base;
  const T* y = out + base;
  T* gx = grad_in + base;

  // Padding slots hold 0, which adds nothing to either sum.
  M gv[E], yv[E];
  if (vectorized) {
#pragma unroll
    for (int j = 0; j < E / V; ++j) {
      const int64_t i = softmax_slot_index(j * V, lane, lanes, V, true);
      if (active && i < n) {
        const Vector<T, V> a = load_vector<V>(g + i), b = load_vector<V>(y + i);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          gv[j * V + k] = load_as<M>(a.v[k]);
          yv[j * V + k] = load_as<M>(b.v[k]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) gv[j * V + k] = yv[j * V + k] = M(0);
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < E; ++s) {
      const int64_t i = softmax_slot_index(s, lane, lanes, V, false);
      const bool in_row = active && i < n;
      gv[s] = in_row ? load_as<M>(g[i]) : M(0);
      yv[s] = in_row ? load_as<M>(y[i]) : M(0);
    }
  }

  M sum = 0;
#pragma unroll
  for (int s = 0; s < E; ++s) sum += softmax_grad_term(gv[s], yv[s], log);
  sum = allreduce_x(sum, Plus<M>{}, M(0), smem);
  if (!active) return;

  auto result = [&](int s) { return store_as<T>(softmax_grad_out<T>(gv[s], yv[s], sum, log)); };
  if (vectorized) {
#pragma unroll
    for (int j = 0; j < E / V; ++j) {
      const int64_t i = softmax_slot_index(j * V, lane, lanes, V, true);
      if (i < n) {
        Vector<T, V> vec;
#pragma unroll
        for (int k = 0; k < V; ++k) vec.v[k] = result(j * V + k);
        store_vector<V>(gx + i, vec);
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < E; ++s) {
      const int64_t i = softmax_slot_index(s, lane, lanes, V, false);
      if (i < n) gx[i] = result(s);
    }
  }
}

// Long rows: block blockIdx.x owns a row; the sum, then the gradients from a
// second read.
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_backward_rows_online_kernel(const T* grad, const T* out, T* grad_in, int64_t n, bool log, bool vectorized) {
  using M = opmath_t<T>;
  constexpr int V = kVecWidth<T>;
  __shared__ M smem[kSoftmaxThreads / 32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  const T* g = grad + base;
  const T* y = out + base;
  T* gx = grad_in + base;
  const int64_t step = blockDim.x;

  M sum = 0;
  if (vectorized) {
    for (int64_t i = threadIdx.x; i < n / V; i += step) {
      const Vector<T, V> a = load_vector<V>(g + i * V), b = load_vector<V>(y + i * V);
#pragma unroll
      for (int k = 0; k < V; ++k) sum += softmax_grad_term(load_as<M>(a.v[k]), load_as<M>(b.v[k]), log);
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += step) sum += softmax_grad_term(load_as<M>(g[i]), load_as<M>(y[i]), log);
  }
  sum = allreduce_x(sum, Plus<M>{}, M(0), smem);

  if (vectorized) {
    for (int64_t i = threadIdx.x; i < n / V; i += step) {
      const Vector<T, V> a = load_vector<V>(g + i * V), b = load_vector<V>(y + i * V);
      Vector<T, V> c;
#pragma unroll
      for (int k = 0; k < V; ++k)
        c.v[k] = store_as<T>(softmax_grad_out<T>(load_as<M>(a.v[k]), load_as<M>(b.v[k]), sum, log));
      store_vector<V>(gx + i * V, c);
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += step)
      gx[i] = store_as<T>(softmax_grad_out<T>(load_as<M>(g[i]), load_as<M>(y[i]), sum, log));
  }
}

// (outer, n, inner), inner > 1: threads as softmax_columns_kernel.
template <typename T>
__global__ void __launch_bounds__(kSoftmaxColumnThreads)
    softmax_backward_columns_kernel(const T* grad, const T* out, T* grad_in, int64_t n, int64_t inner, bool log) {
  using M = opmath_t<T>;
  __shared__ M smem[kSoftmaxColumnThreads];
  const int64_t chunks = (inner + blockDim.x - 1) / blockDim.x;
  const int64_t o = blockIdx.x / chunks;
  const int64_t i = (blockIdx.x % chunks) * blockDim.x + threadIdx.x;
  const bool active = i < inner;
  const int64_t base = o * n * inner + i;
  const T* g = grad + base;
  const T* y = out + base;
  T* gx = grad_in + base;

  M sum = 0;
  if (active)
    for (int64_t j = threadIdx.y; j < n; j += blockDim.y)
      sum += softmax_grad_term(load_as<M>(g[j * inner]), load_as<M>(y[j * inner]), log);
  M col[1] = {sum};
  reduce_y(col, Plus<M>{}, smem);
  if (!active) return;
  for (int64_t j = threadIdx.y; j < n; j += blockDim.y)
    gx[j * inner] = store_as<T>(softmax_grad_out<T>(load_as<M>(g[j * inner]), load_as<M>(y[j * inner]), col[0], log));
}

}  // namespace

void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (in.numel() == 0) return;
  DeviceGuard guard(out.device().index());
  const DimSplit split = split_at_dim(in.sizes(), dim);
  const int64_t outer = split.outer, n = split.size, inner = split.inner;
  const cudaStream_t stream = stream_of(out);
  dispatch_floating(in.dtype(), log ? "log_softmax (cuda)" : "softmax (cuda)", [&]<typename T>() {
    constexpr int V = kVecWidth<T>;
    const T* x = in.data_ptr<T>();
    T* y = out.data_ptr<T>();
    const bool aligned = reinterpret_cast<uintptr_t>(x) % sizeof(Vector<T, V>) == 0 &&
                         reinterpret_cast<uintptr_t>(y) % sizeof(Vector<T, V>) == 0;
    const SoftmaxLaunch L = plan_softmax(outer, n, inner, V, softmax_per_thread<opmath_t<T>>, aligned);
    const dim3 block(L.block_x, L.block_y);
    const auto grid = static_cast<unsigned>(L.grid);
    switch (L.kind) {
      case SoftmaxLaunch::Registers:
        TANDEM_LAUNCH(grid, block, 0, stream, softmax_rows_kernel<T>)(x, y, outer, n, log, L.vectorized);
        break;
      case SoftmaxLaunch::Online:
        TANDEM_LAUNCH(grid, block, 0, stream, softmax_rows_online_kernel<T>)(x, y, n, log, L.vectorized);
        break;
      case SoftmaxLaunch::Columns:
        TANDEM_LAUNCH(grid, block, 0, stream, softmax_columns_kernel<T>)(x, y, n, inner, log);
        break;
    }
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad, const Tensor& out, int64_t dim, bool log) {
  if (grad.numel() == 0) return;
  DeviceGuard guard(grad_in.device().index());
  const DimSplit split = split_at_dim(grad.sizes(), dim);
  const int64_t outer = split.outer, n = split.size, inner = split.inner;
  const cudaStream_t stream = stream_of(grad_in);
  dispatch_floating(grad.dtype(), log ? "log_softmax_backward (cuda)" : "softmax_backward (cuda)", [&]<typename T>() {
    constexpr int V = kVecWidth<T>;
    const T* g = grad.data_ptr<T>();
    const T* y = out.data_ptr<T>();
    T* gx = grad_in.data_ptr<T>();
    auto on_vector = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % sizeof(Vector<T, V>) == 0; };
    const bool aligned = on_vector(g) && on_vector(y) && on_vector(gx);
    const SoftmaxLaunch L = plan_softmax(outer, n, inner, V, softmax_backward_per_thread<opmath_t<T>>, aligned);
    const dim3 block(L.block_x, L.block_y);
    const auto grid = static_cast<unsigned>(L.grid);
    switch (L.kind) {
      case SoftmaxLaunch::Registers:
        TANDEM_LAUNCH(grid, block, 0, stream, softmax_backward_rows_kernel<T>)(g, y, gx, outer, n, log, L.vectorized);
        break;
      case SoftmaxLaunch::Online:
        TANDEM_LAUNCH(grid, block, 0, stream, softmax_backward_rows_online_kernel<T>)(g, y, gx, n, log, L.vectorized);
        break;
      case SoftmaxLaunch::Columns:
        TANDEM_LAUNCH(grid, block, 0, stream, softmax_backward_columns_kernel<T>)(g, y, gx, n, inner, log);
        break;
    }
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace tandem::cuda

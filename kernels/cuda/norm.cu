// CUDA kernels of batch norm and layer norm (contract in kernels/cpu/norm.h,
// whose CPU kernels are the specification; notes on precision in
// kernels/cuda/norm.h; embedding's kernels are in embedding.cu). The launch
// shapes and the scratch sizes come from kernels/cuda/norm_plan.h.
//
// Batch norm, input (N, C, L):
//  - statistics: per-thread sums of (x - shift, (x - shift)^2) with shift the
//    channel's first value (a sample, so the sums do not cancel), folded by
//    block reductions into partial sums per (channel, part); then one thread
//    per channel folds its parts in order (in double), writes mean and
//    invstd, updates the running statistics, and leaves the affine
//    coefficients (y = x * alpha + beta) for the elementwise pass.
//    Planes of 32 or more values: a grid (C, parts), a block walking its
//    rows' planes. Shorter planes ((N, C) above all): bands of 32 neighbouring
//    (channel, l) slots of a row per block, its rows split over threadIdx.y,
//    so that every load is coalesced.
//  - backward: the same two reductions of (g, g * (x - mean)), the fold,
//    then grad_input = g * a + (x - mean) * b + c elementwise.
// Layer norm: a row per group of threadIdx.x (a warp up to a block), the
// row's mean, then its squared deviations, then the outputs, the row kept in
// L1 between the passes; backward's weight and bias gradients are column
// sums over the rows: bands of 32 columns, rows split over threadIdx.y and
// over blocks, the blocks' parts folded in order by a second kernel.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loops.h"
#include "kernels/cuda/norm_plan.h"
#include "kernels/embedding.h"
#include "kernels/functors/norm.h"
#include "kernels/norm.h"
#include "tensor/core/dtype.h"
#include "tensor/core/errors.h"

namespace tandem::cuda {

namespace {

constexpr int kThreads = kNormThreads;
constexpr int kBandX = kNormBandX;
constexpr int kBandY = kNormBandY;

// A pair of sums.
template <typename M>
struct Sums {
  M a, b;
};
template <typename M>
struct AddSums {
  __device__ Sums<M> operator()(const Sums<M>& x, const Sums<M>& y) const { return {x.a + y.a, x.b + y.b}; }
};
template <typename M>
struct Plus {
  __device__ M operator()(M a, M b) const { return a + b; }
};

template <typename T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Bytes of scratch from the caching allocator, on the stream of the call.
struct Scratch {
  std::shared_ptr<Storage> storage;
  Scratch(int device, size_t bytes) : storage(detail::allocate_device(device, std::max<size_t>(bytes, 1))) {}
  template <typename X>
  X* at(size_t byte_offset) const {
    return reinterpret_cast<X*>(static_cast<char*>(storage->data()) + byte_offset);
  }
};
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The channel of linear element i of (N, C, L): (i / L) % C, in 32-bit
// arithmetic when every index fits.
struct ChannelOf32 {
  IntDivider L, C;
  __device__ int64_t operator()(int64_t i) const {
    const uint32_t q = L.div(static_cast<uint32_t>(i));
    return q - C.div(q) * C.divisor;
  }
};
struct ChannelOf64 {
  int64_t L, C;
  __device__ int64_t operator()(int64_t i) const { return (i / L) % C; }
};
template <typename F>
void with_channel_of(int64_t numel, int64_t C, int64_t L, const F& f) {
  if (numel <= kMax32BitIndex)
    f(ChannelOf32{IntDivider(static_cast<uint32_t>(std::max<int64_t>(L, 1))),
                  IntDivider(static_cast<uint32_t>(std::max<int64_t>(C, 1)))});
  else
    f(ChannelOf64{std::max<int64_t>(L, 1), std::max<int64_t>(C, 1)});
}

// ---------------------------------------------------------------- batch norm: channel sums

// The batch's shifted sums: (x - shift, (x - shift)^2), shift = x[n=0, c, l=0].
template <typename T, typename M>
struct StatsTerm {
  const T* x;
  int64_t L;
  __device__ M centre(int64_t c) const { return load_as<M>(x[c * L]); }
  __device__ Sums<M> operator()(int64_t off, M shift) const {
    const M d = load_as<M>(x[off]) - shift;
    return {d, d * d};
  }
};
// The backward's: (g, g * (x - mean)).
template <typename T, typename M>
struct GradTerm {
  const T *g, *x;
  const M* mean;
  __device__ M centre(int64_t c) const { return mean[c]; }
  __device__ Sums<M> operator()(int64_t off, M mu) const {
    const M gv = load_as<M>(g[off]);
    return {gv, gv * (load_as<M>(x[off]) - mu)};
  }
};

// Grid (C, parts): block (c, s) sums the planes of rows [N s / S, N (s + 1) / S)
// of channel c into partial[c * S + s].
template <typename M, typename Term>
__global__ void __launch_bounds__(kThreads)
    channel_sums_planes_kernel(Term term, int64_t N, int64_t C, int64_t L, Sums<M>* partial) {
  __shared__ Sums<M> smem[kThreads / 32];
  const int64_t c = blockIdx.x, S = gridDim.y, s = blockIdx.y;
  const M centre = term.centre(c);
  Sums<M> acc{M(0), M(0)};
  for (int64_t n = N * s / S; n < N * (s + 1) / S; ++n) {
    const int64_t base = (n * C + c) * L;
    for (int64_t l = threadIdx.x; l < L; l += blockDim.x) {
      const Sums<M> t = term(base + l, centre);
      acc.a += t.a;
      acc.b += t.b;
    }
  }
  acc = reduce_x(acc, AddSums<M>{}, Sums<M>{M(0), M(0)}, smem);
  if (threadIdx.x == 0) partial[c * S + s] = acc;
}

// Grid (bands, parts): block (band, s) sums slots j = band * 32 + threadIdx.x
// (slot j = c * L + l of a row of W = C * L values) over the rows
// [N s / S, N (s + 1) / S) into partial[j * S + s], i.e. [C][L * S].
template <typename M, typename Term>
__global__ void __launch_bounds__(kBandX* kBandY)
    channel_sums_bands_kernel(Term term, int64_t N, int64_t W, int64_t L, Sums<M>* partial) {
  __shared__ Sums<M> smem[kBandX * kBandY];
  const int64_t S = gridDim.y, s = blockIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  Sums<M> acc{M(0), M(0)};
  if (j < W) {
    const M centre = term.centre(j / L);
    for (int64_t n = N * s / S + threadIdx.y; n < N * (s + 1) / S; n += blockDim.y) {
      const Sums<M> t = term(n * W + j, centre);
      acc.a += t.a;
      acc.b += t.b;
    }
  }
  Sums<M> v[1] = {acc};
  reduce_y(v, AddSums<M>{}, smem);
  if (threadIdx.y == 0 && j < W) partial[j * S + s] = v[0];
}

// Sums of every channel into partial ([C][plan.parts], plan.partials in all).
template <typename M, typename Term>
void channel_sums(const ChannelSumsPlan& plan, const Term& term, const Nchw& s, Sums<M>* partial, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.splits));
  if (plan.planes)
    TANDEM_LAUNCH(grid, kThreads, 0, stream, channel_sums_planes_kernel<M, Term>)(term, s.N, s.C, s.L, partial);
  else
    TANDEM_LAUNCH(grid, dim3(kBandX, kBandY), 0, stream, channel_sums_bands_kernel<M, Term>)
  (term, s.N, s.C * s.L, s.L, partial);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
}

// The channel sums' plan on device; without sums (eval, or no values) an
// empty one: no parts, no scratch.
ChannelSumsPlan plan_channel_sums(const Nchw& s, int device, bool sums) {
  if (!sums) return {};
  const ChannelSumsPlan plan = channel_sums_plan(s, multiprocessor_count(device));
  TANDEM_INTERNAL_ASSERT(plan.grid_x <= INT32_MAX && plan.splits <= kNormMaxGridY, "batch_norm (cuda): grid (",
                         plan.grid_x, ", ", plan.splits, ") out of range");
  return plan;
}
// Bytes of scratch for the plan's partial sums: exactly what the kernels write.
template <typename M>
size_t partial_bytes(const ChannelSumsPlan& plan) {
  return aligned(static_cast<size_t>(plan.partials) * sizeof(Sums<M>));
}

// ---------------------------------------------------------------- batch norm: per-channel folds

// One thread per channel: the statistics (training: from the shifted sums
// of n values; eval: the running ones), the running statistics' update and
// the coefficients of y = x * alpha + beta; in double, as the CPU.
template <typename T, typename M>
__global__ void batch_norm_stats_kernel(const Sums<M>* partial, int64_t parts, int64_t C, int64_t L, int64_t n,
                                        const T* x, bool training, double momentum, double eps, const M* w, const M* b,
                                        M* mean, M* invstd, M* running_mean, M* running_var, M* alpha, M* beta) {
  const int64_t c = global_thread();
  if (c >= C) return;
  double mu = 0, is = 0;
  if (!training) {
    mu = static_cast<double>(running_mean[c]);
    is = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + eps);
  } else if (n > 0) {
    double s1 = 0, s2 = 0;
    for (int64_t p = 0; p < parts; ++p) {
      s1 += static_cast<double>(partial[c * parts + p].a);
      s2 += static_cast<double>(partial[c * parts + p].b);
    }
    const double nd = static_cast<double>(n), d = s1 / nd;
    const double var = fmax(s2 / nd - d * d, 0.0);
    mu = static_cast<double>(load_as<M>(x[c * L])) + d;
    is = 1.0 / std::sqrt(var + eps);
    if (running_mean != nullptr)
      running_mean[c] = static_cast<M>((1 - momentum) * static_cast<double>(running_mean[c]) + momentum * mu);
    if (running_var != nullptr) {
      const double unbiased = n > 1 ? var * nd / (nd - 1) : nan("");
      running_var[c] = static_cast<M>((1 - momentum) * static_cast<double>(running_var[c]) + momentum * unbiased);
    }
  }
  mean[c] = static_cast<M>(mu);
  invstd[c] = static_cast<M>(is);
  const double a = is * (w != nullptr ? static_cast<double>(w[c]) : 1.0);
  alpha[c] = static_cast<M>(a);
  beta[c] = static_cast<M>((b != nullptr ? static_cast<double>(b[c]) : 0.0) - mu * a);
}

// The backward's fold: the parameter gradients and, for grad_input =
// g * ka + (x - mean) * kb + kc, the coefficients.
template <typename M>
__global__ void batch_norm_grad_kernel(const Sums<M>* partial, int64_t parts, int64_t C, int64_t n, bool training,
                                       const M* invstd, const M* w, M* grad_weight, M* grad_bias, M* ka, M* kb, M* kc) {
  const int64_t c = global_thread();
  if (c >= C) return;
  double sum_g = 0, sum_gx = 0;
  for (int64_t p = 0; p < parts; ++p) {
    sum_g += static_cast<double>(partial[c * parts + p].a);
    sum_gx += static_cast<double>(partial[c * parts + p].b);
  }
  const double is = static_cast<double>(invstd[c]);
  if (grad_weight != nullptr) grad_weight[c] = static_cast<M>(sum_gx * is);
  if (grad_bias != nullptr) grad_bias[c] = static_cast<M>(sum_g);
  const double iw = is * (w != nullptr ? static_cast<double>(w[c]) : 1.0);
  const double nd = static_cast<double>(n);
  const bool batch = training && n > 0;
  ka[c] = static_cast<M>(iw);
  kb[c] = static_cast<M>(batch ? -sum_gx * is * is / nd * iw : 0.0);
  kc[c] = static_cast<M>(batch ? -sum_g / nd * iw : 0.0);
}

// ---------------------------------------------------------------- batch norm: elementwise

template <typename T, typename M, typename ChannelOf>
__global__ void batch_norm_apply_kernel(const T* x, T* y, int64_t numel, ChannelOf channel_of, const M* alpha,
                                        const M* beta) {
  for (int64_t i = global_thread(); i < numel; i += grid_threads()) {
    const int64_t c = channel_of(i);
    y[i] = store_as<T>(load_as<M>(x[i]) * alpha[c] + beta[c]);
  }
}

template <typename T, typename M, typename ChannelOf>
__global__ void batch_norm_grad_input_kernel(const T* g, const T* x, T* gx, int64_t numel, ChannelOf channel_of,
                                             const M* mean, const M* ka, const M* kb, const M* kc) {
  for (int64_t i = global_thread(); i < numel; i += grid_threads()) {
    const int64_t c = channel_of(i);
    gx[i] = store_as<T>(load_as<M>(g[i]) * ka[c] + (load_as<M>(x[i]) - mean[c]) * kb[c] + kc[c]);
  }
}

// ---------------------------------------------------------------- layer norm

// Rows of D values; row blockIdx.x * blockDim.y + threadIdx.y, its values
// threadIdx.x, + blockDim.x, ...
template <typename T, typename M>
__global__ void __launch_bounds__(kThreads) layer_norm_kernel(const T* x, T* y, const M* w, const M* b, M* mean,
                                                              M* invstd, int64_t rows, int64_t D, double eps) {
  __shared__ M smem[kThreads / 32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = row < rows;
  const T* xr = x + (active ? row : 0) * D;
  M s = 0;
  if (active)
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += load_as<M>(xr[j]);
  s = allreduce_x(s, Plus<M>{}, M(0), smem);
  const M mu = D > 0 ? s / static_cast<M>(D) : M(0);
  M q = 0;
  if (active)
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const M d = load_as<M>(xr[j]) - mu;
      q += d * d;
    }
  q = allreduce_x(q, Plus<M>{}, M(0), smem);
  if (!active) return;
  const M is = D > 0 ? M(1) / std::sqrt(q / static_cast<M>(D) + static_cast<M>(eps)) : M(0);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    invstd[row] = is;
  }
  const M c = -mu * is;
  T* yr = y + row * D;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    M v = load_as<M>(xr[j]) * is + c;
    if (w != nullptr) v *= w[j];
    if (b != nullptr) v += b[j];
    yr[j] = store_as<T>(v);
  }
}

// grad_input per row: with gw = g * w, invstd * (gw - mean(gw) - xhat * mean(gw * xhat)).
template <typename T, typename M>
__global__ void __launch_bounds__(kThreads)
    layer_norm_grad_input_kernel(const T* g, const T* x, const M* w, const M* mean, const M* invstd, T* gx,
                                 int64_t rows, int64_t D) {
  __shared__ Sums<M> smem[kThreads / 32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = row < rows;
  const int64_t base = (active ? row : 0) * D;
  const M mu = active ? mean[row] : M(0), is = active ? invstd[row] : M(0);
  Sums<M> acc{M(0), M(0)};
  if (active)
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const M gw = load_as<M>(g[base + j]) * (w != nullptr ? w[j] : M(1));
      acc.a += gw;
      acc.b += gw * (load_as<M>(x[base + j]) - mu);
    }
  acc = allreduce_x(acc, AddSums<M>{}, Sums<M>{M(0), M(0)}, smem);
  if (!active) return;
  const M inv_d = M(1) / static_cast<M>(D);
  const M k2 = -acc.b * inv_d * is * is * is, k3 = -acc.a * inv_d * is;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const M gw = load_as<M>(g[base + j]) * (w != nullptr ? w[j] : M(1));
    gx[base + j] = store_as<T>(gw * is + (load_as<M>(x[base + j]) - mu) * k2 + k3);
  }
}

// Grid (bands of 32 columns, parts): the sums over rows [rows s / S,
// rows (s + 1) / S) of g * xhat and g per column, into grad_weight and
// grad_bias directly when S == 1, else into partial[s * D + j].
template <typename T, typename M>
__global__ void __launch_bounds__(kBandX* kBandY)
    layer_norm_param_grads_kernel(const T* g, const T* x, const M* mean, const M* invstd, int64_t rows, int64_t D,
                                  M* grad_weight, M* grad_bias, Sums<M>* partial) {
  __shared__ Sums<M> smem[kBandX * kBandY];
  const int64_t S = gridDim.y, s = blockIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  Sums<M> acc{M(0), M(0)};
  if (j < D)
    for (int64_t r = rows * s / S + threadIdx.y; r < rows * (s + 1) / S; r += blockDim.y) {
      const M gv = load_as<M>(g[r * D + j]);
      acc.a += gv * (load_as<M>(x[r * D + j]) - mean[r]) * invstd[r];
      acc.b += gv;
    }
  Sums<M> v[1] = {acc};
  reduce_y(v, AddSums<M>{}, smem);
  if (threadIdx.y != 0 || j >= D) return;
  if (S > 1) {
    partial[s * D + j] = v[0];
    return;
  }
  if (grad_weight != nullptr) grad_weight[j] = v[0].a;
  if (grad_bias != nullptr) grad_bias[j] = v[0].b;
}

// One thread per column: its S parts, in order.
template <typename M>
__global__ void layer_norm_param_fold_kernel(const Sums<M>* partial, int64_t S, int64_t D, M* grad_weight,
                                             M* grad_bias) {
  const int64_t j = global_thread();
  if (j >= D) return;
  M a = 0, b = 0;
  for (int64_t s = 0; s < S; ++s) {
    a += partial[s * D + j].a;
    b += partial[s * D + j].b;
  }
  if (grad_weight != nullptr) grad_weight[j] = a;
  if (grad_bias != nullptr) grad_bias[j] = b;
}

// A row of D values per group of block_x lanes: about 4 values a lane, a
// warp at least and 256 lanes at most; the rest of a 128-thread block takes
// further rows.
dim3 layer_norm_block(int64_t D) {
  int64_t x = 32;
  while (x < kThreads && x * 4 < D) x *= 2;
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(std::max<int64_t>(1, 128 / x)));
}

}  // namespace

// ---------------------------------------------------------------- entry points

void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training,
                double momentum, double eps) {
  const Nchw s = nchw_of(input.sizes());
  if (s.C == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(out);
  dispatch_floating(input.dtype(), "batch_norm (cuda)", [&]<typename T>() {
    using M = opmath_t<T>;
    const T* x = input.data_ptr<T>();
    const int64_t n = s.N * s.L;
    const ChannelSumsPlan plan = plan_channel_sums(s, device, training && n > 0);
    const size_t sums_bytes = partial_bytes<M>(plan);
    Scratch scratch(device, sums_bytes + 2 * aligned(static_cast<size_t>(s.C) * sizeof(M)));
    Sums<M>* partial = scratch.at<Sums<M>>(0);
    M* alpha = scratch.at<M>(sums_bytes);
    M* beta = scratch.at<M>(sums_bytes + aligned(static_cast<size_t>(s.C) * sizeof(M)));
    if (training && n > 0) channel_sums<M>(plan, StatsTerm<T, M>{x, s.L}, s, partial, stream);
    TANDEM_LAUNCH(static_cast<unsigned>(ceil_div(s.C, kThreads)), kThreads, 0, stream, batch_norm_stats_kernel<T, M>)
    (partial, plan.parts, s.C, s.L, n, x, training, momentum, eps, ptr_or_null<M>(weight), ptr_or_null<M>(bias),
     mean.data_ptr<M>(), invstd.data_ptr<M>(), ptr_or_null<M>(running_mean), ptr_or_null<M>(running_var), alpha, beta);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    const int64_t numel = input.numel();
    if (numel == 0) return;
    with_channel_of(numel, s.C, s.L, [&](const auto& channel_of) {
      TANDEM_LAUNCH(grid_stride_blocks(numel, device), kGridStrideThreads, 0, stream,
                    batch_norm_apply_kernel<T, M, std::decay_t<decltype(channel_of)>>)
      (x, out.data_ptr<T>(), numel, channel_of, alpha, beta);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training) {
  const Nchw s = nchw_of(input.sizes());
  if (s.C == 0) return;
  const int device = input.device().index();
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(input);
  dispatch_floating(input.dtype(), "batch_norm_backward (cuda)", [&]<typename T>() {
    using M = opmath_t<T>;
    const T *g = grad_out.data_ptr<T>(), *x = input.data_ptr<T>();
    const M* mu = mean.data_ptr<M>();
    const int64_t n = s.N * s.L;
    const bool sums = n > 0 && (grad_weight.defined() || grad_bias.defined() || (grad_input.defined() && training));
    const ChannelSumsPlan plan = plan_channel_sums(s, device, sums);
    const size_t sums_bytes = partial_bytes<M>(plan);
    const size_t coef = aligned(static_cast<size_t>(s.C) * sizeof(M));
    Scratch scratch(device, sums_bytes + 3 * coef);
    Sums<M>* partial = scratch.at<Sums<M>>(0);
    M *ka = scratch.at<M>(sums_bytes), *kb = scratch.at<M>(sums_bytes + coef),
      *kc = scratch.at<M>(sums_bytes + 2 * coef);
    if (sums) channel_sums<M>(plan, GradTerm<T, M>{g, x, mu}, s, partial, stream);
    TANDEM_LAUNCH(static_cast<unsigned>(ceil_div(s.C, kThreads)), kThreads, 0, stream, batch_norm_grad_kernel<M>)
    (partial, plan.parts, s.C, n, training, invstd.data_ptr<M>(), ptr_or_null<M>(weight), ptr_or_null<M>(grad_weight),
     ptr_or_null<M>(grad_bias), ka, kb, kc);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    const int64_t numel = input.numel();
    if (!grad_input.defined() || numel == 0) return;
    with_channel_of(numel, s.C, s.L, [&](const auto& channel_of) {
      TANDEM_LAUNCH(grid_stride_blocks(numel, device), kGridStrideThreads, 0, stream,
                    batch_norm_grad_input_kernel<T, M, std::decay_t<decltype(channel_of)>>)
      (g, x, grad_input.data_ptr<T>(), numel, channel_of, mu, ka, kb, kc);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, double eps) {
  const int64_t rows = mean.numel();
  if (rows == 0) return;
  const int64_t D = input.numel() / rows;
  DeviceGuard guard(out.device().index());
  const cudaStream_t stream = stream_of(out);
  dispatch_floating(input.dtype(), "layer_norm (cuda)", [&]<typename T>() {
    using M = opmath_t<T>;
    const dim3 block = layer_norm_block(D);
    const auto grid = static_cast<unsigned>(ceil_div(rows, block.y));
    TANDEM_LAUNCH(grid, block, 0, stream, layer_norm_kernel<T, M>)
    (input.data_ptr<T>(), out.data_ptr<T>(), ptr_or_null<M>(weight), ptr_or_null<M>(bias), mean.data_ptr<M>(),
     invstd.data_ptr<M>(), rows, D, eps);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd) {
  const int64_t rows = mean.numel();
  const int device = input.device().index();
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(input);
  dispatch_floating(input.dtype(), "layer_norm_backward (cuda)", [&]<typename T>() {
    using M = opmath_t<T>;
    // Without rows the parameters' gradients still have their size (zeros).
    const int64_t D = rows > 0                ? input.numel() / rows
                      : grad_weight.defined() ? grad_weight.numel()
                      : grad_bias.defined()   ? grad_bias.numel()
                                              : 0;
    const T *g = grad_out.data_ptr<T>(), *x = input.data_ptr<T>();
    const M *mu = mean.data_ptr<M>(), *is = invstd.data_ptr<M>();
    if (grad_input.defined() && rows > 0 && D > 0) {
      const dim3 block = layer_norm_block(D);
      TANDEM_LAUNCH(static_cast<unsigned>(ceil_div(rows, block.y)), block, 0, stream,
                    layer_norm_grad_input_kernel<T, M>)
      (g, x, ptr_or_null<M>(weight), mu, is, grad_input.data_ptr<T>(), rows, D);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if ((!grad_weight.defined() && !grad_bias.defined()) || D == 0) return;
    const int64_t bands = ceil_div(D, kBandX);
    const int64_t S = layer_norm_param_splits(rows, D, multiprocessor_count(device));
    Scratch scratch(device, S > 1 ? static_cast<size_t>(S * D) * sizeof(Sums<M>) : 0);
    M *gw = ptr_or_null<M>(grad_weight), *gb = ptr_or_null<M>(grad_bias);
    TANDEM_LAUNCH(dim3(static_cast<unsigned>(bands), static_cast<unsigned>(S)), dim3(kBandX, kBandY), 0, stream,
                  layer_norm_param_grads_kernel<T, M>)
    (g, x, mu, is, rows, D, gw, gb, scratch.at<Sums<M>>(0));
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    if (S == 1) return;
    TANDEM_LAUNCH(static_cast<unsigned>(ceil_div(D, kThreads)), kThreads, 0, stream, layer_norm_param_fold_kernel<M>)
    (scratch.at<Sums<M>>(0), S, D, gw, gb);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace tandem::cuda

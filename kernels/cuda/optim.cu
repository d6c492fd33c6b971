// CUDA multi-tensor kernels: the optimizers' updates (SGD, Adam/AdamW) with
// the CPU's functors (kernels/functors/optim.h), and the per-tensor norms and
// scaling of the foreach ops (tensor/ops/foreach.h). PyTorch's
// multi_tensor_apply scheme: the host packs the pointers, sizes and
// per-tensor scalars of up to kMaxTensors tensors into one kernel argument
// (TensorList, passed as a __grid_constant__ parameter; CUDA 12.1 and newer
// take up to 32 KiB of them); the grid has one block per kChunk-element chunk
// of any of those tensors, and a block finds its tensor by binary search over
// the chunks' starts. So a step is one launch per kMaxTensors tensors,
// whatever their sizes.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/functors/optim.h"
#include "kernels/functors/reduce.h"
#include "kernels/optim.h"

namespace tandem::cuda {

namespace {

constexpr int64_t kChunk = 65536;  // elements per block
constexpr int kThreads = 512;
// Bytes of kernel argument a TensorList may take: under the 32764-byte limit
// of CUDA 12.1+, well over the 4 KiB of older toolkits.
constexpr size_t kListBytes = 16 * 1024;

struct NoAux {};

// Per tensor: Depth pointers (the i-th tensor of each list), its size, the
// first block of its chunks, and Aux (per-tensor scalars).
template <int Depth, typename Aux>
constexpr int max_tensors() {
  return static_cast<int>((kListBytes - 64) /
                          (Depth * sizeof(void*) + sizeof(int64_t) + sizeof(int32_t) + sizeof(Aux)));
}

template <int Depth, typename Aux>
struct TensorList {
  static constexpr int kMax = max_tensors<Depth, Aux>();
  void* ptrs[Depth][kMax];
  int64_t numel[kMax];
  int32_t chunk_start[kMax + 1];  // chunk_start[count] = the grid's size
  Aux aux[kMax];
  int32_t count;
};
// Adam's per-tensor aux: the bias corrections of a host step count, or the
// step count on the device (fused Adam) from which the kernel computes them.
template <typename M>
struct AdamAux {
  fn::AdamTensorScalars<M> scalars;
  const float* step;  // null: use scalars
};

static_assert(sizeof(TensorList<5, AdamAux<double>>) <= kListBytes);
static_assert(sizeof(TensorList<1, NoAux>) <= kListBytes);
static_assert(TensorList<5, AdamAux<double>>::kMax >= 200);

// This block's tensor: the last one whose chunks start at or before it.
template <typename List>
__device__ __forceinline__ int block_tensor(const List& l) {
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  int lo = 0, hi = l.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (l.chunk_start[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Runs body(list, tensor, first element, elements) in each block.
template <typename List, typename Body>
__global__ void __launch_bounds__(kThreads) multi_tensor_kernel(const __grid_constant__ List l, Body body) {
  const int t = block_tensor(l);
  const int64_t begin = static_cast<int64_t>(static_cast<int32_t>(blockIdx.x) - l.chunk_start[t]) * kChunk;
  body(l, t, begin, l.numel[t] - begin < kChunk ? l.numel[t] - begin : kChunk);
}

// Fills TensorLists from `lists` (Depth lists of n tensors each; aux[i] for
// tensor i) and calls launch(list, blocks) for each full one and the last.
// Empty tensors are left out.
template <int Depth, typename Aux, typename Launch>
void for_each_list(const std::array<const std::vector<Tensor>*, Depth>& lists, const std::vector<Aux>& aux,
                   const Launch& launch) {
  using List = TensorList<Depth, Aux>;
  List l;
  l.count = 0;
  int64_t blocks = 0;
  auto flush = [&] {
    if (l.count == 0) return;
    l.chunk_start[l.count] = static_cast<int32_t>(blocks);
    launch(l, blocks);
    l.count = 0;
    blocks = 0;
  };
  const std::vector<Tensor>& first = *lists[0];
  for (size_t i = 0; i < first.size(); ++i) {
    const int64_t numel = first[i].numel();
    if (numel == 0) continue;
    const int64_t chunks = ceil_div(numel, kChunk);
    if (l.count == List::kMax || blocks + chunks > INT32_MAX) flush();
    const int k = l.count++;
    for (int d = 0; d < Depth; ++d) l.ptrs[d][k] = (*lists[d])[i].data_ptr();
    l.numel[k] = numel;
    l.chunk_start[k] = static_cast<int32_t>(blocks);
    l.aux[k] = aux[i];
    blocks += chunks;
  }
  flush();
}

template <typename List, typename Body>
void launch_list(const List& l, int64_t blocks, const Body& body, cudaStream_t stream) {
  TANDEM_LAUNCH(static_cast<unsigned>(blocks), kThreads, 0, stream, multi_tensor_kernel<List, Body>)(l, body);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
}

// Whether every pointer is aligned for W-element vectors of T.
template <int W, typename T, typename... P>
__device__ __forceinline__ bool aligned(const P*... ptrs) {
  const uintptr_t bits = (reinterpret_cast<uintptr_t>(ptrs) | ...);
  return bits % (sizeof(T) * W) == 0;
}

// Calls f(i, W) for elements i, i+1, ... i+W-1 of [0, n): whole W-element
// vectors strided over the block, then the tail one by one.
template <int W, typename F>
__device__ __forceinline__ void block_elements(int64_t n, const F& f) {
  const int64_t vectors = n / W;
  for (int64_t j = threadIdx.x; j < vectors; j += blockDim.x) f.template operator()<W>(j * W);
  for (int64_t i = vectors * W + threadIdx.x; i < n; i += blockDim.x) f.template operator()<1>(i);
}

// The GradScaler's arguments of a fused step (kernels/optim.h): the flag
// that skips it, and the scale its gradients still carry. Both read on the
// device; the branches on them are uniform over the grid.
struct AmpArgs {
  const float* found_inf;   // null, or not 0: the step is skipped
  const float* grad_scale;  // null, or the gradients are unscaled first

  __device__ bool skipped() const { return found_inf != nullptr && *found_inf != 0.0f; }
  // 1 / grad_scale rounded to float, as amp_unscale_'s inv_scale; 1 without
  // a scale (a product by 1 is exact). The update takes the unscaled
  // gradient in the opmath type and the gradient is stored rounded, as
  // PyTorch's fused Adam: a float16 gradient loses nothing to the scale.
  template <typename M>
  __device__ M inverse() const {
    return grad_scale != nullptr ? static_cast<M>(1.0f / *grad_scale) : M(1);
  }
};

AmpArgs amp_args(const Tensor& found_inf, const Tensor& grad_scale) {
  return {found_inf.defined() ? found_inf.data_ptr<float>() : nullptr,
          grad_scale.defined() ? grad_scale.data_ptr<float>() : nullptr};
}

// ---- SGD: lists (param, grad[, momentum_buffer]); aux: the tensor's scalars
// (a fresh buffer is zeroed and decays by 0 this step).
template <typename T, fn::SgdMomentum kMomentum, bool kWeightDecay>
struct SgdBody {
  using M = opmath_t<T>;
  static constexpr bool kBuffer = kMomentum != fn::SgdMomentum::None;
  fn::SgdStep<M> f;
  AmpArgs amp;

  template <typename List>
  __device__ void operator()(const List& l, int t, int64_t begin, int64_t n) const {
    if (amp.skipped()) return;
    T* p = static_cast<T*>(l.ptrs[0][t]) + begin;
    T* g = static_cast<T*>(l.ptrs[1][t]) + begin;
    T* buf = kBuffer ? static_cast<T*>(l.ptrs[kBuffer ? 2 : 0][t]) + begin : nullptr;
    const fn::SgdTensorScalars<M> s = l.aux[t];
    const bool unscale = amp.grad_scale != nullptr;
    const M inv = amp.inverse<M>();
    auto apply = [&]<int W>(int64_t i) {
      Vector<T, W> pv = load_vector<W>(p + i), gv = load_vector<W>(g + i), bv{};
      if constexpr (kBuffer) bv = load_vector<W>(buf + i);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const M gk = load_as<M>(gv.v[k]) * inv;
        if (unscale) gv.v[k] = store_as<T>(gk);
        const M b = kBuffer ? load_as<M>(bv.v[k]) : M(0);
        const auto r = fn::sgd_update<kMomentum, kWeightDecay>(f, s, load_as<M>(pv.v[k]), gk, b);
        pv.v[k] = store_as<T>(r.p);
        if constexpr (kBuffer) bv.v[k] = store_as<T>(r.buffer);
      }
      store_vector<W>(p + i, pv);
      if (unscale) store_vector<W>(g + i, gv);
      if constexpr (kBuffer) store_vector<W>(buf + i, bv);
    };
    constexpr int W = kVecWidth<T>;
    if (aligned<W, T>(p, g, kBuffer ? buf : p))
      block_elements<W>(n, apply);
    else
      block_elements<1>(n, apply);
  }
};

// ---- Adam/AdamW: lists (param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq]);
// aux: the step's per-tensor scalars, or its step count on the device
// (already incremented by StepCountBody).
template <typename T, fn::WeightDecay kWeightDecay, bool kAmsgrad>
struct AdamBody {
  using M = opmath_t<T>;
  fn::AdamStep<M> f;
  double lr, beta1, beta2;  // for the bias corrections of a device step count
  AmpArgs amp;

  template <typename List>
  __device__ void operator()(const List& l, int t, int64_t begin, int64_t n) const {
    if (amp.skipped()) return;
    T* p = static_cast<T*>(l.ptrs[0][t]) + begin;
    T* g = static_cast<T*>(l.ptrs[1][t]) + begin;
    T* m = static_cast<T*>(l.ptrs[2][t]) + begin;
    T* v = static_cast<T*>(l.ptrs[3][t]) + begin;
    T* v_max = kAmsgrad ? static_cast<T*>(l.ptrs[kAmsgrad ? 4 : 0][t]) + begin : nullptr;
    const AdamAux<M> aux = l.aux[t];
    const fn::AdamTensorScalars<M> s =
        aux.step != nullptr ? fn::AdamTensorScalars<M>::make(lr, beta1, beta2, *aux.step) : aux.scalars;
    const bool unscale = amp.grad_scale != nullptr;
    const M inv = amp.inverse<M>();
    auto apply = [&]<int W>(int64_t i) {
      Vector<T, W> pv = load_vector<W>(p + i), gv = load_vector<W>(g + i), mv = load_vector<W>(m + i),
                   vv = load_vector<W>(v + i), xv{};
      if constexpr (kAmsgrad) xv = load_vector<W>(v_max + i);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const M gk = load_as<M>(gv.v[k]) * inv;
        if (unscale) gv.v[k] = store_as<T>(gk);
        const M x = kAmsgrad ? load_as<M>(xv.v[k]) : M(0);
        const auto r = fn::adam_moments<kWeightDecay, kAmsgrad>(f, load_as<M>(pv.v[k]), gk, load_as<M>(mv.v[k]),
                                                                load_as<M>(vv.v[k]), x);
        pv.v[k] = store_as<T>(fn::adam_apply(f, s, r.p, r.m, std::sqrt(r.second)));
        mv.v[k] = store_as<T>(r.m);
        vv.v[k] = store_as<T>(r.v);
        if constexpr (kAmsgrad) xv.v[k] = store_as<T>(r.v_max);
      }
      store_vector<W>(p + i, pv);
      if (unscale) store_vector<W>(g + i, gv);
      store_vector<W>(m + i, mv);
      store_vector<W>(v + i, vv);
      if constexpr (kAmsgrad) store_vector<W>(v_max + i, xv);
    };
    constexpr int W = kVecWidth<T>;
    if (aligned<W, T>(p, g, m, v, kAmsgrad ? v_max : p))
      block_elements<W>(n, apply);
    else
      block_elements<1>(n, apply);
  }
};

// ---- norms: every order in one functor (a branch uniform over the grid),
// so that each dtype compiles one pair of kernels, accumulating in double
// as the CPU does.
struct AnyNorm {
  enum Order : int8_t { Two, One, Zero, Inf, NegInf, P };
  Order order;
  double p;

  static AnyNorm of(double p) {
    if (p == 2) return {Two, p};
    if (p == 1) return {One, p};
    if (p == 0) return {Zero, p};
    if (std::isinf(p)) return {p > 0 ? Inf : NegInf, p};
    return {P, p};
  }
  __device__ double identity() const {
    if (order == Inf) return fn::NormInfOps<double>{}.identity();
    if (order == NegInf) return fn::NormNegInfOps<double>{}.identity();
    return fn::Norm2Ops<double>{}.identity();
  }
  __device__ double reduce(double a, double x) const {
    switch (order) {
      case Two: return fn::Norm2Ops<double>{}.reduce(a, x, 0);
      case One: return fn::Norm1Ops<double>{}.reduce(a, x, 0);
      case Zero: return fn::Norm0Ops<double>{}.reduce(a, x, 0);
      case Inf: return fn::NormInfOps<double>{}.reduce(a, x, 0);
      case NegInf: return fn::NormNegInfOps<double>{}.reduce(a, x, 0);
      case P: break;
    }
    return fn::NormPOps<double>{{}, p}.reduce(a, x, 0);
  }
  __device__ double combine(double a, double b) const {
    if (order == Inf) return fn::NormInfOps<double>{}.combine(a, b);
    if (order == NegInf) return fn::NormNegInfOps<double>{}.combine(a, b);
    return fn::Norm2Ops<double>{}.combine(a, b);
  }
  __device__ double project(double a) const {
    switch (order) {
      case Two: return fn::Norm2Ops<double>{}.project(a);
      case P: return fn::NormPOps<double>{{}, p}.project(a);
      default: return a;
    }
  }
};

// Each block folds its chunk into partials[blockIdx.x]; aux: the tensor's
// place in the output.
template <typename T>
struct NormChunkBody {
  AnyNorm ops;
  double* partials;

  template <typename List>
  __device__ void operator()(const List& l, int t, int64_t begin, int64_t n) const {
    __shared__ double smem[kThreads / 32];
    const T* x = static_cast<const T*>(l.ptrs[0][t]) + begin;
    double acc = ops.identity();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc = ops.reduce(acc, load_as<double>(x[i]));
    acc = reduce_x(
        acc, [&](double a, double b) { return ops.combine(a, b); }, ops.identity(), smem);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
  }
};

// One block per tensor of the list: its chunks' partials, folded in order,
// projected into out[aux].
template <typename T, typename List>
__global__ void __launch_bounds__(kThreads)
    norm_finalize_kernel(const __grid_constant__ List l, AnyNorm ops, const double* partials, T* out) {
  __shared__ double smem[kThreads / 32];
  const int t = static_cast<int>(blockIdx.x);
  double acc = ops.identity();
  for (int32_t c = l.chunk_start[t] + static_cast<int32_t>(threadIdx.x); c < l.chunk_start[t + 1];
       c += static_cast<int32_t>(blockDim.x))
    acc = ops.combine(acc, partials[c]);
  acc = reduce_x(
      acc, [&](double a, double b) { return ops.combine(a, b); }, ops.identity(), smem);
  if (threadIdx.x == 0) out[l.aux[t]] = store_as<T>(ops.project(acc));
}

// ---- scaling by a device scalar
template <typename T>
struct MulBody {
  const T* scale;

  template <typename List>
  __device__ void operator()(const List& l, int t, int64_t begin, int64_t n) const {
    using M = opmath_t<T>;
    T* x = static_cast<T*>(l.ptrs[0][t]) + begin;
    const M c = load_as<M>(*scale);
    auto apply = [&]<int W>(int64_t i) {
      Vector<T, W> xv = load_vector<W>(x + i);
#pragma unroll
      for (int k = 0; k < W; ++k) xv.v[k] = store_as<T>(load_as<M>(xv.v[k]) * c);
      store_vector<W>(x + i, xv);
    };
    constexpr int W = kVecWidth<T>;
    if (aligned<W, T>(x))
      block_elements<W>(n, apply);
    else
      block_elements<1>(n, apply);
  }
};

// ---- the GradScaler's unscale and non-finite check: x *= inv_scale (unless
// inv_scale is null: check only), and found_inf = 1 where an element was not
// finite (every writer writes 1: no atomic needed)
template <typename T>
struct UnscaleBody {
  const float* inv_scale;
  float* found_inf;

  template <typename List>
  __device__ void operator()(const List& l, int t, int64_t begin, int64_t n) const {
    using M = opmath_t<T>;
    T* x = static_cast<T*>(l.ptrs[0][t]) + begin;
    const bool write = inv_scale != nullptr;
    const M c = write ? static_cast<M>(*inv_scale) : M(1);
    bool bad = false;
    auto apply = [&]<int W>(int64_t i) {
      Vector<T, W> xv = load_vector<W>(x + i);
#pragma unroll
      for (int k = 0; k < W; ++k) {
        const M v = load_as<M>(xv.v[k]);
        bad |= !fn::finite(v);
        xv.v[k] = store_as<T>(v * c);
      }
      if (write) store_vector<W>(x + i, xv);
    };
    constexpr int W = kVecWidth<T>;
    if (aligned<W, T>(x))
      block_elements<W>(n, apply);
    else
      block_elements<1>(n, apply);
    if (bad) *found_inf = 1.0f;
  }
};

// ---- fused Adam's step counts: each one-element count += 1, unless the step
// is skipped; one block per count, before the update that reads them.
struct StepCountBody {
  AmpArgs amp;

  template <typename List>
  __device__ void operator()(const List& l, int t, int64_t, int64_t) const {
    if (threadIdx.x == 0 && !amp.skipped()) *static_cast<float*>(l.ptrs[0][t]) += 1.0f;
  }
};

__global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                                    double backoff_factor, int64_t growth_interval) {
  const fn::ScaleUpdate u =
      fn::update_scale(*scale, *growth_tracker, *found_inf != 0.0f, growth_factor, backoff_factor, growth_interval);
  *scale = u.scale;
  *growth_tracker = u.growth_tracker;
}

int device_of(const std::vector<Tensor>& tensors) { return tensors[0].device().index(); }

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const std::vector<uint8_t>& fresh, const fn::SgdHyper& h,
              const Tensor& found_inf, const Tensor& grad_scale) {
  if (params.empty()) return;
  const AmpArgs amp = amp_args(found_inf, grad_scale);
  const int device = device_of(params);
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(params[0]);
  dispatch_floating(params[0].dtype(), "sgd_step (cuda)", [&]<typename T>() {
    using M = opmath_t<T>;
    const auto f = fn::SgdStep<M>::make(h);
    std::vector<fn::SgdTensorScalars<M>> scalars(params.size());
    for (size_t i = 0; i < params.size(); ++i) scalars[i] = fn::SgdTensorScalars<M>::make(h, fresh[i] != 0);
    fn::visit_sgd(h, [&]<fn::SgdMomentum kMomentum, bool kWeightDecay>() {
      auto launch = [&](const auto& l, int64_t blocks) {
        launch_list(l, blocks, SgdBody<T, kMomentum, kWeightDecay>{f, amp}, stream);
      };
      if constexpr (kMomentum != fn::SgdMomentum::None)
        for_each_list<3, fn::SgdTensorScalars<M>>({&params, &grads, &momentum_buffers}, scalars, launch);
      else
        for_each_list<2, fn::SgdTensorScalars<M>>({&params, &grads}, scalars, launch);
    });
  });
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
               const std::vector<double>& steps, const std::vector<Tensor>& device_steps, const fn::AdamHyper& h,
               const Tensor& found_inf, const Tensor& grad_scale) {
  if (params.empty()) return;
  const int device = device_of(params);
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(params[0]);
  const AmpArgs amp = amp_args(found_inf, grad_scale);
  const bool on_device = !device_steps.empty();
  if (on_device) {
    std::vector<NoAux> none(device_steps.size());
    for_each_list<1, NoAux>({&device_steps}, none,
                            [&](const auto& l, int64_t blocks) { launch_list(l, blocks, StepCountBody{amp}, stream); });
  }
  dispatch_floating(params[0].dtype(), "adam_step (cuda)", [&]<typename T>() {
    using M = opmath_t<T>;
    const auto f = fn::AdamStep<M>::make(h);
    std::vector<AdamAux<M>> aux(params.size());
    for (size_t i = 0; i < params.size(); ++i)
      aux[i] = on_device ? AdamAux<M>{{}, device_steps[i].data_ptr<float>()}
                         : AdamAux<M>{fn::AdamTensorScalars<M>::make(h, steps[i]), nullptr};
    fn::visit_adam(h, [&]<fn::WeightDecay kWeightDecay, bool kAmsgrad>() {
      auto launch = [&](const auto& l, int64_t blocks) {
        launch_list(l, blocks, AdamBody<T, kWeightDecay, kAmsgrad>{f, h.lr, h.beta1, h.beta2, amp}, stream);
      };
      if constexpr (kAmsgrad)
        for_each_list<5, AdamAux<M>>({&params, &grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs}, aux, launch);
      else
        for_each_list<4, AdamAux<M>>({&params, &grads, &exp_avgs, &exp_avg_sqs}, aux, launch);
    });
  });
}

void foreach_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  if (tensors.empty()) return;
  const int device = device_of(tensors);
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(out);
  // Empty tensors have no chunk: their norm is 0, every order's identity
  // projected (the front end refuses inf, -inf and p < 0 there, as torch).
  TANDEM_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
  const AnyNorm ops = AnyNorm::of(p);
  std::vector<int32_t> slot(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) slot[i] = static_cast<int32_t>(i);
  dispatch_floating(out.dtype(), "foreach_norm (cuda)", [&]<typename T>() {
    for_each_list<1, int32_t>({&tensors}, slot, [&](const auto& l, int64_t blocks) {
      // The partials go back to the allocator when this returns; the block is
      // reused only by work queued after these kernels on the same stream.
      std::shared_ptr<Storage> workspace =
          detail::allocate_device(device, static_cast<size_t>(blocks) * sizeof(double));
      double* partials = static_cast<double*>(workspace->data());
      launch_list(l, blocks, NormChunkBody<T>{ops, partials}, stream);
      TANDEM_LAUNCH(static_cast<unsigned>(l.count), kThreads, 0, stream,
                    norm_finalize_kernel<T, std::decay_t<decltype(l)>>)
      (l, ops, partials, out.data_ptr<T>());
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale) {
  if (tensors.empty()) return;
  const int device = device_of(tensors);
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(tensors[0]);
  dispatch_floating(scale.dtype(), "foreach_mul_ (cuda)", [&]<typename T>() {
    std::vector<NoAux> none(tensors.size());
    for_each_list<1, NoAux>({&tensors}, none, [&](const auto& l, int64_t blocks) {
      launch_list(l, blocks, MulBody<T>{scale.data_ptr<T>()}, stream);
    });
  });
}

void amp_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  if (grads.empty()) return;
  const int device = device_of(grads);
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(grads[0]);
  dispatch_floating(grads[0].dtype(), "amp_unscale_ (cuda)", [&]<typename T>() {
    std::vector<NoAux> none(grads.size());
    for_each_list<1, NoAux>({&grads}, none, [&](const auto& l, int64_t blocks) {
      launch_list(
          l, blocks,
          UnscaleBody<T>{inv_scale.defined() ? inv_scale.data_ptr<float>() : nullptr, found_inf.data_ptr<float>()},
          stream);
    });
  });
}

void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                       double backoff_factor, int64_t growth_interval) {
  const int device = scale.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(scale);
  TANDEM_LAUNCH(1, 1, 0, stream, update_scale_kernel)
  (scale.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(), found_inf.data_ptr<float>(), growth_factor,
   backoff_factor, growth_interval);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace tandem::cuda

// CPU multi-tensor optimizer updates and per-tensor norms: a loop over the
// tensors, each a contiguous loop that applies the shared update
// (kernels/functors/optim.h), instantiated per variant so that it has no
// branch and vectorizes (float32, float64; the 16-bit types convert element
// by element); tensors above kElementwiseGrain elements are split across
// threads.
#include "kernels/optim.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/cpu/parallel.h"
#include "kernels/functors/reduce.h"

namespace tandem::cpu {

namespace {

template <typename T>
T* data(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// The fused step's unscale (kernels/optim.h). The update reads g[i] * inv in
// the opmath type (inv = 1 without a scale: the product is exact), and then,
// with a scale, the gradient is stored unscaled, rounded to T as amp_unscale_
// rounds it, by unscale_range over the range the update just read (still in
// the cache). As PyTorch's fused Adam: a float16 gradient loses nothing to
// the scale in the update.
struct Unscale {
  bool on;    // a grad_scale was given
  float inv;  // 1 / grad_scale rounded to float, or 1
};

Unscale unscale_of(const Tensor& grad_scale) {
  if (!grad_scale.defined()) return {false, 1.0f};
  return {true, 1.0f / *static_cast<const float*>(grad_scale.data_ptr())};
}

template <typename T>
void unscale_range(T* g, int64_t begin, int64_t end, float inv) {
  using M = opmath_t<T>;
  const M c = static_cast<M>(inv);
  TANDEM_SIMD
  for (int64_t i = begin; i < end; ++i) g[i] = static_cast<T>(static_cast<M>(g[i]) * c);
}

template <typename T, fn::SgdMomentum kMomentum, bool kWeightDecay>
void sgd_tensor(const Tensor& param, const Tensor& grad, const Tensor* buffer, const fn::SgdStep<opmath_t<T>>& step,
                const fn::SgdTensorScalars<opmath_t<T>>& scalars, Unscale unscale) {
  using M = opmath_t<T>;
  constexpr bool kBuffer = kMomentum != fn::SgdMomentum::None;
  T* p = data<T>(param);
  T* g = data<T>(grad);
  T* buf = kBuffer ? data<T>(*buffer) : nullptr;
  parallel_for(0, param.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    const auto f = step;
    const auto s = scalars;
    const M c = static_cast<M>(unscale.inv);
    TANDEM_SIMD
    for (int64_t i = begin; i < end; ++i) {
      const M b = kBuffer ? static_cast<M>(buf[i]) : M(0);
      const auto r = fn::sgd_update<kMomentum, kWeightDecay>(f, s, static_cast<M>(p[i]), static_cast<M>(g[i]) * c, b);
      p[i] = static_cast<T>(r.p);
      if constexpr (kBuffer) buf[i] = static_cast<T>(r.buffer);
    }
    if (unscale.on) unscale_range(g, begin, end, unscale.inv);
  });
}

// x[i] = sqrt(x[i]) for i < n, in vector instructions where there are
// some: GCC vectorizes no std::sqrt unless -fno-math-errno (sqrt of a
// negative number sets errno), and the vector square roots round as the
// scalar one does.
template <typename M>
void sqrt_in_place(M* x, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<M, float>) {
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
  } else {
    for (; i + 2 <= n; i += 2) _mm_storeu_pd(x + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
  }
#endif
  for (; i < n; ++i) x[i] = std::sqrt(x[i]);
}

// Elements of one block of the Adam loop: its three passes (moments, square
// roots, update) work on opmath copies that stay in L1.
constexpr int64_t kAdamBlock = 256;

template <typename T, fn::WeightDecay kWeightDecay, bool kAmsgrad>
void adam_tensor(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor* max_exp_avg_sq, const fn::AdamStep<opmath_t<T>>& step,
                 const fn::AdamTensorScalars<opmath_t<T>>& scalars, Unscale unscale) {
  using M = opmath_t<T>;
  T* p = data<T>(param);
  T* g = data<T>(grad);
  T* m = data<T>(exp_avg);
  T* v = data<T>(exp_avg_sq);
  T* v_max = kAmsgrad ? data<T>(*max_exp_avg_sq) : nullptr;
  parallel_for(0, param.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    const auto f = step;
    const auto s = scalars;
    const M c = static_cast<M>(unscale.inv);
    alignas(64) M p_new[kAdamBlock], m_new[kAdamBlock], root[kAdamBlock];
    for (int64_t b = begin; b < end; b += kAdamBlock) {
      const int64_t n = std::min(kAdamBlock, end - b);
      T *pb = p + b, *mb = m + b, *vb = v + b, *xb = kAmsgrad ? v_max + b : nullptr;
      const T* gb = g + b;
      TANDEM_SIMD
      for (int64_t i = 0; i < n; ++i) {
        const M x = kAmsgrad ? static_cast<M>(xb[i]) : M(0);
        const auto r = fn::adam_moments<kWeightDecay, kAmsgrad>(f, static_cast<M>(pb[i]), static_cast<M>(gb[i]) * c,
                                                                static_cast<M>(mb[i]), static_cast<M>(vb[i]), x);
        mb[i] = static_cast<T>(r.m);
        vb[i] = static_cast<T>(r.v);
        if constexpr (kAmsgrad) xb[i] = static_cast<T>(r.v_max);
        p_new[i] = r.p;
        m_new[i] = r.m;
        root[i] = r.second;
      }
      sqrt_in_place(root, n);
      TANDEM_SIMD
      for (int64_t i = 0; i < n; ++i) pb[i] = static_cast<T>(fn::adam_apply(f, s, p_new[i], m_new[i], root[i]));
      if (unscale.on) unscale_range(g, b, b + n, unscale.inv);
    }
  });
}

// Elements a thread folds on its own in foreach_norm; partial results of
// one tensor are combined in order.
constexpr int64_t kNormChunk = kElementwiseGrain;

// Folds x[0, n) with Ops (kernels/functors/reduce.h). The sums (orders 2,
// 1, 0, p) add each element's term ops.reduce(0, x) in a vector reduction;
// max and min (orders inf, -inf) keep eight interleaved lanes.
template <typename T, typename Ops>
double fold(const T* x, int64_t n, const Ops& ops) {
  if constexpr (std::is_base_of_v<fn::SumOps<double>, Ops>) {
    double acc = 0;
#ifdef _OPENMP
#pragma omp simd reduction(+ : acc)
#endif
    for (int64_t i = 0; i < n; ++i) acc += ops.reduce(0.0, static_cast<double>(x[i]), 0);
    return acc;
  } else {
    constexpr int kLanes = 8;
    double lane[kLanes];
    for (double& l : lane) l = ops.identity();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) lane[k] = ops.reduce(lane[k], static_cast<double>(x[i + k]), 0);
    double acc = ops.identity();
    for (double l : lane) acc = ops.combine(acc, l);
    for (; i < n; ++i) acc = ops.reduce(acc, static_cast<double>(x[i]), 0);
    return acc;
  }
}

template <typename T, typename Ops>
void norms(const std::vector<Tensor>& tensors, const Tensor& out, const Ops& ops) {
  T* o = data<T>(out);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const T* x = data<T>(tensors[t]);
    const int64_t n = tensors[t].numel();
    const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
    std::vector<double> partial(static_cast<size_t>(chunks));
    parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t begin = c * kNormChunk;
        partial[c] = fold(x + begin, std::min(kNormChunk, n - begin), ops);
      }
    });
    double acc = ops.identity();
    for (double v : partial) acc = ops.combine(acc, v);
    o[t] = static_cast<T>(ops.project(acc));
  }
}

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const std::vector<uint8_t>& fresh, const fn::SgdHyper& h,
              const Tensor& found_inf, const Tensor& grad_scale) {
  if (params.empty()) return;
  if (found_inf.defined() && *data<float>(found_inf) != 0.0f) return;
  const Unscale unscale = unscale_of(grad_scale);
  dispatch_floating(params[0].dtype(), "sgd_step", [&]<typename T>() {
    using M = opmath_t<T>;
    const auto f = fn::SgdStep<M>::make(h);
    fn::visit_sgd(h, [&]<fn::SgdMomentum kMomentum, bool kWeightDecay>() {
      for (size_t i = 0; i < params.size(); ++i) {
        const bool has_buffer = kMomentum != fn::SgdMomentum::None;
        sgd_tensor<T, kMomentum, kWeightDecay>(params[i], grads[i], has_buffer ? &momentum_buffers[i] : nullptr, f,
                                               fn::SgdTensorScalars<M>::make(h, fresh[i] != 0), unscale);
      }
    });
  });
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
               const std::vector<double>& steps, const std::vector<Tensor>& device_steps, const fn::AdamHyper& h,
               const Tensor& found_inf, const Tensor& grad_scale) {
  if (params.empty()) return;
  if (found_inf.defined() && *data<float>(found_inf) != 0.0f) return;
  const Unscale unscale = unscale_of(grad_scale);
  dispatch_floating(params[0].dtype(), "adam_step", [&]<typename T>() {
    using M = opmath_t<T>;
    const auto f = fn::AdamStep<M>::make(h);
    fn::visit_adam(h, [&]<fn::WeightDecay kWeightDecay, bool kAmsgrad>() {
      for (size_t i = 0; i < params.size(); ++i) {
        double step;
        if (device_steps.empty()) {
          step = steps[i];
        } else {
          float& count = *data<float>(device_steps[i]);
          count += 1.0f;
          step = count;
        }
        adam_tensor<T, kWeightDecay, kAmsgrad>(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                                               kAmsgrad ? &max_exp_avg_sqs[i] : nullptr, f,
                                               fn::AdamTensorScalars<M>::make(h, step), unscale);
      }
    });
  });
}

void foreach_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  if (tensors.empty()) return;
  dispatch_floating(out.dtype(), "foreach_norm", [&]<typename T>() {
    // The order as tandem::norm picks it (kernels/cpu/reduce.cpp, norm_to).
    if (p == 2) return norms<T>(tensors, out, fn::Norm2Ops<double>{});
    if (p == 1) return norms<T>(tensors, out, fn::Norm1Ops<double>{});
    if (p == 0) return norms<T>(tensors, out, fn::Norm0Ops<double>{});
    if (std::isinf(p) && p > 0) return norms<T>(tensors, out, fn::NormInfOps<double>{});
    if (std::isinf(p)) return norms<T>(tensors, out, fn::NormNegInfOps<double>{});
    norms<T>(tensors, out, fn::NormPOps<double>{{}, p});
  });
}

void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale) {
  if (tensors.empty()) return;
  dispatch_floating(scale.dtype(), "foreach_mul_", [&]<typename T>() {
    using M = opmath_t<T>;
    const M c = static_cast<M>(*data<T>(scale));
    for (const Tensor& t : tensors) {
      T* x = data<T>(t);
      parallel_for(0, t.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        TANDEM_SIMD
        for (int64_t i = begin; i < end; ++i) x[i] = static_cast<T>(static_cast<M>(x[i]) * c);
      });
    }
  });
}

void amp_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  const bool write = inv_scale.defined();
  const float inv = write ? *data<float>(inv_scale) : 1.0f;
  std::atomic<bool> any{false};
  for (const Tensor& g : grads) {
    dispatch_floating(g.dtype(), "amp_unscale_ (cpu)", [&]<typename T>() {
      using M = opmath_t<T>;
      T* x = data<T>(g);
      const M c = static_cast<M>(inv);
      parallel_for(0, g.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        bool bad = false;
        for (int64_t i = begin; i < end; ++i) {
          const M v = static_cast<M>(x[i]);
          bad |= !std::isfinite(v);
          if (write) x[i] = static_cast<T>(v * c);
        }
        if (bad) any.store(true, std::memory_order_relaxed);
      });
    });
  }
  if (any.load()) *data<float>(found_inf) = 1.0f;
}

void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                       double backoff_factor, int64_t growth_interval) {
  float& s = *data<float>(scale);
  int32_t& tracker = *data<int32_t>(growth_tracker);
  const fn::ScaleUpdate u =
      fn::update_scale(s, tracker, *data<float>(found_inf) != 0.0f, growth_factor, backoff_factor, growth_interval);
  s = u.scale;
  tracker = u.growth_tracker;
}

}  // namespace tandem::cpu

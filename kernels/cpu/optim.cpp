// CPU multi-tensor optimizer updates and per-tensor norms: a loop over the
// tensors, each a contiguous loop that applies the shared functor
// (kernels/functors/optim.h) and vectorizes; tensors above kElementwiseGrain
// elements are split across threads.
#include "kernels/cpu/optim.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/functors/reduce.h"

namespace tandem::cpu {

namespace {

template <typename T>
T* data(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// kMomentum: the group has momentum buffers (a separate loop, so that the
// plain one neither loads nor stores one).
template <typename T, bool kMomentum>
void sgd_tensor(const Tensor& param, const Tensor& grad, const Tensor* buffer, bool fresh,
                const fn::SgdStep<opmath_t<T>>& f) {
  using M = opmath_t<T>;
  T* p = data<T>(param);
  const T* g = data<T>(grad);
  T* buf = kMomentum ? data<T>(*buffer) : nullptr;
  parallel_for(0, param.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    TANDEM_SIMD
    for (int64_t i = begin; i < end; ++i) {
      M pi = static_cast<M>(p[i]);
      M bi = kMomentum ? static_cast<M>(buf[i]) : M(0);
      f(pi, static_cast<M>(g[i]), bi, fresh);
      p[i] = static_cast<T>(pi);
      if constexpr (kMomentum) buf[i] = static_cast<T>(bi);
    }
  });
}

template <typename T, bool kAmsgrad>
void adam_tensor(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor* max_exp_avg_sq, const fn::AdamStep<opmath_t<T>>& f,
                 const fn::AdamTensorScalars<opmath_t<T>>& s) {
  using M = opmath_t<T>;
  T* p = data<T>(param);
  const T* g = data<T>(grad);
  T* m = data<T>(exp_avg);
  T* v = data<T>(exp_avg_sq);
  T* v_max = kAmsgrad ? data<T>(*max_exp_avg_sq) : nullptr;
  parallel_for(0, param.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    TANDEM_SIMD
    for (int64_t i = begin; i < end; ++i) {
      M pi = static_cast<M>(p[i]), mi = static_cast<M>(m[i]), vi = static_cast<M>(v[i]);
      M vmi = kAmsgrad ? static_cast<M>(v_max[i]) : M(0);
      f(pi, static_cast<M>(g[i]), mi, vi, vmi, s);
      p[i] = static_cast<T>(pi);
      m[i] = static_cast<T>(mi);
      v[i] = static_cast<T>(vi);
      if constexpr (kAmsgrad) v_max[i] = static_cast<T>(vmi);
    }
  });
}

// Elements a thread folds on its own in foreach_norm; partial results of
// one tensor are combined in order.
constexpr int64_t kNormChunk = kElementwiseGrain;

// Folds x[0, n) with Ops (kernels/functors/reduce.h) in eight interleaved
// lanes, so that the loop is not one chain of dependent additions.
template <typename T, typename Ops>
double fold(const T* x, int64_t n, const Ops& ops) {
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
              const std::vector<Tensor>& momentum_buffers, const std::vector<uint8_t>& fresh, const fn::SgdHyper& h) {
  if (params.empty()) return;
  dispatch_floating(params[0].dtype(), "sgd_step", [&]<typename T>() {
    const auto f = fn::SgdStep<opmath_t<T>>::make(h);
    for (size_t i = 0; i < params.size(); ++i) {
      if (f.has_momentum)
        sgd_tensor<T, true>(params[i], grads[i], &momentum_buffers[i], fresh[i] != 0, f);
      else
        sgd_tensor<T, false>(params[i], grads[i], nullptr, false, f);
    }
  });
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
               const std::vector<double>& steps, const fn::AdamHyper& h) {
  if (params.empty()) return;
  dispatch_floating(params[0].dtype(), "adam_step", [&]<typename T>() {
    using M = opmath_t<T>;
    const auto f = fn::AdamStep<M>::make(h);
    for (size_t i = 0; i < params.size(); ++i) {
      const auto s = fn::AdamTensorScalars<M>::make(h, steps[i]);
      if (h.amsgrad)
        adam_tensor<T, true>(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], &max_exp_avg_sqs[i], f, s);
      else
        adam_tensor<T, false>(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], nullptr, f, s);
    }
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

}  // namespace tandem::cpu

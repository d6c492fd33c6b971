// Per-element math of the optimizers' fused updates (SGD, Adam, AdamW), shared
// by the CPU loops (kernels/cpu/optim.cpp) and the CUDA multi-tensor kernels
// (kernels/cuda/optim.cu), so that the CPU tests check the math both run.
//
// The hyperparameters arrive in double (SgdHyper, AdamHyper); the derived
// constants are computed once in double, as PyTorch's Python does, and cast
// to the opmath type T (float for float16/bfloat16 parameters), as PyTorch's
// kernels cast their Scalar arguments. Each update follows the order of
// PyTorch's single-tensor ops (torch/optim/sgd.py, adam.py, adamw.py), one
// rounding per op in T, but keeps the intermediates in registers.
//
// What changes the shape of the computation (momentum or not, Nesterov, the
// kind of weight decay, amsgrad) is a template parameter, so that a CPU loop
// has no branch and vectorizes; maximize is a sign (g * -1 is exact), and a
// fresh momentum buffer is a zeroed one with momentum 0 and dampening 0 for
// that step (0 * 0 + 1 * d is d exactly). The CUDA kernels pick the variant
// per launch (visit_sgd, visit_adam).
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/core/macros.h"

// Inlined even where GCC's heuristics would not: the CPU loops vectorize
// only when the update is inlined into them.
#if defined(__CUDACC__)
#define TANDEM_OPTIM_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define TANDEM_OPTIM_INLINE inline __attribute__((always_inline))
#else
#define TANDEM_OPTIM_INLINE inline
#endif

namespace tandem::fn {

// ---------------------------------------------------------------- SGD (torch.optim.SGD)

struct SgdHyper {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};

enum class SgdMomentum : int8_t { None, Plain, Nesterov };

// The constants of one step of one group, in T.
template <typename T>
struct SgdStep {
  T neg_lr, grad_sign, weight_decay, momentum;

  static SgdStep make(const SgdHyper& h) {
    return {static_cast<T>(-h.lr), static_cast<T>(h.maximize ? -1 : 1), static_cast<T>(h.weight_decay),
            static_cast<T>(h.momentum)};
  }
};

// What differs between the parameters of a group: whether the momentum
// buffer is fresh (PyTorch clones d_p into it on a parameter's first step:
// here the buffer is zeroed and decays by 0 with weight 1 that step).
template <typename T>
struct SgdTensorScalars {
  T buffer_decay;         // momentum, or 0 on the first step
  T one_minus_dampening;  // 1 - dampening, or 1 on the first step

  static SgdTensorScalars make(const SgdHyper& h, bool fresh) {
    return {static_cast<T>(fresh ? 0.0 : h.momentum), static_cast<T>(fresh ? 1.0 : 1 - h.dampening)};
  }
};

template <typename T>
struct SgdResult {
  T p, buffer;
};

// One element: p -= lr * d with d = grad (+ weight_decay * p), through the
// momentum buffer: buf = momentum * buf + (1 - dampening) * d, d = buf (or
// d + momentum * buf with Nesterov).
template <SgdMomentum kMomentum, bool kWeightDecay, typename T>
TANDEM_OPTIM_INLINE SgdResult<T> sgd_update(const SgdStep<T>& f, const SgdTensorScalars<T>& s, T p, T g, T buffer) {
  T d = g * f.grad_sign;
  if constexpr (kWeightDecay) d = d + f.weight_decay * p;
  if constexpr (kMomentum != SgdMomentum::None) {
    buffer = buffer * s.buffer_decay + s.one_minus_dampening * d;
    if constexpr (kMomentum == SgdMomentum::Nesterov)
      d = d + f.momentum * buffer;
    else
      d = buffer;
  }
  return {p + f.neg_lr * d, buffer};
}

// Calls visit.template operator()<kMomentum, kWeightDecay>() for h's variant.
template <typename Visit>
decltype(auto) visit_sgd(const SgdHyper& h, Visit&& visit) {
  const SgdMomentum m = h.momentum == 0 ? SgdMomentum::None : h.nesterov ? SgdMomentum::Nesterov : SgdMomentum::Plain;
  auto with_decay = [&]<SgdMomentum kM>() -> decltype(auto) {
    if (h.weight_decay != 0) return visit.template operator()<kM, true>();
    return visit.template operator()<kM, false>();
  };
  switch (m) {
    case SgdMomentum::None: return with_decay.template operator()<SgdMomentum::None>();
    case SgdMomentum::Plain: return with_decay.template operator()<SgdMomentum::Plain>();
    case SgdMomentum::Nesterov: break;
  }
  return with_decay.template operator()<SgdMomentum::Nesterov>();
}

// ---------------------------------------------------------------- Adam, AdamW (torch.optim.Adam, AdamW)

struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr * weight_decay before the moments
};

// None; L2 (Adam: d += weight_decay * p); Decoupled (AdamW: p *= 1 - lr * weight_decay).
enum class WeightDecay : int8_t { None, L2, Decoupled };

template <typename T>
struct AdamStep {
  T grad_sign, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay;

  static AdamStep make(const AdamHyper& h) {
    return {static_cast<T>(h.maximize ? -1 : 1), static_cast<T>(h.beta1),
            static_cast<T>(1 - h.beta1),         static_cast<T>(h.beta2),
            static_cast<T>(1 - h.beta2),         static_cast<T>(h.eps),
            static_cast<T>(h.weight_decay),      static_cast<T>(1 - h.lr * h.weight_decay)};
  }
};

// What differs between the parameters of a group: their step count (after
// this step's increment), through the bias corrections. Computed in double
// on the host from a host step count, or in the kernel from a step count on
// the device (fused Adam, optim/adam.h), by this same function.
template <typename T>
struct AdamTensorScalars {
  T neg_step_size;          // -lr / (1 - beta1^step)
  T bias_correction2_sqrt;  // sqrt(1 - beta2^step)

  TANDEM_OPTIM_INLINE static AdamTensorScalars make(double lr, double beta1, double beta2, double step) {
#if defined(__CUDA_ARCH__)
    const double bias_correction1 = 1 - ::pow(beta1, step);
    const double bias_correction2 = 1 - ::pow(beta2, step);
    return {static_cast<T>(-(lr / bias_correction1)), static_cast<T>(::sqrt(bias_correction2))};
#else
    const double bias_correction1 = 1 - std::pow(beta1, step);
    const double bias_correction2 = 1 - std::pow(beta2, step);
    return {static_cast<T>(-(lr / bias_correction1)), static_cast<T>(std::sqrt(bias_correction2))};
#endif
  }
  static AdamTensorScalars make(const AdamHyper& h, double step) { return make(h.lr, h.beta1, h.beta2, step); }
};

// Adam in two stages, so that a CPU loop can take the square root of a
// block in one vector pass between them (GCC vectorizes no std::sqrt while
// it may set errno):
//   moments: p (after AdamW's decay), m, v, v_max, and the second moment
//            the denominator uses (v, or v_max with amsgrad);
//   apply:   p + (-step_size) * (m / (sqrt(second) / sqrt(1 - beta2^step) + eps)).
template <typename T>
struct AdamMoments {
  T p, m, v, v_max, second;
};

template <WeightDecay kWeightDecay, bool kAmsgrad, typename T>
TANDEM_OPTIM_INLINE AdamMoments<T> adam_moments(const AdamStep<T>& f, T p, T g, T m, T v, T v_max) {
  T d = g * f.grad_sign;
  if constexpr (kWeightDecay == WeightDecay::Decoupled) p = p * f.decay;
  if constexpr (kWeightDecay == WeightDecay::L2) d = d + f.weight_decay * p;
  m = m * f.beta1 + f.one_minus_beta1 * d;
  v = v * f.beta2 + f.one_minus_beta2 * d * d;
  T second = v;
  if constexpr (kAmsgrad) {
    // torch.maximum: a NaN on either side wins (v_max stays NaN by the select).
    v_max = (v > v_max) | (v != v) ? v : v_max;
    second = v_max;
  }
  return {p, m, v, v_max, second};
}

template <typename T>
TANDEM_OPTIM_INLINE T adam_apply(const AdamStep<T>& f, const AdamTensorScalars<T>& s, T p, T m, T sqrt_second) {
  const T denom = sqrt_second / s.bias_correction2_sqrt + f.eps;
  return p + s.neg_step_size * (m / denom);
}

// Calls visit.template operator()<kWeightDecay, kAmsgrad>() for h's variant.
template <typename Visit>
decltype(auto) visit_adam(const AdamHyper& h, Visit&& visit) {
  auto with_amsgrad = [&]<WeightDecay kWd>() -> decltype(auto) {
    if (h.amsgrad) return visit.template operator()<kWd, true>();
    return visit.template operator()<kWd, false>();
  };
  if (h.decoupled_weight_decay) return with_amsgrad.template operator()<WeightDecay::Decoupled>();
  if (h.weight_decay != 0) return with_amsgrad.template operator()<WeightDecay::L2>();
  return with_amsgrad.template operator()<WeightDecay::None>();
}

// ---------------------------------------------------------------- the GradScaler's scale

// finite: neither inf nor NaN, in device code too (float or double: a
// float64 gradient is checked as one).
template <typename T>
TANDEM_OPTIM_INLINE bool finite(T x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

// torch.amp.GradScaler's update (PyTorch's _amp_update_scale_): back off on a
// step that found an inf or NaN, grow after growth_interval clean steps in a
// row, never to inf.
struct ScaleUpdate {
  float scale;
  int32_t growth_tracker;
};
// The products are taken in double and rounded once to float, as PyTorch's.
TANDEM_OPTIM_INLINE ScaleUpdate update_scale(float scale, int32_t growth_tracker, bool found_inf, double growth_factor,
                                             double backoff_factor, int64_t growth_interval) {
  if (found_inf) return {static_cast<float>(static_cast<double>(scale) * backoff_factor), 0};
  const int32_t successful = growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(scale) * growth_factor);
    return {finite(grown) ? grown : scale, 0};
  }
  return {scale, successful};
}

}  // namespace tandem::fn

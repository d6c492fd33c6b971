// Per-element math of the optimizers' fused updates (SGD, Adam, AdamW), shared
// by the CPU loops (kernels/cpu/optim.cpp) and the CUDA multi-tensor kernels
// (kernels/cuda/optim.cu), so that the CPU tests check the math both run.
// The hyperparameters arrive in double (SgdHyper, AdamHyper); the derived
// constants are computed once in double, as PyTorch's Python does, and cast
// to the opmath type T (float for float16/bfloat16 parameters), as PyTorch's
// kernels cast their Scalar arguments. Each functor follows the order of
// PyTorch's single-tensor ops (torch/optim/sgd.py, adam.py, adamw.py), one
// rounding per op in T, but keeps the intermediates in registers.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/core/macros.h"

namespace tandem::fn {

// ---- SGD (torch.optim.SGD)
struct SgdHyper {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};

template <typename T>
struct SgdStep {
  T neg_lr, momentum, one_minus_dampening, weight_decay;
  bool has_momentum, has_weight_decay, nesterov, maximize;

  static SgdStep make(const SgdHyper& h) {
    return {static_cast<T>(-h.lr),
            static_cast<T>(h.momentum),
            static_cast<T>(1 - h.dampening),
            static_cast<T>(h.weight_decay),
            h.momentum != 0,
            h.weight_decay != 0,
            h.nesterov,
            h.maximize};
  }

  // One element: p and buf in place. fresh: the momentum buffer was just
  // made; it takes d_p itself (PyTorch clones d_p on a parameter's first
  // step with momentum). buf is not touched without momentum.
  TANDEM_HD_INLINE void operator()(T& p, T g, T& buf, bool fresh) const {
    T d = maximize ? -g : g;
    if (has_weight_decay) d = d + weight_decay * p;
    if (has_momentum) {
      buf = fresh ? d : buf * momentum + one_minus_dampening * d;
      d = nesterov ? d + momentum * buf : buf;
    }
    p = p + neg_lr * d;
  }
};

// ---- Adam (torch.optim.Adam) and AdamW (torch.optim.AdamW)
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr * weight_decay before the moments
};

// What differs between the parameters of a group: their step count (after
// this step's increment), through the bias corrections.
template <typename T>
struct AdamTensorScalars {
  T neg_step_size;          // -lr / (1 - beta1^step)
  T bias_correction2_sqrt;  // sqrt(1 - beta2^step)

  static AdamTensorScalars make(const AdamHyper& h, double step) {
    const double bias_correction1 = 1 - std::pow(h.beta1, step);
    const double bias_correction2 = 1 - std::pow(h.beta2, step);
    return {static_cast<T>(-(h.lr / bias_correction1)), static_cast<T>(std::sqrt(bias_correction2))};
  }
};

template <typename T>
struct AdamStep {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay;
  bool has_weight_decay, decoupled, amsgrad, maximize;

  static AdamStep make(const AdamHyper& h) {
    return {static_cast<T>(h.beta1),
            static_cast<T>(1 - h.beta1),
            static_cast<T>(h.beta2),
            static_cast<T>(1 - h.beta2),
            static_cast<T>(h.eps),
            static_cast<T>(h.weight_decay),
            static_cast<T>(1 - h.lr * h.weight_decay),
            h.weight_decay != 0,
            h.decoupled_weight_decay,
            h.amsgrad,
            h.maximize};
  }

  // One element: p, the moments m and v, and (amsgrad) v_max in place;
  // v_max is not touched otherwise.
  TANDEM_HD_INLINE void operator()(T& p, T g, T& m, T& v, T& v_max, const AdamTensorScalars<T>& s) const {
    T d = maximize ? -g : g;
    if (decoupled) {
      p = p * decay;
    } else if (has_weight_decay) {
      d = d + weight_decay * p;
    }
    m = m * beta1 + one_minus_beta1 * d;
    v = v * beta2 + one_minus_beta2 * d * d;
    T second = v;
    if (amsgrad) {
      // torch.maximum: a NaN on either side wins.
      v_max = (v > v_max || v != v) ? v : v_max;
      second = v_max;
    }
    const T denom = std::sqrt(second) / s.bias_correction2_sqrt + eps;
    p = p + s.neg_step_size * (m / denom);
  }
};

}  // namespace tandem::fn

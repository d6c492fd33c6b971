// The softmax gradient's per-element math, shared by the CPU loops
// (kernels/cpu/softmax.cpp) and the CUDA kernels (kernels/cuda/softmax.cu):
// a row's gradient is one sum over the row, then every element from it
// (kernels/softmax.h has the formulas).
#pragma once

#include "tensor/core/macros.h"

namespace tandem::fn {

// What a row sums: grad * out for softmax, grad for log_softmax.
template <bool Log, typename M>
TANDEM_HD_INLINE M softmax_grad_term(M g, M y) {
  if constexpr (Log)
    return g;
  else
    return g * y;
}

// One element's gradient from its row's sum. exp: how the backend takes
// exp(out) of log_softmax (CUDA's fast exponential for 16-bit types).
template <bool Log, typename M, typename Exp>
TANDEM_HD_INLINE M softmax_grad_out(M g, M y, M sum, const Exp& exp) {
  if constexpr (Log)
    return g - exp(y) * sum;
  else
    return y * (g - sum);
}

}  // namespace tandem::fn

// nn::utils::clip_grad_norm_: rescales gradients so that their total norm is
// at most max_norm, as torch.nn.utils.clip_grad_norm_.
//   loss.backward();
//   nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//   opt.step();
#pragma once

#include <vector>

#include "tensor/core/tensor.h"

namespace tandem::nn::utils {

// The total norm is the norm_type norm of the vector of each gradient's
// norm_type norm (norm_type may be inf); every gradient is multiplied by
// min(max_norm / (total_norm + 1e-6), 1), in place. Parameters without a
// gradient are skipped; a parameter listed twice (a tied weight) counts
// once, as Module::parameters() lists it once. An order without an identity
// (inf, -inf, below 0) refuses an empty gradient, in PyTorch's words
// (ValueError), before anything is scaled. Returns the total norm before clipping, as a 0-dim
// tensor on the first gradient's device, of the gradients' dtype (promoted
// across them); tensor(0.) (float32, cpu) when no parameter has a gradient.
// With error_if_nonfinite, a NaN or infinite total norm is a ValueError (in
// PyTorch's words) and nothing is scaled; otherwise the gradients are
// scaled by the non-finite coefficient, as in PyTorch.
//
// The norms and the scaling of the gradients on one device and of one dtype
// run as one multi-tensor op each (detail::foreach_norm, foreach_mul_ in
// tensor/ops/foreach.h); the total norm is computed on the first gradient's
// device, with no host synchronization unless error_if_nonfinite is set.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

}  // namespace tandem::nn::utils

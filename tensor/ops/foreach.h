// Multi-tensor ("foreach") ops, PyTorch's _foreach_norm and _foreach_mul_:
// one op over a list of tensors, run as one multi-tensor kernel
// (kernels/cpu/optim.h, kernels/cuda/optim.h) instead of one op per tensor.
// nn::utils::clip_grad_norm_ is built on them:
//   Tensor norms = detail::foreach_norm(grads, 2.0);  // (n,)
//   detail::foreach_mul_(grads, coef);                // coef: one element
//
// Unlike PyTorch's, which take any list (mixed lists on a slow path), these
// take one device and one floating dtype (float32, float64, float16,
// bfloat16): group the tensors first. Tensors that are not contiguous go
// through a contiguous copy. They record no graph, so they refuse a tensor
// that requires grad while grad mode is on.
#pragma once

#include <vector>

#include "tensor/core/tensor.h"

namespace tandem::detail {

// out[i] = ||tensors[i]||_p, as tandem::norm(tensors[i], p) (p = 2, 1, 0,
// inf, -inf or any other order), accumulated in float64. Returns one (n,)
// tensor of the tensors' dtype on their device (PyTorch returns n 0-dim
// tensors). An order without an identity (inf, -inf, p < 0) refuses an
// empty tensor, in PyTorch's words.
Tensor foreach_norm(const std::vector<Tensor>& tensors, double p);

// tensors[i] *= scale, in place, in the opmath type (float for the 16-bit
// types). scale: one element (any shape, any dtype: converted to the
// tensors'), on the tensors' device, read there without a host
// synchronization (a scale inside one of the tensors is read from a copy).
// A tensor listed twice is scaled twice.
void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale);

// The GradScaler's two device ops (optim/grad_scaler.h), PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_, each one
// kernel and no host synchronisation:
// grads[i] *= inv_scale in place, and found_inf set to 1 when any element of
// any grad was inf or NaN (never cleared). grads: one device, one floating
// dtype; inv_scale and found_inf: float32, one element, on that device.
void amp_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale);
// amp_unscale_'s check alone: found_inf set to 1 when any element of any
// grad is inf or NaN; the grads are read, not written (before a fused
// optimizer step that unscales them in its own kernel).
void amp_check_finite_(const std::vector<Tensor>& grads, const Tensor& found_inf);
// scale (float32), growth_tracker (int32), found_inf (float32): one element
// each on one device; updated as GradScaler.update does (kernels/optim.h).
void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                       double backoff_factor, int64_t growth_interval);

}  // namespace tandem::detail

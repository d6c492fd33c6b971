// The optimizers' multi-tensor ("foreach") updates and the foreach ops'
// per-tensor norms and scaling (tensor/ops/foreach.h, behind
// nn::utils::clip_grad_norm_), both backends (kernels/contract.h):
// kernels/cpu/optim.cpp, kernels/cuda/optim.cu. Each takes lists of tensors of
// one device and one floating dtype (float32, float64, float16, bfloat16),
// every tensor contiguous and the i-th tensor of every list with as many
// elements as params[i]. The front ends (optim/optimizer.cpp,
// tensor/ops/foreach.cpp) check that; the kernels allocate nothing.
//
// The GradScaler's fused step (optim::Optimizer::step_unless_found_inf) gives
// the two updates two more arguments, each undefined or one float32 element
// on the params' device, read there:
//   found_inf   not 0: the step is skipped, nothing is written;
//   grad_scale  the gradients are still multiplied by it: the update takes
//               g * (1 / grad_scale) in the opmath type (the reciprocal
//               rounded to float, as amp_unscale_'s inv_scale is), and the
//               gradient is written back unscaled, rounded to its dtype (as
//               PyTorch's fused Adam: a 16-bit gradient loses nothing to the
//               scale in the update).
//
// sgd_step: SGD on every tensor: params and momentum_buffers in place
//   (fn::sgd_update). momentum_buffers is empty when h.momentum is 0; fresh[i] !=
//   0 says buffer i was just made, zeroed, and takes d_p this step.
// adam_step: Adam / AdamW on every tensor: params and moments in place
//   (fn::adam_moments, fn::adam_apply); max_exp_avg_sqs is empty unless
//   h.amsgrad. The step counts are either on the host, steps[i] being
//   parameter i's count after this step's increment (device_steps empty), or
//   on the device (fused Adam; steps empty): device_steps[i], one float32
//   element, is incremented by 1 unless the step is skipped, and the bias
//   corrections are computed in the kernel from the new count
//   (fn::AdamTensorScalars::make, in double). found_inf needs device steps.
// foreach_norm: out[i] = ||tensors[i]||_p (p = 2, 1, 0, inf, -inf or any other
//   order, as tandem::norm), accumulated in float64. out: (n,) contiguous, of the
//   tensors' dtype. An empty tensor takes the order's identity, projected; the
//   front end refuses the orders without one (inf, -inf, p < 0).
// foreach_mul_: tensors[i] *= scale, in the opmath type; scale: one element of the
//   tensors' dtype, on their device.
// amp_unscale_: the GradScaler's unscale and check in one pass (PyTorch's
//   _amp_foreach_non_finite_check_and_unscale_): grads[i] *= inv_scale, in the
//   opmath type, and found_inf = 1 when any element of any grad was inf or NaN
//   before; found_inf is only ever set, never cleared. inv_scale, found_inf:
//   one float32 element each, on the grads' device. With inv_scale undefined
//   it only checks, reading the gradients and writing none (before a fused
//   step, which unscales them itself).
// amp_update_scale_: the GradScaler's scale update (PyTorch's _amp_update_scale_),
//   on the device: with found_inf != 0, scale *= backoff_factor and
//   growth_tracker = 0; otherwise growth_tracker += 1, and when it reaches
//   growth_interval, scale *= growth_factor (unless that is not finite) and
//   growth_tracker = 0. scale, found_inf: one float32 element; growth_tracker:
//   one int32 element; all on one device.
//
// On CUDA each packs the pointers and sizes of many tensors into one kernel
// argument and runs a block per 64K-element chunk of any of them, so a step
// costs one launch per few hundred tensors, not one per tensor; they launch on
// the current stream of the tensors' device.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/contract.h"
#include "kernels/functors/optim.h"
#include "tensor/core/tensor.h"

#define TANDEM_OPTIM_KERNELS(K)                                                                                        \
  K(void, sgd_step,                                                                                                    \
    (const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& momentum_buffers, \
     const std::vector<uint8_t>& fresh, const fn::SgdHyper& h, const Tensor& found_inf, const Tensor& grad_scale))     \
  K(void, adam_step,                                                                                                   \
    (const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,         \
     const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,                               \
     const std::vector<double>& steps, const std::vector<Tensor>& device_steps, const fn::AdamHyper& h,                \
     const Tensor& found_inf, const Tensor& grad_scale))                                                               \
  K(void, foreach_norm, (const std::vector<Tensor>& tensors, double p, const Tensor& out))                             \
  K(void, foreach_mul_, (const std::vector<Tensor>& tensors, const Tensor& scale))                                     \
  K(void, amp_unscale_, (const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale))          \
  K(void, amp_update_scale_,                                                                                           \
    (const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,                 \
     double backoff_factor, int64_t growth_interval))

TANDEM_KERNELS(TANDEM_OPTIM_KERNELS)

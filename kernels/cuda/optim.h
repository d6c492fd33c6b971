// CUDA kernels of the optimizers' multi-tensor updates and of the foreach
// ops' per-tensor norms and scaling (tensor/ops/foreach.h), with the contract
// of kernels/cpu/optim.h (one device, one floating dtype, contiguous tensors).
// Each packs the pointers and sizes of many tensors into one kernel argument
// and runs a block per 64K-element chunk of any of them, so a step costs one
// launch per few hundred tensors, not one per tensor. They launch on the
// current stream of the tensors' device.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/functors/optim.h"
#include "tensor/core/tensor.h"

namespace tandem::gpu {

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const std::vector<uint8_t>& fresh, const fn::SgdHyper& h);

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
               const std::vector<double>& steps, const fn::AdamHyper& h);

void foreach_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out);

void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale);

}  // namespace tandem::gpu

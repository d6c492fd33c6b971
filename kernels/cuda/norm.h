// CUDA kernels of batch norm, layer norm and embedding, with the contract of
// kernels/cpu/norm.h (the CPU kernels are the specification). They launch on
// the current stream of the output's device. embedding checks its indices
// on the device and reads an 8-byte flag back after the launch, so it waits
// for the stream, as gather does (kernels/cuda/index.h). embedding_backward
// adds with atomics: on a GPU the order of the additions into a row, and so
// the last bits of a sum of several rows, may change from run to run.
#pragma once

#include <cstdint>

#include "tensor/core/tensor.h"

namespace tandem::gpu {

void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training,
                double momentum, double eps);
void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training);
void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, double eps);
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd);
void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices);
void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices, int64_t padding_idx,
                        bool scale_grad_by_freq);

}  // namespace tandem::gpu

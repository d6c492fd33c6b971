// CUDA kernels of batch norm and layer norm (kernels/cuda/norm.cu) and of
// embedding (kernels/cuda/embedding.cu), with the contract of
// kernels/cpu/norm.h (the CPU kernels are the specification). They launch on
// the current stream of the output's device.
//
// Precision: the batch-norm statistics and gradient sums run per thread and
// per block in the statistics' type M (float for float32, float16 and
// bfloat16 inputs; double for float64), where the CPU kernels sum in double;
// only the fold of each channel's parts is in double. Float keeps the
// memory-bound reductions at full speed (half the registers and shared
// memory of double, and a GPU's float throughput), as PyTorch's CUDA batch
// norm accumulates in float. The values are shifted by a sample of their
// channel first, so the sums of squares do not cancel; what is left is the
// rounding of a thread's running sum, which grows with the values it sums
// (N * L / (256 * parts) on the plane path, see kernels/cuda/norm_plan.h).
// So float32 results agree with the CPU's within float32 tolerance, not to
// the last bit, where the sums do not cancel; a gradient sum that cancels
// (zero-mean grad_output times a centred input) keeps float's absolute
// error, about 5e-5 of the result's size on (128, 33) in the simulated
// GPU's runs (tests/test_gpu_boundaries.cpp).
//
// embedding checks its indices on the device and reads an 8-byte flag back
// after the launch, so it waits for the stream, as gather does
// (kernels/cuda/index.h). embedding_backward takes indices checked by its
// front end, and adds with atomics: on a GPU the order of the additions into
// a row, and so the last bits of a sum of several rows, may change from run
// to run.
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

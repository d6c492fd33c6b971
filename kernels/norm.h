// Batch norm and layer norm, forward and backward, both backends
// (kernels/contract.h): kernels/cpu/norm.cpp, kernels/cuda/norm.cu. The
// caller checked shapes, dtypes and devices and allocated every output; the
// kernels compute. T is the input's floating dtype and M = opmath_t<T> the
// statistics' (float for float16/bfloat16): weight, bias, mean, invstd, the
// running statistics and the weight and bias gradients are M tensors. On
// CUDA they launch on the current stream of the output's device.
//
// batch_norm: input, out: contiguous, viewed as (N, C, L) with N = size(0), C =
//   size(1) and L the product of the other sizes. weight, bias: (C) or undefined.
//   mean, invstd: (C), written: the batch's mean and 1 / sqrt(biased var + eps)
//   when training, else running_mean and 1 / sqrt(running_var + eps).
//   running_mean, running_var: (C), contiguous, or undefined; when training they
//   become (1 - momentum) * running + momentum * batch (the variance unbiased). A
//   training batch with no value per channel writes mean = 0, invstd = 0 and
//   leaves the running statistics alone.
// batch_norm_backward: grad_out, input: contiguous (N, C, L) as above; mean, invstd:
//   the forward's. Writes each defined output: grad_input (input's shape and
//   dtype), grad_weight = sum(grad_out * xhat), grad_bias = sum(grad_out), both
//   (C). training: the statistics depend on the input (the batch's); else they are
//   constants (the running ones).
// layer_norm: input, out: contiguous, rows = mean.numel() rows of D = input.numel()
//   / rows values. weight, bias: (D) or undefined. mean, invstd: (rows), written.
// layer_norm_backward: the layout of layer_norm. grad_weight, grad_bias: (D), sums
//   over the rows.
//
// Precision on CUDA: the batch-norm statistics and gradient sums run per
// thread and per block in M (float for float32, float16 and bfloat16 inputs;
// double for float64), where the CPU kernels sum in double; only the fold of
// each channel's parts is in double. Float keeps the memory-bound reductions
// at full speed (half the registers and shared memory of double, and a GPU's
// float throughput), as PyTorch's CUDA batch norm accumulates in float. The
// values are shifted by a sample of their channel first, so the sums of
// squares do not cancel; what is left is the rounding of a thread's running
// sum, which grows with the values it sums (N * L / (256 * parts) on the plane
// path, see kernels/cuda/norm_plan.h). So float32 results agree with the CPU's
// within float32 tolerance, not to the last bit, where the sums do not cancel;
// a gradient sum that cancels (zero-mean grad_output times a centred input)
// keeps float's absolute error, about 5e-5 of the result's size on (128, 33)
// in the simulated GPU's runs (tests/test_gpu_boundaries.cpp).
#pragma once

#include "kernels/contract.h"
#include "tensor/core/tensor.h"

#define TANDEM_NORM_KERNELS(K)                                                                                  \
  K(void, batch_norm,                                                                                           \
    (const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,    \
     const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training, double momentum, \
     double eps))                                                                                               \
  K(void, batch_norm_backward,                                                                                  \
    (const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,      \
     const Tensor& input, const Tensor& weight, const Tensor& mean, const Tensor& invstd, bool training))       \
  K(void, layer_norm,                                                                                           \
    (const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,    \
     const Tensor& bias, double eps))                                                                           \
  K(void, layer_norm_backward,                                                                                  \
    (const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,      \
     const Tensor& input, const Tensor& weight, const Tensor& mean, const Tensor& invstd))

TANDEM_KERNELS(TANDEM_NORM_KERNELS)

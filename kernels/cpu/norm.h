// CPU kernels of batch norm, layer norm and embedding, forward and backward.
// The caller checked shapes, dtypes and devices and allocated every output;
// the kernels compute. T is the input's floating dtype and M = opmath_t<T>
// the statistics' (float for float16/bfloat16): weight, bias, mean, invstd,
// the running statistics and the weight and bias gradients are M tensors.
// kernels/cuda/norm.h has the same contract.
#pragma once

#include <cstdint>

#include "tensor/core/tensor.h"

namespace tandem::cpu {

// input, out: contiguous, viewed as (N, C, L) with N = size(0), C = size(1)
// and L the product of the other sizes. weight, bias: (C) or undefined.
// mean, invstd: (C), written: the batch's mean and 1 / sqrt(biased var +
// eps) when training, else running_mean and 1 / sqrt(running_var + eps).
// running_mean, running_var: (C), contiguous, or undefined; when training
// they become (1 - momentum) * running + momentum * batch (the variance
// unbiased). A training batch with no value per channel writes mean = 0,
// invstd = 0 and leaves the running statistics alone.
void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training,
                double momentum, double eps);

// grad_out, input: contiguous (N, C, L) as above; mean, invstd: the
// forward's. Writes each defined output: grad_input (input's shape and
// dtype), grad_weight = sum(grad_out * xhat), grad_bias = sum(grad_out),
// both (C). training: the statistics depend on the input (the batch's);
// else they are constants (the running ones).
void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training);

// input, out: contiguous, rows = mean.numel() rows of D = input.numel() /
// rows values. weight, bias: (D) or undefined. mean, invstd: (rows), written.
void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, double eps);

// The layout of layer_norm. grad_weight, grad_bias: (D), sums over the rows.
void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd);

// out: (K, D) contiguous; weight: (num_weights, D) contiguous; indices: (K)
// contiguous int64 or int32. An index outside [0, num_weights) throws
// IndexError before anything is written.
void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices);

// grad_weight: (num_weights, D) contiguous, overwritten: row i is the sum
// of the rows k of grad_out (K, D) with indices[k] == i, in the order of k
// (deterministic), except row padding_idx (if >= 0), which stays 0. With
// scale_grad_by_freq each sum is divided by the count of i in indices.
// Indices were checked by the front end (detail::embedding_backward).
void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices, int64_t padding_idx,
                        bool scale_grad_by_freq);

}  // namespace tandem::cpu

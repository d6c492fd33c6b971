// Normalisation and lookup layers as ops, with PyTorch's semantics:
// batch_norm (statistics per channel), layer_norm (statistics per row over
// the trailing normalized_shape) and embedding (rows of a table picked by
// integer indices). Each records its autograd node; the detail:: backward
// ops are the fused kernels the derivative rules call when they do not record.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>

#include "tensor/core/tensor.h"

namespace tandem {

// input: (N, C), (N, C, L) or (N, C, d1, d2, ...): normalised per channel c
// over every other dim. weight, bias, running_mean, running_var: (C) or
// undefined.
//   training: the batch's mean and biased variance normalise; running_mean
//     and running_var, when given, are updated in place with PyTorch's rule
//     running = (1 - momentum) * running + momentum * batch, the variance
//     entering unbiased (times n / (n - 1), n the values per channel).
//   eval (training = false): running_mean and running_var normalise; both
//     are required.
// y = (x - mean) / sqrt(var + eps) * weight + bias. float32 and float64
// inputs take parameters of their dtype; float16 and bfloat16 inputs take
// parameters of theirs or float32 (the statistics are float32 either way).
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

// input: (*, normalized_shape...): each row of prod(normalized_shape)
// trailing values is normalised by its own mean and biased variance;
// weight and bias: normalized_shape, or undefined.
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

// weight: (num_embeddings, embedding_dim); indices: int64 or int32 of any
// shape S, each in [0, num_embeddings). Returns (S..., embedding_dim), the
// rows of weight. padding_idx (negative counts from the end): that row gets
// no gradient. scale_grad_by_freq: each row's gradient is divided by how
// often its index occurs in indices. An index out of range is an IndexError
// on every device.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt,
                 bool scale_grad_by_freq = false);

namespace detail {
// The fused backward kernels (PyTorch's native_batch_norm_backward,
// native_layer_norm_backward, embedding_dense_backward). They record no
// graph node, so they refuse an input that requires grad while grad mode
// is on: autograd calls them only when the backward is not recorded. Each
// returns only the gradients output_mask asks for (others undefined), as
// contiguous tensors: grad_input of input's dtype, grad_weight and grad_bias
// of weight's dtype (or the statistics' dtype without weight).

// mean, invstd: (C), the forward's statistics (the batch's when training,
// else from the running statistics), of the statistics' dtype.
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                                                       bool training, std::array<bool, 3> output_mask);

// mean, invstd: one value per row, (rows), rows = input.numel() / prod(normalized_shape).
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       IntArrayRef normalized_shape, const Tensor& weight,
                                                       const Tensor& mean, const Tensor& invstd,
                                                       std::array<bool, 3> output_mask);

// The gradient of embedding's weight: (num_weights, grad_out.size(-1)),
// zero except the rows named in indices, which sum their grad_out rows
// (padding_idx: absent or already wrapped to [0, num_weights)).
Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights,
                          std::optional<int64_t> padding_idx, bool scale_grad_by_freq);
}  // namespace detail

}  // namespace tandem

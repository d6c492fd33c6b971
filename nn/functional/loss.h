// The losses as functions, torch.nn.functional's semantics, composed from
// differentiable tensor ops: autograd works through them on every device,
// with respect to the input and to a floating target alike.
//   namespace F = tandem::nn::functional;
//   Tensor loss = F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().label_smoothing(0.1));
#pragma once

#include "nn/options/loss.h"
#include "tensor/core/tensor.h"

namespace tandem::nn::functional {

// log_softmax over the class dim, then nll_loss; or, when target has the
// input's shape, the cross entropy with class probabilities.
//   input:  (N, C), (N, C, d1, ...) or (C), floating: unnormalised logits.
//   target: class indices, int64 of shape (N), (N, d1, ...) or () resp.,
//           each in [0, C) or ignore_index;
//       or  class probabilities, floating, of the input's shape (ignore_index
//           must then stay negative, as PyTorch asks).
// With reduction Mean, the sum over the targets is divided by the total weight
// of the non-ignored targets (their count without weight); for probability
// targets by N * d1 * ... Label smoothing applies to both kinds of target.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& options = {});

// The negative log likelihood: -weight[t] * input[n, t] for each target t.
//   input: (N, C), (N, C, d1, ...) or (C), floating: log-probabilities.
//   target: int64 class indices as for cross_entropy.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options = {});

// (input - target)^2, elementwise; input and target broadcast together
// (PyTorch warns about a broadcast; a target of another shape is usually a
// mistake, (N, 1) against (N)).
Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options = {});

// |input - target|, elementwise; broadcast as mse_loss.
Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options = {});

// The binary cross entropy of sigmoid(input) against target, without
// computing the sigmoid (stable for any logit):
//   -weight * (pos_weight * target * log(sigmoid(input)) + (1 - target) * log(1 - sigmoid(input)))
// input: logits of any shape; target: probabilities in [0, 1] of the input's
// shape, floating; weight and pos_weight broadcast to the input's shape.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& options = {});

}  // namespace tandem::nn::functional

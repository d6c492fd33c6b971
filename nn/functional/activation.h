// nn::functional activations and dropout, as torch.nn.functional. The
// activations are the tensor ops (fused forward and backward kernels); the
// functional names exist so that a libtorch model ports unchanged.
#pragma once

#include <optional>
#include <string>

#include "tensor/core/tensor.h"

namespace tandem::nn::functional {

Tensor relu(const Tensor& input, bool inplace = false);
Tensor gelu(const Tensor& input, const std::string& approximate = "none");
Tensor silu(const Tensor& input);
Tensor tanh(const Tensor& input);
Tensor sigmoid(const Tensor& input);
Tensor leaky_relu(const Tensor& input, double negative_slope = 0.01, bool inplace = false);
Tensor elu(const Tensor& input, double alpha = 1.0, bool inplace = false);
Tensor softplus(const Tensor& input, double beta = 1.0, double threshold = 20.0);
Tensor softmax(const Tensor& input, int64_t dim, std::optional<Dtype> dtype = std::nullopt);
Tensor log_softmax(const Tensor& input, int64_t dim, std::optional<Dtype> dtype = std::nullopt);

// Zeroes each element with probability p and scales the rest by 1/(1-p)
// while training; the identity otherwise. The mask comes from the input's
// device's default generator.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, bool inplace = false);

}  // namespace tandem::nn::functional

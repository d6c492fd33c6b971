// nn::functional activations and dropout.
#include "nn/functional/activation.h"

#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/reduce.h"

namespace tandem::nn::functional {

Tensor relu(const Tensor& input, bool inplace) {
  if (inplace) {
    Tensor self = input;
    return self.relu_();
  }
  return input.relu();
}
Tensor gelu(const Tensor& input, const std::string& approximate) { return input.gelu(approximate); }
Tensor silu(const Tensor& input) { return input.silu(); }
Tensor tanh(const Tensor& input) { return input.tanh(); }
Tensor sigmoid(const Tensor& input) { return input.sigmoid(); }
Tensor leaky_relu(const Tensor& input, double negative_slope, bool inplace) {
  if (inplace) {
    Tensor self = input;
    return tandem::leaky_relu_(self, negative_slope);
  }
  return tandem::leaky_relu(input, negative_slope);
}
Tensor elu(const Tensor& input, double alpha, bool inplace) {
  if (inplace) {
    Tensor self = input;
    return tandem::elu_(self, alpha);
  }
  return tandem::elu(input, alpha);
}
Tensor softplus(const Tensor& input, double beta, double threshold) { return tandem::softplus(input, beta, threshold); }
Tensor softmax(const Tensor& input, int64_t dim, std::optional<Dtype> dtype) { return input.softmax(dim, dtype); }
Tensor log_softmax(const Tensor& input, int64_t dim, std::optional<Dtype> dtype) {
  return input.log_softmax(dim, dtype);
}

Tensor dropout(const Tensor& input, double p, bool training, bool inplace) {
  TANDEM_CHECK(p >= 0 && p <= 1, ValueError, "dropout probability has to be between 0 and 1, but got ", p);
  TANDEM_CHECK(input.is_floating_point(), DtypeError, "dropout: expected a floating point input, got ", input.dtype());
  if (!training || p == 0) return input;
  Tensor self = input;
  if (p == 1) return inplace ? self.mul_(0) : input.mul(0);
  // mask: 1/(1-p) where kept, 0 where dropped, in the input's dtype: one
  // multiply forward, and the same multiply backward (Mul saves the mask).
  Tensor mask = rand_like(input).lt(1 - p).to(input.dtype()).mul_(1 / (1 - p));
  return inplace ? self.mul_(mask) : input.mul(mask);
}

}  // namespace tandem::nn::functional

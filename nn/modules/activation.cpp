// Activation modules and Dropout.
#include "nn/modules/activation.h"

#include "nn/functional/activation.h"

namespace tandem::nn {

Tensor ReLUImpl::forward(const Tensor& input) { return functional::relu(input, options.inplace()); }
void ReLUImpl::pretty_print(std::ostream& stream) const {
  stream << "ReLU(" << (options.inplace() ? "inplace=true" : "") << ")";
}

GELUImpl::GELUImpl(const GELUOptions& options_) : options(options_) {
  TANDEM_CHECK(options.approximate() == "none" || options.approximate() == "tanh", ValueError,
               "GELU: approximate must be 'none' or 'tanh', got '", options.approximate(), "'");
}
Tensor GELUImpl::forward(const Tensor& input) { return functional::gelu(input, options.approximate()); }
void GELUImpl::pretty_print(std::ostream& stream) const {
  stream << "GELU(approximate='" << options.approximate() << "')";
}

Tensor SiLUImpl::forward(const Tensor& input) { return functional::silu(input); }
Tensor TanhImpl::forward(const Tensor& input) { return functional::tanh(input); }
Tensor SigmoidImpl::forward(const Tensor& input) { return functional::sigmoid(input); }

Tensor LeakyReLUImpl::forward(const Tensor& input) {
  return functional::leaky_relu(input, options.negative_slope(), options.inplace());
}
void LeakyReLUImpl::pretty_print(std::ostream& stream) const {
  stream << "LeakyReLU(negative_slope=" << options.negative_slope() << (options.inplace() ? ", inplace=true" : "")
         << ")";
}
Tensor ELUImpl::forward(const Tensor& input) { return functional::elu(input, options.alpha(), options.inplace()); }
void ELUImpl::pretty_print(std::ostream& stream) const {
  stream << "ELU(alpha=" << options.alpha() << (options.inplace() ? ", inplace=true" : "") << ")";
}
Tensor SoftplusImpl::forward(const Tensor& input) {
  return functional::softplus(input, options.beta(), options.threshold());
}
void SoftplusImpl::pretty_print(std::ostream& stream) const {
  stream << "Softplus(beta=" << options.beta() << ", threshold=" << options.threshold() << ")";
}

Tensor SoftmaxImpl::forward(const Tensor& input) { return functional::softmax(input, options.dim()); }
void SoftmaxImpl::pretty_print(std::ostream& stream) const { stream << "Softmax(dim=" << options.dim() << ")"; }

DropoutImpl::DropoutImpl(const DropoutOptions& options_) : options(options_) {
  TANDEM_CHECK(options.p() >= 0 && options.p() <= 1, ValueError,
               "dropout probability has to be between 0 and 1, but got ", options.p());
}
Tensor DropoutImpl::forward(const Tensor& input) {
  return functional::dropout(input, options.p(), is_training(), options.inplace());
}
void DropoutImpl::pretty_print(std::ostream& stream) const {
  stream << "Dropout(p=" << options.p() << ", inplace=" << (options.inplace() ? "true" : "false") << ")";
}

}  // namespace tandem::nn

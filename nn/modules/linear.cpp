// nn::Linear and nn::Flatten.
#include "nn/modules/linear.h"

#include <cmath>

#include "nn/functional/linear.h"
#include "nn/init.h"
#include "tensor/ops/factory.h"

namespace tandem::nn {

LinearImpl::LinearImpl(const LinearOptions& options_) : options(options_) {
  TANDEM_CHECK(options.in_features() >= 0 && options.out_features() >= 0, ValueError,
               "Linear: in_features and out_features must be non-negative, got ", options.in_features(), " and ",
               options.out_features());
  weight = register_parameter("weight", empty({options.out_features(), options.in_features()}));
  if (options.bias()) {
    bias = register_parameter("bias", empty({options.out_features()}));
  } else {
    register_parameter("bias", Tensor(), false);
  }
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = options.in_features();
    const double bound = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& input) { return functional::linear(input, weight, bias); }

void LinearImpl::pretty_print(std::ostream& stream) const {
  stream << "Linear(in_features=" << options.in_features() << ", out_features=" << options.out_features()
         << ", bias=" << (options.bias() ? "true" : "false") << ")";
}

Tensor FlattenImpl::forward(const Tensor& input) { return input.flatten(options.start_dim(), options.end_dim()); }

void FlattenImpl::pretty_print(std::ostream& stream) const {
  stream << "Flatten(start_dim=" << options.start_dim() << ", end_dim=" << options.end_dim() << ")";
}

}  // namespace tandem::nn

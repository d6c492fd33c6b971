// nn::MaxPool2d, nn::AvgPool2d, nn::AdaptiveAvgPool2d.
#include "nn/modules/pool.h"

#include "nn/functional/conv.h"

namespace tandem::nn {

Tensor MaxPool2dImpl::forward(const Tensor& input) { return functional::max_pool2d(input, options); }

std::tuple<Tensor, Tensor> MaxPool2dImpl::forward_with_indices(const Tensor& input) {
  return functional::max_pool2d_with_indices(input, options);
}

// Sizes as given (one value or a pair), as PyTorch prints them.
void MaxPool2dImpl::pretty_print(std::ostream& stream) const {
  stream << "MaxPool2d(kernel_size=" << format_pair(options.kernel_size(), true)
         << ", stride=" << format_pair(options.stride(), true) << ", padding=" << format_pair(options.padding(), true)
         << ", dilation=" << format_pair(options.dilation(), true)
         << ", ceil_mode=" << (options.ceil_mode() ? "true" : "false") << ")";
}

Tensor AvgPool2dImpl::forward(const Tensor& input) { return functional::avg_pool2d(input, options); }

void AvgPool2dImpl::pretty_print(std::ostream& stream) const {
  stream << "AvgPool2d(kernel_size=" << format_pair(options.kernel_size(), true)
         << ", stride=" << format_pair(options.stride(), true) << ", padding=" << format_pair(options.padding(), true)
         << ")";
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& input) { return functional::adaptive_avg_pool2d(input, options); }

void AdaptiveAvgPool2dImpl::pretty_print(std::ostream& stream) const {
  stream << "AdaptiveAvgPool2d(output_size=" << format_pair(options.output_size(), true) << ")";
}

}  // namespace tandem::nn

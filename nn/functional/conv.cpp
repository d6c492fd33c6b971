// nn::functional convolution and pooling over the ops of tensor/ops/conv.h
// and pool.h, and the option types of nn/options/conv.h.
#include "nn/functional/conv.h"

#include "tensor/ops/conv.h"
#include "tensor/ops/pool.h"

namespace tandem::nn {

ExpandingArray2::ExpandingArray2(std::initializer_list<int64_t> list) : values_{0, 0} {
  TANDEM_CHECK(list.size() == 1 || list.size() == 2, ValueError,
               "expected one value for both dims or two values {h, w}, but got ", list.size(), " values");
  values_ = {*list.begin(), *(list.end() - 1)};
  single_ = list.size() == 1;
}

std::string format_pair(const ExpandingArray2& v, bool as_given) {
  if (as_given && v.single()) return std::to_string(v[0]);
  return detail::str_cat("(", v[0], ", ", v[1], ")");
}

Conv2dPadding::Conv2dPadding(const char* s) : Conv2dPadding(std::string(s)) {}

Conv2dPadding::Conv2dPadding(const std::string& s) : sizes_(0) {
  TANDEM_CHECK(s == "same" || s == "valid", ValueError, "Invalid padding string '", s,
               "', should be one of {'valid', 'same'}");
  mode_ = s == "same" ? PaddingString::Same : PaddingString::Valid;
}

std::string Conv2dPadding::str() const {
  if (mode_) return *mode_ == PaddingString::Same ? "same" : "valid";
  return format_pair(sizes_, false);
}

const char* padding_mode_name(PaddingMode mode) {
  switch (mode) {
    case PaddingMode::Zeros: return "zeros";
    case PaddingMode::Reflect: return "reflect";
    case PaddingMode::Replicate: return "replicate";
    case PaddingMode::Circular: return "circular";
  }
  return "?";
}

namespace functional {

Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options) {
  const Conv2dPadding& padding = options.padding();
  if (padding.mode()) {
    return tandem::conv2d(input, weight, options.bias(), options.stride(),
                          *padding.mode() == PaddingString::Same ? "same" : "valid", options.dilation(),
                          options.groups());
  }
  return tandem::conv2d(input, weight, options.bias(), options.stride(), padding.sizes().ref(), options.dilation(),
                        options.groups());
}

Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options) {
  return tandem::max_pool2d(input, options.kernel_size(), options.stride(), options.padding(), options.dilation(),
                            options.ceil_mode());
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const MaxPool2dFuncOptions& options) {
  return tandem::max_pool2d_with_indices(input, options.kernel_size(), options.stride(), options.padding(),
                                         options.dilation(), options.ceil_mode());
}

Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& options) {
  return tandem::avg_pool2d(input, options.kernel_size(), options.stride(), options.padding(), options.ceil_mode(),
                            options.count_include_pad(), options.divisor_override());
}

Tensor adaptive_avg_pool2d(const Tensor& input, const AdaptiveAvgPool2dFuncOptions& options) {
  return tandem::adaptive_avg_pool2d(input, options.output_size());
}

}  // namespace functional

}  // namespace tandem::nn

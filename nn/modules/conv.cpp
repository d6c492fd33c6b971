// nn::Conv2d.
#include "nn/modules/conv.h"

#include <cmath>

#include "nn/functional/conv.h"
#include "nn/init.h"
#include "tensor/ops/factory.h"

namespace tandem::nn {

Conv2dImpl::Conv2dImpl(const Conv2dOptions& options_) : options(options_) {
  const int64_t in = options.in_channels(), out = options.out_channels(), groups = options.groups();
  TANDEM_CHECK(in >= 0 && out >= 0, ValueError, "Conv2d: in_channels and out_channels must be non-negative, got ", in,
               " and ", out);
  TANDEM_CHECK(groups > 0, ValueError, "groups must be a positive integer (Conv2d: got groups=", groups, ")");
  TANDEM_CHECK(in % groups == 0, ValueError, "in_channels must be divisible by groups (Conv2d: in_channels=", in,
               ", groups=", groups, ")");
  TANDEM_CHECK(out % groups == 0, ValueError, "out_channels must be divisible by groups (Conv2d: out_channels=", out,
               ", groups=", groups, ")");
  const ExpandingArray2& k = options.kernel_size();
  TANDEM_CHECK(k[0] > 0 && k[1] > 0, ValueError, "Conv2d: kernel_size must be positive, got ", format_pair(k, false));
  TANDEM_CHECK(!options.padding().mode() || *options.padding().mode() != PaddingString::Same ||
                   (options.stride()[0] == 1 && options.stride()[1] == 1),
               ValueError, "padding='same' is not supported for strided convolutions (Conv2d: stride=",
               format_pair(options.stride(), false), ")");
  TANDEM_CHECK(options.padding_mode() == PaddingMode::Zeros, NotImplementedError, "Conv2d: padding_mode='",
               padding_mode_name(options.padding_mode()),
               "' is not implemented in Tandem, only 'zeros' (pad the input yourself and use padding=0)");
  weight = register_parameter("weight", empty({out, in / groups, k[0], k[1]}));
  if (options.bias()) {
    bias = register_parameter("bias", empty({out}));
  } else {
    register_parameter("bias", Tensor(), false);
  }
  reset_parameters();
}

void Conv2dImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2dImpl::forward(const Tensor& input) {
  return functional::conv2d(input, weight,
                            functional::Conv2dFuncOptions()
                                .bias(bias)
                                .stride(options.stride())
                                .padding(options.padding())
                                .dilation(options.dilation())
                                .groups(options.groups()));
}

// PyTorch's extra_repr: stride always, the rest when not the default.
void Conv2dImpl::pretty_print(std::ostream& stream) const {
  stream << "Conv2d(" << options.in_channels() << ", " << options.out_channels()
         << ", kernel_size=" << format_pair(options.kernel_size(), false)
         << ", stride=" << format_pair(options.stride(), false);
  if (!options.padding().is_zero()) stream << ", padding=" << options.padding().str();
  if (!(options.dilation() == ExpandingArray2(1))) stream << ", dilation=" << format_pair(options.dilation(), false);
  if (options.groups() != 1) stream << ", groups=" << options.groups();
  if (!options.bias()) stream << ", bias=false";
  stream << ")";
}

}  // namespace tandem::nn

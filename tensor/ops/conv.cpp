// Front end of conv2d: PyTorch's checks and messages, "same"/"valid"
// padding, unbatched inputs, the output allocation, the dispatch to a
// backend, and the autograd node; and the fused backward ops its derivative
// rule calls (detail::conv2d_backward_input / _weight).
#include "tensor/ops/conv.h"

#include <string>

#include "kernels/conv.h"
#include "kernels/cuda/conv.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/conv_args.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/shape_ops.h"

namespace tandem {

namespace {

using autograd::GradOp;
using autograd::Recorder;
using detail::Pair;

// PyTorch's name of a tensor type, as its dtype-mismatch message prints it.
std::string tensor_type(const Tensor& t) {
  const char* name = "";
  switch (t.dtype()) {
    case Dtype::Float32: name = "FloatTensor"; break;
    case Dtype::Float64: name = "DoubleTensor"; break;
    case Dtype::Float16: name = "HalfTensor"; break;
    case Dtype::BFloat16: name = "BFloat16Tensor"; break;
    case Dtype::Int64: name = "LongTensor"; break;
    case Dtype::Int32: name = "IntTensor"; break;
    case Dtype::UInt8: name = "ByteTensor"; break;
    case Dtype::Bool: name = "BoolTensor"; break;
  }
  return detail::str_cat(t.is_cuda() ? "torch.cuda." : "torch.", name);
}

// (h, w) from a list of one or two values.
Pair conv_pair(IntArrayRef v, const char* name) {
  return detail::expand_pair(v, "expected ", name,
                             " to be a single integer value or a list of 2 values to match the convolution "
                             "dimensions, but got ",
                             name, "=");
}

// stride, padding, dilation and groups, checked.
Conv2dParams conv_params(IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  const Pair s = conv_pair(stride, "stride"), pad = conv_pair(padding, "padding"), d = conv_pair(dilation, "dilation");
  TANDEM_CHECK(s.h > 0 && s.w > 0, ValueError,
               "non-positive stride is not supported (conv2d: got stride=", shape_str(stride), ")");
  TANDEM_CHECK(pad.h >= 0 && pad.w >= 0, ValueError,
               "negative padding is not supported (conv2d: got padding=", shape_str(padding), ")");
  TANDEM_CHECK(d.h > 0 && d.w > 0, ValueError,
               "non-positive dilation is not supported (conv2d: got dilation=", shape_str(dilation), ")");
  TANDEM_CHECK(groups > 0, ValueError, "non-positive groups is not supported (conv2d: got groups=", groups, ")");
  return {s.h, s.w, pad.h, pad.w, d.h, d.w, groups};
}

void check_weight_rank(IntArrayRef w) {
  TANDEM_CHECK(w.size() == 4, ShapeError,
               "conv2d: expected weight to be 4-D (out_channels, in_channels / groups, kH, kW), but got weight of "
               "size ",
               shape_str(w));
}

// weight sizes (C_out, C_in / groups, kH, kW), with a kernel of at least
// 1 x 1 and C_out a positive multiple of groups.
void check_weight(IntArrayRef w, int64_t groups) {
  check_weight_rank(w);
  TANDEM_CHECK(w[0] >= groups, ShapeError, "Given groups=", groups, ", expected weight to be at least ", groups,
               " at dimension 0, but got weight of size ", shape_str(w), " instead");
  TANDEM_CHECK(w[0] % groups == 0, ShapeError, "Given groups=", groups, ", expected weight to be divisible by ", groups,
               " at dimension 0, but got weight of size ", shape_str(w), " instead");
  TANDEM_CHECK(w[2] > 0 && w[3] > 0, ShapeError, "conv2d: expected a kernel of at least 1 x 1, but got weight of size ",
               shape_str(w));
}

// The output's (OH, OW) for a 4-D input x, after checking that the dilated
// kernel fits in the padded input.
Pair output_hw(IntArrayRef x, IntArrayRef w, const Conv2dParams& p) {
  const int64_t ph = x[2] + 2 * p.pad_h, pw = x[3] + 2 * p.pad_w;
  const int64_t kh = p.dilation_h * (w[2] - 1) + 1, kw = p.dilation_w * (w[3] - 1) + 1;
  TANDEM_CHECK(ph >= kh && pw >= kw, ShapeError, "Calculated padded input size per channel: (", ph, " x ", pw,
               "). Kernel size: (", kh, " x ", kw,
               "). Kernel size can't be greater than actual input size (conv2d: input of size ", shape_str(x),
               ", padding (", p.pad_h, ", ", p.pad_w, "), dilation (", p.dilation_h, ", ", p.dilation_w, "))");
  return {conv_output_size(x[2], w[2], p.stride_h, p.pad_h, p.dilation_h),
          conv_output_size(x[3], w[3], p.stride_w, p.pad_w, p.dilation_w)};
}

// Every check of conv2d on a 4-D input x (input itself, or it unsqueezed).
void check_conv(const Tensor& input, const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  check_weight(weight.sizes(), p.groups);
  TANDEM_CHECK(x.size(1) == weight.size(1) * p.groups, ShapeError, "Given groups=", p.groups, ", weight of size ",
               shape_str(weight.sizes()), ", expected input", shape_str(x.sizes()), " to have ",
               weight.size(1) * p.groups, " channels, but got ", x.size(1), " channels instead");
  TANDEM_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), ShapeError,
               "Given weight of size ", shape_str(weight.sizes()), ", expected bias to be 1-dimensional with ",
               weight.size(0), " elements, but got bias of size ", bias.defined() ? shape_str(bias.sizes()) : "",
               " instead");
  TANDEM_CHECK(input.dtype() == weight.dtype(), DtypeError, "Input type (", tensor_type(input), ") and weight type (",
               tensor_type(weight), ") should be the same (conv2d: input is ", input.dtype(), ", weight is ",
               weight.dtype(), "; convert the input, e.g. input.to(", weight.dtype(),
               "), or the model, e.g. model->to(", input.dtype(), "))");
  TANDEM_CHECK(!bias.defined() || bias.dtype() == input.dtype(), DtypeError, "Input type (",
               torch_cpp_type_name(input.dtype()), ") and bias type (", torch_cpp_type_name(bias.dtype()),
               ") should be the same (conv2d: convert the bias, e.g. bias.to(", input.dtype(), "))");
  detail::check_floating("conv2d", input, "the tensors");
}

// The kernels' run: contiguous operands, an output of (N, C_out, OH, OW).
// Empty outputs and inputs without channels (out = bias) never reach a kernel.
Tensor run_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p, Pair out_hw,
                const Origin& origin) {
  Tensor out = detail::make_result({x.size(0), weight.size(0), out_hw.h, out_hw.w}, x.dtype(), x.device(),
                                   Origin::computed("conv2d", origin));
  if (out.numel() == 0) return out;
  if (x.size(1) == 0) {
    out.zero_();
    if (bias.defined()) out.add_(bias.view({1, -1, 1, 1}));
    return out;
  }
  const Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.defined() ? bias.contiguous() : Tensor();
  dispatch(x.device(), cpu::conv2d, cuda::conv2d, out, xc, wc, bc, p);
  return out;
}

// run_conv under a Convolution node, which keeps what autograd/rules_conv.cpp
// reads: inputs {x (4-D), weight, bias}; saved {x if the weight needs grad,
// weight if x needs grad} (undefined otherwise); the Conv2dParams as payload.
// Grad mode is off while the Recorder lives, so views of the result are
// taken by the caller.
Tensor recorded_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p, Pair hw,
                     const Origin& origin) {
  Recorder rec(GradOp::Convolution, {x, weight, bias});
  Tensor out = run_conv(x, weight, bias, p, hw, origin);
  if (rec) {
    rec.node().payload = p;
    rec.save(rec.node().needs_input_grad(1) ? x : Tensor());
    rec.save(rec.node().needs_input_grad(0) ? weight : Tensor());
  }
  return rec.finish(out);
}

// A 3-D or 4-D input, else PyTorch's message.
void check_input_rank(const Tensor& input) {
  TANDEM_CHECK(
      input.dim() == 3 || input.dim() == 4, ShapeError,
      "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: ", shape_str(input.sizes()));
}

// The checks of the fused backward ops: grad_out, the other operand, the
// sizes of what they differentiate, and the grad mode rule.
struct BackwardShapes {
  Shape input, weight;
};

void check_backward(const char* name, const Tensor& grad_out, const char* other_name, const Tensor& other,
                    const BackwardShapes& s, const Conv2dParams& p) {
  check_inputs(name, {{"grad_out", grad_out}, {other_name, other}});
  TANDEM_CHECK(s.input.size() == 4 && s.weight.size() == 4 && grad_out.dim() == 4, ShapeError, name,
               "(): expected 4-D input, weight and grad_out, but got input size ", shape_str(s.input), ", weight size ",
               shape_str(s.weight), " and grad_out of size ", shape_str(grad_out.sizes()));
  check_weight(s.weight, p.groups);
  TANDEM_CHECK(s.input[1] == s.weight[1] * p.groups, ShapeError, name, "(): given groups=", p.groups,
               ", weight of size ", shape_str(s.weight), " expects input with ", s.weight[1] * p.groups,
               " channels, but the input size is ", shape_str(s.input));
  const Pair hw = output_hw(s.input, s.weight, p);
  const Shape expected{s.input[0], s.weight[0], hw.h, hw.w};
  TANDEM_CHECK(grad_out.sizes() == IntArrayRef(expected), ShapeError, name, "(): expected grad_out of size ",
               shape_str(expected), " (the output of conv2d on input ", shape_str(s.input), "), but got ",
               shape_str(grad_out.sizes()));
  TANDEM_CHECK(other.dtype() == grad_out.dtype(), DtypeError, name, "(): expected grad_out of the ", other_name,
               "'s dtype ", other.dtype(), ", but got ", grad_out.dtype(), "; convert it first, e.g. grad_out.to(",
               other.dtype(), ")");
  detail::check_floating(name, other, "the tensors");
  TANDEM_CHECK(!GradMode::is_enabled() || (!grad_out.requires_grad() && !other.requires_grad()), ValueError, name,
               "(): records no graph, but grad mode is on and ", grad_out.requires_grad() ? "grad_out" : other_name,
               " requires grad; call it inside a NoGradGuard (double backward of conv2d is not implemented)");
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  if (auto in = autocast::detail::inputs("conv2d", {input, weight, bias})) {
    return autocast::detail::excluded(
        [&] { return conv2d((*in)[0], (*in)[1], (*in)[2], stride, padding, dilation, groups); });
  }
  check_defined("conv2d", {{"input", input}, {"weight", weight}});
  // The weight first: when the input is on the wrong device, the message
  // says to move the input, which is almost always the fix.
  check_same_device("conv2d", {{"weight", weight}, {"input", input}, {"bias", bias}});
  check_input_rank(input);
  const Conv2dParams p = conv_params(stride, padding, dilation, groups);
  const bool batched = input.dim() == 4;
  const Tensor x = batched ? input : input.unsqueeze(0);
  check_conv(input, x, weight, bias, p);
  const Pair hw = output_hw(x.sizes(), weight.sizes(), p);

  Tensor out = recorded_conv(x, weight, bias, p, hw, input.origin());
  return batched ? out : out.squeeze(0);  // recorded: the Recorder is gone
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
              std::string_view padding, IntArrayRef dilation, int64_t groups) {
  check_defined("conv2d", {{"input", input}, {"weight", weight}});
  TANDEM_CHECK(padding == "same" || padding == "valid", ValueError, "Invalid padding string: '", padding,
               "' (conv2d takes padding=\"same\", \"valid\" or sizes)");
  if (padding == "valid") return conv2d(input, weight, bias, stride, int64_t{0}, dilation, groups);
  const Pair s = conv_pair(stride, "stride");
  TANDEM_CHECK(s.h == 1 && s.w == 1, ValueError,
               "padding='same' is not supported for strided convolutions (conv2d: got stride=", shape_str(stride), ")");
  check_input_rank(input);
  check_weight_rank(weight.sizes());
  const Pair d = conv_pair(dilation, "dilation");
  // Each dim's total padding d * (k - 1) split evenly, the odd one at the
  // bottom / right as an explicit row / column of zeros.
  const int64_t total_h = d.h * (weight.size(2) - 1), total_w = d.w * (weight.size(3) - 1);
  Tensor x = input;
  auto pad_end = [&](int64_t dim) {
    Shape zs = x.sizes().vec();
    zs[static_cast<size_t>(x.dim() + dim)] = 1;
    x = cat({x, zeros(zs, TensorOptions(x.dtype()).device(x.device()))}, dim);
  };
  if (total_h % 2 != 0) pad_end(-2);
  if (total_w % 2 != 0) pad_end(-1);
  return conv2d(x, weight, bias, stride, {total_h / 2, total_w / 2}, dilation, groups);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntArrayRef stride, int64_t padding,
              IntArrayRef dilation, int64_t groups) {
  return conv2d(input, weight, bias, stride, IntArrayRef(padding), dilation, groups);
}

Tensor detail::conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, IntArrayRef input_sizes,
                                     IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  const char* name = "conv2d_backward_input";
  const Conv2dParams p = conv_params(stride, padding, dilation, groups);
  check_backward(name, grad_out, "weight", weight, {input_sizes.vec(), weight.sizes().vec()}, p);
  Tensor grad_input =
      detail::make_result(input_sizes, weight.dtype(), weight.device(), Origin::computed(name, grad_out.origin()));
  if (grad_input.numel() == 0) return grad_input;
  if (grad_out.numel() == 0) return grad_input.zero_();
  const Tensor gy = grad_out.contiguous(), w = weight.contiguous();
  dispatch(weight.device(), cpu::conv2d_backward_input, cuda::conv2d_backward_input, grad_input, gy, w, p);
  return grad_input;
}

Tensor detail::conv2d_backward_weight(const Tensor& grad_out, const Tensor& input, IntArrayRef weight_sizes,
                                      IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  const char* name = "conv2d_backward_weight";
  const Conv2dParams p = conv_params(stride, padding, dilation, groups);
  check_backward(name, grad_out, "input", input, {input.sizes().vec(), weight_sizes.vec()}, p);
  Tensor grad_weight =
      detail::make_result(weight_sizes, input.dtype(), input.device(), Origin::computed(name, grad_out.origin()));
  if (grad_weight.numel() == 0) return grad_weight;
  if (grad_out.numel() == 0) return grad_weight.zero_();
  const Tensor gy = grad_out.contiguous(), x = input.contiguous();
  dispatch(input.device(), cpu::conv2d_backward_weight, cuda::conv2d_backward_weight, grad_weight, gy, x, p);
  return grad_weight;
}

}  // namespace tandem

// Front end of the pooling ops: PyTorch's argument checks and messages, the
// output sizes, unbatched inputs, the dispatch to a backend and the autograd
// nodes; and the fused backward ops their derivative rules call.
#include "tensor/ops/pool.h"

#include <string>
#include <tuple>
#include <vector>

#include "kernels/pool.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/conv_args.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"

namespace tandem {

namespace {

using autograd::GradOp;
using autograd::Recorder;
using detail::Pair;

// (h, w) from one or two values; empty gives `otherwise` when it has a value.
Pair pool_pair(IntArrayRef v, const char* op, const char* what, std::optional<Pair> otherwise = std::nullopt) {
  if (v.empty() && otherwise) return *otherwise;
  const char* expected = otherwise ? "must either be omitted, a single int, or a tuple of two ints"
                                   : "must either be a single int, or a tuple of two ints";
  return detail::expand_pair(v, op, ": ", what, " ", expected, ", but got ", what, "=");
}

// The window parameters of max_pool2d / avg_pool2d, checked in PyTorch's
// order (the output-size checks, then the shape checks).
Pool2dParams pool_params(const char* op, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                         IntArrayRef dilation, bool ceil_mode) {
  const Pair k = pool_pair(kernel_size, op, "kernel_size");
  const Pair s = pool_pair(stride, op, "stride", k);
  const Pair pad = pool_pair(padding, op, "padding");
  const Pair d = pool_pair(dilation, op, "dilation");
  for (auto [kk, ss, pp] : {std::tuple{k.h, s.h, pad.h}, std::tuple{k.w, s.w, pad.w}}) {
    TANDEM_CHECK(ss != 0, ValueError, "stride should not be zero (", op, ": got stride=", s.h, ", ", s.w,
                 "; leave it empty for the kernel size)");
    TANDEM_CHECK(pp >= 0, ValueError, "pad must be non-negative, but got pad: ", pp, " (", op, ")");
    TANDEM_CHECK(pp <= kk / 2, ValueError, "pad should be at most half of kernel size, but got pad=", pp,
                 " and kernel_size=", kk, " (", op, ": use a smaller padding or a larger kernel)");
  }
  TANDEM_CHECK(k.h > 0 && k.w > 0, ValueError, "kernel size should be greater than zero, but got kH: ", k.h,
               " kW: ", k.w, " (", op, ")");
  TANDEM_CHECK(s.h > 0 && s.w > 0, ValueError, "stride should be greater than zero, but got dH: ", s.h, " dW: ", s.w,
               " (", op, ")");
  TANDEM_CHECK(d.h > 0 && d.w > 0, ValueError, "dilation should be greater than zero, but got dilationH: ", d.h,
               " dilationW: ", d.w, " (", op, ")");
  Pool2dParams p;
  p.kernel_h = k.h, p.kernel_w = k.w;
  p.stride_h = s.h, p.stride_w = s.w;
  p.pad_h = pad.h, p.pad_w = pad.w;
  p.dilation_h = d.h, p.dilation_w = d.w;
  p.ceil_mode = ceil_mode;
  return p;
}

// A 3-D or 4-D input whose channel and spatial dims are not empty (the batch
// may be).
void check_pool_input(const char* op, const Tensor& input) {
  const int64_t nd = input.dim();
  const bool ok = (nd == 3 || nd == 4) && input.size(-1) != 0 && input.size(-2) != 0 && input.size(-3) != 0;
  TANDEM_CHECK(ok, ShapeError,
               "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:",
               shape_str(input.sizes()), " (", op, " takes (N, C, H, W) or (C, H, W))");
}

// (OH, OW) of max or average pooling over the 4-D x, at least 1 x 1.
Pair pool_output(const char* op, const Tensor& x, const Pool2dParams& p) {
  const int64_t H = x.size(2), W = x.size(3);
  const int64_t OH = pool_output_size(H, p.kernel_h, p.stride_h, p.pad_h, p.dilation_h, p.ceil_mode);
  const int64_t OW = pool_output_size(W, p.kernel_w, p.stride_w, p.pad_w, p.dilation_w, p.ceil_mode);
  TANDEM_CHECK(OH >= 1 && OW >= 1, ShapeError, "Given input size: (", x.size(1), "x", H, "x", W,
               "). Calculated output size: (", x.size(1), "x", OH, "x", OW, "). Output size is too small (", op,
               ": kernel ", p.kernel_h, "x", p.kernel_w, ", dilation ", p.dilation_h, "x", p.dilation_w, ", padding ",
               p.pad_h, "x", p.pad_w, "; use a smaller kernel or more padding)");
  return {OH, OW};
}

// The 4-D view of input: itself, or the unbatched (C, H, W) with a batch of 1.
Tensor batched(const Tensor& input) { return input.dim() == 4 ? input : input.unsqueeze(0); }
// out back to the input's rank.
Tensor unbatched_like(const Tensor& out, const Tensor& input) { return input.dim() == 4 ? out : out.squeeze(0); }

Tensor make_out(const Tensor& x, Pair hw, const char* op, Dtype dtype) {
  return detail::make_result({x.size(0), x.size(1), hw.h, hw.w}, dtype, x.device(), Origin::computed(op, x.origin()));
}

// The checks every fused backward runs: grad_out of the forward's output
// size, floating, and the grad mode rule.
void check_backward(const char* name, const Tensor& grad_out, IntArrayRef input_sizes, Pair out_hw) {
  TANDEM_CHECK(input_sizes.size() == 4 && input_sizes[1] > 0 && input_sizes[2] > 0 && input_sizes[3] > 0, ShapeError,
               name, "(): expected 4-D input sizes without empty channel or spatial dims, but got ",
               shape_str(input_sizes));
  const Shape expected{input_sizes[0], input_sizes[1], out_hw.h, out_hw.w};
  TANDEM_CHECK(grad_out.sizes() == IntArrayRef(expected), ShapeError, name, "(): expected grad_out of size ",
               shape_str(expected), " (the forward's output for input ", shape_str(input_sizes), "), but got ",
               shape_str(grad_out.sizes()));
  detail::check_floating(name, grad_out, "the tensors");
  TANDEM_CHECK(!GradMode::is_enabled() || !grad_out.requires_grad(), ValueError, name,
               "(): records no graph, but grad mode is on and grad_out requires grad; call it inside a NoGradGuard");
}

Tensor make_grad_input(const char* name, const Tensor& grad_out, IntArrayRef input_sizes) {
  return detail::make_result(input_sizes, grad_out.dtype(), grad_out.device(),
                             Origin::computed(name, grad_out.origin()));
}

}  // namespace

// What the pooling nodes keep, as autograd/rules_conv.cpp reads them; each
// has one input, the 4-D input (an unbatched one unsqueezed):
//   MaxPool2d:         saved = {indices}; the Pool2dParams as payload
//   AvgPool2d:         the Pool2dParams as payload
//   AdaptiveAvgPool2d: nothing (the sizes are the input's and the gradient's)
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride,
                                                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  const char* op = "max_pool2d";
  check_defined(op, {{"input", input}});
  const Pool2dParams p = pool_params(op, kernel_size, stride, padding, dilation, ceil_mode);
  check_pool_input(op, input);
  detail::check_floating(op, input, "the input");
  const Tensor x = batched(input);
  const Pair hw = pool_output(op, x, p);
  Tensor out = make_out(x, hw, op, x.dtype());
  Tensor indices = make_out(x, hw, op, kInt64);
  {
    // Grad mode is off while the Recorder lives: the views below record.
    Recorder rec(GradOp::MaxPool2d, {x});
    if (out.numel() != 0) {
      const Tensor xc = x.contiguous();
      dispatch(x.device(), cpu::max_pool2d, cuda::max_pool2d, out, indices, xc, p);
    }
    if (rec) {
      rec.node().payload = p;
      rec.save(indices);
    }
    rec.finish(out);
  }
  return {unbatched_like(out, input), unbatched_like(indices, input)};
}

Tensor max_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  return std::get<0>(max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& input, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool2d";
  check_defined(op, {{"input", input}});
  Pool2dParams p = pool_params(op, kernel_size, stride, padding, 1, ceil_mode);
  TANDEM_CHECK(!divisor_override || *divisor_override != 0, ValueError,
               "divisor must be not zero (avg_pool2d: leave divisor_override empty to divide by the window size)");
  p.count_include_pad = count_include_pad;
  p.divisor_override = divisor_override.value_or(0);
  check_pool_input(op, input);
  detail::check_floating(op, input, "the input");
  const Tensor x = batched(input);
  const Pair hw = pool_output(op, x, p);

  Tensor out = make_out(x, hw, op, x.dtype());
  {
    Recorder rec(GradOp::AvgPool2d, {x});
    if (out.numel() != 0) {
      const Tensor xc = x.contiguous();
      dispatch(x.device(), cpu::avg_pool2d, cuda::avg_pool2d, out, xc, p);
    }
    if (rec) rec.node().payload = p;
    rec.finish(out);
  }
  return unbatched_like(out, input);
}

Tensor adaptive_avg_pool2d(const Tensor& input, IntArrayRef output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_defined(op, {{"input", input}});
  const Pair os = detail::expand_pair(
      output_size, "adaptive_avg_pool2d: output_size must be 2 (or one value for both dims), but got output_size=");
  TANDEM_CHECK(os.h >= 0 && os.w >= 0, ValueError,
               "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {", os.h,
               ", ", os.w, "}");
  TANDEM_CHECK(input.dim() == 3 || input.dim() == 4, ShapeError,
               "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ", shape_str(input.sizes()),
               " (it takes (N, C, H, W) or (C, H, W))");
  for (int64_t d = input.dim() - 3; d < input.dim(); ++d)
    TANDEM_CHECK(input.size(d) > 0, ShapeError,
                 "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, but input has "
                 "sizes ",
                 shape_str(input.sizes()), " with dimension ", d, " being empty");
  detail::check_floating(op, input, "the input");
  const Tensor x = batched(input);

  Tensor out = make_out(x, os, op, x.dtype());
  {
    Recorder rec(GradOp::AdaptiveAvgPool2d, {x});
    if (out.numel() != 0) {
      const Tensor xc = x.contiguous();
      dispatch(x.device(), cpu::adaptive_avg_pool2d, cuda::adaptive_avg_pool2d, out, xc);
    }
    rec.finish(out);
  }
  return unbatched_like(out, input);
}

// ---------------------------------------------------------------- fused backward

Tensor detail::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, IntArrayRef input_sizes,
                                   IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                                   IntArrayRef dilation, bool ceil_mode) {
  const char* name = "max_pool2d_backward";
  check_inputs(name, {{"grad_out", grad_out}, {"indices", indices}});
  const Pool2dParams p = pool_params(name, kernel_size, stride, padding, dilation, ceil_mode);
  const Pair hw{pool_output_size(input_sizes.size() == 4 ? input_sizes[2] : 1, p.kernel_h, p.stride_h, p.pad_h,
                                 p.dilation_h, ceil_mode),
                pool_output_size(input_sizes.size() == 4 ? input_sizes[3] : 1, p.kernel_w, p.stride_w, p.pad_w,
                                 p.dilation_w, ceil_mode)};
  check_backward(name, grad_out, input_sizes, hw);
  TANDEM_CHECK(indices.dtype() == kInt64 && indices.sizes() == grad_out.sizes(), ShapeError, name,
               "(): expected int64 indices of grad_out's size ", shape_str(grad_out.sizes()), ", but got ",
               indices.dtype(), " indices of size ", shape_str(indices.sizes()));
  Tensor grad_input = make_grad_input(name, grad_out, input_sizes);
  if (grad_input.numel() == 0) return grad_input;
  const Tensor gy = grad_out.contiguous(), ind = indices.contiguous();
  dispatch(grad_out.device(), cpu::max_pool2d_backward, cuda::max_pool2d_backward, grad_input, gy, ind, p);
  return grad_input;
}

Tensor detail::avg_pool2d_backward(const Tensor& grad_out, IntArrayRef input_sizes, IntArrayRef kernel_size,
                                   IntArrayRef stride, IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                   std::optional<int64_t> divisor_override) {
  const char* name = "avg_pool2d_backward";
  check_defined(name, {{"grad_out", grad_out}});
  Pool2dParams p = pool_params(name, kernel_size, stride, padding, 1, ceil_mode);
  TANDEM_CHECK(!divisor_override || *divisor_override != 0, ValueError, "divisor must be not zero (", name, ")");
  p.count_include_pad = count_include_pad;
  p.divisor_override = divisor_override.value_or(0);
  const Pair hw{
      pool_output_size(input_sizes.size() == 4 ? input_sizes[2] : 1, p.kernel_h, p.stride_h, p.pad_h, 1, ceil_mode),
      pool_output_size(input_sizes.size() == 4 ? input_sizes[3] : 1, p.kernel_w, p.stride_w, p.pad_w, 1, ceil_mode)};
  check_backward(name, grad_out, input_sizes, hw);
  Tensor grad_input = make_grad_input(name, grad_out, input_sizes);
  if (grad_input.numel() == 0) return grad_input;
  const Tensor gy = grad_out.contiguous();
  dispatch(grad_out.device(), cpu::avg_pool2d_backward, cuda::avg_pool2d_backward, grad_input, gy, p);
  return grad_input;
}

Tensor detail::adaptive_avg_pool2d_backward(const Tensor& grad_out, IntArrayRef input_sizes) {
  const char* name = "adaptive_avg_pool2d_backward";
  check_defined(name, {{"grad_out", grad_out}});
  TANDEM_CHECK(grad_out.dim() == 4, ShapeError, name, "(): expected a 4-D grad_out, but got size ",
               shape_str(grad_out.sizes()));
  check_backward(name, grad_out, input_sizes, {grad_out.size(2), grad_out.size(3)});
  Tensor grad_input = make_grad_input(name, grad_out, input_sizes);
  if (grad_input.numel() == 0) return grad_input;
  if (grad_out.numel() == 0) return grad_input.zero_();
  const Tensor gy = grad_out.contiguous();
  dispatch(grad_out.device(), cpu::adaptive_avg_pool2d_backward, cuda::adaptive_avg_pool2d_backward, grad_input, gy);
  return grad_input;
}

}  // namespace tandem

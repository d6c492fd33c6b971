// Derivative rules of convolution and pooling (see autograd/rules.h). The
// front ends (tensor/ops/conv.cpp, pool.cpp) document each node's saved
// tensors; its payload is the Conv2dParams or Pool2dParams the kernels took.
// Each rule calls its fused backward op (detail::conv2d_backward_input, ...).
// Under create_graph those record nothing: max pooling then takes a
// differentiable formula (a scatter_add of grad at the saved indices), the
// bias gradient is a sum anyway, and convolution and average pooling, which
// have none here, refuse with NotImplementedError when the gradient they
// would compute needs a graph.
#include <functional>
#include <initializer_list>

#include "autograd/rules.h"
#include "kernels/functors/conv.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/conv.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/index.h"
#include "tensor/ops/pool.h"
#include "tensor/ops/reduce.h"

#pragma GCC diagnostic error "-Wswitch"

namespace tandem::autograd {

namespace {

// Under create_graph a fused backward is fine only when none of the tensors
// it reads requires grad (its result then needs no history).
void check_first_order(const char* op, std::initializer_list<std::reference_wrapper<const Tensor>> reads) {
  if (!GradMode::is_enabled()) return;
  for (const Tensor& t : reads)
    TANDEM_CHECK(!t.defined() || !t.requires_grad(), NotImplementedError, "double backward of ", op,
                 " is not implemented: a backward pass with create_graph=true (or autograd::grad with "
                 "create_graph) needs the gradient of ",
                 op,
                 "'s own backward. Take first-order gradients only (create_graph=false), or keep the "
                 "twice-differentiated part of the graph free of ",
                 op);
}

}  // namespace

// inputs {input, weight, bias}; saved {input, weight} where needed.
GradList convolution_backward(Node& node, const Tensor& grad_in) {
  const Conv2dParams& p = node.params<Conv2dParams>();
  const Shape stride{p.stride_h, p.stride_w}, padding{p.pad_h, p.pad_w}, dilation{p.dilation_h, p.dilation_w};
  const int64_t groups = p.groups;
  const Tensor grad = grad_in.to(node.inputs[1].dtype);
  GradList out(3);
  if (node.needs_input_grad(0)) {
    const Tensor weight = node.saved_tensor(1);
    check_first_order("conv2d", {grad, weight});
    out[0] = detail::conv2d_backward_input(grad, weight, node.inputs[0].sizes, stride, padding, dilation, groups);
  }
  if (node.needs_input_grad(1)) {
    const Tensor input = node.saved_tensor(0);
    check_first_order("conv2d", {grad, input});
    out[1] = detail::conv2d_backward_weight(grad, input, node.inputs[1].sizes, stride, padding, dilation, groups);
  }
  if (node.needs_input_grad(2)) out[2] = grad.sum({0, 2, 3});
  return out;
}

// saved {indices}
GradList max_pool2d_backward(Node& node, const Tensor& grad) {
  const Tensor indices = node.saved_tensor(0);
  const Shape& in = node.inputs[0].sizes;
  if (!GradMode::is_enabled()) {
    const Pool2dParams& p = node.params<Pool2dParams>();
    return {detail::max_pool2d_backward(grad, indices, in, {p.kernel_h, p.kernel_w}, {p.stride_h, p.stride_w},
                                        {p.pad_h, p.pad_w}, {p.dilation_h, p.dilation_w}, p.ceil_mode)};
  }
  // Each output's gradient added at its maximum's place in the plane:
  // linear in grad, so that its own gradient is a gather.
  const Tensor planes = zeros({in[0], in[1], in[2] * in[3]}, TensorOptions(grad.dtype()).device(grad.device()));
  return {planes.scatter_add(2, indices.flatten(2), grad.flatten(2)).view(in)};
}

GradList avg_pool2d_backward(Node& node, const Tensor& grad) {
  check_first_order("avg_pool2d", {grad});
  const Pool2dParams& p = node.params<Pool2dParams>();
  return {detail::avg_pool2d_backward(
      grad, node.inputs[0].sizes, {p.kernel_h, p.kernel_w}, {p.stride_h, p.stride_w}, {p.pad_h, p.pad_w}, p.ceil_mode,
      p.count_include_pad, p.divisor_override != 0 ? std::optional<int64_t>(p.divisor_override) : std::nullopt)};
}

GradList adaptive_avg_pool2d_backward(Node& node, const Tensor& grad) {
  check_first_order("adaptive_avg_pool2d", {grad});
  return {detail::adaptive_avg_pool2d_backward(grad, node.inputs[0].sizes)};
}

}  // namespace tandem::autograd

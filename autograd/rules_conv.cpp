// Derivative rules of convolution and pooling (see autograd/rules.h). The
// front ends (tensor/ops/conv.cpp, pool.cpp) document each node's saved
// tensors and ints. Each rule calls its fused backward op (detail::
// conv2d_backward_input, ...). Under create_graph those record nothing:
// max pooling then takes a differentiable formula (a scatter_add of grad at
// the saved indices), the bias gradient is a sum anyway, and convolution and
// average pooling, which have none here, refuse with NotImplementedError when
// the gradient they would compute needs a graph.
#include <functional>
#include <initializer_list>

#include "autograd/rules.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/conv.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/index.h"
#include "tensor/ops/pool.h"
#include "tensor/ops/reduce.h"

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

IntArrayRef ints_at(const Node& node, size_t first, size_t count) {
  TANDEM_INTERNAL_ASSERT(node.ints.size() >= first + count, "node ", node.name(), " recorded ", node.ints.size(),
                         " ints");
  return IntArrayRef(node.ints.data() + first, count);
}

// ints = {stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups};
// inputs {input, weight, bias}; saved {input, weight} where needed.
GradList convolution_backward(Node& node, const Tensor& grad_in) {
  const IntArrayRef stride = ints_at(node, 0, 2), padding = ints_at(node, 2, 2), dilation = ints_at(node, 4, 2);
  const int64_t groups = node.ints.at(6);
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

// saved {indices}; ints = {kH, kW, sH, sW, pH, pW, dilation_h, dilation_w, ceil_mode}.
GradList max_pool_backward(Node& node, const Tensor& grad) {
  const Tensor indices = node.saved_tensor(0);
  const Shape& in = node.inputs[0].sizes;
  if (!GradMode::is_enabled()) {
    return {detail::max_pool2d_backward(grad, indices, in, ints_at(node, 0, 2), ints_at(node, 2, 2),
                                        ints_at(node, 4, 2), ints_at(node, 6, 2), node.ints.at(8) != 0)};
  }
  // Each output's gradient added at its maximum's place in the plane:
  // linear in grad, so that its own gradient is a gather.
  const Tensor planes = zeros({in[0], in[1], in[2] * in[3]}, TensorOptions(grad.dtype()).device(grad.device()));
  return {planes.scatter_add(2, indices.flatten(2), grad.flatten(2)).view(in)};
}

// ints = {kH, kW, sH, sW, pH, pW, ceil_mode, count_include_pad, divisor_override (0: none)}.
GradList avg_pool_backward(Node& node, const Tensor& grad) {
  check_first_order("avg_pool2d", {grad});
  const int64_t divisor = node.ints.at(8);
  return {detail::avg_pool2d_backward(grad, node.inputs[0].sizes, ints_at(node, 0, 2), ints_at(node, 2, 2),
                                      ints_at(node, 4, 2), node.ints.at(6) != 0, node.ints.at(7) != 0,
                                      divisor != 0 ? std::optional<int64_t>(divisor) : std::nullopt)};
}

}  // namespace

GradList conv_backward(Node& node, const Tensor& grad) {
  switch (node.op) {
    case GradOp::Convolution: return convolution_backward(node, grad);
    case GradOp::MaxPool2d: return max_pool_backward(node, grad);
    case GradOp::AvgPool2d: return avg_pool_backward(node, grad);
    case GradOp::AdaptiveAvgPool2d:
      check_first_order("adaptive_avg_pool2d", {grad});
      return {detail::adaptive_avg_pool2d_backward(grad, node.inputs[0].sizes)};
    default: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "node ", node.name(), " is not a convolution or pooling rule");
  return {};
}

}  // namespace tandem::autograd

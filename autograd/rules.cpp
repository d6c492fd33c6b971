// The dispatch from a node's op to its family of derivative rules: a switch
// without a default, so that a new GradOp is a warning here until it has a rule.
#include "autograd/rules.h"

namespace tandem::autograd {

GradList apply_rule(Node& node, const Tensor& grad) {
  switch (node.op) {
    case GradOp::AccumulateGrad: break;  // the engine accumulates; never a rule
#define X(Name, ...) case GradOp::Name:
      TANDEM_UNARY_OPS(X) return unary_backward(unary_op(node.op), node, grad);
      TANDEM_ARITHMETIC_OPS(X) return binary_backward(binary_op(node.op), node, grad);
#undef X
    case GradOp::Where:
    case GradOp::MaskedFill:
    case GradOp::Fill:
    case GradOp::Copy:
    case GradOp::ToCopy:
    case GradOp::Clone: return elementwise_backward(node, grad);
    case GradOp::Sum:
    case GradOp::Mean:
    case GradOp::Prod:
    case GradOp::MaxAll:
    case GradOp::MinAll:
    case GradOp::MaxDim:
    case GradOp::MinDim:
    case GradOp::Amax:
    case GradOp::Amin:
    case GradOp::Var:
    case GradOp::Std:
    case GradOp::Norm:
    case GradOp::LogSumExp:
    case GradOp::Softmax:
    case GradOp::LogSoftmax: return reduce_backward(node, grad);
    case GradOp::View:
    case GradOp::Squeeze:
    case GradOp::SqueezeDim:
    case GradOp::Unsqueeze:
    case GradOp::Permute:
    case GradOp::Transpose:
    case GradOp::T:
    case GradOp::Expand:
    case GradOp::Slice:
    case GradOp::Select:
    case GradOp::AsStrided:
    case GradOp::CopySlices: return view_backward(node, grad);
    case GradOp::Cat:
    case GradOp::Stack:
    case GradOp::Gather:
    case GradOp::ScatterAdd:
    case GradOp::IndexSelect:
    case GradOp::Mm:
    case GradOp::Bmm:
    case GradOp::Matmul: return index_backward(node, grad);
    case GradOp::Convolution:
    case GradOp::MaxPool2d:
    case GradOp::AvgPool2d:
    case GradOp::AdaptiveAvgPool2d: return conv_backward(node, grad);
    case GradOp::BatchNorm:
    case GradOp::LayerNorm:
    case GradOp::Embedding: return norm_backward(node, grad);
  }
  TANDEM_INTERNAL_ASSERT(false, "no derivative rule for ", node.name());
  return {};
}

}  // namespace tandem::autograd

// The dispatch from a node's op to its derivative rule: one switch naming
// every GradOp, without a default, so that a new GradOp does not compile
// until it has a rule.
#include "autograd/rules.h"

#pragma GCC diagnostic error "-Wswitch"

namespace tandem::autograd {

GradList apply_rule(Node& node, const Tensor& grad) {
  switch (node.op) {
    case GradOp::AccumulateGrad: break;  // the engine accumulates; never a rule
#define X(Name, ...) case GradOp::Name:
      TANDEM_UNARY_OPS(X) return unary_backward(unary_op(node.op), node, grad);
      TANDEM_ARITHMETIC_OPS(X) return binary_backward(binary_op(node.op), node, grad);
#undef X
    case GradOp::Where: return where_backward(node, grad);
    case GradOp::MaskedFill: return masked_fill_backward(node, grad);
    case GradOp::Fill: return fill_backward(node, grad);
    case GradOp::Copy: return copy_backward(node, grad);
    case GradOp::ToCopy: return to_copy_backward(node, grad);
    case GradOp::Clone: return clone_backward(node, grad);
    case GradOp::Sum: return sum_backward(node, grad);
    case GradOp::Mean: return mean_backward(node, grad);
    case GradOp::Prod: return prod_backward(node, grad);
    case GradOp::MaxAll:
    case GradOp::MinAll:
    case GradOp::Amax:
    case GradOp::Amin: return max_min_backward(node, grad);
    case GradOp::MaxDim:
    case GradOp::MinDim: return max_min_dim_backward(node, grad);
    case GradOp::Var: return var_backward(node, grad);
    case GradOp::Std: return std_backward(node, grad);
    case GradOp::Norm: return norm_backward(node, grad);
    case GradOp::LogSumExp: return logsumexp_backward(node, grad);
    case GradOp::Softmax: return softmax_backward(node, grad);
    case GradOp::LogSoftmax: return log_softmax_backward(node, grad);
    case GradOp::View:
    case GradOp::Squeeze:
    case GradOp::SqueezeDim:
    case GradOp::Unsqueeze: return view_backward(node, grad);
    case GradOp::Permute: return permute_backward(node, grad);
    case GradOp::Transpose:
    case GradOp::T: return transpose_backward(node, grad);
    case GradOp::Expand: return expand_backward(node, grad);
    case GradOp::Slice: return slice_backward(node, grad);
    case GradOp::Select: return select_backward(node, grad);
    case GradOp::AsStrided: return as_strided_backward(node, grad);
    case GradOp::CopySlices: return copy_slices_backward(node, grad);
    case GradOp::Cat: return cat_backward(node, grad);
    case GradOp::Stack: return stack_backward(node, grad);
    case GradOp::Gather: return gather_backward(node, grad);
    case GradOp::ScatterAdd: return scatter_add_backward(node, grad);
    case GradOp::IndexSelect: return index_select_backward(node, grad);
    case GradOp::Mm: return mm_backward(node, grad);
    case GradOp::Bmm: return bmm_backward(node, grad);
    case GradOp::Matmul: return matmul_backward(node, grad);
    case GradOp::Convolution: return convolution_backward(node, grad);
    case GradOp::MaxPool2d: return max_pool2d_backward(node, grad);
    case GradOp::AvgPool2d: return avg_pool2d_backward(node, grad);
    case GradOp::AdaptiveAvgPool2d: return adaptive_avg_pool2d_backward(node, grad);
    case GradOp::BatchNorm: return batch_norm_backward(node, grad);
    case GradOp::LayerNorm: return layer_norm_backward(node, grad);
    case GradOp::Embedding: return embedding_backward(node, grad);
  }
  TANDEM_INTERNAL_ASSERT(false, "no derivative rule for ", node.name());
  return {};
}

}  // namespace tandem::autograd

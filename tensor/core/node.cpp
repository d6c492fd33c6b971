// The graph's node: its name by op (PyTorch's node names), the order in
// which nodes are made (backward runs later ones first), and releasing what
// it saved.
#include <atomic>

#include "tensor/core/autograd_meta.h"

namespace tandem::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}  // namespace

const char* grad_op_name(GradOp op) {
  switch (op) {
    case GradOp::AccumulateGrad: return "AccumulateGrad";
#define X(Name, name, dtypes, keeps, Params, backward, node_name) \
  case GradOp::Name: return node_name;
      TANDEM_UNARY_OPS(X)
#undef X
#define X(Name, name, node_name) \
  case GradOp::Name: return node_name;
      TANDEM_ARITHMETIC_OPS(X)
#undef X
    case GradOp::Where: return "WhereBackward0";
    case GradOp::MaskedFill: return "MaskedFillBackward0";
    case GradOp::Fill: return "FillBackward0";
    case GradOp::Copy: return "CopyBackwards";
    case GradOp::ToCopy: return "ToCopyBackward0";
    case GradOp::Clone: return "CloneBackward0";
    case GradOp::Sum: return "SumBackward0";
    case GradOp::Mean: return "MeanBackward0";
    case GradOp::Prod: return "ProdBackward0";
    case GradOp::MaxAll: return "MaxBackward1";
    case GradOp::MinAll: return "MinBackward1";
    case GradOp::MaxDim: return "MaxBackward0";
    case GradOp::MinDim: return "MinBackward0";
    case GradOp::Amax: return "AmaxBackward0";
    case GradOp::Amin: return "AminBackward0";
    case GradOp::Var: return "VarBackward0";
    case GradOp::Std: return "StdBackward0";
    case GradOp::Norm: return "NormBackward1";
    case GradOp::LogSumExp: return "LogsumexpBackward0";
    case GradOp::Softmax: return "SoftmaxBackward0";
    case GradOp::LogSoftmax: return "LogSoftmaxBackward0";
    case GradOp::View: return "ViewBackward0";
    case GradOp::Squeeze: return "SqueezeBackward0";
    case GradOp::SqueezeDim: return "SqueezeBackward1";
    case GradOp::Unsqueeze: return "UnsqueezeBackward0";
    case GradOp::Permute: return "PermuteBackward0";
    case GradOp::Transpose: return "TransposeBackward0";
    case GradOp::T: return "TBackward0";
    case GradOp::Expand: return "ExpandBackward0";
    case GradOp::Slice: return "SliceBackward0";
    case GradOp::Select: return "SelectBackward0";
    case GradOp::AsStrided: return "AsStridedBackward0";
    case GradOp::CopySlices: return "CopySlices";
    case GradOp::Cat: return "CatBackward0";
    case GradOp::Stack: return "StackBackward0";
    case GradOp::Gather: return "GatherBackward0";
    case GradOp::ScatterAdd: return "ScatterAddBackward0";
    case GradOp::IndexSelect: return "IndexSelectBackward0";
    case GradOp::Mm: return "MmBackward0";
    case GradOp::Bmm: return "BmmBackward0";
    case GradOp::Matmul: return "MatmulBackward0";
    case GradOp::Convolution: return "ConvolutionBackward0";
    case GradOp::MaxPool2d: return "MaxPool2DWithIndicesBackward0";
    case GradOp::AvgPool2d: return "AvgPool2DBackward0";
    case GradOp::AdaptiveAvgPool2d: return "AdaptiveAvgPool2DBackward0";
    case GradOp::BatchNorm: return "NativeBatchNormBackward0";
    case GradOp::LayerNorm: return "NativeLayerNormBackward0";
    case GradOp::Embedding: return "EmbeddingBackward0";
  }
  return "?";
}

Node::Node(GradOp op) : op(op), sequence_nr(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

void Node::release_saved() {
  for (auto& s : saved) s.release();
  released_ = true;
}

}  // namespace tandem::autograd

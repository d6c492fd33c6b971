// The autograd graph's data, in core so that ops can record it without
// knowing the engine: a Node per recorded op (which op, its saved tensors and
// parameters, an Edge to the node of each input), and the AutogradMeta a
// tensor carries (requires_grad, grad, grad_fn). The derivative rules and the
// engine that interpret Nodes live above the ops, in autograd/.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tensor/core/errors.h"
#include "tensor/core/op_table.h"
#include "tensor/core/tensor.h"

namespace tandem::autograd {

// Every differentiable op, one value per derivative rule (autograd/rules*.cpp
// switch over it without a default). Names follow PyTorch's node names. The
// elementwise values come from the op table (tensor/core/op_table.h): one per
// UnaryOp, then one per arithmetic BinaryOp, in their order.
enum class GradOp : uint8_t {
  AccumulateGrad,  // a leaf's grad accumulator (the node's `variable`)
#define X(Name, ...) Name,
  TANDEM_UNARY_OPS(X) TANDEM_ARITHMETIC_OPS(X)
#undef X
  // elementwise, besides the table's (tensor/ops/elementwise.cpp, convert.cpp)
  Where,
  MaskedFill,
  Fill,    // fill_, zero_: the old values get no gradient
  Copy,    // copy_: dst's old values get none, src gets grad (to its dtype and device)
  ToCopy,  // .to(device / dtype): grad goes back to the input's device and dtype
  Clone,   // clone, contiguous
  // reductions (tensor/ops/reduce.cpp)
  Sum,
  Mean,
  Prod,
  MaxAll,
  MinAll,
  MaxDim,
  MinDim,
  Amax,
  Amin,
  Var,
  Std,
  Norm,
  LogSumExp,
  Softmax,
  LogSoftmax,
  // views (tensor/ops/views.cpp)
  View,        // view, reshape, flatten
  Squeeze,     // squeeze()
  SqueezeDim,  // squeeze(dim)
  Unsqueeze,
  Permute,
  Transpose,
  T,  // t(): a transpose, under PyTorch's name
  Expand,
  Slice,  // slice, narrow, split, chunk
  Select,
  AsStrided,   // a view whose base's history changed: payload = its ViewGeometry
  CopySlices,  // an in-place op on a view, seen from its base: next = (old base, the op's node)
  // joins, indexing, matrix products (shape_ops.cpp, index.cpp, linalg.cpp)
  Cat,
  Stack,
  Gather,
  ScatterAdd,
  IndexSelect,
  Mm,
  Bmm,
  Matmul,
  // layers (tensor/ops/conv.cpp, pool.cpp: autograd/rules_conv.cpp)
  Convolution,
  MaxPool2d,
  AvgPool2d,
  AdaptiveAvgPool2d,
  // normalisation and lookup (tensor/ops/norm.cpp: autograd/rules_norm.cpp)
  BatchNorm,
  LayerNorm,
  Embedding,
};

// The node of a unary or arithmetic binary op, and back.
constexpr GradOp grad_op(UnaryOp op) { return static_cast<GradOp>(1 + static_cast<int>(op)); }
constexpr GradOp grad_op(BinaryOp op) {  // is_arithmetic(op)
  return static_cast<GradOp>(1 + kUnaryOpCount + static_cast<int>(op));
}
constexpr bool is_unary(GradOp op) { return static_cast<int>(op) >= 1 && static_cast<int>(op) < 1 + kUnaryOpCount; }
constexpr bool is_arithmetic(GradOp op) {
  return static_cast<int>(op) >= 1 + kUnaryOpCount && static_cast<int>(op) < 1 + kUnaryOpCount + kArithmeticOpCount;
}
constexpr UnaryOp unary_op(GradOp op) { return static_cast<UnaryOp>(static_cast<int>(op) - 1); }
constexpr BinaryOp binary_op(GradOp op) { return static_cast<BinaryOp>(static_cast<int>(op) - 1 - kUnaryOpCount); }
static_assert(grad_op(UnaryOp::Clamp) == GradOp::Clamp && grad_op(BinaryOp::Minimum) == GradOp::Minimum &&
              static_cast<int>(GradOp::Where) == 1 + kUnaryOpCount + kArithmeticOpCount);

const char* grad_op_name(GradOp op);  // "MulBackward0"

class Node;

// The node that receives the gradient of one input, and which of its
// outputs that input was. An edge without a node: no gradient wanted.
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// What the engine needs to fit a gradient to its input: it sums a broadcast
// gradient back to sizes and converts it to dtype; device must match.
struct InputMeta {
  Shape sizes;
  Dtype dtype = kFloat32;
  Device device{kCPU};
};

// A tensor kept for backward, with the version of its storage at saving
// time: a changed version at unpack time means an in-place op overwrote it.
// It keeps the data as an alias without autograd metadata, and its history
// apart, as PyTorch's SavedVariable: the grad_fn of a computed input, a weak
// reference to a leaf, nothing for the op's own output (the node itself).
// A full handle would make cycles: the output holds the node; a leaf's
// .grad() made with create_graph holds the graph that saved the leaf.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output);
  // The tensor as saved. Throws if the graph was freed by a backward pass or
  // if the tensor was modified in place since. owner: the node unpacking.
  Tensor unpack(const std::shared_ptr<Node>& owner) const;
  void release();
  bool defined() const { return defined_; }

 private:
  Tensor data_;                     // no autograd metadata
  std::shared_ptr<Node> grad_fn_;   // a computed input's grad_fn when saved
  std::weak_ptr<TensorImpl> leaf_;  // a leaf input that requires grad
  uint64_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool defined_ = false;
  bool is_output_ = false;
  bool requires_grad_ = false;
  bool released_ = false;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(GradOp op);

  GradOp op;
  uint64_t sequence_nr;           // creation order: later nodes run first in backward
  std::vector<Edge> next_edges;   // one per differentiable input
  std::vector<InputMeta> inputs;  // one per next edge
  std::vector<SavedTensor> saved;
  // The op's parameters as its struct, read back with params<P>(): the op
  // table's UnaryParams, Conv2dParams, SliceParams, ... (which node keeps
  // which: tensor/core/node_params.h). Empty for an op without any.
  std::any payload;
  // AccumulateGrad: the leaf, held weakly. A strong handle would close a
  // cycle (leaf -> .grad() with history -> its graph -> accumulator -> leaf)
  // after backward(create_graph=true), which PyTorch only warns about; and a
  // gradient for a leaf nobody holds any more could never be read anyway.
  std::weak_ptr<TensorImpl> variable;
  // Outputs whose gradient is kept in their .grad() (retain_grad()).
  std::vector<std::weak_ptr<TensorImpl>> retained;

  const char* name() const { return grad_op_name(op); }
  template <typename P>
  const P& params() const {
    const P* p = std::any_cast<P>(&payload);
    TANDEM_INTERNAL_ASSERT(p != nullptr, name(), ": the node's parameters are missing or of another type");
    return *p;
  }
  bool needs_input_grad(size_t i) const { return i < next_edges.size() && next_edges[i].valid(); }
  // The i-th saved tensor, checked (see SavedTensor::unpack).
  Tensor saved_tensor(size_t i) { return saved.at(i).unpack(shared_from_this()); }
  void release_saved();
  bool saved_released() const { return released_; }

 private:
  bool released_ = false;
};

// Autograd state of one tensor, created on first need.
struct AutogradMeta {
  bool requires_grad = false;  // leaves; a non-leaf requires grad through its grad_fn
  bool retains_grad = false;
  uint32_t output_nr = 0;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;         // null for leaves
  std::weak_ptr<Node> grad_accumulator;  // leaves: the AccumulateGrad node, while a graph holds it
  // Bumped whenever an in-place op gives this tensor (a view's base) a new
  // grad_fn; views compare it with TensorImpl::view_base_history.
  uint64_t history = 0;
  // Leaves: called by the engine after a pass accumulated into .grad(), with
  // the leaf (PyTorch's register_post_accumulate_grad_hook), in the order
  // registered; keyed by the handle that removes them (autograd/hooks.h).
  std::vector<std::pair<uint64_t, std::function<void(Tensor&)>>> post_accumulate_grad_hooks;
};

}  // namespace tandem::autograd

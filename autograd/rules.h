// Derivative rules: for a node and the gradient of its output, the gradient
// of each input (undefined where the input needs none). Written with tensor
// ops only, so they run on every device, and are themselves recorded when
// the engine runs with create_graph (higher-order gradients).
#pragma once

#include <vector>

#include "tensor/core/autograd_meta.h"

namespace tandem::autograd {

using GradList = std::vector<Tensor>;

// Dispatches on node.op to the family below.
GradList apply_rule(Node& node, const Tensor& grad);

// rules_elementwise.cpp: the op table's unary and arithmetic binary ops (each
// a switch without default, built with -Werror=switch: an op of the table
// without a derivative does not compile), and the other elementwise ops.
GradList unary_backward(UnaryOp op, Node& node, const Tensor& grad);
GradList binary_backward(BinaryOp op, Node& node, const Tensor& grad);
GradList elementwise_backward(Node& node, const Tensor& grad);
GradList reduce_backward(Node& node, const Tensor& grad);  // rules_reduce.cpp
GradList view_backward(Node& node, const Tensor& grad);    // rules_views.cpp
GradList index_backward(Node& node, const Tensor& grad);   // rules_index.cpp: joins, indexing, matrix products
GradList conv_backward(Node& node, const Tensor& grad);    // rules_conv.cpp: convolution, pooling
GradList norm_backward(Node& node, const Tensor& grad);    // rules_norm.cpp: batch and layer norm, embedding

}  // namespace tandem::autograd

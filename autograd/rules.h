// Derivative rules: for a node and the gradient of its output, the gradient
// of each input (undefined where the input needs none). Written with tensor
// ops only, so they run on every device, and are themselves recorded when
// the engine runs with create_graph (higher-order gradients). Each rule reads
// the parameters its op's front end stored with node.params<P>()
// (tensor/core/node_params.h).
#pragma once

#include <vector>

#include "tensor/core/autograd_meta.h"

namespace tandem::autograd {

using GradList = std::vector<Tensor>;

// Calls node.op's rule below: one switch naming every GradOp, without a
// default, built with -Wswitch as an error: a GradOp without its rule does
// not compile.
GradList apply_rule(Node& node, const Tensor& grad);

// rules_elementwise.cpp: the op table's unary and arithmetic binary ops (each
// a switch over UnaryOp or BinaryOp without default: an op of the table
// without a derivative does not compile), and the other elementwise ops.
GradList unary_backward(UnaryOp op, Node& node, const Tensor& grad);
GradList binary_backward(BinaryOp op, Node& node, const Tensor& grad);
GradList where_backward(Node& node, const Tensor& grad);
GradList masked_fill_backward(Node& node, const Tensor& grad);
GradList fill_backward(Node& node, const Tensor& grad);
GradList copy_backward(Node& node, const Tensor& grad);
GradList to_copy_backward(Node& node, const Tensor& grad);
GradList clone_backward(Node& node, const Tensor& grad);

// rules_reduce.cpp: reductions and softmax.
GradList sum_backward(Node& node, const Tensor& grad);
GradList mean_backward(Node& node, const Tensor& grad);
GradList prod_backward(Node& node, const Tensor& grad);
GradList max_min_backward(Node& node, const Tensor& grad);      // MaxAll, MinAll, Amax, Amin
GradList max_min_dim_backward(Node& node, const Tensor& grad);  // MaxDim, MinDim
GradList var_backward(Node& node, const Tensor& grad);
GradList std_backward(Node& node, const Tensor& grad);
GradList norm_backward(Node& node, const Tensor& grad);
GradList logsumexp_backward(Node& node, const Tensor& grad);
GradList softmax_backward(Node& node, const Tensor& grad);
GradList log_softmax_backward(Node& node, const Tensor& grad);

// rules_views.cpp: views, and the nodes of in-place ops on views.
GradList view_backward(Node& node, const Tensor& grad);  // View, Squeeze, SqueezeDim, Unsqueeze
GradList permute_backward(Node& node, const Tensor& grad);
GradList transpose_backward(Node& node, const Tensor& grad);  // Transpose, T
GradList expand_backward(Node& node, const Tensor& grad);
GradList slice_backward(Node& node, const Tensor& grad);
GradList select_backward(Node& node, const Tensor& grad);
GradList as_strided_backward(Node& node, const Tensor& grad);
GradList copy_slices_backward(Node& node, const Tensor& grad);

// rules_index.cpp: joins, indexing, matrix products.
GradList cat_backward(Node& node, const Tensor& grad);
GradList stack_backward(Node& node, const Tensor& grad);
GradList gather_backward(Node& node, const Tensor& grad);
GradList scatter_add_backward(Node& node, const Tensor& grad);
GradList index_select_backward(Node& node, const Tensor& grad);
GradList mm_backward(Node& node, const Tensor& grad);
GradList bmm_backward(Node& node, const Tensor& grad);
GradList matmul_backward(Node& node, const Tensor& grad);

// rules_conv.cpp: convolution, pooling.
GradList convolution_backward(Node& node, const Tensor& grad);
GradList max_pool2d_backward(Node& node, const Tensor& grad);
GradList avg_pool2d_backward(Node& node, const Tensor& grad);
GradList adaptive_avg_pool2d_backward(Node& node, const Tensor& grad);

// rules_norm.cpp: batch and layer norm, embedding.
GradList batch_norm_backward(Node& node, const Tensor& grad);
GradList layer_norm_backward(Node& node, const Tensor& grad);
GradList embedding_backward(Node& node, const Tensor& grad);

}  // namespace tandem::autograd

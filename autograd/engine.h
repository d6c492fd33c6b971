// The backward engine: walks the graph from the roots in dependency order
// (later nodes first), runs each node's derivative rule, sums the gradients
// that meet at a node, and either accumulates them into the leaves' .grad()
// or hands back the gradients of chosen tensors (autograd::grad).
#pragma once

#include <vector>

#include "tensor/core/autograd_meta.h"

namespace tandem::autograd {

struct BackwardOptions {
  bool keep_graph = false;    // keep saved tensors for another pass
  bool create_graph = false;  // record the rules themselves (higher-order gradients)
  // Run autograd::queue_callback's callbacks at the end of this pass; off
  // when the caller has a scope of its own that ends later
  // (autograd::backward with inputs accumulates after the pass).
  bool own_callbacks = true;
};

// Seeds each root edge with its gradient and runs the pass. With `capture`
// empty, gradients reaching leaves accumulate into their .grad(); otherwise
// nothing accumulates and the gradient reaching each captured edge is
// returned (undefined where none reached it), running only the nodes needed.
std::vector<Tensor> run_backward(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads,
                                 const BackwardOptions& options, const std::vector<Edge>& capture = {});

// slot (a .grad()) += g, as PyTorch's AccumulateGrad: the first gradient is
// kept as is when nobody else holds it (else cloned), later ones are added in
// place; with grad mode on (create_graph) the sum is recorded instead, so
// .grad() has history.
void accumulate_grad(Tensor& slot, const Tensor& g);

// The gradient g of a tensor broadcast to g's shape, summed back to sizes.
Tensor sum_to(const Tensor& g, IntArrayRef sizes);

}  // namespace tandem::autograd

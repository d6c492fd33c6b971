// The public autograd functions, as libtorch's torch::autograd: backward over
// several roots, and grad(), which returns gradients instead of accumulating
// them (with create_graph, for higher-order derivatives). Tensor::backward
// and the grad modes (NoGradGuard, EnableGradGuard) are in tensor.h and
// tensor/core/grad_mode.h.
#pragma once

#include <optional>
#include <vector>

#include "tensor/core/autograd_meta.h"
#include "tensor/core/grad_mode.h"

namespace tandem::autograd {

// Accumulates d(sum_i <tensors[i], grad_tensors[i]>)/d(leaf) into every leaf's
// .grad() (or only into `inputs` when given). A grad_tensors entry may be
// left undefined for a one-element tensor (it is then 1). retain_graph
// defaults to create_graph.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const std::vector<Tensor>& inputs = {});

// The gradients of the outputs with respect to each input, without touching
// any .grad(). With create_graph the results have history and can be
// differentiated again. An input the outputs do not depend on is an error
// unless allow_unused (its result is then undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

}  // namespace tandem::autograd

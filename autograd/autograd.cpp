// autograd::backward, autograd::grad and Tensor::backward: the checks on the
// roots and their gradients, then one engine pass.
#include "autograd/autograd.h"

#include "autograd/engine.h"
#include "autograd/hooks.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/factory.h"

namespace tandem::autograd {

namespace {

// The roots' edges and seed gradients, checked as PyTorch's _make_grads.
void make_roots(const char* op, const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                std::vector<Edge>& edges, std::vector<Tensor>& grads) {
  TANDEM_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), ValueError, op, ": got ",
               grad_outputs.size(), " gradients for ", outputs.size(), " tensors; give one per tensor (or none)");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    TANDEM_CHECK(out.defined(), ValueError, op, ": tensor ", i, " is undefined");
    TANDEM_CHECK(out.requires_grad(), ValueError, op, ": element ", i,
                 " of tensors does not require grad and does not have a grad_fn. Make a leaf with "
                 "requires_grad(true) (or .requires_grad_()), and compute outside any NoGradGuard");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (g.defined()) {
      check_same_device(op, {{"tensor", out}, {"gradient", g}});
      TANDEM_CHECK(g.sizes() == out.sizes(), ShapeError, op, ": mismatch in shape: grad_output[", i,
                   "] has a shape of ", shape_str(g.sizes()), " and output[", i, "] has a shape of ",
                   shape_str(out.sizes()));
      TANDEM_CHECK(g.is_floating_point(), DtypeError, op, ": grad_output[", i, "] must be floating point, got ",
                   dtype_name(g.dtype()));
    } else {
      TANDEM_CHECK(out.numel() == 1, ValueError, op,
                   ": grad can be implicitly created only for scalar outputs (tensor ", i, " has shape ",
                   shape_str(out.sizes()), "); pass a gradient of that shape");
      g = ones(out.sizes(), out.options());
    }
    edges.push_back(gradient_edge(out));
    grads.push_back(std::move(g));
  }
}

std::vector<Edge> input_edges(const char* op, const std::vector<Tensor>& inputs) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TANDEM_CHECK(inputs[i].defined(), ValueError, op, ": input ", i, " is undefined");
    TANDEM_CHECK(inputs[i].requires_grad(), ValueError, op, ": one of the differentiated tensors (input ", i,
                 ") does not require grad");
    edges.push_back(gradient_edge(inputs[i]));
  }
  return edges;
}

}  // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  make_roots("backward", tensors, grad_tensors, roots, grads);
  BackwardOptions options{retain_graph.value_or(create_graph), create_graph};
  if (inputs.empty()) {
    run_backward(roots, grads, options);
    return;
  }
  // The inputs accumulate after the pass: every callback runs here, after them.
  detail::CallbackScope callbacks;
  options.own_callbacks = false;
  std::vector<Tensor> results = run_backward(roots, grads, options, input_edges("backward", inputs));
  AutoGradMode mode(create_graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!results[i].defined()) continue;
    accumulate_grad(inputs[i].mutable_grad(), results[i]);
    if (inputs[i].is_leaf()) {
      Tensor leaf = inputs[i];
      detail::run_post_accumulate_grad_hooks(leaf);
    }
  }
  callbacks.run();
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  make_roots("autograd::grad", outputs, grad_outputs, roots, grads);
  std::vector<Edge> capture = input_edges("autograd::grad", inputs);
  BackwardOptions options{retain_graph.value_or(create_graph), create_graph};
  std::vector<Tensor> results = run_backward(roots, grads, options, capture);
  for (size_t i = 0; i < results.size(); ++i) {
    TANDEM_CHECK(results[i].defined() || allow_unused, ValueError,
                 "autograd::grad: one of the differentiated "
                 "tensors (input ",
                 i,
                 ") appears to not have been used in the graph. Set allow_unused=true if this "
                 "is the desired behavior");
    // Without create_graph the results carry no history.
    if (results[i].defined() && !create_graph && results[i].requires_grad()) results[i] = results[i].detach();
  }
  return results;
}

}  // namespace tandem::autograd

namespace tandem {

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph,
                      const std::vector<Tensor>& inputs) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph, inputs);
}

}  // namespace tandem

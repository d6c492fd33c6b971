// The backward engine (see engine.h). One pass runs on the calling thread;
// each rule's ops run on the current stream of their tensors' device.
#include "autograd/engine.h"

#include <algorithm>
#include <optional>
#include <queue>
#include <unordered_map>

#include "autograd/hooks.h"
#include "autograd/rules.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace tandem::autograd {

Tensor sum_to(const Tensor& g, IntArrayRef sizes) {
  if (g.sizes() == sizes) return g;
  int64_t lead = g.dim() - static_cast<int64_t>(sizes.size());
  Shape dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (sizes[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? g : g.sum(dims, /*keepdim=*/true);
  return r.view(sizes);
}

namespace {

bool expandable_to(IntArrayRef from, IntArrayRef to) {
  if (from.size() > to.size()) return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// Fits a rule's gradient for input i to that input: the broadcast sum, the
// dtype; a device mismatch is a broken rule.
Tensor fit(Tensor g, const Node& node, size_t i) {
  const InputMeta& m = node.inputs[i];
  if (g.sizes() != IntArrayRef(m.sizes)) {
    TANDEM_INTERNAL_ASSERT(expandable_to(m.sizes, g.sizes()), "node ", node.name(),
                           " returned an invalid gradient at index ", i, ": got shape ", shape_str(g.sizes()),
                           " but expected shape compatible with ", shape_str(m.sizes));
    g = sum_to(g, m.sizes);
  }
  TANDEM_INTERNAL_ASSERT(g.device() == m.device, "node ", node.name(), " returned a gradient at index ", i, " on ",
                         g.device().str(), " for an input on ", m.device.str());
  if (g.dtype() != m.dtype) g = g.to(m.dtype);
  return g;
}

// Nobody else holds g or its memory: it may become a .grad() as it is.
bool alone(const Tensor& g) { return g.use_count() == 1 && g.storage().use_count() == 1; }

}  // namespace

void accumulate_grad(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    // A gradient shared with another leaf (an add's two inputs get the same
    // tensor) is cloned, so that adding into one never changes the other.
    if (GradMode::is_enabled())
      slot = alone(g) ? g : g.clone();
    else
      slot = alone(g) && !g.requires_grad() ? alias_without_history(g) : g.detach().clone();
    return;
  }
  // Out of place when recording, and for a .grad() that has history (made
  // by a create_graph pass): it may be shared with that graph.
  if (GradMode::is_enabled() || slot.requires_grad()) {
    slot = slot + g;
  } else {
    slot.add_(g);
  }
}

namespace {

struct Order {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

}  // namespace

std::vector<Tensor> run_backward(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads,
                                 const BackwardOptions& options, const std::vector<Edge>& capture) {
  TANDEM_INTERNAL_ASSERT(roots.size() == root_grads.size());
  // Dependencies: how many edges of the graph point at each node.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> order;  // every reachable node, parents before children
  {
    std::vector<Node*> stack;
    for (const Edge& e : roots)
      if (e.valid() && deps.emplace(e.fn.get(), 0).second) stack.push_back(e.fn.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        auto [it, fresh] = deps.emplace(e.fn.get(), 0);
        ++it->second;
        if (fresh) stack.push_back(e.fn.get());
      }
    }
  }
  // With capture, a node runs only when a captured edge lies below it.
  std::unordered_map<Node*, bool> needed;
  std::unordered_map<Node*, std::vector<size_t>> captured_at;  // node -> capture indices
  for (size_t i = 0; i < capture.size(); ++i)
    if (capture[i].valid()) captured_at[capture[i].fn.get()].push_back(i);
  if (!capture.empty()) {
    // Kahn's order, then a reverse sweep: a node is needed if it is captured
    // or one of its children is.
    std::unordered_map<Node*, int> left = deps;
    std::vector<Node*> topo;
    std::vector<Node*> ready;
    for (Node* n : order)
      if (left[n] == 0) ready.push_back(n);
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      topo.push_back(n);
      for (const Edge& e : n->next_edges)
        if (e.valid() && --left[e.fn.get()] == 0) ready.push_back(e.fn.get());
    }
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      Node* n = *it;
      bool need = captured_at.count(n) > 0;
      for (const Edge& e : n->next_edges) need = need || (e.valid() && needed[e.fn.get()]);
      needed[n] = need;
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto add_to_buffer = [&](const Edge& e, const Tensor& g) {
    std::vector<Tensor>& buf = buffers[e.fn.get()];
    if (buf.size() <= e.input_nr) buf.resize(e.input_nr + 1);
    Tensor& slot = buf[e.input_nr];
    slot = slot.defined() ? slot + g : g;
  };
  for (size_t i = 0; i < roots.size(); ++i)
    if (roots[i].valid() && root_grads[i].defined()) add_to_buffer(roots[i], root_grads[i]);

  std::vector<Tensor> results(capture.size());
  std::priority_queue<Node*, std::vector<Node*>, Order> ready;
  for (auto& [n, d] : deps)
    if (d == 0) ready.push(n);
  AutoGradMode mode(options.create_graph);
  std::optional<detail::CallbackScope> callbacks;  // autograd::queue_callback's, run once every node has
  if (options.own_callbacks) callbacks.emplace();
  // Backward ops run in the dtypes the forward's were run in (the saved
  // tensors' and the gradients'), not cast again: autocast is off here.
  autocast::detail::Excluded no_autocast;
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads;
    if (auto it = buffers.find(n); it != buffers.end()) {
      grads = std::move(it->second);
      buffers.erase(it);
    }
    auto release_children = [&]() {
      for (const Edge& e : n->next_edges)
        if (e.valid() && --deps[e.fn.get()] == 0) ready.push(e.fn.get());
    };
    if (auto it = captured_at.find(n); it != captured_at.end()) {
      for (size_t i : it->second) {
        uint32_t slot = capture[i].input_nr;
        if (slot < grads.size()) results[i] = grads[slot];
      }
    }
    for (size_t k = 0; k < n->retained.size() && k < grads.size(); ++k) {
      if (auto impl = n->retained[k].lock(); impl && grads[k].defined()) {
        Tensor t(impl);
        accumulate_grad(t.mutable_grad(), grads[k]);
      }
    }
    bool any = std::any_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); });
    if (n->op == GradOp::AccumulateGrad) {
      if (auto leaf = n->variable.lock(); leaf && capture.empty() && any) {
        Tensor t(leaf);
        accumulate_grad(t.mutable_grad(), fit(std::move(grads[0]), *n, 0));
        detail::run_post_accumulate_grad_hooks(t);
      }
      continue;
    }
    if (!capture.empty() && !needed[n]) {
      release_children();
      continue;
    }
    if (any) {
      TANDEM_INTERNAL_ASSERT(grads.size() == 1, "node ", n->name(), " has more than one output");
      GradList out = apply_rule(*n, grads[0]);
      TANDEM_INTERNAL_ASSERT(out.size() == n->next_edges.size(), "node ", n->name(), " returned ", out.size(),
                             " gradients for ", n->next_edges.size(), " inputs");
      if (!options.keep_graph) n->release_saved();
      for (size_t i = 0; i < out.size(); ++i) {
        const Edge& e = n->next_edges[i];
        if (e.valid() && out[i].defined()) add_to_buffer(e, fit(std::move(out[i]), *n, i));
      }
    } else if (!options.keep_graph) {
      n->release_saved();
    }
    release_children();
  }
  if (callbacks) callbacks->run();
  return results;
}

}  // namespace tandem::autograd

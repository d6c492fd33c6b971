// The record hook: how an op front end adds itself to the autograd graph.
//
//   Tensor exp(const Tensor& x) {
//     autograd::Recorder rec(autograd::GradOp::Exp, {x});  // records only if grad mode is on and x requires grad
//     Tensor out = ...compute...;                          // grad mode is off inside, while recording
//     if (rec) rec.save_output(out);                       // what the rule needs
//     return rec.finish(out);                              // out.grad_fn() = the node
//   }
//
// In-place ops call check_inplace first and finish_inplace last.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <vector>

#include "tensor/core/autograd_meta.h"
#include "tensor/core/grad_mode.h"

namespace tandem::autograd {

// The edge through which gradient reaches t: its grad_fn, its leaf's
// accumulator (made on first use), or none when t does not require grad.
Edge gradient_edge(const Tensor& t);

// The tensor's metadata, created if missing.
AutogradMeta& meta_of(const Tensor& t);

class Recorder {
 public:
  using Inputs = std::initializer_list<std::reference_wrapper<const Tensor>>;
  // Records when grad mode is on and a defined input requires grad. The
  // inputs are the op's differentiable arguments, in the order of the rule.
  Recorder(GradOp op, Inputs inputs);
  Recorder(GradOp op, const std::vector<Tensor>& inputs);
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  explicit operator bool() const { return node_ != nullptr; }
  Node& node() { return *node_; }
  // Keeps t (an input, or a non-differentiable argument such as an index)
  // for the rule; its version is checked when the rule runs.
  void save(const Tensor& t);
  // For in-place ops, before the write: keeps a clone of self's current
  // value, itself recorded (a Clone node on self's old history) so that
  // double backward can differentiate through it. Returns the clone.
  Tensor save_original(const Tensor& self);
  // Keeps an output of this op (saved without a reference cycle).
  void save_output(const Tensor& out);
  // Makes the node out's grad_fn (not for integer results, which have no
  // gradient); returns out. Ends the recording: grad mode is back as the
  // op found it, so a view the op takes of out afterwards records itself.
  // The finish calls are the op's last steps.
  const Tensor& finish(const Tensor& out);
  // For view ops (out made by detail::make_view, which records its base).
  const Tensor& finish_view(const Tensor& out, const Tensor& input);
  // For in-place ops: self's history continues through the node. For a view,
  // its base's history is updated too (a CopySlices node).
  void finish_inplace(const Tensor& self);

 private:
  void init(GradOp op, const Tensor* const* inputs, size_t n);
  std::shared_ptr<Node> node_;
  std::optional<AutoGradMode> no_grad_;
};

// Before an in-place op writes self (op: "mul_"): refuses a leaf that requires
// grad, or a view of one, while grad mode is on (PyTorch's rule).
// suffix follows op in the message ("add" + "_").
void check_inplace(const Tensor& self, const char* op, const char* suffix = "");

// An alias of t (same storage and geometry) without autograd metadata.
Tensor alias_without_history(const Tensor& t);

// Makes view (a fresh view of input's memory) remember input's base, for
// in-place ops on either later. detail::make_view calls it for every view.
void note_view(const Tensor& view, const Tensor& input);

}  // namespace tandem::autograd

// gradcheck: compares the gradients autograd computes with central finite
// differences, element by element, as torch.autograd.gradcheck. Use float64
// inputs: in float32 the differences are too coarse to check anything.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensor/core/tensor.h"

namespace tandem::autograd {

struct GradcheckOptions {
  double eps = 1e-6;   // the finite-difference step
  double atol = 1e-5;  // pass when |analytical - numerical| <= atol + rtol * |numerical|
  double rtol = 1e-3;
};

using GradcheckFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// The full Jacobian of fn's outputs with respect to every input that requires
// grad, both ways: one backward pass per output element, two forward passes
// per input element (perturbed in place, so inputs may be non-contiguous views
// of leaves). Returns an empty string when they agree, else a report of the
// first mismatches.
std::string gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

// The same for the first derivatives: checks d/d(inputs) of
// autograd::grad(fn(inputs), inputs, v, create_graph=true) for a fixed random v,
// which exercises every rule's own backward (double backward).
std::string gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace tandem::autograd

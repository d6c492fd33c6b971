// Derivative rules (placeholder until this family lands).
#include "autograd/rules.h"

namespace tandem::autograd {

GradList reduce_backward(Node& node, const Tensor&) {
  throw NotImplementedError(detail::str_cat("the derivative for ", node.name(), " is not implemented yet"));
}

}  // namespace tandem::autograd

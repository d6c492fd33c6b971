// Derivative rules of the conv family (see autograd/rules.h).
#include "autograd/rules.h"

namespace tandem::autograd {

GradList conv_backward(Node& node, const Tensor&) {
  TANDEM_INTERNAL_ASSERT(false, "no derivative rule for ", node.name());
  return {};
}

}  // namespace tandem::autograd

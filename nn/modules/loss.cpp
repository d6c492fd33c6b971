// The loss modules: buffers for the weights, forward through nn::functional.
#include "nn/modules/loss.h"

#include "nn/functional/loss.h"

namespace tandem::nn {

namespace {

// The module's own tensor for a weight the caller gave: a new tensor sharing
// its storage, so that to() (which moves buffers in place) moves and relabels
// the module's buffer, never the caller's tensor, as PyTorch's module.to()
// leaves the tensor it was given where it was. Undefined stays undefined.
Tensor own(const Tensor& given) { return given.defined() ? given.detach() : Tensor(); }

}  // namespace

// ---- CrossEntropyLoss

CrossEntropyLossImpl::CrossEntropyLossImpl(const CrossEntropyLossOptions& options_) : options(options_) {
  weight = register_buffer("weight", own(options.weight()));
  options.weight(weight);
}

Tensor CrossEntropyLossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::cross_entropy(input, target,
                                   functional::CrossEntropyFuncOptions()
                                       .weight(weight)
                                       .ignore_index(options.ignore_index())
                                       .reduction(options.reduction())
                                       .label_smoothing(options.label_smoothing()));
}

// PyTorch prints a loss without its options.
void CrossEntropyLossImpl::pretty_print(std::ostream& stream) const { stream << "CrossEntropyLoss()"; }

// ---- NLLLoss

NLLLossImpl::NLLLossImpl(const NLLLossOptions& options_) : options(options_) {
  weight = register_buffer("weight", own(options.weight()));
  options.weight(weight);
}

Tensor NLLLossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::nll_loss(input, target,
                              functional::NLLLossFuncOptions()
                                  .weight(weight)
                                  .ignore_index(options.ignore_index())
                                  .reduction(options.reduction()));
}

void NLLLossImpl::pretty_print(std::ostream& stream) const { stream << "NLLLoss()"; }

// ---- MSELoss, L1Loss

Tensor MSELossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::mse_loss(input, target, options);
}

void MSELossImpl::pretty_print(std::ostream& stream) const { stream << "MSELoss()"; }

Tensor L1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::l1_loss(input, target, options);
}

void L1LossImpl::pretty_print(std::ostream& stream) const { stream << "L1Loss()"; }

// ---- BCEWithLogitsLoss

BCEWithLogitsLossImpl::BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options_) : options(options_) {
  weight = register_buffer("weight", own(options.weight()));
  pos_weight = register_buffer("pos_weight", own(options.pos_weight()));
  options.weight(weight).pos_weight(pos_weight);
}

Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target) {
  return functional::binary_cross_entropy_with_logits(input, target,
                                                      functional::BinaryCrossEntropyWithLogitsFuncOptions()
                                                          .weight(weight)
                                                          .pos_weight(pos_weight)
                                                          .reduction(options.reduction()));
}

void BCEWithLogitsLossImpl::pretty_print(std::ostream& stream) const { stream << "BCEWithLogitsLoss()"; }

}  // namespace tandem::nn

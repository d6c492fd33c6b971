// The losses as modules, libtorch's CrossEntropyLoss, NLLLoss, MSELoss,
// L1Loss and BCEWithLogitsLoss: options at construction, forward(input,
// target) calls nn::functional. Class weights (and pos_weight) are buffers,
// so they move with to() and appear in the state dict, as in PyTorch.
//   nn::CrossEntropyLoss criterion(nn::CrossEntropyLossOptions().weight(w).label_smoothing(0.1));
//   criterion->to(device);
//   Tensor loss = criterion(model(x), y);
#pragma once

#include <ostream>

#include "nn/module.h"
#include "nn/options/loss.h"

namespace tandem::nn {

class CrossEntropyLossImpl : public Module {
 public:
  explicit CrossEntropyLossImpl(const CrossEntropyLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  void pretty_print(std::ostream& stream) const override;

  CrossEntropyLossOptions options;
  Tensor weight;  // buffer: (C), undefined without class weights
};
TANDEM_MODULE(CrossEntropyLoss);

class NLLLossImpl : public Module {
 public:
  explicit NLLLossImpl(const NLLLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  void pretty_print(std::ostream& stream) const override;

  NLLLossOptions options;
  Tensor weight;  // buffer: (C), undefined without class weights
};
TANDEM_MODULE(NLLLoss);

class MSELossImpl : public Module {
 public:
  explicit MSELossImpl(const MSELossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  void pretty_print(std::ostream& stream) const override;

  MSELossOptions options;
};
TANDEM_MODULE(MSELoss);

class L1LossImpl : public Module {
 public:
  explicit L1LossImpl(const L1LossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  void pretty_print(std::ostream& stream) const override;

  L1LossOptions options;
};
TANDEM_MODULE(L1Loss);

class BCEWithLogitsLossImpl : public Module {
 public:
  explicit BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  void pretty_print(std::ostream& stream) const override;

  BCEWithLogitsLossOptions options;
  Tensor weight;      // buffer, broadcast to the input; undefined when not given
  Tensor pos_weight;  // buffer, broadcast to the input; undefined when not given
};
TANDEM_MODULE(BCEWithLogitsLoss);

}  // namespace tandem::nn

// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov
// momentum and weight decay, as torch.optim.SGD (libtorch's names):
//   optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
#pragma once

#include <vector>

#include "optim/optimizer.h"

namespace tandem::optim {

struct SGDOptions : public OptimizerCloneableOptions<SGDOptions> {
  SGDOptions(double lr);  // NOLINT(google-explicit-constructor): libtorch's SGDOptions(0.1)
  TANDEM_ARG(double, lr);
  TANDEM_ARG(double, momentum) = 0;
  TANDEM_ARG(double, dampening) = 0;
  TANDEM_ARG(double, weight_decay) = 0;
  TANDEM_ARG(bool, nesterov) = false;
  TANDEM_ARG(bool, maximize) = false;  // PyTorch's: ascend the objective

 public:
  double get_lr() const override { return lr(); }
  void set_lr(double lr) override { this->lr(lr); }
  // lr, momentum, dampening, weight_decay, nesterov, maximize
  OrderedDict<std::string, double> to_dict() const override;
  void set(const std::string& key, double value) override;
  // PyTorch's checks: "Invalid learning rate: -1", "Invalid momentum value",
  // "Invalid weight_decay value", "Nesterov momentum requires a momentum
  // and zero dampening".
  void validate() const override;
};

struct SGDParamState : public OptimizerParamState {
  TANDEM_ARG(Tensor, momentum_buffer);

 public:
  std::unique_ptr<OptimizerParamState> clone() const override;
  OrderedDict<std::string, Tensor> to_dict() const override;  // "momentum_buffer"
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<OptimizerParamGroup> param_groups, SGDOptions defaults);
  SGD(std::vector<Tensor> params, SGDOptions defaults);

  const char* name() const override { return "SGD"; }
  // For each parameter with a gradient (PyTorch's _single_tensor_sgd, fused):
  //   d = grad (+ weight_decay * p); with momentum: buf = d on the first
  //   step, then buf = momentum * buf + (1 - dampening) * d, and d = buf, or
  //   d + momentum * buf with Nesterov; p -= lr * d  (maximize: -grad)
  Tensor step(LossClosure closure = nullptr) override;
  // Without dampening in any group: a skipped step's fresh buffers stay
  // zero, and the next step's update of a zero buffer is what a fresh one
  // takes (d_p).
  bool supports_amp_scaling() const override;
  void step_unless_found_inf(const Tensor& found_inf, const Tensor& grad_scale = Tensor()) override;

 protected:
  void check_state(const OrderedDict<std::string, Tensor>& saved, const Tensor& param, int64_t index) const override;
  // One step over every group; found_inf and grad_scale as
  // step_unless_found_inf's, or undefined.
  void update(const Tensor& found_inf, const Tensor& grad_scale);
  std::unique_ptr<OptimizerParamState> make_state(const OrderedDict<std::string, Tensor>& saved, const Tensor& param,
                                                  int64_t index) const override;
};

}  // namespace tandem::optim

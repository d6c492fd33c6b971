// Activation modules (ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax) and Dropout,
// as libtorch's: no parameters, forward is the functional.
#pragma once

#include <string>

#include "nn/module.h"
#include "tensor/core/arg.h"

namespace tandem::nn {

struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}  // NOLINT(google-explicit-constructor)
  TANDEM_ARG(bool, inplace);
};
class ReLUImpl : public Module {
 public:
  explicit ReLUImpl(const ReLUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  ReLUOptions options;
};
TANDEM_MODULE(ReLU);

struct GELUOptions {
  TANDEM_ARG(std::string, approximate) = "none";  // or "tanh"
};
class GELUImpl : public Module {
 public:
  explicit GELUImpl(const GELUOptions& options = {});
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  GELUOptions options;
};
TANDEM_MODULE(GELU);

class SiLUImpl : public Module {
 public:
  Tensor forward(const Tensor& input);
};
TANDEM_MODULE(SiLU);

class TanhImpl : public Module {
 public:
  Tensor forward(const Tensor& input);
};
TANDEM_MODULE(Tanh);

class SigmoidImpl : public Module {
 public:
  Tensor forward(const Tensor& input);
};
TANDEM_MODULE(Sigmoid);

struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor)
  TANDEM_ARG(int64_t, dim);
};
class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(int64_t dim) : options(dim) {}
  explicit SoftmaxImpl(const SoftmaxOptions& options) : options(options) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  SoftmaxOptions options;
};
TANDEM_MODULE(Softmax);

struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT(google-explicit-constructor)
  TANDEM_ARG(double, p);
  TANDEM_ARG(bool, inplace) = false;
};
// Drops while training (is_training()), the identity in eval().
class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(const DropoutOptions& options = {});
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  DropoutOptions options;
};
TANDEM_MODULE(Dropout);

}  // namespace tandem::nn

// Activation modules (ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, ELU,
// Softplus, Softmax) and Dropout,
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

struct LeakyReLUOptions {
  TANDEM_ARG(double, negative_slope) = 1e-2;
  TANDEM_ARG(bool, inplace) = false;
};
class LeakyReLUImpl : public Module {
 public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  LeakyReLUOptions options;
};
TANDEM_MODULE(LeakyReLU);

struct ELUOptions {
  TANDEM_ARG(double, alpha) = 1.0;
  TANDEM_ARG(bool, inplace) = false;
};
class ELUImpl : public Module {
 public:
  explicit ELUImpl(const ELUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  ELUOptions options;
};
TANDEM_MODULE(ELU);

struct SoftplusOptions {
  TANDEM_ARG(double, beta) = 1.0;
  TANDEM_ARG(double, threshold) = 20.0;
};
class SoftplusImpl : public Module {
 public:
  explicit SoftplusImpl(const SoftplusOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  SoftplusOptions options;
};
TANDEM_MODULE(Softplus);

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

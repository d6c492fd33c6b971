// nn::init: parameter initialisation in place, as torch.nn.init, without
// recording a graph. Each draws from the tensor's device's default generator
// (tensor/ops/random.h), so tandem::manual_seed makes it repeatable.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "tensor/core/tensor.h"

namespace tandem::nn::init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Conv1D, Conv2D, Conv3D, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };

// torch.nn.init.calculate_gain; param is LeakyReLU's negative slope (0.01
// when not given).
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);
// (fan_in, fan_out): size(1) and size(0) times the receptive field (the
// product of the sizes past the second). Needs at least 2 dimensions.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

Tensor uniform_(Tensor tensor, double low = 0, double high = 1);
Tensor normal_(Tensor tensor, double mean = 0, double std = 1);
Tensor constant_(Tensor tensor, const Scalar& value);
Tensor ones_(Tensor tensor);
Tensor zeros_(Tensor tensor);
Tensor xavier_uniform_(Tensor tensor, double gain = 1);
Tensor xavier_normal_(Tensor tensor, double gain = 1);
// a: LeakyReLU's negative slope (PyTorch's default 0, with ReLU's gain
// under the default nonlinearity LeakyReLU).
Tensor kaiming_uniform_(Tensor tensor, double a = 0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
Tensor kaiming_normal_(Tensor tensor, double a = 0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);

}  // namespace tandem::nn::init

// The models tandem train knows, by name.
#pragma once

#include <string>
#include <vector>

#include "nn/modules/container.h"

namespace tandem::cli {

// "mlp": 784-256-128-10 with ReLU. "cnn": two 3x3 convolutions (32 and 64
// channels) each with batch norm, ReLU and 2x2 max pooling, then linear
// layers 3136-128-10. Both take (N, 1, 28, 28) float32 and return (N, 10)
// logits; parameters are drawn from the cpu default generator.
nn::Sequential make_model(const std::string& name);
const std::vector<std::string>& model_names();
// "784-256-128-10 MLP", for the summary.
std::string model_shape(const std::string& name);
int64_t parameter_count(const nn::Module& model);

}  // namespace tandem::cli

// The models of tandem train.
#include "cli/models.h"

#include "nn/modules/activation.h"
#include "nn/modules/conv.h"
#include "nn/modules/linear.h"
#include "nn/modules/norm.h"
#include "nn/modules/pool.h"
#include "tensor/core/errors.h"

namespace tandem::cli {

nn::Sequential make_model(const std::string& name) {
  if (name == "mlp")
    return nn::Sequential(nn::Flatten(), nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 128), nn::ReLU(),
                          nn::Linear(128, 10));
  if (name == "cnn")
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::BatchNorm2d(32), nn::ReLU(),
                          nn::MaxPool2d(2),  // (N, 32, 14, 14)
                          nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::BatchNorm2d(64), nn::ReLU(),
                          nn::MaxPool2d(2),  // (N, 64, 7, 7)
                          nn::Flatten(), nn::Linear(64 * 7 * 7, 128), nn::ReLU(), nn::Linear(128, 10));
  throw ValueError(detail::str_cat("unknown model '", name, "' (expected mlp or cnn)"));
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp", "cnn"};
  return names;
}

std::string model_shape(const std::string& name) {
  if (name == "mlp") return "MLP 784-256-128-10";
  return "CNN conv32-bn-pool, conv64-bn-pool, 3136-128-10";
}

int64_t parameter_count(const nn::Module& model) {
  int64_t n = 0;
  for (const Tensor& p : model.parameters()) n += p.numel();
  return n;
}

}  // namespace tandem::cli

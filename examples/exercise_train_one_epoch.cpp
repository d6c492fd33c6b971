// Exercise solution: a train_one_epoch function that works on any device.
// It moves each batch to the model's device (a no-op when the loader already
// delivers there) and returns the epoch's mean loss as a number.
#include "examples/common.h"

using namespace tandem;
namespace F = tandem::nn::functional;

// [tutorial:train-one-epoch]
// One pass over loader; returns the mean loss. model is already on device.
double train_one_epoch(nn::Sequential& model, data::DataLoader& loader, optim::Optimizer& optimizer, Device device) {
  model->train();
  double loss_sum = 0;
  int64_t batches = 0;
  for (data::Example<>& batch : loader) {
    Tensor images = batch.data.to(device), labels = batch.target.to(device);
    optimizer.zero_grad();
    Tensor loss = F::cross_entropy(model->forward(images), labels);
    loss.backward();
    optimizer.step();
    loss_sum += loss.item<double>();  // a number: holding the tensor would hold its graph
    ++batches;
  }
  return loss_sum / static_cast<double>(batches);
}
// [end]

int main() {
  return examples::run([] {
    Device device = examples::cuda_device();
    manual_seed(0);
    nn::Sequential model(nn::Flatten(), nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
    model->to(device);
    optim::Adam optimizer(model->parameters(), optim::AdamOptions(1e-3));
    data::DataLoader loader(examples::synthetic_images(2048), data::DataLoaderOptions(64).shuffle(true));
    for (int epoch = 1; epoch <= 3; ++epoch) {
      double loss = train_one_epoch(model, loader, optimizer, device);
      std::printf("epoch %d  loss %.4f\n", epoch, loss);
    }
    return 0;
  });
}

// Exercise solution: spot the bug. The model and the optimizer are on the
// GPU, the loop looks complete, and the first batch fails: the loader hands
// out cpu batches and the loop never moves them.
#include "examples/common.h"

using namespace tandem;
namespace F = tandem::nn::functional;

int main() {
  return examples::run([] {
    Device device = examples::cuda_device();
    manual_seed(0);
    nn::Sequential model(nn::Flatten(), nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
    model->to(device);
    optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1));
    data::DataLoader loader(examples::synthetic_images(1024), data::DataLoaderOptions(64).shuffle(true));

    bool caught = examples::shows_error("the buggy loop", [&] {
      // [tutorial:spot-the-bug]
      for (data::Example<>& batch : loader) {
        optimizer.zero_grad();
        Tensor loss = F::cross_entropy(model->forward(batch.data), batch.target);
        loss.backward();
        optimizer.step();
      }
      // [end]
    });

    examples::fix("move the batch, inputs and labels both");
    // [tutorial:spot-the-bug-fix]
    for (data::Example<>& batch : loader) {
      Tensor images = batch.data.to(device), labels = batch.target.to(device);  // the fix
      optimizer.zero_grad();
      Tensor loss = F::cross_entropy(model->forward(images), labels);
      loss.backward();
      optimizer.step();
    }
    // [end]
    std::printf("ok: trained one epoch (%zu batches) on %s\n", loader.size(), device.str().c_str());
    std::printf("(or let the loader deliver there: data::DataLoaderOptions(64).device(device))\n");
    return caught ? 0 : 1;
  });
}

// Mistake: the training loop moves its batches, the evaluation loop written
// later does not. NoGradGuard changes nothing about devices: the batch must
// be on the model's device there too.
#include "examples/common.h"

using namespace tandem;

int main() {
  return examples::run([] {
    Device device = examples::cuda_device();
    manual_seed(0);
    nn::Sequential model(nn::Flatten(), nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
    model->to(device);
    data::DataLoader test_loader(examples::synthetic_images(512), data::DataLoaderOptions(128));

    bool caught = examples::shows_error("an evaluation loop that forgot to move its batch", [&] {
      // [tutorial:eval-mistake]
      NoGradGuard no_grad;
      model->eval();
      for (data::Example<>& batch : test_loader) {
        Tensor logits = model->forward(batch.data);  // batch.data is still on the cpu
      }
      // [end]
    });

    examples::fix("move the batch in the evaluation loop too");
    // [tutorial:eval-fix]
    NoGradGuard no_grad;
    model->eval();
    int64_t correct = 0, seen = 0;
    for (data::Example<>& batch : test_loader) {
      Tensor images = batch.data.to(device), labels = batch.target.to(device);
      Tensor logits = model->forward(images);
      correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
      seen += labels.size(0);
    }
    // [end]
    std::printf("ok: evaluated %lld examples on %s (accuracy %.1f%%, an untrained model)\n",
                static_cast<long long>(seen), device.str().c_str(), 100.0 * correct / seen);
    return caught ? 0 : 1;
  });
}

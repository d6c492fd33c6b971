// Mistake: a model on cuda fed a batch that is still on the cpu. The error
// names the layer's weight (moved by Module::to()) and the batch (created on
// the cpu); the fix moves the batch.
#include "examples/common.h"

using namespace tandem;

int main() {
  return examples::run([] {
    Device device = examples::cuda_device();
    manual_seed(0);
    // [tutorial:model-to-device]
    nn::Sequential model(nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
    model->to(device);  // every parameter moves, in place
    // [end]

    Tensor images = rand({64, 784});  // no device given: on the cpu
    bool caught = examples::shows_error("a model on cuda fed a cpu batch", [&] {
      // [tutorial:cpu-batch-mistake]
      Tensor logits = model->forward(images);  // model on cuda:0, images on the cpu
      // [end]
    });

    examples::fix("move the batch to the model's device");
    // [tutorial:cpu-batch-fix]
    Tensor logits = model->forward(images.to(device));
    // [end]
    std::printf("ok: logits %s on %s\n", shape_str(logits.sizes()).c_str(), logits.device().str().c_str());
    return caught ? 0 : 1;
  });
}

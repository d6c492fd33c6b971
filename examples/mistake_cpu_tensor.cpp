// Mistake: a tensor made on the cpu inside a computation on cuda. Two common
// cases: a factory called torch-style without a device, and the class
// weights of a loss, which the loss holds as a buffer that must move too.
#include "examples/common.h"

using namespace tandem;

int main() {
  return examples::run([] {
    Device device = examples::cuda_device();
    manual_seed(0);
    nn::Sequential model(nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
    model->to(device);
    Tensor images = rand({64, 784}, TensorOptions().device(device));
    Tensor labels = randint(0, 10, {64}, TensorOptions(kInt64).device(device));

    bool caught_noise = examples::shows_error("noise made with randn() and no device", [&] {
      // [tutorial:factory-mistake]
      Tensor noisy = images + randn({64, 784}) * 0.1;  // randn() without a device: on the cpu
      // [end]
    });
    examples::fix("make the tensor where its partner lives");
    // [tutorial:factory-fix]
    Tensor noisy = images + randn({64, 784}, images.options()) * 0.1;  // or randn_like(images)
    // [end]
    std::printf("ok: noisy images on %s\n", noisy.device().str().c_str());

    bool caught_weight = examples::shows_error("class weights left on the cpu", [&] {
      // [tutorial:class-weights-mistake]
      Tensor class_weights = ones({10});  // on the cpu
      class_weights[9].fill_(2.0);        // count mistakes on class 9 twice
      nn::CrossEntropyLoss criterion(nn::CrossEntropyLossOptions().weight(class_weights));
      Tensor loss = criterion(model->forward(images), labels);
      // [end]
    });
    examples::fix("move the loss, which moves its weight buffer");
    // [tutorial:class-weights-fix]
    Tensor class_weights = ones({10});
    class_weights[9].fill_(2.0);
    nn::CrossEntropyLoss criterion(nn::CrossEntropyLossOptions().weight(class_weights));
    criterion->to(device);  // the weight is a buffer of the loss: it moves with it
    Tensor loss = criterion(model->forward(images), labels);
    // [end]
    std::printf("ok: weighted loss %.4f on %s\n", loss.item<double>(), loss.device().str().c_str());
    return caught_noise && caught_weight ? 0 : 1;
  });
}

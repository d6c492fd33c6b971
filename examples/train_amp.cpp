// Mixed precision on a GPU (or an emulated one): autocast to float16 for the
// forward pass and the loss, a GradScaler for the backward pass, float32
// weights throughout. With SGD the whole step waits for nothing; the
// example counts the host synchronisations of its last step to show it.
#include "examples/common.h"

using namespace tandem;
namespace F = tandem::nn::functional;

int main() {
  return examples::run([] {
    Device device = examples::cuda_device();
    manual_seed(0);
    nn::Sequential model(nn::Flatten(), nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10));
    model->to(device);
    optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    data::DataLoader loader(examples::synthetic_images(2048), data::DataLoaderOptions(64).shuffle(true).device(device));
    // [tutorial:amp-loop]
    amp::GradScaler scaler;  // float16 loss scaling: init_scale 65536, growth every 2000 clean steps
    for (int epoch = 1; epoch <= 3; ++epoch) {
      Tensor loss_sum = zeros({}, TensorOptions().device(device));  // summed on the device: no wait per step
      int64_t steps = 0, syncs_before = 0;
      for (data::Example<>& batch : loader) {
        syncs_before = cuda::host_synchronizations(device.index());
        optimizer.zero_grad();
        Tensor loss;
        {
          AutocastGuard autocast(kCUDA);  // linear in float16, cross_entropy in float32
          loss = F::cross_entropy(model->forward(batch.data), batch.target);
        }
        scaler.scale(loss).backward();  // the gradients of loss * scale
        scaler.step(optimizer);         // unscaled, then skipped if any is inf or NaN
        scaler.update();                // the scale backs off after an overflow
        loss_sum.add_(loss.detach());
        ++steps;
      }
      const int64_t last_step_syncs = cuda::host_synchronizations(device.index()) - syncs_before;
      std::printf("epoch %d  loss %.4f  scale %.0f  skipped %lld  host syncs in the last step %lld\n", epoch,
                  loss_sum.item<double>() / static_cast<double>(steps), scaler.get_scale(),
                  static_cast<long long>(scaler.skipped_steps()), static_cast<long long>(last_step_syncs));
    }
    // [end]
    for (const Tensor& p : model->parameters()) TANDEM_CHECK(p.dtype() == kFloat32, ValueError, "weights stay float32");
    std::printf("ok: weights float32, gradients scaled in float16\n");
    return 0;
  });
}

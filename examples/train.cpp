// Tandem's main job, until the training issues land: logistic regression
// on generated data, on the best device present (or --device), trained with
// autograd and plain SGD. It prints where it ran and what it learned.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "tandem/tandem.h"
#include "tensor/ops/runtime.h"

using namespace tandem;

namespace {

Device best_device() { return cuda::is_available() ? Device(kCUDA, 0) : Device(kCPU); }

std::string describe(Device device) {
  if (device.is_cpu()) return "cpu";
  return device.str() + " (" + cuda::get_device_name(device.index()) + ")";
}

}  // namespace

int main(int argc, char** argv) {
  Device device = best_device();
  int epochs = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device = Device(argv[++i]);
    } else if (std::strcmp(argv[i], "--epochs") == 0 && i + 1 < argc) {
      epochs = std::stoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--device cpu|cuda|cuda:N] [--epochs N]\n", argv[0]);
      return 2;
    }
  }

  try {
    std::printf("Tandem %s (%s)\n", version(), *build_features() ? build_features() : "cpu only");
    device = resolve_device(device, "train");  // "cuda" -> cuda:0, or a clear error if there is none
    std::printf("device: %s\n", describe(device).c_str());
    if (cuda::is_emulated())
      std::printf("note: CUDA devices are emulated (TANDEM_EMULATE_CUDA): host memory and CPU kernels\n");

    // Data: x ~ N(0, 1) in 20 dims, labels from a hidden linear rule.
    const int64_t n = 8192, d = 20, batch = 256;
    manual_seed(0);
    Tensor w_true = randn({d, 1});
    Tensor x_all = randn({n, d});
    Tensor y_all = (x_all.matmul(w_true).add(0.5) > 0).to(kFloat32);
    // Everything the step touches lives on one device: move data and model.
    Tensor x = x_all.to(device), y = y_all.to(device);
    TensorOptions params = TensorOptions().device(device).requires_grad(true);
    Tensor w = zeros({d, 1}, params), b = zeros({1}, params);
    const double lr = 0.5;

    auto t0 = std::chrono::steady_clock::now();
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double loss_sum = 0;
      for (int64_t start = 0; start < n; start += batch) {
        Tensor xb = x.narrow(0, start, batch), yb = y.narrow(0, start, batch);
        Tensor p = sigmoid(xb.matmul(w) + b);  // p: (batch, 1)
        // Binary cross-entropy, clamped away from log(0).
        Tensor pc = p.clamp(1e-7, 1 - 1e-7);
        Tensor loss = -(yb * pc.log() + (1 - yb) * (1 - pc).log()).mean();
        loss_sum += loss.item<double>();
        loss.backward();  // w.grad(), b.grad(): on `device`, like w and b
        NoGradGuard no_grad;
        w.sub_(w.grad(), lr);
        b.sub_(b.grad(), lr);
        w.mutable_grad().zero_();
        b.mutable_grad().zero_();
      }
      if (epoch == 1 || epoch % 5 == 0 || epoch == epochs) {
        NoGradGuard no_grad;
        Tensor pred = (x.matmul(w) + b) > 0;
        double acc = pred.eq(y.to(kBool)).to(kFloat32).mean().item<double>();
        std::printf("epoch %3d  loss %.4f  accuracy %.2f%%\n", epoch, loss_sum / (n / batch), 100 * acc);
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("trained logistic regression (%lld examples, %lld features) for %d epochs on %s in %.3f s\n",
                static_cast<long long>(n), static_cast<long long>(d), epochs, device.str().c_str(), secs);
    return 0;
  } catch (const Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

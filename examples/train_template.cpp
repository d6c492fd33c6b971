// A complete training program to start from: Fashion-MNIST through a
// DataLoader that delivers batches on the training device, a model moved
// there, evaluation under NoGradGuard with its data moved too, and a
// checkpoint saved on the training device and loaded on the cpu.
//
//   train_template [--device auto|cpu|cuda:N] [--epochs N] [--batches N] [--workers N]
//                  [--data DIR] [--out DIR]
//
// --batches N ends each epoch and each evaluation after N batches: a quick
// check that everything runs (the tests use it).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "tandem/tandem.h"

using namespace tandem;
namespace F = tandem::nn::functional;
namespace T = tandem::data::transforms;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Args {
  std::string device = "auto";
  int epochs = 2;
  int64_t batches = 0;  // per epoch and per evaluation; 0: all
  int64_t workers = 2;
  std::string data = data::FashionMNIST::kDefaultRoot;
  std::string out = ".";
};

// [tutorial:model]
// x: (N, 1, 28, 28) -> logits (N, 10)
nn::Sequential make_model() {
  return nn::Sequential(nn::Flatten(), nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 128), nn::ReLU(),
                        nn::Linear(128, 10));
}
// [end]

struct EpochStats {
  double loss = 0;  // mean over the batches
  int64_t batches = 0;
  double seconds = 0;  // the whole epoch
  double waiting = 0;  // of which the loop waited for the next batch
};

// [tutorial:train-epoch]
// One pass over the training set (at most max_batches batches; 0: all).
EpochStats train_epoch(nn::Sequential& model, data::DataLoader& loader, optim::Optimizer& optimizer, Device device,
                       int64_t max_batches) {
  model->train();
  EpochStats stats;
  Clock::time_point start = Clock::now(), ready = start;
  for (data::Example<>& batch : loader) {
    stats.waiting += seconds_since(ready);  // from the end of the last step to this batch
    // Inputs and labels go where the model is. The loader already delivers
    // them there (.device(device) below), so these are no-ops, and the loop
    // stays right if the loader changes.
    Tensor images = batch.data.to(device), labels = batch.target.to(device);
    optimizer.zero_grad();
    Tensor loss = F::cross_entropy(model->forward(images), labels);
    loss.backward();
    optimizer.step();
    stats.loss += loss.item<double>();  // a number, not the tensor (that would keep its graph)
    ready = Clock::now();
    if (++stats.batches == max_batches) break;
  }
  stats.seconds = seconds_since(start);
  stats.loss /= static_cast<double>(stats.batches);
  return stats;
}
// [end]

// [tutorial:evaluate]
// Accuracy over the loader. NoGradGuard: no graph is recorded, so no
// activations are kept, and eval() switches dropout and batch norm to
// inference. The data is moved here too.
double evaluate(nn::Sequential& model, data::DataLoader& loader, Device device, int64_t max_batches) {
  NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0, seen = 0, batches = 0;
  for (data::Example<>& batch : loader) {
    Tensor images = batch.data.to(device), labels = batch.target.to(device);
    Tensor predicted = model->forward(images).argmax(1);
    correct += predicted.eq(labels).sum().item<int64_t>();
    seen += labels.size(0);
    if (++batches == max_batches) break;
  }
  return static_cast<double>(correct) / static_cast<double>(seen);
}
// [end]

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    TANDEM_CHECK(i + 1 < argc, ValueError, "usage: ", argv[0],
                 " [--device auto|cpu|cuda:N] [--epochs N] [--batches N] [--workers N] [--data DIR] [--out DIR]");
    std::string value = argv[++i];
    if (flag == "--device")
      a.device = value;
    else if (flag == "--epochs")
      a.epochs = std::stoi(value);
    else if (flag == "--batches")
      a.batches = std::stoll(value);
    else if (flag == "--workers")
      a.workers = std::stoll(value);
    else if (flag == "--data")
      a.data = value;
    else if (flag == "--out")
      a.out = value;
    else
      throw ValueError("unknown option " + flag);
  }
  return a;
}

int train(const Args& args) {
  // [tutorial:check-gpu]
  std::printf("CUDA available: %s, %d device(s)\n", cuda::is_available() ? "yes" : "no", cuda::device_count());
  for (int i = 0; i < cuda::device_count(); ++i) std::printf("  cuda:%d  %s\n", i, cuda::get_device_name(i).c_str());
  // [end]

  // [tutorial:device-variable]
  // One device for the whole program: the first GPU when there is one.
  Device device = cuda::is_available() ? Device("cuda:0") : Device("cpu");
  // [end]
  if (args.device != "auto") device = Device(args.device);
  std::printf("training on %s\n", device.str().c_str());

  manual_seed(0);
  // [tutorial:data-loader]
  T::Transform to_input = T::Compose({T::ToFloat(), T::Normalize({0.2860}, {0.3530})});
  auto train_set = std::make_shared<data::TransformDataset>(data::FashionMNIST(args.data, /*train=*/true), to_input);
  auto test_set = std::make_shared<data::TransformDataset>(data::FashionMNIST(args.data, /*train=*/false), to_input);
  data::DataLoader train_loader(train_set, data::DataLoaderOptions(128)
                                               .shuffle(true)
                                               .num_workers(args.workers)
                                               .pin_memory(device.is_cuda())  // pinned: the copy overlaps the step
                                               .device(device));              // batches arrive on `device`
  // The test loader leaves its batches on the host: evaluate() moves them.
  data::DataLoader test_loader(test_set, data::DataLoaderOptions(500).num_workers(args.workers));
  // [end]

  // [tutorial:model-optimizer]
  nn::Sequential model = make_model();
  model->to(device);  // parameters move in place: make the optimizer before or after
  optim::Adam optimizer(model->parameters(), optim::AdamOptions(1e-3));
  // [end]

  {
    data::DataLoader::Iterator first = train_loader.begin();  // one batch, to show where things are
    data::Example<>& batch = *first;
    // [tutorial:where-they-live]
    std::printf("model parameters on %s; batch: data %s on %s, labels on %s\n",
                model->parameters()[0].device().str().c_str(), shape_str(batch.data.sizes()).c_str(),
                batch.data.device().str().c_str(), batch.target.device().str().c_str());
    // [end]
  }

  // [tutorial:epoch-loop]
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    EpochStats s = train_epoch(model, train_loader, optimizer, device, args.batches);
    double accuracy = evaluate(model, test_loader, device, args.batches);
    std::printf("epoch %d/%d  train loss %.4f  test accuracy %.2f%%  %lld batches in %.2f s, waiting for data %.0f%%\n",
                epoch, args.epochs, s.loss, 100 * accuracy, static_cast<long long>(s.batches), s.seconds,
                100 * s.waiting / s.seconds);
    if (!std::isfinite(s.loss)) throw ValueError("the loss is not finite: lower the learning rate");
  }
  // [end]

  // [tutorial:save-load]
  std::string path = args.out + "/checkpoint.safetensors";
  nn::save_checkpoint(path, *model, &optimizer, /*scheduler=*/nullptr, args.epochs);  // saved from `device`
  // Later, on any machine, GPU or not: map_location puts every tensor on the cpu.
  nn::Sequential cpu_model = make_model();
  int64_t epoch = nn::load_checkpoint(path, *cpu_model, /*optimizer=*/nullptr, /*scheduler=*/nullptr,
                                      /*map_location=*/Device("cpu"));
  // [end]
  double cpu_accuracy = evaluate(cpu_model, test_loader, Device("cpu"), args.batches);
  std::printf("saved %s; loaded epoch %lld on the cpu: test accuracy %.2f%%\n", path.c_str(),
              static_cast<long long>(epoch), 100 * cpu_accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return train(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

// Small models train on generated data on every device: the modules, losses,
// optimizers and autograd together. Also the most common device mistakes of
// a training loop, and what each error says.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "kernels/cuda/allocator.h"
#include "nn/checkpoint.h"
#include "tests/helpers.h"

using namespace tandem;
using Catch::Contains;
namespace F = tandem::nn::functional;

namespace {

// 4 classes of 2-D points around (±2, ±2), standard deviation 0.5: n per class.
std::pair<Tensor, Tensor> blobs(int64_t n, Device device) {
  Generator gen(1234);
  Tensor x = randn({4 * n, 2}, gen).mul(0.5);
  Tensor labels = arange(4, TensorOptions(kInt64)).reshape({4, 1}).expand({4, n}).reshape({4 * n});
  Tensor centres = test::make({-2, -2, -2, 2, 2, -2, 2, 2}, {4, 2});
  x = x.add(centres.index_select(0, labels));
  return {x.to(device), labels.to(device)};
}

// n 8x8 one-channel images per class, a bar at a random place in noise:
// horizontal, vertical, diagonal, anti-diagonal (classes 0-3).
std::pair<Tensor, Tensor> bars(int64_t n, Device device) {
  Generator gen(99);
  std::vector<int64_t> pos = randint(1, 7, {4 * n}, gen).to_vector<int64_t>();
  std::vector<float> noise = randn({4 * n, 64}, gen).mul(0.3).to_vector<float>();
  std::vector<int64_t> labels(4 * n);
  for (int64_t i = 0; i < 4 * n; ++i) {
    const int64_t c = i % 4, p = pos[i];
    labels[i] = c;
    for (int64_t k = 0; k < 8; ++k) {
      const int64_t r = c == 0 ? p : c == 1 ? k : k, col = c == 0 ? k : c == 1 ? p : c == 2 ? k : 7 - k;
      noise[i * 64 + r * 8 + col] += 1.0f;
    }
  }
  Tensor x = from_blob(noise.data(), {4 * n, 1, 8, 8}, kFloat32).clone();
  Tensor y = from_blob(labels.data(), {4 * n}, kInt64).clone();
  return {x.to(device), y.to(device)};
}

// `steps` optimizer steps on the loss `loss()` computes; the first and the last loss.
std::pair<double, double> train(optim::Optimizer& opt, const std::function<Tensor()>& loss, int steps) {
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor l = loss();
    l.backward();
    opt.step();
    (step == 0 ? first : last) = l.item<double>();
  }
  return {first, last};
}

double accuracy(const Tensor& logits, const Tensor& labels) {
  return logits.argmax(1).eq(labels).to(kFloat64).mean().item<double>();
}

}  // namespace

DEVICE_TEST_CASE("an MLP trains with Adam built before the model moved", "[nn][train]") {
  manual_seed(0);
  nn::Sequential model(nn::Linear(2, 32), nn::ReLU(), nn::Linear(32, 4));
  // Built on the cpu parameters: to() moves them in place, so the optimizer
  // holds the moved tensors (as PyTorch, and unlike moving after steps).
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  model->to(device);
  auto [x, y] = blobs(64, device);
  auto [first, last] = train(
      opt, [&] { return F::cross_entropy(model->forward(x), y); }, 150);
  INFO("loss " << first << " -> " << last);
  CHECK(first > 1.0);  // about log(4) at the start
  CHECK(last < 0.05);
  for (const Tensor& p : opt.parameters()) CHECK(p.device() == device);
  NoGradGuard no_grad;
  model->eval();
  CHECK(accuracy(model->forward(x), y) > 0.98);
}

DEVICE_TEST_CASE("an MLP with dropout trains with SGD and a class-weighted loss module", "[nn][train]") {
  manual_seed(1);
  nn::Sequential model(nn::Linear(2, 64), nn::Tanh(), nn::Dropout(0.1), nn::Linear(64, 4));
  model->to(device);
  nn::CrossEntropyLoss loss_fn(nn::CrossEntropyLossOptions().weight(test::make({1, 2, 1, 2}, {4})));
  loss_fn->to(device);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
  auto [x, y] = blobs(64, device);
  double last = train(
                    opt, [&] { return loss_fn(model->forward(x), y); }, 150)
                    .second;
  CHECK(last < 0.1);
  model->eval();
  NoGradGuard no_grad;
  CHECK(accuracy(model->forward(x), y) > 0.98);
}

DEVICE_TEST_CASE("a CNN with batch norm and pooling trains with SGD", "[nn][train]") {
  manual_seed(2);
  nn::Sequential model(nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1)), nn::BatchNorm2d(8), nn::ReLU(),
                       nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1)), nn::ReLU(),
                       nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(16, 4));
  model->to(device);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto [x, y] = bars(32, device);
  auto [first, last] = train(
      opt, [&] { return F::cross_entropy(model->forward(x), y); }, 80);
  INFO("loss " << first << " -> " << last);
  CHECK(first > 1.0);
  CHECK(last < 0.1);
  // eval() uses the running statistics the training steps gathered.
  model->eval();
  NoGradGuard no_grad;
  auto [x_test, y_test] = bars(16, device);
  CHECK(accuracy(model->forward(x_test), y_test) > 0.9);
}

DEVICE_TEST_CASE("a training step on a cuda device makes no host synchronisation", "[nn][train][streams]") {
  // Forward, loss, backward and the optimizer step are queued on the
  // stream; the class losses and the index ops check their indices there
  // too (kernels/cuda/device_check.h). Only reading a value back waits.
  if (!device.is_cuda() || cuda::detail::caching_disabled()) return;  // caching off: every free waits
  const int d = device.index();
  auto steps = [&](optim::Optimizer& opt, const std::function<Tensor()>& loss, int n) {
    Tensor l;
    for (int i = 0; i < n; ++i) {
      opt.zero_grad();
      l = loss();
      l.backward();
      opt.step();
    }
    return l;
  };
  manual_seed(3);
  nn::Sequential mlp(nn::Linear(2, 32), nn::ReLU(), nn::Dropout(0.1), nn::Linear(32, 4));
  mlp->to(device);
  optim::Adam adam(mlp->parameters(), optim::AdamOptions(1e-2));
  auto [x, y] = blobs(16, device);
  auto mlp_loss = [&] {
    return F::cross_entropy(mlp->forward(x), y, F::CrossEntropyFuncOptions().label_smoothing(0.1));
  };
  steps(adam, mlp_loss, 2);  // first steps: the optimizer's state, the allocator's first blocks
  int64_t n = cuda::host_synchronizations(d);
  Tensor last = steps(adam, mlp_loss, 3);
  CHECK(cuda::host_synchronizations(d) == n);
  CHECK(std::isfinite(last.item<double>()));
  CHECK(cuda::host_synchronizations(d) == n + 1);

  nn::Sequential cnn(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::BatchNorm2d(4), nn::ReLU(),
                     nn::MaxPool2d(2), nn::Flatten(), nn::Linear(64, 4));
  cnn->to(device);
  optim::SGD sgd(cnn->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto [images, labels] = bars(4, device);
  auto cnn_loss = [&] { return F::cross_entropy(cnn->forward(images), labels); };
  steps(sgd, cnn_loss, 2);
  n = cuda::host_synchronizations(d);
  last = steps(sgd, cnn_loss, 3);
  CHECK(cuda::host_synchronizations(d) == n);
  CHECK(std::isfinite(last.item<double>()));
}

DEVICE_TEST_CASE("the training loop's device mistakes and what they say", "[nn][train]") {
  if (device.is_cpu()) return;  // needs a second device
  nn::Sequential model(nn::Linear(2, 8), nn::ReLU(), nn::Linear(8, 4));
  model->to(device);
  auto [x_cpu, y_cpu] = blobs(4, Device(kCPU));

  // 1. The batch was not moved.
  REQUIRE_THROWS_WITH(model->forward(x_cpu),
                      Contains("(when checking argument 'input' of linear)") &&
                          Contains("weight is on " + device.str() + ": parameter '0.weight', moved by Module::to()") &&
                          Contains("input = input.to(weight.device())"));
  // 2. The inputs were, the labels were not.
  Tensor logits = model->forward(x_cpu.to(device));
  REQUIRE_THROWS_WITH(F::cross_entropy(logits, y_cpu), Contains("(when checking argument 'target' of cross_entropy)"));
  // 3. A loss with a class-weight tensor that stayed on the cpu.
  nn::CrossEntropyLoss weighted(nn::CrossEntropyLossOptions().weight(test::make({1, 1, 1, 1}, {4})));
  REQUIRE_THROWS_WITH(
      weighted(logits, y_cpu.to(device)),
      Contains("(when checking argument 'weight' of cross_entropy)") && Contains("weight is on cpu: buffer 'weight'"));
  // 4. The evaluation loop that forgot to move its data, under no_grad.
  model->eval();
  NoGradGuard no_grad;
  REQUIRE_THROWS_WITH(model->forward(x_cpu), Contains("parameter '0.weight'"));
}

DEVICE_TEST_CASE("a run saved on one device resumes on another, exactly where it stopped", "[nn][train][checkpoint]") {
  // Per process: the cpu and emulated suites run at the same time.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tandem_resume_" + std::to_string(getpid()) + ".safetensors"))
          .string();
  auto make = [] {
    manual_seed(5);
    return nn::Sequential(nn::Linear(2, 16), nn::ReLU(), nn::Linear(16, 4));
  };
  auto [x, y] = blobs(16, device);
  auto train = [&](nn::Sequential& model, optim::Optimizer& opt, optim::LRScheduler& sched, int steps) {
    Device d = model->parameters()[0].device();
    for (int i = 0; i < steps; ++i) {
      opt.zero_grad();
      F::cross_entropy(model->forward(x.to(d)), y.to(d)).backward();
      opt.step();
      sched.step();
    }
  };
  // The first run: 10 steps on `device`, saved, then 5 more.
  nn::Sequential model = make();
  model->to(device);
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  optim::StepLR sched(opt, /*step_size=*/4, /*gamma=*/0.5);
  train(model, opt, sched, 10);
  nn::save_checkpoint(path, *model, &opt, &sched, /*epoch=*/3);
  train(model, opt, sched, 5);

  // The resumed run: a fresh model on the cpu, loaded with map_location.
  nn::Sequential resumed = make();
  {
    NoGradGuard g;
    for (Tensor p : resumed->parameters()) p.mul_(0);  // nothing left of its own start
  }
  optim::Adam opt2(resumed->parameters(), optim::AdamOptions(1.0));
  optim::StepLR sched2(opt2, 4, 0.5);
  CHECK(nn::load_checkpoint(path, *resumed, &opt2, &sched2, Device(kCPU)) == 3);
  CHECK(opt2.param_groups()[0].options().get_lr() == Approx(1e-2 * 0.25));  // two decays by step 10
  for (const auto& item : opt2.state_dict().state) {
    for (const auto& s : item.second) {
      if (s.first != "step") CHECK(s.second.device() == Device(kCPU));
    }
  }
  train(resumed, opt2, sched2, 5);
  std::vector<Tensor> a = model->parameters(), b = resumed->parameters();
  for (size_t i = 0; i < a.size(); ++i) test::check_close(b[i], a[i].cpu(), test::Tolerance{1e-4, 1e-6});

  // Loading into the wrong optimizer, or a file without one.
  optim::SGD sgd(resumed->parameters(), optim::SGDOptions(0.1));
  REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *resumed, &sgd, nullptr, Device(kCPU)),
                      "'" + path +
                          "' holds the state of a Adam, but the optimizer is a SGD: build the same optimizer "
                          "as the run that saved it");
  // An optimizer over other parameters: refused before the model changes.
  optim::Adam partial(std::vector<Tensor>{resumed->parameters()[0]}, optim::AdamOptions(1e-2));
  std::vector<float> before = resumed->parameters()[1].to_vector<float>();
  REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *resumed, &partial, nullptr, Device(kCPU)),
                      Contains("doesn't match the size of optimizer's group"));
  CHECK(resumed->parameters()[1].to_vector<float>() == before);

  nn::save_checkpoint(path, *model);
  REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *resumed, &opt2, nullptr, Device(kCPU)),
                      Contains("holds no optimizer state (no \"optimizer.type\" entry)"));

  // Malformed optimizer and scheduler sections.
  nn::Checkpoint bad;
  bad.add_module(*model);
  bad.set("optimizer.type", "Adam");
  bad.set("optimizer.param_groups", "[1, 2]");
  bad.set("scheduler.type", "StepLR");
  bad.set("scheduler", "{\"values\": 3}");
  bad.save(path);
  REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *resumed, &opt2, nullptr, Device(kCPU)),
                      Contains("'" + path +
                               "': \"optimizer.param_groups\" is not a list of {\"options\": {...}, "
                               "\"params\": [...]}: "));
  REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *resumed, nullptr, &sched2, Device(kCPU)),
                      Contains("'" + path + "': \"scheduler\" is not {\"values\": {...}, \"lists\": {...}}: "));
  CHECK(resumed->parameters()[1].to_vector<float>() == before);
  std::remove(path.c_str());
}

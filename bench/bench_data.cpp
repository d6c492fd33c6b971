// bench_data: the DataLoader, on the cpu or a GPU, each figure beside a
// reference measured in the same run:
//  - loader: samples/s over an epoch of Fashion-MNIST train (batch 128,
//    shuffled) against num_workers, raw uint8 batches beside the same
//    batches gathered by one index_select each, and an augmentation chain
//    (ToFloat, RandomCrop(28, 2), RandomHorizontalFlip, Normalize) beside its
//    own num_workers=0 figure;
//  - h2d (a real GPU only): a 256 MiB host-to-device copy from pinned and
//    from pageable memory, and the loader delivering (N, 3, 224, 224) uint8
//    batches to the device with pin_memory on and off, against the copy
//    engine's rate (cudaMemcpy from pinned memory, in a CUDA build);
//  - wait: the share of an MLP's training epoch spent blocked in the loader's
//    begin() and ++it, beside the same steps on batches built beforehand.
// bench/peer_data_torch.py prints the same table for torch.utils.data.
// Usage: bench_data [--device cpu|cuda|cuda:N] [--quick] [--filter SUBSTR]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kernels/cpu/parallel.h"
#include "tandem/tandem.h"

#if BENCH_HAVE_CUDART
#include <cuda_runtime.h>
#endif
#if BENCH_HAVE_CBLAS
extern "C" void openblas_set_num_threads(int);
#endif

using namespace tandem;
namespace F = tandem::nn::functional;

namespace {

using bench::Clock;
using bench::fmt;
using bench::fmt_ratio;
using bench::fmt_time;
using bench::fmt_value;
using bench::seconds_since;
using bench::selected;

using Config = bench::DeviceOptions;

const bench::Table table{26, 20, 16, 24};

constexpr int64_t kBatch = 128;

// Samples per second: "98.6k samples/s", "2.11M samples/s".
std::string fmt_rate(double per_s) {
  std::string v = per_s >= 1e6 ? fmt_value(per_s * 1e-6, "M") : fmt_value(per_s * 1e-3, "k");
  return v.substr(0, v.size() - 2) + v.back() + " samples/s";
}

// Tandem's intra-op threads and, where the bench has it, OpenBLAS's own
// (which cpu::set_num_threads leaves at its default, all cores).
void set_threads(int n) {
  cpu::set_num_threads(n);
#if BENCH_HAVE_CBLAS
  openblas_set_num_threads(n);
#endif
}

void synchronize(Device device) {
  if (device.is_cuda()) cuda::synchronize(device.index());
}

// Median of a list of samples.
double median(std::vector<double> v) {
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Each function called once per round, round after round, until every one
// has min_rounds samples and budget_s has passed; medians. One warm-up call
// each first. The rounds interleave the calls so that a change in the
// machine's load touches all of them alike (as bench::time_all, with calls
// that last a whole epoch).
std::vector<double> time_rounds(const std::vector<std::function<void()>>& fns, int min_rounds, double budget_s,
                                Device device) {
  for (const auto& f : fns) f(), synchronize(device);
  std::vector<std::vector<double>> s(fns.size());
  for (auto start = Clock::now(); static_cast<int>(s[0].size()) < min_rounds || seconds_since(start) < budget_s;) {
    for (size_t i = 0; i < fns.size(); ++i) {
      auto t0 = Clock::now();
      fns[i]();
      synchronize(device);
      s[i].push_back(seconds_since(t0));
    }
  }
  std::vector<double> medians;
  for (auto& x : s) medians.push_back(median(x));
  return medians;
}

// The first `batches` batches of an epoch (the whole epoch when there are
// fewer): the loader's own work, the batches dropped as they come.
void drain(data::DataLoader& loader, size_t batches) {
  size_t k = 0;
  for (auto it = loader.begin(); it != loader.end(); ++it) {
    if (++k >= batches) break;
  }
}

// A random permutation of 0..n-1 as an int64 tensor (the gather reference's
// order; the loader's own is internal, and any shuffle reads alike).
Tensor permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  Tensor t = empty({n}, TensorOptions(kInt64));
  std::copy(order.begin(), order.end(), t.data_ptr<int64_t>());
  return t;
}

// ---------------------------------------------------------------- the data

struct Source {
  std::shared_ptr<data::Dataset> dataset;  // images (1, 28, 28) uint8, int64 labels
  Tensor images, targets;                  // (N, 1, 28, 28) uint8, (N) int64
  bool real = false;
};

Source fashion_mnist_train() {
  Source s;
  if (std::filesystem::exists(data::FashionMNIST::kDefaultRoot)) {
    auto ds = std::make_shared<data::FashionMNIST>();
    s.images = ds->images();
    s.targets = ds->targets();
    s.dataset = ds;
    s.real = true;
  } else {
    s.images = randint(0, 256, {60000, 1, 28, 28}, TensorOptions(kUInt8));
    s.targets = randint(0, 10, {60000}, TensorOptions(kInt64));
    s.dataset = std::make_shared<data::TensorDataset>(s.images, s.targets);
  }
  return s;
}

data::transforms::Transform augmentation() {
  using namespace data::transforms;
  return Compose({ToFloat(1.0 / 255), RandomCrop(28, 2), RandomHorizontalFlip(), Normalize({0.2860}, {0.3530})});
}

data::DataLoaderOptions loader_options(const Config& cfg, int64_t batch, int64_t workers, bool pin) {
  data::DataLoaderOptions o(batch);
  o.shuffle(true).num_workers(workers).seed(0);
  if (cfg.device.is_cuda()) o.pin_memory(pin).device(cfg.device);
  return o;
}

std::vector<int64_t> worker_counts() {
  std::vector<int64_t> w{0, 1, 2, 4};
  if (bench::hardware_threads() >= 8) w.push_back(8);
  return w;
}

// ---------------------------------------------------------------- loader throughput

void bench_loader(const Config& cfg, const Source& src) {
  set_threads(1);
  const int64_t n = src.images.size(0);
  const std::string size = std::to_string(n) + "x1x28x28 b128";
  const size_t all = static_cast<size_t>((n + kBatch - 1) / kBatch);
  const size_t batches = cfg.quick ? std::min<size_t>(all, 100) : all;
  const double samples = static_cast<double>(std::min<int64_t>(n, static_cast<int64_t>(batches) * kBatch));
  const std::vector<int64_t> workers = worker_counts();

  if (selected(cfg, "loader", "raw")) {
    std::vector<std::unique_ptr<data::DataLoader>> loaders;
    std::vector<std::function<void()>> fns;
    for (int64_t w : workers) {
      loaders.push_back(std::make_unique<data::DataLoader>(src.dataset, loader_options(cfg, kBatch, w, true)));
      fns.push_back([&, l = loaders.back().get()] { drain(*l, batches); });
    }
    // The reference: the same number of batches, each one index_select of
    // the whole images tensor (and of the labels) on this thread, moved to
    // the device when there is one.
    Tensor order = permutation(n, 0);
    fns.push_back([&] {
      for (size_t k = 0; k < batches; ++k) {
        auto start = static_cast<int64_t>(k) * kBatch;
        Tensor idx = order.narrow(0, start, std::min(kBatch, n - start));
        Tensor x = index_select(src.images, 0, idx), y = index_select(src.targets, 0, idx);
        if (cfg.device.is_cuda()) x = x.to(cfg.device), y = y.to(cfg.device);
      }
    });
    const std::vector<double> t = time_rounds(fns, cfg.quick ? 3 : 5, 2.0 * cfg.scale, cfg.device);
    const double ref = samples / t.back();
    for (size_t i = 0; i < workers.size(); ++i) {
      const double rate = samples / t[i];
      table.line("1", "raw workers=" + std::to_string(workers[i]), size, fmt_time(t[i] / static_cast<double>(batches)),
                 fmt_rate(rate), fmt_rate(ref) + " gather", fmt_ratio(rate / ref));
    }
  }

  if (selected(cfg, "loader", "aug")) {
    auto ds = std::make_shared<data::TransformDataset>(src.dataset, augmentation());
    std::vector<std::unique_ptr<data::DataLoader>> loaders;
    std::vector<std::function<void()>> fns;
    for (int64_t w : workers) {
      loaders.push_back(std::make_unique<data::DataLoader>(ds, loader_options(cfg, kBatch, w, true)));
      fns.push_back([&, l = loaders.back().get()] { drain(*l, batches); });
    }
    const std::vector<double> t = time_rounds(fns, cfg.quick ? 1 : 2, 0, cfg.device);
    const double ref = samples / t[0];
    for (size_t i = 0; i < workers.size(); ++i) {
      const double rate = samples / t[i];
      table.line("1", "aug workers=" + std::to_string(workers[i]), size, fmt_time(t[i] / static_cast<double>(batches)),
                 fmt_rate(rate), fmt_rate(ref) + " w=0", fmt_ratio(rate / ref));
    }
  }
}

// ---------------------------------------------------------------- host to device

#if BENCH_HAVE_CUDART
void check_cuda(cudaError_t e, const char* what) {
  TANDEM_CHECK(e == cudaSuccess, CudaError, "bench_data: ", what, ": ", cudaGetErrorString(e));
}
#endif

void bench_h2d(const Config& cfg) {
  if (!cfg.device.is_cuda() || !selected(cfg, "h2d", "h2d")) return;
  if (cuda::is_emulated()) {
    std::printf("# h2d: skipped on an emulated device (its copies are host memcpys)\n");
    return;
  }
  set_threads(1);
  const Device dev = cfg.device;
  const int64_t bytes = int64_t{256} << 20;
  const double gb = static_cast<double>(bytes) * 1e-9;
  Tensor pageable = ones({bytes}, TensorOptions(kUInt8));
  Tensor pinned = pageable.pin_memory();
  std::vector<std::function<void()>> fns{
      [&] { (void)pinned.to(dev, /*non_blocking=*/true); },
      [&] { (void)pageable.to(dev, /*non_blocking=*/true); },
  };
#if BENCH_HAVE_CUDART
  // The copy engine's rate: cudaMemcpy from pinned memory, no Tandem in between.
  Tensor target = empty({bytes}, TensorOptions(kUInt8).device(dev));
  fns.push_back([&] {
    check_cuda(cudaMemcpy(target.data_ptr(), pinned.data_ptr(), static_cast<size_t>(bytes), cudaMemcpyHostToDevice),
               "cudaMemcpy");
  });
  const char* ceiling_name = " memcpy";
#else
  const char* ceiling_name = " .to pinned";
#endif
  const std::vector<double> t = time_rounds(fns, cfg.quick ? 5 : 15, 0.5 * cfg.scale, dev);
  const double ceiling = gb / (t.size() > 2 ? t[2] : t[0]);  // memcpy, or without it the pinned .to
  const std::string ref = fmt_value(ceiling, "GB/s") + ceiling_name;
  table.line("1", "h2d .to pinned", "256 MiB", fmt_time(t[0]), fmt_value(gb / t[0], "GB/s"), ref,
             fmt_ratio(gb / t[0] / ceiling));
  table.line("1", "h2d .to pageable", "256 MiB", fmt_time(t[1]), fmt_value(gb / t[1], "GB/s"), ref,
             fmt_ratio(gb / t[1] / ceiling));

  // The loader delivering large batches: ImageNet-sized uint8 images.
  const int64_t batch = 64, n = batch * (cfg.quick ? 32 : 128);
  Tensor images = randint(0, 256, {n, 3, 224, 224}, TensorOptions(kUInt8));
  Tensor labels = randint(0, 1000, {n}, TensorOptions(kInt64));
  auto ds = std::make_shared<data::TensorDataset>(images, labels);
  const double epoch_gb = static_cast<double>(images.nbytes() + labels.nbytes()) * 1e-9;
  const std::string size = std::to_string(n) + "x3x224x224 b64";
  std::vector<int64_t> workers{4};
  if (bench::hardware_threads() >= 8 && !cfg.quick) workers.push_back(8);
  struct Run {
    std::string name;
    std::unique_ptr<data::DataLoader> loader;
  };
  std::vector<Run> runs;
  std::vector<std::function<void()>> loads;
  for (bool pin : {true, false}) {
    for (int64_t w : workers) {
      runs.push_back({std::string("loader ") + (pin ? "pinned" : "pageable") + " workers=" + std::to_string(w),
                      std::make_unique<data::DataLoader>(ds, loader_options(cfg, batch, w, pin))});
      loads.push_back([l = runs.back().loader.get()] { drain(*l, l->size()); });
    }
  }
  const std::vector<double> tl = time_rounds(loads, cfg.quick ? 2 : 4, 1.0 * cfg.scale, dev);
  for (size_t i = 0; i < runs.size(); ++i) {
    const double gbs = epoch_gb / tl[i];
    table.line("1", runs[i].name, size, fmt_time(tl[i] / static_cast<double>(n / batch)), fmt_value(gbs, "GB/s"), ref,
               fmt_ratio(gbs / ceiling));
  }
}

// ---------------------------------------------------------------- data-wait share

struct Mlp {
  nn::Sequential model;
  std::unique_ptr<optim::Adam> opt;

  explicit Mlp(Device device) {
    manual_seed(0);
    model = nn::Sequential(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 128), nn::ReLU(), nn::Linear(128, 10));
    model->to(device);
    opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(1e-3));
  }
  void step(const data::Example<>& batch) {
    opt->zero_grad();
    F::cross_entropy(model->forward(batch.data.flatten(1)), batch.target).backward();
    opt->step();
  }
};

// Seconds of `steps` training steps fed by the loader, and the part of them
// spent in its begin() and operator++ (blocked waiting for a batch).
std::pair<double, double> train_with_loader(data::DataLoader& loader, size_t steps, Device device) {
  Mlp mlp(device);
  double wait = 0;
  auto t0 = Clock::now();
  auto tw = Clock::now();
  auto it = loader.begin();
  wait += seconds_since(tw);
  for (size_t s = 0; s < steps && it != loader.end(); ++s) {
    mlp.step(*it);
    if (s + 1 == steps) break;
    tw = Clock::now();
    ++it;
    wait += seconds_since(tw);
  }
  synchronize(device);
  return {seconds_since(t0), wait};
}

void bench_wait(const Config& cfg, const Source& src, int threads) {
  if (!selected(cfg, "wait", "wait mlp")) return;
  set_threads(threads);
  const std::string thr = std::to_string(threads);
  auto ds = std::make_shared<data::TransformDataset>(
      src.dataset, data::transforms::Compose(
                       {data::transforms::ToFloat(1.0 / 255), data::transforms::Normalize({0.2860}, {0.3530})}));
  const int64_t n = src.images.size(0);
  const size_t all = static_cast<size_t>((n + kBatch - 1) / kBatch);
  const size_t steps = cfg.quick ? std::min<size_t>(all, 100) : all;
  const std::string size = std::to_string(steps) + " steps b128";

  // The reference: the same steps on batches built beforehand (on the
  // device), run before and after the loader's runs (their mean), after ten
  // steps of warm-up (the threads, the allocator's caches).
  std::vector<data::Example<>> prebuilt;
  {
    data::DataLoader loader(ds, loader_options(cfg, kBatch, 0, true));
    for (auto it = loader.begin(); it != loader.end() && prebuilt.size() < steps; ++it) prebuilt.push_back(*it);
    synchronize(cfg.device);
  }
  auto train_prebuilt = [&](size_t count) {
    Mlp mlp(cfg.device);
    auto t0 = Clock::now();
    for (size_t s = 0; s < count; ++s) mlp.step(prebuilt[s]);
    synchronize(cfg.device);
    return seconds_since(t0);
  };
  train_prebuilt(std::min<size_t>(10, steps));
  double prebuilt_s = train_prebuilt(steps);

  const std::vector<int64_t> workers{0, 2};
  std::vector<std::pair<double, double>> runs;  // (wall, wait) per workers
  for (int64_t w : workers) {
    data::DataLoader loader(ds, loader_options(cfg, kBatch, w, true));
    runs.push_back(train_with_loader(loader, steps, cfg.device));
  }
  prebuilt_s = (prebuilt_s + train_prebuilt(steps)) / 2;
  const double ref_step = prebuilt_s / static_cast<double>(steps);
  prebuilt.clear();

  for (size_t i = 0; i < runs.size(); ++i) {
    auto [wall, wait] = runs[i];
    const double step = wall / static_cast<double>(steps);
    char share[32];
    std::snprintf(share, sizeof share, "%.2f%% wait", 100 * wait / wall);
    table.line(thr, "wait mlp workers=" + std::to_string(workers[i]), size, fmt_time(step), share,
               fmt_time(ref_step) + " prebuilt", fmt_ratio(ref_step / step));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const bench::Program program{
      .name = "bench_data",
      .about =
          "The DataLoader on the cpu or a GPU: samples/s against num_workers, host-to-device copies, and the "
          "share of an MLP's epoch spent waiting for data",
      .quick = "The first 100 batches or steps of each epoch, fewer rounds and a quarter of the sampling time"};
  return bench::run_device_bench(program, argc, argv, cfg, [&] {
    const int all = bench::hardware_threads();
    std::printf("# bench_data: Tandem %s; %d hardware threads; device %s%s\n", version(), all,
                bench::describe(cfg.device).c_str(), cfg.quick ? "; --quick" : "");
    bench::print_emulation_note(cfg.device);
    Source src = fashion_mnist_train();
    if (!src.real)
      std::printf("# note: %s not found: generated uint8 images (60000, 1, 28, 28) stand in for Fashion-MNIST\n",
                  data::FashionMNIST::kDefaultRoot);
    std::printf("# loader: shuffled batches of 128 over an epoch%s; time per batch; figure: samples/s.\n",
                cfg.quick ? " (--quick: its first 100 batches)" : "");
    std::printf("# raw: uint8 batches, against one index_select per batch on this thread (gather); aug: ToFloat,\n");
    std::printf("# RandomCrop(28, 2), RandomHorizontalFlip, Normalize, against its own workers=0 rate%s\n",
                cfg.device.is_cuda() ? " (delivered to the device, pin_memory on)" : "");
    std::printf(
        "# h2d: GB/s to the device against cudaMemcpy from pinned memory (goal: >= 0.90 for the pinned copy)\n");
    std::printf("# wait: an MLP 784-256-128-10 (Adam) trained on the loader's batches: time per step, the %% of the\n");
    std::printf(
        "# run blocked in the loader (goal on a GPU: < 2%% with workers=2), against the step on batches built\n");
    std::printf("# beforehand; ratio = prebuilt step time / step time with the loader\n");
#if BENCH_HAVE_CBLAS
    std::printf("# thr: Tandem's intra-op threads and OpenBLAS's (the loader's workers are extra threads)\n");
#else
    std::printf("# thr: Tandem's intra-op threads (the loader's workers are extra threads)\n");
#endif
    table.header();
    bench_loader(cfg, src);
    bench_h2d(cfg);
    bench_wait(cfg, src, 1);
    if (all > 1 && cfg.device.is_cpu()) bench_wait(cfg, src, all);
  });
}

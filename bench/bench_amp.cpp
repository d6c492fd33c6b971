// bench_amp: a training step in mixed precision against the same step in float32, on the CPU or a GPU, for the
// Fashion-MNIST CNN of `tandem train --model cnn` (batch 128) and a GEMM-bound MLP 784-4096-4096-10 (batch 1024):
// median step time, peak memory, the memory the forward pass keeps for the backward, and host synchronisations
// per step. amp is autocast to float16 with amp::GradScaler on cuda, to bfloat16 without a scaler on the cpu.
// bench/peer_amp_torch.py prints the same table for PyTorch and, with --compare, both side by side.
// Usage: bench_amp [--device cpu|cuda|cuda:N] [--threads N] [--quick] [--filter SUBSTR]
#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.h"
#include "tandem/tandem.h"

using namespace tandem;
namespace F = tandem::nn::functional;

namespace {

using bench::fmt_ratio;
using bench::fmt_time;

// scale: of the sampling time per model (2 s; --quick: 1/4); threads: --threads.
using Config = bench::DeviceOptions;

constexpr double kSampleBudgetSeconds = 2;
constexpr int kSyncCountSteps = 5;  // steps whose host synchronisations are counted

// ---------------------------------------------------------------- memory

// Bytes of memory in use on the device. On cuda: the caching allocator's
// bytes in tensors and their peak. The cpu has no allocator statistics in
// Tandem (storages are aligned_alloc and free), so there it is the process's
// resident set from /proc/self/status (VmRSS; VmHWM, its peak, which writing
// 5 to /proc/self/clear_refs resets), with malloc set up by
// map_large_blocks() so that the resident set follows the live bytes.
struct MemoryProbe {
  Device device;

  // On the cpu, for the memory phase: every block above 64 KiB mapped when
  // allocated and unmapped when freed. glibc's default keeps freed blocks of
  // up to 32 MiB in its heap, where they stay resident and serve later
  // allocations, so that the resident set would count memory touched rather
  // than memory in use. Set before the first large allocation, so that the
  // heap holds none.
  static void map_large_blocks() { mallopt(M_MMAP_THRESHOLD, 64 << 10); }
  // For the timings after it: the ceiling glibc's dynamic thresholds reach
  // in a program that frees large blocks (mapping above 32 MiB, trimming the
  // heap's top above twice that), as a training loop runs; mapping every
  // block would add a page fault per 4 KiB to each step.
  static void heap_for_timing() {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
  }

  static size_t status_kib(const char* key) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind(key, 0) == 0) return std::stoull(line.substr(std::string(key).size()));
    return 0;
  }
  // Resets the peak and returns the bytes in use now.
  size_t start() const {
    if (device.is_cuda()) {
      cuda::synchronize(device.index());
      cuda::reset_peak_memory_stats(device.index());
      return cuda::memory_allocated(device.index());
    }
    malloc_trim(0);
    std::ofstream("/proc/self/clear_refs") << "5";
    return now();
  }
  size_t now() const { return device.is_cuda() ? cuda::memory_allocated(device.index()) : status_kib("VmRSS:") * 1024; }
  size_t peak() const {
    if (device.is_cuda()) {
      cuda::synchronize(device.index());
      return cuda::max_memory_allocated(device.index());
    }
    return status_kib("VmHWM:") * 1024;
  }
};

// ---------------------------------------------------------------- models and steps

struct ModelCase {
  std::string name;
  int64_t batch;
  nn::Sequential (*make)();
};

std::vector<ModelCase> model_cases() {
  return {
      {"cnn", 128,
       [] {
         // tandem train --model cnn (cli/models.cpp)
         return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::BatchNorm2d(32), nn::ReLU(),
                               nn::MaxPool2d(2),  // (N, 32, 14, 14)
                               nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::BatchNorm2d(64), nn::ReLU(),
                               nn::MaxPool2d(2),  // (N, 64, 7, 7)
                               nn::Flatten(), nn::Linear(64 * 7 * 7, 128), nn::ReLU(), nn::Linear(128, 10));
       }},
      {"mlp", 1024,
       [] {
         return nn::Sequential(nn::Flatten(), nn::Linear(784, 4096), nn::ReLU(), nn::Linear(4096, 4096), nn::ReLU(),
                               nn::Linear(4096, 10));
       }},
  };
}

Dtype amp_dtype(Device device) { return device.is_cuda() ? kFloat16 : kBFloat16; }

// One model with its optimizer and scaler, trained on one synthetic batch:
// zero_grad, forward and loss (under autocast for amp), backward, step.
struct Run {
  Device device;
  bool amp;
  nn::Sequential model;
  std::unique_ptr<optim::Optimizer> opt;
  amp::GradScaler scaler;
  Tensor x, y;  // x: (N, 1, 28, 28) float32, y: (N) int64

  // Every run of a model starts from the same weights (seed 0). fused: Adam's
  // step counts on the device, so that the scaler skips a step there.
  Run(const ModelCase& m, Device d, bool amp_, bool fused, const Tensor& x_, const Tensor& y_)
      : device(d), amp(amp_), scaler(amp::GradScalerOptions().enabled(amp_ && d.is_cuda())), x(x_), y(y_) {
    manual_seed(0);
    model = m.make();
    model->to(device);
    opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(1e-3).fused(fused));
  }
  Tensor forward() {
    opt->zero_grad();
    AutocastGuard autocast(device.type(), amp_dtype(device), /*enabled=*/amp);
    return F::cross_entropy(model->forward(x), y);
  }
  void backward_and_step(const Tensor& loss) {
    scaler.scale(loss).backward();
    scaler.step(*opt);
    scaler.update();
  }
  void step() { backward_and_step(forward()); }

  int64_t parameter_count() const {
    int64_t n = 0;
    for (const Tensor& p : model->parameters()) n += p.numel();
    return n;
  }
};

struct Figures {
  double seconds = 0;
  double peak = 0, activations = 0;  // bytes
  std::optional<double> syncs;       // per step; none on the cpu
};

// Host synchronisations per step, counted over steps that nothing else waits for.
std::optional<double> syncs_per_step(Run& r) {
  if (!r.device.is_cuda()) return std::nullopt;
  cuda::synchronize(r.device.index());
  const int64_t before = cuda::host_synchronizations(r.device.index());
  for (int i = 0; i < kSyncCountSteps; ++i) r.step();
  const int64_t after = cuda::host_synchronizations(r.device.index());
  cuda::synchronize(r.device.index());
  return static_cast<double>(after - before) / kSyncCountSteps;
}

// Memory of one step over what is in use before it, gradients freed
// (zero_grad sets them to none): what the forward keeps for the backward
// (measured after the loss), and the step's peak.
void measure_memory(Run& r, Figures& f) {
  MemoryProbe probe{r.device};
  r.opt->zero_grad();
  const double base = static_cast<double>(probe.start());
  Tensor loss = r.forward();
  if (r.device.is_cuda()) cuda::synchronize(r.device.index());
  f.activations = static_cast<double>(probe.now()) - base;
  r.backward_and_step(loss);
  loss = Tensor();
  f.peak = static_cast<double>(probe.peak()) - base;
}

// float32 and amp step times, their samples interleaved so that a change in
// the machine's load touches both alike; at least 5 samples (--quick: 3).
std::vector<double> time_steps(std::vector<Run*> runs, const Config& cfg) {
  std::vector<std::function<void()>> fns;
  for (Run* r : runs) fns.push_back([r] { r->step(); });
  std::vector<bench::Sampler<std::function<void()>, bench::WaitFor>> samplers;
  samplers.reserve(fns.size());
  for (const auto& f : fns) samplers.emplace_back(f, bench::WaitFor{cfg.device});
  const size_t min_samples = cfg.quick ? 3 : 5;
  const double budget = kSampleBudgetSeconds * cfg.scale;
  for (auto start = bench::Clock::now();
       samplers[0].samples.size() < min_samples || bench::seconds_since(start) < budget;)
    for (auto& s : samplers) s.sample();
  std::vector<double> medians;
  for (auto& s : samplers) medians.push_back(s.median());
  return medians;
}

// ---------------------------------------------------------------- table

std::string fmt_mib(double bytes) { return bench::fmt("%.1f", bytes / (1 << 20), "MiB"); }

std::string fmt_syncs(const std::optional<double>& s) {
  if (!s) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, *s == static_cast<double>(static_cast<int64_t>(*s)) ? "%.0f" : "%.2f", *s);
  return buf;
}

// Columns two or more spaces apart, as peer_amp_torch.py reads them back.
void print_line(const std::string& thr, const std::string& name, const std::string& batch, const std::string& time,
                const std::string& peak, const std::string& act, const std::string& syncs, const std::string& r_time,
                const std::string& r_peak, const std::string& r_act) {
  bench::print_row("%-4s  %-20s  %5s  %10s  %11s  %11s  %10s  %8s  %8s  %8s\n", thr, name, batch, time, peak, act,
                   syncs, r_time, r_peak, r_act);
}

// A model's float32 and amp runs, on one batch, and what they measured.
struct ModelRuns {
  ModelCase m;
  Tensor x, y;
  std::unique_ptr<Run> f32, amp;
  Figures ff, fa;
  std::optional<double> unfused_syncs;  // cuda: amp with an Adam that is not fused
};

// Makes the runs, warms them up and measures their memory and, on cuda,
// their host synchronisations.
ModelRuns measure_model(const Config& cfg, const ModelCase& m) {
  const Device d = cfg.device;
  ModelRuns r;
  r.m = m;
  r.x = randn({m.batch, 1, 28, 28}).to(d);
  r.y = randint(0, 10, {m.batch}, TensorOptions(kInt64)).to(d);
  const bool fused = d.is_cuda();
  r.f32 = std::make_unique<Run>(m, d, false, fused, r.x, r.y);
  r.amp = std::make_unique<Run>(m, d, true, fused, r.x, r.y);
  // The first step makes Adam's state; a GPU's first steps also choose
  // algorithms, fill the allocator's cache and let the scaler settle.
  const int warm_up = d.is_cuda() ? 5 : 1;
  for (Run* run : {r.f32.get(), r.amp.get()}) {
    for (int i = 0; i < warm_up; ++i) run->step();
  }
  measure_memory(*r.f32, r.ff);
  measure_memory(*r.amp, r.fa);
  r.ff.syncs = syncs_per_step(*r.f32);
  r.fa.syncs = syncs_per_step(*r.amp);
  if (d.is_cuda()) {
    // PyTorch's usual recipe: an Adam that is not fused, whose step the
    // scaler decides on the host.
    Run unfused(m, d, true, false, r.x, r.y);
    for (int i = 0; i < warm_up; ++i) unfused.step();
    r.unfused_syncs = syncs_per_step(unfused);
  }
  return r;
}

void time_and_print(const Config& cfg, ModelRuns& r) {
  const std::vector<double> t = time_steps({r.f32.get(), r.amp.get()}, cfg);
  r.ff.seconds = t[0];
  r.fa.seconds = t[1];
  const Figures &ff = r.ff, &fa = r.fa;
  const std::string thr = std::to_string(cfg.threads), batch = std::to_string(r.m.batch);
  print_line(thr, r.m.name + " float32", batch, fmt_time(ff.seconds), fmt_mib(ff.peak), fmt_mib(ff.activations),
             fmt_syncs(ff.syncs), "1.00", "1.00", "1.00");
  print_line(thr, r.m.name + " amp", batch, fmt_time(fa.seconds), fmt_mib(fa.peak), fmt_mib(fa.activations),
             fmt_syncs(fa.syncs), fmt_ratio(fa.seconds / ff.seconds), fmt_ratio(fa.peak / ff.peak),
             fmt_ratio(fa.activations / ff.activations));
  if (r.unfused_syncs)
    print_line(thr, r.m.name + " amp unfused", batch, "-", "-", "-", fmt_syncs(r.unfused_syncs), "-", "-", "-");
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const bench::Program program{
      .name = "bench_amp",
      .about =
          "A training step in mixed precision (autocast; GradScaler on cuda) against float32 for the Fashion-MNIST "
          "CNN and an MLP 784-4096-4096-10: step time, peak memory, activations, host synchronisations",
      .quick = "A quarter of the sampling time, at least 3 samples instead of 5",
      .threads = true};
  return bench::run_device_bench(program, argc, argv, cfg, [&] {
    set_num_threads(cfg.threads);  // Tandem's OpenMP loops and OpenBLAS's GEMMs
    const Device d = cfg.device;
    std::printf("# bench_amp: Tandem %s (%s); device %s; %d thread(s)%s\n", version(), build_features(),
                bench::describe(d).c_str(), cfg.threads, cfg.quick ? "; --quick" : "");
    bench::print_emulation_note(d);
    std::printf(
        "# a step: zero_grad, forward and cross_entropy (autocast for amp), backward, Adam 1e-3 step%s, on one\n"
        "# synthetic batch of Fashion-MNIST's shape (randn images, random labels). amp: %s\n",
        d.is_cuda() ? " (fused)" : "",
        d.is_cuda() ? "autocast to float16, amp::GradScaler" : "autocast to bfloat16, no scaler");
    std::printf(
        "# time: median per step; peak: the step's peak over its start (gradients freed); act: held after the\n"
        "# loss, what the forward keeps for the backward; both from %s\n"
        "# syncs: host synchronisations per step%s; */f32: amp over float32\n",
        d.is_cuda()
            ? "cuda::max_memory_allocated and memory_allocated"
            : "the resident set (VmHWM, VmRSS; no cpu allocator\n# statistics), measured before the timings with "
              "malloc mapping every block above 64 KiB apart",
        d.is_cuda() ? " (cuda::host_synchronizations)" : ": none on the cpu (n/a)");
    print_line("thr", "case", "batch", "time", "peak", "act", "syncs", "time/f32", "peak/f32", "act/f32");
    // Memory first, for every model, with malloc mapping large blocks apart
    // (on the cpu); then the timings, with its usual heap.
    if (d.is_cpu()) MemoryProbe::map_large_blocks();
    std::vector<ModelRuns> models;
    for (const ModelCase& m : model_cases())
      if (bench::selected(cfg, "", m.name)) models.push_back(measure_model(cfg, m));
    if (d.is_cpu()) MemoryProbe::heap_for_timing();
    for (ModelRuns& r : models) time_and_print(cfg, r);
    // The MLP's act is mostly these copies: a linear layer whose input needs
    // a gradient keeps its weight's 16-bit copy for the backward.
    for (const ModelRuns& r : models) {
      const double n = static_cast<double>(r.f32->parameter_count());
      std::printf(
          "# %s: %.0f parameters (%s); autocast's %s copies of them: %s, of which act holds those of the\n"
          "# layers whose input needs a gradient (every layer but the first)\n",
          r.m.name.c_str(), n, fmt_mib(4 * n).c_str(), dtype_name(amp_dtype(d)).data(), fmt_mib(2 * n).c_str());
    }
  });
}

// bench_optim: an optimizer step (Adam, AdamW, Adam with amsgrad, SGD with
// momentum) and clip_grad_norm_ over two parameter sets, on the CPU or a GPU:
// the MLP 784-256-128-10 (6 tensors, 235k elements) and 300 small tensors
// (64 to 4096 elements, 509k in all, where the per-tensor cost shows). Each
// line is beside a copy moving as many bytes, measured in the same run (the
// update is bound by memory: Adam reads p, g, m, v and writes p, m, v).
// bench/peer_optim_torch.py prints the same table for PyTorch (foreach Adam).
// Usage: bench_optim [--device cpu|cuda|cuda:N] [--quick] [--filter SUBSTR]
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kernels/cpu/parallel.h"
#include "tandem/tandem.h"

using namespace tandem;

namespace {

using bench::fmt_ratio;
using bench::fmt_time;
using bench::fmt_value;
using bench::Fn;
using bench::selected;
using bench::time_all;

using Config = bench::DeviceOptions;

const bench::Table table{22, 16, 12, 18};

// ---------------------------------------------------------------- parameter sets

struct ParamSet {
  std::string name, size;
  std::vector<Tensor> params;
  int64_t numel = 0;
};

ParamSet make_set(const std::string& name, const std::vector<std::vector<int64_t>>& shapes, Device device) {
  ParamSet s{name, "", {}, 0};
  for (const auto& shape : shapes) {
    Tensor p = (randn(shape) * 0.1).to(device).requires_grad_();
    p.mutable_grad() = (randn(shape) * 0.01).to(device);
    s.numel += p.numel();
    s.params.push_back(p);
  }
  s.size = std::to_string(s.params.size()) + " x, " + std::to_string((s.numel + 500) / 1000) + "k";
  return s;
}

std::vector<ParamSet> param_sets(Device device) {
  std::vector<ParamSet> sets;
  sets.push_back(make_set("mlp", {{784, 256}, {256}, {256, 128}, {128}, {128, 10}, {10}}, device));
  // A model of many small tensors (norms, biases, small projections).
  const std::vector<std::vector<int64_t>> kinds = {{64}, {256}, {48, 32}, {128}, {64, 64}, {4096}};
  std::vector<std::vector<int64_t>> many;
  for (int i = 0; i < 300; ++i) many.push_back(kinds[i % kinds.size()]);
  sets.push_back(make_set("many", many, device));
  return sets;
}

// ---------------------------------------------------------------- cases

struct Case {
  std::string name;
  int64_t bytes_per_element;  // read + written per parameter element (float32)
  std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>&)> make;  // null: clip_grad_norm_
};

std::vector<Case> cases() {
  return {
      {"adam", 28, [](const std::vector<Tensor>& p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions()); }},
      {"adamw", 28,
       [](const std::vector<Tensor>& p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions()); }},
      {"adam amsgrad", 36,
       [](const std::vector<Tensor>& p) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions().amsgrad(true));
       }},
      {"sgd momentum", 20,
       [](const std::vector<Tensor>& p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions(1e-3).momentum(0.9));
       }},
      // Reads the gradients twice (norms, then scaling) and writes them once.
      {"clip_grad_norm_", 12, nullptr},
  };
}

void run_pass(const Config& cfg, std::vector<ParamSet>& sets) {
  cpu::set_num_threads(cfg.threads);
  const std::string thr = std::to_string(cfg.threads);
  for (ParamSet& set : sets) {
    for (const Case& c : cases()) {
      const std::string name = c.name + " " + set.name;
      if (!selected(cfg, set.name, name)) continue;
      Fn work;
      std::shared_ptr<optim::Optimizer> opt;
      if (c.make) {
        opt = c.make(set.params);
        work = [opt] { opt->step(); };
      } else {
        // max_norm far above the norm: the gradients are scaled by 1 and
        // keep their values from call to call.
        work = [&set] { nn::utils::clip_grad_norm_(set.params, 1e9); };
      }
      // The reference: a copy moving the same bytes (half read, half written).
      const int64_t bytes = c.bytes_per_element * set.numel;
      Tensor src = zeros({bytes / 8}, TensorOptions(kFloat32).device(cfg.device)),
             dst = zeros({bytes / 8}, TensorOptions(kFloat32).device(cfg.device));
      Fn copy = [&] { dst.copy_(src); };
      const std::vector<double> t = time_all({work, copy}, 0.5 * cfg.scale, cfg.device);
      const double gbs = static_cast<double>(bytes) / t[0] * 1e-9, ref = static_cast<double>(bytes) / t[1] * 1e-9;
      table.line(thr, name, set.size, fmt_time(t[0]), fmt_value(gbs, "GB/s"), fmt_value(ref, "GB/s copy"),
                 fmt_ratio(gbs / ref));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const bench::Program program{
      .name = "bench_optim",
      .about =
          "Optimizer steps and clip_grad_norm_ over an MLP's parameters and over 300 small tensors, on the cpu "
          "or a GPU, beside a copy moving as many bytes",
      .quick = "A quarter of the sampling time"};
  return bench::run_device_bench(program, argc, argv, cfg, [&] {
    const int all = bench::hardware_threads();
    std::printf("# bench_optim: Tandem %s; %d hardware threads; device %s%s\n", version(), all,
                bench::describe(cfg.device).c_str(), cfg.quick ? "; --quick" : "");
    if (cuda::is_emulated() && cfg.device.is_cuda())
      std::printf("# note: the cuda devices are emulated (TANDEM_EMULATE_CUDA): CPU kernels; nothing about a GPU\n");
    std::printf("# time: median per step (per clip_grad_norm_ call); figure: bytes the update must move (float32:\n");
    std::printf("# adam 28, amsgrad 36, sgd momentum 20, clip 12 per element) per second; reference: a copy_ moving\n");
    std::printf("# as many bytes in the same run; ratio = figure / reference (1.00: as fast as memory allows)\n");
    table.header();
    std::vector<ParamSet> sets = param_sets(cfg.device);
    cfg.threads = 1;
    run_pass(cfg, sets);
    // On a GPU the host's threads run no kernels: the all-cores pass would repeat the first.
    if (all > 1 && cfg.device.is_cpu()) {
      cfg.threads = all;
      run_pass(cfg, sets);
    }
  });
}

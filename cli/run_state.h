// What a tandem train checkpoint holds beyond the model, the optimizer and
// the scheduler (nn::Checkpoint's layout, nn/serialize.h): the run's
// settings, so that `--resume` and `tandem eval` rebuild the same model and
// loop, and where the run stands, so that a resumed run continues exactly
// (bit for bit) as the run left alone would have.
//
//   metadata "tandem.train.config"    JSON, RunConfig
//            "tandem.train.position"  JSON, Position
//            "epoch"                  the epochs finished
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nn/serialize.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "tensor/io/json_private.h"

namespace tandem::cli {

// The settings that decide a run's numbers. A resumed run keeps them all.
struct RunConfig {
  std::string model = "mlp";
  int64_t epochs = 10;
  int64_t batch_size = 128;
  double lr = 1e-3;
  std::string optimizer = "adam";
  std::string schedule = "cosine";
  uint64_t seed = 0;
  std::string data;                               // "" = Debian's Fashion-MNIST
  int64_t train_examples = 0, test_examples = 0;  // 0 = all
  // The CPU threads the run used: the CPU kernels' sums depend on it, so a
  // resume is bit for bit only with the same count (0: not recorded).
  int64_t threads = 0;
  // Mixed precision: autocast to float16 with a GradScaler on cuda, to
  // bfloat16 (no scaler: it has float32's range) on the cpu.
  bool amp = false;
  // The ranks of a distributed run (1: one process); a resume needs as many.
  int64_t world_size = 1;

  json::Value to_json() const;
  static RunConfig from_json(const json::Value& v, const std::string& source);
};

// Where a run stands when its checkpoint is written: after a whole epoch
// (steps_in_epoch = 0), or mid-epoch when Ctrl-C stopped it.
struct Position {
  int64_t epochs_done = 0;
  int64_t steps_in_epoch = 0;  // steps of the next epoch already taken
  // The unfinished epoch's running sums, for its summary line.
  double loss_sum = 0;  // sum over samples of the loss
  int64_t correct = 0, seen = 0;
  double elapsed_s = 0, wait_s = 0;
  // The default generators (seed, offset): cpu, and the run's cuda device if any.
  uint64_t cpu_seed = 0, cpu_offset = 0;
  std::optional<std::pair<uint64_t, uint64_t>> cuda_generator;

  // The default generators of the cpu and, when device is cuda, of device
  // (a cuda generator saved before stays when device is the cpu).
  void capture_generators(Device device);
  void restore_generators(Device device) const;

  json::Value to_json() const;
  static Position from_json(const json::Value& v, const std::string& source);
};

// The checkpoint's path inside an --out folder, and the metrics file's.
std::string checkpoint_path(const std::string& dir);
std::string metrics_path(const std::string& dir);

// Writes the checkpoint atomically (a temporary file renamed into place),
// with Ctrl-C held back until the file is whole.
void save_run(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer,
              const optim::LRScheduler* scheduler, const amp::GradScaler& scaler, const RunConfig& config,
              const Position& position);

// A checkpoint read, tensors on map_location; an error says what is wrong
// with a file that is missing, truncated, or not written by tandem train.
struct RunCheckpoint {
  nn::Checkpoint checkpoint;
  RunConfig config;
  Position position;
};
RunCheckpoint read_run(const std::string& path, Device map_location);

}  // namespace tandem::cli

// tandem train: Fashion-MNIST (or any MNIST-layout data) end to end on one
// device: the DataLoader (workers, pinned memory, delivery to the device),
// an nn model, an optimizer and schedule, per-epoch evaluation, checkpoints
// and metrics, exact resume, and Ctrl-C.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "cli/run_state.h"

namespace tandem::cli {

struct TrainOptions {
  RunConfig config;
  // The config flags given on the command line: a resumed run refuses one
  // that differs from the checkpoint's.
  std::set<std::string> given;
  std::string device = "auto";
  int64_t workers = -1;            // -1: 2 on a cuda device, else 0
  std::optional<bool> pin_memory;  // default: on for a cuda device
  int threads = 0;                 // 0: default_threads(model)
  std::string out, resume;
  bool plot = false;
  double progress_interval = 0;  // 0: Progress's default
  int64_t stop_after_steps = 0;  // stop as Ctrl-C would after this many steps of this process
  // A distributed run: the launcher's process count (the launcher itself
  // runs no rank), and the backend the ranks join with.
  int nproc_per_node = 0;
  std::string backend = "auto";
};

// Returns the exit code (0, or kExitInterrupted after Ctrl-C); errors throw.
int run_train(TrainOptions options);

}  // namespace tandem::cli

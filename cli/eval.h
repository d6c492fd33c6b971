// Evaluation: the test-set loss and accuracy of a model (per class on
// request), and the `tandem eval` subcommand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "nn/modules/container.h"

namespace tandem::cli {

struct EvalResult {
  double loss = 0;  // mean cross entropy
  int64_t correct = 0, total = 0;
  std::vector<int64_t> class_correct, class_total;  // when asked for
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0; }
};

// The model in eval mode under NoGradGuard over every batch of loader (its
// batches already on the model's device); back in the mode it was in after.
EvalResult evaluate(nn::Sequential& model, data::DataLoader& loader, int64_t num_classes = 0);

struct EvalOptions {
  std::string checkpoint;
  std::string device = "auto";
  std::string data;  // "" = the data the checkpoint was trained on
  int64_t batch_size = 1000;
  int threads = 0;  // 0: as tandem train chooses for the model
};
int run_eval(const EvalOptions& options);

// The threads tandem train and eval use for a model when --threads is not
// given: what measured fastest on our 2-core machines (docs in README).
int default_threads(const std::string& model);

}  // namespace tandem::cli

// Samplers: the order in which a DataLoader visits a dataset's indices in an
// epoch (PyTorch's torch.utils.data.Sampler), and DistributedSampler, which
// gives each of num_replicas processes a disjoint shard of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "tensor/core/arg.h"

namespace tandem::data {

// The indices of one epoch, in the order a DataLoader visits them: indices()
// is Python's list(iter(sampler)), size() its len(sampler). A DataLoader with
// a sampler asks indices() once at each begin(), from the thread that calls
// begin(), and needs it to give size() indices every epoch.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<size_t> indices() = 0;
  virtual size_t size() const = 0;
  // For error messages: "DistributedSampler(rank=1, num_replicas=4, 10 examples)".
  virtual std::string name() const { return "Sampler"; }
};

struct DistributedSamplerOptions {
  // Processes sharing the dataset, and this one's place among them; either
  // left unset is read from the default process group, as in PyTorch.
  TANDEM_ARG(std::optional<int64_t>, num_replicas) = std::nullopt;
  TANDEM_ARG(std::optional<int64_t>, rank) = std::nullopt;
  // A new permutation each epoch, drawn from (seed, epoch) only: every rank
  // must be given the same seed, so that their shards stay disjoint.
  TANDEM_ARG(bool, shuffle) = true;
  TANDEM_ARG(uint64_t, seed) = 0;
  // Drop the tail that does not divide evenly instead of padding with
  // repeated indices.
  TANDEM_ARG(bool, drop_last) = false;
};

// PyTorch's DistributedSampler: of a dataset of N examples and R replicas,
// each rank gets size() = ceil(N / R) indices (floor(N / R) with drop_last).
// The epoch's order (a permutation of 0..N-1 with shuffle, else 0..N-1) is
// padded by repeating it from its start up to total_size() = size() * R, or
// truncated to it with drop_last; rank r takes positions r, r + R, r + 2R...
//
//   N = 10, R = 4, no shuffle:  order 0..9, padded with 0 1
//     rank 0: 0 4 8   rank 1: 1 5 9   rank 2: 2 6 0   rank 3: 3 7 1
//   the same with drop_last:    truncated to 8
//     rank 0: 0 4     rank 1: 1 5     rank 2: 2 6     rank 3: 3 7
//
// With shuffle, call set_epoch(e) before each epoch: the order of epoch e is
// the DataLoader's own shuffled order for (seed, e), so one replica sees
// what DataLoaderOptions().shuffle(true).seed(seed) would. Asking for an
// epoch's indices twice without set_epoch in between repeats its order, and
// prints a warning on stderr (once per sampler). Not thread-safe: one
// thread asks for the indices (a DataLoader's begin() does).
class DistributedSampler : public Sampler {
 public:
  explicit DistributedSampler(size_t dataset_size, DistributedSamplerOptions options = {});
  explicit DistributedSampler(const Dataset& dataset, DistributedSamplerOptions options = {});

  // This rank's indices for the current epoch.
  std::vector<size_t> indices() override;
  // PyTorch's num_samples: the indices each rank gets.
  size_t size() const override;
  std::string name() const override;
  size_t total_size() const;
  // Makes the next indices() those of this epoch.
  void set_epoch(uint64_t epoch);
  uint64_t epoch() const { return epoch_; }
  size_t dataset_size() const { return dataset_size_; }
  int64_t num_replicas() const { return num_replicas_; }
  int64_t rank() const { return rank_; }
  bool shuffle() const { return shuffle_; }
  uint64_t seed() const { return seed_; }
  bool drop_last() const { return drop_last_; }

 private:
  size_t dataset_size_;
  int64_t num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  size_t num_samples_;
  uint64_t epoch_ = 0;
  bool asked_since_set_epoch_ = false;
  bool warned_ = false;
};

namespace detail {
// The order of an epoch of n examples: 0..n-1, or with shuffle a
// Fisher-Yates permutation whose draws are Philox counters under a key
// mixed from (seed, epoch), so it depends on nothing else. The DataLoader's
// shuffle and DistributedSampler both use it.
std::vector<size_t> epoch_order(size_t n, bool shuffle, uint64_t seed, uint64_t epoch);
}  // namespace detail

}  // namespace tandem::data

// What a DataLoader tells the threads that call Dataset::get: which worker
// is calling (get_worker_info), and the seed of each example's random
// augmentation (example_seed), so that both depend on the loader's seed,
// the epoch and the example only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace tandem::data {

// Which loader thread is running Dataset::get, as PyTorch's get_worker_info().
struct WorkerInfo {
  int64_t id = 0;           // 0 .. num_workers - 1
  int64_t num_workers = 0;  // 0 when the caller's thread builds the batches
  uint64_t seed = 0;        // the loader's seed
  uint64_t epoch = 0;
};
// Inside Dataset::get called by a DataLoader: who is calling; nullopt elsewhere.
std::optional<WorkerInfo> get_worker_info();

// The seed for random augmentation of example `index` (random crops and
// flips). Inside a DataLoader it depends only on the loader's seed, the epoch
// and the index, so augmented batches are the same for any num_workers and
// any timing; outside a loader, on the index alone (epoch 0, seed 0).
uint64_t example_seed(size_t index);

namespace detail {
// What example_seed and get_worker_info read: set by the DataLoader on each
// thread that calls Dataset::get, for the duration of one batch.
struct LoaderThreadState {
  bool active = false;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  int64_t worker_id = 0;
  int64_t num_workers = 0;
};
const LoaderThreadState& loader_thread_state();
class LoaderThreadGuard {
 public:
  explicit LoaderThreadGuard(LoaderThreadState state);
  ~LoaderThreadGuard();
  LoaderThreadGuard(const LoaderThreadGuard&) = delete;
  LoaderThreadGuard& operator=(const LoaderThreadGuard&) = delete;

 private:
  LoaderThreadState previous_;
};
// A 64-bit mix of three words (splitmix64 rounds): distinct inputs give
// unrelated outputs.
uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c);
}  // namespace detail

}  // namespace tandem::data

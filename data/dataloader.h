// DataLoader: batches of a Dataset, built by worker threads in (optionally
// pinned) host memory and, with `device` set, copied to that device on a
// side stream ahead of use. Options follow PyTorch's Python DataLoader.
//
//   data::DataLoader loader(data::FashionMNIST(), data::DataLoaderOptions().batch_size(128).shuffle(true)
//                               .num_workers(2).pin_memory(true).device(Device("cuda:0")));
//   for (data::Example<>& batch : loader) { ... batch.data, batch.target: on cuda:0 ... }
//
// The batches of an epoch depend only on the seed, the epoch and the
// dataset (and the sampler's indices): never on num_workers, pin_memory or
// timing.
#pragma once

#include <concepts>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <source_location>

#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "tensor/core/arg.h"
#include "tensor/core/device.h"

namespace tandem::data {

struct DataLoaderOptions {
  DataLoaderOptions() = default;
  explicit DataLoaderOptions(int64_t batch_size) : batch_size_(batch_size) {}
  // Examples per batch; the last batch of an epoch may be smaller unless drop_last.
  TANDEM_ARG(int64_t, batch_size) = 1;
  // A new permutation of the examples each epoch, drawn from the seed and the epoch.
  TANDEM_ARG(bool, shuffle) = false;
  // The order of each epoch instead: sampler->indices(), asked once at each
  // begin() (mutually exclusive with shuffle, as in PyTorch). The loader does
  // not call a DistributedSampler's set_epoch: call it before each epoch.
  TANDEM_ARG(std::shared_ptr<Sampler>, sampler) = nullptr;
  TANDEM_ARG(bool, drop_last) = false;
  // Worker threads building batches; 0: the caller's thread builds each batch when asked.
  TANDEM_ARG(int64_t, num_workers) = 0;
  // Batches built ahead of the consumer: prefetch_factor * num_workers in all
  // (PyTorch's default 2; needs num_workers > 0).
  TANDEM_ARG(std::optional<int64_t>, prefetch_factor) = std::nullopt;
  // Build each batch directly in pinned host memory (needs a GPU, real or emulated).
  TANDEM_ARG(bool, pin_memory) = false;
  // Keep the workers between epochs (needs num_workers > 0).
  TANDEM_ARG(bool, persistent_workers) = false;
  // Deliver batches on this device: the copy is queued on a side stream as
  // soon as a batch is built, and the stream current when the batch is
  // handed out waits for it.
  TANDEM_ARG(std::optional<Device>, device) = std::nullopt;
  // Shuffling and augmentation (example_seed) draw from this seed; by
  // default one drawn from the cpu default generator when the loader is
  // made, so tandem::manual_seed makes a run repeatable.
  TANDEM_ARG(std::optional<uint64_t>, seed) = std::nullopt;
  // Seconds to wait for a worker's batch before throwing (0: no limit); also
  // how long ending an epoch waits for a worker stuck in Dataset::get before
  // leaving it behind.
  TANDEM_ARG(double, timeout) = 0;
};

class DataLoader {
 public:
  using Batch = Example<>;

  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options = {},
             std::source_location loc = std::source_location::current());
  template <typename D>
  requires std::derived_from<D, Dataset> DataLoader(D dataset, DataLoaderOptions options = {},
                                                    std::source_location loc = std::source_location::current())
      : DataLoader(std::make_shared<D>(std::move(dataset)), std::move(options), loc) {}
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;

  struct Impl;
  struct EpochRun;

  // One pass over the dataset. Move-only; destroying it before the end (a
  // break out of the loop, an exception) stops the epoch and joins its
  // workers (persistent ones stay, idle).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;

    Iterator(Iterator&&) noexcept;
    Iterator& operator=(Iterator&&) noexcept;
    ~Iterator();
    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    // The next batch; rethrows, with the example's index, an exception that
    // loading one of its examples threw.
    Iterator& operator++();
    bool operator==(std::default_sentinel_t) const;

   private:
    friend class DataLoader;
    explicit Iterator(std::unique_ptr<EpochRun> run);
    std::unique_ptr<EpochRun> run_;
  };

  // Starts an epoch: the first batch is ready when this returns. One epoch at
  // a time: a second begin() while an iterator is mid-epoch is an error.
  Iterator begin() { return begin(0); }
  // The same, from batch first_batch on: the batches before it are neither
  // built nor delivered (a run stopped mid-epoch resumes with set_epoch and
  // this). first_batch == size() gives an empty epoch; past it is an error.
  Iterator begin(size_t first_batch);
  std::default_sentinel_t end() const { return std::default_sentinel; }

  // Batches per epoch: ceil(N / batch_size), or floor with drop_last; N is
  // the sampler's size() with a sampler, else the dataset's.
  size_t size() const;
  // Epochs begun so far (the next begin() is epoch epochs()).
  uint64_t epochs() const;
  // Makes the next begin() epoch `epoch`, with that epoch's order and
  // augmentation: how a resumed run continues where it stopped (as PyTorch's
  // DistributedSampler.set_epoch). Not while an epoch is running. With a
  // sampler, the order is the sampler's: set its epoch too.
  void set_epoch(uint64_t epoch);
  uint64_t seed() const;
  const DataLoaderOptions& options() const;
  const std::shared_ptr<Dataset>& dataset() const;

 private:
  Impl& impl() const;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tandem::data

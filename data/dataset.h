// Datasets: what a DataLoader draws examples from. A Dataset is map-style,
// as PyTorch's and libtorch's: its size, and one example by index. Examples
// are cpu tensors; the loader stacks them into batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tensor/core/tensor.h"

namespace tandem::data {

// One example, or a batch of them (libtorch's torch::data::Example): the
// input and its label. A batch stacks the examples' data and targets along a
// new first dimension.
template <typename Data = Tensor, typename Target = Tensor>
struct Example {
  Data data;
  Target target;
};

// A map-style dataset (libtorch's Dataset; PyTorch's __getitem__/__len__).
// get() may be called from several loader threads at once: it must not
// change shared state without a lock.
class Dataset {
 public:
  virtual ~Dataset() = default;
  // The example at index, 0 <= index < *size(); data and target on the cpu.
  virtual Example<> get(size_t index) = 0;
  // The number of examples (optional, as libtorch's; a DataLoader needs it).
  virtual std::optional<size_t> size() const = 0;
  // For error messages and printing: "FashionMNIST(train, 60000 examples)".
  virtual std::string name() const { return "Dataset"; }
};

// Examples as slices of two tensors along their first dimension
// (torch.utils.data.TensorDataset with an input and a label tensor):
// example i is {data[i], target[i]}, views that share the tensors' memory.
class TensorDataset : public Dataset {
 public:
  // data: (N, ...), target: (N, ...); both on the cpu, with the same N.
  TensorDataset(Tensor data, Tensor target);
  Example<> get(size_t index) override;
  std::optional<size_t> size() const override;
  std::string name() const override;
  const Tensor& data() const { return data_; }
  const Tensor& target() const { return target_; }

 private:
  Tensor data_, target_;
};

// The seed for random augmentation of example `index` (random crops and
// flips). Inside a DataLoader it depends only on the loader's seed, the epoch
// and the index, so augmented batches are the same for any num_workers and
// any timing; outside a loader, on the index alone (epoch 0, seed 0).
uint64_t example_seed(size_t index);

namespace detail {
// What example_seed and get_worker_info read: set by the DataLoader on each
// thread that calls Dataset::get, for the duration of one epoch.
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

// Datasets: what a DataLoader draws examples from. A Dataset is map-style,
// as PyTorch's and libtorch's: its size, and one example by index. Examples
// are cpu tensors; the loader stacks them into batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/loader_state.h"
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
  // The whole dataset as two cpu tensors (N, ...) whose rows are the
  // examples, when get(i) is exactly {data[i], target[i]}: a DataLoader then
  // copies a batch's rows straight into it instead of calling get() per
  // example (5x faster for MNIST). nullopt (the default) when get() does
  // more; TensorDataset and MNIST answer only for their own exact type, so
  // a subclass that overrides get() is not bypassed.
  virtual std::optional<Example<>> stacked() const { return std::nullopt; }
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
  std::optional<Example<>> stacked() const override;
  const Tensor& data() const { return data_; }
  const Tensor& target() const { return target_; }

 private:
  Tensor data_, target_;
};

}  // namespace tandem::data

// TensorDataset: examples as slices of two tensors.
#include "data/dataset.h"

#include "tensor/core/errors.h"
#include "tensor/core/shape.h"

namespace tandem::data {

TensorDataset::TensorDataset(Tensor data, Tensor target) : data_(std::move(data)), target_(std::move(target)) {
  TANDEM_CHECK(data_.defined() && target_.defined(), ValueError,
               "TensorDataset: data and target must be defined tensors");
  TANDEM_CHECK(data_.dim() >= 1 && target_.dim() >= 1, ShapeError,
               "TensorDataset: data and target need a first dimension to index examples by; got shapes ",
               shape_str(data_.sizes()), " and ", shape_str(target_.sizes()));
  TANDEM_CHECK(data_.size(0) == target_.size(0), ShapeError, "TensorDataset: size mismatch between tensors: data has ",
               data_.size(0), " examples (shape ", shape_str(data_.sizes()), ") but target has ", target_.size(0),
               " (shape ", shape_str(target_.sizes()), ")");
  TANDEM_CHECK(data_.is_cpu() && target_.is_cpu(), DeviceError,
               "TensorDataset: data and target must be on the cpu (the DataLoader's `device` option moves batches); "
               "got data on ",
               data_.device().str(), " and target on ", target_.device().str());
}

Example<> TensorDataset::get(size_t index) {
  TANDEM_CHECK(index < static_cast<size_t>(data_.size(0)), IndexError, "TensorDataset: index ", index,
               " is out of range for ", data_.size(0), " examples");
  int64_t i = static_cast<int64_t>(index);
  return {data_.select(0, i), target_.select(0, i)};
}

std::optional<Example<>> TensorDataset::stacked() const {
  if (typeid(*this) != typeid(TensorDataset)) return std::nullopt;
  return Example<>{data_, target_};
}

std::optional<size_t> TensorDataset::size() const { return static_cast<size_t>(data_.size(0)); }

std::string TensorDataset::name() const {
  return tandem::detail::str_cat("TensorDataset(data ", shape_str(data_.sizes()), ", target ",
                                 shape_str(target_.sizes()), ")");
}

}  // namespace tandem::data

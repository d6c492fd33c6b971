// The MNIST family: MNIST and Fashion-MNIST, read from their four IDX files
// (gzip-compressed or not) into memory.
#pragma once

#include <array>
#include <string>

#include "data/dataset.h"

namespace tandem::data {

// Handwritten digits, or any dataset in MNIST's layout: root holds
// {train,t10k}-{images-idx3,labels-idx1}-ubyte, each with or without .gz.
// Example i: data = images()[i], a (1, H, W) uint8 image (0..255; add
// transforms::ToFloat for floats in 0..1), target = a 0-dim int64 label.
class MNIST : public Dataset {
 public:
  enum class Mode { kTrain, kTest };  // libtorch's spelling
  explicit MNIST(const std::string& root, bool train = true);
  MNIST(const std::string& root, Mode mode) : MNIST(root, mode == Mode::kTrain) {}

  Example<> get(size_t index) override;
  std::optional<size_t> size() const override;
  std::string name() const override;
  std::optional<Example<>> stacked() const override;

  const Tensor& images() const { return images_; }    // (N, 1, H, W) uint8
  const Tensor& targets() const { return targets_; }  // (N) int64
  bool is_train() const { return train_; }
  const std::string& root() const { return root_; }

 protected:
  // dataset_name names the dataset in errors and printing.
  MNIST(const std::string& root, bool train, std::string dataset_name, int64_t num_classes);

 private:
  std::string root_;
  bool train_;
  std::string dataset_name_;
  Tensor images_, targets_;
};

// Zalando's Fashion-MNIST: 60000 train and 10000 test 28x28 images of ten
// kinds of clothing. The default root is where Debian's
// dataset-fashion-mnist package puts it.
class FashionMNIST : public MNIST {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  static constexpr std::array<const char*, 10> kClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  explicit FashionMNIST(const std::string& root = kDefaultRoot, bool train = true);
  FashionMNIST(const std::string& root, Mode mode) : FashionMNIST(root, mode == Mode::kTrain) {}
};

}  // namespace tandem::data

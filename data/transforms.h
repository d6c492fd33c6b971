// Per-example transforms, as torchvision's: convert and scale, normalize,
// and the seeded random augmentations (horizontal flip, crop with padding).
// A TransformDataset applies one to every example a dataset gives.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "tensor/ops/random.h"

namespace tandem::data {

namespace transforms {

// A function of one example's data (an image (C, H, W), or any tensor the
// transform accepts). Random transforms draw from gen, so a seeded
// generator gives the same result every time. Transforms are values: copy
// them freely; Compose chains them.
class Transform {
 public:
  using Fn = std::function<Tensor(const Tensor& x, Generator& gen)>;
  // random: whether fn draws from gen (a transform of your own is taken to,
  // unless it says otherwise); see operator()(x).
  Transform(std::string name, Fn fn, bool random = true);
  Tensor operator()(const Tensor& x, Generator& gen) const { return fn_(x, gen); }
  // transform(x, Generator(data::example_seed(index))).
  Tensor operator()(const Tensor& x, Generator&& gen) const { return fn_(x, gen); }
  // Without a generator, as torchvision's transform(x): a random transform
  // draws from the cpu default generator (one Philox counter of it per call
  // seeds the call's own generator), so repeated calls differ and
  // tandem::manual_seed makes them repeatable. Inside a DataLoader the draws
  // would then depend on the threads' timing, not on the example: there a
  // random transform called this way throws ValueError (pass
  // Generator(data::example_seed(index))). One that draws nothing runs anywhere.
  Tensor operator()(const Tensor& x) const;
  // "Normalize(mean=[0.286], std=[0.353])", as torchvision prints it.
  const std::string& name() const { return name_; }
  bool random() const { return random_; }

 private:
  std::string name_;
  Fn fn_;
  bool random_;
};

// Converts to dtype (a floating one) and scales: uint8 pixels 0..255 become
// 0..1 with the default (torchvision's ToTensor, without the HWC to CHW
// transpose: our images are already (C, H, W)). When 1 / scale is an integer
// n (255 for the default) it divides by n, as torchvision's x.float().div(255),
// so the values are the same bits as torchvision's (multiplying by 1/255
// differs in the last bit for about half of the 256 pixel values); else it
// multiplies by scale.
struct ToFloat : Transform {
  explicit ToFloat(double scale = 1.0 / 255, Dtype dtype = kFloat32);
};

// (x - mean[c]) / std[c] for each channel c of a floating (C, H, W) image;
// one value each applies to every channel.
struct Normalize : Transform {
  Normalize(std::vector<double> mean, std::vector<double> std);
};

// Flips the last dimension with probability p.
struct RandomHorizontalFlip : Transform {
  explicit RandomHorizontalFlip(double p = 0.5);
};

// Pads the last two dimensions with `padding` zeros on every side, then
// crops a (size, size) / (height, width) window at a uniformly drawn offset.
struct RandomCrop : Transform {
  explicit RandomCrop(int64_t size, int64_t padding = 0);
  RandomCrop(int64_t height, int64_t width, int64_t padding);
};

// Any function of the data, named for printing.
struct Lambda : Transform {
  Lambda(std::string name, std::function<Tensor(const Tensor&)> fn);
};

// The transforms in order, drawing from one generator; random when any of
// them is.
struct Compose : Transform {
  explicit Compose(std::vector<Transform> transforms);
};

}  // namespace transforms

// base with a transform applied to each example's data (the target is left
// as it is). Random transforms draw from a generator seeded by
// mix_seed(example_seed(index), depth(), kSeedSalt): inside a DataLoader,
// augmented batches depend only on the loader's seed, the epoch and the
// index. The depth and the salt keep the draws apart from those of a nested
// TransformDataset (two nested RandomHorizontalFlip(0.5) would otherwise
// always flip together and cancel out) and from a dataset of your own that
// draws from Generator(example_seed(index)).
class TransformDataset : public Dataset {
 public:
  static constexpr uint64_t kSeedSalt = 0x5452414E53464F52ull;  // "TRANSFOR"

  TransformDataset(std::shared_ptr<Dataset> base, transforms::Transform transform);
  template <typename D>
  requires std::derived_from<D, Dataset> TransformDataset(D base, transforms::Transform transform)
      : TransformDataset(std::make_shared<D>(std::move(base)), std::move(transform)) {}

  Example<> get(size_t index) override;
  std::optional<size_t> size() const override { return base_->size(); }
  std::string name() const override;
  const std::shared_ptr<Dataset>& base() const { return base_; }
  const transforms::Transform& transform() const { return transform_; }
  // 0, or the base's depth + 1 when the base is itself a TransformDataset.
  // Only a direct base counts: another wrapper in between hides the nesting.
  uint64_t depth() const { return depth_; }

 private:
  std::shared_ptr<Dataset> base_;
  transforms::Transform transform_;
  uint64_t depth_ = 0;
};

}  // namespace tandem::data

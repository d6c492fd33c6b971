// MNIST and Fashion-MNIST (data/mnist.h): the image and label IDX files of
// one split read into memory and checked against each other.
#include "data/mnist.h"

#include <filesystem>

#include "data/idx.h"
#include "tensor/core/errors.h"
#include "tensor/core/shape.h"

namespace tandem::data {

namespace {

// Whether path exists; an error when that cannot be told (no permission to
// search the folder, a symlink loop), rather than "cannot find".
bool file_exists(const std::string& path, const std::string& dataset_name) {
  std::error_code ec;
  bool exists = std::filesystem::exists(path, ec);
  TANDEM_CHECK(!ec, SerializationError, dataset_name, ": cannot tell whether '", path, "' exists: ", ec.message());
  return exists;
}

// root/name.gz when it exists, else root/name; an error listing both when
// neither does. When both exist the .gz one is read: a folder torchvision's
// MNIST downloaded into holds both, with the same data.
std::string find_file(const std::string& root, const std::string& name, const std::string& dataset_name) {
  std::string plain = (std::filesystem::path(root) / name).string();
  std::string gz = plain + ".gz";
  if (file_exists(gz, dataset_name)) return gz;
  if (file_exists(plain, dataset_name)) return plain;
  std::string hint =
      dataset_name != "FashionMNIST" ? "pass the folder that holds the files (gzip-compressed or not)"
      : root == FashionMNIST::kDefaultRoot
          ? "install Debian's dataset-fashion-mnist package (apt install dataset-fashion-mnist), or "
            "pass the folder that holds the files"
          : tandem::detail::str_cat("pass the folder that holds the files (Debian's dataset-fashion-mnist ",
                                    "package puts them in ", FashionMNIST::kDefaultRoot, ")");
  TANDEM_CHECK(false, SerializationError, dataset_name, ": cannot find ", name, " in '", root, "': tried '", gz,
               "' and '", plain, "'; ", hint);
}

}  // namespace

MNIST::MNIST(const std::string& root, bool train) : MNIST(root, train, "MNIST", 10) {}

MNIST::MNIST(const std::string& root, bool train, std::string dataset_name, int64_t num_classes)
    : root_(root), train_(train), dataset_name_(std::move(dataset_name)) {
  const char* prefix = train ? "train" : "t10k";
  std::string images_path = find_file(root, tandem::detail::str_cat(prefix, "-images-idx3-ubyte"), dataset_name_);
  std::string labels_path = find_file(root, tandem::detail::str_cat(prefix, "-labels-idx1-ubyte"), dataset_name_);
  const std::string& name = dataset_name_;

  Tensor images = read_idx(images_path);  // (N, H, W) uint8
  TANDEM_CHECK(images.dtype() == kUInt8 && images.dim() == 3, SerializationError, name, ": '", images_path,
               "' should hold uint8 images (N, H, W), but holds ", dtype_name(images.dtype()), " values of shape ",
               shape_str(images.sizes()));
  Tensor labels = read_idx(labels_path);  // (N) uint8
  TANDEM_CHECK(labels.dtype() == kUInt8 && labels.dim() == 1, SerializationError, name, ": '", labels_path,
               "' should hold uint8 labels (N), but holds ", dtype_name(labels.dtype()), " values of shape ",
               shape_str(labels.sizes()));
  TANDEM_CHECK(images.size(0) == labels.size(0), SerializationError, name, ": '", images_path, "' holds ",
               images.size(0), " images but '", labels_path, "' holds ", labels.size(0),
               " labels; the two files must come from the same split");

  const uint8_t* label = labels.data_ptr<uint8_t>();
  for (int64_t i = 0; i < labels.numel(); ++i) {
    TANDEM_CHECK(label[i] < num_classes, SerializationError, name, ": '", labels_path, "': label ", i, " is ",
                 static_cast<int>(label[i]), ", but ", name, " has ", num_classes, " classes (labels 0 to ",
                 num_classes - 1, ")");
  }
  images_ = images.view({images.size(0), 1, images.size(1), images.size(2)});
  targets_ = labels.to(kInt64);
}

Example<> MNIST::get(size_t index) {
  TANDEM_CHECK(index < static_cast<size_t>(images_.size(0)), IndexError, dataset_name_, ": index ", index,
               " is out of range for ", images_.size(0), " examples");
  auto i = static_cast<int64_t>(index);
  return {images_.select(0, i), targets_.select(0, i)};
}

std::optional<Example<>> MNIST::stacked() const {
  if (typeid(*this) != typeid(MNIST) && typeid(*this) != typeid(FashionMNIST)) return std::nullopt;
  return Example<>{images_, targets_};
}

std::optional<size_t> MNIST::size() const { return static_cast<size_t>(images_.size(0)); }

std::string MNIST::name() const {
  return tandem::detail::str_cat(dataset_name_, "(", train_ ? "train" : "test", ", ", images_.size(0), " examples)");
}

FashionMNIST::FashionMNIST(const std::string& root, bool train) : MNIST(root, train, "FashionMNIST", 10) {}

}  // namespace tandem::data

// Tensor: a reference-counted handle to a strided view (sizes, strides,
// offset, dtype) of a Storage on one device. Copying a Tensor shares the data,
// as in libtorch. The core members are defined in tensor/core; the op members
// (add, sum, view, to, ...) are defined by the op layer in tensor/ops.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/core/device.h"
#include "tensor/core/dtype.h"
#include "tensor/core/int_array_ref.h"
#include "tensor/core/origin.h"
#include "tensor/core/scalar.h"
#include "tensor/core/storage.h"

namespace tandem {

// Options for factories and conversions, in libtorch's builder style:
// TensorOptions().dtype(kFloat64).device("cuda:0"). Unset fields mean
// "the default" (float32, cpu) for factories and "unchanged" for .to().
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(Dtype d) : dtype_(d) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions(DeviceType t) : device_(Device(t)) {}
  TensorOptions(const char* device) : device_(Device(device)) {}

  TensorOptions dtype(Dtype d) const {
    auto o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions pinned_memory(bool p) const {
    auto o = *this;
    o.pinned_ = p;
    return o;
  }
  // Factories make a leaf that requires grad (floating dtypes only).
  TensorOptions requires_grad(bool r) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }

  Dtype dtype() const { return dtype_.value_or(kFloat32); }
  Device device() const { return device_.value_or(Device(kCPU)); }
  bool pinned_memory() const { return pinned_; }
  bool requires_grad() const { return requires_grad_; }
  bool has_dtype() const { return dtype_.has_value(); }
  bool has_device() const { return device_.has_value(); }

 private:
  std::optional<Dtype> dtype_;
  std::optional<Device> device_;
  bool pinned_ = false;
  bool requires_grad_ = false;
};

inline TensorOptions dtype(Dtype d) { return TensorOptions(d); }
inline TensorOptions device(Device d) { return TensorOptions(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

namespace cuda {
class Stream;
}
namespace autograd {
struct AutogradMeta;
class Node;
}  // namespace autograd

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  Dtype dtype = kFloat32;
  Origin origin;
  std::shared_ptr<autograd::AutogradMeta> autograd;  // null until autograd needs it (tensor/core/autograd_meta.h)
  // Views (detail::make_view): the tensor that owns the memory they view,
  // its history counter when the view was made (AutogradMeta::history), and
  // whether grad mode was off then. Autograd needs them when a view or its
  // base is changed in place.
  std::shared_ptr<TensorImpl> view_base;
  uint64_t view_base_history = 0;
  bool view_made_without_grad = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- core (tensor/core/tensor.cpp)
  bool defined() const { return impl_ != nullptr; }
  IntArrayRef sizes() const;
  IntArrayRef strides() const;
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t ndimension() const { return dim(); }
  int64_t numel() const;
  int64_t storage_offset() const;
  Dtype dtype() const;
  Dtype scalar_type() const { return dtype(); }
  Device device() const;
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_floating_point() const { return tandem::is_floating_point(dtype()); }
  bool is_contiguous() const;
  bool is_pinned() const;
  size_t element_size() const { return tandem::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  const Origin& origin() const;
  void set_origin(const Origin& origin) const;
  const std::shared_ptr<Storage>& storage() const;
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  bool shares_storage(const Tensor& other) const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& shared_impl() const { return impl_; }
  long use_count() const { return impl_.use_count(); }

  // Raw pointer to the first element (offset applied). Host-readable only for
  // cpu tensors and emulated cuda tensors.
  void* data_ptr() const;
  template <typename T>
  T* data_ptr() const {
    check_data_dtype(dtype_of<T>);
    return static_cast<T*>(data_ptr());
  }

  // ---- autograd (tensor/core/tensor_autograd.cpp; backward in autograd/autograd.cpp)
  // A non-leaf requires grad through its grad_fn; a leaf when asked to.
  bool requires_grad() const;
  // Marks a leaf as requiring grad (floating dtypes only); false only on leaves.
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor& set_requires_grad(bool requires_grad) { return requires_grad_(requires_grad); }
  // The gradient accumulated by backward passes: on the tensor's device, of its
  // dtype and shape; undefined until a pass reaches it. Leaves only, unless
  // retain_grad() was called.
  const Tensor& grad() const;
  Tensor& mutable_grad() const;
  // The node that computed this tensor; null for leaves.
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const;
  uint32_t output_nr() const;
  // Keeps this non-leaf's gradient in grad() after backward.
  void retain_grad() const;
  bool retains_grad() const;
  // The same data with no history: a view that never requires grad.
  Tensor detach() const;
  Tensor& detach_();
  // The storage's version counter: bumped by every in-place write.
  uint64_t _version() const;
  // Gives this tensor new_data's storage, shape, dtype, device and origin,
  // keeping its identity and autograd state (requires_grad, grad): how
  // nn::Module::to() moves parameters so that every handle to them, an
  // optimizer's included, sees the move.
  void set_data(const Tensor& new_data) const;
  // Backward pass from this tensor: gradient is d(loss)/d(this), required
  // unless this has one element; retain_graph defaults to create_graph.
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                const std::vector<Tensor>& inputs = {}) const;

  // ---- conversions (tensor/ops/convert.cpp)
  Tensor to(Device device, bool non_blocking = false, bool copy = false,
            std::source_location loc = std::source_location::current()) const;
  Tensor to(Dtype dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, Dtype dtype, bool non_blocking = false, bool copy = false,
            std::source_location loc = std::source_location::current()) const;
  Tensor to(const TensorOptions& options, bool non_blocking = false, bool copy = false,
            std::source_location loc = std::source_location::current()) const;
  Tensor to(const char* device, std::source_location loc = std::source_location::current()) const {
    return to(Device(device), false, false, loc);
  }
  Tensor cpu(std::source_location loc = std::source_location::current()) const;
  Tensor cuda(int index = -1, std::source_location loc = std::source_location::current()) const;
  Tensor& copy_(const Tensor& src, bool non_blocking = false);

  // ---- pinned memory and streams (tensor/ops/cuda.cpp)
  // This cpu tensor in pinned host memory, from the pinned caching allocator
  // (itself when already pinned): copies from it to a GPU can be asynchronous.
  Tensor pin_memory() const;
  // The tensor's memory is also used by work queued on stream (not the one
  // it was allocated on): its block waits for that work before reuse.
  void record_stream(const cuda::Stream& stream) const;
  Scalar item() const;
  template <typename T>
  T item() const {
    return item().to<T>();
  }
  // Copies the elements out, in row-major order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const {
    Tensor host = to(Device(kCPU)).to(dtype_of<T>).contiguous();
    const T* p = host.data_ptr<T>();
    return std::vector<T>(p, p + host.numel());
  }
  std::string str() const;  // PyTorch's repr: tensor([...], device='cuda:0')

  // ---- views (tensor/ops/views.cpp)
  Tensor view(IntArrayRef shape) const;
  Tensor reshape(IntArrayRef shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor permute(IntArrayRef dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor expand(IntArrayRef shape) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  Tensor reshape_as(const Tensor& other) const { return reshape(other.sizes()); }

  // ---- elementwise (tensor/ops/elementwise.cpp)
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu(const std::string& approximate = "none") const;
  Tensor silu() const;
  Tensor erf() const;
  Tensor pow(const Scalar& exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor& neg_();
  Tensor& abs_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& sqrt_();
  Tensor& sigmoid_();
  Tensor& tanh_();
  Tensor& relu_();
  Tensor& pow_(const Scalar& exponent);

  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor& zero_();
  Tensor& fill_(const Scalar& value);

  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Scalar& other) const;

  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor clamp_min(const Scalar& min) const;
  Tensor clamp_max(const Scalar& max) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);

  // ---- reductions (tensor/ops/reduce.cpp)
  Tensor sum(std::optional<Dtype> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dims, bool keepdim = false, std::optional<Dtype> dtype = std::nullopt) const;
  Tensor mean(std::optional<Dtype> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dims, bool keepdim = false, std::optional<Dtype> dtype = std::nullopt) const;
  Tensor prod(std::optional<Dtype> dtype = std::nullopt) const;
  Tensor prod(int64_t dim, bool keepdim = false, std::optional<Dtype> dtype = std::nullopt) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor norm(const Scalar& p = 2, IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor softmax(int64_t dim, std::optional<Dtype> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<Dtype> dtype = std::nullopt) const;
  Tensor logsumexp(IntArrayRef dims, bool keepdim = false) const;

  // ---- linear algebra and indexing (tensor/ops/linalg.cpp, tensor/ops/index.cpp)
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(IntArrayRef split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor index_select(int64_t dim, const Tensor& index) const;

 private:
  void check_data_dtype(Dtype requested) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace tandem

// The core members of Tensor: metadata queries and raw data access.
#include "tensor/core/tensor.h"

#include <mutex>
#include <ostream>
#include <unordered_set>

#include "tensor/core/shape.h"

namespace tandem {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  TANDEM_CHECK(impl != nullptr, ValueError,
               "This tensor is undefined (default-constructed); assign a tensor to it before use");
  return *impl;
}
}  // namespace

IntArrayRef Tensor::sizes() const { return checked(impl_).sizes; }
IntArrayRef Tensor::strides() const { return checked(impl_).strides; }
int64_t Tensor::dim() const { return static_cast<int64_t>(checked(impl_).sizes.size()); }
int64_t Tensor::size(int64_t d) const { return impl_->sizes[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl_->strides[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::numel() const { return shape_numel(checked(impl_).sizes); }
int64_t Tensor::storage_offset() const { return checked(impl_).offset; }
Dtype Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device(); }
bool Tensor::is_pinned() const { return checked(impl_).storage->is_pinned(); }
const Origin& Tensor::origin() const { return checked(impl_).origin; }
void Tensor::set_origin(const Origin& origin) const { impl_->origin = origin; }
const std::shared_ptr<Storage>& Tensor::storage() const { return checked(impl_).storage; }

bool Tensor::shares_storage(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage == other.impl_->storage;
}

bool Tensor::is_contiguous() const {
  const TensorImpl& t = checked(impl_);
  return strides_are_contiguous(t.sizes, t.strides);
}

void* Tensor::data_ptr() const {
  const TensorImpl& t = checked(impl_);
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<int64_t>(tandem::element_size(t.dtype));
}

void Tensor::check_data_dtype(Dtype requested) const {
  TANDEM_CHECK(dtype() == requested, DtypeError, "data_ptr<", dtype_name(requested), ">() called on a tensor of dtype ",
               dtype_name(dtype()), "; convert first with .to(", dtype_name(requested), ")");
}

std::string Origin::describe() const {
  auto where = [&]() { return detail::str_cat(" at ", file, ":", line); };
  auto verb = [](Kind k) { return k == Kind::Moved ? "moved by " : "created by "; };
  const std::string named = label != nullptr ? detail::str_cat(label, ", ") : std::string();
  switch (kind) {
    case Kind::Unknown: return label != nullptr ? std::string(label) : "of unknown origin";
    case Kind::Created:
    case Kind::Moved: return detail::str_cat(named, verb(kind), op, where());
    case Kind::Computed: {
      if (root_kind == Kind::Unknown) return detail::str_cat(named, "computed by ", op);
      const std::string root = root_label != nullptr ? detail::str_cat(root_label, ", ") : "a tensor ";
      return detail::str_cat(named, "computed by ", op, " from ", root, verb(root_kind), root_op, where());
    }
  }
  return "";
}

const char* intern_label(const std::string& text) {
  static std::mutex mutex;
  static std::unordered_set<std::string> labels;  // node-based: pointers stay valid
  std::lock_guard<std::mutex> lock(mutex);
  return labels.insert(text).first->c_str();
}

std::string shape_str(IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}
std::ostream& operator<<(std::ostream& os, IntArrayRef shape) { return os << shape_str(shape); }

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return os << (s.to<bool>() ? "True" : "False");
    case Scalar::Kind::Int: return os << s.to<int64_t>();
    case Scalar::Kind::Float: return os << s.to<double>();
  }
  return os;
}

}  // namespace tandem

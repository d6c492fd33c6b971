// Factories: tensors made from sizes, values, ranges, random numbers or
// existing memory. Each records where it was called (std::source_location)
// so that device errors can point at the line that made a tensor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <vector>

#include "tensor/core/tensor.h"

namespace tandem {

using SourceLoc = std::source_location;

Tensor empty(IntArrayRef sizes, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor zeros(IntArrayRef sizes, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor ones(IntArrayRef sizes, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
// dtype defaults to the value's kind (bool, int64 or float32), as torch.full.
Tensor full(IntArrayRef sizes, const Scalar& value, const TensorOptions& options = {},
            SourceLoc loc = SourceLoc::current());
Tensor empty_like(const Tensor& t, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor zeros_like(const Tensor& t, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor ones_like(const Tensor& t, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor full_like(const Tensor& t, const Scalar& value, const TensorOptions& options = {},
                 SourceLoc loc = SourceLoc::current());

// [start, end) by step; dtype int64 when all three are integers, else float32.
Tensor arange(const Scalar& end, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, const TensorOptions& options = {},
              SourceLoc loc = SourceLoc::current());
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, const TensorOptions& options = {},
                SourceLoc loc = SourceLoc::current());
Tensor eye(int64_t n, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor eye(int64_t n, int64_t m, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());

// Random numbers from the default Philox generator (see tensor/ops/random.h).
Tensor rand(IntArrayRef sizes, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor randn(IntArrayRef sizes, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
// Integers uniform in [low, high); dtype int64 unless given.
Tensor randint(int64_t high, IntArrayRef sizes, const TensorOptions& options = {},
               SourceLoc loc = SourceLoc::current());
Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, const TensorOptions& options = {},
               SourceLoc loc = SourceLoc::current());
Tensor rand_like(const Tensor& t, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor randn_like(const Tensor& t, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());

// Nested braced lists of numbers: tensor({{1, 2}, {3, 4}}) is a 2x2 int64
// tensor, tensor({1.5, 2.0}) a float32 one (dtype from the values, as torch).
class TensorData {
 public:
  TensorData(bool v) : scalar_(v), is_scalar_(true) {}
  TensorData(int v) : scalar_(v), is_scalar_(true) {}
  TensorData(int64_t v) : scalar_(v), is_scalar_(true) {}
  TensorData(float v) : scalar_(v), is_scalar_(true) {}
  TensorData(double v) : scalar_(v), is_scalar_(true) {}
  TensorData(std::initializer_list<TensorData> list) : list_(list) {}
  template <typename T>
  TensorData(const std::vector<T>& v) {
    for (const T& x : v) list_.emplace_back(TensorData(x));
  }

  bool is_scalar() const { return is_scalar_; }
  const Scalar& scalar() const { return scalar_; }
  const std::vector<TensorData>& list() const { return list_; }

 private:
  Scalar scalar_;
  bool is_scalar_ = false;
  std::vector<TensorData> list_;
};

Tensor tensor(const TensorData& data, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());

// Wraps memory the caller owns (host memory for cpu, device memory for cuda)
// without copying; the caller keeps it alive while the tensor lives.
Tensor from_blob(void* data, IntArrayRef sizes, const TensorOptions& options = {},
                 SourceLoc loc = SourceLoc::current());
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, const TensorOptions& options = {},
                 SourceLoc loc = SourceLoc::current());

namespace detail {
// A new contiguous tensor for an op's result on an already-resolved device.
Tensor make_result(IntArrayRef sizes, Dtype dtype, Device device, const Origin& origin, bool pinned = false);
// A new contiguous tensor made by factory `op` (e.g. "tandem::zeros") called
// at loc: resolves the device, checks pinning, records Origin::created.
Tensor create(const char* op, IntArrayRef sizes, const TensorOptions& options, const SourceLoc& loc);
// A strided view sharing t's storage, with the origin of t. Made while grad
// mode is on, the view remembers t's base for autograd (in-place ops on it).
Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset);
// The factory's result, made a leaf that requires grad when options ask.
Tensor finish_factory(Tensor t, const TensorOptions& options);
}  // namespace detail

}  // namespace tandem

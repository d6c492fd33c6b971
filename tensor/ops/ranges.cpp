// Front end of the value factories: arange, linspace, eye and tensor() from
// nested lists (checks, dtype inference, allocation, dispatch).
#include "kernels/ranges.h"

#include <cmath>
#include <limits>
#include <vector>

#include "tensor/core/shape.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"

namespace tandem {

namespace {

// Whether v converts to dtype d without overflow (c10's checked_convert):
// integers must land in the integer dtype's range after truncation; floats
// overflow to inf as in torch; any value converts to bool.
bool fits(const Scalar& v, Dtype d) {
  if (!is_integral(d, false)) return true;
  double lo = 0, hi = 0;
  switch (d) {
    case kUInt8:
      lo = 0;
      hi = 255;
      break;
    case kInt32:
      lo = std::numeric_limits<int32_t>::min();
      hi = std::numeric_limits<int32_t>::max();
      break;
    default:
      return !v.is_floating_point() || (std::trunc(v.to_double()) >= -0x1p63 && std::trunc(v.to_double()) < 0x1p63);
  }
  double x = v.is_floating_point() ? std::trunc(v.to_double()) : static_cast<double>(v.to_int());
  return x >= lo && x <= hi;  // false for NaN
}

void check_fits(const char* op, const Scalar& v, Dtype d) {
  TANDEM_CHECK(fits(v, d), ValueError, op, ": value ", v, " cannot be converted to type ", dtype_name(d),
               " without overflow");
}

void check_not_bool(const char* op, const char* kernel, Dtype d) {
  TANDEM_CHECK(d != kBool, DtypeError, "\"", kernel, "\" not implemented for 'Bool': ", op, " needs a numeric dtype");
}

bool integral_scalar(const Scalar& s) { return !s.is_floating_point(); }

}  // namespace

// ---------------------------------------------------------------- arange

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, const TensorOptions& options, SourceLoc loc) {
  Dtype dt = options.has_dtype()                                                       ? options.dtype()
             : integral_scalar(start) && integral_scalar(end) && integral_scalar(step) ? kInt64
                                                                                       : kFloat32;
  check_not_bool("arange", "arange_cpu", dt);
  int64_t size = 0;
  if (is_integral(dt, false)) {
    // Integer dtypes count in int64 from the truncated bounds, as torch does.
    int64_t a = start.to<int64_t>(), z = end.to<int64_t>(), s = step.to<int64_t>();
    TANDEM_CHECK(s != 0, ValueError, "step must be nonzero: arange got start=", start, ", end=", end, ", step=", step,
                 " (", dtype_name(dt), " truncates it to 0)");
    TANDEM_CHECK((s > 0 && z >= a) || (s < 0 && z <= a), ValueError,
                 "upper bound and larger bound inconsistent with step sign: arange got start=", start, ", end=", end,
                 ", step=", step);
    int64_t sign = s > 0 ? 1 : -1;
    size = (z - a + s - sign) / s;
    if (size > 0) {
      check_fits("arange", a, dt);
      check_fits("arange", a + s * (size - 1), dt);
    }
  } else {
    double a = start.to_double(), z = end.to_double(), s = step.to_double();
    TANDEM_CHECK(s > 0 || s < 0, ValueError, "step must be nonzero: arange got start=", start, ", end=", end,
                 ", step=", step);
    TANDEM_CHECK(std::isfinite(a) && std::isfinite(z), ValueError, "unsupported range: ", a, " -> ", z,
                 " (arange needs a finite start and end)");
    TANDEM_CHECK((s > 0 && z >= a) || (s < 0 && z <= a), ValueError,
                 "upper bound and larger bound inconsistent with step sign: arange got start=", start, ", end=", end,
                 ", step=", step);
    double size_d = std::ceil((z - a) / s);
    TANDEM_CHECK(size_d >= 0 && size_d < 0x1p63, ValueError, "invalid size, possible overflow?: arange from ", a,
                 " to ", z, " by ", s, " would have ", size_d, " elements");
    size = static_cast<int64_t>(size_d);
  }
  Tensor out = detail::create("tandem::arange", {size}, options.dtype(dt), loc);
  dispatch(out.device(), cpu::arange, cuda::arange, out, start, step);
  return detail::finish_factory(out, options.dtype(dt));
}

Tensor arange(const Scalar& end, const TensorOptions& options, SourceLoc loc) {
  return arange(Scalar(int64_t{0}), end, Scalar(int64_t{1}), options, loc);
}

// ---------------------------------------------------------------- linspace

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, const TensorOptions& options, SourceLoc loc) {
  Dtype dt = options.dtype();
  TANDEM_CHECK(steps >= 0, ValueError, "number of steps must be non-negative: linspace got steps=", steps);
  check_not_bool("linspace", "linspace_cpu", dt);
  check_fits("linspace", start, dt);
  check_fits("linspace", end, dt);
  Tensor out = detail::create("tandem::linspace", {steps}, options.dtype(dt), loc);
  dispatch(out.device(), cpu::linspace, cuda::linspace, out, start, end);
  return detail::finish_factory(out, options.dtype(dt));
}

// ---------------------------------------------------------------- eye

Tensor eye(int64_t n, int64_t m, const TensorOptions& options, SourceLoc loc) {
  TANDEM_CHECK(n >= 0, ValueError, "n must be greater or equal to 0, got ", n);
  TANDEM_CHECK(m >= 0, ValueError, "m must be greater or equal to 0, got ", m);
  Tensor out = detail::create("tandem::eye", {n, m}, options, loc);
  dispatch(out.device(), cpu::eye, cuda::eye, out);
  return detail::finish_factory(out, options);
}

Tensor eye(int64_t n, const TensorOptions& options, SourceLoc loc) { return eye(n, n, options, loc); }

// ---------------------------------------------------------------- tensor()
namespace {

// The shape read along the first element at every depth.
Shape leading_shape(const TensorData& data) {
  Shape shape;
  for (const TensorData* node = &data; !node->is_scalar(); node = &node->list()[0]) {
    shape.push_back(static_cast<int64_t>(node->list().size()));
    if (node->list().empty()) break;
  }
  return shape;
}

// Checks that data is a regular nesting of `shape` and appends its numbers in
// row-major order.
void flatten(const TensorData& data, const Shape& shape, size_t dim, std::vector<Scalar>& out) {
  if (dim == shape.size()) {
    TANDEM_CHECK(data.is_scalar(), ShapeError, "tensor: expected a number at dim ", dim, " (got a sequence of length ",
                 data.list().size(), ")");
    out.push_back(data.scalar());
    return;
  }
  TANDEM_CHECK(!data.is_scalar(), ShapeError, "tensor: expected sequence of length ", shape[dim], " at dim ", dim,
               " (got the number ", data.scalar(), ")");
  TANDEM_CHECK(static_cast<int64_t>(data.list().size()) == shape[dim], ShapeError,
               "tensor: expected sequence of length ", shape[dim], " at dim ", dim, " (got ", data.list().size(), ")");
  for (const TensorData& child : data.list()) flatten(child, shape, dim + 1, out);
}

// torch.tensor's inference: any float makes float32, else any integer
// int64, else bool; no values at all make float32.
Dtype infer_dtype(const std::vector<Scalar>& values) {
  bool any_float = false, any_int = false;
  for (const Scalar& v : values) {
    any_float |= v.is_floating_point();
    any_int |= v.is_integral();
  }
  if (any_float || values.empty()) return kFloat32;
  return any_int ? kInt64 : kBool;
}

}  // namespace

Tensor tensor(const TensorData& data, const TensorOptions& options, SourceLoc loc) {
  Shape shape = leading_shape(data);
  std::vector<Scalar> values;
  flatten(data, shape, 0, values);
  Dtype dt = options.has_dtype() ? options.dtype() : infer_dtype(values);
  for (const Scalar& v : values) check_fits("tensor", v, dt);
  // Converted on the host, then copied to the device in one transfer.
  std::vector<unsigned char> host(values.size() * element_size(dt));
  dispatch_all(dt, "tensor", [&]<typename T>() {
    T* p = reinterpret_cast<T*>(host.data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i].to<T>();
  });
  Tensor out = detail::create("tandem::tensor", shape, options.dtype(dt), loc);
  copy_bytes(out.data_ptr(), out.device(), host.data(), Device(kCPU), host.size());
  return detail::finish_factory(out, options.dtype(dt));
}

}  // namespace tandem

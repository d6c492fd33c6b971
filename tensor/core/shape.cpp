// Shape arithmetic.
#include "tensor/core/shape.h"

#include <algorithm>

namespace tandem {

int64_t shape_numel(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Shape contiguous_strides(IntArrayRef sizes) {
  Shape strides(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

bool strides_are_contiguous(IntArrayRef sizes, IntArrayRef strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  TANDEM_CHECK(dim >= -n && dim < n, IndexError, op, ": dimension out of range (expected to be in range of [", -n, ", ",
               n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TANDEM_CHECK(da == db || da == 1 || db == 1, ShapeError, op, ": the size of tensor a (", da,
                 ") must match the size of tensor b (", db, ") at non-singleton dimension ", i, " (shapes ",
                 shape_str(a), " and ", shape_str(b), " cannot be broadcast together)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef target) {
  Shape out(target.size(), 0);
  size_t lead = target.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i) out[lead + i] = (sizes[i] == 1 && target[lead + i] != 1) ? 0 : strides[i];
  return out;
}

std::vector<int64_t> reduction_dims(IntArrayRef dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    TANDEM_CHECK(std::find(out.begin(), out.end(), w) == out.end(), ValueError, op, ": dim ", w,
                 " appears multiple times in the list of dims");
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  // A 0-dim tensor reduced over dim 0/-1 reduces over nothing.
  if (ndim == 0) out.clear();
  return out;
}

DimSplit split_at_dim(IntArrayRef sizes, int64_t dim) {
  DimSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d < dim)
      s.outer *= sizes[d];
    else if (d == dim)
      s.size = sizes[d];
    else
      s.inner *= sizes[d];
  }
  return s;
}

}  // namespace tandem

// Shape arithmetic shared by the op front end and the kernels: element
// counts, contiguous strides, dim wrapping and broadcasting.
#pragma once

#include <cstdint>

#include "tensor/core/errors.h"
#include "tensor/core/int_array_ref.h"

namespace tandem {

int64_t shape_numel(IntArrayRef sizes);
Shape contiguous_strides(IntArrayRef sizes);
bool strides_are_contiguous(IntArrayRef sizes, IntArrayRef strides);

// Maps dim in [-ndim, ndim) to [0, ndim); otherwise IndexError naming op.
// A 0-dim tensor accepts dims 0 and -1, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// The broadcast shape of a and b (numpy rules) or a ShapeError naming op.
Shape broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op);

// Strides that view a tensor of (sizes, strides) as the larger `target`
// shape: 0 on broadcast dims. The shapes must be broadcast-compatible.
Shape broadcast_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef target);

// Sorted, wrapped, de-duplicated reduction dims; empty input means all dims.
std::vector<int64_t> reduction_dims(IntArrayRef dims, int64_t ndim, const char* op);

// A contiguous shape seen as (outer, size, inner) around dim: the element at
// (o, i, k) lies at (o * size + i) * inner + k. dim must be valid.
struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
DimSplit split_at_dim(IntArrayRef sizes, int64_t dim);

}  // namespace tandem

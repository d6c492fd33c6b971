// The parameters an autograd node keeps for its rule, one struct per kind of
// node: the op front end stores it as node.payload, the rule in autograd/
// reads it back with node.params<P>(). Nodes with none (View, Expand, Mm,
// AdaptiveAvgPool2d, ...) leave the payload empty. Two families keep structs
// defined elsewhere: the op table's unary ops their UnaryParams
// (tensor/core/op_table.h), Convolution its Conv2dParams and the max and
// average pooling nodes their Pool2dParams (kernels/functors/conv.h), the
// structs their kernels take.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tensor/core/int_array_ref.h"
#include "tensor/core/op_table.h"
#include "tensor/core/scalar.h"

namespace tandem::autograd {

// Add, Sub: out = a + alpha * b (a - alpha * b).
struct AddParams {
  Scalar alpha = 1;
};

// The reductions (Sum, Mean, Prod, MaxAll, MinAll, MaxDim, MinDim, Amax, Amin,
// Var, Std, Norm, LogSumExp): the reduced dims, wrapped and sorted (every dim
// for a full reduction, none for a 0-dim input), whether they were kept, and
// the kernel's parameters (Var, Std: correction; Norm: p).
struct ReductionParams {
  std::vector<int64_t> dims;
  bool keepdim = false;
  ReduceParams reduce;
};

// One dim, wrapped: Softmax and LogSoftmax (the softmax dim), Stack (the new
// dim), Gather, ScatterAdd and IndexSelect (the indexed dim).
struct DimParams {
  int64_t dim = 0;
};

// Permute: output dim i is input dim dims[i] (wrapped).
struct PermuteParams {
  std::vector<int64_t> dims;
};

// Transpose, T: the two dims swapped, wrapped ({0, 0} for a 0-dim tensor).
struct TransposeParams {
  int64_t dim0 = 0, dim1 = 0;
};

// Slice: input[start:end:step] along dim, wrapped and clamped.
struct SliceParams {
  int64_t dim = 0, start = 0, end = 0, step = 1;
};

// Select: input[index] along dim, wrapped.
struct SelectParams {
  int64_t dim = 0, index = 0;
};

// The sizes and strides (in elements) of a tensor in storage.
struct Strided {
  Shape sizes, strides;
};

// AsStrided, CopySlices: a view and its base, laid out in the base's storage.
// offset: the view's storage offset minus the base's; extent: how many
// storage elements the base spans from its first (0 when it is empty).
struct ViewGeometry {
  Strided base, view;
  int64_t offset = 0;
  int64_t extent = 0;
};

// Cat: the dim, and each input's size along it, or nullopt for an input cat
// skipped (1-D and empty: its gradient is an empty [0]).
struct CatParams {
  int64_t dim = 0;
  std::vector<std::optional<int64_t>> sizes;
};

// BatchNorm: whether the batch's statistics were used (else the running
// ones), and eps.
struct BatchNormParams {
  bool training = false;
  double eps = 0;
};

// LayerNorm: the normalised trailing sizes, and eps.
struct LayerNormParams {
  Shape normalized_shape;
  double eps = 0;
};

// Embedding: the table's rows, the row whose gradient stays zero (wrapped)
// if any, and whether a row's gradient is divided by its count in the batch.
struct EmbeddingParams {
  int64_t num_weights = 0;
  std::optional<int64_t> padding_idx;
  bool scale_grad_by_freq = false;
};

}  // namespace tandem::autograd

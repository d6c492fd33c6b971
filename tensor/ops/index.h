// Indexing ops driven by an index tensor: gather, scatter_add, index_select
// and one_hot. The first three also exist as Tensor members (tensor.h).
#pragma once

#include <cstdint>

#include "tensor/core/tensor.h"

namespace tandem {

// out[i][j] = t[index[i][j]][j] for dim 0 (likewise for other dims).
// index: int64, same number of dims as t, index.size(d) <= t.size(d) for d != dim; out: index's shape.
Tensor gather(const Tensor& t, int64_t dim, const Tensor& index);
// A copy of t with t[index[i][j]][j] += src[i][j] for dim 0 (likewise for other dims).
// index: int64; src: t's dtype, index.size(d) <= src.size(d) for every d.
Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
// The entries of t at positions index along dim. index: (K) or 0-dim, int32 or int64;
// out: t's shape with size K at dim.
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index);
// t: (S...) int64 class values in [0, num_classes) -> (S..., num_classes) int64 of zeros and ones.
// num_classes = -1 takes max(t) + 1.
Tensor one_hot(const Tensor& t, int64_t num_classes = -1);

}  // namespace tandem

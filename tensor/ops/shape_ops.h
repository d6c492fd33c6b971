// Joining and splitting tensors along a dim: cat, stack (new tensors) and
// split, chunk (views of the input). split/chunk also exist as Tensor members.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/core/tensor.h"

namespace tandem {

// Joins tensors along an existing dim; the result dtype is the promotion of
// all inputs. Shapes must match except in dim; 1-D empty tensors (shape [0])
// are skipped, as PyTorch's legacy rule.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins equally-shaped tensors along a new dim: (S...) x N -> (S[:dim], N, S[dim:]).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// Views of split_size along dim; the last may be smaller.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
// Views of the given sizes along dim, which must sum to t.size(dim).
std::vector<Tensor> split(const Tensor& t, IntArrayRef split_sizes, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& t, IntArrayRef split_sizes, int64_t dim = 0);
// Views of ceil(size / chunks) along dim; may return fewer than chunks.
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);

}  // namespace tandem

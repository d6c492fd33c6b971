// Embedding lookup and its gradient, both backends (kernels/contract.h):
// kernels/cpu/embedding.cpp, kernels/cuda/embedding.cu.
//
// embedding: out: (K, D) contiguous; weight: (num_weights, D) contiguous;
//   indices: (K) contiguous int64 or int32. An index outside [0, num_weights)
//   is an IndexError: on the cpu thrown before anything is written; on a
//   cuda device reported at the next wait, as gather's (kernels/index.h).
// embedding_backward: grad_weight: (num_weights, D) contiguous, overwritten: row i
//   is the sum of the rows k of grad_out (K, D) with indices[k] == i, except row
//   padding_idx (if >= 0), which stays 0. With scale_grad_by_freq each sum is
//   divided by the count of i in indices. A bad index is reported as the
//   forward's is ("embedding_backward(): ..."), and the table written is not
//   to be used. The CPU adds in the order of k (deterministic); CUDA adds
//   with atomics, so the order of the additions into a row, and the last bits
//   of a sum of several rows, may change from run to run.
#pragma once

#include <cstdint>

#include "kernels/contract.h"
#include "tensor/core/tensor.h"

#define TANDEM_EMBEDDING_KERNELS(K)                                                                 \
  K(void, embedding, (const Tensor& out, const Tensor& weight, const Tensor& indices))              \
  K(void, embedding_backward,                                                                       \
    (const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices, int64_t padding_idx, \
     bool scale_grad_by_freq))

TANDEM_KERNELS(TANDEM_EMBEDDING_KERNELS)

// Indexing kernels, both backends (kernels/contract.h): kernels/cpu/index.cpp,
// kernels/cuda/index.cu. The caller checked shapes and dtypes and allocated
// the outputs; the kernels check index values as they read them and report
// an out-of-range one (below).
//
// gather:       out[..., k, ...] = self[..., index[..., k, ...], ...] along dim. index:
//               int64; out: index's shape, self's dtype; self: same dims as index, or
//               either is 0-dim.
// scatter_add:  self[..., index[..., k, ...], ...] += src[..., k, ...] along dim.
//               index: int64; src: self's dtype.
// index_select: out = self with position k along dim taken from self at index[k].
//               index: (K) or 0-dim, int32 or int64.
// one_hot:      out: (S..., C) int64 = 1 where the last coordinate equals in (S...),
//               else 0. Values are in [0, C); neither backend checks them (the front
//               end has read the class range).
//
// On a cuda device the check does not wait: a thread that reads a bad index
// records it in the device's error record, and the host throws the CPU's
// IndexError (with a note) at its next wait for the device
// (kernels/cuda/device_check.h); an emulated device's CPU kernels do the
// same. The element a bad index would have given is not written.
#pragma once

#include <cstdint>

#include "kernels/contract.h"
#include "tensor/core/tensor.h"

#define TANDEM_INDEX_KERNELS(K)                                                                    \
  K(void, gather, (const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index))       \
  K(void, scatter_add, (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src))  \
  K(void, index_select, (const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index)) \
  K(void, one_hot, (const Tensor& out, const Tensor& in))

TANDEM_KERNELS(TANDEM_INDEX_KERNELS)

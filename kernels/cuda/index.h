// CUDA kernels of the indexing ops, with the contract of kernels/cpu/index.h.
// An out-of-range index is reported as IndexError with the cpu's words. The
// check runs on the device: a thread that reads a bad index records it in an
// 8-byte workspace flag, and after the launch the host copies the flag back
// (8 bytes device-to-host) and throws. That copy waits for the stream, so
// gather, scatter_add and index_select each block the calling thread until
// all work queued on the stream so far is done: a few microseconds on an idle
// stream, and no overlap of the host with the GPU across the call.
// one_hot does not check: its front end has already read the class range.
#pragma once

#include <cstdint>
#include <utility>

#include "tensor/core/tensor.h"

namespace tandem::gpu {

// out[..., k, ...] = self[..., index[..., k, ...], ...] along dim.
// index: int64; out: index's shape, self's dtype; self: same dims as index, or either is 0-dim.
void gather(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
// self[..., index[..., k, ...], ...] += src[..., k, ...] along dim. index: int64; src: self's dtype.
void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// out = self with position k along dim taken from self at index[k]. index: (K) or 0-dim, int32 or int64.
void index_select(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
// out: (S..., C) int64 = 1 where the last coordinate equals in (S...), else 0. Values are in [0, C).
void one_hot(const Tensor& out, const Tensor& in);

}  // namespace tandem::gpu

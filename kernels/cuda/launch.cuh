// What every .cu launcher uses: the stream to launch on for a tensor, a
// guard that makes the tensor's device current, and grid arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/stream.h"
#include "tensor/core/tensor.h"

namespace tandem::cuda {

// The current stream of t's device, on which every kernel for t launches.
inline cudaStream_t stream_of(const Tensor& t) {
  return static_cast<cudaStream_t>(detail::current_stream(t.device().index()).handle);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls f.template operator()<U>() with U the unsigned type of `size` bytes:
// kernels that only move elements (gather, index_select, cat, embedding)
// need four instantiations for all eight dtypes.
template <typename F>
void dispatch_bytes(size_t size, const F& f) {
  switch (size) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 8: return f.template operator()<uint64_t>();
  }
  TANDEM_INTERNAL_ASSERT(false, "no element type of ", size, " bytes");
}

// Multiprocessor count of a device (cached), to size grid-stride launches.
int multiprocessor_count(int device);

// ---------------------------------------------------------------- grid-stride loops
// A grid-stride kernel runs kGridStrideThreads threads a block, each taking
// elements global_thread(), + grid_threads(), ... below n; the grid is only
// as large as the device can hold at once.

constexpr int kGridStrideThreads = 256;
// 8 x 256 threads fill a multiprocessor (2048 resident threads on sm_75..sm_90).
constexpr int kGridStrideBlocksPerSm = 8;

// Blocks for a grid-stride launch over n elements: one per kGridStrideThreads
// elements, at least one (n may be 0) and at most what fills the device.
inline dim3 grid_stride_blocks(int64_t n, int device) {
  const int64_t cap = static_cast<int64_t>(multiprocessor_count(device)) * kGridStrideBlocksPerSm;
  return dim3(static_cast<unsigned>(std::clamp<int64_t>(ceil_div(n, kGridStrideThreads), 1, cap)));
}

// ---------------------------------------------------------------- launches
// A launch both compilers build: TANDEM_LAUNCH(grid, block, smem, stream,
// kernel)(args...) is kernel<<<grid, block, smem, stream>>>(args...) under
// nvcc, and a queued Launch in the simulated build (kernels/cuda/sim).
#if TANDEM_CUDA_SIM
#define TANDEM_LAUNCH(grid, block, smem, stream, ...) \
  ::tandem::sim::Launch(__VA_ARGS__, #__VA_ARGS__, grid, block, smem, stream)
#else
#define TANDEM_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#endif

// The block's dynamic shared memory as `type* name` (an extern __shared__
// array under nvcc), 16-byte aligned.
#if TANDEM_CUDA_SIM
#define TANDEM_DYNAMIC_SHARED(type, name) TANDEM_SIM_DYNAMIC_SHARED(type, name)
#else
#define TANDEM_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#endif

#if TANDEM_CUDA_SOURCE
// This thread's first element, and the stride to its next, in 64 bits.
__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
#endif

}  // namespace tandem::cuda

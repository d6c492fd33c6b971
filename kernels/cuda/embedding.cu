// CUDA kernels of embedding (contract in kernels/cpu/norm.h, whose CPU
// kernels in kernels/cpu/embedding.cpp are the specification; notes on
// synchronisation and atomics in kernels/cuda/norm.h): a gather that checks
// its indices with the bad-index flag of index.cu, and a backward that
// scatters the gradient rows into the zeroed table with atomicAdds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/block_reduce.cuh"  // load_as, store_as
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loops.h"
#include "kernels/embedding.h"
#include "tensor/core/dtype.h"
#include "tensor/core/errors.h"

namespace tandem::cuda {

namespace {

// The bad-index flag of kernels/cuda/index.cu: 0 or the first out-of-range
// value written (0 is in range whenever the table has rows).
__device__ __forceinline__ void record_bad_index(unsigned long long* flag, int64_t value) {
  atomicCAS(flag, 0ull, static_cast<unsigned long long>(value));
}

template <typename I>
__global__ void embedding_check_kernel(const I* idx, int64_t K, int64_t num, unsigned long long* bad) {
  for (int64_t k = global_thread(); k < K; k += grid_threads()) {
    const int64_t r = static_cast<int64_t>(idx[k]);
    if (r < 0 || r >= num) record_bad_index(bad, r);
  }
}

// out[k, j] = weight[idx[k], j], elements moved by size (U: an unsigned type of the element's bytes).
template <typename U, typename I>
__global__ void embedding_kernel(const U* weight, U* out, const I* idx, int64_t n, int64_t D, int64_t num,
                                 unsigned long long* bad) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t k = i / D, j = i - k * D;
    const int64_t r = static_cast<int64_t>(idx[k]);
    if (r < 0 || r >= num) {
      record_bad_index(bad, r);
      continue;
    }
    out[i] = weight[r * D + j];
  }
}

template <typename I>
__global__ void embedding_count_kernel(const I* idx, int64_t K, unsigned int* counts) {
  for (int64_t k = global_thread(); k < K; k += grid_threads()) atomicAdd(counts + static_cast<int64_t>(idx[k]), 1u);
}

// *p += v atomically (the 16-bit types with their hardware atomics).
template <typename T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, Half>)
    atomicAdd(reinterpret_cast<__half*>(p), __ushort_as_half(v.x));
  else if constexpr (std::is_same_v<T, BFloat16>)
    atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __ushort_as_bfloat16(v.x));
  else
    atomicAdd(p, v);
}

template <typename T, typename I>
__global__ void embedding_backward_kernel(const T* g, const I* idx, T* gw, int64_t n, int64_t D, int64_t padding_idx,
                                          const unsigned int* counts) {
  using M = opmath_t<T>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t k = i / D, j = i - k * D;
    const int64_t r = static_cast<int64_t>(idx[k]);
    if (r == padding_idx) continue;
    M v = load_as<M>(g[i]);
    if (counts != nullptr) v /= static_cast<M>(counts[r]);
    atomic_add(gw + r * D + j, store_as<T>(v));
  }
}

}  // namespace

// ---------------------------------------------------------------- entry points

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t K = indices.numel(), num = weight.size(0), D = weight.size(1);
  if (K == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(out);
  const std::shared_ptr<Storage> flag = detail::allocate_device(device, sizeof(unsigned long long));
  auto* bad = static_cast<unsigned long long*>(flag->data());
  TANDEM_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(unsigned long long), stream));
  const int64_t n = K * D;
  dispatch_index(indices.dtype(), "embedding (cuda)", [&]<typename I>() {
    const I* idx = indices.data_ptr<I>();
    if (n == 0) {  // no values to move: the indices are still checked
      TANDEM_LAUNCH(grid_stride_blocks(K, device), kGridStrideThreads, 0, stream, embedding_check_kernel<I>)
      (idx, K, num, bad);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    dispatch_bytes(weight.element_size(), [&]<typename U>() {
      TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream, embedding_kernel<U, I>)
      (static_cast<const U*>(weight.data_ptr()), static_cast<U*>(out.data_ptr()), idx, n, D, num, bad);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  // The 8-byte copy back waits for the stream (see kernels/cuda/norm.h).
  unsigned long long value = 0;
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(&value, bad, sizeof(value), cudaMemcpyDeviceToHost, stream));
  detail::count_host_sync(device);  // kernels/cpu/embedding.cpp counts the same on emulated devices
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto v = static_cast<int64_t>(value);
  TANDEM_CHECK(value == 0 && num > 0, IndexError, "embedding(): index out of range in self (index ", v,
               " of a table of ", num, " rows, num_embeddings; valid indices are 0 to ", num - 1, ")");
}

void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices, int64_t padding_idx,
                        bool scale_grad_by_freq) {
  const int64_t K = indices.numel(), num = grad_weight.size(0), D = grad_weight.size(1);
  const int device = grad_weight.device().index();
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(grad_weight);
  TANDEM_CUDA_CHECK(cudaMemsetAsync(grad_weight.data_ptr(), 0, grad_weight.nbytes(), stream));
  const int64_t n = K * D;
  if (n == 0) return;
  // Indices were checked by the front end (tensor/ops/norm.cpp).
  const std::shared_ptr<Storage> counts =
      scale_grad_by_freq
          ? detail::allocate_device(device, std::max<size_t>(static_cast<size_t>(num) * sizeof(unsigned int), 1))
          : nullptr;
  unsigned int* count = counts ? static_cast<unsigned int*>(counts->data()) : nullptr;
  dispatch_index(indices.dtype(), "embedding_backward (cuda)", [&]<typename I>() {
    const I* idx = indices.data_ptr<I>();
    if (count != nullptr) {
      TANDEM_CUDA_CHECK(cudaMemsetAsync(count, 0, static_cast<size_t>(num) * sizeof(unsigned int), stream));
      TANDEM_LAUNCH(grid_stride_blocks(K, device), kGridStrideThreads, 0, stream, embedding_count_kernel<I>)
      (idx, K, count);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    }
    dispatch_floating(grad_weight.dtype(), "embedding_backward (cuda)", [&]<typename T>() {
      TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream, embedding_backward_kernel<T, I>)
      (grad_out.data_ptr<T>(), idx, grad_weight.data_ptr<T>(), n, D, padding_idx, count);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

}  // namespace tandem::cuda

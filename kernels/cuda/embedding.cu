// CUDA kernels of embedding (contract in kernels/cpu/norm.h, whose CPU
// kernels in kernels/cpu/embedding.cpp are the specification; notes on
// synchronisation and atomics in kernels/cuda/norm.h): a gather that checks
// its indices with a deferred device check (kernels/cuda/device_check.h), and
// a backward that scatters the gradient rows into the zeroed table with
// atomicAdds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/block_reduce.cuh"  // load_as, store_as
#include "kernels/cuda/device_check.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loops.h"
#include "kernels/embedding.h"
#include "tensor/core/dtype.h"
#include "tensor/core/errors.h"

namespace tandem::cuda {

namespace {

template <typename I>
__global__ void embedding_check_kernel(const I* idx, int64_t K, int64_t num, const detail::DeviceCheck check) {
  for (int64_t k = global_thread(); k < K; k += grid_threads()) {
    const int64_t r = static_cast<int64_t>(idx[k]);
    if (r < 0 || r >= num) report_bad_value(check, r);
  }
}

// out[k, j] = weight[idx[k], j], elements moved by size (U: an unsigned type of the element's bytes).
template <typename U, typename I>
__global__ void embedding_kernel(const U* weight, U* out, const I* idx, int64_t n, int64_t D, int64_t num,
                                 const detail::DeviceCheck check) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t k = i / D, j = i - k * D;
    const int64_t r = static_cast<int64_t>(idx[k]);
    if (r < 0 || r >= num) {
      report_bad_value(check, r);
      continue;
    }
    out[i] = weight[r * D + j];
  }
}

// The backward kernels skip an index outside [0, num), and the one that
// meets it first reports it (as the forward's did, at the next wait).
template <typename I>
__global__ void embedding_count_kernel(const I* idx, int64_t K, int64_t num, unsigned int* counts) {
  for (int64_t k = global_thread(); k < K; k += grid_threads()) {
    const int64_t r = static_cast<int64_t>(idx[k]);
    if (r >= 0 && r < num) atomicAdd(counts + r, 1u);
  }
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
__global__ void embedding_backward_kernel(const T* g, const I* idx, T* gw, int64_t n, int64_t D, int64_t num,
                                          int64_t padding_idx, const unsigned int* counts,
                                          const detail::DeviceCheck check) {
  using M = opmath_t<T>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t k = i / D, j = i - k * D;
    const int64_t r = static_cast<int64_t>(idx[k]);
    if (r < 0 || r >= num) {
      if (j == 0) report_bad_value(check, r);
      continue;
    }
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
  const detail::DeviceCheck check = detail::device_check(device, detail::CheckKind::Embedding, "embedding", 0, num);
  const int64_t n = K * D;
  dispatch_index(indices.dtype(), "embedding (cuda)", [&]<typename I>() {
    const I* idx = indices.data_ptr<I>();
    if (n == 0) {  // no values to move: the indices are still checked
      TANDEM_LAUNCH(grid_stride_blocks(K, device), kGridStrideThreads, 0, stream, embedding_check_kernel<I>)
      (idx, K, num, check);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    dispatch_bytes(weight.element_size(), [&]<typename U>() {
      TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream, embedding_kernel<U, I>)
      (static_cast<const U*>(weight.data_ptr()), static_cast<U*>(out.data_ptr()), idx, n, D, num, check);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  finish_checked_launch(device, stream, check);
}

void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices, int64_t padding_idx,
                        bool scale_grad_by_freq) {
  const int64_t K = indices.numel(), num = grad_weight.size(0), D = grad_weight.size(1);
  const int device = grad_weight.device().index();
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(grad_weight);
  TANDEM_CUDA_CHECK(cudaMemsetAsync(grad_weight.data_ptr(), 0, grad_weight.nbytes(), stream));
  const int64_t n = K * D;
  if (K == 0) return;
  const detail::DeviceCheck check =
      detail::device_check(device, detail::CheckKind::EmbeddingBackward, "embedding_backward", 0, num);
  if (n == 0) {  // no values to add: the indices are still checked, as on the cpu
    dispatch_index(indices.dtype(), "embedding_backward (cuda)", [&]<typename I>() {
      TANDEM_LAUNCH(grid_stride_blocks(K, device), kGridStrideThreads, 0, stream, embedding_check_kernel<I>)
      (indices.data_ptr<I>(), K, num, check);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
    finish_checked_launch(device, stream, check);
    return;
  }
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
      (idx, K, num, count);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    }
    dispatch_floating(grad_weight.dtype(), "embedding_backward (cuda)", [&]<typename T>() {
      TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream, embedding_backward_kernel<T, I>)
      (grad_out.data_ptr<T>(), idx, grad_weight.data_ptr<T>(), n, D, num, padding_idx, count, check);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  finish_checked_launch(device, stream, check);
}

}  // namespace tandem::cuda

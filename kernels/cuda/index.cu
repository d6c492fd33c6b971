// CUDA kernels of gather, scatter_add, index_select and one_hot (contract in
// kernels/cpu/index.h, error reporting in kernels/cuda/index.h), and cat's
// one-launch copy (kernels/cuda/shape_ops.h). One thread per element over a
// StridedOffsets table; the indexed tensor has stride 0 along dim and the
// index value supplies that offset, as on the cpu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/cat_plan.h"
#include "kernels/cuda/device_check.cuh"
#include "kernels/cuda/index_offsets.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/shape_ops.h"
#include "kernels/index.h"

namespace tandem::cuda {

namespace {

// Calls f with I = uint32_t when n elements can be indexed in 32 bits.
template <typename F>
void dispatch_index_width(int64_t n, const F& f) {
  if (fits_u32(n))
    f.template operator()<uint32_t>();
  else
    f.template operator()<uint64_t>();
}

// ---------------------------------------------------------------- strides

// t's element strides at a walk of ndim dims, with `zero_dim` zeroed (the
// index supplies that offset). A tensor with fewer dims than the walk (0-dim
// beside a 1-dim index) does not move at all.
Shape walk_strides(const Tensor& t, size_t ndim, int64_t zero_dim = -1) {
  Shape out(ndim, 0);
  if (static_cast<size_t>(t.dim()) != ndim) return out;
  for (size_t d = 0; d < ndim; ++d) out[d] = static_cast<int64_t>(d) == zero_dim ? 0 : t.stride(d);
  return out;
}
int64_t dim_stride(const Tensor& t, int64_t dim) { return t.dim() == 0 ? 0 : t.stride(dim); }
int64_t dim_size(const Tensor& t, int64_t dim) { return t.dim() == 0 ? 1 : t.size(dim); }

// ---------------------------------------------------------------- gather, index_select

// out = self[.. index ..] over a table of (out, self with stride 0 at dim, index).
template <typename T, typename Idx, typename I>
__global__ void gather_kernel(const __grid_constant__ StridedOffsets<3> p, int64_t n, T* out, const T* self,
                              const Idx* index, int64_t self_dim_stride, int64_t size,
                              const detail::DeviceCheck check) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t off[3];
    p.offsets<I>(static_cast<I>(i), off);
    const int64_t k = static_cast<int64_t>(index[off[2]]);
    if (k < 0 || k >= size) {
      report_bad_value(check, k);
      continue;
    }
    out[off[0]] = self[off[1] + k * self_dim_stride];
  }
}

template <typename Idx>
void launch_gather(const char* op, const Tensor& out, const Tensor& self, const Tensor& index,
                   const StridedOffsets<3>& p, int64_t dim) {
  const int64_t n = out.numel(), size = dim_size(self, dim);
  const int device = out.device().index();
  cudaStream_t stream = stream_of(out);
  const detail::DeviceCheck check = detail::device_check(device, detail::CheckKind::Index, op, dim, size);
  dispatch_bytes(out.element_size(), [&]<typename T>() {
    dispatch_index_width(n, [&]<typename I>() {
      TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream, gather_kernel<T, Idx, I>)
      (p, n, static_cast<T*>(out.data_ptr()), static_cast<const T*>(self.data_ptr()),
       static_cast<const Idx*>(index.data_ptr()), dim_stride(self, dim), size, check);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  finish_checked_launch(device, stream, check);
}

// ---------------------------------------------------------------- scatter_add

// *p += v, atomically, with the cpu's arithmetic: float16/bfloat16 add
// rounded once to the type (what float math then rounding gives: float has
// more than twice their digits), integers wrap, bool is a logical or.
template <typename T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t>) {
    atomicAdd(p, v);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else if constexpr (std::is_same_v<T, Half>) {
    atomicAdd(reinterpret_cast<__half*>(p), __ushort_as_half(v.x));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __ushort_as_bfloat16(v.x));
  } else {
    // One byte: work on the aligned 32-bit word that holds it (no byte atomics).
    static_assert(sizeof(T) == 1);
    const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t{3});
    const unsigned int shift = static_cast<unsigned int>(addr & 3) * 8;
    if constexpr (std::is_same_v<T, bool>) {
      if (v) atomicOr(word, 1u << shift);  // bools are stored as 0 or 1
    } else {
      unsigned int old = *word, assumed;
      do {
        assumed = old;
        const unsigned int sum = ((assumed >> shift) + static_cast<unsigned int>(v)) & 0xffu;
        old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (sum << shift));
      } while (assumed != old);
    }
  }
}

// self[.. index ..] += src over a table of (self with stride 0 at dim, index,
// src) spanning index's shape, dim included.
template <typename T, typename I>
__global__ void scatter_add_kernel(const __grid_constant__ StridedOffsets<3> p, int64_t n, T* self,
                                   const int64_t* index, const T* src, int64_t self_dim_stride, int64_t size,
                                   const detail::DeviceCheck check) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t off[3];
    p.offsets<I>(static_cast<I>(i), off);
    const int64_t k = index[off[1]];
    if (k < 0 || k >= size) {
      report_bad_value(check, k);
      continue;
    }
    atomic_add(self + off[0] + k * self_dim_stride, src[off[2]]);
  }
}

// ---------------------------------------------------------------- one_hot

// out (contiguous, zeroed) row i gets a 1 at class in[i].
template <typename I>
__global__ void one_hot_kernel(const __grid_constant__ StridedOffsets<1> p, int64_t n, int64_t* out, const int64_t* in,
                               int64_t classes) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t off[1];
    p.offsets<I>(static_cast<I>(i), off);
    out[i * classes + in[off[0]]] = 1;
  }
}

// ---------------------------------------------------------------- cat

// blockIdx.y picks the entry (kernels/cuda/cat_plan.h); the x blocks stride
// over its elements.
template <typename T, typename I>
__global__ void cat_kernel(const __grid_constant__ CatBatch b) {
  const CatInput& e = b.inputs[blockIdx.y];
  const T* src = static_cast<const T*>(e.data);
  T* out = static_cast<T*>(b.out);
  for (int64_t j = global_thread(); j < e.numel; j += grid_threads()) {
    out[cat_out_offset<I>(e, b.out_row, static_cast<I>(j))] = src[cat_source_offset<I>(e, static_cast<I>(j))];
  }
}

}  // namespace

void gather(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device().index());
  const size_t nd = static_cast<size_t>(index.dim());
  auto p = make_strided_offsets<3>(
      index.sizes(), {walk_strides(out, nd), walk_strides(self, nd, dim), walk_strides(index, nd)}, "gather");
  launch_gather<int64_t>("gather", out, self, index, p, dim);
}

void index_select(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device().index());
  const size_t nd = static_cast<size_t>(out.dim());
  // The index moves only along dim: a (K) vector laid along out's dim.
  Shape index_strides(nd, 0);
  if (nd > 0 && index.dim() == 1) index_strides[dim] = index.stride(0);
  auto p = make_strided_offsets<3>(out.sizes(), {walk_strides(out, nd), walk_strides(self, nd, dim), index_strides},
                                   "index_select");
  dispatch_index(index.dtype(), "index_select (cuda)",
                 [&]<typename Idx>() { launch_gather<Idx>("index_select", out, self, index, p, dim); });
}

void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t n = index.numel();
  if (n == 0) return;
  const int device = self.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(self);
  const size_t nd = static_cast<size_t>(index.dim());
  auto p = make_strided_offsets<3>(
      index.sizes(), {walk_strides(self, nd, dim), walk_strides(index, nd), walk_strides(src, nd)}, "scatter_add");
  const int64_t size = dim_size(self, dim);
  const detail::DeviceCheck check = detail::device_check(device, detail::CheckKind::Index, "scatter_add", dim, size);
  dispatch_all(self.dtype(), "scatter_add (cuda)", [&]<typename T>() {
    dispatch_index_width(n, [&]<typename I>() {
      TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream, scatter_add_kernel<T, I>)
      (p, n, self.data_ptr<T>(), index.data_ptr<int64_t>(), src.data_ptr<T>(), dim_stride(self, dim), size, check);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  finish_checked_launch(device, stream, check);
}

void one_hot(const Tensor& out, const Tensor& in) {
  if (out.numel() == 0) return;
  TANDEM_INTERNAL_ASSERT(out.is_contiguous(), "one_hot writes a contiguous output");
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(out);
  TANDEM_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
  const int64_t n = in.numel();
  auto p = make_strided_offsets<1>(in.sizes(), {walk_strides(in, static_cast<size_t>(in.dim()))}, "one_hot");
  dispatch_index_width(n, [&]<typename I>() {
    TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream, one_hot_kernel<I>)
    (p, n, out.data_ptr<int64_t>(), in.data_ptr<int64_t>(), out.size(-1));
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void cat(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  if (out.numel() == 0) return;
  TANDEM_INTERNAL_ASSERT(out.is_contiguous(), "cat writes a contiguous output");
  for (const Tensor& t : inputs) TANDEM_INTERNAL_ASSERT(t.dtype() == out.dtype(), "cat inputs have out's dtype");
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(out);
  for (const CatLaunch& l : plan_cat(out, inputs, dim)) {
    dim3 grid = grid_stride_blocks(l.max_numel, device);
    grid.y = static_cast<unsigned>(l.batch.count);
    dispatch_bytes(out.element_size(), [&]<typename T>() {
      dispatch_index_width(l.max_index, [&]<typename I>() {
        TANDEM_LAUNCH(grid, kGridStrideThreads, 0, stream, cat_kernel<T, I>)(l.batch);
        TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
      });
    });
  }
}

}  // namespace tandem::cuda

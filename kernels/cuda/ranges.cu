// CUDA kernels of arange, linspace and eye: one thread per element with the
// cpu's per-element math (kernels/functors/ranges.h), so the values are the
// same bits. The host does the per-call arithmetic (start, step) exactly as
// kernels/cpu/ranges.cpp does.
#include <algorithm>

#include "kernels/cuda/launch.cuh"
#include "kernels/functors/ranges.h"
#include "kernels/ranges.h"

namespace tandem::cuda {

namespace {

template <typename T>
__global__ void arange_kernel(T* out, int64_t n, fn::arange_acc_t<T> start, fn::arange_acc_t<T> step) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = fn::arange_at<T>(start, step, i);
}

template <typename T, typename S = typename fn::LinspaceMath<T>::S>
__global__ void linspace_kernel(T* out, int64_t steps, S start, S end, S step) {
  for (int64_t i = global_thread(); i < steps; i += grid_threads())
    out[i] = fn::LinspaceMath<T>::at(start, end, step, steps, i);
}

// out (n, m) is zeroed first; thread i writes the 1 of row i.
template <typename T>
__global__ void eye_kernel(T* out, int64_t diag, int64_t m) {
  for (int64_t i = global_thread(); i < diag; i += grid_threads()) out[i * (m + 1)] = static_cast<T>(1.0f);
}

template <typename T>
T* contiguous_data(const Tensor& out) {
  TANDEM_INTERNAL_ASSERT(out.is_contiguous(), "range kernels write contiguous outputs");
  return out.data_ptr<T>();
}

}  // namespace

void arange(const Tensor& out, const Scalar& start, const Scalar& step) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  dispatch_numeric(out.dtype(), "arange (cuda)", [&]<typename T>() {
    using Acc = fn::arange_acc_t<T>;
    TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream_of(out), arange_kernel<T>)
    (contiguous_data<T>(out), n, start.to<Acc>(), step.to<Acc>());
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void linspace(const Tensor& out, const Scalar& start, const Scalar& end) {
  const int64_t steps = out.numel();
  if (steps == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  dispatch_numeric(out.dtype(), "linspace (cuda)", [&]<typename T>() {
    using M = fn::LinspaceMath<T>;
    using S = typename M::S;
    const T a = start.to<T>(), z = end.to<T>();
    if (steps == 1) {  // start itself; a pageable copy is staged before the call returns
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(out.data_ptr(), &a, sizeof(T), cudaMemcpyHostToDevice, stream_of(out)));
      return;
    }
    const S sa = static_cast<S>(a), sz = static_cast<S>(z);
    const S step = M::div(M::sub(sz, sa), steps - 1);
    TANDEM_LAUNCH(grid_stride_blocks(steps, device), kGridStrideThreads, 0, stream_of(out), linspace_kernel<T>)
    (contiguous_data<T>(out), steps, sa, sz, step);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void eye(const Tensor& out) {
  const int64_t n = out.size(0), m = out.size(1);
  if (n == 0 || m == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(out);
  // Zero is all-zero bits in every dtype.
  TANDEM_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
  const int64_t diag = std::min(n, m);
  dispatch_all(out.dtype(), "eye (cuda)", [&]<typename T>() {
    TANDEM_LAUNCH(grid_stride_blocks(diag, device), kGridStrideThreads, 0, stream, eye_kernel<T>)
    (contiguous_data<T>(out), diag, m);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace tandem::cuda

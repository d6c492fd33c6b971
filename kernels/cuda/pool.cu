// CUDA pooling: one thread per output element for the forward passes (the
// CPU's window loops, with the windows of kernels/functors/conv.h), and one
// thread per input element for the backward passes, which gather the
// gradients of the outputs whose windows hold it: no atomics, and the same
// sums on every run. Grid-stride loops with 64-bit indices; 16-bit floats
// compute in float.
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cuda/launch.cuh"
#include "kernels/pool.h"

namespace tandem::cuda {

namespace {

// (N, C, H, W) seen as planes, and the output's plane.
struct PoolShape {
  int64_t H, W, OH, OW;
};

PoolShape pool_shape(const Tensor& in, const Tensor& out) { return {in.size(2), in.size(3), out.size(2), out.size(3)}; }

// ---------------------------------------------------------------- forward
// Thread i: output element i of (planes, OH, OW).

template <typename T>
__global__ void max_pool_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ indices,
                                int64_t total, PoolShape s, Pool2dParams p) {
  using M = opmath_t<T>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t ow = i % s.OW, oh = (i / s.OW) % s.OH, plane = i / (s.OW * s.OH);
    const T* in = x + plane * s.H * s.W;
    int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
    const int64_t h1 = min(h0 + (p.kernel_h - 1) * p.dilation_h + 1, s.H);
    const int64_t w1 = min(w0 + (p.kernel_w - 1) * p.dilation_w + 1, s.W);
    while (h0 < 0) h0 += p.dilation_h;
    while (w0 < 0) w0 += p.dilation_w;
    // As the CPU kernel: the first maximum wins, a NaN replaces anything.
    int64_t best = h0 * s.W + w0;
    M best_val = -std::numeric_limits<M>::infinity();
    for (int64_t ih = h0; ih < h1; ih += p.dilation_h) {
      for (int64_t iw = w0; iw < w1; iw += p.dilation_w) {
        const int64_t idx = ih * s.W + iw;
        const M v = static_cast<M>(in[idx]);
        if (v > best_val || isnan(v)) {
          best_val = v;
          best = idx;
        }
      }
    }
    y[i] = static_cast<T>(best_val);
    indices[i] = best;
  }
}

template <typename T>
__global__ void avg_pool_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, PoolShape s,
                                Pool2dParams p) {
  using M = opmath_t<T>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t ow = i % s.OW, oh = (i / s.OW) % s.OH, plane = i / (s.OW * s.OH);
    const T* in = x + plane * s.H * s.W;
    const fn::AvgWindow win = fn::avg_window(oh, ow, s.H, s.W, p);
    M sum = 0;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += static_cast<M>(in[ih * s.W + iw]);
    const bool empty = win.h0 >= win.h1 || win.w0 >= win.w1;
    y[i] = static_cast<T>(empty ? M(0) : sum / static_cast<M>(win.divisor));
  }
}

template <typename T>
__global__ void adaptive_avg_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, PoolShape s) {
  using M = opmath_t<T>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t ow = i % s.OW, oh = (i / s.OW) % s.OH, plane = i / (s.OW * s.OH);
    const T* in = x + plane * s.H * s.W;
    const int64_t h0 = fn::adaptive_start(oh, s.OH, s.H), h1 = fn::adaptive_end(oh, s.OH, s.H);
    const int64_t w0 = fn::adaptive_start(ow, s.OW, s.W), w1 = fn::adaptive_end(ow, s.OW, s.W);
    M sum = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<M>(in[ih * s.W + iw]);
    y[i] = static_cast<T>(sum / static_cast<M>((h1 - h0) * (w1 - w0)));
  }
}

// ---------------------------------------------------------------- backward
// Thread i: input element i of (planes, H, W), summing over the outputs
// whose windows can hold it (fn::pool_first_output / pool_end_output).

template <typename T>
__global__ void max_pool_backward_kernel(const T* __restrict__ gy, const int64_t* __restrict__ indices,
                                         T* __restrict__ gx, int64_t total, PoolShape s, Pool2dParams p) {
  using M = opmath_t<T>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t w = i % s.W, h = (i / s.W) % s.H, plane = i / (s.W * s.H);
    const int64_t target = h * s.W + w, base = plane * s.OH * s.OW;
    const int64_t oh0 = fn::pool_first_output(h, p.kernel_h, p.stride_h, p.pad_h, p.dilation_h);
    const int64_t oh1 = fn::pool_end_output(h, p.stride_h, p.pad_h, s.OH);
    const int64_t ow0 = fn::pool_first_output(w, p.kernel_w, p.stride_w, p.pad_w, p.dilation_w);
    const int64_t ow1 = fn::pool_end_output(w, p.stride_w, p.pad_w, s.OW);
    M acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t o = base + oh * s.OW + ow;
        if (indices[o] == target) acc += static_cast<M>(gy[o]);
      }
    gx[i] = static_cast<T>(acc);
  }
}

template <typename T>
__global__ void avg_pool_backward_kernel(const T* __restrict__ gy, T* __restrict__ gx, int64_t total, PoolShape s,
                                         Pool2dParams p) {
  using M = opmath_t<T>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t w = i % s.W, h = (i / s.W) % s.H, plane = i / (s.W * s.H);
    const int64_t base = plane * s.OH * s.OW;
    const int64_t oh0 = fn::pool_first_output(h, p.kernel_h, p.stride_h, p.pad_h, 1);
    const int64_t oh1 = fn::pool_end_output(h, p.stride_h, p.pad_h, s.OH);
    const int64_t ow0 = fn::pool_first_output(w, p.kernel_w, p.stride_w, p.pad_w, 1);
    const int64_t ow1 = fn::pool_end_output(w, p.stride_w, p.pad_w, s.OW);
    M acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const fn::AvgWindow win = fn::avg_window(oh, ow, s.H, s.W, p);
        if (h >= win.h0 && h < win.h1 && w >= win.w0 && w < win.w1)
          acc += static_cast<M>(gy[base + oh * s.OW + ow]) / static_cast<M>(win.divisor);
      }
    gx[i] = static_cast<T>(acc);
  }
}

template <typename T>
__global__ void adaptive_avg_backward_kernel(const T* __restrict__ gy, T* __restrict__ gx, int64_t total, PoolShape s) {
  using M = opmath_t<T>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t w = i % s.W, h = (i / s.W) % s.H, plane = i / (s.W * s.H);
    const int64_t base = plane * s.OH * s.OW;
    // Input row h lies in output rows [start(h, H, OH), end(h, H, OH)) at
    // most; each is checked.
    const int64_t oh0 = fn::adaptive_start(h, s.H, s.OH), oh1 = fn::adaptive_end(h, s.H, s.OH);
    const int64_t ow0 = fn::adaptive_start(w, s.W, s.OW), ow1 = fn::adaptive_end(w, s.W, s.OW);
    M acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t h0 = fn::adaptive_start(oh, s.OH, s.H), h1 = fn::adaptive_end(oh, s.OH, s.H);
      if (h < h0 || h >= h1) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t w0 = fn::adaptive_start(ow, s.OW, s.W), w1 = fn::adaptive_end(ow, s.OW, s.W);
        if (w < w0 || w >= w1) continue;
        acc += static_cast<M>(gy[base + oh * s.OW + ow]) / static_cast<M>((h1 - h0) * (w1 - w0));
      }
    }
    gx[i] = static_cast<T>(acc);
  }
}

// Grid-stride launch geometry over n elements on t's device.
struct Launch {
  dim3 grid;
  cudaStream_t stream;
};

Launch launch_for(const Tensor& t, int64_t n) { return {grid_stride_blocks(n, t.device().index()), stream_of(t)}; }

}  // namespace

void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index());
  const Launch L = launch_for(out, n);
  dispatch_floating(input.dtype(), "max_pool2d (cuda)", [&]<typename T>() {
    TANDEM_LAUNCH(L.grid, kGridStrideThreads, 0, L.stream, max_pool_kernel<T>)
    (input.data_ptr<T>(), out.data_ptr<T>(), indices.data_ptr<int64_t>(), n, pool_shape(input, out), p);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                         const Pool2dParams& p) {
  const int64_t n = grad_input.numel();
  if (n == 0) return;
  DeviceGuard guard(grad_input.device().index());
  const Launch L = launch_for(grad_input, n);
  dispatch_floating(grad_input.dtype(), "max_pool2d_backward (cuda)", [&]<typename T>() {
    TANDEM_LAUNCH(L.grid, kGridStrideThreads, 0, L.stream, max_pool_backward_kernel<T>)
    (grad_out.data_ptr<T>(), indices.data_ptr<int64_t>(), grad_input.data_ptr<T>(), n, pool_shape(grad_input, grad_out),
     p);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index());
  const Launch L = launch_for(out, n);
  dispatch_floating(input.dtype(), "avg_pool2d (cuda)", [&]<typename T>() {
    TANDEM_LAUNCH(L.grid, kGridStrideThreads, 0, L.stream, avg_pool_kernel<T>)
    (input.data_ptr<T>(), out.data_ptr<T>(), n, pool_shape(input, out), p);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p) {
  const int64_t n = grad_input.numel();
  if (n == 0) return;
  DeviceGuard guard(grad_input.device().index());
  const Launch L = launch_for(grad_input, n);
  dispatch_floating(grad_input.dtype(), "avg_pool2d_backward (cuda)", [&]<typename T>() {
    TANDEM_LAUNCH(L.grid, kGridStrideThreads, 0, L.stream, avg_pool_backward_kernel<T>)
    (grad_out.data_ptr<T>(), grad_input.data_ptr<T>(), n, pool_shape(grad_input, grad_out), p);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void adaptive_avg_pool2d(const Tensor& out, const Tensor& input) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index());
  const Launch L = launch_for(out, n);
  dispatch_floating(input.dtype(), "adaptive_avg_pool2d (cuda)", [&]<typename T>() {
    TANDEM_LAUNCH(L.grid, kGridStrideThreads, 0, L.stream, adaptive_avg_kernel<T>)
    (input.data_ptr<T>(), out.data_ptr<T>(), n, pool_shape(input, out));
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  const int64_t n = grad_input.numel();
  if (n == 0) return;
  DeviceGuard guard(grad_input.device().index());
  const Launch L = launch_for(grad_input, n);
  dispatch_floating(grad_input.dtype(), "adaptive_avg_pool2d_backward (cuda)", [&]<typename T>() {
    TANDEM_LAUNCH(L.grid, kGridStrideThreads, 0, L.stream, adaptive_avg_backward_kernel<T>)
    (grad_out.data_ptr<T>(), grad_input.data_ptr<T>(), n, pool_shape(grad_input, grad_out));
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace tandem::cuda

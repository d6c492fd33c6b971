// CUDA random fills: one thread per Philox counter, the element map of
// tensor/ops/random.h and the word-to-number maps of tensor/core/philox.h,
// so the same (seed, offset) gives the cpu's numbers. uniform and randint are
// the same bits; normal goes through CUDA's double log and cos, within an ulp
// or two of glibc's (see tensor/ops/random.h).
//
// The cpu computes u * range + from as two rounded operations; nvcc would
// contract them into one fma, so the kernels spell them with the _rn
// intrinsics, which it never contracts.
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/functors/random.h"
#include "kernels/random.h"

namespace tandem::cuda {

namespace {

__device__ __forceinline__ Philox4x32 draw(PhiloxState st, int64_t counter) {
  return philox(st.offset + static_cast<uint64_t>(counter), 0, st.seed);
}

// float32/float16/bfloat16: counter c serves elements 4c..4c+3, one word each.
template <typename T>
__global__ void uniform32_kernel(T* out, int64_t n, PhiloxState st, float from, float range) {
  const int64_t counters = (n + 3) / 4;
  for (int64_t c = global_thread(); c < counters; c += grid_threads()) {
    const Philox4x32 r = draw(st, c);
    const int64_t first = c * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (first + j < n) {
        const float u = uniform_from_u32(r.w[j], kUniformDigits<T>);
        out[first + j] = static_cast<T>(__fadd_rn(__fmul_rn(u, range), from));
      }
    }
  }
}

// float64: counter c serves elements 2c and 2c+1, two words each.
__global__ void uniform64_kernel(double* out, int64_t n, PhiloxState st, double from, double range) {
  const int64_t counters = (n + 1) / 2;
  for (int64_t c = global_thread(); c < counters; c += grid_threads()) {
    const Philox4x32 r = draw(st, c);
    const int64_t first = c * 2;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      if (first + j < n) {
        const double u = uniform_from_u64(philox_u64(r.w[2 * j], r.w[2 * j + 1]));
        out[first + j] = __dadd_rn(__dmul_rn(u, range), from);
      }
    }
  }
}

// Element i uses counter i, all four words.
template <typename T>
__global__ void normal_kernel(T* out, int64_t n, PhiloxState st, double mean, double std) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const Philox4x32 r = draw(st, i);
    if constexpr (std::is_same_v<T, double>) {
      out[i] = __dadd_rn(__dmul_rn(normal_from_philox64(r), std), mean);
    } else {
      out[i] = static_cast<T>(static_cast<float>(__dadd_rn(__dmul_rn(normal_from_philox32(r), std), mean)));
    }
  }
}

// Counter c serves elements 2c and 2c+1, a 64-bit draw each.
template <typename T>
__global__ void randint_kernel(T* out, int64_t n, PhiloxState st, int64_t low, uint64_t range) {
  const int64_t counters = (n + 1) / 2;
  for (int64_t c = global_thread(); c < counters; c += grid_threads()) {
    const Philox4x32 r = draw(st, c);
    const int64_t first = c * 2;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      if (first + j < n)
        out[first + j] = fn::from_int<T>(randint_from_u64(philox_u64(r.w[2 * j], r.w[2 * j + 1]), low, range));
    }
  }
}

// Launches a random fill of out on its device's current stream, through
// launch(n, device, stream), then checks the launch; an empty out is left as
// it is.
template <typename F>
void launch_fill(const Tensor& out, const F& launch) {
  const int64_t n = out.numel();
  if (n == 0) return;
  TANDEM_INTERNAL_ASSERT(out.is_contiguous(), "random fills write contiguous outputs");
  const int device = out.device().index();
  DeviceGuard guard(device);
  launch(n, device, stream_of(out));
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void uniform(const Tensor& out, PhiloxState st, double from, double to) {
  launch_fill(out, [&](int64_t n, int device, cudaStream_t stream) {
    dispatch_floating(out.dtype(), "uniform (cuda)", [&]<typename T>() {
      if constexpr (std::is_same_v<T, double>) {
        TANDEM_LAUNCH(grid_stride_blocks(ceil_div(n, 2), device), kGridStrideThreads, 0, stream, uniform64_kernel)
        (out.data_ptr<double>(), n, st, from, to - from);
      } else {
        // The cpu's float operands: both bounds rounded to float first.
        const float lo = static_cast<float>(from), range = static_cast<float>(to) - lo;
        TANDEM_LAUNCH(grid_stride_blocks(ceil_div(n, 4), device), kGridStrideThreads, 0, stream, uniform32_kernel<T>)
        (out.data_ptr<T>(), n, st, lo, range);
      }
    });
  });
}

void normal(const Tensor& out, PhiloxState st, double mean, double std) {
  launch_fill(out, [&](int64_t n, int device, cudaStream_t stream) {
    dispatch_floating(out.dtype(), "normal (cuda)", [&]<typename T>() {
      TANDEM_LAUNCH(grid_stride_blocks(n, device), kGridStrideThreads, 0, stream, normal_kernel<T>)
      (out.data_ptr<T>(), n, st, mean, std);
    });
  });
}

void randint(const Tensor& out, PhiloxState st, int64_t low, int64_t high) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  launch_fill(out, [&](int64_t n, int device, cudaStream_t stream) {
    dispatch_all(out.dtype(), "randint (cuda)", [&]<typename T>() {
      TANDEM_LAUNCH(grid_stride_blocks(ceil_div(n, 2), device), kGridStrideThreads, 0, stream, randint_kernel<T>)
      (out.data_ptr<T>(), n, st, low, range);
    });
  });
}

}  // namespace tandem::cuda

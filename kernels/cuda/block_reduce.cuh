// Device building blocks of the reduction and softmax kernels: vector loads,
// warp shuffles of any accumulator, and combines across a block's x or y
// threads. Blocks have power-of-two sides and a multiple of 32 threads, so
// every warp is full and every shuffle can name all 32 lanes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/core/half.h"

namespace tandem::cuda {

// Element conversions of the kernels. 16-bit floats go through the hardware
// instructions (tandem::Half converts in software, for the host; both round
// to nearest even, so the values are the CPU's). A wider value is rounded to
// float first, as the CPU's static_cast<Half>(double) does.
template <typename To, typename T>
__device__ __forceinline__ To load_as(T x) {
  if constexpr (std::is_same_v<T, Half>)
    return static_cast<To>(__half2float(__ushort_as_half(x.x)));
  else
    return static_cast<To>(x);
}
template <typename T, typename From>
__device__ __forceinline__ T store_as(From x) {
  if constexpr (std::is_same_v<T, Half>)
    return Half::from_bits(__half_as_ushort(__float2half_rn(static_cast<float>(x))));
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(x))));
  else
    return static_cast<T>(x);
}

inline constexpr unsigned kFullMask = 0xffffffffu;

// Elements per vector load: 16 bytes, at most 8 elements (so 1-byte types
// load 8 bytes and keep 8 accumulators, not 16).
template <typename T>
inline constexpr int kVecWidth = sizeof(T) >= 2 ? static_cast<int>(16 / sizeof(T)) : 8;

template <typename T, int N>
struct alignas(sizeof(T) * N) Vector {
  T v[N];
};

// p must be aligned to sizeof(Vector<T, N>).
template <int N, typename T>
__device__ __forceinline__ Vector<T, N> load_vector(const T* p) {
  return *reinterpret_cast<const Vector<T, N>*>(p);
}
template <int N, typename T>
__device__ __forceinline__ void store_vector(T* p, const Vector<T, N>& v) {
  *reinterpret_cast<Vector<T, N>*>(p) = v;
}

// Shuffles of any trivially copyable value (structs of accumulators too),
// word by word.
template <typename A>
__device__ __forceinline__ A shfl_down(const A& v, unsigned delta, int width) {
#if TANDEM_CUDA_SIM
  // The simulator exchanges the words in one meeting of the lanes.
  return ::tandem::sim::shuffle(kFullMask, v, ::tandem::sim::ShuffleKind::Down, static_cast<int>(delta), width);
#else
  constexpr int kWords = static_cast<int>((sizeof(A) + 3) / 4);
  uint32_t w[kWords] = {};
  memcpy(w, &v, sizeof(A));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_down_sync(kFullMask, w[i], delta, width);
  A r;
  memcpy(&r, w, sizeof(A));
  return r;
#endif
}
template <typename A>
__device__ __forceinline__ A shfl(const A& v, int src_lane, int width) {
#if TANDEM_CUDA_SIM
  return ::tandem::sim::shuffle(kFullMask, v, ::tandem::sim::ShuffleKind::Index, src_lane, width);
#else
  constexpr int kWords = static_cast<int>((sizeof(A) + 3) / 4);
  uint32_t w[kWords] = {};
  memcpy(w, &v, sizeof(A));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_sync(kFullMask, w[i], src_lane, width);
  A r;
  memcpy(&r, w, sizeof(A));
  return r;
#endif
}

// Combines v over the threadIdx.x of each row of the block; the result is
// valid in threadIdx.x == 0. smem holds blockDim.x * blockDim.y / 32 values.
// Every thread of the block must call it.
template <typename A, typename Combine>
__device__ A reduce_x(A v, const Combine& combine, const A& identity, A* smem) {
  const int bx = static_cast<int>(blockDim.x);
  const int width = bx < 32 ? bx : 32;
  for (int off = width / 2; off > 0; off /= 2) v = combine(v, shfl_down(v, off, width));
  if (bx <= 32) return v;
  // A row spans several whole warps: one partial per warp, then the row's
  // first warp merges them.
  const int warps = bx / 32, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  A* row = smem + threadIdx.y * warps;
  __syncthreads();  // smem may still be read by a previous call
  if (lane == 0) row[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? row[lane] : identity;
    for (int off = 16; off > 0; off /= 2) v = combine(v, shfl_down(v, off, 32));
  }
  return v;
}

// reduce_x with the result in every thread of the row. smem holds
// blockDim.x * blockDim.y / 32 values and at least blockDim.y.
template <typename A, typename Combine>
__device__ A allreduce_x(A v, const Combine& combine, const A& identity, A* smem) {
  v = reduce_x(v, combine, identity, smem);
  if (blockDim.x <= 32) return shfl(v, 0, static_cast<int>(blockDim.x));
  __syncthreads();  // the row's warps are done reading smem
  if (threadIdx.x == 0) smem[threadIdx.y] = v;
  __syncthreads();
  return smem[threadIdx.y];
}

// Combines each of v[0..N) over the threadIdx.y of each column of the
// block, all N in one pass (one barrier per tree level, not N); the results
// are returned in every thread of the column. smem holds N * blockDim.x *
// blockDim.y values. Every thread of the block must call it.
template <int N, typename A, typename Combine>
__device__ void reduce_y(A (&v)[N], const Combine& combine, A* smem) {
  const int bx = static_cast<int>(blockDim.x), by = static_cast<int>(blockDim.y);
  if (by == 1) return;
  // Lanes a multiple of bx apart in a warp share threadIdx.x: fold the
  // warp's rows first.
  for (int off = 16; off >= bx; off /= 2)
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = combine(v[k], shfl_down(v[k], off, 32));
  const int rows_per_warp = bx < 32 ? 32 / bx : 1;
  const int parts = by / rows_per_warp;
  if (parts == 1) {
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = shfl(v[k], static_cast<int>(threadIdx.x), 32);
    return;
  }
  auto at = [&](int part, int k) -> A& { return smem[(part * bx + static_cast<int>(threadIdx.x)) * N + k]; };
  __syncthreads();  // smem may still be read by a previous call
  if (threadIdx.y % rows_per_warp == 0)
#pragma unroll
    for (int k = 0; k < N; ++k) at(static_cast<int>(threadIdx.y) / rows_per_warp, k) = v[k];
  __syncthreads();
  for (int s = parts / 2; s > 0; s /= 2) {
    const int y = static_cast<int>(threadIdx.y);
    if (y < s)
#pragma unroll
      for (int k = 0; k < N; ++k) at(y, k) = combine(at(y, k), at(y + s, k));
    __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = at(0, k);
}

}  // namespace tandem::cuda

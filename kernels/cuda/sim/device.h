// What a kernel sees in the simulated build: the built-in variables, the
// function qualifiers, __syncthreads() and the warp shuffles (both suspend
// the calling thread, a fiber, until its block or warp arrives: scheduler.cpp),
// the atomics and the math intrinsics Tandem's kernels use.
//
// Blocks run one at a time, and a block's threads one at a time, so that the
// built-in variables are plain globals the scheduler sets before it resumes a
// thread, __shared__ is `static` (one copy, reused by every block of every
// launch of that kernel: uninitialised, as on a GPU), and an atomic is a
// plain read-modify-write.
#pragma once

#include <math.h>  // isnan, isinf, ... in the global namespace, as device code calls them

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/sim/api.h"
#include "kernels/cuda/sim/half.h"

// ---------------------------------------------------------------- qualifiers
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
#define __constant__
#define __align__(n) alignas(n)

// ---------------------------------------------------------------- vector types
// CUDA's aligned vector types (vector_types.h) and their make_ functions.
#define TANDEM_SIM_VECTOR(name, T, align, ...) \
  struct alignas(align) name {                 \
    T __VA_ARGS__;                             \
  };
TANDEM_SIM_VECTOR(float2, float, 8, x, y)
TANDEM_SIM_VECTOR(float4, float, 16, x, y, z, w)
TANDEM_SIM_VECTOR(double2, double, 16, x, y)
TANDEM_SIM_VECTOR(int2, int, 8, x, y)
TANDEM_SIM_VECTOR(int4, int, 16, x, y, z, w)
TANDEM_SIM_VECTOR(uint2, unsigned, 8, x, y)
TANDEM_SIM_VECTOR(uint4, unsigned, 16, x, y, z, w)
TANDEM_SIM_VECTOR(longlong2, long long, 16, x, y)
#undef TANDEM_SIM_VECTOR
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// ---------------------------------------------------------------- built-in variables
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
inline constexpr int warpSize = 32;

namespace tandem::sim {

// The block's dynamic shared memory (the launch's third parameter).
void* dynamic_shared_memory();
// A barrier among the block's threads: every thread must reach it (one that
// has exited is reported, as the programming guide makes it undefined).
void sync_threads();
// A barrier among the lanes of the caller's warp named in mask.
void sync_warp(unsigned mask);

enum class ShuffleKind : int { Index, Up, Down, Xor };
// n (1..kShuffleWords) 32-bit words through one warp shuffle: every lane
// named in mask must arrive before any gets its values, as on the hardware.
inline constexpr int kShuffleWords = 8;
void shuffle_words(unsigned mask, const uint32_t* in, uint32_t* out, int n, ShuffleKind kind, int arg, int width);

// A value of any trivially copyable type, kShuffleWords words per exchange
// (one shuffle instruction per word on a GPU; the lanes meet once here).
template <typename T>
T shuffle(unsigned mask, T v, ShuffleKind kind, int arg, int width) {
  static_assert(std::is_trivially_copyable_v<T>, "a shuffle moves bytes");
  constexpr int kWords = static_cast<int>((sizeof(T) + 3) / 4);
  uint32_t w[kWords] = {};
  std::memcpy(w, &v, sizeof(T));
  for (int i = 0; i < kWords; i += kShuffleWords) {
    const int n = kWords - i < kShuffleWords ? kWords - i : kShuffleWords;
    shuffle_words(mask, w + i, w + i, n, kind, arg, width);
  }
  T r;
  std::memcpy(&r, w, sizeof(T));
  return r;
}

}  // namespace tandem::sim

#define TANDEM_SIM_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(::tandem::sim::dynamic_shared_memory())

inline void __syncthreads() { ::tandem::sim::sync_threads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::tandem::sim::sync_warp(mask); }
// One simulated thread runs at a time, on the host: its stores are in order.
inline void __threadfence() {}
inline void __threadfence_system() {}

template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  return ::tandem::sim::shuffle(mask, v, ::tandem::sim::ShuffleKind::Index, src_lane, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::tandem::sim::shuffle(mask, v, ::tandem::sim::ShuffleKind::Up, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::tandem::sim::shuffle(mask, v, ::tandem::sim::ShuffleKind::Down, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  return ::tandem::sim::shuffle(mask, v, ::tandem::sim::ShuffleKind::Xor, lane_mask, width);
}

// ---------------------------------------------------------------- atomics
// Plain read-modify-writes: one simulated thread runs at a time. Each returns
// the old value, as the hardware's.
template <typename T>
inline T atomicAdd(T* p, T v) {
  T old = *p;
  *p = static_cast<T>(old + v);
  return old;
}
inline __half atomicAdd(__half* p, __half v) {
  __half old = *p;
  *p = __float2half_rn(__half2float(old) + __half2float(v));
  return old;
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) {
  __nv_bfloat16 old = *p;
  *p = __float2bfloat16_rn(__bfloat162float(old) + __bfloat162float(v));
  return old;
}
template <typename T>
inline T atomicSub(T* p, T v) {
  T old = *p;
  *p = static_cast<T>(old - v);
  return old;
}
template <typename T>
inline T atomicExch(T* p, T v) {
  T old = *p;
  *p = v;
  return old;
}
template <typename T>
inline T atomicMax(T* p, T v) {
  T old = *p;
  *p = old < v ? v : old;
  return old;
}
template <typename T>
inline T atomicMin(T* p, T v) {
  T old = *p;
  *p = v < old ? v : old;
  return old;
}
template <typename T>
inline T atomicOr(T* p, T v) {
  T old = *p;
  *p = old | v;
  return old;
}
template <typename T>
inline T atomicAnd(T* p, T v) {
  T old = *p;
  *p = old & v;
  return old;
}
template <typename T>
inline T atomicCAS(T* p, T compare, T v) {
  T old = *p;
  if (old == compare) *p = v;
  return old;
}

// ---------------------------------------------------------------- intrinsics
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, 4);
  return i;
}
inline double __longlong_as_double(long long i) {
  double d;
  std::memcpy(&d, &i, 8);
  return d;
}
inline long long __double_as_longlong(double d) {
  long long i;
  std::memcpy(&i, &d, 8);
  return i;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((static_cast<uint64_t>(a) * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
// The _rn forms are correctly rounded, as host float and double arithmetic
// is; they exist to keep nvcc from contracting into an fma, which g++ does
// not do across these calls either (-ffp-contract=off for the simulated build).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
// The fast-math intrinsics: the hardware's are approximations (__expf is
// within 2 ulp plus a term in |x|); the host's exact functions are within
// what any test may assume of them.
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }
inline int __ffs(int v) { return __builtin_ffs(v); }
[[noreturn]] inline void __trap() { __builtin_trap(); }

// The device's min and max, overloaded for every arithmetic type pair as
// CUDA's are (the wider type wins).
template <typename A, typename B, typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <typename A, typename B, typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}

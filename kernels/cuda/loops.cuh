// The CUDA elementwise engine, the counterpart of kernels/cpu/loops.h:
// gpu_kernel<Out, In...>(out, {&in...}, f) applies the same per-element
// functor over the same ElementwisePlan. Each piece of the plan that fits
// 32-bit indexing takes one of two kernels: a vectorized one (16-byte loads
// and stores) when the operands are contiguous and aligned, a strided one
// (offset calculator) otherwise.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loops.h"
#include "kernels/elementwise_plan.h"
#include "tensor/core/dtype.h"

namespace tandem::cuda {

// Strided kernel: each thread handles kStridedUnroll elements, a block's
// threads adjacent elements, so that contiguous operands coalesce.
constexpr int kStridedThreads = 128;
constexpr int kStridedUnroll = 4;
// Vectorized kernel: each thread loads kVectorUnroll vectors of every input
// before it computes, to keep enough bytes in flight to saturate HBM.
constexpr int kVectorThreads = 128;
constexpr int kVectorUnroll = 4;

namespace detail {

template <int N>
struct Pointers {
  char* at[N];
};

// The loaded inputs of one element or vector (std::tuple is host-only).
template <size_t I, typename T>
struct Leaf {
  T value;
};
template <typename Seq, typename... T>
struct TupleBase;
template <size_t... I, typename... T>
struct TupleBase<std::index_sequence<I...>, T...> : Leaf<I, T>... {};
template <typename... T>
struct Tuple : TupleBase<std::index_sequence_for<T...>, T...> {};
template <size_t I, typename T>
TANDEM_DEVICE_INLINE T& get(Leaf<I, T>& leaf) {
  return leaf.value;
}

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T at[V];
};

// Loads into the opmath type. The 16-bit floats use the hardware
// conversions: exact one way, round to nearest even the other, as the
// software ones in half.h (only NaN payloads may differ).
template <typename T>
TANDEM_DEVICE_INLINE opmath_t<T> to_opmath(T x) {
  return static_cast<opmath_t<T>>(x);
}
TANDEM_DEVICE_INLINE float to_opmath(Half x) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.x));
  return f;
#else
  return ::tandem::detail::half_bits_to_float(x.x);
#endif
}
TANDEM_DEVICE_INLINE float to_opmath(BFloat16 x) { return __uint_as_float(static_cast<uint32_t>(x.x) << 16); }

// What a functor returned, stored as Out (static_cast, as the CPU loop).
template <typename Out, typename R>
TANDEM_DEVICE_INLINE Out to_out(R r) {
  if constexpr (std::is_same_v<Out, Half> && std::is_same_v<R, float>) {
#if defined(__CUDA_ARCH__)
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(r));
    return Half::from_bits(h);
#else
    return Half::from_bits(::tandem::detail::float_to_half_bits(r));
#endif
  } else if constexpr (std::is_same_v<Out, BFloat16> && std::is_same_v<R, float>) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(r));
    return BFloat16::from_bits(h);
#else
    return BFloat16(r);
#endif
  } else {
    return static_cast<Out>(r);
  }
}

template <typename T, int V>
TANDEM_DEVICE_INLINE Vec<T, V> load_vector(const char* base, uint32_t v, bool broadcast) {
  if (broadcast) {
    Vec<T, V> r;
    const T x = *reinterpret_cast<const T*>(base);
#pragma unroll
    for (int e = 0; e < V; ++e) r.at[e] = x;
    return r;
  }
  return reinterpret_cast<const Vec<T, V>*>(base)[v];
}

// g(f), or for an op set (kernels/functors/visit.h: a type with op_set)
// g(the op's functor): one switch a thread, none an element.
template <typename F>
concept OpSet = requires {
  typename F::op_set;
};
template <typename F, typename G>
TANDEM_DEVICE_INLINE void with_functor(const F& f, G&& g) {
  if constexpr (OpSet<F>)
    f.visit(g);
  else
    g(f);
}

template <typename Out, typename... In, typename F, size_t... I>
TANDEM_DEVICE_INLINE void strided_body(const OffsetCalculator<sizeof...(In) + 1>& calc,
                                       const Pointers<sizeof...(In) + 1>& data, uint32_t numel, const F& f,
                                       std::index_sequence<I...>) {
  const uint32_t first = blockIdx.x * (kStridedThreads * kStridedUnroll) + threadIdx.x;
  // Every load of the thread is issued before the first store: an in-place
  // output may alias an input, so the compiler would not reorder them.
  [[maybe_unused]] Tuple<opmath_t<In>...> args[kStridedUnroll];
  int32_t out_off[kStridedUnroll];
#pragma unroll
  for (int j = 0; j < kStridedUnroll; ++j) {
    const uint32_t idx = first + j * kStridedThreads;
    if (idx < numel) {
      const Offsets<sizeof...(In) + 1> off = calc.get(idx);
      out_off[j] = off.at[0];
      ((get<I>(args[j]) = to_opmath(*reinterpret_cast<const In*>(data.at[I + 1] + off.at[I + 1]))), ...);
    }
  }
  with_functor(f, [&](const auto& g) {
#pragma unroll
    for (int j = 0; j < kStridedUnroll; ++j) {
      if (first + j * kStridedThreads < numel)
        *reinterpret_cast<Out*>(data.at[0] + out_off[j]) = to_out<Out>(g(get<I>(args[j])...));
    }
  });
}

template <typename Out, typename... In, typename F, size_t... I>
TANDEM_DEVICE_INLINE void vector_body(const Pointers<sizeof...(In) + 1>& data, uint32_t numel, uint32_t broadcast,
                                      const F& f, std::index_sequence<I...>) {
  constexpr int V = vector_elements<Out, In...>();
  const uint32_t nvec = numel / V;
  const uint32_t first = blockIdx.x * (kVectorThreads * kVectorUnroll) + threadIdx.x;
  [[maybe_unused]] Tuple<Vec<In, V>...> args[kVectorUnroll];
#pragma unroll
  for (int j = 0; j < kVectorUnroll; ++j) {
    const uint32_t v = first + j * kVectorThreads;
    if (v < nvec) ((get<I>(args[j]) = load_vector<In, V>(data.at[I + 1], v, (broadcast >> I) & 1u)), ...);
  }
  with_functor(f, [&](const auto& g) {
#pragma unroll
    for (int j = 0; j < kVectorUnroll; ++j) {
      const uint32_t v = first + j * kVectorThreads;
      if (v < nvec) {
        Vec<Out, V> out;
#pragma unroll
        for (int e = 0; e < V; ++e) out.at[e] = to_out<Out>(g(to_opmath(get<I>(args[j]).at[e])...));
        reinterpret_cast<Vec<Out, V>*>(data.at[0])[v] = out;
      }
    }
    // The last numel % V elements, one per thread of the first block.
    const uint32_t i = nvec * V + blockIdx.x * kVectorThreads + threadIdx.x;
    if (i < numel) {
      *reinterpret_cast<Out*>(data.at[0] + size_t{i} * sizeof(Out)) = to_out<Out>(g(to_opmath(
          *reinterpret_cast<const In*>(data.at[I + 1] + (((broadcast >> I) & 1u) ? 0 : size_t{i} * sizeof(In))))...));
    }
  });
}

// (A __global__ template's pack must come last, hence F before In.)
template <typename Out, typename F, typename... In>
__global__ void __launch_bounds__(kStridedThreads)
    strided_kernel(OffsetCalculator<sizeof...(In) + 1> calc, Pointers<sizeof...(In) + 1> data, uint32_t numel, F f) {
  strided_body<Out, In...>(calc, data, numel, f, std::index_sequence_for<In...>{});
}

template <typename Out, typename F, typename... In>
__global__ void __launch_bounds__(kVectorThreads)
    vector_kernel(Pointers<sizeof...(In) + 1> data, uint32_t numel, uint32_t broadcast, F f) {
  vector_body<Out, In...>(data, numel, broadcast, f, std::index_sequence_for<In...>{});
}

// One plan piece that fits 32-bit indexing.
template <typename Out, typename... In, typename F>
void launch_piece(const ElementwisePlan<sizeof...(In) + 1>& p, const F& f, cudaStream_t stream) {
  constexpr int N = sizeof...(In) + 1;
  constexpr int V = vector_elements<Out, In...>();
  const int elem_sizes[N] = {static_cast<int>(sizeof(Out)), static_cast<int>(sizeof(In))...};
  Pointers<N> data;
  for (int k = 0; k < N; ++k) data.at[k] = p.data[k];
  const auto numel = static_cast<uint32_t>(p.numel);
  uint32_t broadcast = 0;
  if (can_vectorize<N>(p, elem_sizes, V, &broadcast)) {
    // At least one block, for a tail shorter than a vector.
    const int64_t blocks = std::max<int64_t>(1, ceil_div(numel / V, kVectorThreads * kVectorUnroll));
    TANDEM_LAUNCH(static_cast<unsigned>(blocks), kVectorThreads, 0, stream, vector_kernel<Out, F, In...>)
    (data, numel, broadcast, f);
  } else {
    const int64_t blocks = ceil_div(numel, kStridedThreads * kStridedUnroll);
    TANDEM_LAUNCH(static_cast<unsigned>(blocks), kStridedThreads, 0, stream, strided_kernel<Out, F, In...>)
    (OffsetCalculator<N>(p), data, numel, f);
  }
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace detail

// f over a plan whose output (operand 0) lives on out's device, on that
// device's current stream.
template <typename Out, typename... In, typename F>
void gpu_kernel(const ElementwisePlan<sizeof...(In) + 1>& plan, const Tensor& out, const F& f) {
  constexpr int N = sizeof...(In) + 1;
  if (plan.numel == 0) return;
  DeviceGuard guard(out.device().index());
  cudaStream_t stream = stream_of(out);
  for_each_32bit_piece<N>(plan,
                          [&](const ElementwisePlan<N>& piece) { detail::launch_piece<Out, In...>(piece, f, stream); });
}

// out[i] = f(in_0[i], ...), with the contract of cpu_kernel: inputs converted
// to their opmath type, the result to Out; inputs broadcast to out's shape;
// an input is out's very view or does not overlap it.
template <typename Out, typename... In, typename F>
void gpu_kernel(const Tensor& out, const std::array<const Tensor*, sizeof...(In)>& inputs, const F& f) {
  constexpr int N = sizeof...(In) + 1;
  if (out.numel() == 0) return;  // an empty tensor may wrap a null pointer
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < inputs.size(); ++k) ops[k + 1] = inputs[k];
  gpu_kernel<Out, In...>(make_plan<N>(ops), out, f);
}

}  // namespace tandem::cuda

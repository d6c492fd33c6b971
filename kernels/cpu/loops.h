// The CPU elementwise engine: cpu_kernel applies a per-element functor over
// an ElementwisePlan (kernels/elementwise_plan.h: the operands viewed at the
// output's shape, dims merged where every operand is contiguous across
// them), in parallel for large tensors.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "kernels/elementwise_plan.h"
#include "tensor/core/shape.h"
#include "tensor/core/tensor.h"

namespace tandem::cpu {

// The plan is shared with the CUDA backend (kernels/elementwise_plan.h).
using ::tandem::ElementwisePlan;
using ::tandem::kMaxDims;
using ::tandem::make_plan;
using ::tandem::strided_plan;

// The body of a run along the innermost dim: ptrs at its first element,
// the operands' byte strides along it, and its length.
using RunFn = void (*)(const void* ctx, char** ptrs, const int64_t* strides, int64_t n);

// Calls run(ctx, ptrs, inner_strides, n) for the runs along the innermost
// dim that cover linear indices [begin, end) of the plan. Out of line
// (loops.cpp, for N = 1 to 4) and called through a pointer, once per run, so
// that the index walk is compiled once per operand count rather than once per
// op and dtype; the run itself is the tight loop.
template <int N>
void plan_for_each(const ElementwisePlan<N>& p, int64_t begin, int64_t end, RunFn run, const void* ctx);

// The same over the whole plan, split among threads when it is large.
template <int N>
void plan_for_all(const ElementwisePlan<N>& p, RunFn run, const void* ctx);

extern template void plan_for_each<1>(const ElementwisePlan<1>&, int64_t, int64_t, RunFn, const void*);
extern template void plan_for_each<2>(const ElementwisePlan<2>&, int64_t, int64_t, RunFn, const void*);
extern template void plan_for_each<3>(const ElementwisePlan<3>&, int64_t, int64_t, RunFn, const void*);
extern template void plan_for_each<4>(const ElementwisePlan<4>&, int64_t, int64_t, RunFn, const void*);
extern template void plan_for_all<1>(const ElementwisePlan<1>&, RunFn, const void*);
extern template void plan_for_all<2>(const ElementwisePlan<2>&, RunFn, const void*);
extern template void plan_for_all<3>(const ElementwisePlan<3>&, RunFn, const void*);
extern template void plan_for_all<4>(const ElementwisePlan<4>&, RunFn, const void*);

// plan_for_each with any callable inner(ptrs, inner_strides, n).
template <int N, typename Inner>
void plan_for_each(const ElementwisePlan<N>& p, int64_t begin, int64_t end, const Inner& inner) {
  plan_for_each<N>(
      p, begin, end,
      [](const void* ctx, char** ptrs, const int64_t* strides, int64_t n) {
        (*static_cast<const Inner*>(ctx))(ptrs, strides, n);
      },
      &inner);
}

namespace detail {

// Runs with a 16-bit operand may go by blocks of kConvertBlock elements: the
// inputs converted into opmath buffers, the functor over those, the results
// converted out; three loops that each vectorize. Two kinds of run take it:
// - any with a Half operand: Half's conversions select among three cases
//   (normal, subnormal, inf or nan), and fused with some functors (relu,
//   which makes a constant of every negative input) GCC turns the selects
//   back into branches and the single loop does not vectorize;
// - a 16-bit one with a broadcast input (stride 0: x.gt(0), x * scale),
//   which the element-by-element loop would convert once an element.
// The values are the same as the single loop's.
constexpr int64_t kConvertBlock = 256;

// dst[0, m) = src's m elements in opmath, or src[0] m times (broadcast).
template <typename T>
inline void convert_block(opmath_t<T>* dst, const T* src, int64_t m, bool broadcast) {
  if (broadcast) {
    std::fill(dst, dst + m, static_cast<opmath_t<T>>(*src));
    return;
  }
  TANDEM_SIMD
  for (int64_t k = 0; k < m; ++k) dst[k] = static_cast<opmath_t<T>>(src[k]);
}

// A functor's result kept in a block: a 16-bit float (fn::Cast's) as its
// bits, since storing the struct is an aggregate copy.
template <typename R>
using Kept = std::conditional_t<kIs16Bit<R>, uint16_t, R>;
template <typename R>
inline Kept<R> keep(R r) {
  if constexpr (kIs16Bit<R>)
    return r.x;
  else
    return r;
}
template <typename R>
inline R unkeep(Kept<R> k) {
  if constexpr (kIs16Bit<R>)
    return R::from_bits(k);
  else
    return k;
}

template <typename Out, typename... In, typename F, size_t... I>
inline void apply_blocks(char** ptrs, const int64_t* strides, int64_t n, const F& fn, std::index_sequence<I...>) {
  using R = decltype(fn(std::declval<opmath_t<In>>()...));
  Out* o = reinterpret_cast<Out*>(ptrs[0]);
  const std::tuple<const In*...> in{reinterpret_cast<const In*>(ptrs[I + 1])...};
  std::tuple<std::array<opmath_t<In>, kConvertBlock>...> buf;
  std::array<Kept<R>, kConvertBlock> res;
  for (int64_t b = 0; b < n; b += kConvertBlock) {
    const int64_t m = std::min(kConvertBlock, n - b);
    (convert_block(std::get<I>(buf).data(), std::get<I>(in) + (strides[I + 1] == 0 ? 0 : b), m, strides[I + 1] == 0),
     ...);
    TANDEM_SIMD
    for (int64_t k = 0; k < m; ++k) res[k] = keep(fn(std::get<I>(buf)[k]...));
    Out* ob = o + b;
    TANDEM_SIMD
    for (int64_t k = 0; k < m; ++k) store_as(ob[k], unkeep<R>(res[k]));
  }
}

template <typename Out, typename... In, typename F, size_t... I>
inline void apply_run(char** ptrs, const int64_t* strides, int64_t n, const F& f, std::index_sequence<I...> seq) {
  // (Not compiled for a Half run, which always goes by blocks.)
  if constexpr (!std::is_same_v<Out, Half> && !(std::is_same_v<In, Half> || ...)) {
    if (strides[0] == static_cast<int64_t>(sizeof(Out)) &&
        ((strides[I + 1] == static_cast<int64_t>(sizeof(In))) && ...)) {
      // No overlap checks: an input is out's own view or does not overlap it.
      // The functor and the input pointers are copied to locals, since a store
      // through o might otherwise alias them and force a reload per element.
      Out* o = reinterpret_cast<Out*>(ptrs[0]);
      const F fn = f;
      const std::tuple<const In*...> in{reinterpret_cast<const In*>(ptrs[I + 1])...};
      TANDEM_SIMD
      for (int64_t k = 0; k < n; ++k) store_as(o[k], fn(static_cast<opmath_t<In>>(std::get<I>(in)[k])...));
      return;
    }
  }
  if constexpr (kIs16Bit<Out> || (kIs16Bit<In> || ...)) {
    if (strides[0] == static_cast<int64_t>(sizeof(Out)) &&
        ((strides[I + 1] == static_cast<int64_t>(sizeof(In)) || strides[I + 1] == 0) && ...)) {
      apply_blocks<Out, In...>(ptrs, strides, n, F(f), seq);
      return;
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    *reinterpret_cast<Out*>(ptrs[0] + k * strides[0]) = static_cast<Out>(
        f(static_cast<opmath_t<In>>(*reinterpret_cast<const In*>(ptrs[I + 1] + k * strides[I + 1]))...));
  }
}
}  // namespace detail

// Applies f over a plan built by make_plan for the output and the inputs (see
// cpu_kernel), for callers that inspect the plan first.
template <typename Out, typename... In, typename F>
void cpu_kernel(const ElementwisePlan<sizeof...(In) + 1>& plan, const F& f) {
  constexpr int N = sizeof...(In) + 1;
  static_assert(N >= 1 && N <= 4, "loops.cpp compiles the index walk for 1 to 4 operands");
  plan_for_all<N>(
      plan,
      [](const void* ctx, char** ptrs, const int64_t* strides, int64_t n) {
        detail::apply_run<Out, In...>(ptrs, strides, n, *static_cast<const F*>(ctx), std::index_sequence_for<In...>{});
      },
      &f);
}

// out[i] = f(in_0[i], ...) with inputs converted to their opmath type (float
// for the 16-bit floats) and the result converted to Out. The inputs must
// broadcast to out's shape; out must not overlap itself, and an input must
// either be out's very view (in place) or not overlap it at all (the front
// ends clone any other overlapping operand).
template <typename Out, typename... In, typename F>
void cpu_kernel(const Tensor& out, const std::array<const Tensor*, sizeof...(In)>& inputs, const F& f) {
  constexpr int N = sizeof...(In) + 1;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < inputs.size(); ++k) ops[k + 1] = inputs[k];
  cpu_kernel<Out, In...>(make_plan<N>(ops), f);
}

}  // namespace tandem::cpu

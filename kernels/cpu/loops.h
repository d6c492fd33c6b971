// The CPU elementwise engine: cpu_kernel applies a per-element functor over
// an ElementwisePlan (kernels/elementwise_plan.h: the operands viewed at the
// output's shape, dims merged where every operand is contiguous across
// them), in parallel for large tensors.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

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

// Calls inner(ptrs, inner_strides, n) for runs along the innermost dim that
// cover linear indices [begin, end) of the plan.
template <int N, typename Inner>
void plan_for_each(const ElementwisePlan<N>& p, int64_t begin, int64_t end, const Inner& inner) {
  if (p.ndim == 0) {
    if (begin < end) {
      char* ptrs[N];
      int64_t zero[N] = {};
      for (int k = 0; k < N; ++k) ptrs[k] = p.data[k];
      inner(ptrs, zero, int64_t{1});
    }
    return;
  }
  const int last = p.ndim - 1;
  int64_t idx[kMaxDims];
  int64_t rem = begin;
  for (int d = last; d >= 0; --d) {
    idx[d] = rem % p.sizes[d];
    rem /= p.sizes[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    char* ptrs[N];
    for (int k = 0; k < N; ++k) {
      int64_t off = 0;
      for (int d = 0; d <= last; ++d) off += idx[d] * p.strides[d][k];
      ptrs[k] = p.data[k] + off;
    }
    int64_t n = std::min(p.sizes[last] - idx[last], end - pos);
    inner(ptrs, p.strides[last], n);
    pos += n;
    idx[last] += n;
    for (int d = last; d > 0 && idx[d] == p.sizes[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

namespace detail {
template <typename Out, typename... In, typename F, size_t... I>
inline void apply_run(char** ptrs, const int64_t* strides, int64_t n, const F& f, std::index_sequence<I...>) {
  const bool contiguous =
      strides[0] == static_cast<int64_t>(sizeof(Out)) && ((strides[I + 1] == static_cast<int64_t>(sizeof(In))) && ...);
  if (contiguous) {
    // No overlap checks: an input is out's own view or does not overlap it.
    // The functor and the input pointers are copied to locals, since a store
    // through o might otherwise alias them and force a reload per element.
    Out* o = reinterpret_cast<Out*>(ptrs[0]);
    const F fn = f;
    const std::tuple<const In*...> in{reinterpret_cast<const In*>(ptrs[I + 1])...};
    TANDEM_SIMD
    for (int64_t k = 0; k < n; ++k) o[k] = static_cast<Out>(fn(static_cast<opmath_t<In>>(std::get<I>(in)[k])...));
  } else {
    for (int64_t k = 0; k < n; ++k) {
      *reinterpret_cast<Out*>(ptrs[0] + k * strides[0]) = static_cast<Out>(
          f(static_cast<opmath_t<In>>(*reinterpret_cast<const In*>(ptrs[I + 1] + k * strides[I + 1]))...));
    }
  }
}
}  // namespace detail

// Applies f over a plan built by make_plan for the output and the inputs (see
// cpu_kernel), for callers that inspect the plan first.
template <typename Out, typename... In, typename F>
void cpu_kernel(const ElementwisePlan<sizeof...(In) + 1>& plan, const F& f) {
  constexpr int N = sizeof...(In) + 1;
  parallel_for(0, plan.numel, kElementwiseGrain, [&](int64_t b, int64_t e) {
    plan_for_each<N>(plan, b, e, [&](char** ptrs, const int64_t* strides, int64_t n) {
      detail::apply_run<Out, In...>(ptrs, strides, n, f, std::index_sequence_for<In...>{});
    });
  });
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

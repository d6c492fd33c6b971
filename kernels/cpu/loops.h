// The CPU elementwise engine: an ElementwisePlan views the output and its
// inputs at the output's shape (broadcast dims get stride 0), merges dims
// that are contiguous in every operand, and cpu_kernel applies a per-element
// functor over it, in parallel for large tensors.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include "kernels/cpu/parallel.h"
#include "tensor/core/shape.h"
#include "tensor/core/tensor.h"

namespace tandem::cpu {

constexpr int kMaxDims = 16;

// N operands, the output first. Sizes and strides are innermost-last;
// strides are in bytes.
template <int N>
struct ElementwisePlan {
  int ndim = 0;
  int64_t numel = 1;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];
  char* data[N];
};

// A plan over `shape` for N operands given by base pointers and byte strides
// (0 where an operand does not move along a dim). Size-1 dims are dropped and
// a dim is merged into the one inside it when every operand allows it.
template <int N>
ElementwisePlan<N> strided_plan(IntArrayRef shape, const std::array<char*, N>& data,
                                const std::array<Shape, N>& byte_strides) {
  ElementwisePlan<N> p;
  for (int k = 0; k < N; ++k) p.data[k] = data[k];
  p.numel = shape_numel(shape);
  // Walk from the innermost dim outwards.
  int nd = 0;
  int64_t sizes_rev[kMaxDims];
  int64_t strides_rev[kMaxDims][N];
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < N && merge; ++k) merge = byte_strides[k][i] == strides_rev[nd - 1][k] * sizes_rev[nd - 1];
    if (merge) {
      sizes_rev[nd - 1] *= shape[i];
    } else {
      // Only dims that survive dropping and merging count against the limit.
      TANDEM_CHECK(nd < kMaxDims, ShapeError, "elementwise ops support at most ", kMaxDims,
                   " non-mergeable dimensions of size > 1 (shape ", shape_str(shape), ")");
      sizes_rev[nd] = shape[i];
      for (int k = 0; k < N; ++k) strides_rev[nd][k] = byte_strides[k][i];
      ++nd;
    }
  }
  p.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    p.sizes[d] = sizes_rev[nd - 1 - d];
    for (int k = 0; k < N; ++k) p.strides[d][k] = strides_rev[nd - 1 - d][k];
  }
  return p;
}

// The plan for an output (ops[0]) and inputs that broadcast to its shape.
template <int N>
ElementwisePlan<N> make_plan(const std::array<const Tensor*, N>& ops) {
  IntArrayRef shape = ops[0]->sizes();
  std::array<char*, N> data;
  std::array<Shape, N> byte_strides;
  for (int k = 0; k < N; ++k) {
    data[k] = static_cast<char*>(ops[k]->data_ptr());
    byte_strides[k] = broadcast_strides(ops[k]->sizes(), ops[k]->strides(), shape);
    for (int64_t& st : byte_strides[k]) st *= static_cast<int64_t>(ops[k]->element_size());
  }
  return strided_plan<N>(shape, data, byte_strides);
}

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

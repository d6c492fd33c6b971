// The index walk of cpu_kernel (kernels/cpu/loops.h), compiled once per
// operand count.
#include "kernels/cpu/loops.h"

namespace tandem::cpu {

template <int N>
void plan_for_each(const ElementwisePlan<N>& p, int64_t begin, int64_t end, RunFn run, const void* ctx) {
  if (p.ndim == 0) {
    if (begin < end) {
      char* ptrs[N];
      int64_t zero[N] = {};
      for (int k = 0; k < N; ++k) ptrs[k] = p.data[k];
      run(ctx, ptrs, zero, int64_t{1});
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
    run(ctx, ptrs, p.strides[last], n);
    pos += n;
    idx[last] += n;
    for (int d = last; d > 0 && idx[d] == p.sizes[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

template <int N>
void plan_for_all(const ElementwisePlan<N>& p, RunFn run, const void* ctx) {
  parallel_for(0, p.numel, kElementwiseGrain, [&](int64_t b, int64_t e) { plan_for_each<N>(p, b, e, run, ctx); });
}

template void plan_for_each<1>(const ElementwisePlan<1>&, int64_t, int64_t, RunFn, const void*);
template void plan_for_each<2>(const ElementwisePlan<2>&, int64_t, int64_t, RunFn, const void*);
template void plan_for_each<3>(const ElementwisePlan<3>&, int64_t, int64_t, RunFn, const void*);
template void plan_for_each<4>(const ElementwisePlan<4>&, int64_t, int64_t, RunFn, const void*);
template void plan_for_all<1>(const ElementwisePlan<1>&, RunFn, const void*);
template void plan_for_all<2>(const ElementwisePlan<2>&, RunFn, const void*);
template void plan_for_all<3>(const ElementwisePlan<3>&, RunFn, const void*);
template void plan_for_all<4>(const ElementwisePlan<4>&, RunFn, const void*);

}  // namespace tandem::cpu

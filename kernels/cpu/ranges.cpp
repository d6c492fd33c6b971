// CPU kernels of the range factories. The per-element math is shared with
// the CUDA kernels (kernels/functors/ranges.h): it follows PyTorch's CPU
// kernels with a*b + c fused into one fma, so the values match torch's and
// the GPU's bit for bit.
#include "kernels/ranges.h"

#include <cmath>
#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/functors/ranges.h"

namespace tandem::cpu {

namespace {

template <typename T>
T* contiguous_data(const Tensor& out) {
  TANDEM_INTERNAL_ASSERT(out.is_contiguous(), "range kernels write contiguous outputs");
  return out.data_ptr<T>();
}

}  // namespace

void arange(const Tensor& out, const Scalar& start, const Scalar& step) {
  int64_t n = out.numel();
  dispatch_numeric(out.dtype(), "arange (cpu)", [&]<typename T>() {
    using Acc = fn::arange_acc_t<T>;
    T* p = contiguous_data<T>(out);
    const Acc a = start.to<Acc>(), s = step.to<Acc>();
    parallel_for(0, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = fn::arange_at<T>(a, s, i);
    });
  });
}

void linspace(const Tensor& out, const Scalar& start, const Scalar& end) {
  int64_t steps = out.numel();
  if (steps == 0) return;
  dispatch_numeric(out.dtype(), "linspace (cpu)", [&]<typename T>() {
    using M = fn::LinspaceMath<T>;
    using S = typename M::S;
    T* p = contiguous_data<T>(out);
    const T a = start.to<T>(), z = end.to<T>();
    if (steps == 1) {
      p[0] = a;
      return;
    }
    const S sa = static_cast<S>(a), sz = static_cast<S>(z);
    const S step = M::div(M::sub(sz, sa), steps - 1);
    parallel_for(0, steps, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = M::at(sa, sz, step, steps, i);
    });
  });
}

void eye(const Tensor& out) {
  const int64_t n = out.size(0), m = out.size(1);
  if (n == 0 || m == 0) return;
  dispatch_all(out.dtype(), "eye (cpu)", [&]<typename T>() {
    T* p = contiguous_data<T>(out);
    const T zero = static_cast<T>(0.0f), one = static_cast<T>(1.0f);
    parallel_for(0, n, std::max<int64_t>(1, kElementwiseGrain / m), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T* row = p + i * m;
        for (int64_t j = 0; j < m; ++j) row[j] = zero;
        if (i < m) row[i] = one;
      }
    });
  });
}

}  // namespace tandem::cpu

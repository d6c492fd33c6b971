// CPU softmax and log_softmax with their fused backward (contract:
// kernels/softmax.h). They walk (outer, n, inner) with loops of their own:
// rows when the dim is innermost, bands of columns else. The gradient's terms
// are the CUDA kernels' too (kernels/functors/softmax.h).
#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/functors/reduce.h"
#include "kernels/functors/softmax.h"
#include "tensor/core/shape.h"

namespace tandem::cpu {

namespace {

// Below this many input elements softmax runs on one thread.
constexpr int64_t kSoftmaxGrain = 32768;
// The column loops keep a band of up to kColumns<A> accumulators (16 KiB,
// L1-sized), as the reductions' columns loop does.
template <typename A>
constexpr int64_t kColumns = std::max<int64_t>(16, 16384 / static_cast<int64_t>(sizeof(A)));

// ---- softmax: max, then the sum of exp(x - max), then the outputs
template <typename T>
void softmax_rows(T* out, const T* in, int64_t rows, int64_t n, bool log) {
  using M = opmath_t<T>;
  constexpr int kLanes = 8;
  parallel_for(0, rows, std::max<int64_t>(1, kSoftmaxGrain / n), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* x = in + r * n;
      T* y = out + r * n;
      M lane[kLanes];
      for (int k = 0; k < kLanes; ++k) lane[k] = fn::lowest_value<M>();
      int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes)
        for (int k = 0; k < kLanes; ++k) lane[k] = fn::max_nan(lane[k], static_cast<M>(x[i + k]));
      for (; i < n; ++i) lane[0] = fn::max_nan(lane[0], static_cast<M>(x[i]));
      M max = lane[0];
      for (int k = 1; k < kLanes; ++k) max = fn::max_nan(max, lane[k]);

      // A float row keeps exp(x - max) in the output for the last pass; a
      // 16-bit one recomputes it rather than round it twice.
      constexpr bool keep_exp = std::is_same_v<T, M>;
      for (int k = 0; k < kLanes; ++k) lane[k] = M(0);
      for (i = 0; i + kLanes <= n; i += kLanes) {
        for (int k = 0; k < kLanes; ++k) {
          M ex = std::exp(static_cast<M>(x[i + k]) - max);
          if (keep_exp && !log) y[i + k] = static_cast<T>(ex);
          lane[k] += ex;
        }
      }
      for (; i < n; ++i) {
        M ex = std::exp(static_cast<M>(x[i]) - max);
        if (keep_exp && !log) y[i] = static_cast<T>(ex);
        lane[0] += ex;
      }
      M sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));

      if (log) {
        fn::LogSoftmaxOut<M> f{max, std::log(sum)};
        for (i = 0; i < n; ++i) y[i] = static_cast<T>(f(static_cast<M>(x[i])));
      } else if (keep_exp) {
        M inv = M(1) / sum;
        for (i = 0; i < n; ++i) y[i] = static_cast<T>(static_cast<M>(y[i]) * inv);
      } else {
        fn::SoftmaxOut<M> f{max, M(1) / sum};
        for (i = 0; i < n; ++i) y[i] = static_cast<T>(f(static_cast<M>(x[i])));
      }
    }
  });
}

// The width of the column bands of softmax_columns and its backward: W, or
// narrower when there are fewer outer slices than threads, so that every
// thread gets a band.
int64_t softmax_band_width(int64_t W, int64_t outer, int64_t n, int64_t inner) {
  const int64_t nthreads = num_threads();
  if (outer < nthreads && outer * n * inner > kSoftmaxGrain)
    return std::clamp<int64_t>((inner * outer + nthreads - 1) / nthreads, 16, W);
  return W;
}

// Softmax over a dim with inner elements after it: a band of up to W
// columns at a time, walking the dim with stride inner, row by row.
template <typename T>
void softmax_columns(T* out, const T* in, int64_t outer, int64_t n, int64_t inner, bool log) {
  using M = opmath_t<T>;
  constexpr int64_t W = kColumns<M> / 2;
  const int64_t width = softmax_band_width(W, outer, n, inner);
  const int64_t chunks = (inner + width - 1) / width;
  parallel_for(0, outer * chunks, std::max<int64_t>(1, kSoftmaxGrain / (n * width)), [&](int64_t b, int64_t e) {
    M max[W], sum[W];
    for (int64_t t = b; t < e; ++t) {
      const int64_t c0 = (t % chunks) * width, w = std::min(width, inner - c0);
      const T* x = in + (t / chunks) * n * inner + c0;
      T* y = out + (t / chunks) * n * inner + c0;
      for (int64_t j = 0; j < w; ++j) {
        max[j] = fn::lowest_value<M>();
        sum[j] = M(0);
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j) max[j] = fn::max_nan(max[j], static_cast<M>(x[i * inner + j]));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j) sum[j] += std::exp(static_cast<M>(x[i * inner + j]) - max[j]);
      for (int64_t j = 0; j < w; ++j) sum[j] = log ? std::log(sum[j]) : M(1) / sum[j];
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < w; ++j) {
          M v = static_cast<M>(x[i * inner + j]);
          y[i * inner + j] =
              static_cast<T>(log ? fn::LogSoftmaxOut<M>{max[j], sum[j]}(v) : fn::SoftmaxOut<M>{max[j], sum[j]}(v));
        }
      }
    }
  });
}

// ---- softmax backward: one fold per row (of grad * out, or of grad alone
// for log_softmax), then every element's gradient from that sum. Both
// passes read grad and out; nothing else is allocated.

template <bool Log, typename M>
inline M softmax_grad_out(M g, M y, M sum) {
  return fn::softmax_grad_out<Log>(g, y, sum, [](M v) { return std::exp(v); });
}

template <bool Log, typename T>
void softmax_backward_rows(T* grad_in, const T* grad, const T* out, int64_t rows, int64_t n) {
  using M = opmath_t<T>;
  constexpr int kLanes = 8;
  parallel_for(0, rows, std::max<int64_t>(1, kSoftmaxGrain / n), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* g = grad + r * n;
      const T* y = out + r * n;
      T* gx = grad_in + r * n;
      M lane[kLanes];
      for (int k = 0; k < kLanes; ++k) lane[k] = M(0);
      int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes)
        for (int k = 0; k < kLanes; ++k)
          lane[k] += fn::softmax_grad_term<Log>(static_cast<M>(g[i + k]), static_cast<M>(y[i + k]));
      for (; i < n; ++i) lane[0] += fn::softmax_grad_term<Log>(static_cast<M>(g[i]), static_cast<M>(y[i]));
      const M sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      TANDEM_SIMD
      for (i = 0; i < n; ++i)
        gx[i] = static_cast<T>(softmax_grad_out<Log>(static_cast<M>(g[i]), static_cast<M>(y[i]), sum));
    }
  });
}

// An inner dim after the softmax dim: bands of columns as softmax_columns.
template <bool Log, typename T>
void softmax_backward_columns(T* grad_in, const T* grad, const T* out, int64_t outer, int64_t n, int64_t inner) {
  using M = opmath_t<T>;
  constexpr int64_t W = kColumns<M> / 2;
  const int64_t width = softmax_band_width(W, outer, n, inner);
  const int64_t chunks = (inner + width - 1) / width;
  parallel_for(0, outer * chunks, std::max<int64_t>(1, kSoftmaxGrain / (n * width)), [&](int64_t b, int64_t e) {
    M sum[W];
    for (int64_t t = b; t < e; ++t) {
      const int64_t c0 = (t % chunks) * width, w = std::min(width, inner - c0);
      const int64_t base = (t / chunks) * n * inner + c0;
      const T* g = grad + base;
      const T* y = out + base;
      T* gx = grad_in + base;
      for (int64_t j = 0; j < w; ++j) sum[j] = M(0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j)
          sum[j] += fn::softmax_grad_term<Log>(static_cast<M>(g[i * inner + j]), static_cast<M>(y[i * inner + j]));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j)
          gx[i * inner + j] = static_cast<T>(
              softmax_grad_out<Log>(static_cast<M>(g[i * inner + j]), static_cast<M>(y[i * inner + j]), sum[j]));
    }
  });
}

template <bool Log, typename T>
void softmax_backward_to(const Tensor& grad_in, const Tensor& grad, const Tensor& out, const DimSplit& split) {
  if (split.inner == 1)
    softmax_backward_rows<Log>(grad_in.data_ptr<T>(), grad.data_ptr<T>(), out.data_ptr<T>(), split.outer, split.size);
  else
    softmax_backward_columns<Log>(grad_in.data_ptr<T>(), grad.data_ptr<T>(), out.data_ptr<T>(), split.outer, split.size,
                                  split.inner);
}

}  // namespace

void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (in.numel() == 0) return;
  const DimSplit split = split_at_dim(in.sizes(), dim);
  const int64_t outer = split.outer, n = split.size, inner = split.inner;
  dispatch_floating(in.dtype(), log ? "log_softmax (cpu)" : "softmax (cpu)", [&]<typename T>() {
    if (inner == 1)
      softmax_rows(out.data_ptr<T>(), in.data_ptr<T>(), outer, n, log);
    else
      softmax_columns(out.data_ptr<T>(), in.data_ptr<T>(), outer, n, inner, log);
  });
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad, const Tensor& out, int64_t dim, bool log) {
  if (grad.numel() == 0) return;
  const DimSplit split = split_at_dim(grad.sizes(), dim);
  dispatch_floating(grad.dtype(), log ? "log_softmax_backward (cpu)" : "softmax_backward (cpu)", [&]<typename T>() {
    if (log)
      softmax_backward_to<true, T>(grad_in, grad, out, split);
    else
      softmax_backward_to<false, T>(grad_in, grad, out, split);
  });
}

}  // namespace tandem::cpu

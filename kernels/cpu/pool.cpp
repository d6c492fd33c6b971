// CPU pooling: each (n, c) plane on its own, planes split across threads
// when there is enough work. Sums and comparisons run in the compute type
// (float for float16/bfloat16); backward passes scatter each output's
// gradient into its window, accumulating in the compute type.
#include "kernels/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace tandem::cpu {

namespace {

// (N, C, H, W) seen as planes of H x W elements.
struct Planes {
  int64_t count, H, W, OH, OW;
};

Planes planes_of(const Tensor& in, const Tensor& out) {
  return {in.size(0) * in.size(1), in.size(2), in.size(3), out.size(2), out.size(3)};
}

// f(first, last) over planes, on several threads when the planes hold more
// than kElementwiseGrain units of work (work: per plane).
template <typename F>
void for_planes(int64_t count, int64_t work, const F& f) {
  parallel_for(0, count, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(work, 1)), f);
}

// A plane's gradient, summed in the compute type A: the output plane itself
// when it has that type, else a buffer converted on store.
template <typename T, typename A>
struct GradPlane {
  std::vector<A> buf;
  A* begin(T* dst, int64_t n) {
    if constexpr (std::is_same_v<T, A>) {
      std::fill_n(dst, n, A(0));
      return dst;
    } else {
      buf.assign(static_cast<size_t>(n), A(0));
      return buf.data();
    }
  }
  void end(T* dst, int64_t n) {
    if constexpr (!std::is_same_v<T, A>)
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(buf[i]);
  }
};

// ---------------------------------------------------------------- max

// The 2x2, stride 2 window every CNN uses, with no padding or dilation and
// every window inside the plane: the general loop below, unrolled (same
// order of comparisons, so the same maxima, indices and NaN rule). The
// general loop's per-tap bounds and branches made it 10x slower than relu.
template <typename T>
void max_pool_2x2_plane(const T* plane, T* yp, int64_t* ip, const Planes& s) {
  using A = opmath_t<T>;
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    const T* r0 = plane + 2 * oh * s.W;
    const T* r1 = r0 + s.W;
    // Selects, not branches: on random data every comparison is a coin toss.
    TANDEM_SIMD
    for (int64_t ow = 0; ow < s.OW; ++ow) {
      const int64_t c = 2 * ow, at = 2 * oh * s.W + c;
      const A v0 = static_cast<A>(r0[c]), v1 = static_cast<A>(r0[c + 1]);
      const A v2 = static_cast<A>(r1[c]), v3 = static_cast<A>(r1[c + 1]);
      // The first tap always replaces the general loop's -inf start (or
      // equals it, keeping the same index). v != v: v is NaN.
      A best = v0;
      int64_t idx = at;
      const bool t1 = v1 > best || v1 != v1;
      best = t1 ? v1 : best;
      idx = t1 ? at + 1 : idx;
      const bool t2 = v2 > best || v2 != v2;
      best = t2 ? v2 : best;
      idx = t2 ? at + s.W : idx;
      const bool t3 = v3 > best || v3 != v3;
      best = t3 ? v3 : best;
      idx = t3 ? at + s.W + 1 : idx;
      yp[oh * s.OW + ow] = static_cast<T>(best);
      ip[oh * s.OW + ow] = idx;
    }
  }
}

template <typename T>
void max_pool_typed(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p) {
  using A = opmath_t<T>;
  const Planes s = planes_of(input, out);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  int64_t* ind = indices.data_ptr<int64_t>();
  const bool two_by_two = p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
                          p.pad_w == 0 && p.dilation_h == 1 && p.dilation_w == 1 && 2 * s.OH <= s.H && 2 * s.OW <= s.W;
  for_planes(s.count, s.OH * s.OW * p.kernel_h * p.kernel_w, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* plane = x + pl * s.H * s.W;
      T* yp = y + pl * s.OH * s.OW;
      int64_t* ip = ind + pl * s.OH * s.OW;
      if (two_by_two) {
        max_pool_2x2_plane(plane, yp, ip, s);
        continue;
      }
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        int64_t h0 = oh * p.stride_h - p.pad_h;
        const int64_t h1 = std::min(h0 + (p.kernel_h - 1) * p.dilation_h + 1, s.H);
        while (h0 < 0) h0 += p.dilation_h;
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          int64_t w0 = ow * p.stride_w - p.pad_w;
          const int64_t w1 = std::min(w0 + (p.kernel_w - 1) * p.dilation_w + 1, s.W);
          while (w0 < 0) w0 += p.dilation_w;
          // PyTorch's loop: the first maximum wins, a NaN replaces anything
          // (so the last NaN wins). A window with no tap in the input (only
          // possible with dilation on a tiny input) gives -inf.
          int64_t best = h0 * s.W + w0;
          A best_val = -std::numeric_limits<A>::infinity();
          for (int64_t ih = h0; ih < h1; ih += p.dilation_h) {
            for (int64_t iw = w0; iw < w1; iw += p.dilation_w) {
              const int64_t idx = ih * s.W + iw;
              const A v = static_cast<A>(plane[idx]);
              if (v > best_val || std::isnan(v)) {
                best_val = v;
                best = idx;
              }
            }
          }
          yp[oh * s.OW + ow] = static_cast<T>(best_val);
          ip[oh * s.OW + ow] = best;
        }
      }
    }
  });
}

template <typename T>
void max_pool_backward_typed(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices) {
  using A = opmath_t<T>;
  const Planes s = planes_of(grad_input, grad_out);
  const int64_t in_n = s.H * s.W, out_n = s.OH * s.OW;
  const T* gy = grad_out.data_ptr<T>();
  const int64_t* ind = indices.data_ptr<int64_t>();
  T* gx = grad_input.data_ptr<T>();
  for_planes(s.count, in_n + out_n, [&](int64_t b, int64_t e) {
    GradPlane<T, A> acc;
    for (int64_t pl = b; pl < e; ++pl) {
      A* g = acc.begin(gx + pl * in_n, in_n);
      const T* gyp = gy + pl * out_n;
      const int64_t* ip = ind + pl * out_n;
      for (int64_t o = 0; o < out_n; ++o) {
        const int64_t idx = ip[o];
        if (idx >= 0 && idx < in_n) g[idx] += static_cast<A>(gyp[o]);  // -inf windows point outside
      }
      acc.end(gx + pl * in_n, in_n);
    }
  });
}

// ---------------------------------------------------------------- average

template <typename T>
void avg_pool_typed(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  using A = opmath_t<T>;
  const Planes s = planes_of(input, out);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  for_planes(s.count, s.OH * s.OW * p.kernel_h * p.kernel_w, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* plane = x + pl * s.H * s.W;
      T* yp = y + pl * s.OH * s.OW;
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          const fn::AvgWindow win = fn::avg_window(oh, ow, s.H, s.W, p);
          A sum = 0;
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += static_cast<A>(plane[ih * s.W + iw]);
          // A window wholly in the padding (possible with ceil_mode) is 0.
          const bool empty = win.h0 >= win.h1 || win.w0 >= win.w1;
          yp[oh * s.OW + ow] = static_cast<T>(empty ? A(0) : sum / static_cast<A>(win.divisor));
        }
      }
    }
  });
}

template <typename T>
void avg_pool_backward_typed(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p) {
  using A = opmath_t<T>;
  const Planes s = planes_of(grad_input, grad_out);
  const int64_t in_n = s.H * s.W, out_n = s.OH * s.OW;
  const T* gy = grad_out.data_ptr<T>();
  T* gx = grad_input.data_ptr<T>();
  for_planes(s.count, in_n + out_n * p.kernel_h * p.kernel_w, [&](int64_t b, int64_t e) {
    GradPlane<T, A> acc;
    for (int64_t pl = b; pl < e; ++pl) {
      A* g = acc.begin(gx + pl * in_n, in_n);
      const T* gyp = gy + pl * out_n;
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          const fn::AvgWindow win = fn::avg_window(oh, ow, s.H, s.W, p);
          const A share = static_cast<A>(gyp[oh * s.OW + ow]) / static_cast<A>(win.divisor);
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) g[ih * s.W + iw] += share;
        }
      }
      acc.end(gx + pl * in_n, in_n);
    }
  });
}

// ---------------------------------------------------------------- adaptive average

template <typename T>
void adaptive_avg_typed(const Tensor& out, const Tensor& input) {
  using A = opmath_t<T>;
  const Planes s = planes_of(input, out);
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  // Each input element is read about once per output window holding it.
  const int64_t work = s.H * s.W + s.OH * s.OW;
  for_planes(s.count, work, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* plane = x + pl * s.H * s.W;
      T* yp = y + pl * s.OH * s.OW;
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        const int64_t h0 = fn::adaptive_start(oh, s.OH, s.H), h1 = fn::adaptive_end(oh, s.OH, s.H);
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          const int64_t w0 = fn::adaptive_start(ow, s.OW, s.W), w1 = fn::adaptive_end(ow, s.OW, s.W);
          A sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<A>(plane[ih * s.W + iw]);
          yp[oh * s.OW + ow] = static_cast<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
}

template <typename T>
void adaptive_avg_backward_typed(const Tensor& grad_input, const Tensor& grad_out) {
  using A = opmath_t<T>;
  const Planes s = planes_of(grad_input, grad_out);
  const int64_t in_n = s.H * s.W, out_n = s.OH * s.OW;
  const T* gy = grad_out.data_ptr<T>();
  T* gx = grad_input.data_ptr<T>();
  for_planes(s.count, in_n + out_n, [&](int64_t b, int64_t e) {
    GradPlane<T, A> acc;
    for (int64_t pl = b; pl < e; ++pl) {
      A* g = acc.begin(gx + pl * in_n, in_n);
      const T* gyp = gy + pl * out_n;
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        const int64_t h0 = fn::adaptive_start(oh, s.OH, s.H), h1 = fn::adaptive_end(oh, s.OH, s.H);
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          const int64_t w0 = fn::adaptive_start(ow, s.OW, s.W), w1 = fn::adaptive_end(ow, s.OW, s.W);
          const A share = static_cast<A>(gyp[oh * s.OW + ow]) / static_cast<A>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) g[ih * s.W + iw] += share;
        }
      }
      acc.end(gx + pl * in_n, in_n);
    }
  });
}

}  // namespace

void max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dParams& p) {
  dispatch_floating(input.dtype(), "max_pool2d (cpu)",
                    [&]<typename T>() { max_pool_typed<T>(out, indices, input, p); });
}

// The indices alone say where each gradient goes: the windows are not needed.
void max_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                         const Pool2dParams& /*p*/) {
  dispatch_floating(grad_input.dtype(), "max_pool2d_backward (cpu)",
                    [&]<typename T>() { max_pool_backward_typed<T>(grad_input, grad_out, indices); });
}

void avg_pool2d(const Tensor& out, const Tensor& input, const Pool2dParams& p) {
  dispatch_floating(input.dtype(), "avg_pool2d (cpu)", [&]<typename T>() { avg_pool_typed<T>(out, input, p); });
}

void avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dParams& p) {
  dispatch_floating(grad_input.dtype(), "avg_pool2d_backward (cpu)",
                    [&]<typename T>() { avg_pool_backward_typed<T>(grad_input, grad_out, p); });
}

void adaptive_avg_pool2d(const Tensor& out, const Tensor& input) {
  dispatch_floating(input.dtype(), "adaptive_avg_pool2d (cpu)",
                    [&]<typename T>() { adaptive_avg_typed<T>(out, input); });
}

void adaptive_avg_pool2d_backward(const Tensor& grad_input, const Tensor& grad_out) {
  dispatch_floating(grad_input.dtype(), "adaptive_avg_pool2d_backward (cpu)",
                    [&]<typename T>() { adaptive_avg_backward_typed<T>(grad_input, grad_out); });
}

}  // namespace tandem::cpu

// CPU kernels of batch norm and layer norm (contract in kernels/cpu/norm.h;
// embedding's are in embedding.cpp). Statistics sum in double, so float32 inputs lose
// nothing to cancellation (see Moments: one shifted pass below float64, two
// passes for it); the layer-norm backward's short row sums run in the
// statistics' type, as PyTorch's. Every inner loop runs over a contiguous
// run and vectorises.
//
// Batch norm walks the input as (N, C, L). With long planes (L >= 16) a
// thread owns whole channels: its statistics, then its outputs, while the
// channel is still in cache. With short planes ((N, C) and (N, C, L) with
// L < 16) a channel's values are strided, so rows of C * L values are summed
// into per-block accumulators and merged; the blocks depend on the size
// only, never on the thread count, so results do not change with it.
#include "kernels/norm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/embedding.h"
#include "kernels/functors/norm.h"
#include "tensor/core/dtype.h"
#include "tensor/core/errors.h"

namespace tandem::cpu {

namespace {

// Below this many values an op runs on one thread; each parallel task gets
// at least this much.
constexpr int64_t kNormGrain = 32768;
// Planes at least this long are walked channel by channel.
constexpr int64_t kLongPlane = 16;
// Most row blocks of the short-plane and layer-norm weight reductions.
constexpr int64_t kMaxBlocks = 64;
// Most rows whose layer-norm weight and bias gradients one block sums in the
// statistics' type (float for float32) before the blocks' sums meet in double.
constexpr int64_t kParamBlockRows = 64;

template <typename T>
inline double as_double(T v) {
  return static_cast<double>(static_cast<opmath_t<T>>(v));
}

#define TANDEM_NORM_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
// A vectorised sum into the named accumulators (omp simd reduction).
#define TANDEM_SIMD_SUM(...) TANDEM_NORM_PRAGMA(omp simd reduction(+ : __VA_ARGS__))
#else
#define TANDEM_SIMD_SUM(...)
#endif

// Sums over a run in double. The run is cut in four contiguous streams,
// each summed in its own accumulators: a vectorised reduction into one
// register waits for each add to finish before the next (the add's latency,
// not its throughput, sets the pace); four streams keep more adds in flight
// and still load whole vectors. (Written with plain pointers: GCC does not
// vectorise the same loop through a lambda.)

// Σ x[i]
template <typename T>
double sum_of(const T* x, int64_t n) {
  const int64_t q = n / 4;
  const T *x1 = x + q, *x2 = x + 2 * q, *x3 = x + 3 * q;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  TANDEM_SIMD_SUM(s0, s1, s2, s3)
  for (int64_t i = 0; i < q; ++i) {
    s0 += as_double(x[i]);
    s1 += as_double(x1[i]);
    s2 += as_double(x2[i]);
    s3 += as_double(x3[i]);
  }
  for (int64_t i = 4 * q; i < n; ++i) s0 += as_double(x[i]);
  return (s0 + s1) + (s2 + s3);
}
// Σ (x[i] - mean)^2
template <typename T>
double squared_deviations(const T* x, int64_t n, double mean) {
  const int64_t q = n / 4;
  const T *x1 = x + q, *x2 = x + 2 * q, *x3 = x + 3 * q;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  TANDEM_SIMD_SUM(s0, s1, s2, s3)
  for (int64_t i = 0; i < q; ++i) {
    const double d0 = as_double(x[i]) - mean, d1 = as_double(x1[i]) - mean;
    const double d2 = as_double(x2[i]) - mean, d3 = as_double(x3[i]) - mean;
    s0 += d0 * d0;
    s1 += d1 * d1;
    s2 += d2 * d2;
    s3 += d3 * d3;
  }
  for (int64_t i = 4 * q; i < n; ++i) {
    const double d = as_double(x[i]) - mean;
    s0 += d * d;
  }
  return (s0 + s1) + (s2 + s3);
}
// grad_sums in M (float for float32), for the short sums of one
// layer-norm row in backward: four streams of vectors, each summing a
// quarter of the row (a gradient needs no double there, as PyTorch's).
template <typename M, typename G, typename T>
void grad_sums_short(const G* g, const T* x, int64_t n, M mean, M& sum_g, M& sum_gx) {
  const int64_t q = n / 4;
  const G *g1 = g + q, *g2 = g + 2 * q, *g3 = g + 3 * q;
  const T *x1 = x + q, *x2 = x + 2 * q, *x3 = x + 3 * q;
  M a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  TANDEM_SIMD_SUM(a0, a1, a2, a3, b0, b1, b2, b3)
  for (int64_t i = 0; i < q; ++i) {
    const M v0 = static_cast<M>(g[i]), v1 = static_cast<M>(g1[i]), v2 = static_cast<M>(g2[i]),
            v3 = static_cast<M>(g3[i]);
    a0 += v0;
    a1 += v1;
    a2 += v2;
    a3 += v3;
    b0 += v0 * (static_cast<M>(x[i]) - mean);
    b1 += v1 * (static_cast<M>(x1[i]) - mean);
    b2 += v2 * (static_cast<M>(x2[i]) - mean);
    b3 += v3 * (static_cast<M>(x3[i]) - mean);
  }
  for (int64_t i = 4 * q; i < n; ++i) {
    const M v = static_cast<M>(g[i]);
    a0 += v;
    b0 += v * (static_cast<M>(x[i]) - mean);
  }
  sum_g = (a0 + a1) + (a2 + a3);
  sum_gx = (b0 + b1) + (b2 + b3);
}

// (Σ (x[i] - shift), Σ (x[i] - shift)^2) added to sum, sq.
template <typename T>
void shifted_sums(const T* x, int64_t n, double shift, double& sum, double& sq) {
  const int64_t q = n / 4;
  const T *x1 = x + q, *x2 = x + 2 * q, *x3 = x + 3 * q;
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  TANDEM_SIMD_SUM(a0, a1, a2, a3, b0, b1, b2, b3)
  for (int64_t i = 0; i < q; ++i) {
    const double d0 = as_double(x[i]) - shift, d1 = as_double(x1[i]) - shift;
    const double d2 = as_double(x2[i]) - shift, d3 = as_double(x3[i]) - shift;
    a0 += d0;
    a1 += d1;
    a2 += d2;
    a3 += d3;
    b0 += d0 * d0;
    b1 += d1 * d1;
    b2 += d2 * d2;
    b3 += d3 * d3;
  }
  for (int64_t i = 4 * q; i < n; ++i) {
    const double d = as_double(x[i]) - shift;
    a0 += d;
    b0 += d * d;
  }
  sum += (a0 + a1) + (a2 + a3);
  sq += (b0 + b1) + (b2 + b3);
}

// Statistics of n values: (mean, Σ (x - mean)^2). float64 values take two
// passes (the mean, then the deviations from it). Narrower ones take one,
// of sums shifted by a sample (the run's first value, so that they do not
// cancel) in double: their 24 bits or fewer lose nothing there, and the run
// is read once.
struct Moments {
  double mean, sq;
};
// From the shifted sums of n values.
Moments finish_moments(double shift, double sum, double sq, int64_t n) {
  const double nd = static_cast<double>(n), d = sum / nd;
  return {shift + d, std::max(sq - sum * d, 0.0)};
}

// (Σ g[i], Σ g[i] * (x[i] - mean)) added to sum_g, sum_gx.
template <typename G, typename T>
void grad_sums(const G* g, const T* x, int64_t n, double mean, double& sum_g, double& sum_gx) {
  const int64_t q = n / 4;
  const G *g1 = g + q, *g2 = g + 2 * q, *g3 = g + 3 * q;
  const T *x1 = x + q, *x2 = x + 2 * q, *x3 = x + 3 * q;
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  TANDEM_SIMD_SUM(a0, a1, a2, a3, b0, b1, b2, b3)
  for (int64_t i = 0; i < q; ++i) {
    const double v0 = as_double(g[i]), v1 = as_double(g1[i]), v2 = as_double(g2[i]), v3 = as_double(g3[i]);
    a0 += v0;
    a1 += v1;
    a2 += v2;
    a3 += v3;
    b0 += v0 * (as_double(x[i]) - mean);
    b1 += v1 * (as_double(x1[i]) - mean);
    b2 += v2 * (as_double(x2[i]) - mean);
    b3 += v3 * (as_double(x3[i]) - mean);
  }
  for (int64_t i = 4 * q; i < n; ++i) {
    const double v = as_double(g[i]);
    a0 += v;
    b0 += v * (as_double(x[i]) - mean);
  }
  sum_g += (a0 + a1) + (a2 + a3);
  sum_gx += (b0 + b1) + (b2 + b3);
}

// 1 / sqrt(var + eps), PyTorch's invstd.
inline double inv_std(double var, double eps) { return 1.0 / std::sqrt(var + eps); }

// Row blocks of a reduction over `rows` rows of `width` values: fixed by the
// size, so that the merge order (and the result) does not depend on the
// thread count.
int64_t row_blocks(int64_t rows, int64_t width) {
  const int64_t work = rows * std::max<int64_t>(width, 1);
  return std::clamp<int64_t>((work + kNormGrain - 1) / kNormGrain, 1, std::max<int64_t>(1, std::min(rows, kMaxBlocks)));
}
int64_t block_begin(int64_t b, int64_t blocks, int64_t rows) { return rows * b / blocks; }

// Optional (C) or (D) parameter pointers: null when undefined.
template <typename M>
const M* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<M>() : nullptr;
}
template <typename M>
M* mutable_ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<M>() : nullptr;
}

// ---------------------------------------------------------------- batch norm

template <typename T>
struct BatchNormForward {
  using M = opmath_t<T>;
  const T* x;
  T* y;
  const M *w, *b;
  M *mean, *invstd, *running_mean, *running_var;
  Nchw s;
  bool training;
  double momentum, eps;

  // Channel c's statistics from its sums (training) or its running ones;
  // returns (mean, invstd) in double for the outputs.
  std::pair<double, double> finish_channel(int64_t c, double mu, double sq) const {
    const int64_t n = s.N * s.L;
    if (!training) {
      mu = static_cast<double>(running_mean[c]);
      const double is = inv_std(static_cast<double>(running_var[c]), eps);
      mean[c] = static_cast<M>(mu);
      invstd[c] = static_cast<M>(is);
      return {mu, is};
    }
    if (n == 0) {
      mean[c] = invstd[c] = M(0);
      return {0.0, 0.0};
    }
    const double is = inv_std(sq / static_cast<double>(n), eps);
    mean[c] = static_cast<M>(mu);
    invstd[c] = static_cast<M>(is);
    if (running_mean != nullptr)
      running_mean[c] = static_cast<M>((1 - momentum) * static_cast<double>(running_mean[c]) + momentum * mu);
    if (running_var != nullptr) {
      const double unbiased = n > 1 ? sq / static_cast<double>(n - 1) : std::nan("");
      running_var[c] = static_cast<M>((1 - momentum) * static_cast<double>(running_var[c]) + momentum * unbiased);
    }
    return {mu, is};
  }
  // y = x * alpha + beta with PyTorch's alpha = invstd * weight and
  // beta = bias - mean * alpha.
  std::pair<M, M> affine(int64_t c, double mu, double is) const {
    const double alpha = is * (w != nullptr ? static_cast<double>(w[c]) : 1.0);
    const double beta = (b != nullptr ? static_cast<double>(b[c]) : 0.0) - mu * alpha;
    return {static_cast<M>(alpha), static_cast<M>(beta)};
  }

  // Long planes: a thread owns channels [c0, c1).
  void planes(int64_t c0, int64_t c1) const {
    const int64_t n = s.N * s.L;
    for (int64_t c = c0; c < c1; ++c) {
      double mu = 0, sq = 0;
      if (training && n > 0) {
        if constexpr (std::is_same_v<T, double>) {
          double sum = 0;
          for (int64_t i = 0; i < s.N; ++i) sum += sum_of(x + (i * s.C + c) * s.L, s.L);
          mu = sum / static_cast<double>(n);
          for (int64_t i = 0; i < s.N; ++i) sq += squared_deviations(x + (i * s.C + c) * s.L, s.L, mu);
        } else {
          const double shift = as_double(x[c * s.L]);
          double sum = 0;
          for (int64_t i = 0; i < s.N; ++i) shifted_sums(x + (i * s.C + c) * s.L, s.L, shift, sum, sq);
          const Moments mo = finish_moments(shift, sum, sq, n);
          mu = mo.mean;
          sq = mo.sq;
        }
      }
      const auto [m, is] = finish_channel(c, mu, sq);
      const auto [alpha, beta] = affine(c, m, is);
      for (int64_t i = 0; i < s.N; ++i) {
        const T* xp = x + (i * s.C + c) * s.L;
        T* yp = y + (i * s.C + c) * s.L;
        TANDEM_SIMD
        for (int64_t l = 0; l < s.L; ++l) yp[l] = static_cast<T>(static_cast<M>(xp[l]) * alpha + beta);
      }
    }
  }

  // Short planes: rows of C * L values, summed by row blocks.
  void rows() const {
    const int64_t row = s.C * s.L, n = s.N * s.L;
    std::vector<double> mu(s.C, 0.0), sq(s.C, 0.0);
    if (training && n > 0) {
      const int64_t blocks = row_blocks(s.N, row);
      std::vector<double> part(static_cast<size_t>(blocks * row));
      // Sums of x, then of (x - mean)^2, per (channel, l) slot of a row.
      auto fold = [&](const double* centre) {
        std::fill(part.begin(), part.end(), 0.0);
        parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
          for (int64_t blk = b0; blk < b1; ++blk) {
            double* acc = part.data() + blk * row;
            for (int64_t i = block_begin(blk, blocks, s.N); i < block_begin(blk + 1, blocks, s.N); ++i) {
              const T* xp = x + i * row;
              if (centre == nullptr) {
                TANDEM_SIMD
                for (int64_t j = 0; j < row; ++j) acc[j] += as_double(xp[j]);
              } else {
                TANDEM_SIMD
                for (int64_t j = 0; j < row; ++j) {
                  const double d = as_double(xp[j]) - centre[j];
                  acc[j] += d * d;
                }
              }
            }
          }
        });
        std::vector<double> per_channel(s.C, 0.0);
        for (int64_t blk = 0; blk < blocks; ++blk)
          for (int64_t j = 0; j < row; ++j) per_channel[j / s.L] += part[blk * row + j];
        return per_channel;
      };
      std::vector<double> sum = fold(nullptr);
      std::vector<double> centre(row);
      for (int64_t c = 0; c < s.C; ++c) {
        mu[c] = sum[c] / static_cast<double>(n);
        for (int64_t l = 0; l < s.L; ++l) centre[c * s.L + l] = mu[c];
      }
      sq = fold(centre.data());
    }
    std::vector<M> alpha(row), beta(row);
    for (int64_t c = 0; c < s.C; ++c) {
      const auto [m, is] = finish_channel(c, mu[c], sq[c]);
      const auto [a, bb] = affine(c, m, is);
      for (int64_t l = 0; l < s.L; ++l) {
        alpha[c * s.L + l] = a;
        beta[c * s.L + l] = bb;
      }
    }
    parallel_for(0, s.N, std::max<int64_t>(1, kNormGrain / std::max<int64_t>(row, 1)), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T* xp = x + i * row;
        T* yp = y + i * row;
        TANDEM_SIMD
        for (int64_t j = 0; j < row; ++j) yp[j] = static_cast<T>(static_cast<M>(xp[j]) * alpha[j] + beta[j]);
      }
    });
  }
};

template <typename T>
struct BatchNormBackward {
  using M = opmath_t<T>;
  const T *g, *x;
  T* gx;  // null: grad_input not wanted
  const M *w, *mean, *invstd;
  M *gw, *gb;
  Nchw s;
  bool training;

  bool need_sums() const { return gw != nullptr || gb != nullptr || (gx != nullptr && training); }

  // grad_input = (g - sum_g / n - (x - mean) * k) * invstd * w with
  // k = sum_gx * invstd^2 / n when training; g * invstd * w in eval.
  // Returns (scale of g, scale of (x - mean), constant) of that affine form.
  struct Coef {
    M a, b, c;
  };
  Coef finish_channel(int64_t c, double sum_g, double sum_gx) const {
    const double is = static_cast<double>(invstd[c]);
    if (gw != nullptr) gw[c] = static_cast<M>(sum_gx * is);
    if (gb != nullptr) gb[c] = static_cast<M>(sum_g);
    const double iw = is * (w != nullptr ? static_cast<double>(w[c]) : 1.0);
    const double n = static_cast<double>(s.N * s.L);
    if (!training || n == 0) return {static_cast<M>(iw), M(0), M(0)};
    return {static_cast<M>(iw), static_cast<M>(-sum_gx * is * is / n * iw), static_cast<M>(-sum_g / n * iw)};
  }

  void planes(int64_t c0, int64_t c1) const {
    for (int64_t c = c0; c < c1; ++c) {
      const double mu = static_cast<double>(mean[c]);
      double sum_g = 0, sum_gx = 0;
      if (need_sums())
        for (int64_t i = 0; i < s.N; ++i)
          grad_sums(g + (i * s.C + c) * s.L, x + (i * s.C + c) * s.L, s.L, mu, sum_g, sum_gx);
      const Coef k = finish_channel(c, sum_g, sum_gx);
      if (gx == nullptr) continue;
      const M m = mean[c];
      for (int64_t i = 0; i < s.N; ++i) {
        const int64_t off = (i * s.C + c) * s.L;
        const T *gp = g + off, *xp = x + off;
        T* out = gx + off;
        TANDEM_SIMD
        for (int64_t l = 0; l < s.L; ++l)
          out[l] = static_cast<T>(static_cast<M>(gp[l]) * k.a + (static_cast<M>(xp[l]) - m) * k.b + k.c);
      }
    }
  }

  void rows() const {
    const int64_t row = s.C * s.L;
    std::vector<double> sum_g(s.C, 0.0), sum_gx(s.C, 0.0);
    if (need_sums() && s.N * s.L > 0) {
      const int64_t blocks = row_blocks(s.N, 2 * row);
      std::vector<double> part(static_cast<size_t>(blocks * 2 * row), 0.0);
      std::vector<double> centre(row);
      for (int64_t j = 0; j < row; ++j) centre[j] = static_cast<double>(mean[j / s.L]);
      parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; ++blk) {
          double* acc_g = part.data() + blk * 2 * row;
          double* acc_gx = acc_g + row;
          for (int64_t i = block_begin(blk, blocks, s.N); i < block_begin(blk + 1, blocks, s.N); ++i) {
            const T *gp = g + i * row, *xp = x + i * row;
            TANDEM_SIMD
            for (int64_t j = 0; j < row; ++j) {
              const double gv = as_double(gp[j]);
              acc_g[j] += gv;
              acc_gx[j] += gv * (as_double(xp[j]) - centre[j]);
            }
          }
        }
      });
      for (int64_t blk = 0; blk < blocks; ++blk)
        for (int64_t j = 0; j < row; ++j) {
          sum_g[j / s.L] += part[blk * 2 * row + j];
          sum_gx[j / s.L] += part[blk * 2 * row + row + j];
        }
    }
    std::vector<M> ka(row), kb(row), kc(row), m(row);
    for (int64_t c = 0; c < s.C; ++c) {
      const Coef k = finish_channel(c, sum_g[c], sum_gx[c]);
      for (int64_t l = 0; l < s.L; ++l) {
        ka[c * s.L + l] = k.a;
        kb[c * s.L + l] = k.b;
        kc[c * s.L + l] = k.c;
        m[c * s.L + l] = mean[c];
      }
    }
    if (gx == nullptr) return;
    parallel_for(0, s.N, std::max<int64_t>(1, kNormGrain / std::max<int64_t>(row, 1)), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const T *gp = g + i * row, *xp = x + i * row;
        T* out = gx + i * row;
        TANDEM_SIMD
        for (int64_t j = 0; j < row; ++j)
          out[j] = static_cast<T>(static_cast<M>(gp[j]) * ka[j] + (static_cast<M>(xp[j]) - m[j]) * kb[j] + kc[j]);
      }
    });
  }
};

// Channels per task of the long-plane walk.
int64_t channel_grain(const Nchw& s) { return std::max<int64_t>(1, kNormGrain / std::max<int64_t>(s.N * s.L, 1)); }

// ---------------------------------------------------------------- layer norm

template <typename T>
void layer_norm_rows(const Tensor& out, const Tensor& mean_t, const Tensor& invstd_t, const Tensor& input,
                     const Tensor& weight, const Tensor& bias, double eps) {
  using M = opmath_t<T>;
  const int64_t rows = mean_t.numel();
  const int64_t D = rows == 0 ? 0 : input.numel() / rows;
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  const M* w = ptr_or_null<M>(weight);
  const M* b = ptr_or_null<M>(bias);
  M* mean = mean_t.data_ptr<M>();
  M* invstd = invstd_t.data_ptr<M>();
  parallel_for(0, rows, std::max<int64_t>(1, kNormGrain / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xp = x + r * D;
      T* yp = y + r * D;
      if (D == 0) {
        mean[r] = invstd[r] = M(0);
        continue;
      }
      double mu, sq;
      if constexpr (std::is_same_v<T, double>) {
        mu = sum_of(xp, D) / static_cast<double>(D);
        sq = squared_deviations(xp, D, mu);
      } else {
        double sum = 0, q = 0;
        shifted_sums(xp, D, as_double(xp[0]), sum, q);
        const Moments mo = finish_moments(as_double(xp[0]), sum, q, D);
        mu = mo.mean;
        sq = mo.sq;
      }
      const double is = inv_std(sq / static_cast<double>(D), eps);
      mean[r] = static_cast<M>(mu);
      invstd[r] = static_cast<M>(is);
      // (x - mean) * invstd as x * a + c, then the element's weight and bias.
      const M a = static_cast<M>(is), c = static_cast<M>(-mu * is);
      if (w != nullptr && b != nullptr) {
        TANDEM_SIMD
        for (int64_t j = 0; j < D; ++j) yp[j] = static_cast<T>((static_cast<M>(xp[j]) * a + c) * w[j] + b[j]);
      } else if (w != nullptr) {
        TANDEM_SIMD
        for (int64_t j = 0; j < D; ++j) yp[j] = static_cast<T>((static_cast<M>(xp[j]) * a + c) * w[j]);
      } else if (b != nullptr) {
        TANDEM_SIMD
        for (int64_t j = 0; j < D; ++j) yp[j] = static_cast<T>(static_cast<M>(xp[j]) * a + c + b[j]);
      } else {
        TANDEM_SIMD
        for (int64_t j = 0; j < D; ++j) yp[j] = static_cast<T>(static_cast<M>(xp[j]) * a + c);
      }
    }
  });
}

// Per row: with gw = g * w, grad_x = invstd * (gw - mean(gw) - xhat * mean(gw * xhat)).
// The weight and bias gradients sum g * xhat and g over the rows, by row
// blocks (fixed by the size) into double accumulators, then in block order.
template <typename T>
void layer_norm_backward_rows(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                              const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean_t,
                              const Tensor& invstd_t) {
  using M = opmath_t<T>;
  const int64_t rows = mean_t.numel();
  // Without rows the parameters' gradients still have their size (zeros).
  const int64_t D = rows > 0                ? input.numel() / rows
                    : grad_weight.defined() ? grad_weight.numel()
                    : grad_bias.defined()   ? grad_bias.numel()
                                            : 0;
  const T* g = grad_out.data_ptr<T>();
  const T* x = input.data_ptr<T>();
  T* gx = mutable_ptr_or_null<T>(grad_input);
  const M* w = ptr_or_null<M>(weight);
  const M* mean = mean_t.data_ptr<M>();
  const M* invstd = invstd_t.data_ptr<M>();
  M* gw = mutable_ptr_or_null<M>(grad_weight);
  M* gb = mutable_ptr_or_null<M>(grad_bias);
  const bool params = gw != nullptr || gb != nullptr;
  // The weight and bias sums run in M within a block of at most
  // kParamBlockRows rows, then over the blocks in double.
  const int64_t blocks = std::max(row_blocks(rows, D), (rows + kParamBlockRows - 1) / kParamBlockRows);
  std::vector<M> part(params ? static_cast<size_t>(blocks * 2 * D) : 0, M(0));

  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<M> gwv(gx != nullptr && w != nullptr ? D : 0);
    for (int64_t blk = b0; blk < b1; ++blk) {
      M* acc_w = params ? part.data() + blk * 2 * D : nullptr;
      M* acc_b = params ? acc_w + D : nullptr;
      for (int64_t r = block_begin(blk, blocks, rows); r < block_begin(blk + 1, blocks, rows); ++r) {
        const T* gp = g + r * D;
        const T* xp = x + r * D;
        const double is = static_cast<double>(invstd[r]);
        const M m = mean[r], ism = invstd[r];
        // One pass for what reads g and x element by element: the
        // parameters' sums, and gw = g * w for grad_input.
        const bool weighted = gx != nullptr && w != nullptr;
        if (params && weighted) {
          TANDEM_SIMD
          for (int64_t j = 0; j < D; ++j) {
            const M gv = static_cast<M>(gp[j]);
            acc_w[j] += gv * ((static_cast<M>(xp[j]) - m) * ism);
            acc_b[j] += gv;
            gwv[j] = gv * w[j];
          }
        } else if (params) {
          TANDEM_SIMD
          for (int64_t j = 0; j < D; ++j) {
            const M gv = static_cast<M>(gp[j]);
            acc_w[j] += gv * ((static_cast<M>(xp[j]) - m) * ism);
            acc_b[j] += gv;
          }
        } else if (weighted) {
          TANDEM_SIMD
          for (int64_t j = 0; j < D; ++j) gwv[j] = static_cast<M>(gp[j]) * w[j];
        }
        if (gx == nullptr) continue;
        M am = 0, bm = 0;
        if (weighted)
          grad_sums_short(gwv.data(), xp, D, m, am, bm);
        else
          grad_sums_short(gp, xp, D, m, am, bm);
        const double a = static_cast<double>(am), bsum = static_cast<double>(bm);
        const double inv_d = 1.0 / static_cast<double>(D);
        const M k2 = static_cast<M>(-bsum * inv_d * is * is * is);
        const M k3 = static_cast<M>(-a * inv_d * is);
        T* out = gx + r * D;
        if (weighted) {
          const M* gwp = gwv.data();
          TANDEM_SIMD
          for (int64_t j = 0; j < D; ++j) out[j] = static_cast<T>(gwp[j] * ism + (static_cast<M>(xp[j]) - m) * k2 + k3);
        } else {
          TANDEM_SIMD
          for (int64_t j = 0; j < D; ++j)
            out[j] = static_cast<T>(static_cast<M>(gp[j]) * ism + (static_cast<M>(xp[j]) - m) * k2 + k3);
        }
      }
    }
  });
  if (!params) return;
  for (int64_t j = 0; j < D; ++j) {
    double sw = 0, sb = 0;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      sw += static_cast<double>(part[blk * 2 * D + j]);
      sb += static_cast<double>(part[blk * 2 * D + D + j]);
    }
    if (gw != nullptr) gw[j] = static_cast<M>(sw);
    if (gb != nullptr) gb[j] = static_cast<M>(sb);
  }
}

}  // namespace

void batch_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training,
                double momentum, double eps) {
  dispatch_floating(input.dtype(), "batch_norm (cpu)", [&]<typename T>() {
    using M = opmath_t<T>;
    const BatchNormForward<T> f{input.data_ptr<T>(),
                                out.data_ptr<T>(),
                                ptr_or_null<M>(weight),
                                ptr_or_null<M>(bias),
                                mean.data_ptr<M>(),
                                invstd.data_ptr<M>(),
                                mutable_ptr_or_null<M>(running_mean),
                                mutable_ptr_or_null<M>(running_var),
                                nchw_of(input.sizes()),
                                training,
                                momentum,
                                eps};
    if (f.s.L >= kLongPlane)
      parallel_for(0, f.s.C, channel_grain(f.s), [&](int64_t c0, int64_t c1) { f.planes(c0, c1); });
    else
      f.rows();
  });
}

void batch_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, bool training) {
  dispatch_floating(input.dtype(), "batch_norm_backward (cpu)", [&]<typename T>() {
    using M = opmath_t<T>;
    const BatchNormBackward<T> f{grad_out.data_ptr<T>(),
                                 input.data_ptr<T>(),
                                 mutable_ptr_or_null<T>(grad_input),
                                 ptr_or_null<M>(weight),
                                 mean.data_ptr<M>(),
                                 invstd.data_ptr<M>(),
                                 mutable_ptr_or_null<M>(grad_weight),
                                 mutable_ptr_or_null<M>(grad_bias),
                                 nchw_of(input.sizes()),
                                 training};
    if (f.s.L >= kLongPlane)
      parallel_for(0, f.s.C, channel_grain(f.s), [&](int64_t c0, int64_t c1) { f.planes(c0, c1); });
    else
      f.rows();
  });
}

void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& invstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, double eps) {
  dispatch_floating(input.dtype(), "layer_norm (cpu)",
                    [&]<typename T>() { layer_norm_rows<T>(out, mean, invstd, input, weight, bias, eps); });
}

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd) {
  dispatch_floating(input.dtype(), "layer_norm_backward (cpu)", [&]<typename T>() {
    layer_norm_backward_rows<T>(grad_input, grad_weight, grad_bias, grad_out, input, weight, mean, invstd);
  });
}

}  // namespace tandem::cpu

// CPU convolution: per batch item and group, im2col into a column matrix
// (K = C_in/groups * kH * kW rows, L = OH * OW columns) and one GEMM with the
// group's weight; the backward passes are the transposed GEMMs, followed by
// col2im for the input gradient. A 1x1 convolution with stride 1 and no
// padding reads the input as its own column matrix. Items are split across
// threads when each one's GEMMs are too small for OpenBLAS to thread them.
#include "kernels/conv.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "kernels/linalg.h"
#include "tandem/version.h"

#if TANDEM_WITH_OPENBLAS
#include <cblas.h>
#endif

namespace tandem::cpu {

namespace {

// Multiply-adds of one batch item's GEMMs below which items are split across
// threads. OpenBLAS threads a GEMM from 65536 x 4 multiply-adds on, so the
// GEMMs of a split batch each run on their own thread, and larger ones are
// left to OpenBLAS (kGemmGrain in linalg.cpp, for the same reason).
constexpr int64_t kConvGrain = int64_t{1} << 18;

// The sizes of one convolution, from its input, weight and output.
struct Geometry {
  int64_t N, C_in, H, W;
  int64_t C_out, kh, kw;
  int64_t OH, OW;
  int64_t groups, cin_g, cout_g;
  int64_t K;  // rows of a column matrix: cin_g * kh * kw
  int64_t L;  // its columns: OH * OW
  Conv2dParams p;
  bool direct;  // 1x1, stride 1, no padding: the input is its own column matrix

  int64_t item_macs() const { return C_out * K * L; }
};

Geometry geometry(IntArrayRef input, IntArrayRef weight, IntArrayRef out, const Conv2dParams& p) {
  Geometry g{};
  g.N = input[0], g.C_in = input[1], g.H = input[2], g.W = input[3];
  g.C_out = weight[0], g.kh = weight[2], g.kw = weight[3];
  g.OH = out[2], g.OW = out[3];
  g.groups = p.groups;
  g.cin_g = weight[1];
  g.cout_g = g.C_out / p.groups;
  g.K = g.cin_g * g.kh * g.kw;
  g.L = g.OH * g.OW;
  g.p = p;
  g.direct = g.kh == 1 && g.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
  return g;
}

// ---------------------------------------------------------------- GEMM

// A host tensor over memory owned elsewhere: a (rows x cols) matrix with
// strides (rs, cs), for cpu::matmul.
template <typename A>
Tensor host_matrix(const A* data, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  auto impl = std::make_shared<TensorImpl>();
  const int64_t extent = rows == 0 || cols == 0 ? 0 : (rows - 1) * rs + (cols - 1) * cs + 1;
  impl->storage =
      std::make_shared<Storage>(const_cast<A*>(data), static_cast<size_t>(extent) * sizeof(A), Device(kCPU), nullptr);
  impl->sizes = {rows, cols};
  impl->strides = {rs, cs};
  impl->dtype = dtype_of<A>;
  return Tensor(std::move(impl));
}

#if TANDEM_WITH_OPENBLAS
bool fits_blas(int64_t v) { return v <= static_cast<int64_t>(std::numeric_limits<blasint>::max()); }
blasint bi(int64_t v) { return static_cast<blasint>(v); }
CBLAS_TRANSPOSE blas_trans(bool t) { return t ? CblasTrans : CblasNoTrans; }
#endif

// C (M x N) = op(A) @ op(B), or C += op(A) @ op(B) with accumulate; all
// row-major with row strides lda, ldb, ldc as stored (op(A) is M x K).
// OpenBLAS when the build has it, else cpu::matmul (its blocked GEMM).
template <typename A>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const A* a, int64_t lda, const A* b, int64_t ldb,
          bool accumulate, A* c, int64_t ldc) {
  static_assert(std::is_same_v<A, float> || std::is_same_v<A, double>);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill_n(c + i * ldc, N, A(0));
    return;
  }
#if TANDEM_WITH_OPENBLAS
  if (fits_blas(M) && fits_blas(N) && fits_blas(K) && fits_blas(lda) && fits_blas(ldb) && fits_blas(ldc)) {
    const A beta = accumulate ? A(1) : A(0);
    if constexpr (std::is_same_v<A, float>) {
      cblas_sgemm(CblasRowMajor, blas_trans(ta), blas_trans(tb), bi(M), bi(N), bi(K), 1.0f, a, bi(lda), b, bi(ldb),
                  beta, c, bi(ldc));
    } else {
      cblas_dgemm(CblasRowMajor, blas_trans(ta), blas_trans(tb), bi(M), bi(N), bi(K), 1.0, a, bi(lda), b, bi(ldb), beta,
                  c, bi(ldc));
    }
    return;
  }
#endif
  std::vector<A> product(static_cast<size_t>(M * N));
  matmul(host_matrix(product.data(), M, N, N, 1), host_matrix(a, M, K, ta ? 1 : lda, ta ? lda : 1),
         host_matrix(b, K, N, tb ? 1 : ldb, tb ? ldb : 1));
  for (int64_t i = 0; i < M; ++i) {
    A* row = c + i * ldc;
    const A* p = product.data() + i * N;
    if (accumulate) {
      for (int64_t j = 0; j < N; ++j) row[j] += p[j];
    } else {
      std::copy_n(p, N, row);
    }
  }
}

// ---------------------------------------------------------------- im2col / col2im

// The output columns [lo, hi) whose tap at input column offset `shift` (=
// tap * dilation - pad) lands inside [0, W), for stride 1.
void valid_columns(int64_t shift, int64_t W, int64_t OW, int64_t& lo, int64_t& hi) {
  lo = std::clamp<int64_t>(-shift, 0, OW);
  hi = std::clamp<int64_t>(W - shift, lo, OW);
}

// cols (K, L) from channels [0, cin_g) of x (cin_g, H, W): row (c, i, j)
// holds tap (i, j) of channel c for every output position; zero where the
// tap reads padding. Converts T to the compute type A.
template <typename T, typename A>
void im2col(const T* x, const Geometry& g, A* cols) {
  const Conv2dParams& p = g.p;
  for (int64_t c = 0; c < g.cin_g; ++c) {
    const T* plane = x + c * g.H * g.W;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        A* row = cols + ((c * g.kh + i) * g.kw + j) * g.L;
        const int64_t di = i * p.dilation_h - p.pad_h, dj = j * p.dilation_w - p.pad_w;
        int64_t lo = 0, hi = 0;
        if (p.stride_w == 1) valid_columns(dj, g.W, g.OW, lo, hi);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          A* dst = row + oh * g.OW;
          const int64_t ih = oh * p.stride_h + di;
          if (ih < 0 || ih >= g.H) {
            std::fill_n(dst, g.OW, A(0));
            continue;
          }
          const T* src = plane + ih * g.W;
          if (p.stride_w == 1) {
            std::fill_n(dst, lo, A(0));
            TANDEM_SIMD
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = static_cast<A>(src[ow + dj]);
            std::fill(dst + hi, dst + g.OW, A(0));
          } else {
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t iw = ow * p.stride_w + dj;
              dst[ow] = iw >= 0 && iw < g.W ? static_cast<A>(src[iw]) : A(0);
            }
          }
        }
      }
    }
  }
}

// The adjoint of im2col: every column entry added to the input element it
// was read from. gx (cin_g, H, W) holds the sums so far.
template <typename A>
void col2im(const A* cols, const Geometry& g, A* gx) {
  const Conv2dParams& p = g.p;
  for (int64_t c = 0; c < g.cin_g; ++c) {
    A* plane = gx + c * g.H * g.W;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const A* row = cols + ((c * g.kh + i) * g.kw + j) * g.L;
        const int64_t di = i * p.dilation_h - p.pad_h, dj = j * p.dilation_w - p.pad_w;
        int64_t lo = 0, hi = 0;
        if (p.stride_w == 1) valid_columns(dj, g.W, g.OW, lo, hi);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = oh * p.stride_h + di;
          if (ih < 0 || ih >= g.H) continue;
          const A* src = row + oh * g.OW;
          A* dst = plane + ih * g.W;
          if (p.stride_w == 1) {
            TANDEM_SIMD
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow + dj] += src[ow];
          } else {
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t iw = ow * p.stride_w + dj;
              if (iw >= 0 && iw < g.W) dst[iw] += src[ow];
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- helpers

template <typename T>
using acc_t = opmath_t<T>;  // float for float16/bfloat16

// n elements of src as the compute type: src itself when T is A, else a
// converted copy in buf.
template <typename A, typename T>
const A* as_compute(const T* src, int64_t n, std::vector<A>& buf) {
  if constexpr (std::is_same_v<T, A>) {
    return src;
  } else {
    buf.resize(static_cast<size_t>(n));
    convert_n(buf.data(), src, n);
    return buf.data();
  }
}

// The column matrix of one item's group, whose channels start at xg: the
// input itself for a direct float32/float64 convolution, else im2col's
// output in cols.
template <typename T, typename A>
const A* columns(const T* xg, const Geometry& g, std::vector<A>& cols) {
  if constexpr (std::is_same_v<T, A>) {
    if (g.direct) return xg;
  }
  cols.resize(static_cast<size_t>(g.K * g.L));
  im2col(xg, g, cols.data());
  return cols.data();
}

// Splits [0, n) into `tasks` near-equal ranges; task t gets [begin, end).
struct Split {
  int64_t n, tasks;
  int64_t begin(int64_t t) const { return n * t / tasks; }
  int64_t end(int64_t t) const { return n * (t + 1) / tasks; }
};

// How many tasks the batch is split into: one per thread when an item's
// GEMMs are too small for OpenBLAS to thread, else one.
int64_t batch_tasks(const Geometry& g) {
  if (g.item_macs() >= kConvGrain) return 1;
  return std::clamp<int64_t>(num_threads(), 1, std::max<int64_t>(g.N, 1));
}

// Runs f(task) for each task, on threads when there are several.
template <typename F>
void run_tasks(int64_t tasks, const F& f) {
  parallel_for(0, tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) f(t);
  });
}

// ---------------------------------------------------------------- forward

template <typename T>
void conv2d_typed(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Geometry& g) {
  using A = acc_t<T>;
  const T* x = input.data_ptr<T>();
  T* y = out.data_ptr<T>();
  std::vector<A> w_buf;
  const A* w = as_compute<A>(weight.data_ptr<T>(), weight.numel(), w_buf);
  std::vector<A> b_buf;
  const A* b = bias.defined() ? as_compute<A>(bias.data_ptr<T>(), bias.numel(), b_buf) : nullptr;
  const Split split{g.N, batch_tasks(g)};
  run_tasks(split.tasks, [&](int64_t t) {
    std::vector<A> cols, y_buf;
    for (int64_t n = split.begin(t); n < split.end(t); ++n) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const A* colp = columns(x + (n * g.C_in + grp * g.cin_g) * g.H * g.W, g, cols);
        T* yg = y + (n * g.C_out + grp * g.cout_g) * g.L;
        A* dst;
        if constexpr (std::is_same_v<T, A>) {
          dst = yg;
        } else {
          y_buf.resize(static_cast<size_t>(g.cout_g * g.L));
          dst = y_buf.data();
        }
        // (cout_g, L) = (cout_g, K) @ (K, L)
        gemm<A>(false, false, g.cout_g, g.L, g.K, w + grp * g.cout_g * g.K, g.K, colp, g.L, false, dst, g.L);
        // The bias added, and float16/bfloat16 rounded, on the way out.
        if (!std::is_same_v<T, A> || b != nullptr) {
          for (int64_t co = 0; co < g.cout_g; ++co) {
            const A shift = b != nullptr ? b[grp * g.cout_g + co] : A(0);
            const A* src = dst + co * g.L;
            T* row = yg + co * g.L;
            TANDEM_SIMD
            for (int64_t l = 0; l < g.L; ++l) store_as(row[l], src[l] + shift);
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------- backward

template <typename T>
void backward_input_typed(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight, const Geometry& g) {
  using A = acc_t<T>;
  const T* gy = grad_out.data_ptr<T>();
  T* gx = grad_input.data_ptr<T>();
  std::vector<A> w_buf;
  const A* w = as_compute<A>(weight.data_ptr<T>(), weight.numel(), w_buf);
  const int64_t item_in = g.C_in * g.H * g.W, item_out = g.C_out * g.L;
  const Split split{g.N, batch_tasks(g)};
  run_tasks(split.tasks, [&](int64_t t) {
    std::vector<A> cols, gy_buf, gx_buf;
    for (int64_t n = split.begin(t); n < split.end(t); ++n) {
      const A* gyn = as_compute<A>(gy + n * item_out, item_out, gy_buf);
      A* gxn;
      if constexpr (std::is_same_v<T, A>) {
        gxn = gx + n * item_in;
      } else {
        gx_buf.resize(static_cast<size_t>(item_in));
        gxn = gx_buf.data();
      }
      if (!g.direct) std::fill_n(gxn, item_in, A(0));
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const A* wg = w + grp * g.cout_g * g.K;
        const A* gyg = gyn + grp * g.cout_g * g.L;
        A* gxg = gxn + grp * g.cin_g * g.H * g.W;
        // (K, L) = (cout_g, K)^T @ (cout_g, L); a direct convolution's
        // column matrix is the input gradient itself.
        if (g.direct) {
          gemm<A>(true, false, g.K, g.L, g.cout_g, wg, g.K, gyg, g.L, false, gxg, g.L);
        } else {
          cols.resize(static_cast<size_t>(g.K * g.L));
          gemm<A>(true, false, g.K, g.L, g.cout_g, wg, g.K, gyg, g.L, false, cols.data(), g.L);
          col2im(cols.data(), g, gxg);
        }
      }
      if constexpr (!std::is_same_v<T, A>) {
        T* dst = gx + n * item_in;
        convert_n(dst, gxn, item_in);
      }
    }
  });
}

template <typename T>
void backward_weight_typed(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input, const Geometry& g) {
  using A = acc_t<T>;
  const T* gy = grad_out.data_ptr<T>();
  const T* x = input.data_ptr<T>();
  T* gw = grad_weight.data_ptr<T>();
  const int64_t wsize = g.C_out * g.K, item_out = g.C_out * g.L;
  const Split split{g.N, batch_tasks(g)};
  // One sum per task, added up in task order at the end (the same result for
  // the same thread count); a single float32/float64 task sums in place.
  const bool in_place = split.tasks == 1 && std::is_same_v<T, A>;
  std::vector<std::vector<A>> partial(static_cast<size_t>(in_place ? 0 : split.tasks));
  run_tasks(split.tasks, [&](int64_t t) {
    A* acc = nullptr;
    if constexpr (std::is_same_v<T, A>) {
      if (in_place) acc = gw;
    }
    if (acc != nullptr) {
      std::fill_n(acc, wsize, A(0));
    } else {
      partial[t].assign(static_cast<size_t>(wsize), A(0));
      acc = partial[t].data();
    }
    std::vector<A> cols, gy_buf;
    for (int64_t n = split.begin(t); n < split.end(t); ++n) {
      const A* gyn = as_compute<A>(gy + n * item_out, item_out, gy_buf);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const A* colp = columns(x + (n * g.C_in + grp * g.cin_g) * g.H * g.W, g, cols);
        // (cout_g, K) += (cout_g, L) @ (K, L)^T
        gemm<A>(false, true, g.cout_g, g.K, g.L, gyn + grp * g.cout_g * g.L, g.L, colp, g.L, true,
                acc + grp * g.cout_g * g.K, g.K);
      }
    }
  });
  if (in_place) return;
  for (int64_t i = 0; i < wsize; ++i) {
    A s = partial[0][i];
    for (int64_t t = 1; t < split.tasks; ++t) s += partial[t][i];
    store_as(gw[i], s);
  }
}

}  // namespace

void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  const Geometry g = geometry(input.sizes(), weight.sizes(), out.sizes(), p);
  dispatch_floating(out.dtype(), "conv2d (cpu)", [&]<typename T>() { conv2d_typed<T>(out, input, weight, bias, g); });
}

void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p) {
  const Geometry g = geometry(grad_input.sizes(), weight.sizes(), grad_out.sizes(), p);
  dispatch_floating(grad_input.dtype(), "conv2d_backward_input (cpu)",
                    [&]<typename T>() { backward_input_typed<T>(grad_input, grad_out, weight, g); });
}

void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                            const Conv2dParams& p) {
  const Geometry g = geometry(input.sizes(), grad_weight.sizes(), grad_out.sizes(), p);
  dispatch_floating(grad_weight.dtype(), "conv2d_backward_weight (cpu)",
                    [&]<typename T>() { backward_weight_typed<T>(grad_weight, grad_out, input, g); });
}

}  // namespace tandem::cpu

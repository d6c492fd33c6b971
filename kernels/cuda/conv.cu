// CUDA convolution. In a build with cuDNN (TANDEM_WITH_CUDNN): cuDNN's
// legacy API, with descriptors and algorithms (its v7 heuristics) cached per
// shape and a workspace from the caching allocator; float32 without TF32,
// float16/bfloat16 on tensor cores with float32 sums. Without cuDNN, and for
// sizes its 32-bit descriptors cannot hold: im2col kernels and batched
// cuBLAS GEMMs (cuda::matmul_into) over chunks of the batch, the input gradient
// gathered by a col2im kernel, the weight gradient summed over the chunk by
// cuda::reduce. Both launch on the current stream of the output's device.
#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/linalg.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

// meson defines TANDEM_WITH_CUDNN=1 for this file when it found cuDNN.
#ifndef TANDEM_WITH_CUDNN
#define TANDEM_WITH_CUDNN 0
#endif
#if TANDEM_WITH_CUDNN
#include "kernels/cuda/cudnn.h"
#endif

namespace tandem::cuda {

namespace {

// The sizes of one convolution.
struct ConvShape {
  int64_t N, C_in, H, W;
  int64_t C_out, kh, kw;
  int64_t OH, OW;
  int64_t G, cin_g, cout_g;
  int64_t K;  // rows of a group's column matrix: cin_g * kh * kw
  int64_t L;  // its columns: OH * OW
  Conv2dParams p;
  bool direct;  // 1x1, stride 1, no padding: the input is its own column matrix
};

ConvShape conv_shape(IntArrayRef x, IntArrayRef w, IntArrayRef y, const Conv2dParams& p) {
  ConvShape s{};
  s.N = x[0], s.C_in = x[1], s.H = x[2], s.W = x[3];
  s.C_out = w[0], s.cin_g = w[1], s.kh = w[2], s.kw = w[3];
  s.OH = y[2], s.OW = y[3];
  s.G = p.groups;
  s.cout_g = s.C_out / p.groups;
  s.K = s.cin_g * s.kh * s.kw;
  s.L = s.OH * s.OW;
  s.p = p;
  s.direct = s.kh == 1 && s.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
  return s;
}

// ---------------------------------------------------------------- views over device memory

// A strided view of t's memory (offset in elements from t's first element).
Tensor view_of(const Tensor& t, int64_t offset, Shape sizes, Shape strides) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = t.storage_offset() + offset;
  impl->dtype = t.dtype();
  impl->origin = t.origin();
  return Tensor(std::move(impl));
}

// A contiguous view of t's memory.
Tensor contiguous_view(const Tensor& t, int64_t offset, const Shape& sizes) {
  Shape strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  return view_of(t, offset, sizes, strides);
}

// A contiguous scratch tensor on device, from the caching allocator: its
// block goes back to the cache (for this stream) when the tensor dies.
Tensor scratch(int device, Dtype dtype, Shape sizes) {
  auto impl = std::make_shared<TensorImpl>();
  int64_t n = 1;
  for (int64_t d : sizes) n *= d;
  impl->storage = detail::allocate_device(device, static_cast<size_t>(n) * element_size(dtype));
  impl->strides = Shape(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) impl->strides[d - 1] = impl->strides[d] * sizes[d];
  impl->sizes = std::move(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- im2col / col2im kernels

// Where column entry (item b, row r, column l) lives: b * item_stride +
// r * row_stride + l. Rows r = (c * kh + i) * kw + j run over all C_in
// channels, so group g's rows are [g * K, (g + 1) * K).
struct ColLayout {
  int64_t item_stride, row_stride;
};

// cols for `items` items of x (items, C_in, H, W): tap (i, j) of channel c
// at output (oh, ow), zero where it reads padding. Thread: one entry.
template <typename T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ cols, int64_t total, ConvShape s,
                              ColLayout layout) {
  const int64_t R = s.C_in * s.kh * s.kw;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t l = e % s.L, r = (e / s.L) % R, b = e / (s.L * R);
    const int64_t ow = l % s.OW, oh = l / s.OW;
    const int64_t j = r % s.kw, i = (r / s.kw) % s.kh, c = r / (s.kw * s.kh);
    const int64_t ih = oh * s.p.stride_h - s.p.pad_h + i * s.p.dilation_h;
    const int64_t iw = ow * s.p.stride_w - s.p.pad_w + j * s.p.dilation_w;
    const bool inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
    cols[b * layout.item_stride + r * layout.row_stride + l] =
        inside ? x[((b * s.C_in + c) * s.H + ih) * s.W + iw] : T(0.0f);
  }
}

// gx (items, C_in, H, W): each element sums the column entries read from it
// (the taps whose output position is whole and inside). Thread: one element,
// so every element is written once and no atomics are needed.
// cols are T, or float32 for a float16/bfloat16 gx (the GEMM's sums kept).
template <typename T, typename C>
__global__ void col2im_kernel(const C* __restrict__ cols, T* __restrict__ gx, int64_t total, ConvShape s,
                              ColLayout layout) {
  using M = opmath_t<T>;
  for (int64_t e = global_thread(); e < total; e += grid_threads()) {
    const int64_t w = e % s.W, h = (e / s.W) % s.H, c = (e / (s.W * s.H)) % s.C_in, b = e / (s.W * s.H * s.C_in);
    M acc = 0;
    for (int64_t i = 0; i < s.kh; ++i) {
      const int64_t hh = h + s.p.pad_h - i * s.p.dilation_h;
      if (hh < 0 || hh % s.p.stride_h != 0 || hh / s.p.stride_h >= s.OH) continue;
      for (int64_t j = 0; j < s.kw; ++j) {
        const int64_t ww = w + s.p.pad_w - j * s.p.dilation_w;
        if (ww < 0 || ww % s.p.stride_w != 0 || ww / s.p.stride_w >= s.OW) continue;
        const int64_t r = (c * s.kh + i) * s.kw + j;
        const int64_t l = (hh / s.p.stride_h) * s.OW + ww / s.p.stride_w;
        acc += static_cast<M>(cols[b * layout.item_stride + r * layout.row_stride + l]);
      }
    }
    gx[e] = static_cast<T>(acc);
  }
}

void launch_im2col(const Tensor& x, const Tensor& cols, int64_t items, const ConvShape& s, ColLayout layout) {
  const int64_t total = items * s.C_in * s.kh * s.kw * s.L;
  const int device = x.device().index();
  dispatch_floating(x.dtype(), "im2col (cuda)", [&]<typename T>() {
    TANDEM_LAUNCH(grid_stride_blocks(total, device), kGridStrideThreads, 0, stream_of(x), im2col_kernel<T>)
    (x.data_ptr<T>(), cols.data_ptr<T>(), total, s, layout);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void launch_col2im(const Tensor& cols, const Tensor& gx, int64_t items, const ConvShape& s, ColLayout layout) {
  const int64_t total = items * s.C_in * s.H * s.W;
  const int device = gx.device().index();
  dispatch_floating(gx.dtype(), "col2im (cuda)", [&]<typename T>() {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      TANDEM_LAUNCH(grid_stride_blocks(total, device), kGridStrideThreads, 0, stream_of(gx), col2im_kernel<T, float>)
      (cols.data_ptr<float>(), gx.data_ptr<T>(), total, s, layout);
    } else {
      TANDEM_LAUNCH(grid_stride_blocks(total, device), kGridStrideThreads, 0, stream_of(gx), col2im_kernel<T, T>)
      (cols.data_ptr<T>(), gx.data_ptr<T>(), total, s, layout);
    }
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// ---------------------------------------------------------------- im2col + cuBLAS

// The dtype the backward passes keep their GEMMs' sums in before the one
// rounding to the gradient's dtype, as the CPU backend does: float32 for
// float16 and bfloat16 (rounding each item's product, or each column, first
// lost up to three times the CPU's error in bfloat16: found by the simulated
// GPU), else the dtype itself.
Dtype sums_dtype(Dtype dtype) { return is_reduced_float(dtype) ? kFloat32 : dtype; }

// Column matrices (and per-item products) of at most this many bytes at
// once: the batch is taken in chunks of that many items (at least one).
constexpr int64_t kColumnBytes = int64_t{256} << 20;

// extra: elements of other scratch an item needs (the weight gradient's
// per-item products).
int64_t chunk_items(const ConvShape& s, Dtype dtype, int64_t extra = 0) {
  const int64_t per_item =
      std::max<int64_t>(1, (s.C_in * s.kh * s.kw * s.L + extra) * static_cast<int64_t>(element_size(dtype)));
  return std::clamp<int64_t>(kColumnBytes / per_item, 1, std::max<int64_t>(s.N, 1));
}

// Items [n0, n0 + B) of x as (B, G, K, L) column matrices: x itself for a
// direct convolution, else im2col into a scratch tensor.
Tensor columns(const Tensor& x, int64_t n0, int64_t B, const ConvShape& s) {
  if (s.direct) return view_of(x, n0 * s.C_in * s.L, {B, s.G, s.K, s.L}, {s.C_in * s.L, s.K * s.L, s.L, 1});
  Tensor cols = scratch(x.device().index(), x.dtype(), {B, s.G, s.K, s.L});
  launch_im2col(contiguous_view(x, n0 * s.C_in * s.H * s.W, {B, s.C_in, s.H, s.W}), cols, B, s, {s.G * s.K * s.L, s.L});
  return cols;
}

void forward_gemm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvShape& s) {
  // The bias first, and the products added to it inside the GEMM, so that a
  // float16 or bfloat16 output is rounded once, as on the CPU (rounding the
  // product before adding the bias lost up to 0.02 to cancellation in
  // bfloat16: found by the simulated GPU).
  if (bias.defined()) copy(out, view_of(bias, 0, {s.N, s.C_out, s.OH, s.OW}, {0, 1, 0, 0}));
  const int64_t chunk = chunk_items(s, x.dtype());
  for (int64_t n0 = 0; n0 < s.N; n0 += chunk) {
    const int64_t B = std::min(chunk, s.N - n0);
    const Tensor cols = columns(x, n0, B, s);
    // (B, G, cout_g, L) = (G, cout_g, K) (shared by the items) @ (B, G, K, L)
    const Tensor y = view_of(out, n0 * s.C_out * s.L, {B, s.G, s.cout_g, s.L}, {s.C_out * s.L, s.cout_g * s.L, s.L, 1});
    const Tensor w = view_of(weight, 0, {B, s.G, s.cout_g, s.K}, {0, s.cout_g * s.K, s.K, 1});
    matmul_into(y, w, cols, false, bias.defined());
  }
}

void backward_input_gemm(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight, const ConvShape& s) {
  const int64_t chunk = chunk_items(s, sums_dtype(grad_input.dtype()));
  // (G, K, cout_g): the weight read transposed.
  for (int64_t n0 = 0; n0 < s.N; n0 += chunk) {
    const int64_t B = std::min(chunk, s.N - n0);
    const Tensor wt = view_of(weight, 0, {B, s.G, s.K, s.cout_g}, {0, s.cout_g * s.K, 1, s.K});
    const Tensor gy =
        view_of(grad_out, n0 * s.C_out * s.L, {B, s.G, s.cout_g, s.L}, {s.C_out * s.L, s.cout_g * s.L, s.L, 1});
    if (s.direct) {
      // The input gradient is the column matrix itself.
      matmul_into(view_of(grad_input, n0 * s.C_in * s.L, {B, s.G, s.K, s.L}, {s.C_in * s.L, s.K * s.L, s.L, 1}), wt, gy,
                  false, false);
      continue;
    }
    const Tensor cols = scratch(grad_input.device().index(), sums_dtype(grad_input.dtype()), {B, s.G, s.K, s.L});
    matmul_into(cols, wt, gy, false, false);
    launch_col2im(cols, contiguous_view(grad_input, n0 * s.C_in * s.H * s.W, {B, s.C_in, s.H, s.W}), B, s,
                  {s.G * s.K * s.L, s.L});
  }
}

void backward_weight_gemm(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& x, const ConvShape& s) {
  const Dtype sums = sums_dtype(x.dtype());
  const int64_t chunk = chunk_items(s, sums, s.C_out * s.K);
  const int device = x.device().index();
  const Tensor weight_view = view_of(grad_weight, 0, {1, s.G, s.cout_g, s.K}, {s.C_out * s.K, s.cout_g * s.K, s.K, 1});
  // The per-item products and their sum in float32 for float16/bfloat16
  // weights, rounded once at the end.
  const Tensor gw = sums == x.dtype() ? weight_view : scratch(device, sums, {1, s.G, s.cout_g, s.K});
  Tensor chunk_sum;  // the sums of the chunks after the first, added to gw
  for (int64_t n0 = 0; n0 < s.N; n0 += chunk) {
    const int64_t B = std::min(chunk, s.N - n0);
    const Tensor cols = columns(x, n0, B, s);
    // (B, G, cout_g, K) = (B, G, cout_g, L) @ (B, G, K, L)^T, then summed over B.
    const Tensor colst = view_of(cols, 0, {B, s.G, s.L, s.K}, {cols.stride(0), cols.stride(1), 1, cols.stride(2)});
    const Tensor gy =
        view_of(grad_out, n0 * s.C_out * s.L, {B, s.G, s.cout_g, s.L}, {s.C_out * s.L, s.cout_g * s.L, s.L, 1});
    const Tensor per_item = scratch(device, sums, {B, s.G, s.cout_g, s.K});
    matmul_into(per_item, gy, colst, false, false);
    if (n0 == 0) {
      reduce(ReduceOp::Sum, gw, per_item);
    } else {
      if (!chunk_sum.defined()) chunk_sum = scratch(device, sums, {1, s.G, s.cout_g, s.K});
      reduce(ReduceOp::Sum, chunk_sum, per_item);
      binary(BinaryOp::Add, gw, gw, chunk_sum);
    }
  }
  if (sums != x.dtype()) copy(weight_view, gw);
}

// ---------------------------------------------------------------- cuDNN
#if TANDEM_WITH_CUDNN

// cuDNN's descriptors take ints.
bool fits_cudnn(const ConvShape& s) {
  auto fits = [](int64_t v) { return v <= INT_MAX; };
  return fits(s.N * s.C_in * s.H * s.W) && fits(s.N * s.C_out * s.L) && fits(s.C_out * s.K);
}

cudnnDataType_t cudnn_type(Dtype dtype) {
  switch (dtype) {
    case kFloat32: return CUDNN_DATA_FLOAT;
    case kFloat64: return CUDNN_DATA_DOUBLE;
    case kFloat16: return CUDNN_DATA_HALF;
    case kBFloat16: return CUDNN_DATA_BFLOAT16;
    case kInt64:
    case kInt32:
    case kUInt8:
    case kBool: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "no cuDNN convolution type for ", dtype);
}

// Workspaces past this size are not considered: the next algorithm is.
constexpr size_t kMaxWorkspace = size_t{1} << 30;

// The descriptors of one convolution shape and the algorithm of each pass,
// chosen on first use. Plans live as long as the program.
struct CudnnPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::once_flag fwd_once, data_once, filter_once;
  std::optional<std::pair<cudnnConvolutionFwdAlgo_t, size_t>> fwd;
  std::optional<std::pair<cudnnConvolutionBwdDataAlgo_t, size_t>> data;
  std::optional<std::pair<cudnnConvolutionBwdFilterAlgo_t, size_t>> filter;
};

std::unique_ptr<CudnnPlan> make_plan(const ConvShape& s, Dtype dtype) {
  auto plan = std::make_unique<CudnnPlan>();
  const cudnnDataType_t t = cudnn_type(dtype);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  TANDEM_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->x));
  TANDEM_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->x, CUDNN_TENSOR_NCHW, t, i(s.N), i(s.C_in), i(s.H), i(s.W)));
  TANDEM_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->y));
  TANDEM_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->y, CUDNN_TENSOR_NCHW, t, i(s.N), i(s.C_out), i(s.OH), i(s.OW)));
  TANDEM_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w));
  TANDEM_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(plan->w, t, CUDNN_TENSOR_NCHW, i(s.C_out), i(s.cin_g), i(s.kh), i(s.kw)));
  TANDEM_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan->conv));
  // Sums in float for every type but double, as the CPU kernels; no TF32
  // for float32 (CUDNN_FMA_MATH), tensor cores for the 16-bit types.
  const Conv2dParams& p = s.p;
  TANDEM_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv, i(p.pad_h), i(p.pad_w), i(p.stride_h), i(p.stride_w),
                                                     i(p.dilation_h), i(p.dilation_w), CUDNN_CROSS_CORRELATION,
                                                     dtype == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
  TANDEM_CUDNN_CHECK(cudnnSetConvolutionGroupCount(plan->conv, i(p.groups)));
  const cudnnMathType_t math = dtype == kFloat32   ? CUDNN_FMA_MATH
                               : dtype == kFloat64 ? CUDNN_DEFAULT_MATH
                                                   : CUDNN_TENSOR_OP_MATH;
  TANDEM_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, math));
  int n = 0, c = 0, h = 0, w = 0;
  TANDEM_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &n, &c, &h, &w));
  TANDEM_INTERNAL_ASSERT(n == s.N && c == s.C_out && h == s.OH && w == s.OW, "cuDNN's output size ", n, "x", c, "x", h,
                         "x", w, " differs from conv2d's");
  return plan;
}

// The plan of a shape, made on first use; one cache for every device and
// thread (descriptors belong to no handle).
CudnnPlan& plan_for(const ConvShape& s, Dtype dtype, int device) {
  using Key = std::array<int64_t, 17>;
  static std::mutex mu;
  static auto* plans = new std::map<Key, std::unique_ptr<CudnnPlan>>;
  const Conv2dParams& p = s.p;
  const Key key{device,       static_cast<int64_t>(dtype),
                s.N,          s.C_in,
                s.H,          s.W,
                s.C_out,      s.cin_g,
                s.kh,         s.kw,
                p.stride_h,   p.stride_w,
                p.pad_h,      p.pad_w,
                p.dilation_h, p.dilation_w,
                p.groups};
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<CudnnPlan>& plan = (*plans)[key];
  if (!plan) plan = make_plan(s, dtype);
  return *plan;
}

// The first of cuDNN's heuristic choices (best first) that it can run with
// a workspace of at most kMaxWorkspace bytes.
template <typename Algo, typename Perf, typename Get>
std::optional<std::pair<Algo, size_t>> pick(int count, const Get& get) {
  std::vector<Perf> perf(static_cast<size_t>(count));
  int returned = 0;
  TANDEM_CUDNN_CHECK(get(count, &returned, perf.data()));
  for (int k = 0; k < returned; ++k)
    if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= kMaxWorkspace)
      return std::pair<Algo, size_t>{perf[k].algo, perf[k].memory};
  return std::nullopt;
}

// alpha = 1, beta = 0 or 1, in the scaling type (double for double, else float).
struct Scale {
  float f;
  double d;
  const void* of(Dtype dtype) const { return dtype == kFloat64 ? static_cast<const void*>(&d) : &f; }
};
constexpr Scale kOne{1.0f, 1.0}, kZero{0.0f, 0.0};

// A workspace for one call; freed after it (the block stays on this stream).
std::shared_ptr<Storage> workspace(int device, size_t bytes) {
  return bytes == 0 ? nullptr : detail::allocate_device(device, bytes);
}

// Each pass returns false when cuDNN has no algorithm for it (the caller then
// takes the im2col path).
bool forward_cudnn(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvShape& s) {
  const int device = out.device().index();
  const Dtype dt = out.dtype();
  CudnnPlan& plan = plan_for(s, dt, device);
  cudnnHandle_t h = cudnn_handle(device, stream_of(out));
  std::call_once(plan.fwd_once, [&] {
    plan.fwd = pick<cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t>(
        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, [&](int count, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
          return cudnnGetConvolutionForwardAlgorithm_v7(h, plan.x, plan.w, plan.conv, plan.y, count, returned, perf);
        });
  });
  if (!plan.fwd) return false;
  const auto ws = workspace(device, plan.fwd->second);
  // The bias first and beta = 1, as forward_gemm: one rounding of a float16
  // or bfloat16 output.
  if (bias.defined()) copy(out, view_of(bias, 0, {s.N, s.C_out, s.OH, s.OW}, {0, 1, 0, 0}));
  TANDEM_CUDNN_CHECK(cudnnConvolutionForward(h, kOne.of(dt), plan.x, x.data_ptr(), plan.w, weight.data_ptr(), plan.conv,
                                             plan.fwd->first, ws ? ws->data() : nullptr, plan.fwd->second,
                                             bias.defined() ? kOne.of(dt) : kZero.of(dt), plan.y, out.data_ptr()));
  return true;
}

bool backward_input_cudnn(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight, const ConvShape& s) {
  const int device = grad_input.device().index();
  const Dtype dt = grad_input.dtype();
  CudnnPlan& plan = plan_for(s, dt, device);
  cudnnHandle_t h = cudnn_handle(device, stream_of(grad_input));
  std::call_once(plan.data_once, [&] {
    plan.data = pick<cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t>(
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, [&](int count, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, plan.w, plan.y, plan.conv, plan.x, count, returned,
                                                             perf);
        });
  });
  if (!plan.data) return false;
  const auto ws = workspace(device, plan.data->second);
  TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardData(
      h, kOne.of(dt), plan.w, weight.data_ptr(), plan.y, grad_out.data_ptr(), plan.conv, plan.data->first,
      ws ? ws->data() : nullptr, plan.data->second, kZero.of(dt), plan.x, grad_input.data_ptr()));
  return true;
}

bool backward_weight_cudnn(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& x, const ConvShape& s) {
  const int device = grad_weight.device().index();
  const Dtype dt = grad_weight.dtype();
  CudnnPlan& plan = plan_for(s, dt, device);
  cudnnHandle_t h = cudnn_handle(device, stream_of(grad_weight));
  std::call_once(plan.filter_once, [&] {
    plan.filter = pick<cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionBwdFilterAlgoPerf_t>(
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        [&](int count, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, plan.x, plan.y, plan.conv, plan.w, count, returned,
                                                               perf);
        });
  });
  if (!plan.filter) return false;
  const auto ws = workspace(device, plan.filter->second);
  TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, kOne.of(dt), plan.x, x.data_ptr(), plan.y, grad_out.data_ptr(),
                                                    plan.conv, plan.filter->first, ws ? ws->data() : nullptr,
                                                    plan.filter->second, kZero.of(dt), plan.w, grad_weight.data_ptr()));
  return true;
}

#endif  // TANDEM_WITH_CUDNN

}  // namespace

void conv2d(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  DeviceGuard guard(out.device().index());
  const ConvShape s = conv_shape(input.sizes(), weight.sizes(), out.sizes(), p);
#if TANDEM_WITH_CUDNN
  if (cudnn_enabled() && fits_cudnn(s) && forward_cudnn(out, input, weight, bias, s)) return;
#endif
  forward_gemm(out, input, weight, bias, s);
}

void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                           const Conv2dParams& p) {
  DeviceGuard guard(grad_input.device().index());
  const ConvShape s = conv_shape(grad_input.sizes(), weight.sizes(), grad_out.sizes(), p);
#if TANDEM_WITH_CUDNN
  if (cudnn_enabled() && fits_cudnn(s) && backward_input_cudnn(grad_input, grad_out, weight, s)) return;
#endif
  backward_input_gemm(grad_input, grad_out, weight, s);
}

void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& input,
                            const Conv2dParams& p) {
  DeviceGuard guard(grad_weight.device().index());
  const ConvShape s = conv_shape(input.sizes(), grad_weight.sizes(), grad_out.sizes(), p);
#if TANDEM_WITH_CUDNN
  if (cudnn_enabled() && fits_cudnn(s) && backward_weight_cudnn(grad_weight, grad_out, input, s)) return;
#endif
  backward_weight_gemm(grad_weight, grad_out, input, s);
}

const char* conv2d_implementation() { return TANDEM_WITH_CUDNN ? "cudnn" : "im2col+cublas"; }

namespace {
std::atomic<bool> g_cudnn_enabled{true};
}  // namespace

void set_cudnn_enabled(bool enabled) { g_cudnn_enabled.store(enabled, std::memory_order_relaxed); }
bool cudnn_enabled() { return g_cudnn_enabled.load(std::memory_order_relaxed); }

}  // namespace tandem::cuda

// The geometry of 2-D convolution and pooling, shared by the op front ends,
// the CPU kernels and the CUDA kernels: the parameters each kernel takes, the
// output sizes (PyTorch's formulas) and the windows of each output, which
// both backends walk the same way.
#pragma once

#include <cstdint>

#include "tensor/core/macros.h"

namespace tandem {

// stride, padding (top/left; bottom/right is the same) and dilation per
// spatial dim, and the channel groups.
struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

// Max and average pooling. dilation is max pooling's only; count_include_pad
// and divisor_override (0: none) average pooling's.
struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;
  bool count_include_pad = true;
  int64_t divisor_override = 0;
};

// ---------------------------------------------------------------- output sizes (host)

// A convolution's output size along one dim; the caller checked that the
// dilated kernel fits in the padded input.
inline int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

// PyTorch's pooling_output_shape: floor or ceil division, and with ceil_mode
// the last window must start inside the input or its left padding.
inline int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                                bool ceil_mode) {
  const int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // Floor division (num may be negative when the kernel does not fit).
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

namespace fn {

// ---------------------------------------------------------------- windows

// The input rows [begin, end) an average pooling window covers, and the count
// it divides by.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

// Window (oh, ow) of average pooling over an (H, W) plane, as PyTorch's
// kernels compute it: the window clipped to the padded input gives the
// count_include_pad divisor, clipped to the input the rows to sum.
TANDEM_HD_INLINE AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  int64_t h1 = h0 + p.kernel_h, w1 = w0 + p.kernel_w;
  h1 = h1 < H + p.pad_h ? h1 : H + p.pad_h;
  w1 = w1 < W + p.pad_w ? w1 : W + p.pad_w;
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  h1 = h1 < H ? h1 : H;
  w1 = w1 < W ? w1 : W;
  const int64_t divisor = p.divisor_override != 0 ? p.divisor_override
                          : p.count_include_pad   ? padded
                                                  : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, divisor};
}

// Adaptive pooling: output index o of `out` over `in` covers input
// [floor(o * in / out), ceil((o + 1) * in / out)).
TANDEM_HD_INLINE int64_t adaptive_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
TANDEM_HD_INLINE int64_t adaptive_end(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

// The outputs [begin, end) along one dim whose pooling window (of kernel
// taps dilation apart) can hold input index i: PyTorch's bounds for the
// backward passes that gather per input element.
TANDEM_HD_INLINE int64_t pool_first_output(int64_t i, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  const int64_t extent = (kernel - 1) * dilation + 1;
  return i + pad < extent ? 0 : (i + pad - extent) / stride + 1;
}
TANDEM_HD_INLINE int64_t pool_end_output(int64_t i, int64_t stride, int64_t pad, int64_t out) {
  const int64_t e = (i + pad) / stride + 1;
  return e < out ? e : out;
}

}  // namespace fn

}  // namespace tandem

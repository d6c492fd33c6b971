// Host-side launch plans of the CUDA batch-norm and layer-norm reductions:
// which kernel sums a batch norm's channels, how far the rows are split
// across blocks, and so how many partial sums the kernels write, which is
// exactly what the launchers allocate. Plain C++, compiled by nvcc for the
// launchers (kernels/cuda/norm.cu) and by g++ for the CPU tests
// (tests/test_nn_norm.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/functors/norm.h"

namespace tandem::cuda {

inline constexpr int kNormThreads = 256;       // 1-D blocks of the reductions
inline constexpr int kNormBandX = 32;          // columns (slots) of a band block
inline constexpr int kNormBandY = 8;           // rows a band block walks at once
inline constexpr int64_t kNormPlaneMin = 32;   // planes this long take the plane kernel
inline constexpr int64_t kNormPerThread = 16;  // values a thread should sum, at least, before a split pays
inline constexpr int64_t kNormMaxGridY = 65535;

namespace norm_plan {
inline int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace norm_plan

// How many parts a band grid splits its rows into: enough blocks for about
// 8 per multiprocessor (sms), while each thread still sums kNormPerThread
// rows or more; within the grid's y limit.
inline int64_t band_splits(int64_t bands, int64_t rows, int64_t sms) {
  using norm_plan::div_up;
  return std::clamp<int64_t>(
      std::min(div_up(8 * sms, std::max<int64_t>(bands, 1)), div_up(rows, kNormBandY * kNormPerThread)), 1,
      kNormMaxGridY);
}

// The channel sums of a batch-norm input (N, C, L), all of N, C, L >= 1,
// into partial sums [C][parts] that one thread per channel then folds:
//  - planes (L >= kNormPlaneMin): grid (C, splits) of kNormThreads threads;
//    block (c, s) sums channel c's planes of the rows [N s / S, N (s + 1) / S)
//    into partial[c * S + s]: parts = S.
//  - bands (shorter planes, (N, C) above all): grid (bands, splits) of
//    (kNormBandX, kNormBandY) threads over the W = C * L slots of a row
//    (slot j = c * L + l); block (band, s) sums slots band * 32 + threadIdx.x
//    of the rows [N s / S, N (s + 1) / S) into partial[j * S + s], so each of
//    a channel's L slots leaves S parts: parts = L * S.
// Either way the kernels write partial[0, C * parts), each element once.
struct ChannelSumsPlan {
  bool planes = true;
  int64_t grid_x = 0;    // planes: C; bands: ceil(C * L / kNormBandX)
  int64_t splits = 1;    // grid y, S
  int64_t parts = 0;     // partial sums per channel
  int64_t partials = 0;  // partial sums written (and allocated): C * parts
};

inline ChannelSumsPlan channel_sums_plan(const Nchw& s, int64_t sms) {
  using norm_plan::div_up;
  ChannelSumsPlan p;
  p.planes = s.L >= kNormPlaneMin;
  if (p.planes) {
    p.grid_x = s.C;
    p.splits = std::clamp<int64_t>(
        std::min(div_up(s.N * s.L, kNormThreads * kNormPerThread), div_up(4 * sms, std::max<int64_t>(s.C, 1))), 1,
        std::max<int64_t>(s.N, 1));
    p.parts = p.splits;
  } else {
    p.grid_x = div_up(s.C * s.L, kNormBandX);
    p.splits = band_splits(p.grid_x, s.N, sms);
    p.parts = s.L * p.splits;
  }
  p.partials = s.C * p.parts;
  return p;
}

// The layer-norm backward's weight and bias gradients: column sums of
// (rows, D), a band grid (ceil(D / kNormBandX), splits); with splits > 1
// each part goes to partial[s * D + j], splits * D partial sums, which a
// second kernel folds; with one split the sums are written directly.
inline int64_t layer_norm_param_splits(int64_t rows, int64_t D, int64_t sms) {
  return band_splits(norm_plan::div_up(D, kNormBandX), rows, sms);
}

}  // namespace tandem::cuda

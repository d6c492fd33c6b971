// parallel_for over an index range with OpenMP, only when the range is large
// enough to pay for the threads (small ops lose to threading overhead).
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

// Marks a loop for vectorization. At -O2 (the default debugoptimized build)
// GCC's cost model vectorizes no loop whose trip count is only known at run
// time, and a select such as relu's becomes a branch per element, mispredicted
// on data of random sign (40x slower than the vector loop).
#ifndef TANDEM_SIMD
#ifdef _OPENMP
#define TANDEM_SIMD _Pragma("omp simd")
#else
#define TANDEM_SIMD
#endif
#endif

namespace tandem::cpu {

// Below this many elements an elementwise op runs on one thread.
constexpr int64_t kElementwiseGrain = 32768;

// The threads a parallel_for may use, and OpenBLAS's too (0: the defaults).
int num_threads();
void set_num_threads(int n);

// The body of a parallel_for: f(ctx, begin, end) over a share of the range.
using RangeFn = void (*)(const void* ctx, int64_t begin, int64_t end);

// parallel_for's one OpenMP region (parallel.cpp), so that each caller's
// lambda compiles into a plain function rather than into an outlined region
// of its own.
void parallel_for_range(int64_t begin, int64_t end, int64_t grain, RangeFn f, const void* ctx);

// f(b, e) over shares [b, e) of [begin, end): one share per thread, on
// min(num_threads(), n / grain rounded up) threads, and on the calling
// thread alone when the range is at most grain or inside a parallel region.
// Whether parallel_for splits a range of n elements (parallel.cpp).
bool splits(int64_t n, int64_t grain);

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end - begin <= 0) return;
  if (!splits(end - begin, grain)) return f(begin, end);
  parallel_for_range(
      begin, end, grain, [](const void* ctx, int64_t b, int64_t e) { (*static_cast<const F*>(ctx))(b, e); }, &f);
}

}  // namespace tandem::cpu

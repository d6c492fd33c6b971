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

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
#ifdef _OPENMP
  int nthreads = num_threads();
  if (n > grain && nthreads > 1 && !omp_in_parallel()) {
    int64_t tasks = std::min<int64_t>(nthreads, (n + grain - 1) / grain);
#pragma omp parallel num_threads(static_cast <int>(tasks))
    {
      int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t chunk = (n + nt - 1) / nt;
      int64_t b = begin + tid * chunk, e = std::min(end, b + chunk);
      if (b < e) f(b, e);
    }
    return;
  }
#endif
  f(begin, end);
}

}  // namespace tandem::cpu

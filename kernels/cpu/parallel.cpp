// Thread count for the CPU backend (tandem::set_num_threads): OpenMP's loops
// and OpenBLAS's GEMMs both follow it, so one setting bounds the threads of
// every CPU op.
#include "kernels/cpu/parallel.h"

#include <atomic>

#include "tandem/version.h"

#if TANDEM_WITH_OPENBLAS
#include <cblas.h>
#endif

namespace tandem::cpu {

namespace {
std::atomic<int> g_threads{0};  // 0: OpenMP's default

#if TANDEM_WITH_OPENBLAS
// OpenBLAS's own count as the program found it (OPENBLAS_NUM_THREADS or the
// cores), restored by set_num_threads(0); first read before any change.
int openblas_default_threads() {
  static const int n = openblas_get_num_threads();
  return n;
}
#endif
}  // namespace

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
#ifdef _OPENMP
  return n > 0 ? n : omp_get_max_threads();
#else
  return n > 0 ? n : 1;
#endif
}

void set_num_threads(int n) {
#if TANDEM_WITH_OPENBLAS
  const int blas_default = openblas_default_threads();  // read before the first change
  // Without this, a GEMM on a 2-core machine beside a busy loader thread
  // spawns OpenBLAS's threads anyway: the MLP step went from 1.5 ms to 7.7 ms.
  openblas_set_num_threads(n > 0 ? n : blas_default);
#endif
  g_threads.store(n, std::memory_order_relaxed);
}

bool splits(int64_t n, int64_t grain) {
#ifdef _OPENMP
  return n > grain && num_threads() > 1 && !omp_in_parallel();
#else
  (void)n;
  (void)grain;
  return false;
#endif
}

void parallel_for_range(int64_t begin, int64_t end, int64_t grain, RangeFn f, const void* ctx) {
  const int64_t n = end - begin;
  if (n <= 0) return;
#ifdef _OPENMP
  const int nthreads = num_threads();
  if (n > grain && nthreads > 1 && !omp_in_parallel()) {
    const int64_t tasks = std::min<int64_t>(nthreads, (n + grain - 1) / grain);
#pragma omp parallel num_threads(static_cast <int>(tasks))
    {
      const int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t chunk = (n + nt - 1) / nt;
      const int64_t b = begin + tid * chunk, e = std::min(end, b + chunk);
      if (b < e) f(ctx, b, e);
    }
    return;
  }
#endif
  f(ctx, begin, end);
}

}  // namespace tandem::cpu

// Thread count for the CPU backend (tandem::set_num_threads).
#include "kernels/cpu/parallel.h"

#include <atomic>

namespace tandem::cpu {

namespace {
std::atomic<int> g_threads{0};  // 0: OpenMP's default
}

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
#ifdef _OPENMP
  return n > 0 ? n : omp_get_max_threads();
#else
  return n > 0 ? n : 1;
#endif
}

void set_num_threads(int n) { g_threads.store(n, std::memory_order_relaxed); }

}  // namespace tandem::cpu

// The per-thread loader state behind get_worker_info and example_seed.
#include "data/loader_state.h"

namespace tandem::data {

namespace {
thread_local detail::LoaderThreadState tls_state;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

namespace detail {
const LoaderThreadState& loader_thread_state() { return tls_state; }
LoaderThreadGuard::LoaderThreadGuard(LoaderThreadState state) : previous_(tls_state) { tls_state = state; }
LoaderThreadGuard::~LoaderThreadGuard() { tls_state = previous_; }
uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c) { return splitmix64(splitmix64(splitmix64(a) ^ b) ^ c); }
}  // namespace detail

uint64_t example_seed(size_t index) { return detail::mix_seed(tls_state.seed, tls_state.epoch, index); }

std::optional<WorkerInfo> get_worker_info() {
  if (!tls_state.active) return std::nullopt;
  return WorkerInfo{tls_state.worker_id, tls_state.num_workers, tls_state.seed, tls_state.epoch};
}

}  // namespace tandem::data

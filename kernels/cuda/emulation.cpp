// Reading TANDEM_EMULATE_CUDA and TANDEM_EMULATE_CUDA_MEMORY.
#include "kernels/cuda/emulation.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "tandem/version.h"
#include "tensor/core/errors.h"

namespace tandem {

namespace {
constexpr int kMaxEmulated = 16;
}  // namespace

int detail::parse_emulated_count(const char* env) {
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  TANDEM_CHECK(*end == '\0' && n >= 0 && n <= kMaxEmulated, ValueError,
               "TANDEM_EMULATE_CUDA must be a number of devices between 0 and ", kMaxEmulated, ", got '", env, "'");
  return static_cast<int>(n);
}

size_t detail::parse_emulated_memory(const char* env) {
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  double v = std::strtod(env, &end);
  double scale = 1;
  std::string suffix(end);
  if (suffix == "K" || suffix == "KiB")
    scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB")
    scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else
    TANDEM_CHECK(suffix.empty(), ValueError,
                 "TANDEM_EMULATE_CUDA_MEMORY must be a byte count with an optional K, M or G "
                 "suffix (e.g. 512M), got '",
                 env, "'");
  TANDEM_CHECK(end != env && v > 0, ValueError, "TANDEM_EMULATE_CUDA_MEMORY must be a positive byte count, got '", env,
               "'");
  return static_cast<size_t>(v * scale);
}

namespace {
// TANDEM_EMULATE_CUDA, checked once; -1 when unset.
int requested_count() {
  static const int n = [] {
    const char* env = std::getenv("TANDEM_EMULATE_CUDA");
    return env == nullptr || *env == '\0' ? -1 : detail::parse_emulated_count(env);
  }();
  return n;
}
}  // namespace

int emulated_device_count() {
  const int n = requested_count();  // a bad value is an error in every build
  return TANDEM_CUDA_SIMULATED ? 0 : std::max(n, 0);
}

int simulated_device_count() {
  const int n = requested_count();
  return TANDEM_CUDA_SIMULATED ? (n < 0 ? 2 : n) : 0;
}

size_t emulated_memory_capacity() {
  static const size_t c = detail::parse_emulated_memory(std::getenv("TANDEM_EMULATE_CUDA_MEMORY"));
  return c;
}

}  // namespace tandem

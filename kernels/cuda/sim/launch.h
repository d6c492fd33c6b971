// Kernel launches in the simulated build: TANDEM_LAUNCH(grid, block, smem,
// stream, kernel)(args...) (kernels/cuda/launch.cuh) becomes a Launch,
// which copies the arguments (as the runtime does at the launch) into the
// work it queues on the stream; the stream runs it when something waits for
// it (runtime.cpp), block by block and thread by thread (scheduler.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda/sim/api.h"

namespace tandem::sim {

struct LaunchConfig {
  dim3 grid, block;
  size_t dynamic_smem = 0;
  cudaStream_t stream = nullptr;
  const void* kernel = nullptr;  // its address: the key of cudaFuncSetAttribute
  const char* name = "";         // as written at the launch, for messages
};

// Checks the configuration as the runtime does (an error goes to
// cudaGetLastError and nothing is queued), then queues `thread` (one thread
// of the kernel; the built-in variables say which) on the stream.
void launch(const LaunchConfig& config, std::function<void()> thread);

template <typename... P>
class Launch {
 public:
  Launch(void (*kernel)(P...), const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream)
      : kernel_(kernel), config_{grid, block, smem, stream, reinterpret_cast<const void*>(kernel), name} {}

  template <typename... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "a kernel launch with the wrong number of arguments");
    auto params = std::make_shared<std::tuple<std::decay_t<P>...>>(std::forward<A>(args)...);
    launch(config_, [k = kernel_, params] { std::apply(k, *params); });
  }

 private:
  void (*kernel_)(P...);
  LaunchConfig config_;
};

}  // namespace tandem::sim

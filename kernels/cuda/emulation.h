// The emulation switch: with TANDEM_EMULATE_CUDA=N, N cuda devices backed by
// host memory and the CPU kernels stand in for GPUs. Read once, here at the
// bottom of the CUDA layer, so the allocator and streams can ask too.
#pragma once

#include <cstddef>

namespace tandem {

int emulated_device_count();
size_t emulated_memory_capacity();  // bytes per emulated device; 0 = unlimited

// In the simulated build (-Dcuda=simulated) the cuda devices are simulated
// GPUs that run the CUDA kernels on the host (kernels/cuda/sim), and
// TANDEM_EMULATE_CUDA says how many there are (2 when unset) instead of
// turning emulation on: emulated_device_count() is 0 there, and the
// capacity above is each simulated device's. 0 in other builds.
int simulated_device_count();

namespace detail {
// The values of TANDEM_EMULATE_CUDA (a device count, 0 to 16) and
// TANDEM_EMULATE_CUDA_MEMORY (bytes with an optional K/M/G suffix; 0 when
// unset); a bad value is a ValueError naming the variable.
int parse_emulated_count(const char* value);
size_t parse_emulated_memory(const char* value);
}  // namespace detail

}  // namespace tandem

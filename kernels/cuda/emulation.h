// The emulation switch: with TANDEM_EMULATE_CUDA=N, N cuda devices backed by
// host memory and the CPU kernels stand in for GPUs. Read once, here at the
// bottom of the CUDA layer, so the allocator and streams can ask too.
#pragma once

#include <cstddef>

namespace tandem {

int emulated_device_count();
size_t emulated_memory_capacity();  // bytes per emulated device; 0 = unlimited

namespace detail {
// The values of TANDEM_EMULATE_CUDA (a device count, 0 to 16) and
// TANDEM_EMULATE_CUDA_MEMORY (bytes with an optional K/M/G suffix; 0 when
// unset); a bad value is a ValueError naming the variable.
int parse_emulated_count(const char* value);
size_t parse_emulated_memory(const char* value);
}  // namespace detail

}  // namespace tandem

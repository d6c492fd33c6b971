// What the caching allocator tells the simulated GPU, so that under
// AddressSanitizer a kernel or copy may touch only the bytes of blocks in
// use (each block's requested size): the allocator's free blocks and the
// rounding after each block stay poisoned. No-ops in other builds.
#pragma once

#include <cstddef>

#include "tandem/version.h"

namespace tandem::sim {

#if TANDEM_CUDA_SIMULATED
void segment_managed(void* segment);  // a cudaMalloc'd segment the allocator carves
void block_in_use(void* ptr, size_t requested);
void block_free(void* ptr);
#else
inline void segment_managed(void*) {}
inline void block_in_use(void*, size_t) {}
inline void block_free(void*) {}
#endif

}  // namespace tandem::sim

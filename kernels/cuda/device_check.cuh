// The device side of the deferred checks (kernels/cuda/device_check.h): what
// a kernel's thread calls on a bad value, and what the launcher calls after
// a checked launch.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_check.h"
#include "kernels/cuda/stream.h"

namespace tandem::cuda {

// The first thread of the record's generation to get here writes the record;
// the others (and later generations' losers) only read the generation. The
// kind goes last, after a system fence, so the host never sees a half
// record. Called only on the error path.
__device__ __forceinline__ void report_bad_value(const detail::DeviceCheck& c, int64_t value) {
  const unsigned long long g = *reinterpret_cast<volatile const unsigned long long*>(&c.record->generation);
  if (atomicMax(c.claim, g) >= g) return;
  c.record->dim = c.dim;
  c.record->value = value;
  c.record->size = c.size;
  c.record->extra = c.extra;
  c.record->name = c.name;
  __threadfence_system();
  *reinterpret_cast<volatile uint32_t*>(&c.record->kind) = c.kind;
}

// After a checked launch: nothing, unless TANDEM_CUDA_SYNC_CHECKS=1 asks to
// wait for it and report its error here.
inline void finish_checked_launch(int device, cudaStream_t stream, const detail::DeviceCheck& c) {
  if (!detail::sync_checks()) return;
  detail::count_host_sync(device);
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
  detail::throw_device_error(device, c.name);
}

}  // namespace tandem::cuda

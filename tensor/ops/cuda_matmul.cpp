// The CUDA matmul precision switch: one atomic flag, read by the matmul front
// end on every call and handed to the kernel.
#include "tensor/ops/cuda_matmul.h"

#include <atomic>

#include "kernels/cuda/conv.h"

namespace tandem::cuda {

namespace {
std::atomic<bool> allow_tf32{false};
}  // namespace

void set_matmul_allow_tf32(bool allow) { allow_tf32.store(allow, std::memory_order_relaxed); }
bool matmul_allow_tf32() { return allow_tf32.load(std::memory_order_relaxed); }

}  // namespace tandem::cuda

// The CUDA convolution and pooling entry points of a build without CUDA:
// each throws (emulated devices never get here: their ops run on the CPU
// kernels).
#include <atomic>

#include "kernels/cuda/conv.h"
#include "kernels/cuda/no_cuda.h"
#include "kernels/cuda/pool.h"

namespace tandem::gpu {

using detail::no_cuda;

void conv2d(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) { no_cuda("conv2d"); }
void conv2d_backward_input(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) {
  no_cuda("conv2d_backward_input");
}
void conv2d_backward_weight(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) {
  no_cuda("conv2d_backward_weight");
}
const char* conv2d_implementation() { return "none (built without CUDA)"; }

// The setting is kept, as cuda::set_matmul_allow_tf32's, though nothing reads it here.
namespace {
std::atomic<bool> g_cudnn_enabled{true};
}  // namespace
void set_cudnn_enabled(bool enabled) { g_cudnn_enabled.store(enabled, std::memory_order_relaxed); }
bool cudnn_enabled() { return g_cudnn_enabled.load(std::memory_order_relaxed); }

void max_pool2d(const Tensor&, const Tensor&, const Tensor&, const Pool2dParams&) { no_cuda("max_pool2d"); }
void max_pool2d_backward(const Tensor&, const Tensor&, const Tensor&, const Pool2dParams&) {
  no_cuda("max_pool2d_backward");
}
void avg_pool2d(const Tensor&, const Tensor&, const Pool2dParams&) { no_cuda("avg_pool2d"); }
void avg_pool2d_backward(const Tensor&, const Tensor&, const Pool2dParams&) { no_cuda("avg_pool2d_backward"); }
void adaptive_avg_pool2d(const Tensor&, const Tensor&) { no_cuda("adaptive_avg_pool2d"); }
void adaptive_avg_pool2d_backward(const Tensor&, const Tensor&) { no_cuda("adaptive_avg_pool2d_backward"); }

}  // namespace tandem::gpu

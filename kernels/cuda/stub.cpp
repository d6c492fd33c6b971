// The CUDA runtime layer of a build without CUDA: device queries answer that
// there is no GPU; anything that would touch one throws. (The kernels' own
// throwing definitions come from their contracts: kernels/contract.h.
// Emulated devices never reach either: their ops run on the CPU kernels.)
#include <atomic>

#include "kernels/cuda/conv.h"
#include "kernels/cuda/no_cuda.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/versions.h"
#include "tensor/core/errors.h"

namespace tandem {

using detail::no_cuda;

namespace cuda::detail {
bool compiled_with_cuda() { return false; }
Versions versions() { return {}; }
int device_count() { return 0; }
int get_device() { no_cuda("cuda get_device"); }
void set_device(int) { no_cuda("cuda set_device"); }
Properties properties(int) { no_cuda("get_device_properties"); }
std::string unavailable_reason() { return "Tandem was built without CUDA support"; }
void* malloc_device(int, size_t) { no_cuda("cuda malloc"); }
void free_device(int, void*) { no_cuda("cuda free"); }
void driver_mem_get_info(int, size_t*, size_t*) { no_cuda("cuda mem_get_info"); }
void* malloc_pinned(size_t) { no_cuda("pin_memory"); }
void free_pinned(void*) { no_cuda("pinned free"); }
void memcpy(void*, int, const void*, int, size_t, CopyKind) { no_cuda("cuda copy"); }
void synchronize(int) { no_cuda("cuda synchronize"); }
void* stream_create(int) { no_cuda("cuda stream"); }
void stream_synchronize(int, void*) { no_cuda("cuda stream synchronize"); }
bool stream_query(int, void*) { no_cuda("cuda stream query"); }
void stream_wait_event(int, void*, void*) { no_cuda("cuda stream wait"); }
void* event_create(int, bool) { no_cuda("cuda event"); }
void event_destroy(int, void*) {}
void event_record(int, void*, void*) { no_cuda("cuda event record"); }
void event_synchronize(void*) { no_cuda("cuda event synchronize"); }
bool event_query(void*) { no_cuda("cuda event query"); }
float event_elapsed_ms(void*, void*) { no_cuda("cuda event elapsed_time"); }
void memcpy_async(void*, const void*, size_t, CopyKind, int, void*) { no_cuda("cuda copy"); }
}  // namespace cuda::detail

namespace cuda {
const char* conv2d_implementation() { return "none (built without CUDA)"; }

// The setting is kept, as cuda::set_matmul_allow_tf32's, though nothing reads it here.
namespace {
std::atomic<bool> g_cudnn_enabled{true};
}  // namespace
void set_cudnn_enabled(bool enabled) { g_cudnn_enabled.store(enabled, std::memory_order_relaxed); }
bool cudnn_enabled() { return g_cudnn_enabled.load(std::memory_order_relaxed); }
}  // namespace cuda

}  // namespace tandem

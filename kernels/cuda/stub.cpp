// The CUDA runtime layer of a build without CUDA: device queries answer that
// there is no GPU; anything that would touch one throws.
#include "kernels/cuda/runtime.h"
#include "tensor/core/errors.h"

namespace tandem::cuda_runtime {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw NotImplementedError(
      detail::str_cat(what,
                      ": Tandem was built without CUDA support. Rebuild on a machine with the CUDA "
                      "toolkit (meson setup -Dcuda=enabled), or set TANDEM_EMULATE_CUDA=1 to emulate a device"));
}
}  // namespace

bool compiled_with_cuda() { return false; }
int device_count() { return 0; }
Properties properties(int) { no_cuda("get_device_properties"); }
std::string unavailable_reason() { return "Tandem was built without CUDA support"; }
void* malloc_device(int, size_t) { no_cuda("cuda malloc"); }
void free_device(int, void*) { no_cuda("cuda free"); }
void* malloc_pinned(size_t) { no_cuda("pin_memory"); }
void free_pinned(void*) { no_cuda("pinned free"); }
void memcpy(void*, int, const void*, int, size_t, CopyKind) { no_cuda("cuda copy"); }
void synchronize(int) { no_cuda("cuda synchronize"); }

}  // namespace tandem::cuda_runtime

// The CUDA layer of a build without CUDA: device queries answer that there
// is no GPU; anything that would touch one, and every CUDA kernel, throws.
// (Emulated devices never reach these: their ops run on the CPU kernels.)
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/index.h"
#include "kernels/cuda/linalg.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/random.h"
#include "kernels/cuda/ranges.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/shape_ops.h"
#include "kernels/cuda/versions.h"
#include "tensor/core/errors.h"

namespace tandem {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw NotImplementedError(
      detail::str_cat(what,
                      ": Tandem was built without CUDA support. Rebuild on a machine with the CUDA "
                      "toolkit (meson setup -Dcuda=enabled), or set TANDEM_EMULATE_CUDA=1 to emulate a device"));
}
}  // namespace

namespace cuda_runtime {
bool compiled_with_cuda() { return false; }
Versions versions() { return {}; }
int device_count() { return 0; }
Properties properties(int) { no_cuda("get_device_properties"); }
std::string unavailable_reason() { return "Tandem was built without CUDA support"; }
void* malloc_device(int, size_t) { no_cuda("cuda malloc"); }
void free_device(int, void*) { no_cuda("cuda free"); }
void mem_get_info(int, size_t*, size_t*) { no_cuda("cuda mem_get_info"); }
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
}  // namespace cuda_runtime

namespace gpu {
void unary(UnaryOp op, const Tensor&, const Tensor&, const UnaryParams&) { no_cuda(op_name(op)); }
void binary(BinaryOp op, const Tensor&, const Tensor&, const Tensor&, const Scalar&, const UnaryParams&) {
  no_cuda(op_name(op));
}
void where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { no_cuda("where"); }
void masked_fill(const Tensor&, const Tensor&, const Tensor&, const Scalar&) { no_cuda("masked_fill"); }
void fill(const Tensor&, const Scalar&) { no_cuda("fill_"); }
void copy(const Tensor&, const Tensor&) { no_cuda("copy_"); }
void reduce(ReduceOp, const Tensor&, const Tensor&, const ReduceParams&) { no_cuda("reduce"); }
void arg_reduce(bool, const Tensor&, const Tensor&, const Tensor&) { no_cuda("argmax"); }
void softmax(const Tensor&, const Tensor&, int64_t, bool) { no_cuda("softmax"); }
void softmax_backward(const Tensor&, const Tensor&, const Tensor&, int64_t, bool) { no_cuda("softmax_backward"); }
void gather(const Tensor&, const Tensor&, int64_t, const Tensor&) { no_cuda("gather"); }
void scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { no_cuda("scatter_add"); }
void index_select(const Tensor&, const Tensor&, int64_t, const Tensor&) { no_cuda("index_select"); }
void one_hot(const Tensor&, const Tensor&) { no_cuda("one_hot"); }
void matmul(const Tensor&, const Tensor&, const Tensor&, bool, bool) { no_cuda("matmul"); }
void uniform(const Tensor&, PhiloxState, double, double) { no_cuda("uniform_"); }
void normal(const Tensor&, PhiloxState, double, double) { no_cuda("normal_"); }
void randint(const Tensor&, PhiloxState, int64_t, int64_t) { no_cuda("random_"); }
void arange(const Tensor&, const Scalar&, const Scalar&) { no_cuda("arange"); }
void linspace(const Tensor&, const Scalar&, const Scalar&) { no_cuda("linspace"); }
void eye(const Tensor&) { no_cuda("eye"); }
void cat(const Tensor&, const std::vector<Tensor>&, int64_t) { no_cuda("cat"); }
void sgd_step(const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&,
              const std::vector<uint8_t>&, const fn::SgdHyper&) {
  no_cuda("SGD.step");
}
void adam_step(const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&,
               const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<double>&,
               const fn::AdamHyper&) {
  no_cuda("Adam.step");
}
void foreach_norm(const std::vector<Tensor>&, double, const Tensor&) { no_cuda("foreach_norm"); }
void foreach_mul_(const std::vector<Tensor>&, const Tensor&) { no_cuda("foreach_mul_"); }
}  // namespace gpu

}  // namespace tandem

// The norm and embedding kernels of a build without CUDA: each throws (see
// no_cuda.h).
#include "kernels/cuda/no_cuda.h"
#include "kernels/cuda/norm.h"

namespace tandem::gpu {

void batch_norm(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const Tensor&, bool, double, double) {
  detail::no_cuda("batch_norm");
}
void batch_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, const Tensor&, bool) {
  detail::no_cuda("batch_norm_backward");
}
void layer_norm(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double) {
  detail::no_cuda("layer_norm");
}
void layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, const Tensor&) {
  detail::no_cuda("layer_norm_backward");
}
void embedding(const Tensor&, const Tensor&, const Tensor&) { detail::no_cuda("embedding"); }
void embedding_backward(const Tensor&, const Tensor&, const Tensor&, int64_t, bool) {
  detail::no_cuda("embedding_backward");
}

}  // namespace tandem::gpu

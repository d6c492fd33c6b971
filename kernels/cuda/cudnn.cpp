// cuDNN handles per device and thread, and the error of a failed call.
#include "kernels/cuda/cudnn.h"

#include "kernels/cuda/handle_pool.h"
#include "tensor/core/errors.h"

namespace tandem::cuda {

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  throw CudaError(tandem::detail::str_cat("cuDNN error: ", cudnnGetErrorString(status), " (", static_cast<int>(status),
                                          ") in ", call, " at ", file, ":", line, detail[0] != 0 ? ": " : "", detail));
}

cudnnHandle_t cudnn_handle(int device, cudaStream_t stream) {
  cudnnHandle_t h = thread_handle<cudnnHandle_t>(device, [] {
    cudnnHandle_t made = nullptr;
    TANDEM_CUDNN_CHECK(cudnnCreate(&made));
    return made;
  });
  TANDEM_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

}  // namespace tandem::cuda

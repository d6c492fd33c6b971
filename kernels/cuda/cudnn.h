// cuDNN in the CUDA build (only when meson found it, TANDEM_WITH_CUDNN): a
// checked wrapper for every cuDNN call, and one handle per device and
// thread, bound to the stream the caller launches on.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace tandem::cuda {

// CudaError with the call, file:line, cuDNN's status string and its last
// error message.
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);

// This thread's cuDNN handle for device (the current device, under the
// caller's DeviceGuard), set to stream. Handles are never destroyed; a
// thread's go back to a pool when it ends.
cudnnHandle_t cudnn_handle(int device, cudaStream_t stream);

}  // namespace tandem::cuda

#define TANDEM_CUDNN_CHECK(call)                                                          \
  do {                                                                                    \
    const cudnnStatus_t tandem_cudnn_status_ = (call);                                    \
    if (tandem_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                     \
      ::tandem::cuda::throw_cudnn_error(tandem_cudnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

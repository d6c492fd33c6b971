// Checked CUDA and cuBLAS calls for the CUDA build: a failure throws
// CudaError (or OutOfMemoryError) with the call, file:line and the library's
// error string. Every runtime call, library call and kernel launch goes
// through one of these macros.
#pragma once

#include <cuda_runtime_api.h>

namespace tandem::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) throw_cuda_error(err, call, file, line);
}

}  // namespace tandem::cuda

#define TANDEM_CUDA_CHECK(call) ::tandem::cuda::check_cuda((call), #call, __FILE__, __LINE__)
// After every <<<...>>> launch: a bad configuration shows up here, not at
// some later unrelated call.
#define TANDEM_CUDA_KERNEL_LAUNCH_CHECK() \
  ::tandem::cuda::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
// cuBLAS status codes are ints here so that this header does not pull in cublas_api.h.
#define TANDEM_CUBLAS_CHECK(call)                                                           \
  do {                                                                                      \
    int tandem_cublas_status_ = static_cast<int>(call);                                     \
    if (tandem_cublas_status_ != 0)                                                         \
      ::tandem::cuda::throw_cublas_error(tandem_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)

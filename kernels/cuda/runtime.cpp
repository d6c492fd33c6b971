// The CUDA runtime layer: every runtime call checked, failures thrown as
// CudaError (or OutOfMemoryError) with the call, file:line and CUDA's words.
#include "kernels/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include "tensor/core/errors.h"

namespace tandem::cuda_runtime {

namespace {
void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear the sticky-free error state
  throw CudaError(detail::str_cat("CUDA error: ", cudaGetErrorString(err), " (", cudaGetErrorName(err), ") in ", call,
                                  " at ", file, ":", line));
}
}  // namespace

#define TANDEM_CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

bool compiled_with_cuda() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string unavailable_reason() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  cudaGetLastError();
  if (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice)
    return detail::str_cat("no usable GPU (", cudaGetErrorString(err), ")");
  if (err != cudaSuccess) return cudaGetErrorString(err);
  return n == 0 ? "no CUDA devices found" : "";
}

Properties properties(int device) {
  cudaDeviceProp p{};
  TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return {p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount};
}

void* malloc_device(int device, size_t nbytes) {
  TANDEM_CUDA_CHECK(cudaSetDevice(device));
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, nbytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemoryError(detail::str_cat("CUDA out of memory. Tried to allocate ", nbytes, " bytes on cuda:", device,
                                           " (capacity ", total_b, " bytes, ", free_b, " bytes free)"));
  }
  TANDEM_CUDA_CHECK(err);
  return ptr;
}

void free_device(int device, void* ptr) {
  TANDEM_CUDA_CHECK(cudaSetDevice(device));
  TANDEM_CUDA_CHECK(cudaFree(ptr));
}

void* malloc_pinned(size_t nbytes) {
  void* ptr = nullptr;
  TANDEM_CUDA_CHECK(cudaMallocHost(&ptr, nbytes));
  return ptr;
}

void free_pinned(void* ptr) { TANDEM_CUDA_CHECK(cudaFreeHost(ptr)); }

void memcpy(void* dst, int dst_device, const void* src, int src_device, size_t nbytes, CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice:
      TANDEM_CUDA_CHECK(cudaSetDevice(dst_device));
      TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
      return;
    case CopyKind::DeviceToHost:
      TANDEM_CUDA_CHECK(cudaSetDevice(src_device));
      TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
      return;
    case CopyKind::DeviceToDevice:
      if (dst_device == src_device) {
        TANDEM_CUDA_CHECK(cudaSetDevice(dst_device));
        TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice));
      } else {
        TANDEM_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, nbytes));
      }
      return;
  }
}

void synchronize(int device) {
  TANDEM_CUDA_CHECK(cudaSetDevice(device));
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace tandem::cuda_runtime

// The CUDA runtime layer: every runtime call checked, failures thrown as
// CudaError with the call, file:line and CUDA's words.
#include "kernels/cuda/runtime.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "tandem/version.h"
#if TANDEM_WITH_CUDNN
#include <cudnn.h>
#endif

#include <mutex>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/versions.h"
#include "tensor/core/errors.h"

namespace tandem::cuda {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear the error, so that the next call does not report it again
  throw CudaError(tandem::detail::str_cat("CUDA error: ", cudaGetErrorString(err), " (", cudaGetErrorName(err), ") in ",
                                          call, " at ", file, ":", line));
}

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  throw CudaError(tandem::detail::str_cat("cuBLAS error: ", cublasGetStatusString(static_cast<cublasStatus_t>(status)),
                                          " (", cublasGetStatusName(static_cast<cublasStatus_t>(status)), ") in ", call,
                                          " at ", file, ":", line));
}

int multiprocessor_count(int device) {
  static std::mutex mu;
  static std::vector<int> counts;
  std::lock_guard<std::mutex> lock(mu);
  if (counts.empty()) counts.assign(cuda::detail::device_count(), 0);
  TANDEM_INTERNAL_ASSERT(device >= 0 && device < static_cast<int>(counts.size()));
  if (counts[device] == 0)
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&counts[device], cudaDevAttrMultiProcessorCount, device));
  return counts[device];
}

}  // namespace tandem::cuda

namespace tandem::cuda::detail {

bool compiled_with_cuda() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int get_device() {
  int device = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void set_device(int device) { TANDEM_CUDA_CHECK(cudaSetDevice(device)); }

std::string unavailable_reason() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  cudaGetLastError();
  if (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice)
    return tandem::detail::str_cat("no usable GPU (", cudaGetErrorString(err), ")");
  if (err != cudaSuccess) return cudaGetErrorString(err);
  return n == 0 ? "no CUDA devices found" : "";
}

Properties properties(int device) {
  cudaDeviceProp p{};
  TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return {p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount};
}

void* malloc_device(int device, size_t nbytes) {
  cuda::DeviceGuard guard(device);
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, nbytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  TANDEM_CUDA_CHECK(err);
  return ptr;
}

void free_device(int device, void* ptr) {
  cuda::DeviceGuard guard(device);
  TANDEM_CUDA_CHECK(cudaFree(ptr));
}

void driver_mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) {
  cuda::DeviceGuard guard(device);
  TANDEM_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

void* malloc_pinned(size_t nbytes) {
  void* ptr = nullptr;
  cudaError_t err = cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw OutOfMemoryError(tandem::detail::str_cat("pin_memory: cannot allocate ", nbytes,
                                                   " bytes of pinned host memory (cudaHostAlloc: out of memory)"));
  }
  TANDEM_CUDA_CHECK(err);
  return ptr;
}

void free_pinned(void* ptr) { TANDEM_CUDA_CHECK(cudaFreeHost(ptr)); }

void memcpy(void* dst, int dst_device, const void* src, int src_device, size_t nbytes, CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice: {
      cuda::DeviceGuard guard(dst_device);
      TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
      return;
    }
    case CopyKind::DeviceToHost: {
      cuda::DeviceGuard guard(src_device);
      TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
      return;
    }
    case CopyKind::DeviceToDevice:
      if (dst_device == src_device) {
        cuda::DeviceGuard guard(dst_device);
        TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice));
      } else {
        // cudaMemcpyPeer may return before the copy is done, and work on
        // non-blocking streams is not ordered after it: wait for it here.
        TANDEM_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, nbytes));
        cuda::DeviceGuard guard(dst_device);
        TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
      }
      return;
  }
}

void synchronize(int device) {
  cuda::DeviceGuard guard(device);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
}

void* stream_create(int device) {
  cuda::DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void stream_synchronize(int device, void* stream) {
  cuda::DeviceGuard guard(device);
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

bool stream_query(int device, void* stream) {
  cuda::DeviceGuard guard(device);
  cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(stream));
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  TANDEM_CUDA_CHECK(err);
  return true;
}

void stream_wait_event(int device, void* stream, void* event) {
  cuda::DeviceGuard guard(device);
  TANDEM_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}

void* event_create(int device, bool timing) {
  cuda::DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

void event_destroy(int device, void* event) {
  cuda::DeviceGuard guard(device);
  cudaEventDestroy(static_cast<cudaEvent_t>(event));  // in destructors: never throws
}

void event_record(int device, void* event, void* stream) {
  cuda::DeviceGuard guard(device);
  TANDEM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

void event_synchronize(void* event) { TANDEM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); }

bool event_query(void* event) {
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  TANDEM_CUDA_CHECK(err);
  return true;
}

float event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

void memcpy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, int device, void* stream) {
  cuda::DeviceGuard guard(device);
  cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                     : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                      : cudaMemcpyDeviceToDevice;
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, k, static_cast<cudaStream_t>(stream)));
}

Versions versions() {
  Versions v;
  if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) v.runtime = 0;
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) v.driver = 0;
  cudaGetLastError();
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    v.cublas = major * 10000 + minor * 100 + patch;
#if TANDEM_WITH_CUDNN
  v.cudnn = static_cast<int>(cudnnGetVersion());
#endif
  return v;
}

}  // namespace tandem::cuda::detail

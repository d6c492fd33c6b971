// The simulator's own interface, beside the CUDA names of api.h: the
// limits of the device it models (an H200, sm_90) and what tests of the
// simulator read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/cuda/sim/api.h"
#include "kernels/cuda/sim/launch.h"
#include "kernels/cuda/sim/scheduler.h"

namespace tandem::sim {

inline constexpr const char* kDeviceName = "Tandem simulated CUDA device: CUDA kernels on the host";
inline constexpr int kMultiprocessors = 132;
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
inline constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535u, 65535u};
inline constexpr size_t kSharedMemoryPerBlock = 48 * 1024;        // without the opt-in attribute
inline constexpr size_t kSharedMemoryPerBlockOptin = 227 * 1024;  // with it

int device_count();

// What the simulated devices have done since the program started.
struct Counters {
  uint64_t launches = 0;
  uint64_t copies = 0;            // asynchronous and peer copies queued
  uint64_t synchronizations = 0;  // calls that made the host wait for a stream
};
Counters counters();

// The details of the last error (a launch's geometry, a kernel that could
// not finish): the simulator's addition to cudaGetErrorString.
const std::string& last_error_message();

// For tests of the simulator: the thread order (what TANDEM_SIM_SCHEDULE
// and TANDEM_SIM_SEED set at start), and eager mode (TANDEM_SIM_EAGER).
void set_schedule(Schedule schedule, uint64_t seed);
void set_eager(bool eager);

// Whether any stream of the device has work that has not run.
bool pending_work(int device);

// For the simulated libraries (cublas.cpp): queue host work that acts as the
// device on `stream` (null: the current device's legacy stream), run with
// device memory open when the stream reaches it.
void enqueue_device_work(cudaStream_t stream, std::function<void()> work);
// Whether [p, p + n) lies inside one device allocation.
bool in_device_memory(const void* p, size_t n);
// Records an error of device work: the next synchronising call on the
// stream's device reports it.
void fail_device_work(cudaStream_t stream, cudaError_t err, std::string message);

}  // namespace tandem::sim

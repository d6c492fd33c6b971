// The simulated GPU's promises (kernels/cuda/sim/README.md), each against a
// kernel or call broken on purpose, written only for this test: the broken
// one must be caught, its correct twin must pass. CUDA source, built only in
// the simulated build (-Dcuda=simulated), run on its simulated devices.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sim/cublas.h"
#include "kernels/cuda/sim/runtime.h"
#include "tandem/tandem.h"

using namespace tandem;
using Catch::Matchers::Contains;

namespace {

constexpr int kThreads = 256;

// ---------------------------------------------------------------- kernels
// out[t] = the value thread t + 1 wrote: needs a barrier between the write
// and the read.
__global__ void rotate_kernel(int* out, int salt, bool barrier) {
  __shared__ int smem[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  smem[t] = t + salt;
  if (barrier) __syncthreads();
  out[blockIdx.x * blockDim.x + t] = smem[(t + 1) % kThreads];
}

// Each thread reads its neighbour's value, then overwrites its own slot:
// without the second barrier a neighbour may already have overwritten the
// slot a thread reads (a write-after-read race on shared memory).
__global__ void double_neighbour_kernel(int* out, bool second_barrier) {
  __shared__ int smem[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  smem[t] = t;
  __syncthreads();
  const int x = smem[(t + 1) % kThreads];
  if (second_barrier) __syncthreads();
  smem[t] = 2 * x;
  __syncthreads();
  out[t] = smem[t];
}

// A barrier that only the first half of the block reaches.
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < blockDim.x / 2) __syncthreads();
  out[threadIdx.x] = 1;
}

// Warp shuffles: out[4 t + k] for the four kinds.
__global__ void shuffle_kernel(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  const int v = 100 + t;
  out[4 * t + 0] = __shfl_down_sync(0xffffffffu, v, 3);
  out[4 * t + 1] = __shfl_up_sync(0xffffffffu, v, 1, 8);
  out[4 * t + 2] = __shfl_xor_sync(0xffffffffu, v, 5);
  out[4 * t + 3] = __shfl_sync(0xffffffffu, v, 7, 16);
}

// A shuffle after half of each warp has left.
__global__ void shuffle_after_exit_kernel(int* out) {
  if (threadIdx.x % 32 >= 16) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

// A block-wide sum through shuffles and shared memory, as block_reduce.cuh.
__global__ void block_sum_kernel(const float* in, float* out, int n) {
  __shared__ float warp_sums[32];
  float v = 0;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) v += in[i];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x) / 32 ? warp_sums[lane] : 0.0f;
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) *out = v;
  }
}

// A grid-stride fill without a barrier.
__global__ void fill_kernel(float* out, int64_t n, float value) {
  for (int64_t i = cuda::global_thread(); i < n; i += cuda::grid_threads()) out[i] = value;
}

// out[i] = in[i] + 1, one element per thread.
__global__ void add_one_kernel(const float* in, float* out, int64_t n) {
  const int64_t i = cuda::global_thread();
  if (i < n) out[i] = in[i] + 1;
}

// Writes one element past its end: n + 1 threads.
__global__ void write_past_end_kernel(float* out, int64_t n) {
  const int64_t i = cuda::global_thread();
  if (i <= n) out[i] = 1;
}

// Each block's dynamic shared memory: what a thread found there before
// writing (uninitialised: 0xff bytes), and its mirror thread's value after.
__global__ void dynamic_shared_kernel(int* out) {
  TANDEM_DYNAMIC_SHARED(int, smem);
  const int before = smem[threadIdx.x];
  smem[threadIdx.x] = static_cast<int>(blockIdx.x * 1000 + threadIdx.x);
  __syncthreads();
  out[2 * (blockIdx.x * blockDim.x + threadIdx.x)] = before;
  out[2 * (blockIdx.x * blockDim.x + threadIdx.x) + 1] = smem[blockDim.x - 1 - threadIdx.x];
}

// Shuffles within groups narrower than the warp, and with partial masks:
// lanes 0-15 exchange among themselves while lanes 16-31 wait at the barrier.
__global__ void narrow_shuffle_kernel(int* out) {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32;
  const int v = 100 + t;
  out[3 * t + 0] = __shfl_xor_sync(0xffffffffu, v, 9, 8);  // 9 & 31 = 9: reads an earlier group of 8, or its own
  out[3 * t + 1] = __shfl_down_sync(0xffffffffu, v, 33);   // offsets use their low five bits: 33 is 1
  int half = -1;
  if (lane < 16) half = __shfl_xor_sync(0x0000ffffu, v, 1);
  __syncthreads();
  out[3 * t + 2] = half;
}

// ---------------------------------------------------------------- helpers
template <typename T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  TANDEM_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> v(n);
  TANDEM_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// Restores the default schedule when a test that set one ends.
struct ScheduleGuard {
  explicit ScheduleGuard(sim::Schedule s, uint64_t seed = 0) { sim::set_schedule(s, seed); }
  ~ScheduleGuard() { sim::set_schedule(sim::Schedule::Shuffle, 0); }
};

// Runs f in a child process; returns its exit status and what it wrote to stderr.
std::pair<int, std::string> in_child(const std::function<void()>& f) {
  test::TempDir dir;
  const std::string err = dir.file("stderr");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen(err.c_str(), "w", stderr);
    alarm(120);  // a child that hangs dies, and the test fails instead of stalling
    f();
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(err);
  std::stringstream s;
  s << in.rdbuf();
  return {status, s.str()};
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

}  // namespace

TEST_CASE("the simulated devices say what they are", "[sim]") {
  REQUIRE(cuda::is_available());
  CHECK(cuda::device_count() == 2);  // the suite's TANDEM_EMULATE_CUDA=2
  CHECK_FALSE(cuda::is_emulated());
  const auto p = cuda::get_device_properties(0);
  CHECK(p.name == "Tandem simulated CUDA device: CUDA kernels on the host");
  CHECK(p.major == 9);
  CHECK(p.minor == 0);
  CHECK(p.multi_processor_count == 132);
  CHECK(p.total_memory == size_t{256} << 20);  // TANDEM_EMULATE_CUDA_MEMORY=256M
  int value = 0;
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxThreadsPerBlock, 0));
  CHECK(value == 1024);
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrWarpSize, 0));
  CHECK(value == 32);
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CHECK(value == 227 * 1024);
}

TEST_CASE("a missing __syncthreads() changes the result, whatever the schedule", "[sim][barrier]") {
  constexpr int blocks = 3;
  int* out = device_alloc<int>(blocks * kThreads);
  for (auto [schedule, name] : {std::pair{sim::Schedule::Forward, "forward"},
                                {sim::Schedule::Reverse, "reverse"},
                                {sim::Schedule::Shuffle, "shuffle"}}) {
    INFO("schedule " << name);
    ScheduleGuard guard(schedule, 7);
    for (int salt : {1000, 2000}) {  // a second launch must not read the first one's leftovers as right
      TANDEM_LAUNCH(blocks, kThreads, 0, nullptr, rotate_kernel)(out, salt, true);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
      std::vector<int> good = to_host(out, blocks * kThreads);
      for (int i = 0; i < blocks * kThreads; ++i) REQUIRE(good[i] == (i % kThreads + 1) % kThreads + salt);
      TANDEM_LAUNCH(blocks, kThreads, 0, nullptr, rotate_kernel)(out, salt + 1, false);
      TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
      std::vector<int> bad = to_host(out, blocks * kThreads);
      int wrong = 0;
      for (int i = 0; i < blocks * kThreads; ++i) wrong += bad[i] != (i % kThreads + 1) % kThreads + salt + 1;
      CHECK(wrong > 0);
    }
  }
  TANDEM_CUDA_CHECK(cudaFree(out));
}

TEST_CASE("a write-after-read race on shared memory changes the result", "[sim][barrier]") {
  int* out = device_alloc<int>(kThreads);
  for (auto schedule : {sim::Schedule::Reverse, sim::Schedule::Shuffle}) {
    ScheduleGuard guard(schedule, 11);
    TANDEM_LAUNCH(1, kThreads, 0, nullptr, double_neighbour_kernel)(out, true);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    std::vector<int> good = to_host(out, kThreads);
    for (int t = 0; t < kThreads; ++t) REQUIRE(good[t] == 2 * ((t + 1) % kThreads));
    TANDEM_LAUNCH(1, kThreads, 0, nullptr, double_neighbour_kernel)(out, false);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    std::vector<int> bad = to_host(out, kThreads);
    int wrong = 0;
    for (int t = 0; t < kThreads; ++t) wrong += bad[t] != 2 * ((t + 1) % kThreads);
    CHECK(wrong > 0);
  }
  TANDEM_CUDA_CHECK(cudaFree(out));
}

TEST_CASE("a barrier that not every thread reaches is a launch failure at the next synchronisation", "[sim][barrier]") {
  int* out = device_alloc<int>(kThreads);
  TANDEM_LAUNCH(1, 64, 0, nullptr, divergent_barrier_kernel)(out);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();  // the launch itself is fine
  CHECK_THROWS_MATCHES(TANDEM_CUDA_CHECK(cudaDeviceSynchronize()), CudaError,
                       Catch::Matchers::Predicate<CudaError>([](const CudaError& e) {
                         return std::string(e.what()).find("unspecified launch failure") != std::string::npos;
                       }));
  CHECK_THAT(sim::last_error_message(),
             Contains("simulated kernel divergent_barrier_kernel, block (0, 0, 0): 32 thread(s) wait at "
                      "__syncthreads(), 0 at a warp shuffle or __syncwarp(), 32 have exited"));
  // Reported once; the device goes on.
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  TANDEM_LAUNCH(1, kThreads, 0, nullptr, rotate_kernel)(out, 0, true);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  TANDEM_CUDA_CHECK(cudaFree(out));
}

TEST_CASE("warp shuffles exchange the lanes' values at the call", "[sim][shuffle]") {
  constexpr int n = 64;
  int* out = device_alloc<int>(4 * n);
  TANDEM_LAUNCH(1, n, 0, nullptr, shuffle_kernel)(out);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  std::vector<int> v = to_host(out, 4 * n);
  for (int t = 0; t < n; ++t) {
    INFO("thread " << t);
    const int lane = t % 32, base = t - lane;
    CHECK(v[4 * t + 0] == 100 + (lane + 3 < 32 ? t + 3 : t));  // down 3: the last 3 lanes keep theirs
    CHECK(v[4 * t + 1] == 100 + (lane % 8 >= 1 ? t - 1 : t));  // up 1 within groups of 8
    CHECK(v[4 * t + 2] == 100 + base + (lane ^ 5));            // xor 5
    CHECK(v[4 * t + 3] == 100 + base + (lane / 16) * 16 + 7);  // lane 7 of each 16
  }
  // A block-wide sum of 1..1000 through shuffles and shared memory.
  std::vector<float> host(1000);
  std::iota(host.begin(), host.end(), 1.0f);
  float* in = device_alloc<float>(host.size());
  float* sum = device_alloc<float>(1);
  TANDEM_CUDA_CHECK(cudaMemcpy(in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  for (int threads : {32, 128, 1024}) {
    TANDEM_LAUNCH(1, threads, 0, nullptr, block_sum_kernel)(in, sum, 1000);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
    CHECK(to_host(sum, 1)[0] == 500500.0f);
  }
  // Groups narrower than the warp, offsets past 31, partial masks beside a barrier.
  TANDEM_LAUNCH(1, n, 0, nullptr, narrow_shuffle_kernel)(out);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  v = to_host(out, 3 * n);
  for (int t = 0; t < n; ++t) {
    INFO("thread " << t);
    const int lane = t % 32, base = t - lane;
    const int x = lane ^ 9;
    CHECK(v[3 * t + 0] == 100 + (x / 8 <= lane / 8 ? base + x : t));
    CHECK(v[3 * t + 1] == 100 + (lane + 1 < 32 ? t + 1 : t));
    CHECK(v[3 * t + 2] == (lane < 16 ? 100 + base + (lane ^ 1) : -1));
  }
  // A shuffle whose mask names lanes that have exited.
  TANDEM_LAUNCH(1, 32, 0, nullptr, shuffle_after_exit_kernel)(out);
  CHECK_THROWS_AS(TANDEM_CUDA_CHECK(cudaDeviceSynchronize()), CudaError);
  CHECK_THAT(sim::last_error_message(), Contains("with mask 0xffffffff, which names lane 16, and that lane exited"));
  for (void* p : {static_cast<void*>(out), static_cast<void*>(in), static_cast<void*>(sum)})
    TANDEM_CUDA_CHECK(cudaFree(p));
}

TEST_CASE("a kernel without a barrier pays two fiber switches a block, not two a thread", "[sim][fibers]") {
  constexpr int64_t n = 64 * kThreads;
  float* out = device_alloc<float>(n);
  const sim::SchedulerStats before = sim::scheduler_stats();
  TANDEM_LAUNCH(64, kThreads, 0, nullptr, fill_kernel)(out, n, 2.5f);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  const sim::SchedulerStats after = sim::scheduler_stats();
  CHECK(after.blocks - before.blocks == 64);
  CHECK(after.fiber_switches - before.fiber_switches == 64);  // one entry a block (and its one return)
  for (float x : to_host(out, n)) REQUIRE(x == 2.5f);
  // With a barrier every thread parks once.
  int* iout = device_alloc<int>(kThreads);
  const sim::SchedulerStats b2 = sim::scheduler_stats();
  TANDEM_LAUNCH(1, kThreads, 0, nullptr, rotate_kernel)(iout, 0, true);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(sim::scheduler_stats().fiber_switches - b2.fiber_switches >= 2 * kThreads);
  TANDEM_CUDA_CHECK(cudaFree(out));
  TANDEM_CUDA_CHECK(cudaFree(iout));
}

TEST_CASE("launches the runtime refuses fail with its errors", "[sim][launch]") {
  int* out = device_alloc<int>(2048);
  auto launch_error = [&](dim3 grid, dim3 block, size_t smem) {
    TANDEM_LAUNCH(grid, block, smem, nullptr, dynamic_shared_kernel)(out);
    return cudaGetLastError();
  };
  CHECK(launch_error(1, 1025, 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_error(1, dim3(1, 1, 65), 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_error(0, 32, 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_error(dim3(1, 65536), 32, 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_error(dim3(1, 1, 65536), 32, 0) == cudaErrorInvalidConfiguration);
  CHECK(launch_error(1, 1024, 1024 * sizeof(int)) == cudaSuccess);
  // Dynamic shared memory: 48 KiB without the opt-in, up to 227 KiB with it.
  CHECK(launch_error(1, 32, 48 * 1024) == cudaSuccess);
  CHECK(launch_error(1, 32, 48 * 1024 + 4) == cudaErrorInvalidValue);
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000));
  CHECK(launch_error(1, 32, 100000) == cudaSuccess);
  CHECK(launch_error(1, 32, 100004) == cudaErrorInvalidValue);
  CHECK(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 + 1) ==
        cudaErrorInvalidValue);
  cudaGetLastError();
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  // Tandem's check turns the runtime's error into CudaError.
  TANDEM_LAUNCH(1, 2048, 0, nullptr, dynamic_shared_kernel)(out);
  CHECK_THROWS_WITH(TANDEM_CUDA_KERNEL_LAUNCH_CHECK(),
                    Contains("CUDA error: invalid configuration argument (cudaErrorInvalidConfiguration) in kernel "
                             "launch at"));
  CHECK_THAT(sim::last_error_message(),
             Contains("launch of dynamic_shared_kernel with grid (1, 1, 1) and block (2048, 1, 1)"));
  // The dynamic shared memory each block gets: uninitialised (0xff bytes) in
  // every block, not the previous block's values, and private to it.
  int* pairs = device_alloc<int>(2 * 2 * 512);
  TANDEM_LAUNCH(2, 512, 512 * sizeof(int), nullptr, dynamic_shared_kernel)(pairs);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  std::vector<int> v = to_host(pairs, 2 * 2 * 512);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 512; ++t) {
      INFO("block " << b << " thread " << t);
      REQUIRE(v[2 * (b * 512 + t)] == -1);
      REQUIRE(v[2 * (b * 512 + t) + 1] == b * 1000 + 511 - t);
    }
  TANDEM_CUDA_CHECK(cudaFree(pairs));
  TANDEM_CUDA_CHECK(cudaFree(out));
}

TEST_CASE("a stream runs only when waited for: a missing event wait reads the data before it is written",
          "[sim][streams]") {
  constexpr int64_t n = 1000;
  float* x = device_alloc<float>(n);
  float* y = device_alloc<float>(n);
  cudaStream_t producer = nullptr, consumer = nullptr;
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  TANDEM_CUDA_CHECK(cudaMemset(x, 0, n * sizeof(float)));
  for (bool wait : {false, true}) {
    INFO("event wait " << wait);
    TANDEM_LAUNCH(4, 256, 0, producer, fill_kernel)(x, n, 41.0f);
    cudaEvent_t ready = nullptr;
    TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    TANDEM_CUDA_CHECK(cudaEventRecord(ready, producer));
    if (wait) TANDEM_CUDA_CHECK(cudaStreamWaitEvent(consumer, ready, 0));
    TANDEM_LAUNCH(4, 256, 0, consumer, add_one_kernel)(x, y, n);
    CHECK(sim::pending_work(0));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(consumer));
    const std::vector<float> got = to_host(y, n);
    // Without the wait the consumer ran before the producer: x was still 0.
    CHECK(got[0] == (wait ? 42.0f : 1.0f));
    CHECK(got[n - 1] == (wait ? 42.0f : 1.0f));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(producer));
    TANDEM_CUDA_CHECK(cudaMemset(x, 0, n * sizeof(float)));
    TANDEM_CUDA_CHECK(cudaEventDestroy(ready));
  }
  // An event query runs its stream up to the event; a stream query answers
  // "not ready" while work is queued, then runs it.
  TANDEM_LAUNCH(4, 256, 0, producer, fill_kernel)(x, n, 7.0f);
  cudaEvent_t e = nullptr;
  TANDEM_CUDA_CHECK(cudaEventCreate(&e));
  TANDEM_CUDA_CHECK(cudaEventRecord(e, producer));
  TANDEM_LAUNCH(4, 256, 0, producer, fill_kernel)(x, n, 8.0f);
  CHECK(cudaEventQuery(e) == cudaSuccess);
  CHECK(to_host(x, 1)[0] == 7.0f);  // up to the event, and no further
  CHECK(cudaStreamQuery(producer) == cudaErrorNotReady);
  cudaGetLastError();
  CHECK(cudaStreamQuery(producer) == cudaSuccess);
  CHECK(to_host(x, 1)[0] == 8.0f);
  // Eager mode runs work as it is queued.
  sim::set_eager(true);
  TANDEM_LAUNCH(4, 256, 0, producer, fill_kernel)(x, n, 9.0f);
  CHECK_FALSE(sim::pending_work(0));
  sim::set_eager(false);
  CHECK(to_host(x, 1)[0] == 9.0f);
  TANDEM_CUDA_CHECK(cudaEventDestroy(e));
  TANDEM_CUDA_CHECK(cudaStreamDestroy(producer));
  TANDEM_CUDA_CHECK(cudaStreamDestroy(consumer));
  TANDEM_CUDA_CHECK(cudaFree(x));
  TANDEM_CUDA_CHECK(cudaFree(y));
}

TEST_CASE("a non-blocking copy from pinned memory reads the buffer when its stream runs", "[sim][streams][pinned]") {
  const Device gpu(kCUDA, 0);
  Tensor host = full({1000}, 1.0).pin_memory();
  REQUIRE(host.is_pinned());
  Tensor dev = host.to(gpu, /*non_blocking=*/true);
  host.fill_(5.0);  // reusing the buffer before the copy is known to be done
  test::check_values(dev.cpu().narrow(0, 0, 3), {5, 5, 5});
  // The right way: wait for the copy before reusing the buffer.
  Tensor host2 = full({1000}, 1.0).pin_memory();
  Tensor dev2 = host2.to(gpu, true);
  cuda::current_stream(0).synchronize();
  host2.fill_(5.0);
  test::check_values(dev2.cpu().narrow(0, 0, 3), {1, 1, 1});
  // A blocking copy from pageable memory takes the data at the call.
  Tensor pageable = full({1000}, 3.0);
  Tensor dev3 = pageable.to(gpu);
  pageable.fill_(4.0);
  test::check_values(dev3.cpu().narrow(0, 0, 3), {3, 3, 3});
}

TEST_CASE("a tensor freed while another stream still reads it needs record_stream", "[sim][streams][allocator]") {
  const Device gpu(kCUDA, 0);
  for (bool recorded : {false, true}) {
    INFO("record_stream " << recorded);
    cuda::synchronize(0);
    cuda::empty_cache();
    const cuda::Stream side = cuda::get_stream_from_pool(0);
    Tensor x = full({4096}, 1.0f, TensorOptions().device(gpu));
    Tensor y;
    {
      cuda::StreamGuard guard(side);
      side.wait_stream(cuda::default_stream(0));
      y = x * 2.0f;  // queued on the side stream, reading x's block
      if (recorded) x.record_stream(side);
    }
    x = Tensor();                                                // freed on the default stream
    Tensor z = full({4096}, 5.0f, TensorOptions().device(gpu));  // may take x's block
    cuda::default_stream(0).synchronize();                       // writes 5 there
    side.synchronize();                                          // now y reads it
    const double y0 = y.cpu().narrow(0, 0, 1).item<double>();
    CHECK(y0 == (recorded ? 2.0 : 10.0));
    z = Tensor();
  }
}

TEST_CASE("simulated cuBLAS: column-major products, cuBLAS's argument checks, every matrix inside its allocation",
          "[sim][cublas]") {
  cublasHandle_t h = nullptr;
  REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  // A (2 x 3) and B (3 x 2), column-major: C = A B.
  const float a[] = {1, 4, 2, 5, 3, 6};     // [[1 2 3] [4 5 6]]
  const float b[] = {7, 9, 11, 8, 10, 12};  // [[7 8] [9 10] [11 12]]
  float* da = device_alloc<float>(6);
  float* db = device_alloc<float>(6);
  float* dc = device_alloc<float>(4);
  TANDEM_CUDA_CHECK(cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice));
  TANDEM_CUDA_CHECK(cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice));
  const float one = 1, zero = 0;
  REQUIRE(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da, CUDA_R_32F, 2, db, CUDA_R_32F, 3, &zero, dc,
                       CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  std::vector<float> c = to_host(dc, 4);
  CHECK(c == std::vector<float>{58, 139, 64, 154});
  // Transposed: C = A^T A^T... (A^T is 3 x 2; op(A) = A^T with k = 2): (3 x 2)(2 x 3) would not fit C; use
  // C (2 x 2) = B^T A^T = (A B)^T.
  REQUIRE(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_T, 2, 2, 3, &one, db, CUDA_R_32F, 3, da, CUDA_R_32F, 2, &zero, dc,
                       CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  CHECK(to_host(dc, 4) == std::vector<float>{58, 64, 139, 154});
  // A leading dimension below the rows: INVALID_VALUE, as cuBLAS.
  CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da, CUDA_R_32F, 1, db, CUDA_R_32F, 3, &zero, dc,
                     CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_INVALID_VALUE);
  // float64 data with float32 compute: NOT_SUPPORTED.
  CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da, CUDA_R_64F, 2, db, CUDA_R_64F, 3, &zero, dc,
                     CUDA_R_64F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_NOT_SUPPORTED);
  // A batch stride that runs past B's allocation: the device faults when it runs.
  REQUIRE(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da, CUDA_R_32F, 2, 0, db, CUDA_R_32F,
                                     3, 6, &zero, dc, CUDA_R_32F, 2, 0, 2, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  CHECK_THROWS_WITH(TANDEM_CUDA_CHECK(cudaDeviceSynchronize()), Contains("an illegal memory access was encountered"));
  CHECK_THAT(sim::last_error_message(), Contains("matrix B of batch 1 (24 bytes of CUDA_R_32F"));
  // bfloat16 inputs, float32 sums, one rounding: 1 + 2^-8 + 2^-8 rounds to 1 + 2^-7 only when summed first.
  const uint16_t ones[] = {0x3f80, 0x3b80, 0x3b80};  // 1, 2^-8, 2^-8
  const uint16_t unit[] = {0x3f80, 0x3f80, 0x3f80};
  auto* ha = device_alloc<uint16_t>(3);
  auto* hb = device_alloc<uint16_t>(3);
  auto* hc = device_alloc<uint16_t>(1);
  float* fc = device_alloc<float>(1);
  TANDEM_CUDA_CHECK(cudaMemcpy(ha, ones, sizeof ones, cudaMemcpyHostToDevice));
  TANDEM_CUDA_CHECK(cudaMemcpy(hb, unit, sizeof unit, cudaMemcpyHostToDevice));
  REQUIRE(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, ha, CUDA_R_16BF, 1, hb, CUDA_R_16BF, 3, &zero, hc,
                       CUDA_R_16BF, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  CHECK(to_host(hc, 1)[0] == 0x3f81);  // 1 + 2^-7
  REQUIRE(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, ha, CUDA_R_16BF, 1, hb, CUDA_R_16BF, 3, &zero, fc,
                       CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  CHECK(to_host(fc, 1)[0] == 1.0f + 0x1p-7f);
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc), static_cast<void*>(ha),
                  static_cast<void*>(hb), static_cast<void*>(hc), static_cast<void*>(fc)})
    TANDEM_CUDA_CHECK(cudaFree(p));
  cublasDestroy(h);
}

TEST_CASE("copies outside their allocations are refused", "[sim][memory]") {
  float* d = device_alloc<float>(16);
  std::vector<float> host(32, 1.0f);
  CHECK(cudaMemcpy(d, host.data(), 32 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK_THAT(sim::last_error_message(),
             Contains("a 128-byte copy whose destination is not inside one device allocation"));
  CHECK(cudaMemcpy(host.data(), d, 16 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemsetAsync(d + 8, 0, 16 * sizeof(float), nullptr) == cudaErrorInvalidValue);
  cudaGetLastError();
  size_t free_bytes = 0, total = 0;
  TANDEM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  CHECK(total == size_t{256} << 20);
  void* big = nullptr;
  CHECK(cudaMalloc(&big, total) == cudaErrorMemoryAllocation);
  cudaGetLastError();
  TANDEM_CUDA_CHECK(cudaFree(d));
}

TEST_CASE("under AddressSanitizer, a kernel's write past its allocation and a host read of device memory are reported",
          "[sim][asan]") {
  if (!kAsan) {
    WARN("not an AddressSanitizer build: these are checked by the sanitizer build's simulated suite");
    return;
  }
  auto [status, err] = in_child([] {
    float* d = device_alloc<float>(100);
    TANDEM_LAUNCH(1, 128, 0, nullptr, write_past_end_kernel)(d, 100);
    cudaDeviceSynchronize();
  });
  CHECK(status != 0);
  CHECK_THAT(err, Contains("AddressSanitizer") && Contains("write_past_end_kernel"));
  std::tie(status, err) = in_child([] {
    float* d = device_alloc<float>(100);
    TANDEM_CUDA_CHECK(cudaMemset(d, 0, 100 * sizeof(float)));
    volatile float x = d[3];  // a host read of a device pointer
    (void)x;
  });
  CHECK(status != 0);
  CHECK_THAT(err, Contains("AddressSanitizer: use-after-poison"));
  // A tensor's block from the caching allocator: the rounding after it is poisoned too.
  std::tie(status, err) = in_child([] {
    Tensor t = zeros({100}, TensorOptions().device(Device(kCUDA, 0)));
    TANDEM_LAUNCH(1, 128, 0, nullptr, write_past_end_kernel)(t.data_ptr<float>(), 100);
    cudaDeviceSynchronize();
  });
  CHECK(status != 0);
  CHECK_THAT(err, Contains("AddressSanitizer"));
  // Not a report: a tensor freed on its stream right after a kernel that
  // reads it was queued (the block is the kernel's until it runs).
  std::tie(status, err) = in_child([] {
    Tensor t = full({1000}, 2.0f, TensorOptions().device(Device(kCUDA, 0)));
    float* out = device_alloc<float>(1000);
    TANDEM_LAUNCH(4, 256, 0, cuda::stream_of(t), add_one_kernel)(t.data_ptr<float>(), out, 1000);
    t = Tensor();
    Tensor u = full({1000}, 5.0f, TensorOptions().device(Device(kCUDA, 0)));  // may take t's block, after the kernel
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
    std::_Exit(to_host(out, 1)[0] == 3.0f ? 0 : 3);
  });
  CHECK(status == 0);
  CHECK(err.find("AddressSanitizer") == std::string::npos);
}

TEST_CASE("a kernel launches on a stream of the current device only", "[sim][streams]") {
  cudaStream_t other = nullptr;
  TANDEM_CUDA_CHECK(cudaSetDevice(1));
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  TANDEM_CUDA_CHECK(cudaSetDevice(0));
  float* out = device_alloc<float>(256);
  TANDEM_LAUNCH(1, 256, 0, other, fill_kernel)(out, 256, 1.0f);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK_THAT(sim::last_error_message(),
             Contains("launch of fill_kernel on a stream of cuda:1 while cuda:0 is current"));
  TANDEM_CUDA_CHECK(cudaStreamDestroy(other));
  TANDEM_CUDA_CHECK(cudaFree(out));
}

// Streams, events and the current device (tandem::cuda), on emulated
// devices, where streams are names and events read the host clock; the
// same API runs on a real GPU (tests/test_gpu_memory.cpp checks it there).
#include <catch2/catch.hpp>
#include <chrono>
#include <set>
#include <thread>

#include "helpers.h"

using namespace tandem;

TEST_CASE("without a GPU, stream and device calls say CUDA is not available", "[streams]") {
  if (cuda::is_available()) return;
  CHECK_THROWS_AS(cuda::current_stream(), DeviceError);
  CHECK_THROWS_WITH(cuda::get_stream_from_pool(), Catch::StartsWith("get_stream_from_pool: CUDA is not available ("));
  CHECK_THROWS_WITH(cuda::set_device(0), Catch::StartsWith("set_device: CUDA is not available ("));
  CHECK_THROWS_WITH(cuda::synchronize(), Catch::StartsWith("synchronize: CUDA is not available ("));
}

TEST_CASE("each device has a default stream and a pool of 32 handed out round robin", "[streams]") {
  if (!cuda::is_available()) return;
  CHECK(cuda::current_stream(0) == cuda::default_stream(0));
  CHECK(cuda::default_stream(0).id() == 0);
  cuda::Stream s = cuda::get_stream_from_pool(0);
  CHECK(s.id() >= 1);
  CHECK(s.id() <= 32);
  CHECK(s.device() == Device("cuda:0"));
  std::set<int> ids;
  for (int i = 0; i < 32; ++i) ids.insert(cuda::get_stream_from_pool(0).id());
  CHECK(ids.size() == 32);  // every pool stream once per round
  CHECK(s.str() == "Stream(device=cuda:0, id=" + std::to_string(s.id()) + ")");
  CHECK(s.query());
  s.synchronize();
}

TEST_CASE("StreamGuard makes a stream and its device current, and restores both", "[streams]") {
  if (cuda::device_count() < 2) return;
  cuda::Stream s1 = cuda::get_stream_from_pool(1);
  CHECK(cuda::current_device() == 0);
  {
    cuda::StreamGuard guard(s1);
    CHECK(cuda::current_stream(1) == s1);
    CHECK(cuda::current_stream() == s1);  // the current device is now cuda:1
    CHECK(cuda::current_device() == 1);
    CHECK(cuda::current_stream(0) == cuda::default_stream(0));
    // The current stream belongs to this thread only.
    std::thread([&] { CHECK(cuda::current_stream(1) == cuda::default_stream(1)); }).join();
  }
  CHECK(cuda::current_stream(1) == cuda::default_stream(1));
  CHECK(cuda::current_device() == 0);
}

TEST_CASE("the current device decides where 'cuda' without an index goes", "[streams]") {
  if (cuda::device_count() < 2) return;
  {
    cuda::DeviceGuard guard(1);
    CHECK(ones({2}, TensorOptions().device("cuda")).device() == Device("cuda:1"));
    CHECK(ones({2}).cuda().device() == Device("cuda:1"));
    CHECK(cuda::current_stream().device() == Device("cuda:1"));
  }
  CHECK(ones({2}).cuda().device() == Device("cuda:0"));
  cuda::set_device(1);
  CHECK(cuda::current_device() == 1);
  cuda::set_device(0);
  int n = cuda::device_count();
  CHECK_THROWS_AS(cuda::set_device(n), DeviceError);
  CHECK_THROWS_WITH(cuda::set_device(n), "set_device: invalid device " + std::to_string(n) + " (there are " +
                                             std::to_string(n) +
                                             " CUDA devices, cuda:0 to cuda:" + std::to_string(n - 1) + ")");
  CHECK_THROWS_AS(cuda::DeviceGuard(-2), DeviceError);
}

TEST_CASE("events record, wait and time work", "[streams]") {
  if (!cuda::is_emulated()) return;  // host-clock timing; tests/test_gpu_memory.cpp times a real GPU
  cuda::Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
  CHECK_FALSE(start.is_recorded());
  CHECK(start.query());  // nothing recorded: nothing to wait for
  CHECK_THROWS_AS(start.elapsed_time(end), ValueError);
  CHECK_THROWS_WITH(start.elapsed_time(end),
                    "elapsed_time: both events must be recorded before measuring the time between them");
  start.record();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  end.record(cuda::current_stream(0));
  end.synchronize();
  CHECK(end.query());
  float ms = start.elapsed_time(end);
  CHECK(ms >= 19.0f);
  CHECK(ms < 5000.0f);
  cuda::Event untimed;
  untimed.record();
  CHECK_THROWS_WITH(start.elapsed_time(untimed),
                    "elapsed_time: both events must be created with timing enabled (Event(/*enable_timing=*/true))");
  // A stream waits for an event, or for another stream.
  cuda::Stream s = cuda::get_stream_from_pool(0);
  s.wait_event(end);
  s.wait_stream(cuda::current_stream(0));
  if (cuda::device_count() > 1) {
    CHECK_THROWS_WITH(
        end.record(cuda::current_stream(1)),
        "Event.record: the event belongs to cuda:0 but the stream is on cuda:1; use one event per device");
  }
}

TEST_CASE("record_stream checks the tensor's device", "[streams]") {
  if (!cuda::is_available()) return;
  cuda::Stream s = cuda::get_stream_from_pool(0);
  Tensor g = ones({4}, TensorOptions().device("cuda:0"));
  g.record_stream(s);  // allowed; on emulated devices there is nothing to wait for
  CHECK_THROWS_AS(ones({4}).record_stream(s), DeviceError);
  CHECK_THROWS_WITH(ones({4}).record_stream(s), "record_stream: the tensor is on cpu but the stream is on cuda:0");
}

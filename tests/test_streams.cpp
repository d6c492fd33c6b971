// Streams, events and the current device (tandem::cuda), on emulated
// devices, where streams are names and events read the host clock; the
// same API runs on a real GPU (tests/test_gpu_memory.cpp checks it there).
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <set>
#include <thread>

#include "helpers.h"
#include "kernels/cuda/allocator.h"
#include "subprocess.h"

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

// ---------------------------------------------------------------- host synchronisations

namespace {
// With caching off (sanitizer runs) every free is a cudaFree, which waits
// and is counted: the exact figures below assume the caching allocator.
bool caching_off() { return cuda::detail::caching_disabled(); }
}  // namespace

TEST_CASE("host synchronisations: reading a value back waits, kernels and device-to-device copies do not",
          "[streams]") {
  if (!cuda::is_available()) {
    CHECK_THROWS_WITH(cuda::host_synchronizations(),
                      Catch::StartsWith("host_synchronizations: CUDA is not available ("));
    return;
  }
  if (caching_off()) return;
  const TensorOptions dev = TensorOptions(kFloat32).device("cuda:0");
  auto syncs = [] { return cuda::host_synchronizations(0); };
  Tensor a = arange(0, 1000, 1, dev);  // made on the device: no upload
  int64_t n = syncs();
  Tensor b = a * 2 + 1;
  Tensor s = b.sum();
  Tensor c = b.clone(), d = b.to(kFloat16).to(kFloat32);
  CHECK(syncs() == n);  // kernels and copies within the device are queued, not waited for
  CHECK(s.item<float>() == 1000000.0f);
  CHECK(syncs() == n + 1);
  Tensor h = b.to(Device(kCPU));
  CHECK(syncs() == n + 2);
  CHECK(h[999].item<float>() == 1999.0f);  // a cpu tensor: no wait
  CHECK(d.to_vector<float>().size() == 1000);
  CHECK(syncs() == n + 3);
  CHECK(cuda::memory_stats(0).at("num_host_syncs") == syncs());
  CHECK(cuda::host_synchronizations() == syncs());  // -1: the current device, cuda:0
  CHECK_THROWS_WITH(cuda::host_synchronizations(cuda::device_count()),
                    Catch::StartsWith("host_synchronizations: invalid device " + std::to_string(cuda::device_count())));
}

TEST_CASE("host synchronisations: a pageable upload waits, a non_blocking one from pinned memory does not",
          "[streams]") {
  if (!cuda::is_available() || caching_off()) return;
  auto syncs = [] { return cuda::host_synchronizations(0); };
  Tensor host = ones({256});
  Tensor pinned = host.pin_memory();
  int64_t n = syncs();
  Tensor g = host.to(Device("cuda:0"));
  CHECK(syncs() == n + 1);  // the pageable buffer may be reused as soon as to() returns
  Tensor p = pinned.to(Device("cuda:0"), /*non_blocking=*/true);
  Tensor p2 = pinned.to(Device("cuda:0"));  // pinned but blocking: waits
  CHECK(syncs() == n + 2);
  CHECK((p + p2 + g).sum().item<float>() == 768.0f);
  CHECK(syncs() == n + 3);
}

TEST_CASE("host synchronisations: synchronize(), Stream and Event synchronize() count one each", "[streams]") {
  if (!cuda::is_available() || caching_off()) return;
  auto syncs = [] { return cuda::host_synchronizations(0); };
  int64_t n = syncs();
  cuda::synchronize(0);
  CHECK(syncs() == n + 1);
  cuda::get_stream_from_pool(0).synchronize();
  CHECK(syncs() == n + 2);
  cuda::Event e;
  e.synchronize();  // never recorded: nothing to wait for
  CHECK(syncs() == n + 2);
  e.record(cuda::current_stream(0));
  e.synchronize();
  CHECK(syncs() == n + 3);
  CHECK(e.query());  // asks, does not wait
  CHECK(syncs() == n + 3);
  cuda::Event t0(/*enable_timing=*/true), t1(/*enable_timing=*/true);
  t0.record();
  t1.record();
  CHECK(syncs() == n + 3);
  CHECK(t0.elapsed_time(t1) >= 0.0f);  // waits for its end point
  CHECK(syncs() == n + 4);
}

TEST_CASE("host synchronisations: index_select, gather, scatter_add and embedding check their indices without a wait",
          "[streams]") {
  if (!cuda::is_available() || caching_off()) return;
  // Each checks its indices on the device and records a bad one for the
  // next wait (kernels/cuda/device_check.h); an emulated device the same.
  const Device dev("cuda:0");
  auto syncs = [] { return cuda::host_synchronizations(0); };
  Tensor t = arange(0, 12, 1, TensorOptions(kFloat32).device(dev)).view({3, 4});
  Tensor idx = arange(0, 3, 1, TensorOptions(kInt64).device(dev));
  Tensor idx2 = zeros({3, 4}, TensorOptions(kInt64).device(dev));
  Tensor warm = gather(t, 0, idx2);  // the device's first check makes its error record (a GPU: one wait, once)
  int64_t n = syncs();
  Tensor r1 = index_select(t, 0, idx);
  Tensor r2 = gather(t, 0, idx2);
  Tensor r3 = scatter_add(t, 0, idx2, t);
  Tensor r4 = embedding(t, idx);
  Tensor r5 = detail::embedding_backward(t, idx, 4, std::nullopt, false);
  Tensor r6 = nn::functional::cross_entropy(t, idx);
  CHECK(syncs() == n);
  CHECK((r4 - t).abs().sum().item<float>() == 0.0f);
  CHECK(syncs() == n + 1);
  CHECK(r6.item<float>() > 0.0f);
}

TEST_CASE("a bad index found on a cuda device is reported at the next wait, once, and the device goes on",
          "[streams][errors]") {
  if (!cuda::is_available()) return;
  const Device dev("cuda:0");
  const std::string gather_error = "gather(): index 7 is out of bounds for dimension 0 with size 3";
  const std::string note = " [found by a kernel on cuda:0, reported at the next wait for the device: ";
  const std::string hint = "; set TANDEM_CUDA_SYNC_CHECKS=1 to report it at the op that made it]";
  Tensor t = arange(0, 12, 1, TensorOptions(kFloat32).device(dev)).view({3, 4});
  Tensor bad = full({1, 4}, 7, TensorOptions(kInt64).device(dev));
  Tensor good = zeros({1, 4}, TensorOptions(kInt64).device(dev));

  // A query reports only once it answers done (a GPU's may answer not yet).
  auto until_done = [](const std::function<bool()>& query) {
    while (!query()) {
    }
  };

  // Nothing is thrown at the op, nor by other ops queued after it.
  Tensor g;
  REQUIRE_NOTHROW(g = gather(t, 0, bad));
  Tensor later = (g * 2 + t.sum()).sum();
  CHECK_THROWS_WITH(later.item<float>(),
                    gather_error + note + "a blocking copy (.item(), .cpu(), .to(), to_vector)" + hint);
  // Reported once: the next wait finds nothing, and the device works.
  CHECK(gather(t, 0, good).sum().item<float>() == 6.0f);

  // Each kind of wait reports it, in the op's words.
  Tensor s = t.scatter_add(1, full({3, 1}, -2, TensorOptions(kInt64).device(dev)), t);
  CHECK_THROWS_WITH(cuda::synchronize(0), "scatter_add(): index -2 is out of bounds for dimension 1 with size 4" +
                                              note + "cuda::synchronize()" + hint);
  index_select(t, 1, full({2}, 4, TensorOptions(kInt32).device(dev)));
  CHECK_THROWS_WITH(
      cuda::current_stream(0).synchronize(),
      "index_select(): index 4 is out of bounds for dimension 1 with size 4" + note + "Stream::synchronize()" + hint);
  embedding(t, full({2}, 3, TensorOptions(kInt64).device(dev)));
  cuda::Event e;
  e.record(cuda::current_stream(0));
  CHECK_THROWS_WITH(e.synchronize(),
                    "embedding(): index out of range in self (index 3 of a table of 3 rows, num_embeddings; valid "
                    "indices are 0 to 2)" +
                        note + "Event::synchronize()" + hint);
  nn::functional::cross_entropy(t, full({3}, 4, TensorOptions(kInt64).device(dev)));
  cuda::Event done;
  done.record(cuda::current_stream(0));
  CHECK_THROWS_WITH(until_done([&] { return done.query(); }),
                    Catch::StartsWith("Target 4 is out of bounds. (cross_entropy: class indices must "
                                      "lie in [0, 4) for an input with 4 classes, or equal "
                                      "ignore_index=-100)" +
                                      note + "Event::query()"));
  CHECK(done.query());  // reported: nothing left
  gather(t, 0, bad);
  CHECK_THROWS_WITH(until_done([] { return cuda::current_stream(0).query(); }),
                    Catch::Contains(note + "Stream::query()"));

  // Two bad ops before a wait: the first is reported, the second is lost
  // with it (the record holds one), and the wait after finds nothing.
  gather(t, 0, bad);
  index_select(t, 0, full({1}, 9, TensorOptions(kInt64).device(dev)));
  CHECK_THROWS_WITH(t.cpu(), Catch::StartsWith(gather_error + note));
  CHECK_NOTHROW(t.cpu());
  // A device's error stays with it: a wait on another device finds nothing.
  if (cuda::device_count() >= 2) {
    Tensor t1 = t.to(Device("cuda:1"));
    gather(t, 0, bad);
    CHECK_NOTHROW(t1.sum().item<float>());
    CHECK_THROWS_WITH(t.cpu(), Catch::StartsWith(gather_error + note));
  }
}

// The child of the next test, run with TANDEM_CUDA_SYNC_CHECKS set (a file's
// filter, [#test_streams], runs hidden tests too: without it, nothing).
TEST_CASE("TANDEM_CUDA_SYNC_CHECKS in a child process", "[.][sync-checks-child]") {
  const char* set = std::getenv("TANDEM_CUDA_SYNC_CHECKS");
  if (set == nullptr || !cuda::is_available()) return;
  const std::string value = set;
  const Device dev("cuda:0");
  Tensor t = arange(0, 12, 1, TensorOptions(kFloat32).device(dev)).view({3, 4});
  Tensor bad = full({1, 4}, 7, TensorOptions(kInt64).device(dev));
  if (value == "1") {
    Tensor warm = gather(t, 0, zeros({1, 4}, TensorOptions(kInt64).device(dev)));
    const int64_t n = cuda::host_synchronizations(0);
    CHECK_THROWS_WITH(gather(t, 0, bad),
                      "gather(): index 7 is out of bounds for dimension 0 with size 3 [found by a "
                      "kernel on cuda:0, reported at the op: TANDEM_CUDA_SYNC_CHECKS=1]");
    Tensor g = gather(t, 0, zeros({1, 4}, TensorOptions(kInt64).device(dev)));
    // A GPU waits for each checked launch; an emulated device has nothing to wait for.
    CHECK(cuda::host_synchronizations(0) == n + (cuda::is_emulated() ? 0 : 2));
    CHECK_NOTHROW(t.cpu());
  } else {
    CHECK_THROWS_WITH(gather(t, 0, bad), "TANDEM_CUDA_SYNC_CHECKS must be 0 or 1, got '" + value + "'");
  }
}

TEST_CASE("TANDEM_CUDA_SYNC_CHECKS=1 reports a bad index at the op; another value is refused", "[streams][errors]") {
  if (!cuda::is_available()) return;
  for (const char* value : {"1", "yes"}) {
    INFO("TANDEM_CUDA_SYNC_CHECKS=" << value);
    test::Result r = test::run("/proc/self/exe", {"[sync-checks-child]"},
                               test::with_env({std::string("TANDEM_CUDA_SYNC_CHECKS=") + value}));
    INFO(r);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("All tests passed") != std::string::npos);
  }
}

TEST_CASE("host synchronisations are counted per device; a copy between two waits for both", "[streams]") {
  if (cuda::device_count() < 2 || caching_off()) return;
  Tensor a = ones({64}, TensorOptions().device("cuda:0"));
  int64_t n0 = cuda::host_synchronizations(0), n1 = cuda::host_synchronizations(1);
  a.sum().item<float>();
  CHECK(cuda::host_synchronizations(0) == n0 + 1);
  CHECK(cuda::host_synchronizations(1) == n1);
  Tensor b = a.to(Device("cuda:1"));
  CHECK(cuda::host_synchronizations(0) == n0 + 2);
  CHECK(cuda::host_synchronizations(1) == n1 + 1);
  cuda::synchronize(1);
  CHECK(cuda::host_synchronizations(1) == n1 + 2);
  CHECK(cuda::host_synchronizations(0) == n0 + 2);
}

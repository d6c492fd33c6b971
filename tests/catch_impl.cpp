// Catch2's implementation, compiled once for every test binary, and the run
// their main() calls (catch_main.cpp, with --gpu-only for the GPU-only test
// files).
#define CATCH_CONFIG_RUNNER
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <exception>

#include "tensor/ops/cuda.h"

namespace {

std::atomic<bool> g_unreported{false};

// A kernel's error on a cuda device is reported at the next wait
// (kernels/cuda/device_check.h). A test that provokes one and never waits
// would leave it to fail whichever test waits next: after each test case,
// any such error is taken, printed, and fails the run.
struct UnreportedDeviceErrors : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    if (!tandem::cuda::is_available()) return;
    for (int d = 0; d < tandem::cuda::device_count(); ++d) {
      try {
        tandem::cuda::synchronize(d);  // runs what is queued (a simulated device's streams are lazy) and reports
      } catch (const std::exception& e) {
        std::fprintf(stderr, "test case \"%s\" left a device error unreported (no wait after it): %s\n",
                     stats.testInfo.name.c_str(), e.what());
        g_unreported = true;
      }
    }
  }
};
CATCH_REGISTER_LISTENER(UnreportedDeviceErrors)

}  // namespace

int run_catch_session(int argc, char** argv) {
  const int rc = Catch::Session().run(argc, argv);
  return rc != 0 ? rc : g_unreported ? 1 : 0;
}

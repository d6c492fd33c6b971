// main() for GPU-only test binaries: exit code 77 (meson's SKIP) when there
// is no real GPU (none present, or the cuda devices are emulated). Catch2's
// implementation: catch_impl.cpp.
#include <cstdio>

#include "tensor/ops/cuda.h"

int run_catch_session(int argc, char** argv);  // catch_impl.cpp

int main(int argc, char** argv) {
  if (!tandem::cuda::is_available() || tandem::cuda::is_emulated()) {
    std::printf("skipped: no real GPU (%s)\n",
                tandem::cuda::is_emulated() ? "cuda devices are emulated" : "cuda::is_available() is false");
    return 77;
  }
  return run_catch_session(argc, argv);
}

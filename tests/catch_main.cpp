// main() for the test binaries; Catch2 itself is catch_impl.cpp.
//
// --gpu-only (first argument; tests/meson.build passes it to the GPU-only
// test files' runs): exit code 77, meson's SKIP, when there is no real GPU
// (none present, or the cuda devices are emulated), instead of running.
#include <cstdio>
#include <cstring>

#include "tensor/ops/cuda.h"

int run_catch_session(int argc, char** argv);  // catch_impl.cpp

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--gpu-only") == 0) {
    if (!tandem::cuda::is_available() || tandem::cuda::is_emulated()) {
      std::printf("skipped: no real GPU (%s)\n",
                  tandem::cuda::is_emulated() ? "cuda devices are emulated" : "cuda::is_available() is false");
      return 77;
    }
    argv[1] = argv[0];  // Catch2 sees the program name, then the rest
    return run_catch_session(argc - 1, argv + 1);
  }
  return run_catch_session(argc, argv);
}

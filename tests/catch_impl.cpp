// Catch2's implementation, compiled once for every test binary, and the run
// their main() calls (catch_main.cpp, with --gpu-only for the GPU-only test
// files).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }

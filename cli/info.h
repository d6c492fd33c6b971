// tandem info: the build (version, CUDA libraries), the CPU and every CUDA
// device, emulated ones marked as such.
#pragma once

namespace tandem::cli {

int run_info();

}  // namespace tandem::cli

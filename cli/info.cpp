// tandem info: what this build of Tandem is and what it can run on.
#include "cli/info.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "cli/common.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/versions.h"
#include "tandem/version.h"
#include "tensor/ops/cuda.h"
#include "tensor/ops/parallel.h"

#if TANDEM_WITH_OPENBLAS
#include <cblas.h>
#endif

namespace tandem::cli {

namespace {

// 13000 -> "13.0"; cuBLAS and cuDNN numbers -> "13.1.0", "9.19.0".
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
// cuDNN 8 counts major * 1000 (8907 = 8.9.7), cuDNN 9 and cuBLAS major * 10000.
std::string library_version(int v, int major_unit) {
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / 100) + "." + std::to_string(v % 100);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

}  // namespace

int run_info() {
  std::printf("Tandem %s\n", version());
  std::printf("build        %s\n", *build_features() ? build_features() : "cpu only");
  cuda::detail::Versions v = cuda::detail::versions();
  if (!cuda::is_built()) {
    std::printf("CUDA         built without CUDA\n");
  } else {
    std::printf("CUDA         runtime %s, driver %s, cuBLAS %s, cuDNN %s\n", cuda_version(v.runtime).c_str(),
                v.driver > 0 ? cuda_version(v.driver).c_str() : "none", library_version(v.cublas, 10000).c_str(),
                v.cudnn > 0 ? library_version(v.cudnn, v.cudnn >= 90000 ? 10000 : 1000).c_str()
                            : "not built in (convolution: im2col + cuBLAS)");
  }
  std::printf("CPU          %s, %u hardware threads; Tandem's ops use %d thread%s (tandem train picks per model)\n",
              cpu_model().c_str(), std::thread::hardware_concurrency(), get_num_threads(),
              get_num_threads() == 1 ? "" : "s");
#if TANDEM_WITH_OPENBLAS
  std::printf("BLAS         %s\n", openblas_get_config());
  if (std::string advice = blas_note(); !advice.empty()) std::printf("             note: %s\n", advice.c_str());
#else
  std::printf("BLAS         none (Tandem's own GEMM)\n");
#endif
  int n = cuda::device_count();
  if (n == 0) {
    std::printf("devices      cpu only: %s\n", cuda::detail::unavailable_reason().c_str());
    return 0;
  }
  std::printf("devices      %d CUDA device%s%s\n", n, n == 1 ? "" : "s",
              cuda::is_emulated() ? ", EMULATED (TANDEM_EMULATE_CUDA): host memory and the CPU kernels" : "");
  for (int i = 0; i < n; ++i) {
    cuda::DeviceProperties p = cuda::get_device_properties(i);
    if (p.emulated) {
      std::printf("  cuda:%d  %s, %s (TANDEM_EMULATE_CUDA_MEMORY)\n", i, p.name.c_str(),
                  p.total_memory > 0 ? bytes(static_cast<double>(p.total_memory)).c_str() : "memory unlimited");
    } else {
      std::printf("  cuda:%d  %s, %s, compute capability %d.%d, %d multiprocessors\n", i, p.name.c_str(),
                  bytes(static_cast<double>(p.total_memory)).c_str(), p.major, p.minor, p.multi_processor_count);
    }
  }
  return 0;
}

}  // namespace tandem::cli

// The version query of the linked library.
#include "tandem/version.h"

#include <string>
#include <utility>

namespace tandem {

const char* version() { return TANDEM_VERSION_STRING; }

const char* build_features() {
  static const std::string features = [] {
    std::string s;
    for (auto [on, name] : {std::pair{TANDEM_WITH_CUDA, TANDEM_CUDA_SIMULATED ? "cuda-simulated" : "cuda"},
                            std::pair{TANDEM_WITH_CUDNN, "cudnn"}, std::pair{TANDEM_WITH_OPENBLAS, "openblas"},
                            std::pair{TANDEM_WITH_ZLIB, "zlib"}})
      if (on) s += (s.empty() ? "" : ",") + std::string(name);
    return s;
  }();
  return features.c_str();
}

}  // namespace tandem

// The version query of the linked library.
#include "tandem/version.h"

namespace tandem {

const char* version() { return TANDEM_VERSION_STRING; }

const char* build_features() {
  return TANDEM_WITH_CUDA ? (TANDEM_WITH_OPENBLAS ? "cuda,openblas" : "cuda")
                          : (TANDEM_WITH_OPENBLAS ? "openblas" : "");
}

}  // namespace tandem

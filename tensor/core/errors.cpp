// Out-of-line pieces of the error machinery.
#include "tensor/core/errors.h"

namespace tandem::detail {

void throw_internal(const char* cond, const char* file, int line, const std::string& msg) {
  throw InternalError(str_cat("internal assert failed: ", cond, " at ", file, ":", line, msg.empty() ? "" : ": ", msg,
                              "\nThis is a bug in Tandem; please report it."));
}

}  // namespace tandem::detail

// Out-of-line pieces of the error machinery.
#include "tensor/core/errors.h"

#include <cxxabi.h>

#include <cstdlib>

namespace tandem::detail {

void throw_internal(const char* cond, const char* file, int line, const std::string& msg) {
  throw InternalError(str_cat("internal assert failed: ", cond, " at ", file, ":", line, msg.empty() ? "" : ": ", msg,
                              "\nThis is a bug in Tandem; please report it."));
}

std::string demangle(const std::type_info& type) {
  int status = 0;
  char* raw = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && raw != nullptr ? raw : type.name();
  std::free(raw);
  return name;
}

}  // namespace tandem::detail

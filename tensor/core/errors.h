// The error hierarchy (rooted at tandem::Error) and the TANDEM_CHECK macros.
// User mistakes throw a typed Error with an expected-versus-got message built
// only on failure; broken invariants throw through TANDEM_INTERNAL_ASSERT.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <typeinfo>

namespace tandem {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class DeviceError : public Error {
  using Error::Error;
};
class DtypeError : public Error {
  using Error::Error;
};
class ShapeError : public Error {
  using Error::Error;
};
class IndexError : public Error {
  using Error::Error;
};
class ValueError : public Error {
  using Error::Error;
};
class OutOfMemoryError : public Error {
  using Error::Error;
};
class NotImplementedError : public Error {
  using Error::Error;
};
class CudaError : public Error {
  using Error::Error;
};
// A name that is not there: a state-dict key, a module or parameter name.
class KeyError : public Error {
  using Error::Error;
};
// A file that cannot be read or written as what it claims to be: truncated,
// corrupt, or a header that lies about its contents.
class SerializationError : public Error {
  using Error::Error;
};
// A collective or a rendezvous that failed between processes: a peer that
// died, stalled or never came, a store that timed out, a mismatch between
// ranks (tandem::distributed).
class DistributedError : public Error {
  using Error::Error;
};
class InternalError : public Error {
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string str_cat(const Args&... args) {
  if constexpr (sizeof...(args) == 0) {
    return {};
  } else {
    std::ostringstream ss;
    (ss << ... << args);
    return ss.str();
  }
}
[[noreturn]] void throw_internal(const char* cond, const char* file, int line, const std::string& msg);
// The C++ name of a type ("tandem::ValueError", "std::out_of_range"), for messages.
std::string demangle(const std::type_info& type);
}  // namespace detail

}  // namespace tandem

// TANDEM_CHECK(cond, ErrorType, message parts...): the parts are streamed
// together only when cond is false.
#define TANDEM_CHECK(cond, ErrorType, ...)                               \
  do {                                                                   \
    if (!(cond)) [[unlikely]] {                                          \
      throw ::tandem::ErrorType(::tandem::detail::str_cat(__VA_ARGS__)); \
    }                                                                    \
  } while (0)

#define TANDEM_INTERNAL_ASSERT(cond, ...)                                                                  \
  do {                                                                                                     \
    if (!(cond)) [[unlikely]] {                                                                            \
      ::tandem::detail::throw_internal(#cond, __FILE__, __LINE__, ::tandem::detail::str_cat(__VA_ARGS__)); \
    }                                                                                                      \
  } while (0)

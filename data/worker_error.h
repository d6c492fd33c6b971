// An exception thrown while a loader thread built a batch, made ready to be
// rethrown in the training loop with where it happened.
#pragma once

#include <exception>
#include <string>

namespace tandem::data::detail {

// An exception of the original's type (each of Tandem's error types;
// OutOfMemoryError for std::bad_alloc; tandem::Error for anything else)
// whose message is `context`, the original's C++ type and its message, with
// the original nested (std::rethrow_if_nested).
std::exception_ptr with_context(const std::exception_ptr& original, const std::string& context);

}  // namespace tandem::data::detail

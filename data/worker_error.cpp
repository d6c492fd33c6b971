// Rethrowing a loader thread's exception with its context (worker_error.h).
#include "data/worker_error.h"

#include <new>

#include "tensor/core/errors.h"

namespace tandem::data::detail {

namespace {

[[noreturn]] void rethrow_with_context(const std::exception_ptr& original, const std::string& context) {
  auto msg = [&](const std::exception& e) {
    return context + " " + tandem::detail::demangle(typeid(e)) + ": " + e.what();
  };
  try {
    std::rethrow_exception(original);
  } catch (const DeviceError& e) {
    std::throw_with_nested(DeviceError(msg(e)));
  } catch (const DtypeError& e) {
    std::throw_with_nested(DtypeError(msg(e)));
  } catch (const ShapeError& e) {
    std::throw_with_nested(ShapeError(msg(e)));
  } catch (const IndexError& e) {
    std::throw_with_nested(IndexError(msg(e)));
  } catch (const ValueError& e) {
    std::throw_with_nested(ValueError(msg(e)));
  } catch (const OutOfMemoryError& e) {
    std::throw_with_nested(OutOfMemoryError(msg(e)));
  } catch (const NotImplementedError& e) {
    std::throw_with_nested(NotImplementedError(msg(e)));
  } catch (const CudaError& e) {
    std::throw_with_nested(CudaError(msg(e)));
  } catch (const KeyError& e) {
    std::throw_with_nested(KeyError(msg(e)));
  } catch (const SerializationError& e) {
    std::throw_with_nested(SerializationError(msg(e)));
  } catch (const InternalError& e) {
    std::throw_with_nested(InternalError(msg(e)));
  } catch (const std::bad_alloc& e) {
    std::throw_with_nested(OutOfMemoryError(msg(e)));
  } catch (const std::exception& e) {
    std::throw_with_nested(Error(msg(e)));
  } catch (...) {
    std::throw_with_nested(Error(context + " an exception that is not a std::exception"));
  }
}

}  // namespace

std::exception_ptr with_context(const std::exception_ptr& original, const std::string& context) {
  try {
    rethrow_with_context(original, context);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace tandem::data::detail

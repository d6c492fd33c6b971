// The same-device rule and its message.
#include "tensor/ops/checks.h"

#include <string>

namespace tandem {

void check_defined(const char* op, std::initializer_list<NamedTensor> args) {
  for (const auto& a : args)
    TANDEM_CHECK(a.tensor.defined(), ValueError, op, ": argument '", a.name,
                 "' is an undefined tensor (a default-constructed Tensor)");
}

namespace {
[[noreturn]] void throw_mismatch(const char* op, const std::string& first_name, const Tensor& first,
                                 const std::string& bad_name, const Tensor& bad, std::string_view fix = {}) {
  std::string d0 = first.device().str(), d1 = bad.device().str();
  std::string message = detail::str_cat(
      "Expected all tensors to be on the same device, but found at least two devices, ", d0, " and ", d1,
      "! (when checking argument '", bad_name, "' of ", op, ")\n", "  ", first_name, " is on ", d0, ": ",
      first.origin().describe(), "\n", "  ", bad_name, " is on ", d1, ": ", bad.origin().describe(), "\n");
  const char* label = bad.origin().label;
  std::string_view kind = label == nullptr ? "" : std::string_view(label);
  kind = kind.starts_with("parameter '") ? "parameter" : kind.starts_with("buffer '") ? "buffer" : "";
  if (!fix.empty())
    message += fix;
  else if (!kind.empty())
    // Reassigning a module's tensor would leave the module's own copy behind.
    message += detail::str_cat("Tandem never moves tensors between devices by itself. '", bad_name, "' is a module's ",
                               kind, ": move the module that holds it, e.g. module->to(", first_name,
                               ".device()) (for a loss with class weights, the loss module too), and move each "
                               "batch with .to(device).");
  else
    message += detail::str_cat("Tandem never moves tensors between devices by itself. Move one of them first, e.g. ",
                               bad_name, " = ", bad_name, ".to(", first_name,
                               ".device()), or create both on the same device (for a model, "
                               "call model->to(device) and move each batch with .to(device)).");
  throw DeviceError(message);
}
}  // namespace

void check_same_device(const char* op, std::initializer_list<NamedTensor> args, std::string_view fix) {
  const NamedTensor* first = nullptr;
  for (const auto& a : args) {
    if (!a.tensor.defined()) continue;
    if (first == nullptr) {
      first = &a;
    } else if (a.tensor.device() != first->tensor.device()) {
      throw_mismatch(op, first->name, first->tensor, a.name, a.tensor, fix);
    }
  }
}

void check_same_device(const char* op, const char* list_name, const std::vector<Tensor>& tensors) {
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].device() != tensors[0].device()) {
      throw_mismatch(op, detail::str_cat(list_name, "[0]"), tensors[0], detail::str_cat(list_name, "[", i, "]"),
                     tensors[i]);
    }
  }
}

const char* torch_cpp_type_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::Float32: return "float";
    case Dtype::Float64: return "double";
    case Dtype::Float16: return "c10::Half";
    case Dtype::BFloat16: return "c10::BFloat16";
    case Dtype::Int64: return "long int";
    case Dtype::Int32: return "int";
    case Dtype::UInt8: return "unsigned char";
    case Dtype::Bool: return "bool";
  }
  return "?";
}

}  // namespace tandem

// nn::Sequential and nn::ModuleList.
#include "nn/modules/container.h"

namespace tandem::nn {

void SequentialImpl::add(const std::string& name, std::shared_ptr<Module> module,
                         std::function<Tensor(const Tensor&)> forward) {
  register_module(name, module);
  entries_.push_back({std::move(module), std::move(forward)});
}

Tensor SequentialImpl::forward(const Tensor& input) {
  TANDEM_CHECK(!entries_.empty(), ValueError, "Cannot call forward() on an empty Sequential");
  Tensor x = input;
  for (const auto& entry : entries_) x = entry.forward(x);
  return x;
}

// Its forward calls each module through a typed function made at push_back,
// which a swap behind its back would leave calling the old module (libtorch's
// Sequential has that bug): refused instead.
void SequentialImpl::before_replace(const std::string& name) {
  throw ValueError(detail::str_cat("Sequential can't replace_module('", name,
                                   "'): its forward() would still call the old module. Build a new Sequential with "
                                   "the new module instead"));
}

std::shared_ptr<Module> SequentialImpl::operator[](size_t index) const {
  TANDEM_CHECK(index < entries_.size(), IndexError, "Index ", index, " is out of range for a Sequential of size ",
               entries_.size());
  return entries_[index].module;
}

void ModuleListImpl::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleListImpl::operator[](size_t index) const {
  TANDEM_CHECK(index < modules_.size(), IndexError, "Index ", index, " is out of range for a ModuleList of size ",
               modules_.size());
  return modules_[index];
}

}  // namespace tandem::nn

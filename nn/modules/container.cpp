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

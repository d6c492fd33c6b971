// Containers: nn::Sequential (modules called in order, each taking and
// returning one tensor) and nn::ModuleList (a registered list, no forward).
// Children are named "0", "1", ... as in PyTorch.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace tandem::nn {

class SequentialImpl : public Module {
 public:
  SequentialImpl() = default;
  // nn::Sequential(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10))
  template <typename... Modules>
  explicit SequentialImpl(Modules&&... modules) {
    (push_back(std::forward<Modules>(modules)), ...);
  }

  // A module holder or a shared_ptr to a module with Tensor forward(const Tensor&).
  template <typename M>
  void push_back(M&& module) {
    push_back(std::to_string(entries_.size()), std::forward<M>(module));
  }
  template <typename M>
  void push_back(const std::string& name, M&& module) {
    auto ptr = as_shared(std::forward<M>(module));
    using Impl = typename decltype(ptr)::element_type;
    add(name, ptr, [raw = ptr.get()](const Tensor& x) { return static_cast<Impl*>(raw)->forward(x); });
  }

  Tensor forward(const Tensor& input);
  size_t size() const { return entries_.size(); }
  bool is_empty() const { return entries_.empty(); }
  std::shared_ptr<Module> operator[](size_t index) const;
  std::shared_ptr<Module> ptr(size_t index) const { return (*this)[index]; }
  template <typename T>
  std::shared_ptr<T> ptr(size_t index) const {
    return std::dynamic_pointer_cast<T>((*this)[index]);
  }

 private:
  template <typename T>
  static std::shared_ptr<T> as_shared(std::shared_ptr<T> module) {
    return module;
  }
  template <typename T>
  static std::shared_ptr<T> as_shared(const ModuleHolder<T>& holder) {
    return holder.ptr();
  }
  void add(const std::string& name, std::shared_ptr<Module> module, std::function<Tensor(const Tensor&)> forward);
  void before_replace(const std::string& name) override;

  struct Entry {
    std::shared_ptr<Module> module;
    std::function<Tensor(const Tensor&)> forward;
  };
  std::vector<Entry> entries_;
};
TANDEM_MODULE(Sequential);

class ModuleListImpl : public Module {
 public:
  ModuleListImpl() = default;
  template <typename... Modules>
  explicit ModuleListImpl(Modules&&... modules) {
    (push_back(std::forward<Modules>(modules)), ...);
  }
  template <typename T>
  void push_back(const ModuleHolder<T>& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }
  void push_back(std::shared_ptr<Module> module);
  template <typename Container>
  void extend(const Container& container) {
    for (const auto& module : container) push_back(module);
  }

  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](size_t index) const;
  std::shared_ptr<Module> ptr(size_t index) const { return (*this)[index]; }
  template <typename T>
  std::shared_ptr<T> ptr(size_t index) const {
    return std::dynamic_pointer_cast<T>((*this)[index]);
  }
  // The module at index as T& (libtorch's at<T>); a wrong type is an error.
  template <typename T>
  T& at(size_t index) const {
    auto p = ptr<T>(index);
    TANDEM_CHECK(p != nullptr, ValueError, "ModuleList::at: module ", index, " is a ", (*this)[index]->name(),
                 ", not the type asked for");
    return *p;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
TANDEM_MODULE(ModuleList);

}  // namespace tandem::nn

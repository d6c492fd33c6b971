// nn::Module: the base of every layer and model, in libtorch's shape. A
// module owns named parameters, buffers and submodules; it moves with to(),
// switches between train() and eval(), and gives its state as a dotted-name
// dict (state_dict / load_state_dict) for checkpoints.
//
//   struct NetImpl : nn::Module {
//     NetImpl() : fc1(register_module("fc1", nn::Linear(784, 256))) {}
//     Tensor forward(const Tensor& x) { return fc1(x).relu(); }
//     nn::Linear fc1;
//   };
//   TANDEM_MODULE(Net);
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <source_location>
#include <string>
#include <unordered_set>
#include <vector>

#include "tensor/core/ordered_dict.h"
#include "tensor/core/tensor.h"

namespace tandem::nn {

template <typename Contained>
class ModuleHolder;

// What load_state_dict(strict=false) found (PyTorch's _IncompatibleKeys).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module();
  explicit Module(std::string name);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The type's name as printed: "Linear" for nn::LinearImpl, "Net" for a
  // user's NetImpl or Net (libtorch strips "Impl" the same way).
  const std::string& name() const;

  // ---- registration: the name is the attribute name in state dicts
  // A parameter is a leaf that requires grad (unless requires_grad is false);
  // an undefined tensor registers an absent one (Linear without bias).
  Tensor& register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  // A buffer is state that is not trained (BatchNorm's running statistics):
  // it moves with to() and, when persistent, is saved in the state dict.
  Tensor& register_buffer(std::string name, Tensor tensor, bool persistent = true);
  template <typename ModuleType>
  std::shared_ptr<ModuleType> register_module(std::string name, std::shared_ptr<ModuleType> module) {
    register_child(std::move(name), module);
    return module;
  }
  template <typename ModuleType>
  std::shared_ptr<ModuleType> register_module(std::string name, ModuleHolder<ModuleType> holder) {
    return register_module(std::move(name), holder.ptr());
  }
  // Replaces a registered submodule (same name), as libtorch's replace_module.
  template <typename ModuleType>
  std::shared_ptr<ModuleType> replace_module(const std::string& name, std::shared_ptr<ModuleType> module) {
    replace_child(name, module);
    return module;
  }
  template <typename ModuleType>
  std::shared_ptr<ModuleType> replace_module(const std::string& name, ModuleHolder<ModuleType> holder) {
    return replace_module(name, holder.ptr());
  }

  // ---- what it holds; recursive ones use dotted names ("fc1.weight") in
  // registration order, depth first, as PyTorch's.
  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::string, std::shared_ptr<Module>> named_children() const;
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);
  OrderedDict<std::string, std::shared_ptr<Module>> named_modules(const std::string& name_prefix = "",
                                                                  bool include_self = true);

  // ---- modes
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return is_training_; }

  // ---- moving. Every parameter, buffer and gradient of this module and its
  // submodules moves in place (Tensor::set_data): the tensors keep their
  // identity, so an optimizer built before the move still holds them, as in
  // PyTorch. Optimizer state made by earlier steps does not move (see
  // optim::Optimizer).
  virtual void to(Device device, bool non_blocking = false, std::source_location loc = std::source_location::current());
  virtual void to(Dtype dtype, bool non_blocking = false);
  virtual void to(Device device, Dtype dtype, bool non_blocking = false,
                  std::source_location loc = std::source_location::current());
  void to(const char* device, std::source_location loc = std::source_location::current()) {
    to(Device(device), false, loc);
  }

  // Clears every parameter's gradient: undefined (set_to_none, the default as
  // in PyTorch 2) or zeroed in place.
  virtual void zero_grad(bool set_to_none = true);

  // Calls fn on this module and every submodule, depth first, parents first.
  void apply(const std::function<void(Module&)>& fn);
  void apply(const std::function<void(const std::string&, Module&)>& fn, const std::string& name_prefix = "");

  // ---- state: parameters and persistent buffers by dotted name, the same
  // tensors (not copies), as PyTorch's state_dict().
  OrderedDict<std::string, Tensor> state_dict() const;
  // Copies each value into the tensor of the same name (on that tensor's
  // device, without recording a graph). strict: a missing or unexpected key
  // is an error; a shape mismatch is always one. All problems are reported
  // together, in PyTorch's words, naming the module.
  LoadStateDictResult load_state_dict(const OrderedDict<std::string, Tensor>& state_dict, bool strict = true);

  // ---- printing: PyTorch's layout, one submodule per line
  //   Net(
  //     (fc1): Linear(in_features=784, out_features=256, bias=true)
  //   )
  // A layer overrides pretty_print to show its options.
  virtual void pretty_print(std::ostream& stream) const;
  friend std::ostream& operator<<(std::ostream& stream, const Module& module);

 protected:
  // Called by to() after each tensor moved, for layers that cache something
  // device-specific.
  virtual void on_moved() {}
  // Called by replace_module before submodule `name` is swapped: a container
  // whose forward holds its modules (Sequential) refuses.
  virtual void before_replace(const std::string& name) { (void)name; }

 private:
  void register_child(std::string name, std::shared_ptr<Module> module);
  void replace_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(bool buffers, const std::string& prefix, bool recurse, std::unordered_set<const TensorImpl*>& seen,
               OrderedDict<std::string, Tensor>& out) const;
  void apply_to_tensors(const std::function<Tensor(const Tensor&)>& move, const Origin* moved);
  void label_tensors(const std::string& prefix);
  void pretty_print_recursive(std::ostream& stream, const std::string& indentation) const;

  OrderedDict<std::string, Tensor> parameters_{"parameter"};
  OrderedDict<std::string, Tensor> buffers_{"buffer"};
  std::unordered_set<std::string> non_persistent_buffers_;
  OrderedDict<std::string, std::shared_ptr<Module>> children_{"submodule"};
  bool is_training_ = true;
  mutable std::string name_;
};

std::ostream& operator<<(std::ostream& stream, const Module& module);

// ModuleHolder: the handle a libtorch model uses (`nn::Linear fc(784, 256);
// fc->weight; fc(x)`), a shared_ptr to the Impl with value syntax.
template <typename Contained>
class ModuleHolder {
 public:
  using ContainedType = Contained;

  // An empty holder, to be assigned later (`nn::Linear fc{nullptr};`).
  ModuleHolder(std::nullptr_t) {}                                                // NOLINT(google-explicit-constructor)
  ModuleHolder(std::shared_ptr<Contained> module) : impl_(std::move(module)) {}  // NOLINT
  // Constructs the Impl from the arguments (`nn::Linear(784, 256)`).
  template <typename Head, typename... Tail,
            typename = std::enable_if_t<!(std::is_same_v<std::decay_t<Head>, std::nullptr_t> ||
                                          std::is_same_v<std::decay_t<Head>, std::shared_ptr<Contained>> ||
                                          std::is_base_of_v<ModuleHolder, std::decay_t<Head>>)>>
  explicit ModuleHolder(Head&& head, Tail&&... tail)
      : impl_(std::make_shared<Contained>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}
  // Default-constructs the Impl when it can be (`nn::ReLU relu;`).
  ModuleHolder() requires std::is_default_constructible_v<Contained> : impl_(std::make_shared<Contained>()) {}

  Contained* operator->() { return get(); }
  const Contained* operator->() const { return get(); }
  Contained& operator*() { return *get(); }
  const Contained& operator*() const { return *get(); }
  const std::shared_ptr<Contained>& ptr() const { return impl_; }
  Contained* get() const {
    TANDEM_CHECK(impl_ != nullptr, ValueError,
                 "Accessing an empty ModuleHolder (was it declared with nullptr and "
                 "never assigned?)");
    return impl_.get();
  }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }

  // Indexes the module (Sequential, ModuleList).
  template <typename Arg>
  decltype(auto) operator[](Arg&& arg) const {
    return (*get())[std::forward<Arg>(arg)];
  }

  // Calls the module's forward.
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) {
    return get()->forward(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Contained> impl_;
};

template <typename Contained>
std::ostream& operator<<(std::ostream& stream, const ModuleHolder<Contained>& holder) {
  return stream << *holder;
}

}  // namespace tandem::nn

// TANDEM_MODULE(Linear) declares nn::Linear, the holder of LinearImpl, as
// libtorch's TORCH_MODULE.
#define TANDEM_MODULE(Name)                                     \
  class Name : public ::tandem::nn::ModuleHolder<Name##Impl> {  \
   public:                                                      \
    using ::tandem::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
    Name() = default;                                           \
  }

// nn::Module: registration, traversal, moving, modes, state dicts, printing.
#include "nn/module.h"

#include <unordered_set>

#include "tensor/core/autograd_meta.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/shape_ops.h"

namespace tandem::nn {

namespace {

// "tandem::nn::LinearImpl" → "Linear"; "(anonymous namespace)::NetImpl" → "Net".
std::string demangled_type_name(const std::type_info& type) {
  std::string name = tandem::detail::demangle(type);
  // Drop namespaces (but not those inside template arguments).
  size_t angle = name.find('<');
  size_t colon = name.rfind("::", angle);
  if (colon != std::string::npos) name = name.substr(colon + 2);
  const std::string impl = "Impl";
  if (name.size() > impl.size() && name.compare(name.size() - impl.size(), impl.size(), impl) == 0) {
    name.resize(name.size() - impl.size());
  }
  return name;
}

void check_name(const std::string& name, const char* what) {
  TANDEM_CHECK(!name.empty(), KeyError, what, " name can't be empty");
  TANDEM_CHECK(name.find('.') == std::string::npos, KeyError, what, " name can't contain \".\", got '", name, "'");
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

Module::Module() = default;
Module::Module(std::string name) : name_(std::move(name)) {}

const std::string& Module::name() const {
  if (name_.empty()) name_ = demangled_type_name(typeid(*this));
  return name_;
}

// ---- registration

Tensor& Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_name(name, "parameter");
  TANDEM_CHECK(!buffers_.contains(name) && !children_.contains(name), KeyError, "attribute '", name,
               "' already exists in ", this->name());
  if (tensor.defined()) {
    TANDEM_CHECK(tensor.is_leaf(), ValueError, "Cannot register parameter '", name,
                 "': it is not a leaf tensor (it was computed by ", tensor.grad_fn()->name(),
                 "); register a detached tensor, e.g. tensor.detach()");
    tensor.requires_grad_(requires_grad);
    Origin origin = tensor.origin();
    origin.label = intern_label("parameter '" + name + "'");
    tensor.set_origin(origin);
  }
  return parameters_.insert(std::move(name), std::move(tensor));
}

Tensor& Module::register_buffer(std::string name, Tensor tensor, bool persistent) {
  check_name(name, "buffer");
  TANDEM_CHECK(!parameters_.contains(name) && !children_.contains(name), KeyError, "attribute '", name,
               "' already exists in ", this->name());
  if (tensor.defined()) {
    Origin origin = tensor.origin();
    origin.label = intern_label("buffer '" + name + "'");
    tensor.set_origin(origin);
  }
  if (!persistent) non_persistent_buffers_.insert(name);
  return buffers_.insert(std::move(name), std::move(tensor));
}

void Module::register_child(std::string name, std::shared_ptr<Module> module) {
  check_name(name, "submodule");
  TANDEM_CHECK(module != nullptr, ValueError, "Cannot register an empty submodule '", name, "' in ", this->name());
  TANDEM_CHECK(!parameters_.contains(name) && !buffers_.contains(name), KeyError, "attribute '", name,
               "' already exists in ", this->name());
  TANDEM_CHECK(module.get() != this, ValueError, "A module can't be its own submodule ('", name, "')");
  module->label_tensors(name);
  children_.insert(std::move(name), std::move(module));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> module) {
  TANDEM_CHECK(children_.contains(name), KeyError, "No submodule named '", name, "' in ", this->name(), " to replace");
  TANDEM_CHECK(module != nullptr, ValueError, "Cannot replace submodule '", name, "' with an empty one");
  before_replace(name);
  module->label_tensors(name);
  children_[name] = std::move(module);
}

// Parameters and buffers are labelled with their dotted name from the
// outermost module that registered them, so that a device error names
// "parameter 'fc1.weight'".
void Module::label_tensors(const std::string& prefix) {
  auto label = [&](const char* kind, const std::string& name, const Tensor& t) {
    if (!t.defined()) return;
    Origin origin = t.origin();
    origin.label = intern_label(std::string(kind) + " '" + join(prefix, name) + "'");
    t.set_origin(origin);
  };
  for (const auto& item : named_parameters()) label("parameter", item.first, item.second);
  for (const auto& item : named_buffers()) label("buffer", item.first, item.second);
}

// ---- traversal

// Parameters or buffers of this module, then of its submodules, depth
// first. A tensor reachable under two names (a tied weight, a shared
// submodule) is listed once, under the first, as PyTorch's named_parameters()
// does: an optimizer must not step it twice, nor clip_grad_norm_ count it twice.
void Module::collect(bool buffers, const std::string& prefix, bool recurse, std::unordered_set<const TensorImpl*>& seen,
                     OrderedDict<std::string, Tensor>& out) const {
  for (const auto& item : buffers ? buffers_ : parameters_) {
    if (item.second.defined() && seen.insert(item.second.impl()).second)
      out.insert(join(prefix, item.first), item.second);
  }
  if (!recurse) return;
  for (const auto& child : children_) child.second->collect(buffers, join(prefix, child.first), true, seen, out);
}

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<std::string, Tensor> out("parameter");
  std::unordered_set<const TensorImpl*> seen;
  collect(false, "", recurse, seen, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<std::string, Tensor> out("buffer");
  std::unordered_set<const TensorImpl*> seen;
  collect(true, "", recurse, seen, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

std::vector<std::shared_ptr<Module>> Module::children() const { return children_.values(); }

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_children() const { return children_; }

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_modules(const std::string& name_prefix,
                                                                        bool include_self) {
  OrderedDict<std::string, std::shared_ptr<Module>> out("submodule");
  TANDEM_CHECK(!weak_from_this().expired(), ValueError, "named_modules()/modules() need ", name(),
               " to be owned by a std::shared_ptr (std::make_shared<", name(),
               ">() or a module holder), as in libtorch");
  // A submodule registered twice (shared) is listed once, as in PyTorch.
  std::unordered_set<const Module*> seen{this};
  if (include_self) out.insert(name_prefix, shared_from_this());
  apply(
      [&](const std::string& name, Module& module) {
        if (seen.insert(&module).second) out.insert(name, module.shared_from_this());
      },
      name_prefix);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) {
  return named_modules("", include_self).values();
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (const auto& child : children_) child.second->apply(fn);
}

void Module::apply(const std::function<void(const std::string&, Module&)>& fn, const std::string& name_prefix) {
  fn(name_prefix, *this);
  for (const auto& child : children_) child.second->apply(fn, join(name_prefix, child.first));
}

// ---- modes

void Module::train(bool on) {
  is_training_ = on;
  for (const auto& child : children_) child.second->train(on);
}

// ---- moving

void Module::apply_to_tensors(const std::function<Tensor(const Tensor&)>& move, const Origin* moved) {
  NoGradGuard no_grad;
  auto move_in_place = [&](const Tensor& t) {
    if (!t.defined()) return;
    const char* label = t.origin().label;
    t.set_data(move(t));
    Origin origin = moved != nullptr ? *moved : t.origin();
    origin.label = label;
    t.set_origin(origin);
    const Tensor& grad = t.grad();
    if (grad.defined()) grad.set_data(move(grad));
  };
  for (const auto& item : parameters_) move_in_place(item.second);
  for (const auto& item : buffers_) move_in_place(item.second);
  for (const auto& child : children_) child.second->apply_to_tensors(move, moved);
  on_moved();
}

void Module::to(Device device, bool non_blocking, std::source_location loc) {
  const Origin moved = Origin::moved("Module::to()", loc);
  apply_to_tensors([&](const Tensor& t) { return t.to(device, non_blocking, false, loc); }, &moved);
}

void Module::to(Dtype dtype, bool non_blocking) {
  // As PyTorch: only floating point parameters and buffers change dtype.
  apply_to_tensors([&](const Tensor& t) { return t.is_floating_point() ? t.to(dtype, non_blocking) : t; }, nullptr);
}

void Module::to(Device device, Dtype dtype, bool non_blocking, std::source_location loc) {
  const Origin moved = Origin::moved("Module::to()", loc);
  apply_to_tensors(
      [&](const Tensor& t) {
        return t.is_floating_point() ? t.to(device, dtype, non_blocking, false, loc)
                                     : t.to(device, non_blocking, false, loc);
      },
      &moved);
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    Tensor& grad = p.mutable_grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      grad = Tensor();
    } else {
      if (grad.grad_fn() != nullptr) grad = grad.detach();
      grad.zero_();
    }
  }
}

// ---- state dicts

OrderedDict<std::string, Tensor> Module::state_dict() const {
  OrderedDict<std::string, Tensor> out("key");
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& prefix) {
    for (const auto& item : m.parameters_) {
      if (item.second.defined()) out.insert(join(prefix, item.first), item.second);
    }
    for (const auto& item : m.buffers_) {
      if (item.second.defined() && !m.non_persistent_buffers_.contains(item.first)) {
        out.insert(join(prefix, item.first), item.second);
      }
    }
    for (const auto& child : m.children_) visit(*child.second, join(prefix, child.first));
  };
  visit(*this, "");
  return out;
}

LoadStateDictResult Module::load_state_dict(const OrderedDict<std::string, Tensor>& state_dict, bool strict) {
  OrderedDict<std::string, Tensor> own = this->state_dict();
  LoadStateDictResult result;
  std::vector<std::string> errors;
  for (const auto& item : own) {
    const Tensor* value = state_dict.find(item.first);
    if (value == nullptr) {
      result.missing_keys.push_back(item.first);
      continue;
    }
    TANDEM_CHECK(value->defined(), ValueError, "load_state_dict: the value of '", item.first, "' is undefined");
    if (value->sizes() != item.second.sizes()) {
      errors.push_back(detail::str_cat("size mismatch for ", item.first, ": copying a param with shape ",
                                       shape_str(value->sizes()), " from checkpoint, the shape in current model is ",
                                       shape_str(item.second.sizes()), "."));
    }
  }
  for (const auto& item : state_dict) {
    if (!own.contains(item.first)) result.unexpected_keys.push_back(item.first);
  }
  auto quoted = [](const std::vector<std::string>& keys) {
    std::string s;
    for (size_t i = 0; i < keys.size(); ++i) s += detail::str_cat(i ? ", " : "", "\"", keys[i], "\"");
    return s;
  };
  if (strict) {
    if (!result.unexpected_keys.empty()) {
      errors.insert(errors.begin(),
                    detail::str_cat("Unexpected key(s) in state_dict: ", quoted(result.unexpected_keys), ". "));
    }
    if (!result.missing_keys.empty()) {
      errors.insert(errors.begin(),
                    detail::str_cat("Missing key(s) in state_dict: ", quoted(result.missing_keys), ". "));
    }
  }
  if (!errors.empty()) {
    std::string message = detail::str_cat("Error(s) in loading state_dict for ", name(), ":");
    for (const auto& e : errors) message += "\n\t" + e;
    throw KeyError(message);
  }
  // Only now, with everything checked, copy: a failed load changes nothing.
  NoGradGuard no_grad;
  for (const auto& item : own) {
    if (const Tensor* value = state_dict.find(item.first)) {
      Tensor target = item.second;
      target.copy_(*value);
    }
  }
  return result;
}

// ---- printing

void Module::pretty_print(std::ostream& stream) const { stream << name() << "()"; }

void Module::pretty_print_recursive(std::ostream& stream, const std::string& indentation) const {
  if (children_.empty()) {
    pretty_print(stream);
    return;
  }
  // A module with children prints its name, then one child per line.
  stream << name() << "(\n";
  const std::string next = indentation + "  ";
  for (const auto& child : children_) {
    stream << next << "(" << child.first << "): ";
    child.second->pretty_print_recursive(stream, next);
    stream << "\n";
  }
  stream << indentation << ")";
}

std::ostream& operator<<(std::ostream& stream, const Module& module) {
  module.pretty_print_recursive(stream, "");
  return stream;
}

}  // namespace tandem::nn

// The Optimizer base: parameter groups, zero_grad, the state dict and its
// loading, and the bucketing (by device and dtype) with the checks every
// step runs before its multi-tensor kernels.
#include "optim/optimizer.h"

#include <typeinfo>
#include <unordered_set>

#include "tensor/core/grad_mode.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/factory.h"

namespace tandem::optim {

// ---------------------------------------------------------------- groups

OptimizerParamGroup::OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}

OptimizerParamGroup::OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
    : params_(std::move(params)), options_(std::move(options)) {}

OptimizerParamGroup::OptimizerParamGroup(const OptimizerParamGroup& other)
    : params_(other.params_), options_(other.has_options() ? other.options_->clone() : nullptr), extra_(other.extra_) {}

OptimizerParamGroup& OptimizerParamGroup::operator=(const OptimizerParamGroup& other) {
  if (this != &other) {
    params_ = other.params_;
    options_ = other.has_options() ? other.options_->clone() : nullptr;
    extra_ = other.extra_;
  }
  return *this;
}

OptimizerOptions& OptimizerParamGroup::options() {
  TANDEM_CHECK(options_ != nullptr, ValueError, "this parameter group has no options yet (it gets the optimizer's ",
               "defaults when it is added to an optimizer)");
  return *options_;
}

const OptimizerOptions& OptimizerParamGroup::options() const {
  return const_cast<OptimizerParamGroup*>(this)->options();
}

void OptimizerParamGroup::set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }

// ---------------------------------------------------------------- optimizer

Optimizer::Optimizer(std::vector<OptimizerParamGroup> param_groups, std::unique_ptr<OptimizerOptions> defaults)
    : defaults_(std::move(defaults)) {
  TANDEM_INTERNAL_ASSERT(defaults_ != nullptr, "an optimizer needs default options");
  defaults_->validate();
  size_t count = 0;
  for (const auto& group : param_groups) count += group.params().size();
  TANDEM_CHECK(count > 0, ValueError, "optimizer got an empty parameter list");
  for (const auto& group : param_groups) add_param_group(group);
}

void Optimizer::add_param_group(const OptimizerParamGroup& param_group) {
  OptimizerParamGroup group(param_group);
  if (!group.has_options()) group.set_options(defaults_->clone());
  const OptimizerOptions& options = group.options();
  TANDEM_CHECK(typeid(options) == typeid(*defaults_), ValueError, "a parameter group's options are of another ",
               "optimizer's type than the optimizer's defaults (give each group the options class of its optimizer, ",
               "e.g. SGDOptions for SGD, AdamOptions for Adam)");
  options.validate();
  std::unordered_set<const TensorImpl*> seen;
  for (const Tensor& p : group.params()) {
    TANDEM_CHECK(p.defined(), ValueError, "optimizer can only optimize Tensors, but one of the params is an ",
                 "undefined tensor (a default-constructed Tensor)");
    TANDEM_CHECK(p.is_leaf() || p.retains_grad(), ValueError, "can't optimize a non-leaf Tensor (it was ",
                 "computed by an op that recorded a graph; optimize the leaf it came from, or detach() it and set ",
                 "requires_grad_() on the result)");
    TANDEM_CHECK(seen.insert(p.impl()).second, ValueError,
                 "optimizer contains a parameter group with duplicate parameters (PyTorch warns and would update ",
                 "such a parameter twice a step; pass each parameter once)");
  }
  for (const auto& other : param_groups_)
    for (const Tensor& p : other.params())
      TANDEM_CHECK(seen.count(p.impl()) == 0, ValueError, "some parameters appear in more than one parameter group");
  param_groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    for (Tensor& p : group.params()) {
      Tensor& grad = p.mutable_grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        grad = Tensor();
      } else {
        // PyTorch detaches a gradient with history (create_graph) first.
        if (grad.grad_fn() != nullptr)
          grad.detach_();
        else
          grad.requires_grad_(false);
        grad.zero_();
      }
    }
  }
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  out.reserve(size());
  for (const auto& group : param_groups_) out.insert(out.end(), group.params().begin(), group.params().end());
  return out;
}

size_t Optimizer::size() const {
  size_t n = 0;
  for (const auto& group : param_groups_) n += group.params().size();
  return n;
}

void Optimizer::step_unless_found_inf(const Tensor&, const Tensor&) {
  TANDEM_CHECK(false, NotImplementedError, name(),
               ": step_unless_found_inf: this optimizer does not skip a step on the device (supports_amp_scaling() "
               "is false); amp::GradScaler::step reads the flag and calls step() instead");
}

namespace detail {

void check_amp_args(const char* optimizer, const Tensor& found_inf, const Tensor& grad_scale) {
  TANDEM_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == kFloat32, ValueError, optimizer,
               ": step_unless_found_inf: found_inf must be a one-element float32 tensor");
  TANDEM_CHECK(!grad_scale.defined() || (grad_scale.numel() == 1 && grad_scale.dtype() == kFloat32), ValueError,
               optimizer, ": step_unless_found_inf: grad_scale must be undefined or a one-element float32 tensor");
}

Tensor on_device(const Tensor& t, Device device) { return !t.defined() || t.device() == device ? t : t.to(device); }

}  // namespace detail

Tensor Optimizer::run_closure(const LossClosure& closure) {
  if (!closure) return Tensor();
  EnableGradGuard grad_on;
  return closure();
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict out;
  int64_t index = 0;
  for (const auto& group : param_groups_) {
    OptimizerStateDict::Group saved;
    saved.options = group.options().to_dict();
    for (const auto& item : group.extra()) saved.options.insert_or_assign(item.first, item.second);
    for (const Tensor& p : group.params()) {
      if (auto it = state_.find(p.impl()); it != state_.end()) out.state.emplace(index, it->second->to_dict());
      saved.params.push_back(index++);
    }
    out.param_groups.push_back(std::move(saved));
  }
  return out;
}

std::map<int64_t, std::pair<Tensor, int64_t>> Optimizer::id_map(const OptimizerStateDict& state_dict) const {
  std::map<int64_t, std::pair<Tensor, int64_t>> ids;
  int64_t number = 0;
  for (size_t g = 0; g < state_dict.param_groups.size(); ++g)
    for (size_t i = 0; i < state_dict.param_groups[g].params.size(); ++i)
      ids.emplace(state_dict.param_groups[g].params[i], std::make_pair(param_groups_[g].params()[i], number++));
  return ids;
}

void Optimizer::check_state_dict(const OptimizerStateDict& state_dict) const {
  const auto& saved_groups = state_dict.param_groups;
  TANDEM_CHECK(saved_groups.size() == param_groups_.size(), ValueError,
               "loaded state dict has a different number of parameter groups (", saved_groups.size(), " saved, ",
               param_groups_.size(), " in this ", name(), ")");
  for (size_t g = 0; g < saved_groups.size(); ++g)
    TANDEM_CHECK(saved_groups[g].params.size() == param_groups_[g].params().size(), ValueError,
                 "loaded state dict contains a parameter group that doesn't match the size of optimizer's group ",
                 "(group ", g, ": ", saved_groups[g].params.size(), " parameters saved, ",
                 param_groups_[g].params().size(), " here)");
  for (size_t g = 0; g < saved_groups.size(); ++g)
    for (const auto& item : param_groups_[g].options().to_dict())
      TANDEM_CHECK(saved_groups[g].options.contains(item.first), KeyError, name(), ".load_state_dict: parameter group ",
                   g, " of the state dict has no '", item.first, "' (was it saved from another optimizer?)");
  const auto ids = id_map(state_dict);
  for (const auto& [index, saved] : state_dict.state) {
    auto it = ids.find(index);
    TANDEM_CHECK(it != ids.end(), KeyError, name(), ".load_state_dict: the state dict has state for parameter ", index,
                 ", which none of its parameter groups lists");
    const auto& [param, number] = it->second;
    for (const auto& item : saved) {
      const Tensor& value = item.second;
      TANDEM_CHECK(value.defined(), ValueError, name(), ".load_state_dict: state '", item.first, "' of parameter ",
                   index, " is an undefined tensor");
      // PyTorch would cast it; an integer moment is no moment.
      TANDEM_CHECK(item.first == "step" || !param.is_floating_point() || value.is_floating_point(), DtypeError, name(),
                   ".load_state_dict: state '", item.first, "' of parameter ", index, " is ", value.dtype(),
                   " but the parameter is ", param.dtype(),
                   "; optimizer state is floating point (was the state dict saved from another optimizer?)");
    }
    check_state(saved, param, number);
  }
}

void Optimizer::load_state_dict(const OptimizerStateDict& state_dict) {
  check_state_dict(state_dict);
  const auto& saved_groups = state_dict.param_groups;
  // Nothing below refuses: the new options, extra values and state are
  // built first and take their places at the end.
  std::vector<std::unique_ptr<OptimizerOptions>> options;
  std::vector<OrderedDict<std::string, double>> extras;
  for (size_t g = 0; g < saved_groups.size(); ++g) {
    auto o = param_groups_[g].options().clone();
    const auto keys = o->to_dict();
    OrderedDict<std::string, double> extra("param group value");
    for (const auto& item : saved_groups[g].options) {
      if (keys.contains(item.first))
        o->set(item.first, item.second);
      else
        extra.insert(item.first, item.second);
    }
    options.push_back(std::move(o));
    extras.push_back(std::move(extra));
  }
  const auto ids = id_map(state_dict);
  // Each parameter's group, for where its step count goes.
  std::unordered_map<const TensorImpl*, size_t> group_of;
  for (size_t g = 0; g < param_groups_.size(); ++g)
    for (const Tensor& p : param_groups_[g].params()) group_of[p.impl()] = g;
  std::unordered_map<const TensorImpl*, std::unique_ptr<OptimizerParamState>> state;
  {
    NoGradGuard no_grad;
    for (const auto& [index, saved] : state_dict.state) {
      const auto& [param, number] = ids.at(index);
      OrderedDict<std::string, Tensor> moved;
      for (const auto& item : saved) {
        const Tensor& value = item.second;
        Tensor copy;
        if (item.first == "step") {
          copy = steps_on_device(*options[group_of.at(param.impl())])
                     ? value.to(param.device(), kFloat32, false, /*copy=*/true).reshape({})
                     : value.clone();
        } else {
          // A copy (never the caller's tensor), contiguous, on the
          // parameter's device and, when floating, of its dtype.
          const Dtype dtype = param.is_floating_point() && value.is_floating_point() ? param.dtype() : value.dtype();
          copy = value.to(param.device(), dtype, false, /*copy=*/true).contiguous();
        }
        detail::label_state(copy, name(), "loaded by load_state_dict()");
        moved.insert(item.first, copy);
      }
      state.emplace(param.impl(), make_state(moved, param, number));
    }
  }
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    param_groups_[g].set_options(std::move(options[g]));
    param_groups_[g].extra() = std::move(extras[g]);
  }
  state_ = std::move(state);
}

// ---------------------------------------------------------------- buckets

namespace detail {

namespace {

std::string param_name(int64_t index) { return tandem::detail::str_cat("parameter ", index); }

// check_same_device's DeviceError with the fix for optimizer state.
[[noreturn]] void throw_stale_state(const char* optimizer, int64_t index, const Tensor& param, const char* state,
                                    const Tensor& value) {
  const std::string op = tandem::detail::str_cat(optimizer, ".step()");
  const std::string param_label = param_name(index);
  const std::string state_label = tandem::detail::str_cat(state, " of ", param_label);
  const std::string fix = tandem::detail::str_cat(
      "The optimizer state '", state, "' of ", param_label, " was made on ", value.device().str(),
      " by an earlier step, and the parameter has moved since (Module::to() moves parameters, not optimizer state, "
      "as in PyTorch). Tandem never moves tensors between devices by itself. Move the model before building the "
      "optimizer, or move the state to the parameters with optimizer.load_state_dict(optimizer.state_dict()).");
  check_same_device(op.c_str(), {{param_label.c_str(), param}, {state_label.c_str(), value}}, fix);
  TANDEM_INTERNAL_ASSERT(false, "throw_stale_state: the devices differ");
}

}  // namespace

void check_state_device(const char* optimizer, int64_t index, const Tensor& param, const char* state,
                        const Tensor& value) {
  if (value.device() != param.device()) throw_stale_state(optimizer, index, param, state, value);
}

UpdateBucket& bucket_for(std::vector<UpdateBucket>& buckets, const char* optimizer, int64_t index, const Tensor& param,
                         const Tensor& grad, std::initializer_list<Tensor> states,
                         std::initializer_list<const char*> state_names) {
  TANDEM_INTERNAL_ASSERT(states.size() == state_names.size(), "one name per state tensor");
  // Every step runs these for every parameter: the messages (and the
  // strings in them) are built only on failure.
  auto label = [&] { return param_name(index); };
  TANDEM_CHECK(param.is_floating_point(), DtypeError, optimizer, ".step(): ", label(), " is ", param.dtype(),
               "; optimizers update floating-point parameters only (float32, float64, float16, bfloat16)");
  if (grad.device() != param.device()) {
    const std::string name = label(), grad_name = "the gradient of " + name;
    check_same_device(tandem::detail::str_cat(optimizer, ".step()").c_str(),
                      {{name.c_str(), param}, {grad_name.c_str(), grad}});
  }
  TANDEM_CHECK(grad.dtype() == param.dtype() && grad.sizes() == param.sizes(), ValueError, optimizer,
               ".step(): ", "the gradient of ", label(), " is ", grad.dtype(), " ", grad.sizes(),
               " but the parameter is ", param.dtype(), " ", param.sizes(), "; a gradient must match its parameter");
  for (size_t s = 0; s < states.size(); ++s) {
    const Tensor& value = states.begin()[s];
    const char* state_name = state_names.begin()[s];
    if (value.device() != param.device()) throw_stale_state(optimizer, index, param, state_name, value);
    TANDEM_CHECK(value.dtype() == param.dtype() && value.sizes() == param.sizes(), DtypeError, optimizer,
                 ".step(): state '", state_name, "' of ", label(), " is ", value.dtype(), " ", value.sizes(),
                 " but the parameter is ", param.dtype(), " ", param.sizes(),
                 " (the parameter changed dtype after earlier steps made the state). Convert the model before ",
                 "building the optimizer, or convert the state with optimizer.load_state_dict(",
                 "optimizer.state_dict()).");
    TANDEM_INTERNAL_ASSERT(value.is_contiguous(), "optimizer state is contiguous");
  }

  UpdateBucket* bucket = nullptr;
  for (auto& b : buckets)
    if (b.device == param.device() && b.dtype == param.dtype()) bucket = &b;
  if (bucket == nullptr) {
    buckets.push_back(UpdateBucket{param.device(), param.dtype(), {}, {}, {}, {}, {}, {}, {}, {}, {}});
    bucket = &buckets.back();
    bucket->states.resize(states.size());
  }
  if (param.is_contiguous()) {
    bucket->params.push_back(param);
  } else {
    Tensor copy = param.contiguous();
    bucket->write_back.emplace_back(param, copy);
    bucket->params.push_back(copy);
  }
  if (grad.is_contiguous()) {
    bucket->grads.push_back(grad);
  } else {
    Tensor copy = grad.contiguous();
    bucket->grad_write_back.emplace_back(grad, copy);
    bucket->grads.push_back(copy);
  }
  for (const Tensor& state : states) bucket->states[&state - states.begin()].push_back(state);
  bucket->indices.push_back(index);
  return *bucket;
}

void finish_bucket(UpdateBucket& bucket, bool grads_written) {
  // The kernels wrote in place: bump the version counters as an in-place op
  // would, so that autograd notices a parameter changed after it was saved.
  for (const Tensor& p : bucket.params) p.storage()->bump_version();
  for (const auto& list : bucket.states)
    for (const Tensor& s : list) s.storage()->bump_version();
  for (auto& [param, copy] : bucket.write_back) param.copy_(copy);
  if (!grads_written) return;
  for (const Tensor& g : bucket.grads) g.storage()->bump_version();
  for (auto& [grad, copy] : bucket.grad_write_back) grad.copy_(copy);
}

void label_state(const Tensor& state, const char* optimizer, const char* how) {
  Origin origin;
  origin.label = intern_label(tandem::detail::str_cat(optimizer, "'s state, ", how));
  state.set_origin(origin);
}

void throw_unknown_option(const char* options, const std::string& key, const OrderedDict<std::string, double>& known) {
  std::string keys;
  for (const auto& item : known) keys += (keys.empty() ? "'" : ", '") + item.first + "'";
  throw KeyError(tandem::detail::str_cat(options, " has no option '", key, "' (it has ", keys, ")"));
}

Tensor saved_state(const OrderedDict<std::string, Tensor>& saved, const char* optimizer, const char* key,
                   const Tensor& param, int64_t index) {
  const Tensor* value = saved.find(key);
  TANDEM_CHECK(value != nullptr, KeyError, optimizer, ".load_state_dict: the state of parameter ", index, " has no '",
               key, "' (was the state dict saved from another optimizer, or with other options?)");
  if (std::string(key) != "step")
    TANDEM_CHECK(value->sizes() == param.sizes(), ShapeError, optimizer, ".load_state_dict: state '", key,
                 "' of parameter ", index, " has shape ", value->sizes(), " but the parameter has shape ",
                 param.sizes(), " (was the state dict saved for another model?)");
  return *value;
}

void check_state_keys(const OrderedDict<std::string, Tensor>& saved, const char* optimizer,
                      const std::vector<const char*>& allowed, int64_t index) {
  for (const auto& item : saved) {
    bool known = false;
    for (const char* a : allowed) known = known || item.first == a;
    std::string names;
    for (const char* a : allowed) names += (names.empty() ? "'" : ", '") + std::string(a) + "'";
    TANDEM_CHECK(known, KeyError, optimizer, ".load_state_dict: unknown state '", item.first, "' of parameter ", index,
                 " (", optimizer, " keeps ", names, "; was the state dict saved from another optimizer?)");
  }
}

}  // namespace detail

}  // namespace tandem::optim

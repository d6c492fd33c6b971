// optim::Optimizer: the base of SGD, Adam and AdamW, in libtorch's shape
// (parameter groups with their own options, zero_grad, step with an optional
// closure, state per parameter) with PyTorch's semantics, and the flat state
// dict that checkpoints save.
//
//   optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3));
//   for (...) { opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step(); }
//
// Devices: a step updates the parameters of a group that live on one device
// (and have one dtype) with one multi-tensor kernel (kernels/cpu/optim.h,
// kernels/cuda/optim.h). State tensors are made on their parameter's device.
// nn::Module::to() moves parameters in place, keeping their identity, but not
// the state that earlier steps made, as in PyTorch: a later step finds that
// state on the old device and throws the same-device DeviceError (naming the
// optimizer, the state and the parameter) instead of moving it silently. Move
// the model before building the optimizer, or move the state with
// `opt.load_state_dict(opt.state_dict())`, which puts every state tensor on its
// parameter's device.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/core/arg.h"
#include "tensor/core/ordered_dict.h"
#include "tensor/core/tensor.h"

namespace tandem::optim {

// ---------------------------------------------------------------- state dict
// The optimizer's state, flat, as PyTorch's optimizer.state_dict() (which
// checkpoints save and load):
//
//   state         parameter index -> its state tensors by name. Indices number
//                 the parameters over all groups in order (PyTorch's
//                 numbering). Names as PyTorch's:
//                   SGD (with momentum):  "momentum_buffer"
//                   Adam, AdamW:          "step" (a float32 scalar on the cpu;
//                                         on the parameter's device with
//                                         fused(true)),
//                                         "exp_avg", "exp_avg_sq",
//                                         "max_exp_avg_sq" (amsgrad only)
//                 A parameter that has no state yet (never had a gradient, or
//                 SGD without momentum) has no entry.
//   param_groups  per group: its options by PyTorch's key, booleans as 0/1
//                   SGD:          lr, momentum, dampening, weight_decay,
//                                 nesterov, maximize
//                   Adam, AdamW:  lr, beta1, beta2 (PyTorch's 'betas' pair),
//                                 eps, weight_decay, amsgrad, maximize
//                 then the extra values schedulers keep in the group
//                 ("initial_lr"; OneCycleLR's "max_lr", "min_lr",
//                 "max_momentum", "base_momentum"), and the indices of its
//                 parameters.
//
// state_dict() returns the optimizer's own state tensors, not copies (as
// PyTorch); load_state_dict() copies what it is given.
struct OptimizerStateDict {
  std::map<int64_t, OrderedDict<std::string, Tensor>> state;
  struct Group {
    OrderedDict<std::string, double> options;
    std::vector<int64_t> params;
  };
  std::vector<Group> param_groups;
};

// ---------------------------------------------------------------- options
// The options of one parameter group. Each optimizer derives its own
// (SGDOptions, AdamOptions, ...) with libtorch's chainable setters.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // The options by PyTorch's param-group keys (see OptimizerStateDict).
  virtual OrderedDict<std::string, double> to_dict() const = 0;
  // Sets one option by key; KeyError for a key these options do not have.
  virtual void set(const std::string& key, double value) = 0;
  // Throws ValueError, in PyTorch's words, when a value is invalid.
  virtual void validate() const = 0;
};

// clone() for an options class (libtorch's OptimizerCloneableOptions).
template <typename Derived>
class OptimizerCloneableOptions : public OptimizerOptions {
 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
};

// ---------------------------------------------------------------- state
// The state of one parameter. Each optimizer derives its own (SGDParamState,
// AdamParamState) with the tensors as members.
class OptimizerParamState {
 public:
  virtual ~OptimizerParamState() = default;
  virtual std::unique_ptr<OptimizerParamState> clone() const = 0;
  // The state tensors by PyTorch's names (see OptimizerStateDict); undefined
  // ones are left out.
  virtual OrderedDict<std::string, Tensor> to_dict() const = 0;
};

// ---------------------------------------------------------------- groups
class OptimizerParamGroup {
 public:
  // A group that takes the optimizer's default options.
  OptimizerParamGroup(std::vector<Tensor> params);  // NOLINT(google-explicit-constructor)
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options);
  // A group with its own options: OptimizerParamGroup(params, SGDOptions(0.01)).
  template <typename Options, typename = std::enable_if_t<std::is_base_of_v<OptimizerOptions, Options>>>
  OptimizerParamGroup(std::vector<Tensor> params, const Options& options)
      : OptimizerParamGroup(std::move(params), options.clone()) {}
  OptimizerParamGroup(const OptimizerParamGroup& other);
  OptimizerParamGroup& operator=(const OptimizerParamGroup& other);
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) = default;

  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options);
  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  // Values that are not options of the optimizer but belong to the group and
  // travel with it in state dicts: what PyTorch's schedulers add to a param
  // group ("initial_lr", OneCycleLR's "max_lr", ...).
  OrderedDict<std::string, double>& extra() { return extra_; }
  const OrderedDict<std::string, double>& extra() const { return extra_; }

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
  OrderedDict<std::string, double> extra_{"param group value"};
};

// ---------------------------------------------------------------- optimizer
class Optimizer {
 public:
  using LossClosure = std::function<Tensor()>;

  // Groups without options take a copy of defaults. Every group's options
  // are validated; a parameter may be in one group only and must be a leaf.
  Optimizer(std::vector<OptimizerParamGroup> param_groups, std::unique_ptr<OptimizerOptions> defaults);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "SGD", "Adam", "AdamW": in messages.
  virtual const char* name() const = 0;

  // Updates every parameter that has a gradient (the others are skipped, as
  // in PyTorch) without recording a graph. closure, when given, runs first
  // with grad mode on (it re-evaluates the model and returns the loss);
  // step returns its loss, or an undefined tensor without a closure.
  virtual Tensor step(LossClosure closure = nullptr) = 0;

  // The GradScaler's fused path (amp::GradScaler::step, PyTorch's fused
  // optimizers' grad_scale and found_inf): the step skipped on the device
  // when found_inf (one float32 element) is not 0, so that nothing waits to
  // read it. grad_scale, when defined (one float32 element), is the scale
  // the gradients still carry: the step's kernel unscales each gradient,
  // writes it back unscaled and uses it, saving the GradScaler a pass that
  // writes them (a skipped step leaves them scaled). Both are copied to each
  // parameter device that is not theirs. Only where supports_amp_scaling()
  // says so: SGD without dampening (whose momentum buffer, made zero by a
  // skipped first step, then starts as a fresh one would), and Adam and
  // AdamW with fused(true) (their step counts on the device); the others
  // step through the GradScaler's one read of the flag.
  virtual bool supports_amp_scaling() const { return false; }
  virtual void step_unless_found_inf(const Tensor& found_inf, const Tensor& grad_scale = Tensor());
  // Whether a group with these options keeps its step counts on the
  // parameters' devices (fused Adam): load_state_dict puts a saved count
  // there, as PyTorch's fused Adam loads it; otherwise it stays as saved.
  virtual bool steps_on_device(const OptimizerOptions&) const { return false; }

  void add_param_group(const OptimizerParamGroup& param_group);
  // Clears every parameter's gradient: undefined (set_to_none, the default
  // as in PyTorch 2) or zeroed in place and detached.
  void zero_grad(bool set_to_none = true);

  // Every parameter of every group, in order (PyTorch's numbering).
  std::vector<Tensor> parameters() const;
  // How many parameters, over all groups.
  size_t size() const;
  OptimizerOptions& defaults() { return *defaults_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  std::vector<OptimizerParamGroup>& param_groups() { return param_groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const { return param_groups_; }
  // The state of each parameter that has one, by its TensorImpl.
  std::unordered_map<const TensorImpl*, std::unique_ptr<OptimizerParamState>>& state() { return state_; }
  const std::unordered_map<const TensorImpl*, std::unique_ptr<OptimizerParamState>>& state() const { return state_; }

  OptimizerStateDict state_dict() const;
  // PyTorch's Optimizer.load_state_dict: the group count and sizes must
  // match (ValueError in PyTorch's words); each group takes the saved
  // options and extra values; each state tensor is copied onto its
  // parameter's device, floating ones also to its dtype ("step" stays as
  // saved, or goes to the parameter's device as float32 where
  // steps_on_device: PyTorch's _process_value_according_to_param_policy). It runs
  // check_state_dict first, so a state dict it refuses changes nothing.
  void load_state_dict(const OptimizerStateDict& state_dict);
  // Every check load_state_dict makes, with its errors, changing nothing
  // and copying nothing: the group count and sizes (ValueError), each
  // group's option keys and each parameter's state keys (KeyError), the
  // state tensors' shapes (ShapeError) and dtypes (DtypeError: a floating
  // parameter's state is floating, "step" excepted), undefined ones
  // (ValueError). For loading several objects all or nothing (a checkpoint).
  void check_state_dict(const OptimizerStateDict& state_dict) const;

 protected:
  // The checks of one parameter's saved state (its keys, shapes, "step"),
  // throwing load_state_dict's errors; index is the parameter's number, for
  // messages.
  virtual void check_state(const OrderedDict<std::string, Tensor>& saved, const Tensor& param, int64_t index) const = 0;
  // The state of `param` made from a state dict entry that check_state
  // accepted (already on the parameter's device and dtype).
  virtual std::unique_ptr<OptimizerParamState> make_state(const OrderedDict<std::string, Tensor>& saved,
                                                          const Tensor& param, int64_t index) const = 0;
  // Runs the closure, if any, with grad mode on.
  static Tensor run_closure(const LossClosure& closure);

  std::vector<OptimizerParamGroup> param_groups_;
  std::unordered_map<const TensorImpl*, std::unique_ptr<OptimizerParamState>> state_;
  std::unique_ptr<OptimizerOptions> defaults_;

 private:
  // Saved index -> this optimizer's parameter and its number, group by group
  // in order (PyTorch's id_map), for a state dict whose group sizes match.
  std::map<int64_t, std::pair<Tensor, int64_t>> id_map(const OptimizerStateDict& state_dict) const;
};

namespace detail {

// The parameters of one group that a step updates, split by device and
// dtype as PyTorch's _group_tensors_by_device_and_dtype: the lists each
// multi-tensor kernel takes.
struct UpdateBucket {
  Device device;
  Dtype dtype;
  std::vector<Tensor> params, grads;
  std::vector<std::vector<Tensor>> states;  // one list per state tensor kind
  std::vector<int64_t> indices;             // each parameter's number, for messages
  std::vector<uint8_t> fresh;               // SGD: the momentum buffer was just made
  std::vector<double> steps;                // Adam: the step count after this step
  std::vector<Tensor> device_steps;         // fused Adam: the step counts, on the device
  // Parameters that are not contiguous are updated through a contiguous
  // copy, written back after the kernel: (parameter, copy) pairs. The same
  // for gradients, which a fused step with a grad_scale writes.
  std::vector<std::pair<Tensor, Tensor>> write_back, grad_write_back;
};

// Where a step puts parameter `index`'s tensors: the bucket of its device
// and dtype, made on first need (the reference is valid until the next
// call). Checks that the gradient and the state
// tensors (named by state_names) are on the parameter's device and of its
// dtype and shape; a stale state tensor throws check_same_device's
// DeviceError naming `optimizer`, the state and the parameter, with the fix.
UpdateBucket& bucket_for(std::vector<UpdateBucket>& buckets, const char* optimizer, int64_t index, const Tensor& param,
                         const Tensor& grad, std::initializer_list<Tensor> states,
                         std::initializer_list<const char*> state_names);
// bucket_for's DeviceError for a state tensor that is not on its parameter's
// device (for state it does not check: fused Adam's step count).
void check_state_device(const char* optimizer, int64_t index, const Tensor& param, const char* state,
                        const Tensor& value);
// Gives a state tensor the origin device errors print for it: "Adam's
// state, made by step()" (how: "made by step()", "loaded by load_state_dict()").
void label_state(const Tensor& state, const char* optimizer, const char* how);
// Writes back the non-contiguous parameters of a bucket after its kernel,
// and its gradients when the kernel wrote them (grads_written: it unscaled
// them).
void finish_bucket(UpdateBucket& bucket, bool grads_written = false);
// step_unless_found_inf's checks: found_inf one float32 element, grad_scale
// undefined or one float32 element (ValueError naming the optimizer).
void check_amp_args(const char* optimizer, const Tensor& found_inf, const Tensor& grad_scale);
// t, or a copy of it on `device` (undefined stays undefined): the
// GradScaler's flag and scale for a bucket on another device.
Tensor on_device(const Tensor& t, Device device);

// OptimizerOptions::set's KeyError for a key `options` (e.g. "SGDOptions")
// does not have, listing the keys it has.
[[noreturn]] void throw_unknown_option(const char* options, const std::string& key,
                                       const OrderedDict<std::string, double>& known);
// For check_state and make_state: the saved state tensor `key` of parameter
// `index`, which must have the parameter's shape (all but "step"). KeyError
// when it is missing, or when `saved` has a key outside `allowed`.
Tensor saved_state(const OrderedDict<std::string, Tensor>& saved, const char* optimizer, const char* key,
                   const Tensor& param, int64_t index);
void check_state_keys(const OrderedDict<std::string, Tensor>& saved, const char* optimizer,
                      const std::vector<const char*>& allowed, int64_t index);

}  // namespace detail

}  // namespace tandem::optim

// Optimizer, scheduler and grad scaler state in nn::Checkpoint files.
#include "nn/checkpoint.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "nn/serialize_private.h"

namespace tandem::nn {

namespace {

constexpr std::string_view kOptimizerType = "optimizer.type";
constexpr std::string_view kSchedulerType = "scheduler.type";
constexpr std::string_view kGradScaler = "grad_scaler";

std::string where(const Checkpoint& checkpoint) {
  return checkpoint.source().empty() ? std::string("the checkpoint") : "'" + checkpoint.source() + "'";
}

void check_type(const Checkpoint& checkpoint, std::string_view key, const char* what, const char* expected) {
  TANDEM_CHECK(checkpoint.contains(key), KeyError, where(checkpoint), " holds no ", what, " state (no \"", key,
               "\" entry): it was saved without one");
  const std::string& saved = checkpoint.get(key);
  TANDEM_CHECK(saved == expected, ValueError, where(checkpoint), " holds the state of a ", saved, ", but the ", what,
               " is a ", expected, ": build the same ", what, " as the run that saved it");
}

}  // namespace

void add_to_checkpoint(Checkpoint& checkpoint, const optim::Optimizer& optimizer) {
  const optim::OptimizerStateDict state = optimizer.state_dict();
  checkpoint.add_indexed_tensors(Checkpoint::kOptimizerStatePrefix, state.state);
  json::Value groups = json::Value::array();
  for (const auto& group : state.param_groups) {
    json::Value options = json::Value::object();
    for (const auto& item : group.options) json::append_member(options, item.first, item.second);
    groups.push_back({{"options", std::move(options)}, {"params", group.params}});
  }
  set_json(checkpoint, Checkpoint::kOptimizerParamGroups, groups);
  checkpoint.set(kOptimizerType, optimizer.name());
}

namespace {

// The optimizer's state dict as the checkpoint holds it; malformed JSON is
// a SerializationError naming the file.
optim::OptimizerStateDict read_optimizer_state(const Checkpoint& checkpoint) {
  optim::OptimizerStateDict state;
  state.state = checkpoint.indexed_tensors(Checkpoint::kOptimizerStatePrefix);
  const json::Value groups = get_json(checkpoint, Checkpoint::kOptimizerParamGroups);
  try {
    for (const json::Value& entry : json::as_array(groups)) {
      optim::OptimizerStateDict::Group group;
      for (const auto& [key, value] : json::as_object(json::at(entry, "options")).items()) {
        group.options.insert(key, json::as_double(value));
      }
      for (const json::Value& p : json::as_array(json::at(entry, "params"))) group.params.push_back(json::as_int(p));
      state.param_groups.push_back(std::move(group));
    }
  } catch (const Error& e) {
    throw SerializationError(
        tandem::detail::str_cat(where(checkpoint), ": \"", Checkpoint::kOptimizerParamGroups,
                                "\" is not a list of {\"options\": {...}, \"params\": [...]}: ", e.what()));
  }
  return state;
}

optim::LRSchedulerState read_scheduler_state(const Checkpoint& checkpoint) {
  const json::Value all = get_json(checkpoint, Checkpoint::kScheduler);
  optim::LRSchedulerState state;
  try {
    for (const auto& [key, value] : json::as_object(json::at(all, "values")).items()) {
      state.values.insert(key, json::as_double(value));
    }
    for (const auto& [key, list] : json::as_object(json::at(all, "lists")).items()) {
      std::vector<double> values;
      for (const json::Value& v : json::as_array(list)) values.push_back(json::as_double(v));
      state.lists.insert(key, std::move(values));
    }
  } catch (const Error& e) {
    throw SerializationError(tandem::detail::str_cat(where(checkpoint), ": \"", Checkpoint::kScheduler,
                                                     "\" is not {\"values\": {...}, \"lists\": {...}}: ", e.what()));
  }
  return state;
}

OrderedDict<std::string, double> read_scaler_state(const Checkpoint& checkpoint) {
  TANDEM_CHECK(checkpoint.contains(kGradScaler), KeyError, where(checkpoint), " holds no grad scaler state (no \"",
               kGradScaler, "\" entry): it was saved without one");
  const json::Value all = get_json(checkpoint, kGradScaler);
  OrderedDict<std::string, double> state("GradScaler state");
  try {
    for (const auto& [key, value] : json::as_object(all).items()) state.insert(key, json::as_double(value));
  } catch (const Error& e) {
    throw SerializationError(
        tandem::detail::str_cat(where(checkpoint), ": \"", kGradScaler, "\" is not an object of numbers: ", e.what()));
  }
  return state;
}

}  // namespace

void add_to_checkpoint(Checkpoint& checkpoint, const amp::GradScaler& scaler) {
  json::Value state = json::Value::object();
  for (const auto& item : scaler.state_dict()) json::append_member(state, item.first, item.second);
  set_json(checkpoint, kGradScaler, state);
}

void load_from_checkpoint(const Checkpoint& checkpoint, amp::GradScaler& scaler) {
  scaler.load_state_dict(read_scaler_state(checkpoint));
}

void load_from_checkpoint(const Checkpoint& checkpoint, optim::Optimizer& optimizer) {
  check_type(checkpoint, kOptimizerType, "optimizer", optimizer.name());
  optimizer.load_state_dict(read_optimizer_state(checkpoint));
}

void add_to_checkpoint(Checkpoint& checkpoint, const optim::LRScheduler& scheduler) {
  const optim::LRSchedulerState state = scheduler.state_dict();
  json::Value values = json::Value::object();
  for (const auto& item : state.values) json::append_member(values, item.first, item.second);
  json::Value lists = json::Value::object();
  for (const auto& item : state.lists) json::append_member(lists, item.first, item.second);
  set_json(checkpoint, Checkpoint::kScheduler, {{"values", std::move(values)}, {"lists", std::move(lists)}});
  checkpoint.set(kSchedulerType, scheduler.name());
}

void load_from_checkpoint(const Checkpoint& checkpoint, optim::LRScheduler& scheduler) {
  check_type(checkpoint, kSchedulerType, "scheduler", scheduler.name());
  scheduler.load_state_dict(read_scheduler_state(checkpoint));
}

void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer,
                     const optim::LRScheduler* scheduler, int64_t epoch, const amp::GradScaler* scaler) {
  Checkpoint checkpoint;
  checkpoint.add_module(model);
  if (optimizer != nullptr) add_to_checkpoint(checkpoint, *optimizer);
  if (scheduler != nullptr) add_to_checkpoint(checkpoint, *scheduler);
  if (scaler != nullptr) add_to_checkpoint(checkpoint, *scaler);
  checkpoint.set_int(Checkpoint::kEpoch, epoch);
  checkpoint.save(path);
}

int64_t load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer,
                        optim::LRScheduler* scheduler, std::optional<Device> map_location, bool strict,
                        amp::GradScaler* scaler) {
  const Checkpoint checkpoint = Checkpoint::load(path, map_location);
  // Everything is read and checked before anything changes: the optimizer's
  // and the scheduler's states here, the model's inside load_state_dict.
  std::optional<optim::OptimizerStateDict> optimizer_state;
  std::optional<optim::LRSchedulerState> scheduler_state;
  if (optimizer != nullptr) {
    check_type(checkpoint, kOptimizerType, "optimizer", optimizer->name());
    optimizer_state = read_optimizer_state(checkpoint);
    optimizer->check_state_dict(*optimizer_state);
  }
  if (scheduler != nullptr) {
    check_type(checkpoint, kSchedulerType, "scheduler", scheduler->name());
    scheduler_state = read_scheduler_state(checkpoint);
    scheduler->check_state_dict(*scheduler_state);
  }
  std::optional<OrderedDict<std::string, double>> scaler_state;
  if (scaler != nullptr && scaler->is_enabled()) {  // a disabled scaler loads nothing, as its load_state_dict
    scaler_state = read_scaler_state(checkpoint);
    // The scaler's own checks (an empty state, a missing key), on a scaler
    // that is thrown away.
    amp::GradScaler().load_state_dict(*scaler_state);
  }
  const int64_t epoch = checkpoint.contains(Checkpoint::kEpoch) ? checkpoint.get_int(Checkpoint::kEpoch) : 0;
  checkpoint.load_module(model, strict);
  if (optimizer != nullptr) optimizer->load_state_dict(*optimizer_state);
  if (scheduler != nullptr) scheduler->load_state_dict(*scheduler_state);
  if (scaler_state) scaler->load_state_dict(*scaler_state);
  return epoch;
}

}  // namespace tandem::nn

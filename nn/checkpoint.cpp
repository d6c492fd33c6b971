// Optimizer and scheduler state in nn::Checkpoint files.
#include "nn/checkpoint.h"

#include <optional>

#include "tensor/io/json.h"

namespace tandem::nn {

namespace {

constexpr std::string_view kOptimizerType = "optimizer.type";
constexpr std::string_view kSchedulerType = "scheduler.type";

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
  json::Value groups = json::Array{};
  for (const auto& group : state.param_groups) {
    json::Value options = json::Object{};
    for (const auto& item : group.options) options.set(item.first, item.second);
    json::Value params = json::Array{};
    for (int64_t p : group.params) params.push_back(p);
    json::Value entry = json::Object{};
    entry.set("options", std::move(options));
    entry.set("params", std::move(params));
    groups.push_back(std::move(entry));
  }
  checkpoint.set_json(Checkpoint::kOptimizerParamGroups, groups);
  checkpoint.set(kOptimizerType, optimizer.name());
}

namespace {

// The optimizer's state dict as the checkpoint holds it; malformed JSON is
// a SerializationError naming the file.
optim::OptimizerStateDict read_optimizer_state(const Checkpoint& checkpoint) {
  optim::OptimizerStateDict state;
  state.state = checkpoint.indexed_tensors(Checkpoint::kOptimizerStatePrefix);
  const json::Value groups = checkpoint.get_json(Checkpoint::kOptimizerParamGroups);
  try {
    for (const json::Value& entry : groups.as_array()) {
      optim::OptimizerStateDict::Group group;
      for (const auto& [key, value] : entry.at("options").as_object()) group.options.insert(key, value.as_double());
      for (const json::Value& p : entry.at("params").as_array()) group.params.push_back(p.as_int());
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
  const json::Value all = checkpoint.get_json(Checkpoint::kScheduler);
  optim::LRSchedulerState state;
  try {
    for (const auto& [key, value] : all.at("values").as_object()) state.values.insert(key, value.as_double());
    for (const auto& [key, list] : all.at("lists").as_object()) {
      std::vector<double> values;
      for (const json::Value& v : list.as_array()) values.push_back(v.as_double());
      state.lists.insert(key, std::move(values));
    }
  } catch (const Error& e) {
    throw SerializationError(tandem::detail::str_cat(where(checkpoint), ": \"", Checkpoint::kScheduler,
                                                     "\" is not {\"values\": {...}, \"lists\": {...}}: ", e.what()));
  }
  return state;
}

}  // namespace

void load_from_checkpoint(const Checkpoint& checkpoint, optim::Optimizer& optimizer) {
  check_type(checkpoint, kOptimizerType, "optimizer", optimizer.name());
  optimizer.load_state_dict(read_optimizer_state(checkpoint));
}

void add_to_checkpoint(Checkpoint& checkpoint, const optim::LRScheduler& scheduler) {
  const optim::LRSchedulerState state = scheduler.state_dict();
  json::Value values = json::Object{};
  for (const auto& item : state.values) values.set(item.first, item.second);
  json::Value lists = json::Object{};
  for (const auto& item : state.lists) {
    json::Value list = json::Array{};
    for (double v : item.second) list.push_back(v);
    lists.set(item.first, std::move(list));
  }
  json::Value all = json::Object{};
  all.set("values", std::move(values));
  all.set("lists", std::move(lists));
  checkpoint.set_json(Checkpoint::kScheduler, all);
  checkpoint.set(kSchedulerType, scheduler.name());
}

void load_from_checkpoint(const Checkpoint& checkpoint, optim::LRScheduler& scheduler) {
  check_type(checkpoint, kSchedulerType, "scheduler", scheduler.name());
  scheduler.load_state_dict(read_scheduler_state(checkpoint));
}

void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer,
                     const optim::LRScheduler* scheduler, int64_t epoch) {
  Checkpoint checkpoint;
  checkpoint.add_module(model);
  if (optimizer != nullptr) add_to_checkpoint(checkpoint, *optimizer);
  if (scheduler != nullptr) add_to_checkpoint(checkpoint, *scheduler);
  checkpoint.set_int(Checkpoint::kEpoch, epoch);
  checkpoint.save(path);
}

int64_t load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer,
                        optim::LRScheduler* scheduler, std::optional<Device> map_location, bool strict) {
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
  const int64_t epoch = checkpoint.contains(Checkpoint::kEpoch) ? checkpoint.get_int(Checkpoint::kEpoch) : 0;
  checkpoint.load_module(model, strict);
  if (optimizer != nullptr) optimizer->load_state_dict(*optimizer_state);
  if (scheduler != nullptr) scheduler->load_state_dict(*scheduler_state);
  return epoch;
}

}  // namespace tandem::nn

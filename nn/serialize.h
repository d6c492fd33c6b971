// Saving and loading modules and training checkpoints, as safetensors files
// (tensor/io/safetensors.h) that PyTorch's safetensors package reads too.
//
//   nn::save(model, "model.safetensors");             // model->state_dict()
//   nn::load(model, "model.safetensors");             // load_state_dict, strict
//   nn::load(model, "model.safetensors", Device("cpu"), /*strict=*/false);
//
// A training checkpoint keeps the model, the optimizer, the scheduler and
// the epoch in one file (nn::Checkpoint, layout below).
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "nn/module.h"
#include "tensor/core/ordered_dict.h"

namespace tandem::nn {

// Writes module.state_dict() (parameters and persistent buffers by dotted
// name) atomically to path, with the metadata {"format": "pt"} that Hugging
// Face's loaders ask of PyTorch weights.
void save(const Module& module, const std::string& path);
template <typename Contained>
void save(const ModuleHolder<Contained>& module, const std::string& path) {
  save(*module, path);
}
template <std::derived_from<Module> M>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  save(*module, path);
}
// Any dict of tensors.
void save(const OrderedDict<std::string, Tensor>& tensors, const std::string& path);

// Reads path (tensors to map_location, or to the devices they were saved
// from) and copies it into the module with load_state_dict(strict): each
// value lands on its parameter's device. Missing, unexpected (strict) and
// mismatched-shape keys are a KeyError in PyTorch's words naming the module,
// followed by the file; a failed load changes nothing.
LoadStateDictResult load(Module& module, const std::string& path, std::optional<Device> map_location = std::nullopt,
                         bool strict = true);
template <typename Contained>
LoadStateDictResult load(ModuleHolder<Contained>& module, const std::string& path,
                         std::optional<Device> map_location = std::nullopt, bool strict = true) {
  return load(*module, path, map_location, strict);
}
template <std::derived_from<Module> M>
LoadStateDictResult load(const std::shared_ptr<M>& module, const std::string& path,
                         std::optional<Device> map_location = std::nullopt, bool strict = true) {
  return load(*module, path, map_location, strict);
}
// Any dict of tensors, in the order it was saved.
OrderedDict<std::string, Tensor> load(const std::string& path, std::optional<Device> map_location = std::nullopt);

// A training checkpoint in one safetensors file. Tensors are grouped by
// prefix and everything else is metadata text (JSON where it has structure;
// the public API hands it over as text, so that it names no JSON library):
//
//   tensors    "model.<name>"                  the model's state_dict
//              "optimizer.state.<i>.<name>"    the optimizer's state of parameter i
//                                              (its index over all param groups, in order)
//   metadata   "optimizer.param_groups"        JSON [{"options": {"lr": 0.001, ...}, "params": [0, 1]}, ...]
//              "scheduler"                     JSON, the scheduler's state
//              "grad_scaler"                   JSON, the GradScaler's state dict
//              "epoch"                         an integer, e.g. "4"
//              "tandem.checkpoint"             "1", the version of this layout
//
//   nn::Checkpoint ckpt;
//   ckpt.add_module(*model);
//   ckpt.set_int(nn::Checkpoint::kEpoch, epoch);
//   ckpt.save("ckpt.safetensors");
//   ...
//   auto ckpt = nn::Checkpoint::load("ckpt.safetensors", Device("cpu"));
//   ckpt.load_module(*model);
//   int64_t epoch = ckpt.get_int(nn::Checkpoint::kEpoch);
class Checkpoint {
 public:
  static constexpr std::string_view kModelPrefix = "model.";
  static constexpr std::string_view kOptimizerStatePrefix = "optimizer.state.";
  static constexpr std::string_view kOptimizerParamGroups = "optimizer.param_groups";
  static constexpr std::string_view kScheduler = "scheduler";
  static constexpr std::string_view kEpoch = "epoch";
  static constexpr std::string_view kVersionKey = "tandem.checkpoint";
  static constexpr std::string_view kVersion = "1";

  Checkpoint();

  // ---- tensors
  // Adds each tensor as prefix + name; a name already there is a KeyError.
  void add_tensors(std::string_view prefix, const OrderedDict<std::string, Tensor>& tensors);
  void add_tensor(const std::string& name, const Tensor& tensor);
  // The tensors whose names start with prefix, prefix removed, in order
  // (empty when there are none).
  OrderedDict<std::string, Tensor> tensors(std::string_view prefix) const;
  // Per-index groups, "<prefix><i>.<name>": the optimizer state's layout.
  void add_indexed_tensors(std::string_view prefix, const std::map<int64_t, OrderedDict<std::string, Tensor>>& groups);
  // A name under prefix of another form is a SerializationError naming it.
  std::map<int64_t, OrderedDict<std::string, Tensor>> indexed_tensors(std::string_view prefix) const;
  const OrderedDict<std::string, Tensor>& all_tensors() const { return tensors_; }

  // The model: add_tensors(kModelPrefix, module.state_dict()), and back with
  // module.load_state_dict(tensors(kModelPrefix), strict).
  void add_module(const Module& module);
  LoadStateDictResult load_module(Module& module, bool strict = true) const;

  // ---- metadata (strings; set replaces)
  void set(std::string_view key, std::string value);
  void set_int(std::string_view key, int64_t value);
  bool contains(std::string_view key) const;
  // An absent key is a KeyError naming the file and the keys present; a value
  // that is not an integer is a SerializationError.
  const std::string& get(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }
  // "checkpoint 'path'" (or "checkpoint" when made in memory), for messages.
  std::string describe() const;

  // ---- files
  void save(const std::string& path) const;
  // A file without the "tandem.checkpoint" key, or of a later version, is a
  // SerializationError (nn::load reads plain state dicts).
  static Checkpoint load(const std::string& path, std::optional<Device> map_location = std::nullopt);
  // The file it was loaded from ("" when made in memory), for messages.
  const std::string& source() const { return source_; }

 private:
  OrderedDict<std::string, Tensor> tensors_{"checkpoint tensor"};
  std::map<std::string, std::string, std::less<>> metadata_;
  std::string source_;
};

}  // namespace tandem::nn

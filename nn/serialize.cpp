// nn::save / nn::load and nn::Checkpoint (nn/serialize.h) over the
// safetensors files of tensor/io/safetensors.
#include "nn/serialize.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "nn/serialize_private.h"
#include "tensor/io/safetensors.h"

namespace tandem::nn {

namespace {
const std::map<std::string, std::string> kPytorchFormat = {{"format", "pt"}};
}  // namespace

void save(const Module& module, const std::string& path) {
  safetensors::save_file(module.state_dict(), path, kPytorchFormat);
}

void save(const OrderedDict<std::string, Tensor>& tensors, const std::string& path) {
  safetensors::save_file(tensors, path);
}

LoadStateDictResult load(Module& module, const std::string& path, std::optional<Device> map_location, bool strict) {
  safetensors::LoadResult file = safetensors::load_file(path, map_location);
  try {
    return module.load_state_dict(file.tensors, strict);
  } catch (const KeyError& e) {
    throw KeyError(detail::str_cat(e.what(), "\n(loading '", path, "')"));
  }
}

OrderedDict<std::string, Tensor> load(const std::string& path, std::optional<Device> map_location) {
  return safetensors::load_file(path, map_location).tensors;
}

// ---- Checkpoint

Checkpoint::Checkpoint() { metadata_.emplace(kVersionKey, kVersion); }

std::string Checkpoint::describe() const {
  return source_.empty() ? std::string("checkpoint") : detail::str_cat("checkpoint '", source_, "'");
}

void Checkpoint::add_tensors(std::string_view prefix, const OrderedDict<std::string, Tensor>& tensors) {
  for (const auto& item : tensors) add_tensor(detail::str_cat(prefix, item.first), item.second);
}

void Checkpoint::add_tensor(const std::string& name, const Tensor& tensor) { tensors_.insert(name, tensor); }

OrderedDict<std::string, Tensor> Checkpoint::tensors(std::string_view prefix) const {
  OrderedDict<std::string, Tensor> out;
  for (const auto& item : tensors_) {
    if (item.first.starts_with(prefix)) out.insert(item.first.substr(prefix.size()), item.second);
  }
  return out;
}

void Checkpoint::add_indexed_tensors(std::string_view prefix,
                                     const std::map<int64_t, OrderedDict<std::string, Tensor>>& groups) {
  for (const auto& [index, tensors] : groups) {
    TANDEM_CHECK(index >= 0, ValueError, "Checkpoint::add_indexed_tensors: index ", index, " under '", prefix,
                 "' is negative");
    add_tensors(detail::str_cat(prefix, index, "."), tensors);
  }
}

std::map<int64_t, OrderedDict<std::string, Tensor>> Checkpoint::indexed_tensors(std::string_view prefix) const {
  std::map<int64_t, OrderedDict<std::string, Tensor>> out;
  for (const auto& item : tensors_) {
    if (!item.first.starts_with(prefix)) continue;
    std::string_view rest = std::string_view(item.first).substr(prefix.size());
    int64_t index = -1;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
    size_t digits = static_cast<size_t>(end - rest.data());
    bool ok = ec == std::errc() && index >= 0 && digits > 0 && digits < rest.size() && rest[digits] == '.' &&
              digits + 1 < rest.size() && (digits == 1 || rest[0] != '0');
    TANDEM_CHECK(ok, SerializationError, describe(), ": tensor '", item.first, "' does not follow the layout '", prefix,
                 "<index>.<name>'");
    out[index].insert(std::string(rest.substr(digits + 1)), item.second);
  }
  return out;
}

void Checkpoint::add_module(const Module& module) { add_tensors(kModelPrefix, module.state_dict()); }

LoadStateDictResult Checkpoint::load_module(Module& module, bool strict) const {
  try {
    return module.load_state_dict(tensors(kModelPrefix), strict);
  } catch (const KeyError& e) {
    throw KeyError(detail::str_cat(e.what(), "\n(loading the model of ", describe(), ")"));
  }
}

void Checkpoint::set(std::string_view key, std::string value) {
  TANDEM_CHECK(key != kVersionKey, ValueError, "Checkpoint::set: '", key,
               "' is the checkpoint layout's version, which Tandem sets");
  metadata_.insert_or_assign(std::string(key), std::move(value));
}

void Checkpoint::set_int(std::string_view key, int64_t value) { set(key, std::to_string(value)); }

bool Checkpoint::contains(std::string_view key) const { return metadata_.find(key) != metadata_.end(); }

const std::string& Checkpoint::get(std::string_view key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) {
    std::string present;
    for (const auto& [k, v] : metadata_) present += detail::str_cat(present.empty() ? "" : ", ", "'", k, "'");
    throw KeyError(detail::str_cat(describe(), " has no metadata '", key, "' (it has ", present, ")"));
  }
  return it->second;
}

int64_t Checkpoint::get_int(std::string_view key) const {
  const std::string& text = get(key);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  TANDEM_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(), SerializationError, describe(),
               ": metadata '", key, "' is \"", text, "\", not an integer");
  return value;
}

void Checkpoint::save(const std::string& path) const {
  std::map<std::string, std::string> metadata(metadata_.begin(), metadata_.end());
  safetensors::save_file(tensors_, path, metadata);
}

Checkpoint Checkpoint::load(const std::string& path, std::optional<Device> map_location) {
  safetensors::LoadResult file = safetensors::load_file(path, map_location);
  auto version = file.metadata.find(std::string(kVersionKey));
  TANDEM_CHECK(version != file.metadata.end(), SerializationError, "Checkpoint::load: '", path,
               "' is not a training checkpoint (its metadata has no '", kVersionKey,
               "'): load a plain state dict with nn::load instead");
  TANDEM_CHECK(version->second == kVersion, SerializationError, "Checkpoint::load: '", path,
               "' has checkpoint layout version ", version->second, ", and this Tandem reads version ", kVersion,
               " only");
  Checkpoint ckpt;
  ckpt.source_ = path;
  for (auto& item : file.tensors) ckpt.tensors_.insert(item.first, std::move(item.second));
  for (auto& [k, v] : file.metadata) ckpt.metadata_.insert_or_assign(k, std::move(v));
  return ckpt;
}

// ---- JSON metadata (nn/serialize_private.h)

void set_json(Checkpoint& checkpoint, std::string_view key, const json::Value& value) {
  checkpoint.set(key, json::dump(value));
}

json::Value get_json(const Checkpoint& checkpoint, std::string_view key) {
  const std::string& text = checkpoint.get(key);
  try {
    return json::parse(text);
  } catch (const json::ParseError& e) {
    throw SerializationError(
        detail::str_cat(checkpoint.describe(), ": metadata '", key, "' is not valid JSON: ", e.what()));
  }
}

}  // namespace tandem::nn

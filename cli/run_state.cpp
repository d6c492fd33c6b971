// tandem train's checkpoints: settings and position as JSON metadata.
#include "cli/run_state.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/interrupt.h"
#include "nn/checkpoint.h"
#include "nn/serialize_private.h"
#include "tensor/core/errors.h"
#include "tensor/ops/random.h"

namespace tandem::cli {

namespace {

constexpr std::string_view kConfigKey = "tandem.train.config";
constexpr std::string_view kPositionKey = "tandem.train.position";

// 64-bit seeds and offsets go as decimal strings (JSON integers here stop at INT64_MAX).
json::Value u64(uint64_t v) { return json::Value(std::to_string(v)); }
uint64_t get_u64(const json::Value& v, std::string_view key) {
  const std::string& s = json::as_string(json::at(v, key));
  size_t used = 0;
  uint64_t x = std::stoull(s, &used);
  TANDEM_CHECK(used == s.size(), ValueError, "'", key, "' is not an unsigned integer: ", s);
  return x;
}

template <typename F>
auto reading(const std::string& source, std::string_view key, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    throw SerializationError(detail::str_cat(source, ": its '", key, "' entry is not what tandem train writes (",
                                             e.what(), "); the file is damaged or from another program"));
  }
}

}  // namespace

json::Value RunConfig::to_json() const {
  return {{"model", model},
          {"epochs", epochs},
          {"batch_size", batch_size},
          {"lr", lr},
          {"optimizer", optimizer},
          {"schedule", schedule},
          {"seed", u64(seed)},
          {"data", data},
          {"train_examples", train_examples},
          {"test_examples", test_examples},
          {"threads", threads},
          {"amp", amp},
          {"world_size", world_size}};
}

RunConfig RunConfig::from_json(const json::Value& v, const std::string& source) {
  return reading(source, kConfigKey, [&] {
    RunConfig c;
    c.model = json::as_string(json::at(v, "model"));
    c.epochs = json::as_int(json::at(v, "epochs"));
    c.batch_size = json::as_int(json::at(v, "batch_size"));
    c.lr = json::as_double(json::at(v, "lr"));
    c.optimizer = json::as_string(json::at(v, "optimizer"));
    c.schedule = json::as_string(json::at(v, "schedule"));
    c.seed = get_u64(v, "seed");
    c.data = json::as_string(json::at(v, "data"));
    c.train_examples = json::as_int(json::at(v, "train_examples"));
    c.test_examples = json::as_int(json::at(v, "test_examples"));
    c.threads = v.contains("threads") ? json::as_int(json::at(v, "threads")) : 0;
    c.amp = v.contains("amp") ? json::as_bool(json::at(v, "amp")) : false;
    c.world_size = v.contains("world_size") ? json::as_int(json::at(v, "world_size")) : 1;
    TANDEM_CHECK(c.model == "mlp" || c.model == "cnn", ValueError, "unknown model '", c.model, "'");
    TANDEM_CHECK(c.epochs > 0 && c.batch_size > 0, ValueError, "epochs and batch_size must be positive");
    return c;
  });
}

json::Value Position::to_json() const {
  json::Value v = {{"epochs_done", epochs_done},
                   {"steps_in_epoch", steps_in_epoch},
                   {"loss_sum", loss_sum},
                   {"correct", correct},
                   {"seen", seen},
                   {"elapsed_s", elapsed_s},
                   {"wait_s", wait_s},
                   {"cpu_seed", u64(cpu_seed)},
                   {"cpu_offset", u64(cpu_offset)}};
  if (cuda_generator) {
    v["cuda_seed"] = u64(cuda_generator->first);
    v["cuda_offset"] = u64(cuda_generator->second);
  }
  return v;
}

Position Position::from_json(const json::Value& v, const std::string& source) {
  return reading(source, kPositionKey, [&] {
    Position p;
    p.epochs_done = json::as_int(json::at(v, "epochs_done"));
    p.steps_in_epoch = json::as_int(json::at(v, "steps_in_epoch"));
    p.loss_sum = json::as_double(json::at(v, "loss_sum"));
    p.correct = json::as_int(json::at(v, "correct"));
    p.seen = json::as_int(json::at(v, "seen"));
    p.elapsed_s = json::as_double(json::at(v, "elapsed_s"));
    p.wait_s = json::as_double(json::at(v, "wait_s"));
    p.cpu_seed = get_u64(v, "cpu_seed");
    p.cpu_offset = get_u64(v, "cpu_offset");
    if (v.contains("cuda_seed")) p.cuda_generator = {get_u64(v, "cuda_seed"), get_u64(v, "cuda_offset")};
    TANDEM_CHECK(p.epochs_done >= 0 && p.steps_in_epoch >= 0, ValueError, "negative position");
    return p;
  });
}

void Position::capture_generators(Device device) {
  cpu_seed = default_generator().initial_seed();
  cpu_offset = default_generator().offset();
  if (device.is_cuda()) cuda_generator = {default_generator(device).initial_seed(), default_generator(device).offset()};
}

void Position::restore_generators(Device device) const {
  default_generator().manual_seed(cpu_seed);
  default_generator().set_offset(cpu_offset);
  if (device.is_cuda() && cuda_generator) {
    default_generator(device).manual_seed(cuda_generator->first);
    default_generator(device).set_offset(cuda_generator->second);
  }
}

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "checkpoint.safetensors").string();
}
std::string metrics_path(const std::string& dir) { return (std::filesystem::path(dir) / "metrics.jsonl").string(); }

void save_run(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer,
              const optim::LRScheduler* scheduler, const amp::GradScaler& scaler, const RunConfig& config,
              const Position& position) {
  nn::Checkpoint ckpt;
  ckpt.add_module(model);
  nn::add_to_checkpoint(ckpt, optimizer);
  if (scheduler != nullptr) nn::add_to_checkpoint(ckpt, *scheduler);
  if (scaler.is_enabled()) nn::add_to_checkpoint(ckpt, scaler);
  ckpt.set_int(nn::Checkpoint::kEpoch, position.epochs_done);
  nn::set_json(ckpt, kConfigKey, config.to_json());
  nn::set_json(ckpt, kPositionKey, position.to_json());
  CriticalSection hold_ctrl_c;
  ckpt.save(path);
}

RunCheckpoint read_run(const std::string& path, Device map_location) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw SerializationError(std::filesystem::exists(path, ec)
                                 ? path + ": not a file"
                                 : path + ": no such file (tandem train --out DIR writes DIR/checkpoint.safetensors)");
  nn::Checkpoint loaded;
  try {
    loaded = nn::Checkpoint::load(path, map_location);
  } catch (const SerializationError& e) {
    // A safetensors file of another kind (a plain state dict, say): say it
    // in the command's terms, not the C++ API's.
    if (std::string_view(e.what()).find("is not a training checkpoint") == std::string_view::npos) throw;
    throw SerializationError(path + ": a safetensors file, but not a checkpoint of tandem train (no '" +
                             std::string(nn::Checkpoint::kVersionKey) +
                             "' entry); give DIR/checkpoint.safetensors of "
                             "a tandem train --out DIR");
  }
  RunCheckpoint r{std::move(loaded), {}, {}};
  TANDEM_CHECK(r.checkpoint.contains(kConfigKey) && r.checkpoint.contains(kPositionKey), SerializationError, path,
               ": a Tandem checkpoint, but not one tandem train wrote (it has no '", kConfigKey,
               "' entry), so the model it holds is unknown");
  r.config = RunConfig::from_json(nn::get_json(r.checkpoint, kConfigKey), path);
  r.position = Position::from_json(nn::get_json(r.checkpoint, kPositionKey), path);
  return r;
}

}  // namespace tandem::cli

// Training checkpoints: the model, the optimizer, the scheduler and the
// epoch in one safetensors file (nn::Checkpoint's layout, nn/serialize.h),
// as PyTorch's habit of torch.save({"model": ..., "optimizer": ...,
// "scheduler": ..., "epoch": ...}). They live in nn, the layer above optim,
// so that optim includes nothing of nn.
//
//   nn::save_checkpoint("run.safetensors", *model, &opt, &sched, epoch);
//   ...
//   int64_t epoch = nn::load_checkpoint("run.safetensors", *model, &opt, &sched,
//                                       Device("cpu"));  // map_location
//
// Loading puts the model's tensors on the model's device (load_state_dict
// copies), then the optimizer state on each parameter's device
// (optim::Optimizer::load_state_dict): state follows the parameters wherever
// the model now lives. map_location says where the tensors are read to
// first; it is needed when the devices they were saved from do not exist
// here.
#pragma once

#include <optional>
#include <string>

#include "nn/serialize.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace tandem::nn {

// The optimizer's state dict into a checkpoint: state tensors as
// "optimizer.state.<i>.<name>", the groups as JSON in
// "optimizer.param_groups", its type in "optimizer.type".
void add_to_checkpoint(Checkpoint& checkpoint, const optim::Optimizer& optimizer);
// Back: a checkpoint of another optimizer type, or without one, is an error
// naming the file.
void load_from_checkpoint(const Checkpoint& checkpoint, optim::Optimizer& optimizer);
// The scheduler's state as JSON in "scheduler" ({"values": {...}, "lists":
// {...}}), its type in "scheduler.type".
void add_to_checkpoint(Checkpoint& checkpoint, const optim::LRScheduler& scheduler);
void load_from_checkpoint(const Checkpoint& checkpoint, optim::LRScheduler& scheduler);

// The GradScaler's state dict as JSON in "grad_scaler", PyTorch's keys
// ({"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
// "growth_interval": 2000, "_growth_tracker": 0}; {} from a disabled
// scaler, which an enabled one refuses to load, as in PyTorch).
void add_to_checkpoint(Checkpoint& checkpoint, const amp::GradScaler& scaler);
void load_from_checkpoint(const Checkpoint& checkpoint, amp::GradScaler& scaler);

// All of it in one atomic write; optimizer, scheduler and scaler may be null.
void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer = nullptr,
                     const optim::LRScheduler* scheduler = nullptr, int64_t epoch = 0,
                     const amp::GradScaler* scaler = nullptr);
// Loads what save_checkpoint wrote into the given objects (null ones are
// skipped) and returns the epoch. Nothing is changed unless the model's
// state loads (strict as load_state_dict).
int64_t load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer = nullptr,
                        optim::LRScheduler* scheduler = nullptr, std::optional<Device> map_location = std::nullopt,
                        bool strict = true, amp::GradScaler* scaler = nullptr);

}  // namespace tandem::nn

// Deferred device checks: how a kernel that finds bad input (an index out of
// range) reports it without making the host wait. Plain C++, in every build.
//
// A GPU kernel cannot throw, and reading a flag back after each launch costs
// a host synchronisation (the index ops, embedding and the class losses made
// three in a training step). Instead, the thread that finds the first bad
// value writes it into its device's record, in pinned host memory; the host
// looks at the record each time it next waits for that device (the blocking
// copies: .item(), .cpu(), .to(); cuda::synchronize; Stream and Event
// synchronize, and query() when it answers "done"; not an upload) and throws the IndexError
// there, once, with the words the op would have used, plus where it was
// found and where it was reported; the device goes on working after it.
// No result of a bad launch reaches the host (a copy out of the device, or
// a wait) before its error is thrown. The record holds one error: the first
// since the last report is thrown (on a GPU, whichever thread got there
// first), and a second bad launch before that wait is not reported on its
// own; once an error is thrown, the results of work queued before the
// report are unspecified.
//
// TANDEM_CUDA_SYNC_CHECKS=1 makes each checked launch wait and report at
// the op itself (a host synchronisation each, as before), like PyTorch's
// CUDA_LAUNCH_BLOCKING=1: for finding which line made the bad index.
//
// Emulated devices run the CPU kernels, which report through the same record
// (found_bad_value), so a test sees an error at the same place on every
// device mode. A cpu tensor's kernel throws at once.
#pragma once

#include <cstdint>

namespace tandem::cuda::detail {

// How the message reads (the op's own words, kept in device_check.cpp):
enum class CheckKind : uint32_t {
  None = 0,
  // "<name>(): index <value> is out of bounds for dimension <dim> with size <size>"
  Index = 1,
  // "embedding(): index out of range in self (index <value> of a table of <size> rows, ...)"
  Embedding = 2,
  // "Target <value> is out of bounds. (<name>: class indices must lie in [0, <size>) ...
  //  or equal ignore_index=<extra>)": the class losses, through gather
  ClassTarget = 3,
  // "embedding_backward(): index out of range in self (index <value> of a table of <size> rows, num_weights; ...)"
  EmbeddingBackward = 4,
};

// One device's record: pinned host memory on a GPU (kernels write it through
// unified addressing, the host reads it without a copy), plain host memory
// on an emulated device.
struct DeviceCheckRecord {
  // The report in progress, counted from 1; the host moves it on when it has
  // consumed an error, so the next kernel can claim a new one (see claim).
  unsigned long long generation;  // the claim's type, which atomicMax takes
  uint32_t kind;                  // CheckKind; 0 while none is recorded. Written last.
  int32_t dim;
  int64_t value, size, extra;
  const char* name;  // a string literal: the op
};

// A kernel's argument: where to report, and what to say. Trivially copyable.
struct DeviceCheck {
  DeviceCheckRecord* record = nullptr;
  // Device memory (a GPU only): the highest generation a thread has claimed.
  // A thread that finds a bad value claims the record's generation with
  // atomicMax; only the first one there writes the record.
  unsigned long long* claim = nullptr;
  uint32_t kind = 0;
  int32_t dim = 0;
  int64_t size = 0, extra = 0;
  const char* name = nullptr;
};

// The check for a launch on device that reports as kind, name (a string
// literal), dim, size. The record is made on the device's first checked
// launch (a GPU: 48 bytes pinned, 8 on the device, zeroed with one blocking
// copy and a wait: a host synchronisation, once per device and program). A
// ClassTargetScope on this thread turns Index checks into ClassTarget ones.
DeviceCheck device_check(int device, CheckKind kind, const char* name, int64_t dim, int64_t size);

// The CPU kernels' side, after their loop: value was bad. For a cpu tensor
// (cuda_device -1) throws at once; for a cuda tensor on an emulated device
// records it (the first one since the last report wins) for the next wait,
// or throws at once under TANDEM_CUDA_SYNC_CHECKS=1.
void found_bad_value(int cuda_device, CheckKind kind, const char* name, int64_t dim, int64_t size, int64_t value);

// After the host has waited for device (where: the wait, e.g. ".item()" or
// "cuda::synchronize"): throws the IndexError a kernel recorded there since
// the last report, if any, and clears it. Cheap: one load from host memory.
void throw_device_error(int device, const char* where);

// TANDEM_CUDA_SYNC_CHECKS=1: the launchers wait for each checked launch and
// report its error there. Read once.
bool sync_checks();

// While one lives on this thread, every Index check (gather, index_select,
// scatter_add) reports as the class losses' target check, naming op:
// nn/functional/loss.cpp wraps its gather of the target classes (and the
// index_select of their weights) in one, and nothing else.
class ClassTargetScope {
 public:
  ClassTargetScope(const char* op, int64_t ignore_index);
  ~ClassTargetScope();
  ClassTargetScope(const ClassTargetScope&) = delete;
  ClassTargetScope& operator=(const ClassTargetScope&) = delete;

 private:
  const char* previous_op_;
  int64_t previous_ignore_;
};

}  // namespace tandem::cuda::detail

// What the backends and the rendezvous share inside the library: the checks
// every collective makes at its door, its description for messages, and
// the default group's slot. Not installed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace tandem::distributed::detail {

// Defined, one dtype, one device (and one shape when same_shape): the
// expected-versus-got errors name the op and the tensor's index.
void check_collective_tensors(const char* op, const std::vector<Tensor>& tensors, bool same_shape);
// "float32, 1024 elements" (", on cuda:0" for a cuda tensor).
std::string describe_tensors(const std::vector<Tensor>& tensors);

// Marks the calls on this thread, while it lives, as ones that wait for
// their collective at once (torch.distributed's functions without async_op):
// a backend may then run the collective on the caller's thread.
class BlockingScope {
 public:
  explicit BlockingScope(bool on = true);
  ~BlockingScope();
  BlockingScope(const BlockingScope&) = delete;
  BlockingScope& operator=(const BlockingScope&) = delete;
  static bool active();

 private:
  bool old_;
};

void set_default_group(std::shared_ptr<ProcessGroup> group, std::shared_ptr<Store> store, std::string backend);
bool default_group_exists();
std::shared_ptr<Store> default_store();

}  // namespace tandem::distributed::detail

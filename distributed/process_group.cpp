// Work, the ProcessGroup base, the default group and torch.distributed's
// free functions over it. The backends are in gloo.cpp; the rendezvous
// (init_process_group) in init.cpp.
#include "distributed/process_group.h"

#include <atomic>

#include "distributed/process_group_private.h"
#include "tensor/core/errors.h"

namespace tandem::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
  }
  return "?";
}

// ---- Work

Work::Work(std::string what, std::vector<Tensor> result) : what_(std::move(what)), result_(std::move(result)) {}

bool Work::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool Work::is_success() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !error_;
}

std::exception_ptr Work::exception() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

bool Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return completed_; });
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::vector<Tensor> Work::result() {
  wait();
  return result_;
}

void Work::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  started_ = std::chrono::steady_clock::now();
}

double Work::duration_s() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!completed_ || started_ == std::chrono::steady_clock::time_point{}) return 0;
  return std::chrono::duration<double>(finished_ - started_).count();
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = std::chrono::steady_clock::now();
    completed_ = true;
    error_ = std::move(error);
  }
  done_.notify_all();
}

// ---- ProcessGroup

ProcessGroup::ProcessGroup(int rank, int size) : rank_(rank), size_(size) {
  TANDEM_CHECK(size >= 1, ValueError, "ProcessGroup: the world size must be at least 1, got ", size);
  TANDEM_CHECK(rank >= 0 && rank < size, ValueError, "ProcessGroup: invalid rank ", rank,
               ", rank should be in the interval [0, ", size - 1, "]");
}

namespace detail {

void check_collective_tensors(const char* op, const std::vector<Tensor>& tensors, bool same_shape) {
  TANDEM_CHECK(!tensors.empty(), ValueError, op, ": got no tensors");
  const Tensor& first = tensors[0];
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TANDEM_CHECK(t.defined(), ValueError, op, ": tensor ", i, " is undefined");
    TANDEM_CHECK(t.dtype() == first.dtype(), DtypeError, op, ": every tensor must have the same dtype, but tensor ", i,
                 " is ", dtype_name(t.dtype()), " and tensor 0 is ", dtype_name(first.dtype()));
    TANDEM_CHECK(t.device() == first.device(), DeviceError, op,
                 ": every tensor must be on the same device, but tensor ", i, " is on ", t.device().str(),
                 " and tensor 0 on ", first.device().str());
    TANDEM_CHECK(!same_shape || t.sizes() == first.sizes(), ShapeError, op,
                 ": every tensor must have the same shape, but tensor ", i, " is ", shape_str(t.sizes()),
                 " and tensor 0 is ", shape_str(first.sizes()));
  }
}

namespace {
thread_local bool blocking_call = false;
}

BlockingScope::BlockingScope(bool on) : old_(blocking_call) { blocking_call = on; }
BlockingScope::~BlockingScope() { blocking_call = old_; }
bool BlockingScope::active() { return blocking_call; }

std::string describe_tensors(const std::vector<Tensor>& tensors) {
  int64_t n = 0;
  for (const Tensor& t : tensors) n += t.numel();
  return tandem::detail::str_cat(dtype_name(tensors[0].dtype()), ", ", n, n == 1 ? " element" : " elements",
                                 tensors[0].device().is_cpu() ? "" : " on " + tensors[0].device().str());
}

}  // namespace detail

// ---- the default group

namespace {

struct World {
  std::mutex mutex;
  std::shared_ptr<ProcessGroup> group;
  std::shared_ptr<Store> store;
  std::string backend;
};

World& world() {
  static World w;
  return w;
}

}  // namespace

namespace detail {

void set_default_group(std::shared_ptr<ProcessGroup> group, std::shared_ptr<Store> store, std::string backend) {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mutex);
  TANDEM_CHECK(!w.group, ValueError,
               "init_process_group: trying to initialize the default process group twice (this process is rank ",
               w.group ? w.group->getRank() : -1, " of a ", w.backend,
               " group already); call destroy_process_group() first");
  w.group = std::move(group);
  w.store = std::move(store);
  w.backend = std::move(backend);
}

bool default_group_exists() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mutex);
  return w.group != nullptr;
}

std::shared_ptr<Store> default_store() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mutex);
  return w.store;
}

}  // namespace detail

bool is_initialized() { return detail::default_group_exists(); }

void destroy_process_group() {
  World& w = world();
  std::shared_ptr<ProcessGroup> group;
  std::shared_ptr<Store> store;
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    TANDEM_CHECK(w.group != nullptr, ValueError,
                 "destroy_process_group: Default process group has not been initialized, please make sure to call "
                 "init_process_group.");
    group = std::move(w.group);
    store = std::move(w.store);
    w.backend.clear();
  }
  // The group's destructor finishes its queued collectives and joins its
  // worker; the store goes after it.
  group.reset();
  store.reset();
}

std::shared_ptr<ProcessGroup> default_group() {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mutex);
  TANDEM_CHECK(w.group != nullptr, ValueError,
               "Default process group has not been initialized, please make sure to call init_process_group.");
  return w.group;
}

int get_rank() { return default_group()->getRank(); }
int get_world_size() { return default_group()->getSize(); }
std::string get_backend() { return default_group()->getBackendName(); }

namespace {

std::shared_ptr<ProcessGroup> group_or_default(std::shared_ptr<ProcessGroup> group) {
  return group ? std::move(group) : default_group();
}

std::shared_ptr<Work> finish(std::shared_ptr<Work> work, bool async_op) {
  if (!async_op) work->wait();
  return work;
}

}  // namespace

std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op, bool async_op, std::shared_ptr<ProcessGroup> group) {
  std::vector<Tensor> tensors{tensor};
  AllreduceOptions opts;
  opts.reduceOp = op;
  detail::BlockingScope blocking(!async_op);
  return finish(group_or_default(std::move(group))->allreduce(tensors, opts), async_op);
}

std::shared_ptr<Work> broadcast(Tensor& tensor, int src, bool async_op, std::shared_ptr<ProcessGroup> group) {
  std::vector<Tensor> tensors{tensor};
  BroadcastOptions opts;
  opts.rootRank = src;
  detail::BlockingScope blocking(!async_op);
  return finish(group_or_default(std::move(group))->broadcast(tensors, opts), async_op);
}

std::shared_ptr<Work> all_gather(std::vector<Tensor>& tensor_list, const Tensor& tensor, bool async_op,
                                 std::shared_ptr<ProcessGroup> group) {
  std::vector<std::vector<Tensor>> outputs{tensor_list};
  std::vector<Tensor> inputs{tensor};
  detail::BlockingScope blocking(!async_op);
  return finish(group_or_default(std::move(group))->allgather(outputs, inputs), async_op);
}

std::shared_ptr<Work> reduce_scatter(Tensor& output, std::vector<Tensor>& input_list, ReduceOp op, bool async_op,
                                     std::shared_ptr<ProcessGroup> group) {
  std::vector<Tensor> outputs{output};
  std::vector<std::vector<Tensor>> inputs{input_list};
  ReduceScatterOptions opts;
  opts.reduceOp = op;
  detail::BlockingScope blocking(!async_op);
  return finish(group_or_default(std::move(group))->reduce_scatter(outputs, inputs, opts), async_op);
}

std::shared_ptr<Work> barrier(bool async_op, std::shared_ptr<ProcessGroup> group) {
  detail::BlockingScope blocking(!async_op);
  return finish(group_or_default(std::move(group))->barrier(), async_op);
}

#ifndef TANDEM_WITH_GLOO
std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<Store>, int, int, std::chrono::milliseconds) {
  TANDEM_CHECK(false, NotImplementedError,
               "The gloo backend of tandem::distributed is not built: this Tandem was configured without Gloo. "
               "Install libgloo-dev (scripts/install-deps.sh does) and reconfigure (meson setup --reconfigure)");
  return nullptr;
}
#endif

}  // namespace tandem::distributed

// Process groups and collectives (libtorch's c10d names, PyTorch's
// torch.distributed functions): a ProcessGroup joins `size` processes, each
// with a rank, through a backend (Gloo for cpu tensors); a collective is
// queued on the group's worker and returns a Work to wait on. Collectives
// run in the order they were called, which must be the same on every rank.
//
//   distributed::init_process_group("gloo");              // env:// as torchrun sets it
//   distributed::all_reduce(t);                            // t = the sum over ranks
//   auto work = distributed::all_reduce(g, distributed::ReduceOp::AVG, /*async_op=*/true);
//   ... work->wait();
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/store.h"
#include "tensor/core/arg.h"
#include "tensor/core/tensor.h"

namespace tandem::distributed {

// c10d's values. AVG is floating point only (the sum, then divided by the
// group's size); PyTorch's Gloo has no AVG, its NCCL does.
enum class ReduceOp { SUM, AVG, PRODUCT, MIN, MAX };
const char* reduce_op_name(ReduceOp op);  // "SUM"

// PyTorch's default collective timeout for Gloo (30 minutes).
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(30);
// An option's timeout left at this: the group's.
inline constexpr std::chrono::milliseconds kUnsetTimeout{-1};

struct AllreduceOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct BroadcastOptions {
  int64_t rootRank = 0;
  int64_t rootTensor = 0;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct AllgatherOptions {
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct ReduceScatterOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kUnsetTimeout;
};
struct BarrierOptions {
  std::chrono::milliseconds timeout = kUnsetTimeout;
};

// One collective in flight. wait() blocks until it is done and rethrows its
// error (a DistributedError); the tensors it was given hold the result then,
// and not before.
class Work {
 public:
  Work(std::string what, std::vector<Tensor> result);
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  bool is_completed();
  bool is_success();               // completed without error
  std::exception_ptr exception();  // null unless it failed
  // Waits (without limit: the collective has its own timeout) and rethrows
  // the collective's error. Returns true, as c10d's.
  bool wait();
  // The tensors that hold the result (after wait()).
  std::vector<Tensor> result();
  const std::string& what() const { return what_; }
  // Seconds from the backend starting it to its end (0 until it is done):
  // the communication itself, not the time it waited in the queue.
  double duration_s();

  // The backend's side: marks it started, and done (with the error if it failed).
  void start();
  void finish(std::exception_ptr error = nullptr);

 private:
  std::string what_;  // "allreduce #3 (SUM, float32, 1024 elements)"
  std::vector<Tensor> result_;
  std::mutex mutex_;
  std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
  std::chrono::steady_clock::time_point started_, finished_;
};

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int getRank() const { return rank_; }
  int getSize() const { return size_; }
  virtual std::string getBackendName() const = 0;  // "gloo"

  // Each tensor of `tensors` (same shape and dtype, one device type) ends up
  // holding the reduction over every rank's tensors, all of them (c10d's
  // multi-tensor form; one tensor is the usual call).
  virtual std::shared_ptr<Work> allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts = {}) = 0;
  // Each tensor reduced over the ranks on its own, in one exchange: the
  // tensors may differ in shape (not in dtype or device).
  virtual std::shared_ptr<Work> allreduce_coalesced(std::vector<Tensor>& tensors,
                                                    const AllreduceOptions& opts = {}) = 0;
  // Every rank's tensors become the root rank's tensors[rootTensor].
  virtual std::shared_ptr<Work> broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts = {}) = 0;
  // outputs[0][r] gets rank r's inputs[0] (one input tensor).
  virtual std::shared_ptr<Work> allgather(std::vector<std::vector<Tensor>>& outputs, std::vector<Tensor>& inputs,
                                          const AllgatherOptions& opts = {}) = 0;
  // outputs[0] gets the reduction over ranks of their inputs[0][rank].
  virtual std::shared_ptr<Work> reduce_scatter(std::vector<Tensor>& outputs, std::vector<std::vector<Tensor>>& inputs,
                                               const ReduceScatterOptions& opts = {}) = 0;
  virtual std::shared_ptr<Work> barrier(const BarrierOptions& opts = {}) = 0;

 protected:
  int rank_;
  int size_;
};

// ---- the default group, as torch.distributed

struct InitProcessGroupOptions {
  // env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; or the ranks mpirun
  // and Slurm set), tcp://HOST:PORT, or file:///PATH (a folder every rank
  // sees). Ignored when a store is given.
  TANDEM_ARG(std::string, init_method) = "env://";
  // -1: from the environment (env://) or the init method.
  TANDEM_ARG(int, world_size) = -1;
  TANDEM_ARG(int, rank) = -1;
  // For the rendezvous and every collective.
  TANDEM_ARG(std::chrono::milliseconds, timeout) = kDefaultTimeout;
  // A store the caller made (then world_size and rank must be given).
  TANDEM_ARG(std::shared_ptr<Store>, store) = nullptr;
};

// Joins this process to the default group: rendezvous through the store,
// then the backend's connections. backend: "gloo" ("nccl" and "mpi" are not
// built yet: NotImplementedError). Twice without destroy_process_group is
// an error.
void init_process_group(const std::string& backend, const InitProcessGroupOptions& options = {});
bool is_initialized();
// Leaves the default group (waits for its queued collectives first).
void destroy_process_group();
// The default group; a ValueError with PyTorch's words when there is none.
std::shared_ptr<ProcessGroup> default_group();
int get_rank();
int get_world_size();
std::string get_backend();

// The same, on the default group (or `group`), as torch.distributed's
// functions: with async_op the collective's Work, else it is waited for.
std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM, bool async_op = false,
                                 std::shared_ptr<ProcessGroup> group = nullptr);
std::shared_ptr<Work> broadcast(Tensor& tensor, int src, bool async_op = false,
                                std::shared_ptr<ProcessGroup> group = nullptr);
// tensor_list: one tensor per rank, each of tensor's shape and dtype.
std::shared_ptr<Work> all_gather(std::vector<Tensor>& tensor_list, const Tensor& tensor, bool async_op = false,
                                 std::shared_ptr<ProcessGroup> group = nullptr);
// input_list: one tensor per rank; output gets the reduction of every
// rank's input_list[this rank].
std::shared_ptr<Work> reduce_scatter(Tensor& output, std::vector<Tensor>& input_list, ReduceOp op = ReduceOp::SUM,
                                     bool async_op = false, std::shared_ptr<ProcessGroup> group = nullptr);
std::shared_ptr<Work> barrier(bool async_op = false, std::shared_ptr<ProcessGroup> group = nullptr);

// A Gloo group over `store` (init_process_group makes the default one this
// way); NotImplementedError in a build without Gloo.
std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<Store> store, int rank, int size,
                                              std::chrono::milliseconds timeout = kDefaultTimeout);

}  // namespace tandem::distributed

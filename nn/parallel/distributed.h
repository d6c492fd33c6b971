// nn::parallel::DistributedDataParallel: PyTorch's DDP for a Tandem module.
// One process per device, each with its own shard of the batch; after
// backward every rank holds the gradients averaged over all ranks, so the
// same optimizer step keeps the replicas equal.
//
//   distributed::init_process_group("gloo");
//   auto model = Net();
//   nn::parallel::DistributedDataParallel ddp(model.ptr());
//   Tensor loss = loss_fn(ddp(x), y);
//   loss.backward();          // the buckets' allreduces overlap this pass
//   optimizer.step();
//
// At construction: every rank's parameters are checked to match rank 0's
// (names, shapes, dtypes), then parameters and buffers are broadcast from
// rank 0. Gradients go in buckets, in reverse parameter order (the order a
// sequential model produces them in backward): the first bucket holds up to
// 1 MiB, the others bucket_cap_mb, one dtype and device per bucket. When a
// bucket's last gradient is accumulated, its allreduce starts on the process
// group's worker while backward goes on; at the end of the pass each
// gradient is replaced by its average over the ranks. docs/distributed.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/hooks.h"
#include "distributed/process_group.h"
#include "nn/module.h"
#include "tensor/core/arg.h"
#include "tensor/core/grad_mode.h"

namespace tandem::nn::parallel {

struct DistributedDataParallelOptions {
  // The group to average over: the default one when null.
  TANDEM_ARG(std::shared_ptr<distributed::ProcessGroup>, process_group) = nullptr;
  // The size of every bucket after the first (PyTorch's 25).
  TANDEM_ARG(double, bucket_cap_mb) = 25;
  // The first bucket's size (PyTorch's _DEFAULT_FIRST_BUCKET_BYTES): small, so
  // that the first allreduce starts early in backward.
  TANDEM_ARG(double, first_bucket_cap_mb) = 1;
  // Parameters that get no gradient in a pass are allowed (their buckets
  // take their .grad() as it is, zeros when there is none); one used on no
  // rank keeps its .grad() as it was.
  // Without it, a pass that leaves a parameter without a gradient throws,
  // naming it.
  TANDEM_ARG(bool, find_unused_parameters) = false;
  // Rank 0's buffers (BatchNorm's running statistics) copied to every rank
  // before each forward in training.
  TANDEM_ARG(bool, broadcast_buffers) = true;
};

// The buckets, the hooks and the allreduces; DistributedDataParallel drives it.
class Reducer {
 public:
  Reducer(const OrderedDict<std::string, Tensor>& named_parameters, std::shared_ptr<distributed::ProcessGroup> group,
          const DistributedDataParallelOptions& options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Before a forward: checks that the last pass that started reducing
  // finished, then arms the hooks for this one (when `sync` and grad mode
  // is on).
  void prepare_for_forward(bool sync);
  // Each bucket's parameters, in the order the buckets are reduced, as
  // indices into the parameters that require grad (named_parameters' order).
  std::vector<std::vector<size_t>> bucket_indices() const;

  // How much of the gradients' communication backward hid: the buckets'
  // allreduce time, and the part of it the end of the pass still waited for.
  struct CommStats {
    int64_t passes = 0;      // backward passes that reduced
    double allreduce_s = 0;  // the buckets' allreduces, start to end
    double exposed_s = 0;    // waited for after backward's last gradient
  };
  CommStats comm_stats() const;
  void reset_comm_stats();

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::vector<autograd::RemovableHandle> hooks_;
};

class DistributedDataParallelImpl : public Module {
 public:
  template <typename M>
  explicit DistributedDataParallelImpl(std::shared_ptr<M> module, DistributedDataParallelOptions options = {})
      : Module("DistributedDataParallel") {
    if constexpr (requires(M & m, const Tensor& x) {
                    { m.forward(x) } -> std::convertible_to<Tensor>;
                  }) {
      forward_ = [m = module.get()](const Tensor& x) -> Tensor { return m->forward(x); };
    }
    init(std::move(module), std::move(options));
  }
  template <typename Holder>
  requires requires(const Holder& h) { h.ptr(); }
  explicit DistributedDataParallelImpl(const Holder& module, DistributedDataParallelOptions options = {})
      : DistributedDataParallelImpl(module.ptr(), std::move(options)) {}

  // The wrapped module's forward(x), with DDP's work around it.
  Tensor forward(const Tensor& x);
  // Any other forward: ddp->run([&] { return model->forward(a, b); }).
  template <typename F>
  decltype(auto) run(F&& forward) {
    before_forward();
    return std::forward<F>(forward)();
  }

  // Gradients accumulate locally, without communication, while a guard
  // lives (PyTorch's no_sync()): the next pass outside one averages the sum.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallelImpl& ddp) : ddp_(ddp), old_(ddp.sync_) { ddp.sync_ = false; }
    ~NoSyncGuard() { ddp_.sync_ = old_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallelImpl& ddp_;
    bool old_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  const std::shared_ptr<Module>& module() const { return module_; }
  const std::shared_ptr<distributed::ProcessGroup>& process_group() const { return group_; }
  const DistributedDataParallelOptions& options() const { return options_; }
  std::vector<std::vector<size_t>> bucket_indices() const { return reducer_->bucket_indices(); }
  Reducer::CommStats comm_stats() const { return reducer_->comm_stats(); }
  void reset_comm_stats() { reducer_->reset_comm_stats(); }

 private:
  void init(std::shared_ptr<Module> module, DistributedDataParallelOptions options);
  void before_forward();

  std::shared_ptr<Module> module_;
  std::function<Tensor(const Tensor&)> forward_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<distributed::ProcessGroup> group_;
  std::unique_ptr<Reducer> reducer_;
  bool sync_ = true;
};
TANDEM_MODULE(DistributedDataParallel);

}  // namespace tandem::nn::parallel

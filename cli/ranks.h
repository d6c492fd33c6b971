// tandem train as one rank of a distributed run (under --nproc-per-node,
// torchrun or mpirun): which rank this process is, its device, and the few
// agreements the ranks make besides DDP's gradients (when to stop, the
// epoch's sums, what the settings table says of each rank).
#pragma once

#include <memory>
#include <string>

#include "distributed/process_group.h"
#include "tensor/core/device.h"

namespace tandem::cli {

struct Ranks {
  bool on = false;  // WORLD_SIZE (or mpirun's) > 1 in the environment
  int rank = 0, world = 1, local_rank = 0, local_world = 1;
  std::string backend;  // "gloo"

  // From torchrun's variables, then mpirun's; off when the world is one process.
  static Ranks from_env(const std::string& backend_flag);
  // The device flag of a rank: auto and cuda mean cuda:LOCAL_RANK where
  // there is a GPU; one cuda:N for several local ranks is refused.
  std::string device_flag(const std::string& flag) const;
  // Joins the default group (init_process_group, env://).
  void join() const;
  // "2 ranks (gloo): rank 0 cpu, rank 1 cpu" (a collective: every rank calls it).
  std::string describe(const Device& device) const;
};

// Every rank stops at the same step, for the same reason: each step's local
// wish (kGoOn, kStopSteps for --stop-after-steps, kStopInterrupt for Ctrl-C)
// is combined over the ranks (the largest wins) in an allreduce that runs
// during the next step, so the answer lags one step and costs the step no wait.
inline constexpr int kGoOn = 0, kStopSteps = 1, kStopInterrupt = 2;
class StopAgreement {
 public:
  explicit StopAgreement(const Ranks& ranks) : ranks_(ranks) {}
  // The ranks' agreed answer for the previous step's wishes.
  int step(int wish);
  // At the end of an epoch: every wish so far, waited for.
  int now(int wish);

 private:
  const Ranks& ranks_;
  Tensor flag_;
  std::shared_ptr<distributed::Work> work_;
};

// The flags a distributed run refuses, checked by the launcher before it
// starts any rank and by each rank (UsageError): a global batch that does not
// split evenly, one cuda:N for several local ranks.
void check_batch_split(int64_t batch_size, int world);
void check_device_flag(const std::string& flag, int local_world);

// loss_sum, correct and seen summed over the ranks (a collective).
void sum_over_ranks(const Ranks& ranks, double& loss_sum, double& correct, int64_t& seen);

}  // namespace tandem::cli

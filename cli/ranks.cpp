// One rank of a distributed tandem train (see ranks.h).
#include "cli/ranks.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cli/common.h"
#include "tensor/ops/cuda.h"
#include "tensor/ops/factory.h"

namespace tandem::cli {

namespace {

int env_int(std::initializer_list<const char*> names, int fallback) {
  // A value that is not a number is left for init_process_group to refuse.

  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return std::atoi(v);
  return fallback;
}

}  // namespace

Ranks Ranks::from_env(const std::string& backend_flag) {
  Ranks r;
  r.world = env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, 1);
  r.on = r.world > 1;
  if (!r.on) return r;
  r.rank = env_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, 0);
  r.local_rank = env_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, r.rank);
  r.local_world = env_int({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, r.world);
  // NCCL and MPI are not built yet: auto is Gloo, which takes cuda tensors
  // through host memory.
  r.backend = backend_flag == "auto" ? "gloo" : backend_flag;
  return r;
}

std::string Ranks::device_flag(const std::string& flag) const {
  if (!on) return flag;
  if ((flag == "auto" || flag == "cuda") && cuda::is_available()) {
    int n = cuda::device_count();
    if (local_rank >= n)
      throw UsageError("rank " + std::to_string(rank) + " (local rank " + std::to_string(local_rank) +
                       ") has no GPU of its own: " + std::to_string(n) + " cuda device(s) for " +
                       std::to_string(local_world) + " local ranks. Start at most " + std::to_string(n) +
                       " ranks on this machine (--nproc-per-node), or train on the cpu (--device cpu)");
    return "cuda:" + std::to_string(local_rank);
  }
  check_device_flag(flag, local_world);
  return flag;
}

void check_device_flag(const std::string& flag, int local_world) {
  if (flag.rfind("cuda:", 0) == 0 && local_world > 1)
    throw UsageError("--device " + flag + " with " + std::to_string(local_world) +
                     " local ranks would put every rank on " + flag +
                     ": each process owns one device. Use --device cuda (rank r takes cuda:LOCAL_RANK) or --device "
                     "cpu");
}

void check_batch_split(int64_t batch_size, int world) {
  if (batch_size % world == 0) return;
  throw UsageError("--batch-size " + std::to_string(batch_size) + " does not divide among " + std::to_string(world) +
                   " ranks: the global batch is split evenly, so give a multiple of " + std::to_string(world) +
                   " (such as " + std::to_string(batch_size / world * world) + " or " +
                   std::to_string((batch_size / world + 1) * world) + ")");
}

void Ranks::join() const { distributed::init_process_group(backend); }

std::string Ranks::describe(const Device& device) const {
  // Each rank's device name, gathered as fixed-size byte rows.
  constexpr int64_t kWidth = 32;
  Tensor mine = zeros({kWidth}, TensorOptions(kUInt8));
  std::string name = device.str().substr(0, kWidth - 1);
  std::memcpy(mine.data_ptr<uint8_t>(), name.data(), name.size());
  std::vector<Tensor> all;
  for (int r = 0; r < world; ++r) all.push_back(empty({kWidth}, TensorOptions(kUInt8)));
  distributed::all_gather(all, mine);
  std::string text = std::to_string(world) + " ranks (" + backend + "):";
  for (int r = 0; r < world; ++r)
    text += std::string(r ? "," : "") + " rank " + std::to_string(r) + " " +
            reinterpret_cast<const char*>(all[static_cast<size_t>(r)].data_ptr<uint8_t>());
  return text;
}

int StopAgreement::step(int wish) {
  if (!ranks_.on) return wish;
  int agreed = kGoOn;
  if (work_) {
    work_->wait();
    agreed = flag_.item<int32_t>();
  }
  flag_ = full({1}, static_cast<double>(wish), TensorOptions(kInt32));
  work_ = distributed::all_reduce(flag_, distributed::ReduceOp::MAX, /*async_op=*/true);
  return agreed;
}

int StopAgreement::now(int wish) {
  if (!ranks_.on) return wish;
  int pending = kGoOn;
  if (work_) {
    work_->wait();
    pending = flag_.item<int32_t>();
    work_.reset();
  }
  Tensor f = full({1}, static_cast<double>(std::max(wish, pending)), TensorOptions(kInt32));
  distributed::all_reduce(f, distributed::ReduceOp::MAX);
  return f.item<int32_t>();
}

void sum_over_ranks(const Ranks& ranks, double& loss_sum, double& correct, int64_t& seen) {
  if (!ranks.on) return;
  Tensor t = empty({3}, TensorOptions(kFloat64));
  double* p = t.data_ptr<double>();
  p[0] = loss_sum;
  p[1] = correct;
  p[2] = static_cast<double>(seen);
  distributed::all_reduce(t);
  loss_sum = p[0];
  correct = p[1];
  seen = static_cast<int64_t>(p[2]);
}

}  // namespace tandem::cli

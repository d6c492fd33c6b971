// DistributedSampler: PyTorch's assignment of an epoch's indices to ranks,
// its argument checks and the set_epoch warning; and the epoch order that it
// shares with the DataLoader's shuffle.
#include "data/distributed_sampler.h"

#include <iostream>
#include <numeric>
#include <utility>

#include "data/loader_state.h"
#include "distributed/process_group.h"
#include "tensor/core/errors.h"
#include "tensor/core/philox.h"

namespace tandem::data {

namespace detail {
std::vector<size_t> epoch_order(size_t n, bool shuffle, uint64_t seed, uint64_t epoch) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  if (!shuffle) return order;
  uint64_t key = mix_seed(seed, epoch, ~uint64_t{0});
  for (size_t i = n; i > 1; --i) {
    Philox4x32 r = philox(i - 1, 0, key);
    auto j = static_cast<size_t>(randint_from_u64(philox_u64(r.w[0], r.w[1]), 0, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}
}  // namespace detail

namespace {

// num_replicas and rank, when not given: the default process group's world
// size and rank, as PyTorch's.
std::pair<int64_t, int64_t> default_rank_and_world() {
  TANDEM_CHECK(distributed::is_initialized(), ValueError,
               "DistributedSampler: Default process group has not been initialized, please make sure to call "
               "init_process_group. num_replicas and rank default to its world size and rank; without a process "
               "group, pass both (DistributedSamplerOptions().num_replicas(R).rank(r))");
  return {distributed::get_rank(), distributed::get_world_size()};
}

size_t sized(const Dataset& dataset) {
  std::optional<size_t> n = dataset.size();
  TANDEM_CHECK(n.has_value(), ValueError, "DistributedSampler: ", dataset.name(),
               " does not know its size (size() returned nullopt); a DistributedSampler needs it to split the "
               "indices between ranks");
  return *n;
}

}  // namespace

DistributedSampler::DistributedSampler(size_t dataset_size, DistributedSamplerOptions options)
    : dataset_size_(dataset_size), shuffle_(options.shuffle()), seed_(options.seed()), drop_last_(options.drop_last()) {
  std::optional<int64_t> num_replicas = options.num_replicas(), rank = options.rank();
  if (!num_replicas || !rank) {
    auto [default_rank, world_size] = default_rank_and_world();
    if (!num_replicas) num_replicas = world_size;
    if (!rank) rank = default_rank;
  }
  TANDEM_CHECK(
      *num_replicas >= 1, ValueError,
      "DistributedSampler: num_replicas should be a positive integer value, but got num_replicas=", *num_replicas);
  TANDEM_CHECK(*rank >= 0 && *rank < *num_replicas, ValueError, "DistributedSampler: Invalid rank ", *rank,
               ", rank should be in the interval [0, ", *num_replicas - 1, "]");
  num_replicas_ = *num_replicas;
  rank_ = *rank;
  auto replicas = static_cast<size_t>(num_replicas_);
  // PyTorch's ceil((N - R) / R) with drop_last and N % R != 0 is floor(N / R)
  // (0 when N < R), which is also ceil(N / R) when R divides N.
  num_samples_ = drop_last_ ? dataset_size_ / replicas : (dataset_size_ + replicas - 1) / replicas;
}

DistributedSampler::DistributedSampler(const Dataset& dataset, DistributedSamplerOptions options)
    : DistributedSampler(sized(dataset), std::move(options)) {}

std::vector<size_t> DistributedSampler::indices() {
  if (shuffle_ && asked_since_set_epoch_ && !warned_) {
    warned_ = true;
    std::cerr << "tandem: warning: DistributedSampler: the indices of epoch " << epoch_
              << " were asked for again without set_epoch() in between, so this epoch repeats the previous one's "
                 "order, and every later epoch will too. Call sampler->set_epoch(epoch) at the start of each epoch "
                 "(as PyTorch's DistributedSampler needs) to shuffle each one anew. Printed once per sampler.\n";
  }
  asked_since_set_epoch_ = true;
  std::vector<size_t> order = detail::epoch_order(dataset_size_, shuffle_, seed_, epoch_);
  size_t total = total_size();
  if (total > order.size()) {
    // PyTorch's indices += (indices * ceil(padding / N))[:padding]: whole
    // copies when the padding exceeds N (N = 2, R = 5 pads 0 1 0 1 0).
    size_t n = order.size();
    order.reserve(total);
    for (size_t i = 0; order.size() < total; ++i) order.push_back(order[i % n]);
  } else {
    order.resize(total);
  }
  std::vector<size_t> mine;
  mine.reserve(num_samples_);
  for (size_t p = static_cast<size_t>(rank_); p < total; p += static_cast<size_t>(num_replicas_))
    mine.push_back(order[p]);
  TANDEM_INTERNAL_ASSERT(mine.size() == num_samples_, "DistributedSampler gave ", mine.size(), " indices, not ",
                         num_samples_);
  return mine;
}

size_t DistributedSampler::size() const { return num_samples_; }
size_t DistributedSampler::total_size() const { return num_samples_ * static_cast<size_t>(num_replicas_); }

std::string DistributedSampler::name() const {
  return tandem::detail::str_cat("DistributedSampler(rank=", rank_, ", num_replicas=", num_replicas_, ", ",
                                 dataset_size_, " examples)");
}

void DistributedSampler::set_epoch(uint64_t epoch) {
  epoch_ = epoch;
  asked_since_set_epoch_ = false;
}

}  // namespace tandem::data

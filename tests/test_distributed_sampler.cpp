// DistributedSampler: PyTorch's assignment of indices to ranks (against
// tests/data/distributed_sampler_reference.txt, from
// scripts/gen_distributed_sampler_reference.py), shuffled shards, epochs
// and seeds, the set_epoch warning, every error; and the DataLoader's
// sampler option: its batches, workers, devices, begin(k) and errors.
#include <algorithm>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"
#include "reference_data.h"

using namespace tandem;
using Catch::Contains;
using data::DataLoader;
using data::DataLoaderOptions;
using data::DistributedSampler;
using data::DistributedSamplerOptions;
using data::Example;

namespace {

DistributedSamplerOptions replicas(int64_t num_replicas, int64_t rank) {
  return DistributedSamplerOptions().num_replicas(num_replicas).rank(rank);
}

// Example i: data (2,) float64 {i, i + 0.5}, target int64 i, so a batch says
// which examples it holds.
std::shared_ptr<data::TensorDataset> numbered(int64_t n) {
  Tensor idx = arange(n, TensorOptions(kFloat64));
  return std::make_shared<data::TensorDataset>(stack({idx, idx + 0.5}, 1), arange(n, TensorOptions(kInt64)));
}

// The same examples built one get() at a time (no Dataset::stacked()).
class NumberedByGet : public data::Dataset {
 public:
  explicit NumberedByGet(size_t n) : n_(n) {}
  Example<> get(size_t i) override {
    auto d = static_cast<double>(i);
    return {test::make({d, d + 0.5}, {2}, kFloat64), full({}, static_cast<int64_t>(i), TensorOptions(kInt64))};
  }
  std::optional<size_t> size() const override { return n_; }
  std::string name() const override { return "NumberedByGet"; }

 private:
  size_t n_;
};

std::vector<size_t> ints(const Tensor& t) {
  Tensor c = t.to(Device(kCPU)).contiguous();
  const auto* p = static_cast<const int64_t*>(c.data_ptr());
  return std::vector<size_t>(p, p + c.numel());
}

// The indices of each batch of an epoch (from begin(first_batch) on),
// checking the batch's data against its targets and its device.
std::vector<std::vector<size_t>> batches(DataLoader& loader, size_t first_batch = 0) {
  std::vector<std::vector<size_t>> out;
  Device want = loader.options().device().value_or(Device(kCPU));
  for (auto it = loader.begin(first_batch); it != loader.end(); ++it) {
    CHECK(it->data.device() == want);
    CHECK(it->target.device() == want);
    std::vector<size_t> t = ints(it->target);
    std::vector<double> expected;
    for (size_t i : t) expected.insert(expected.end(), {double(i), i + 0.5});
    test::check_values(it->data, expected);
    out.push_back(t);
  }
  return out;
}

// indices cut into batches of bs, the last one short (or dropped).
std::vector<std::vector<size_t>> chunks(const std::vector<size_t>& indices, size_t bs, bool drop_last = false) {
  std::vector<std::vector<size_t>> out;
  for (size_t b = 0; b < indices.size(); b += bs) {
    if (drop_last && b + bs > indices.size()) break;
    out.emplace_back(indices.begin() + b, indices.begin() + std::min(indices.size(), b + bs));
  }
  return out;
}

// The epoch's padded order, position by position, put back together from
// the shards of all ranks: position p is shard p % R's element p / R.
std::vector<size_t> interleave(const std::vector<std::vector<size_t>>& shards) {
  std::vector<size_t> whole;
  for (size_t j = 0; j < shards[0].size(); ++j)
    for (const auto& shard : shards) whole.push_back(shard[j]);
  return whole;
}

std::vector<std::vector<size_t>> all_shards(size_t n, int64_t r, DistributedSamplerOptions o, uint64_t epoch = 0) {
  std::vector<std::vector<size_t>> shards;
  for (int64_t rank = 0; rank < r; ++rank) {
    DistributedSampler s(n, o.num_replicas(r).rank(rank));
    s.set_epoch(epoch);
    shards.push_back(s.indices());
  }
  return shards;
}

const char* const kWarning =
    "tandem: warning: DistributedSampler: the indices of epoch 3 were asked for again without set_epoch() in "
    "between, so this epoch repeats the previous one's order, and every later epoch will too. Call "
    "sampler->set_epoch(epoch) at the start of each epoch (as PyTorch's DistributedSampler needs) to shuffle each "
    "one anew. Printed once per sampler.\n";

}  // namespace

TEST_CASE("without shuffle, each rank gets PyTorch's indices", "[data][sampler][reference]") {
  std::ifstream f = test::open_reference("distributed_sampler_reference.txt");
  int lines = 0, divides = 0, not_divides = 0, fewer_than_replicas = 0, padding_past_n = 0, dropping = 0;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string tag;
    size_t n, num_samples, total;
    int64_t r, rank;
    int drop_last;
    in >> tag >> n >> r >> drop_last >> rank >> num_samples >> total;
    REQUIRE(tag == "sampler");
    std::vector<size_t> expected;
    for (size_t i; in >> i;) expected.push_back(i);
    INFO(line);
    DistributedSampler s(n, replicas(r, rank).shuffle(false).drop_last(drop_last != 0));
    CHECK(s.size() == num_samples);
    CHECK(s.total_size() == total);
    CHECK(s.indices() == expected);
    ++lines;
    divides += n % r == 0 && n > 0;
    not_divides += n % r != 0;
    fewer_than_replicas += n < static_cast<size_t>(r);
    padding_past_n += !drop_last && n > 0 && total - n > n;
    dropping += drop_last;
  }
  CHECK(lines == 484);
  CHECK(divides > 0);
  CHECK(not_divides > 0);
  CHECK(fewer_than_replicas > 0);
  CHECK(padding_past_n > 0);
  CHECK(dropping == lines / 2);
}

TEST_CASE("the examples in distributed_sampler.h's comment, and the accessors", "[data][sampler]") {
  std::vector<std::vector<size_t>> shards = all_shards(10, 4, DistributedSamplerOptions().shuffle(false));
  CHECK(shards == std::vector<std::vector<size_t>>{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}});
  shards = all_shards(10, 4, DistributedSamplerOptions().shuffle(false).drop_last(true));
  CHECK(shards == std::vector<std::vector<size_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // A padding longer than the dataset repeats it whole.
  shards = all_shards(2, 5, DistributedSamplerOptions().shuffle(false));
  CHECK(interleave(shards) == std::vector<size_t>{0, 1, 0, 1, 0});
  DistributedSampler from_dataset(*numbered(10), replicas(4, 1));
  CHECK(from_dataset.dataset_size() == 10);
  CHECK(from_dataset.size() == 3);
  CHECK(from_dataset.total_size() == 12);
  CHECK(from_dataset.name() == "DistributedSampler(rank=1, num_replicas=4, 10 examples)");
  CHECK(from_dataset.shuffle());
  CHECK(from_dataset.seed() == 0);
  CHECK_FALSE(from_dataset.drop_last());
  CHECK(from_dataset.epoch() == 0);
}

TEST_CASE("with shuffle, ranks get disjoint shards of one permutation, padded by its start", "[data][sampler]") {
  for (size_t n : {0, 1, 2, 7, 12, 13, 50}) {
    for (int64_t r : {1, 2, 3, 5, 8}) {
      for (bool drop_last : {false, true}) {
        INFO("N " << n << ", R " << r << ", drop_last " << drop_last);
        auto o = DistributedSamplerOptions().seed(11).drop_last(drop_last);
        std::vector<std::vector<size_t>> shards = all_shards(n, r, o, /*epoch=*/2);
        DistributedSampler s0(n, o.num_replicas(r).rank(0));
        for (const auto& shard : shards) CHECK(shard.size() == s0.size());
        std::vector<size_t> whole = interleave(shards);
        REQUIRE(whole.size() == s0.total_size());
        std::vector<size_t> order = data::detail::epoch_order(n, true, 11, 2);
        if (drop_last) {
          // Truncated: no index twice, none added.
          CHECK(std::set<size_t>(whole.begin(), whole.end()).size() == whole.size());
          CHECK(whole == std::vector<size_t>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(whole.size())));
          CHECK(n - whole.size() < static_cast<size_t>(r));  // fewer than R dropped
        } else {
          // All of 0..N-1 once, then exactly the padding: the order's start again.
          REQUIRE(whole.size() >= n);
          std::vector<size_t> head(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
          CHECK(head == order);
          std::vector<size_t> sorted = head;
          std::sort(sorted.begin(), sorted.end());
          std::vector<size_t> all(n);
          std::iota(all.begin(), all.end(), size_t{0});
          CHECK(sorted == all);
          CHECK(whole.size() - n < static_cast<size_t>(r));
          for (size_t p = n; p < whole.size(); ++p) CHECK(whole[p] == order[(p - n) % n]);
        }
      }
    }
  }
}

TEST_CASE("the shuffled order depends only on (seed, epoch)", "[data][sampler]") {
  const size_t n = 40;
  auto o = DistributedSamplerOptions().seed(5);
  auto order = [&](uint64_t seed, uint64_t epoch) { return interleave(all_shards(n, 3, o.seed(seed), epoch)); };
  CHECK(order(5, 0) == order(5, 0));
  CHECK(order(5, 1) == order(5, 1));
  CHECK(order(5, 1) != order(5, 0));
  CHECK(order(6, 0) != order(5, 0));
  // PyTorch seeds its generator with seed + epoch, so (1, 0) and (0, 1) give
  // one order there; here they are unrelated.
  CHECK(order(1, 0) != order(0, 1));
  // One replica sees what the DataLoader's own shuffle gives for that seed.
  DataLoader loader(numbered(n), DataLoaderOptions(n).shuffle(true).seed(5));
  loader.set_epoch(3);
  DistributedSampler one(n, replicas(1, 0).seed(5));
  one.set_epoch(3);
  CHECK(batches(loader)[0] == one.indices());
  // The same sampler made twice, on different "processes", agrees.
  DistributedSampler a(n, replicas(2, 1).seed(9)), b(n, replicas(2, 1).seed(9));
  a.set_epoch(7);
  b.set_epoch(7);
  CHECK(a.indices() == b.indices());
}

TEST_CASE("set_epoch changes the order; forgetting it warns once per sampler", "[data][sampler]") {
  DistributedSampler s(30, replicas(2, 0).seed(1));
  std::vector<size_t> e0, e3, again;
  CHECK(test::captured_cerr([&] { e0 = s.indices(); }).empty());
  s.set_epoch(3);
  CHECK(test::captured_cerr([&] { e3 = s.indices(); }).empty());
  CHECK(e3 != e0);
  CHECK(s.epoch() == 3);
  // A second pass over epoch 3 without set_epoch: the same order, and the warning.
  CHECK(test::captured_cerr([&] { again = s.indices(); }) == kWarning);
  CHECK(again == e3);
  CHECK(test::captured_cerr([&] { s.indices(); }).empty());
  s.set_epoch(4);
  CHECK(test::captured_cerr([&] {
          s.indices();
          s.indices();
        }).empty());
  // Setting the same epoch again is a choice, not a forgotten call.
  DistributedSampler t(30, replicas(2, 1).seed(1));
  t.set_epoch(3);
  CHECK(test::captured_cerr([&] {
          t.indices();
          t.set_epoch(3);
          t.indices();
        }).empty());
  CHECK(test::captured_cerr([&] { t.indices(); }) == kWarning);
  // Without shuffle the order never depends on the epoch: nothing to warn about.
  DistributedSampler fixed(30, replicas(2, 0).shuffle(false));
  CHECK(test::captured_cerr([&] {
          fixed.indices();
          fixed.indices();
        }).empty());
  // Through a loader whose loop forgets set_epoch: the second epoch warns.
  auto sampler = std::make_shared<DistributedSampler>(30, replicas(2, 0).seed(1));
  sampler->set_epoch(3);
  DataLoader loader(numbered(30), DataLoaderOptions(4).sampler(sampler));
  std::vector<std::vector<size_t>> first, second;
  CHECK(test::captured_cerr([&] { first = batches(loader); }).empty());
  CHECK(test::captured_cerr([&] { second = batches(loader); }) == kWarning);
  CHECK(first == second);
  CHECK(test::captured_cerr([&] { batches(loader); }).empty());
}

TEST_CASE("DistributedSampler's arguments are checked", "[data][sampler]") {
  REQUIRE_THROWS_ERROR(DistributedSampler(10, replicas(2, 2)), ValueError,
                       "DistributedSampler: Invalid rank 2, rank should be in the interval [0, 1]");
  REQUIRE_THROWS_WITH(DistributedSampler(10, replicas(2, -1)),
                      "DistributedSampler: Invalid rank -1, rank should be in the interval [0, 1]");
  REQUIRE_THROWS_ERROR(DistributedSampler(10, replicas(0, 0)), ValueError,
                       "DistributedSampler: num_replicas should be a positive integer value, but got num_replicas=0");
  REQUIRE_THROWS_WITH(DistributedSampler(10, replicas(-3, 0)),
                      "DistributedSampler: num_replicas should be a positive integer value, but got num_replicas=-3");
  // Either one left out is read from the default process group.
  const std::string no_group =
      "DistributedSampler: Default process group has not been initialized, please make sure to call "
      "init_process_group. num_replicas and rank default to its world size and rank; without a process group, pass "
      "both (DistributedSamplerOptions().num_replicas(R).rank(r))";
  REQUIRE_THROWS_ERROR(DistributedSampler(10), ValueError, no_group);
  REQUIRE_THROWS_WITH(DistributedSampler(10, DistributedSamplerOptions().rank(0)), no_group);
  REQUIRE_THROWS_WITH(DistributedSampler(10, DistributedSamplerOptions().num_replicas(2)), no_group);
  class Unsized : public data::Dataset {
    Example<> get(size_t) override { return {}; }
    std::optional<size_t> size() const override { return std::nullopt; }
  };
  REQUIRE_THROWS_ERROR(DistributedSampler(Unsized(), replicas(2, 0)), ValueError,
                       "DistributedSampler: Dataset does not know its size (size() returned nullopt); a "
                       "DistributedSampler needs it to split the indices between ranks");
}

// The sampler's indices in batches, for every combination of workers,
// pinning, drop_last and how the dataset builds examples, on every device;
// and R loaders, one per rank, share out the dataset.
DEVICE_TEST_CASE("a loader with a sampler gives the sampler's indices in batches", "[data][sampler][loader]") {
  const size_t n = 23, bs = 3;
  const int64_t r = 3;
  std::vector<bool> pins{false};
  if (cuda::is_available()) pins.push_back(true);
  for (bool via_get : {false, true}) {
    std::shared_ptr<data::Dataset> ds = numbered(n);
    if (via_get) ds = std::make_shared<NumberedByGet>(n);
    for (bool drop_last : {false, true}) {
      for (int64_t workers : {0, 2}) {
        for (bool pin : pins) {
          INFO("via get() " << via_get << ", drop_last " << drop_last << ", num_workers " << workers << ", pin_memory "
                            << pin);
          std::vector<std::vector<size_t>> shards;
          for (int64_t rank = 0; rank < r; ++rank) {
            auto sampler = std::make_shared<DistributedSampler>(*ds, replicas(r, rank).seed(4));
            DataLoader loader(
                ds,
                DataLoaderOptions(bs).sampler(sampler).drop_last(drop_last).num_workers(workers).pin_memory(pin).device(
                    device));
            CHECK(loader.size() == (drop_last ? 2u : 3u));  // 8 indices a rank
            DistributedSampler reference(n, replicas(r, rank).seed(4));
            for (uint64_t epoch : {0, 1}) {
              sampler->set_epoch(epoch);
              reference.set_epoch(epoch);
              std::vector<size_t> expected = reference.indices();
              CHECK(batches(loader) == chunks(expected, bs, drop_last));
              if (epoch == 0) shards.push_back(expected);
            }
          }
          // Together the ranks cover the dataset: 23 examples, one repeated.
          std::vector<size_t> whole = interleave(shards);
          CHECK(whole.size() == 24);
          CHECK(std::set<size_t>(whole.begin(), whole.end()).size() == n);
        }
      }
    }
  }
}

TEST_CASE("begin(k) with a sampler resumes mid-epoch, asking the sampler once", "[data][sampler][loader]") {
  // Counts indices() calls: a loader asks once per begin(), wherever it starts.
  class Counting : public data::Sampler {
   public:
    explicit Counting(std::shared_ptr<DistributedSampler> inner) : inner_(std::move(inner)) {}
    std::vector<size_t> indices() override {
      ++calls;
      return inner_->indices();
    }
    size_t size() const override { return inner_->size(); }
    int calls = 0;

   private:
    std::shared_ptr<DistributedSampler> inner_;
  };
  auto ds = numbered(50);
  std::vector<std::vector<size_t>> whole;
  {
    auto sampler = std::make_shared<DistributedSampler>(50, replicas(2, 1).seed(8));
    sampler->set_epoch(2);
    DataLoader a(ds, DataLoaderOptions(4).sampler(sampler));
    whole = batches(a);
  }
  REQUIRE(whole.size() == 7);  // 25 indices
  for (int64_t workers : {0, 2}) {
    INFO("workers " << workers);
    // A run stopped after 5 batches of epoch 2, resumed: a new sampler and
    // loader, set to epoch 2, from batch 5.
    auto inner = std::make_shared<DistributedSampler>(50, replicas(2, 1).seed(8));
    auto counting = std::make_shared<Counting>(inner);
    DataLoader b(ds, DataLoaderOptions(4).sampler(counting).num_workers(workers));
    inner->set_epoch(2);
    b.set_epoch(2);
    CHECK(batches(b, 5) == std::vector<std::vector<size_t>>(whole.begin() + 5, whole.end()));
    CHECK(counting->calls == 1);
    CHECK(b.epochs() == 3);
    inner->set_epoch(2);
    CHECK(batches(b, 7).empty());
    CHECK(counting->calls == 2);
    REQUIRE_THROWS_WITH(b.begin(8), "DataLoader.begin: batch 8 is past the epoch's end (7 batches)");
    CHECK(counting->calls == 2);
  }
}

TEST_CASE("the sampler option's errors", "[data][sampler][loader]") {
  auto ds = numbered(10);
  auto sampler = std::make_shared<DistributedSampler>(10, replicas(2, 0));
  REQUIRE_THROWS_ERROR(DataLoader(ds, DataLoaderOptions(2).sampler(sampler).shuffle(true)), ValueError,
                       "DataLoader: sampler option is mutually exclusive with shuffle. The sampler gives each "
                       "epoch's order: shuffle in the sampler (DistributedSampler shuffles by default) and leave the "
                       "loader's shuffle off");
  // A null sampler is no sampler.
  DataLoader plain(ds, DataLoaderOptions(4).sampler(nullptr).shuffle(true));
  CHECK(plain.size() == 3);

  // A sampler made for a larger dataset.
  auto too_big = std::make_shared<DistributedSampler>(30, replicas(2, 1).shuffle(false));
  DataLoader wrong(ds, DataLoaderOptions(4).sampler(too_big).num_workers(2));
  CHECK(wrong.size() == 4);
  REQUIRE_THROWS_ERROR(wrong.begin(), IndexError,
                       "DataLoader: DistributedSampler(rank=1, num_replicas=2, 30 examples) gave index 11 (position "
                       "5 of epoch 0), but " +
                           ds->name() + " has 10 examples. Was the sampler made for another dataset?");
  // The failed begin() started no epoch.
  CHECK(wrong.epochs() == 0);

  // A sampler whose size changes after the loader planned its batches.
  class Shrinking : public data::Sampler {
   public:
    std::vector<size_t> indices() override { return std::vector<size_t>(n--, 0); }
    size_t size() const override { return n; }
    size_t n = 6;
  };
  auto shrinking = std::make_shared<Shrinking>();
  DataLoader changing(ds, DataLoaderOptions(4).sampler(shrinking));
  CHECK(changing.size() == 2);
  CHECK(batches(changing) == std::vector<std::vector<size_t>>{{0, 0, 0, 0}, {0, 0}});
  REQUIRE_THROWS_ERROR(changing.begin(), ValueError,
                       "DataLoader: Sampler gave 5 indices for epoch 1, but its size() was 6 when the loader was made "
                       "and planned its batches; a sampler must give size() indices every epoch");
  CHECK(changing.epochs() == 1);
}

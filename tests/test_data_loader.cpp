// The DataLoader: batch contents and order for every combination of
// shuffle, drop_last, num_workers and pin_memory; the same batches whatever
// the number of workers; seeds and epochs; prefetch bounds; early exit,
// worker exceptions and destruction mid-epoch without a hang; delivery on
// each device; every error message.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include "helpers.h"

using namespace tandem;
using Catch::Contains;
using data::DataLoader;
using data::DataLoaderOptions;
using data::Example;

namespace {

// Example i: data (2,) float64 {i, i + 0.5}, target int64 i, so a batch says
// which examples it holds.
std::shared_ptr<data::TensorDataset> numbered(int64_t n) {
  Tensor idx = arange(n, TensorOptions(kFloat64));
  Tensor x = stack({idx, idx + 0.5}, 1);
  return std::make_shared<data::TensorDataset>(x, arange(n, TensorOptions(kInt64)));
}

std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.to(Device(kCPU)).contiguous();
  const auto* p = static_cast<const int64_t*>(c.data_ptr());
  return std::vector<int64_t>(p, p + c.numel());
}

// The targets of every batch of one epoch, checking each batch's data
// against its targets and its device, dtype and pinning.
std::vector<std::vector<int64_t>> epoch_targets(DataLoader& loader, bool expect_pinned = false) {
  std::vector<std::vector<int64_t>> out;
  Device want = loader.options().device().value_or(Device(kCPU));
  for (Example<>& batch : loader) {
    CHECK(batch.data.device() == want);
    CHECK(batch.target.device() == want);
    CHECK(batch.data.dtype() == kFloat64);
    CHECK(batch.target.dtype() == kInt64);
    if (want.is_cpu()) {
      CHECK(batch.data.is_pinned() == expect_pinned);
      CHECK(batch.target.is_pinned() == expect_pinned);
    }
    std::vector<int64_t> t = ints(batch.target);
    REQUIRE(batch.data.sizes() == IntArrayRef({static_cast<int64_t>(t.size()), 2}));
    std::vector<double> expected;
    for (int64_t i : t) expected.insert(expected.end(), {double(i), i + 0.5});
    test::check_values(batch.data, expected);
    out.push_back(t);
  }
  return out;
}

// Kills the test program if a body hangs: a hang is a failure to report,
// not a CI job that runs until its limit.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit, const char* what) {
    thread_ = std::thread([this, limit, what] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, limit, [&] { return done_; })) {
        std::fprintf(stderr, "test_data_loader: %s did not finish within %lld s (a hang)\n", what,
                     static_cast<long long>(limit.count()));
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// A dataset around a function, counting its calls.
class FnDataset : public data::Dataset {
 public:
  FnDataset(size_t n, std::function<Example<>(size_t)> fn) : n_(n), fn_(std::move(fn)) {}
  Example<> get(size_t index) override {
    ++calls;
    return fn_(index);
  }
  std::optional<size_t> size() const override { return n_; }
  std::string name() const override { return "FnDataset"; }
  std::atomic<int64_t> calls{0};

 private:
  size_t n_;
  std::function<Example<>(size_t)> fn_;
};

// A 0-dim int64 target.
Tensor label(int64_t v) { return full({}, v, TensorOptions(kInt64)); }

Example<> numbered_example(size_t i) {
  auto d = static_cast<double>(i);
  return {test::make({d, d + 0.5}, {2}, kFloat64), label(static_cast<int64_t>(i))};
}

}  // namespace

TEST_CASE("without shuffle, batches hold consecutive examples; drop_last drops the short one", "[data][loader]") {
  auto ds = numbered(10);
  DataLoader loader(ds, DataLoaderOptions(3));
  CHECK(loader.size() == 4);
  CHECK(epoch_targets(loader) == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}});
  DataLoader dropping(ds, DataLoaderOptions(3).drop_last(true));
  CHECK(dropping.size() == 3);
  CHECK(epoch_targets(dropping) == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
  DataLoader exact(numbered(9), DataLoaderOptions(3).drop_last(true));
  CHECK(exact.size() == 3);
  DataLoader one(ds);  // batch_size 1, as PyTorch's default
  CHECK(one.size() == 10);
  CHECK(epoch_targets(one).back() == std::vector<int64_t>{9});
}

TEST_CASE("a dataset with fewer examples than a batch, and an empty one", "[data][loader]") {
  DataLoader small(numbered(2), DataLoaderOptions(5).num_workers(2));
  CHECK(epoch_targets(small) == std::vector<std::vector<int64_t>>{{0, 1}});
  DataLoader dropped(numbered(2), DataLoaderOptions(5).drop_last(true).num_workers(2));
  CHECK(dropped.size() == 0);
  CHECK(epoch_targets(dropped).empty());
  auto empty_ds = std::make_shared<data::TensorDataset>(zeros({0, 3}), zeros({0}, TensorOptions(kInt64)));
  DataLoader none(empty_ds, DataLoaderOptions(4).shuffle(true).num_workers(3));
  CHECK(none.size() == 0);
  CHECK(none.begin() == none.end());
}

// The batches of every combination of shuffle, drop_last, num_workers and
// pin_memory, on every device, against the batches num_workers = 0 gives,
// which in turn are checked against what the options mean.
DEVICE_TEST_CASE("every combination of options gives the same batches as the calling thread", "[data][loader]") {
  const int64_t n = 23, bs = 4;
  std::vector<bool> pins{false};
  if (cuda::is_available()) pins.push_back(true);
  // The same examples gathered from a TensorDataset's rows (Dataset::stacked)
  // and built one get() at a time.
  for (bool via_get : {false, true}) {
    std::shared_ptr<data::Dataset> ds = numbered(n);
    if (via_get) ds = std::make_shared<FnDataset>(n, numbered_example);
    for (bool shuffle : {false, true}) {
      for (bool drop_last : {false, true}) {
        auto base = DataLoaderOptions(bs).shuffle(shuffle).drop_last(drop_last).seed(1234);
        DataLoader reference_loader(ds, base);
        std::vector<std::vector<int64_t>> reference = epoch_targets(reference_loader);
        // What the options mean: sizes, every example at most once, all of
        // them unless drop_last, in order unless shuffled.
        REQUIRE(reference.size() == (drop_last ? 5u : 6u));
        std::vector<int64_t> flat;
        for (size_t b = 0; b < reference.size(); ++b) {
          CHECK(reference[b].size() == (b == 5 ? 3u : 4u));
          flat.insert(flat.end(), reference[b].begin(), reference[b].end());
        }
        std::set<int64_t> distinct(flat.begin(), flat.end());
        CHECK(distinct.size() == flat.size());
        CHECK(*distinct.begin() >= 0);
        CHECK(*distinct.rbegin() < n);
        std::vector<int64_t> sorted = flat;
        std::sort(sorted.begin(), sorted.end());
        if (!shuffle) {
          CHECK(flat == sorted);
          CHECK(flat.front() == 0);
        } else {
          CHECK(flat != sorted);  // one chance in 23! of a false failure for this fixed seed: none
        }
        if (!drop_last) CHECK(flat.size() == static_cast<size_t>(n));
        for (int64_t workers : {0, 1, 4}) {
          for (bool pin : pins) {
            for (bool persistent : {false, true}) {
              if (persistent && workers == 0) continue;
              INFO("via get() " << via_get << ", shuffle " << shuffle << ", drop_last " << drop_last << ", num_workers "
                                << workers << ", pin_memory " << pin << ", persistent " << persistent);
              auto o = DataLoaderOptions(bs)
                           .shuffle(shuffle)
                           .drop_last(drop_last)
                           .seed(1234)
                           .num_workers(workers)
                           .pin_memory(pin)
                           .persistent_workers(persistent)
                           .device(device);
              DataLoader loader(ds, o);
              CHECK(loader.size() == reference.size());
              CHECK(epoch_targets(loader, pin) == reference);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("shuffling: a new order each epoch, fixed by the seed alone", "[data][loader]") {
  auto ds = numbered(50);
  auto o = DataLoaderOptions(50).shuffle(true).seed(7);
  DataLoader a(ds, o), b(ds, o.num_workers(3));
  std::vector<int64_t> a0 = epoch_targets(a)[0], a1 = epoch_targets(a)[0];
  CHECK(a.epochs() == 2);
  CHECK(a0 != a1);
  CHECK(epoch_targets(b)[0] == a0);
  CHECK(epoch_targets(b)[0] == a1);
  DataLoader c(ds, DataLoaderOptions(50).shuffle(true).seed(8));
  CHECK(epoch_targets(c)[0] != a0);
  // Without a seed, the loader draws one from the cpu default generator.
  manual_seed(99);
  DataLoader d(ds, DataLoaderOptions(50).shuffle(true));
  manual_seed(99);
  DataLoader e(ds, DataLoaderOptions(50).shuffle(true).num_workers(2));
  CHECK(d.seed() == e.seed());
  CHECK(epoch_targets(d) == epoch_targets(e));
  DataLoader f(ds, DataLoaderOptions(50).shuffle(true));  // the generator moved on
  CHECK(f.seed() != d.seed());
}

TEST_CASE("set_epoch: the next epoch is the one chosen, with that epoch's order", "[data][loader]") {
  auto ds = numbered(40);
  auto o = DataLoaderOptions(40).shuffle(true).seed(3);
  DataLoader a(ds, o);
  std::vector<std::vector<int64_t>> orders;
  for (int e = 0; e < 4; ++e) orders.push_back(epoch_targets(a)[0]);
  for (int64_t workers : {0, 2}) {
    DataLoader b(ds, DataLoaderOptions(40).shuffle(true).seed(3).num_workers(workers));
    b.set_epoch(2);  // a run resumed after two epochs
    CHECK(epoch_targets(b)[0] == orders[2]);
    CHECK(b.epochs() == 3);
    CHECK(epoch_targets(b)[0] == orders[3]);
    b.set_epoch(0);
    CHECK(epoch_targets(b)[0] == orders[0]);
  }
  auto it = a.begin();
  REQUIRE_THROWS_WITH(a.set_epoch(0),
                      "DataLoader.set_epoch: epoch 4 is still running; destroy its iterator (or "
                      "finish the loop) before choosing the next epoch");
}

TEST_CASE("begin(k) starts the epoch at batch k without building the batches before it", "[data][loader]") {
  auto ds = numbered(50);
  std::vector<std::vector<int64_t>> whole;
  {
    DataLoader a(ds, DataLoaderOptions(8).shuffle(true).seed(5));
    a.set_epoch(1);
    for (auto& b : a) whole.push_back(ints(b.target));
  }
  REQUIRE(whole.size() == 7);
  for (int64_t workers : {0, 3}) {
    INFO("workers " << workers);
    DataLoader b(ds, DataLoaderOptions(8).shuffle(true).seed(5).num_workers(workers));
    b.set_epoch(1);
    std::vector<std::vector<int64_t>> rest;
    for (auto it = b.begin(4); it != b.end(); ++it) rest.push_back(ints(it->target));
    CHECK(rest == std::vector<std::vector<int64_t>>(whole.begin() + 4, whole.end()));
    CHECK(b.epochs() == 2);
    auto empty = b.begin(7);
    CHECK(empty == b.end());
  }
  // Batches before k are never asked for.
  struct Counting : data::TensorDataset {
    using data::TensorDataset::TensorDataset;
    std::atomic<int> gets{0};
    Example<> get(size_t i) override {
      ++gets;
      return data::TensorDataset::get(i);
    }
  };
  auto counting = std::make_shared<Counting>(arange(20).to(kFloat32), arange(20));
  DataLoader c(counting, DataLoaderOptions(4));
  std::vector<int64_t> seen;
  for (auto it = c.begin(3); it != c.end(); ++it)
    for (int64_t v : ints(it->target)) seen.push_back(v);
  CHECK(seen == std::vector<int64_t>{12, 13, 14, 15, 16, 17, 18, 19});
  CHECK(counting->gets == 8);
  REQUIRE_THROWS_WITH(c.begin(6), "DataLoader.begin: batch 6 is past the epoch's end (5 batches)");
}

TEST_CASE("shuffled orders are uniform: every example is first about equally often", "[data][loader]") {
  auto ds = numbered(5);
  std::vector<int> first(5, 0);
  const int runs = 4000;
  for (int s = 0; s < runs; ++s) {
    DataLoader loader(ds, DataLoaderOptions(5).shuffle(true).seed(static_cast<uint64_t>(s)));
    ++first[static_cast<size_t>(ints((*loader.begin()).target)[0])];
  }
  // Chi-square with 4 degrees of freedom: 18.5 is its 0.999 quantile.
  double chi2 = 0;
  for (int c : first) chi2 += (c - runs / 5.0) * (c - runs / 5.0) / (runs / 5.0);
  INFO("first-position counts " << first[0] << " " << first[1] << " " << first[2] << " " << first[3] << " "
                                << first[4]);
  CHECK(chi2 < 18.5);
}

TEST_CASE("get_worker_info and example_seed inside the loader", "[data][loader]") {
  CHECK_FALSE(data::get_worker_info().has_value());
  std::mutex mu;
  std::set<int64_t> ids;
  std::set<int64_t> counts;
  std::atomic<bool> missing{false};  // Catch2's assertions are not for worker threads
  auto ds = std::make_shared<FnDataset>(40, [&](size_t i) {
    std::optional<data::WorkerInfo> info = data::get_worker_info();
    if (!info) {
      missing = true;
      return numbered_example(i);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(info->id);
      counts.insert(info->num_workers);
    }
    // The augmentation seed, as a random transform would draw it.
    auto s = static_cast<double>(data::example_seed(i) >> 12);
    return Example<>{test::make({s}, {1}, kFloat64), label(static_cast<int64_t>(info->epoch))};
  });
  auto seeds = [&](int64_t workers) {
    DataLoader loader(ds, DataLoaderOptions(8).shuffle(true).seed(5).num_workers(workers));
    std::vector<std::vector<double>> out;
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<double> all;
      for (Example<>& b : loader) {
        CHECK(ints(b.target) == std::vector<int64_t>(b.target.numel(), epoch));
        Tensor d = b.data.contiguous();
        all.insert(all.end(), static_cast<const double*>(d.data_ptr()),
                   static_cast<const double*>(d.data_ptr()) + d.numel());
      }
      out.push_back(all);
    }
    return out;
  };
  auto zero = seeds(0);
  CHECK(ids == std::set<int64_t>{0});
  CHECK(counts == std::set<int64_t>{0});
  ids.clear();
  counts.clear();
  auto four = seeds(4);
  CHECK(counts == std::set<int64_t>{4});
  CHECK(*ids.rbegin() <= 3);
  CHECK_FALSE(missing);
  CHECK(zero == four);        // augmentation does not depend on the workers
  CHECK(zero[0] != zero[1]);  // but changes with the epoch
  CHECK(data::example_seed(3) == data::example_seed(3));
  CHECK(data::example_seed(3) != data::example_seed(4));
}

TEST_CASE("workers build at most prefetch_factor batches each ahead of the consumer", "[data][loader]") {
  Watchdog dog(std::chrono::seconds(60), "the prefetch test");
  auto ds = std::make_shared<FnDataset>(100, numbered_example);
  DataLoader loader(ds, DataLoaderOptions(1).num_workers(2).prefetch_factor(1));
  auto it = loader.begin();
  // Batch 0 is handed out; the two workers may have built batches 1 and 2.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ds->calls < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(ds->calls == 3);  // they did build ahead...
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(ds->calls == 3);  // ...and no further
  ++it;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ds->calls < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(ds->calls == 4);
  CHECK(ints(it->target) == std::vector<int64_t>{1});
}

TEST_CASE("breaking out of an epoch stops and joins the workers promptly", "[data][loader]") {
  Watchdog dog(std::chrono::seconds(60), "the early-exit test");
  // 2 ms per example: the whole epoch would take 4 s on 4 workers.
  auto ds = std::make_shared<FnDataset>(8000, [](size_t i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return numbered_example(i);
  });
  for (bool persistent : {false, true}) {
    DataLoader loader(ds, DataLoaderOptions(16).num_workers(4).persistent_workers(persistent));
    for (int epoch = 0; epoch < 2; ++epoch) {
      int seen = 0;
      auto start = std::chrono::steady_clock::now();
      for (Example<>& batch : loader) {
        CHECK(batch.target.numel() == 16);
        if (++seen == 2) break;
      }
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      INFO("persistent " << persistent << ": two batches and the exit took " << ms << " ms");
      CHECK(ms < 2000);  // far below the epoch's 4 s, even on a loaded machine
    }
    // A full epoch still works after the early exits.
    int64_t before = ds->calls;
    DataLoader small(std::make_shared<FnDataset>(50, numbered_example), DataLoaderOptions(16).num_workers(4));
    CHECK(epoch_targets(small).size() == 4);
    CHECK(ds->calls == before);
  }
}

TEST_CASE("destroying a loader or its iterator mid-epoch neither hangs nor leaks", "[data][loader]") {
  Watchdog dog(std::chrono::seconds(60), "the destruction test");
  auto ds = std::make_shared<FnDataset>(2000, [](size_t i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return numbered_example(i);
  });
  for (bool persistent : {false, true}) {
    // The loader goes first, its iterator later: the epoch runs on.
    std::optional<DataLoader::Iterator> it;
    {
      DataLoader loader(
          ds, DataLoaderOptions(8).num_workers(3).persistent_workers(persistent).pin_memory(cuda::is_available()));
      it.emplace(loader.begin());
    }
    CHECK(ints((**it).target) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
    ++*it;
    CHECK(ints((**it).target)[0] == 8);
    it.reset();
    // Both at once, mid-epoch, workers busy.
    {
      DataLoader loader(ds, DataLoaderOptions(8).num_workers(4).persistent_workers(persistent));
      auto i2 = loader.begin();
      ++i2;
    }
  }
  CHECK(ds.use_count() == 1);  // every worker let go of the dataset
  // Persistent workers left idle between epochs are joined with the loader.
  {
    DataLoader loader(numbered(10), DataLoaderOptions(3).num_workers(2).persistent_workers(true));
    CHECK(epoch_targets(loader).size() == 4);
  }
}

TEST_CASE("an exception while loading an example surfaces with its index and message", "[data][loader]") {
  Watchdog dog(std::chrono::seconds(60), "the exception test");
  auto ds = std::make_shared<FnDataset>(100, [](size_t i) {
    TANDEM_CHECK(i != 37, ValueError, "example ", i, " is corrupt");
    return numbered_example(i);
  });
  for (int64_t workers : {0, 1, 4}) {
    INFO("num_workers " << workers);
    DataLoader loader(ds, DataLoaderOptions(10).num_workers(workers));
    std::vector<int64_t> seen;
    auto loop = [&] {
      for (Example<>& batch : loader) seen.push_back(ints(batch.target)[0]);
    };
    std::string where = workers == 0 ? "in the DataLoader's calling thread (num_workers=0)" : "in DataLoader worker ";
    REQUIRE_THROWS_AS(loop(), ValueError);           // the original's type
    CHECK(seen == std::vector<int64_t>{0, 10, 20});  // the batches before it, in order
    seen.clear();
    try {
      loop();
      FAIL("the second epoch did not throw");
    } catch (const ValueError& e) {
      std::string msg = e.what();
      CHECK_THAT(msg, Contains("Caught an exception " + where));
      CHECK_THAT(msg,
                 Contains("while loading example 37 (batch 3 of epoch 1): tandem::ValueError: example 37 is corrupt"));
      // The original is nested inside.
      try {
        std::rethrow_if_nested(e);
        FAIL("no nested exception");
      } catch (const ValueError& original) {
        CHECK(std::string(original.what()) == "example 37 is corrupt");
      }
    }
    // A foreign exception becomes a tandem::Error that names its type.
    auto foreign = std::make_shared<FnDataset>(40, [](size_t i) {
      if (i == 21) throw std::out_of_range("not a tandem error");
      return numbered_example(i);
    });
    DataLoader later(foreign, DataLoaderOptions(10).num_workers(workers));
    auto it = later.begin();
    ++it;
    REQUIRE_THROWS_WITH(++it, Contains("while loading example 21 (batch 2 of epoch 0): std::out_of_range: not a "
                                       "tandem error"));
    CHECK(it == later.end());
    // Out of host memory in a Dataset stays an out-of-memory error.
    auto hungry = std::make_shared<FnDataset>(4, [](size_t) -> Example<> { throw std::bad_alloc(); });
    DataLoader oom(hungry, DataLoaderOptions(2).num_workers(workers));
    REQUIRE_THROWS_AS(oom.begin(), OutOfMemoryError);
    REQUIRE_THROWS_WITH(oom.begin(), Contains("while loading example 0 (batch 0 of epoch 1): std::bad_alloc"));
  }
}

TEST_CASE("with many workers, the error of example 37 still comes after batches 0-2", "[data][loader]") {
  Watchdog dog(std::chrono::seconds(60), "the ordered-error test");
  // With many workers the failing batch may be built before earlier ones;
  // the error still surfaces in order, after every batch before it.
  auto ds = std::make_shared<FnDataset>(400, [](size_t i) {
    if (i < 30) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    TANDEM_CHECK(i != 37, ValueError, "bad");
    return numbered_example(i);
  });
  DataLoader loader(ds, DataLoaderOptions(10).num_workers(8).prefetch_factor(4));
  int batches = 0;
  try {
    for (Example<>& b : loader) {
      CHECK(ints(b.target)[0] == batches * 10);
      ++batches;
    }
  } catch (const ValueError&) {
  }
  CHECK(batches == 3);
}

TEST_CASE("batches that cannot be stacked, and examples that break the Dataset contract", "[data][loader]") {
  auto ragged = std::make_shared<FnDataset>(6, [](size_t i) { return Example<>{zeros({i == 4 ? 3 : 2}), label(0)}; });
  DataLoader a(ragged, DataLoaderOptions(3));
  auto it = a.begin();
  REQUIRE_THROWS_WITH(++it,
                      "DataLoader: batch 1 cannot be stacked: example 4 has data of shape [3] and dtype float32, "
                      "but example 3, the batch's first, has [2] and float32. Every example of a batch must have "
                      "the same shape and dtype");
  auto mixed = std::make_shared<FnDataset>(2, [](size_t i) {
    return Example<>{zeros({2}), i == 0 ? label(0) : full({}, 1.0)};
  });
  DataLoader b(mixed, DataLoaderOptions(2).num_workers(1));
  REQUIRE_THROWS_AS(b.begin(), ShapeError);
  auto undefined = std::make_shared<FnDataset>(2, [](size_t) { return Example<>{zeros({2}), Tensor()}; });
  DataLoader c(undefined, DataLoaderOptions(2));
  REQUIRE_THROWS_WITH(c.begin(), Contains("DataLoader: example 0 of FnDataset has an undefined target tensor; a "
                                          "Dataset's get() must return both"));
  // Non-contiguous examples are stacked like any other.
  auto strided = std::make_shared<FnDataset>(3, [](size_t i) {
    Tensor m = arange(6, TensorOptions(kFloat64)).reshape({2, 3}) + 10.0 * static_cast<double>(i);
    return Example<>{m.t(), label(static_cast<int64_t>(i))};
  });
  DataLoader d(strided, DataLoaderOptions(3));
  auto it_d = d.begin();
  Example<>& batch = *it_d;
  REQUIRE(batch.data.sizes() == IntArrayRef({3, 3, 2}));
  test::check_values(batch.data.select(0, 2), {20, 23, 21, 24, 22, 25});
  if (cuda::device_count() > 0) {
    auto on_gpu = std::make_shared<FnDataset>(2, [](size_t) {
      return Example<>{zeros({2}, TensorOptions().device("cuda:0")), label(0)};
    });
    DataLoader e(on_gpu, DataLoaderOptions(2));
    REQUIRE_THROWS_WITH(e.begin(), Contains("DataLoader: example 0 of FnDataset has its data on cuda:0; a Dataset "
                                            "gives cpu tensors, and the DataLoader's `device` option moves whole "
                                            "batches"));
  }
}

TEST_CASE("DataLoader options are checked when the loader is made", "[data][loader]") {
  auto ds = numbered(10);
  REQUIRE_THROWS_WITH(DataLoader(ds, DataLoaderOptions(0)),
                      "DataLoader: batch_size should be a positive integer value, but got batch_size=0");
  REQUIRE_THROWS_WITH(DataLoader(ds, DataLoaderOptions(2).num_workers(-1)),
                      "DataLoader: num_workers option should be non-negative; use num_workers=0 to load in the calling "
                      "thread; got -1");
  REQUIRE_THROWS_WITH(DataLoader(ds, DataLoaderOptions(2).prefetch_factor(2)),
                      Contains("prefetch_factor option could only be specified with worker threads"));
  REQUIRE_THROWS_WITH(DataLoader(ds, DataLoaderOptions(2).num_workers(1).prefetch_factor(0)),
                      "DataLoader: prefetch_factor should be a positive integer, but got 0");
  REQUIRE_THROWS_WITH(DataLoader(ds, DataLoaderOptions(2).persistent_workers(true)),
                      "DataLoader: persistent_workers option needs num_workers > 0");
  REQUIRE_THROWS_WITH(DataLoader(ds, DataLoaderOptions(2).num_workers(1).timeout(-1)),
                      "DataLoader: timeout option should be non-negative, but got -1");
  REQUIRE_THROWS_WITH(DataLoader(ds, DataLoaderOptions(2).timeout(1)),
                      Contains("with num_workers=0 there are no workers to wait for"));
  REQUIRE_THROWS_WITH(DataLoader(std::shared_ptr<data::Dataset>(), DataLoaderOptions(2)),
                      "DataLoader: the dataset is null");
  class Unsized : public data::Dataset {
    Example<> get(size_t) override { return {}; }
    std::optional<size_t> size() const override { return std::nullopt; }
  };
  REQUIRE_THROWS_WITH(DataLoader(Unsized(), DataLoaderOptions(2)),
                      "DataLoader: Dataset does not know its size (size() returned nullopt); a DataLoader needs it to "
                      "plan its batches");
  if (!cuda::is_available()) {
    REQUIRE_THROWS_WITH(DataLoader(ds, DataLoaderOptions(2).pin_memory(true)),
                        Contains("DataLoader(pin_memory=true): pinned memory is page-locked host memory"));
    REQUIRE_THROWS_AS(DataLoader(ds, DataLoaderOptions(2).device(Device("cuda:0"))), DeviceError);
  } else {
    int n = cuda::device_count();
    REQUIRE_THROWS_AS(DataLoader(ds, DataLoaderOptions(2).device(Device(kCUDA, n))), DeviceError);
  }
}

TEST_CASE("stacked datasets are gathered row by row; a subclass that overrides get() is not bypassed",
          "[data][loader]") {
  auto ds = numbered(6);
  REQUIRE(ds->stacked().has_value());
  CHECK(ds->stacked()->data.is_same(ds->data()));
  class Doubled : public data::TensorDataset {
   public:
    using data::TensorDataset::TensorDataset;
    Example<> get(size_t i) override {
      Example<> e = TensorDataset::get(i);
      return {e.data * 2, e.target};
    }
  };
  auto doubled = std::make_shared<Doubled>(ds->data(), ds->target());
  CHECK_FALSE(doubled->stacked().has_value());
  DataLoader loader(doubled, DataLoaderOptions(3).num_workers(1));
  auto it = loader.begin();
  test::check_values(it->data, {0, 1, 2, 3, 4, 5});
  // A stacked() that breaks its contract is refused when the loader is made.
  class Broken : public data::TensorDataset {
   public:
    using data::TensorDataset::TensorDataset;
    std::optional<Example<>> stacked() const override { return Example<>{data().narrow(0, 0, 2), target()}; }
  };
  REQUIRE_THROWS_WITH(DataLoader(std::make_shared<Broken>(ds->data(), ds->target())),
                      "DataLoader: TensorDataset(data [6, 2], target [6])'s stacked() must give two defined cpu "
                      "tensors with one row per example (6); got data of shape [2, 2] and target of shape [6]");
  // MNIST's batches gathered from its rows equal its examples stacked.
  if (!std::filesystem::exists(data::FashionMNIST::kDefaultRoot)) return;
  auto fashion = std::make_shared<data::FashionMNIST>(data::FashionMNIST::kDefaultRoot, /*train=*/false);
  REQUIRE(fashion->stacked().has_value());
  // The order of a shuffled epoch depends on the seed and the size only: a
  // numbered dataset of the same size says which rows the batch must hold.
  DataLoader mnist(fashion, DataLoaderOptions(5).shuffle(true).seed(2));
  DataLoader indices(numbered(static_cast<int64_t>(*fashion->size())), DataLoaderOptions(5).shuffle(true).seed(2));
  auto b = mnist.begin();
  auto idx = indices.begin();
  Tensor rows = idx->target;
  test::check_equal(b->data, fashion->images().index_select(0, rows));
  test::check_equal(b->target, fashion->targets().index_select(0, rows));
}

TEST_CASE("one epoch at a time; an iterator at its end cannot be read", "[data][loader]") {
  DataLoader loader(numbered(6), DataLoaderOptions(2).num_workers(2));
  auto it = loader.begin();
  REQUIRE_THROWS_WITH(loader.begin(),
                      "DataLoader: attempted to start an epoch (begin()) while another iterator over this loader is "
                      "not yet exhausted. Finish or destroy the first iteration before starting the next");
  ++it;
  ++it;
  ++it;
  CHECK(it == loader.end());
  REQUIRE_THROWS_WITH(*it, "DataLoader: dereferencing an iterator that is at the end of its epoch");
  REQUIRE_THROWS_WITH(++it, "DataLoader: advancing an iterator that is at the end of its epoch");
  auto next = loader.begin();  // the exhausted iterator no longer holds the epoch
  CHECK(ints(next->target) == std::vector<int64_t>{0, 1});
  it = std::move(next);  // destroying the old, exhausted run leaves the new epoch alone
  REQUIRE_THROWS_AS(loader.begin(), Error);
}

TEST_CASE("a loader moves; the moved-from one says so", "[data][loader]") {
  auto make = [] { return DataLoader(numbered(6), DataLoaderOptions(4).num_workers(2).persistent_workers(true)); };
  DataLoader a = make();
  CHECK(epoch_targets(a).size() == 2);
  DataLoader b(std::move(a));
  CHECK(b.epochs() == 1);
  CHECK(epoch_targets(b) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5}});
  REQUIRE_THROWS_WITH(a.begin(), "DataLoader: this loader was moved from; use the one it was moved to");
  REQUIRE_THROWS_WITH(a.size(), "DataLoader: this loader was moved from; use the one it was moved to");
  a = std::move(b);
  CHECK(a.size() == 2);
}

namespace {

// A gate a Dataset::get waits at until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

}  // namespace

TEST_CASE("a worker stuck in get times out, and the loop still ends", "[data][loader]") {
  Watchdog dog(std::chrono::seconds(60), "the timeout test");
  for (bool persistent : {false, true}) {
    INFO("persistent " << persistent);
    // Example 2 blocks until the gate opens: batch 1 never comes.
    auto gate = std::make_shared<Gate>();
    auto ds = std::make_shared<FnDataset>(4, [gate](size_t i) {
      if (i == 2) gate->wait();
      return numbered_example(i);
    });
    auto start = std::chrono::steady_clock::now();
    {
      DataLoader loader(ds, DataLoaderOptions(2).num_workers(1).timeout(0.5).persistent_workers(persistent));
      auto it = loader.begin();
      CHECK(ints(it->target) == std::vector<int64_t>{0, 1});
      REQUIRE_THROWS_WITH(++it,
                          "DataLoader timed out after 0.5 s waiting for batch 1 of epoch 0 from its 1 workers "
                          "(1 batches being built). Raise the timeout, or look for a Dataset::get that blocks");
      CHECK(it == loader.end());  // the epoch ended there
      REQUIRE_THROWS_AS(*it, Error);
      if (persistent) {
        // The stuck worker is abandoned; the next epoch gets new ones.
        gate->release();
        CHECK(epoch_targets(loader).size() == 2);
      }
    }  // the stuck thread, if any, is left to finish on its own
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(s < 10);  // a timeout to take batch 1, at most one more to give up on the worker
    gate->release();
  }
}

DEVICE_TEST_CASE("batches arrive on the requested device, equal to the cpu's", "[data][loader]") {
  auto ds = numbered(37);
  auto o = DataLoaderOptions(8).shuffle(true).seed(3).num_workers(2);
  DataLoader on_cpu(ds, o);
  std::vector<Example<>> expected;
  for (Example<>& b : on_cpu) expected.push_back(b);
  for (bool pin : {false, true}) {
    if (pin && !cuda::is_available()) continue;
    DataLoader loader(ds, DataLoaderOptions(o).device(device).pin_memory(pin));
    size_t k = 0;
    for (Example<>& b : loader) {
      REQUIRE(k < expected.size());
      CHECK(b.data.device() == device);
      CHECK(b.target.device() == device);
      test::check_equal(b.data, expected[k].data);
      test::check_equal(b.target, expected[k].target);
      // Used on the caller's current stream right away: the copy has landed.
      test::check_equal((b.data * 2).to(Device(kCPU)), expected[k].data * 2);
      ++k;
    }
    CHECK(k == expected.size());
  }
}

DEVICE_TEST_CASE("a delivered batch says where it came from in a device error", "[data][loader]") {
  auto other = test::other_device(device);
  if (!other) return;
  DataLoader loader(numbered(4), DataLoaderOptions(2).device(device));
  auto it = loader.begin();
  Example<>& batch = *it;
  Tensor w = ones({2, 2}, TensorOptions(kFloat64).device(*other));
  try {
    (void)batch.data.mm(w);
    FAIL("no device error");
  } catch (const DeviceError& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Contains(std::string("is on ") + device.str() + ": a batch, " +
                             (device.is_cpu() ? "created" : "moved") + " by DataLoader at "));
    CHECK_THAT(msg, Contains("test_data_loader.cpp:"));
  }
}

TEST_CASE("pinned batches come from the pinned cache: epochs reuse its blocks", "[data][loader]") {
  if (!cuda::is_available()) return;
  auto ds = numbered(64);
  for (std::optional<Device> dev : {std::optional<Device>(), std::optional<Device>(Device("cuda:0"))}) {
    INFO("device " << (dev ? dev->str() : "none"));
    // At most window + 2 batches are alive at once (built ahead, being built
    // by the two workers or handed out), each two pinned blocks of one size
    // class: what the loader may ever need from the cache. 8 epochs of 8
    // batches without reuse would ask for 128.
    DataLoader loader(ds, DataLoaderOptions(8).num_workers(2).prefetch_factor(2).pin_memory(true).device(dev));
    int64_t before = cuda::host_memory_stats().num_host_alloc;
    for (int e = 0; e < 8; ++e) epoch_targets(loader, true);
    CHECK(cuda::host_memory_stats().num_host_alloc - before <= 2 * (4 + 2 + 2));
  }
}

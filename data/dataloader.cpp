// The DataLoader: the epoch's order, the worker pool, batch building in
// (pinned) host memory, the side-stream copy to the device, and delivery in
// order with the caller's stream waiting for the copy.
#include "data/dataloader.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "data/worker_error.h"
#include "tensor/core/errors.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/origin.h"
#include "tensor/core/philox.h"
#include "tensor/ops/cuda.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/random.h"
#include "tensor/ops/runtime.h"

namespace tandem::data {

namespace {

// What the loader's threads read, fixed when the loader is made. Workers
// hold it by shared_ptr: a worker abandoned inside a Dataset::get that never
// returns (after a timeout) keeps it, and the dataset, alive.
struct LoaderConfig {
  std::shared_ptr<Dataset> dataset;
  DataLoaderOptions options;
  std::optional<Device> device;  // resolved
  size_t num_examples = 0;       // positions in an epoch: the sampler's size(), else the dataset's
  size_t dataset_size = 0;
  size_t num_batches = 0;
  size_t window = 0;  // batches built ahead of the consumer, all workers together
  uint64_t seed = 0;
  Origin host_origin, device_origin;  // of the batches' tensors
  std::optional<Example<>> stacked;   // Dataset::stacked(): batches gathered from its rows
};

// One batch as built: its tensors, or what went wrong, and the event that
// marks its copy to the device.
struct Slot {
  Example<> batch;
  std::exception_ptr error;
  std::optional<cuda::Event> copied;
};

// One epoch: the order of the examples and, with workers, what is built.
// With a pool its mutable fields are guarded by the pool's mutex.
struct Epoch {
  uint64_t number = 0;
  std::vector<size_t> order;  // example index at each position
  size_t next_fetch = 0;      // next batch a worker takes
  size_t next_deliver = 0;    // next batch the consumer takes
  int in_flight = 0;          // batches being built now
  std::map<size_t, Slot> done;
  std::atomic<bool> cancelled{false};
};

// The error a loader thread hands on: the original's type, with where it happened.
std::exception_ptr worker_error(const std::exception_ptr& original, bool in_get, size_t index, size_t k, uint64_t epoch,
                                int64_t worker_id) {
  std::string where = worker_id < 0 ? "the DataLoader's calling thread (num_workers=0)"
                                    : tandem::detail::str_cat("DataLoader worker ", worker_id);
  return detail::with_context(
      original, in_get ? tandem::detail::str_cat("Caught an exception in ", where, " while loading example ", index,
                                                 " (batch ", k, " of epoch ", epoch, "):")
                       : tandem::detail::str_cat("In ", where, ", building batch ", k, " of epoch ", epoch, ":"));
}

// Copies one example's tensor into row j of a batch.
void stack_into(const Tensor& batch, int64_t j, const Tensor& x) {
  size_t row = x.nbytes();
  if (x.is_contiguous()) {
    std::memcpy(static_cast<char*>(batch.data_ptr()) + static_cast<size_t>(j) * row, x.data_ptr(), row);
  } else {
    batch.select(0, j).copy_(x);
  }
}

// Rows order[begin..end) of rows (N, ...) stacked into a new (end - begin,
// ...) tensor, pinned when asked: the batch of a stacked dataset.
Tensor gather_rows(const Tensor& rows, const Epoch& ep, size_t begin, size_t end, bool pin) {
  std::vector<int64_t> sizes{static_cast<int64_t>(end - begin)};
  sizes.insert(sizes.end(), rows.sizes().begin() + 1, rows.sizes().end());
  Tensor out = empty(sizes, TensorOptions(rows.dtype()).pinned_memory(pin));
  if (rows.is_contiguous()) {
    size_t row = rows.nbytes() / static_cast<size_t>(rows.size(0));
    const auto* src = static_cast<const char*>(rows.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    for (size_t p = begin; p < end; ++p) std::memcpy(dst + (p - begin) * row, src + ep.order[p] * row, row);
  } else {
    for (size_t p = begin; p < end; ++p)
      out.select(0, static_cast<int64_t>(p - begin)).copy_(rows.select(0, static_cast<int64_t>(ep.order[p])));
  }
  return out;
}

// The examples of batch k stacked along a new first dimension, in pinned
// memory when asked, then (with a device) copied there on `side`. Never
// throws: an error is returned in the slot, with where it happened.
Slot build_batch(const LoaderConfig& impl, const Epoch& ep, size_t k, int64_t worker_id,
                 const std::optional<cuda::Stream>& side) {
  Slot slot;
  const DataLoaderOptions& o = impl.options;
  size_t begin = k * static_cast<size_t>(o.batch_size());
  size_t end = std::min(impl.num_examples, begin + static_cast<size_t>(o.batch_size()));
  auto rows = static_cast<int64_t>(end - begin);
  size_t index = 0;
  bool in_get = false;
  try {
    NoGradGuard no_grad;
    detail::LoaderThreadGuard state({true, impl.seed, ep.number, std::max<int64_t>(worker_id, 0), o.num_workers()});
    Tensor data, target;
    Example<> first;
    size_t first_index = 0;
    if (impl.stacked) {
      data = gather_rows(impl.stacked->data, ep, begin, end, o.pin_memory());
      target = gather_rows(impl.stacked->target, ep, begin, end, o.pin_memory());
    }
    for (size_t p = begin; p < end && !impl.stacked; ++p) {
      if (ep.cancelled.load(std::memory_order_relaxed)) return {};
      index = ep.order[p];
      in_get = true;
      Example<> ex = impl.dataset->get(index);
      in_get = false;
      auto j = static_cast<int64_t>(p - begin);
      TANDEM_CHECK(ex.data.defined() && ex.target.defined(), ValueError, "DataLoader: example ", index, " of ",
                   impl.dataset->name(), " has an undefined ", ex.data.defined() ? "target" : "data",
                   " tensor; a Dataset's get() must return both");
      TANDEM_CHECK(ex.data.is_cpu() && ex.target.is_cpu(), DeviceError, "DataLoader: example ", index, " of ",
                   impl.dataset->name(), " has its ", ex.data.is_cpu() ? "target" : "data", " on ",
                   (ex.data.is_cpu() ? ex.target : ex.data).device().str(),
                   "; a Dataset gives cpu tensors, and the DataLoader's `device` option moves whole batches");
      if (j == 0) {
        first = ex;
        first_index = index;
        std::vector<int64_t> dsize{rows}, tsize{rows};
        dsize.insert(dsize.end(), ex.data.sizes().begin(), ex.data.sizes().end());
        tsize.insert(tsize.end(), ex.target.sizes().begin(), ex.target.sizes().end());
        data = empty(dsize, TensorOptions(ex.data.dtype()).pinned_memory(o.pin_memory()));
        target = empty(tsize, TensorOptions(ex.target.dtype()).pinned_memory(o.pin_memory()));
      } else {
        for (auto [name, got, want] :
             {std::tuple{"data", &ex.data, &first.data}, std::tuple{"target", &ex.target, &first.target}}) {
          TANDEM_CHECK(got->sizes() == want->sizes() && got->dtype() == want->dtype(), ShapeError, "DataLoader: batch ",
                       k, " cannot be stacked: example ", index, " has ", name, " of shape ", shape_str(got->sizes()),
                       " and dtype ", dtype_name(got->dtype()), ", but example ", first_index,
                       ", the batch's first, has ", shape_str(want->sizes()), " and ", dtype_name(want->dtype()),
                       ". Every example of a batch must have the same shape and dtype");
        }
      }
      stack_into(data, j, ex.data);
      stack_into(target, j, ex.target);
    }
    data.set_origin(impl.host_origin);
    target.set_origin(impl.host_origin);
    if (impl.device && impl.device->is_cuda()) {
      cuda::StreamGuard guard(*side);
      Tensor d = data.to(*impl.device, /*non_blocking=*/true);
      Tensor t = target.to(*impl.device, /*non_blocking=*/true);
      d.set_origin(impl.device_origin);
      t.set_origin(impl.device_origin);
      slot.copied.emplace();
      slot.copied->record(*side);
      slot.batch = {d, t};
    } else {
      slot.batch = {data, target};
    }
  } catch (const Error& e) {
    // The loader's own checks say everything already.
    if (!in_get && std::string_view(e.what()).starts_with("DataLoader: ")) return {{}, std::current_exception(), {}};
    return {{}, worker_error(std::current_exception(), in_get, index, k, ep.number, worker_id), {}};
  } catch (...) {
    return {{}, worker_error(std::current_exception(), in_get, index, k, ep.number, worker_id), {}};
  }
  return slot;
}

// The sampler's indices for epoch `epoch`, checked against what the loader
// planned when it was made: their number, and that each is an example.
std::vector<size_t> sampler_order(const LoaderConfig& cfg, uint64_t epoch) {
  Sampler& sampler = *cfg.options.sampler();
  std::vector<size_t> order = sampler.indices();
  TANDEM_CHECK(order.size() == cfg.num_examples, ValueError, "DataLoader: ", sampler.name(), " gave ", order.size(),
               " indices for epoch ", epoch, ", but its size() was ", cfg.num_examples,
               " when the loader was made and planned its batches; a sampler must give size() indices every epoch");
  for (size_t p = 0; p < order.size(); ++p) {
    TANDEM_CHECK(order[p] < cfg.dataset_size, IndexError, "DataLoader: ", sampler.name(), " gave index ", order[p],
                 " (position ", p, " of epoch ", epoch, "), but ", cfg.dataset->name(), " has ", cfg.dataset_size,
                 " examples. Was the sampler made for another dataset?");
  }
  return order;
}

// ---- worker threads

// What the consumer and the workers share, guarded by mu. Held by
// shared_ptr, so that abandoned workers can finish without the pool.
struct PoolState {
  std::mutex mu;
  std::condition_variable work;  // workers wait here
  std::condition_variable done;  // the consumer waits here
  std::shared_ptr<Epoch> epoch;
  bool stop = false;
};

class WorkerPool {
 public:
  WorkerPool(std::shared_ptr<const LoaderConfig> cfg, int64_t n)
      : cfg_(std::move(cfg)), st_(std::make_shared<PoolState>()) {
    threads_.reserve(static_cast<size_t>(n));
    try {
      for (int64_t id = 0; id < n; ++id) {
        // Each worker queues its copies on a stream of the device's pool.
        std::optional<cuda::Stream> side;
        if (cfg_->device && cfg_->device->is_cuda()) side = cuda::get_stream_from_pool(cfg_->device->index());
        threads_.emplace_back(run, cfg_, st_, id, side);
      }
    } catch (...) {
      stop();
      throw;
    }
  }
  ~WorkerPool() { stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False once workers were abandoned in a Dataset::get that outlived the timeout.
  bool usable() const { return !abandoned_; }

  void start(std::shared_ptr<Epoch> ep) {
    {
      std::lock_guard<std::mutex> lock(st_->mu);
      st_->epoch = std::move(ep);
    }
    st_->work.notify_all();
  }

  // Batch k of the current epoch, once built (in order: k is next_deliver).
  Slot take(size_t k) {
    PoolState& st = *st_;
    std::unique_lock<std::mutex> lock(st.mu);
    Epoch& ep = *st.epoch;
    auto ready = [&] { return ep.done.count(k) > 0; };
    double timeout = cfg_->options.timeout();
    if (timeout > 0) {
      if (!st.done.wait_for(lock, std::chrono::duration<double>(timeout), ready)) {
        ep.cancelled = true;
        TANDEM_CHECK(false, Error, "DataLoader timed out after ", timeout, " s waiting for batch ", k, " of epoch ",
                     ep.number, " from its ", threads_.size(), " workers (", ep.in_flight,
                     " batches being built). Raise the timeout, or look for a Dataset::get that blocks");
      }
    } else {
      st.done.wait(lock, ready);
    }
    auto it = ep.done.find(k);
    Slot slot = std::move(it->second);
    ep.done.erase(it);
    ep.next_deliver = k + 1;
    lock.unlock();
    st.work.notify_one();  // one batch more may be built: one worker is enough
    return slot;
  }

  // Stops the current epoch: workers drop what they are building at the
  // next example and go idle. Waits until none is building; with a timeout
  // set, at most that long, and then abandons the pool (a Dataset::get
  // that never returns keeps its thread, which exits when it does).
  void finish() {
    PoolState& st = *st_;
    std::unique_lock<std::mutex> lock(st.mu);
    if (!st.epoch) return;
    st.epoch->cancelled = true;
    auto idle = [&] { return st.epoch->in_flight == 0; };
    double timeout = cfg_->options.timeout();
    if (timeout > 0) {
      abandoned_ = !st.done.wait_for(lock, std::chrono::duration<double>(timeout), idle);
    } else {
      st.done.wait(lock, idle);
    }
    std::map<size_t, Slot> dropped = std::move(st.epoch->done);
    st.epoch.reset();
    lock.unlock();  // the batches built ahead are freed outside the lock
  }

 private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(st_->mu);
      st_->stop = true;
      if (st_->epoch) st_->epoch->cancelled = true;
    }
    st_->work.notify_all();
    for (std::thread& t : threads_) {
      if (!t.joinable()) continue;
      if (abandoned_) {
        t.detach();
      } else {
        t.join();
      }
    }
  }

  static bool has_work(const LoaderConfig& cfg, const Epoch& ep) {
    return !ep.cancelled && ep.next_fetch < cfg.num_batches && ep.next_fetch < ep.next_deliver + cfg.window;
  }

  static void run(std::shared_ptr<const LoaderConfig> cfg, std::shared_ptr<PoolState> state, int64_t id,
                  std::optional<cuda::Stream> side) {
    PoolState& st = *state;
    std::unique_lock<std::mutex> lock(st.mu);
    while (true) {
      st.work.wait(lock, [&] { return st.stop || (st.epoch && has_work(*cfg, *st.epoch)); });
      if (st.stop) return;
      std::shared_ptr<Epoch> ep = st.epoch;
      size_t k = ep->next_fetch++;
      ++ep->in_flight;
      lock.unlock();
      Slot slot = build_batch(*cfg, *ep, k, id, side);
      lock.lock();
      --ep->in_flight;
      if (!ep->cancelled) {
        ep->done.emplace(k, std::move(slot));
      } else {
        lock.unlock();
        slot = {};  // freed outside the lock
        lock.lock();
      }
      st.done.notify_all();
    }
  }

  std::shared_ptr<const LoaderConfig> cfg_;
  std::shared_ptr<PoolState> st_;
  std::vector<std::thread> threads_;
  bool abandoned_ = false;
};

}  // namespace

// ---- the loader's state between epochs

struct DataLoader::Impl {
  std::shared_ptr<const LoaderConfig> cfg;
  uint64_t epochs = 0;
  bool epoch_active = false;
  std::unique_ptr<WorkerPool> persistent_pool;
  std::optional<cuda::Stream> main_side_stream;  // num_workers = 0: the caller's copies
};

// ---- one pass

struct DataLoader::EpochRun {
  std::shared_ptr<Impl> impl;
  std::shared_ptr<Epoch> ep;
  std::unique_ptr<WorkerPool> own_pool;  // without persistent workers
  WorkerPool* pool = nullptr;
  Batch current;
  bool exhausted = false;
  bool finished = false;

  ~EpochRun() { finish(); }

  // Stops and joins the epoch's workers (idempotent); the loader may then
  // begin the next epoch.
  void finish() {
    if (finished) return;
    finished = true;
    if (pool != nullptr) pool->finish();
    pool = nullptr;
    own_pool.reset();
    impl->epoch_active = false;
  }

  void advance() {
    current = {};  // the previous batch's memory can go back to the caches now
    const LoaderConfig& cfg = *impl->cfg;
    size_t k = ep->next_deliver;
    if (k >= cfg.num_batches) {
      exhausted = true;
      finish();
      return;
    }
    try {
      Slot slot;
      if (pool != nullptr) {
        slot = pool->take(k);
      } else {
        if (cfg.device && cfg.device->is_cuda() && !impl->main_side_stream)
          impl->main_side_stream = cuda::get_stream_from_pool(cfg.device->index());
        slot = build_batch(cfg, *ep, k, -1, impl->main_side_stream);
        ep->next_deliver = k + 1;
      }
      if (slot.error) std::rethrow_exception(slot.error);
      if (slot.copied) {
        // The caller's stream waits for the copy, and the allocator will not
        // reuse the batch's memory on the side stream before its work is done.
        cuda::Stream stream = cuda::current_stream(cfg.device->index());
        slot.copied->wait(stream);
        slot.batch.data.record_stream(stream);
        slot.batch.target.record_stream(stream);
      }
      current = std::move(slot.batch);
    } catch (...) {
      // The epoch ends at its first error; the iterator is at its end.
      exhausted = true;
      finish();
      throw;
    }
  }
};

// ---- DataLoader

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options, std::source_location loc)
    : impl_(std::make_shared<Impl>()) {
  TANDEM_CHECK(dataset != nullptr, ValueError, "DataLoader: the dataset is null");
  const DataLoaderOptions& o = options;
  TANDEM_CHECK(o.batch_size() > 0, ValueError,
               "DataLoader: batch_size should be a positive integer value, but got batch_size=", o.batch_size());
  TANDEM_CHECK(o.num_workers() >= 0, ValueError,
               "DataLoader: num_workers option should be non-negative; use num_workers=0 to load in the calling "
               "thread; got ",
               o.num_workers());
  TANDEM_CHECK(o.num_workers() > 0 || !o.prefetch_factor(), ValueError,
               "DataLoader: prefetch_factor option could only be specified with worker threads. Set num_workers > 0 "
               "to use workers, otherwise leave prefetch_factor unset");
  TANDEM_CHECK(!o.prefetch_factor() || *o.prefetch_factor() > 0, ValueError,
               "DataLoader: prefetch_factor should be a positive integer, but got ", o.prefetch_factor().value_or(0));
  TANDEM_CHECK(o.num_workers() > 0 || !o.persistent_workers(), ValueError,
               "DataLoader: persistent_workers option needs num_workers > 0");
  TANDEM_CHECK(o.timeout() >= 0, ValueError, "DataLoader: timeout option should be non-negative, but got ",
               o.timeout());
  TANDEM_CHECK(o.num_workers() > 0 || o.timeout() == 0, ValueError,
               "DataLoader: the timeout bounds the wait for a worker's batch; with num_workers=0 there are no "
               "workers to wait for. Set num_workers > 0, or leave the timeout at 0");
  TANDEM_CHECK(!(o.sampler() && o.shuffle()), ValueError,
               "DataLoader: sampler option is mutually exclusive with shuffle. The sampler gives each epoch's order: "
               "shuffle in the sampler (DistributedSampler shuffles by default) and leave the loader's shuffle off");
  std::optional<size_t> n = dataset->size();
  TANDEM_CHECK(n.has_value(), ValueError, "DataLoader: ", dataset->name(),
               " does not know its size (size() returned nullopt); a DataLoader needs it to plan its batches");
  if (o.pin_memory()) check_pinning_possible("DataLoader(pin_memory=true)");
  auto cfg = std::make_shared<LoaderConfig>();
  if (o.device()) cfg->device = resolve_device(*o.device(), "DataLoader");
  auto bs = static_cast<size_t>(o.batch_size());
  cfg->dataset_size = *n;
  cfg->num_examples = o.sampler() ? o.sampler()->size() : *n;
  cfg->num_batches = o.drop_last() ? cfg->num_examples / bs : (cfg->num_examples + bs - 1) / bs;
  cfg->window = static_cast<size_t>(o.num_workers() * o.prefetch_factor().value_or(2));
  if (o.seed()) {
    cfg->seed = *o.seed();
  } else {
    PhiloxState s = default_generator().reserve(1);
    Philox4x32 r = philox(s.offset, 0, s.seed);
    cfg->seed = philox_u64(r.w[0], r.w[1]);
  }
  cfg->host_origin = Origin::created("DataLoader", loc);
  cfg->device_origin = Origin::moved("DataLoader", loc);
  cfg->host_origin.label = cfg->device_origin.label = "a batch";
  cfg->stacked = dataset->stacked();
  if (cfg->stacked) {
    const Example<>& st = *cfg->stacked;
    bool fits = st.data.defined() && st.target.defined() && st.data.is_cpu() && st.target.is_cpu() &&
                st.data.dim() >= 1 && st.target.dim() >= 1 && st.data.size(0) == static_cast<int64_t>(*n) &&
                st.target.size(0) == static_cast<int64_t>(*n);
    TANDEM_CHECK(fits, ValueError, "DataLoader: ", dataset->name(),
                 "'s stacked() must give two defined cpu tensors with one row per example (", *n,
                 "); got data of shape ", st.data.defined() ? shape_str(st.data.sizes()) : "undefined",
                 " and target of shape ", st.target.defined() ? shape_str(st.target.sizes()) : "undefined");
  }
  cfg->dataset = std::move(dataset);
  cfg->options = std::move(options);  // o is not read after this
  impl_->cfg = std::move(cfg);
}

DataLoader::~DataLoader() = default;
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

DataLoader::Impl& DataLoader::impl() const {
  TANDEM_CHECK(impl_ != nullptr, ValueError, "DataLoader: this loader was moved from; use the one it was moved to");
  return *impl_;
}

DataLoader::Iterator DataLoader::begin(size_t first_batch) {
  Impl& impl = this->impl();
  const LoaderConfig& cfg = *impl.cfg;
  TANDEM_CHECK(first_batch <= cfg.num_batches, IndexError, "DataLoader.begin: batch ", first_batch,
               " is past the epoch's end (", cfg.num_batches, " batches)");
  TANDEM_CHECK(!impl.epoch_active, Error,
               "DataLoader: attempted to start an epoch (begin()) while another iterator over this loader is not yet "
               "exhausted. Finish or destroy the first iteration before starting the next");
  // Asked before anything changes, so a sampler that throws, or gives what
  // the loader cannot use, leaves the loader as it was.
  std::vector<size_t> order = cfg.options.sampler()
                                  ? sampler_order(cfg, impl.epochs)
                                  : detail::epoch_order(cfg.num_examples, cfg.options.shuffle(), cfg.seed, impl.epochs);
  auto run = std::make_unique<EpochRun>();
  run->impl = impl_;
  run->ep = std::make_shared<Epoch>();
  run->ep->number = impl.epochs++;
  run->ep->order = std::move(order);
  run->ep->next_fetch = run->ep->next_deliver = first_batch;
  impl.epoch_active = true;
  int64_t workers = cfg.options.num_workers();
  if (workers > 0 && cfg.num_batches > 0) {
    if (cfg.options.persistent_workers()) {
      // A pool abandoned after a timeout is replaced.
      if (!impl.persistent_pool || !impl.persistent_pool->usable())
        impl.persistent_pool = std::make_unique<WorkerPool>(impl.cfg, workers);
      run->pool = impl.persistent_pool.get();
    } else {
      run->own_pool =
          std::make_unique<WorkerPool>(impl.cfg, std::min<int64_t>(workers, static_cast<int64_t>(cfg.num_batches)));
      run->pool = run->own_pool.get();
    }
    run->pool->start(run->ep);
  }
  run->advance();
  return Iterator(std::move(run));
}

size_t DataLoader::size() const { return impl().cfg->num_batches; }
uint64_t DataLoader::epochs() const { return impl().epochs; }
void DataLoader::set_epoch(uint64_t epoch) {
  TANDEM_CHECK(!impl().epoch_active, Error, "DataLoader.set_epoch: epoch ", impl().epochs - 1,
               " is still running; destroy its iterator (or finish the loop) before choosing the next epoch");
  impl().epochs = epoch;
}
uint64_t DataLoader::seed() const { return impl().cfg->seed; }
const DataLoaderOptions& DataLoader::options() const { return impl().cfg->options; }
const std::shared_ptr<Dataset>& DataLoader::dataset() const { return impl().cfg->dataset; }

// ---- Iterator

DataLoader::Iterator::Iterator(std::unique_ptr<EpochRun> run) : run_(std::move(run)) {}
DataLoader::Iterator::Iterator(Iterator&&) noexcept = default;
DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&&) noexcept = default;
DataLoader::Iterator::~Iterator() = default;

DataLoader::Batch& DataLoader::Iterator::operator*() const {
  TANDEM_CHECK(run_ && !run_->exhausted, Error,
               "DataLoader: dereferencing an iterator that is at the end of its epoch");
  return run_->current;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  TANDEM_CHECK(run_ && !run_->exhausted, Error, "DataLoader: advancing an iterator that is at the end of its epoch");
  run_->advance();
  return *this;
}

bool DataLoader::Iterator::operator==(std::default_sentinel_t) const { return !run_ || run_->exhausted; }

}  // namespace tandem::data

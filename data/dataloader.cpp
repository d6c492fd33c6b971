// The DataLoader: the epoch's order, the worker pool, batch building in
// (pinned) host memory, the side-stream copy to the device, and delivery in
// order with the caller's stream waiting for the copy.
#include "data/dataloader.h"

#include <cxxabi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

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

std::string demangled_type(const std::exception& e) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : typeid(e).name();
  std::free(name);
  return out;
}

// Throws an exception of the original's type (for Tandem's error types; a
// tandem::Error otherwise) whose message is context followed by the
// original's, with the original nested (std::rethrow_if_nested).
[[noreturn]] void rethrow_with_context(const std::exception_ptr& original, const std::string& context) {
  auto msg = [&](const std::exception& e) { return context + " " + demangled_type(e) + ": " + e.what(); };
  try {
    std::rethrow_exception(original);
  } catch (const DeviceError& e) {
    std::throw_with_nested(DeviceError(msg(e)));
  } catch (const DtypeError& e) {
    std::throw_with_nested(DtypeError(msg(e)));
  } catch (const ShapeError& e) {
    std::throw_with_nested(ShapeError(msg(e)));
  } catch (const IndexError& e) {
    std::throw_with_nested(IndexError(msg(e)));
  } catch (const ValueError& e) {
    std::throw_with_nested(ValueError(msg(e)));
  } catch (const OutOfMemoryError& e) {
    std::throw_with_nested(OutOfMemoryError(msg(e)));
  } catch (const NotImplementedError& e) {
    std::throw_with_nested(NotImplementedError(msg(e)));
  } catch (const CudaError& e) {
    std::throw_with_nested(CudaError(msg(e)));
  } catch (const KeyError& e) {
    std::throw_with_nested(KeyError(msg(e)));
  } catch (const SerializationError& e) {
    std::throw_with_nested(SerializationError(msg(e)));
  } catch (const std::exception& e) {
    std::throw_with_nested(Error(msg(e)));
  } catch (...) {
    std::throw_with_nested(Error(context + " an exception that is not a std::exception"));
  }
}

using Clock = std::chrono::steady_clock;

}  // namespace

// ---- the loader's fixed state

struct DataLoader::Impl {
  std::shared_ptr<Dataset> dataset;
  DataLoaderOptions options;
  std::optional<Device> device;  // resolved
  size_t num_examples = 0;
  size_t num_batches = 0;
  size_t window = 0;  // batches built ahead of the consumer: prefetch_factor * num_workers
  uint64_t seed = 0;
  Origin host_origin, device_origin;  // of the batches' tensors
  uint64_t epochs = 0;
  bool epoch_active = false;
  std::unique_ptr<class WorkerPool> persistent_pool;
  std::optional<cuda::Stream> main_side_stream;  // num_workers = 0: the caller's copies

  ~Impl();
};

namespace {

// One batch as built: its tensors, or what went wrong, and the event that
// marks its copy to the device.
struct Slot {
  Example<> batch;
  std::exception_ptr error;
  std::optional<cuda::Event> copied;
};

}  // namespace

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

namespace {

// The order of an epoch: 0..N-1, or a Fisher-Yates shuffle whose draws are
// Philox counters under a key mixed from (seed, epoch), so it depends on
// nothing else.
std::vector<size_t> epoch_order(size_t n, bool shuffle, uint64_t seed, uint64_t epoch) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  if (!shuffle) return order;
  uint64_t key = detail::mix_seed(seed, epoch, ~uint64_t{0});
  for (size_t i = n; i > 1; --i) {
    Philox4x32 r = philox(i - 1, 0, key);
    auto j = static_cast<size_t>(randint_from_u64(philox_u64(r.w[0], r.w[1]), 0, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::string where(int64_t worker_id) {
  return worker_id < 0 ? "the DataLoader's calling thread (num_workers=0)"
                       : tandem::detail::str_cat("DataLoader worker ", worker_id);
}

std::exception_ptr with_context(const std::exception_ptr& original, bool in_get, size_t index, size_t k, uint64_t epoch,
                                int64_t worker_id);

// Copies one example's tensor into row j of a batch.
void stack_into(const Tensor& batch, int64_t j, const Tensor& x) {
  size_t row = x.nbytes();
  if (x.is_contiguous()) {
    std::memcpy(static_cast<char*>(batch.data_ptr()) + static_cast<size_t>(j) * row, x.data_ptr(), row);
  } else {
    batch.select(0, j).copy_(x);
  }
}

// The examples of batch k stacked along a new first dimension, in pinned
// memory when asked, then (with a device) copied there on `side`. Never
// throws: an error is returned in the slot, with where it happened.
Slot build_batch(const DataLoader::Impl& impl, const Epoch& ep, size_t k, int64_t worker_id,
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
    for (size_t p = begin; p < end; ++p) {
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
    if (!in_get && std::string_view(e.what()).starts_with("DataLoader: ")) {
      slot.error = std::current_exception();
      slot.batch = {};
      return slot;
    }
    slot.error = with_context(std::current_exception(), in_get, index, k, ep.number, worker_id);
    slot.batch = {};
  } catch (...) {
    slot.error = with_context(std::current_exception(), in_get, index, k, ep.number, worker_id);
    slot.batch = {};
  }
  return slot;
}

// The error a worker hands on: the original's type, with where it happened.
std::exception_ptr with_context(const std::exception_ptr& original, bool in_get, size_t index, size_t k, uint64_t epoch,
                                int64_t worker_id) {
  std::string context =
      in_get ? tandem::detail::str_cat("Caught an exception in ", where(worker_id), " while loading example ", index,
                                       " (batch ", k, " of epoch ", epoch, "):")
             : tandem::detail::str_cat("In ", where(worker_id), ", building batch ", k, " of epoch ", epoch, ":");
  try {
    rethrow_with_context(original, context);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

// ---- worker threads

class WorkerPool {
 public:
  WorkerPool(const DataLoader::Impl& impl, int64_t n) : impl_(impl) {
    threads_.reserve(static_cast<size_t>(n));
    try {
      for (int64_t id = 0; id < n; ++id) {
        // Each worker queues its copies on a stream of its own.
        std::optional<cuda::Stream> side;
        if (impl_.device && impl_.device->is_cuda()) side = cuda::get_stream_from_pool(impl_.device->index());
        threads_.emplace_back([this, id, side] { run(id, side); });
      }
    } catch (...) {
      stop();
      throw;
    }
  }
  ~WorkerPool() { stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void start(std::shared_ptr<Epoch> ep) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      epoch_ = std::move(ep);
    }
    work_.notify_all();
  }

  // Batch k of the current epoch, once built (in order: k is next_deliver).
  Slot take(size_t k) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return epoch_->done.count(k) > 0; };
    double timeout = impl_.options.timeout();
    if (timeout > 0) {
      auto limit = std::chrono::duration<double>(timeout);
      TANDEM_CHECK(done_.wait_for(lock, limit, ready), Error, "DataLoader timed out after ", timeout,
                   " s waiting for batch ", k, " of epoch ", epoch_->number, " from its ", threads_.size(),
                   " workers (", epoch_->in_flight,
                   " batches being built). Raise the timeout, or look for a Dataset::get that blocks");
    } else {
      done_.wait(lock, ready);
    }
    auto it = epoch_->done.find(k);
    Slot slot = std::move(it->second);
    epoch_->done.erase(it);
    epoch_->next_deliver = k + 1;
    lock.unlock();
    work_.notify_all();
    return slot;
  }

  // Stops the current epoch: workers drop what they are building at the
  // next example and go idle; returns once none is building.
  void finish() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!epoch_) return;
    epoch_->cancelled = true;
    done_.wait(lock, [&] { return epoch_->in_flight == 0; });
    std::map<size_t, Slot> dropped = std::move(epoch_->done);
    epoch_.reset();
    lock.unlock();  // the batches built ahead are freed outside the lock
  }

 private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      if (epoch_) epoch_->cancelled = true;
    }
    work_.notify_all();
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }

  bool has_work() const {
    const Epoch& ep = *epoch_;
    return !ep.cancelled && ep.next_fetch < impl_.num_batches && ep.next_fetch < ep.next_deliver + impl_.window;
  }

  void run(int64_t id, const std::optional<cuda::Stream>& side) {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      work_.wait(lock, [&] { return stop_ || (epoch_ && has_work()); });
      if (stop_) return;
      std::shared_ptr<Epoch> ep = epoch_;
      size_t k = ep->next_fetch++;
      ++ep->in_flight;
      lock.unlock();
      Slot slot = build_batch(impl_, *ep, k, id, side);
      lock.lock();
      --ep->in_flight;
      if (!ep->cancelled) {
        ep->done.emplace(k, std::move(slot));
      } else {
        lock.unlock();
        slot = {};  // freed outside the lock
        lock.lock();
      }
      done_.notify_all();
    }
  }

  const DataLoader::Impl& impl_;
  std::mutex mu_;
  std::condition_variable work_;  // workers wait here
  std::condition_variable done_;  // the consumer waits here
  std::shared_ptr<Epoch> epoch_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

DataLoader::Impl::~Impl() = default;

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
    size_t k = ep->next_deliver;
    if (k >= impl->num_batches) {
      exhausted = true;
      finish();
      return;
    }
    Slot slot;
    if (pool != nullptr) {
      slot = pool->take(k);
    } else {
      if (impl->device && impl->device->is_cuda() && !impl->main_side_stream)
        impl->main_side_stream = cuda::get_stream_from_pool(impl->device->index());
      slot = build_batch(*impl, *ep, k, -1, impl->main_side_stream);
      ep->next_deliver = k + 1;
    }
    if (slot.error) {
      exhausted = true;
      finish();
      std::rethrow_exception(slot.error);
    }
    if (slot.copied) {
      // The caller's stream waits for the copy, and the allocator will not
      // reuse the batch's memory on the side stream before its work is done.
      cuda::Stream stream = cuda::current_stream(impl->device->index());
      slot.copied->wait(stream);
      slot.batch.data.record_stream(stream);
      slot.batch.target.record_stream(stream);
    }
    current = std::move(slot.batch);
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
  std::optional<size_t> n = dataset->size();
  TANDEM_CHECK(n.has_value(), ValueError, "DataLoader: ", dataset->name(),
               " does not know its size (size() returned nullopt); a DataLoader needs it to plan its batches");
  if (o.pin_memory()) check_pinning_possible("DataLoader(pin_memory=true)");
  Impl& impl = *impl_;
  if (o.device()) impl.device = resolve_device(*o.device(), "DataLoader");
  impl.dataset = std::move(dataset);
  impl.options = std::move(options);
  impl.num_examples = *n;
  auto bs = static_cast<size_t>(o.batch_size());
  impl.num_batches = o.drop_last() ? *n / bs : (*n + bs - 1) / bs;
  impl.window = static_cast<size_t>(o.num_workers() * o.prefetch_factor().value_or(2));
  if (o.seed()) {
    impl.seed = *o.seed();
  } else {
    PhiloxState s = default_generator().reserve(1);
    Philox4x32 r = philox(s.offset, 0, s.seed);
    impl.seed = philox_u64(r.w[0], r.w[1]);
  }
  impl.host_origin = Origin::created("DataLoader", loc);
  impl.device_origin = Origin::moved("DataLoader", loc);
  impl.host_origin.label = impl.device_origin.label = "a batch";
}

DataLoader::~DataLoader() = default;

DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

DataLoader::Impl& DataLoader::impl() const {
  TANDEM_CHECK(impl_ != nullptr, ValueError, "DataLoader: this loader was moved from; use the one it was moved to");
  return *impl_;
}

DataLoader::Iterator DataLoader::begin() {
  Impl& impl = this->impl();
  TANDEM_CHECK(!impl.epoch_active, Error,
               "DataLoader: attempted to start an epoch (begin()) while another iterator over this loader is not yet "
               "exhausted. Finish or destroy the first iteration before starting the next");
  auto run = std::make_unique<EpochRun>();
  run->impl = impl_;
  run->ep = std::make_shared<Epoch>();
  run->ep->number = impl.epochs++;
  run->ep->order = epoch_order(impl.num_examples, impl.options.shuffle(), impl.seed, run->ep->number);
  impl.epoch_active = true;
  int64_t workers = impl.options.num_workers();
  if (workers > 0 && impl.num_batches > 0) {
    if (impl.options.persistent_workers()) {
      if (!impl.persistent_pool) impl.persistent_pool = std::make_unique<WorkerPool>(impl, workers);
      run->pool = impl.persistent_pool.get();
    } else {
      run->own_pool = std::make_unique<WorkerPool>(impl, std::min<int64_t>(workers, impl.num_batches));
      run->pool = run->own_pool.get();
    }
    run->pool->start(run->ep);
  }
  run->advance();
  return Iterator(std::move(run));
}

size_t DataLoader::size() const { return impl().num_batches; }
uint64_t DataLoader::epochs() const { return impl().epochs; }
uint64_t DataLoader::seed() const { return impl().seed; }
const DataLoaderOptions& DataLoader::options() const { return impl().options; }
const std::shared_ptr<Dataset>& DataLoader::dataset() const { return impl().dataset; }

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

// The Gloo backend (Debian's libgloo-dev, TCP transport): a full mesh of
// connections made through Tandem's store, and one worker thread that runs
// the group's collectives in the order they were queued, so that every rank
// issues them to Gloo in the same order. cpu tensors are used in place
// (non-contiguous ones through a contiguous copy); cuda tensors are staged
// through host memory on the calling thread, which waits for the result.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include "distributed/process_group.h"
#include "distributed/process_group_private.h"
#include "tensor/core/errors.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/half.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/shape_ops.h"

namespace tandem::distributed {

namespace {

using Ms = std::chrono::milliseconds;
using tandem::detail::str_cat;

// Gloo's rendezvous over any Tandem store.
class GlooStore : public ::gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<distributed::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::vector<uint8_t> v = store_->get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const Ms& timeout) override { store_->wait(keys, timeout); }

 private:
  std::shared_ptr<distributed::Store> store_;
};

// ---- reductions: Gloo calls fn(out, a, b, n) on chunks of the buffers.
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// The type integers are combined in: unsigned, where overflow wraps.
template <typename T, bool = std::is_integral_v<T>>
struct Wrapping {
  using type = T;
};
template <typename T>
struct Wrapping<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T, ReduceOp Op>
void reduce_loop(void* out, const void* a, const void* b, size_t n) {
  // 16-bit floats are combined in float and rounded once per step.
  using Acc = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) {
    Acc u = static_cast<Acc>(x[i]), v = static_cast<Acc>(y[i]);
    Acc r;
    // Integers wrap, as torch's do: computed unsigned, where overflow is defined.
    using Wide = typename Wrapping<Acc>::type;
    if constexpr (Op == ReduceOp::SUM || Op == ReduceOp::AVG) {
      r = static_cast<Acc>(static_cast<Wide>(u) + static_cast<Wide>(v));
    } else if constexpr (Op == ReduceOp::PRODUCT) {
      r = static_cast<Acc>(static_cast<Wide>(u) * static_cast<Wide>(v));
    } else if constexpr (Op == ReduceOp::MIN) {
      r = (u != u || u < v) ? u : v;  // NaN wins, as torch.minimum's
    } else {
      r = (u != u || u > v) ? u : v;
    }
    o[i] = static_cast<T>(r);
  }
}

template <typename T>
ReduceFn reduce_fn_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return &reduce_loop<T, ReduceOp::SUM>;
    case ReduceOp::PRODUCT: return &reduce_loop<T, ReduceOp::PRODUCT>;
    case ReduceOp::MIN: return &reduce_loop<T, ReduceOp::MIN>;
    case ReduceOp::MAX: return &reduce_loop<T, ReduceOp::MAX>;
  }
  return nullptr;
}

ReduceFn reduce_fn(const char* op_name, Dtype dtype, ReduceOp op) {
  TANDEM_CHECK(op != ReduceOp::AVG || is_floating_point(dtype), DtypeError, op_name,
               ": ReduceOp::AVG needs a floating point tensor (the sum is divided by the world size), got ",
               dtype_name(dtype), "; use SUM and divide yourself");
  switch (dtype) {
    case kFloat32: return reduce_fn_of<float>(op);
    case kFloat64: return reduce_fn_of<double>(op);
    case kFloat16: return reduce_fn_of<Half>(op);
    case kBFloat16: return reduce_fn_of<BFloat16>(op);
    case kInt64: return reduce_fn_of<int64_t>(op);
    case kInt32: return reduce_fn_of<int32_t>(op);
    case kUInt8: return reduce_fn_of<uint8_t>(op);
    case kBool: break;
  }
  TANDEM_CHECK(false, NotImplementedError, op_name, " with ReduceOp::", reduce_op_name(op), " is not implemented for ",
               dtype_name(dtype), " tensors on the gloo backend; convert to uint8 or int32 first");
  return nullptr;
}

// Gloo's typed setters only take the element size from T; the reduction
// function is ours, so one unsigned type per size serves every dtype.
template <typename Options>
void set_outputs(Options& opts, const std::vector<Tensor>& buffers) {
  std::vector<void*> ptrs;
  for (const Tensor& b : buffers) ptrs.push_back(b.data_ptr());
  size_t n = static_cast<size_t>(buffers[0].numel());
  switch (buffers[0].element_size()) {
    case 1: {
      std::vector<uint8_t*> p;
      for (void* v : ptrs) p.push_back(static_cast<uint8_t*>(v));
      opts.template setOutputs<uint8_t>(p, n);
      return;
    }
    case 2: {
      std::vector<uint16_t*> p;
      for (void* v : ptrs) p.push_back(static_cast<uint16_t*>(v));
      opts.template setOutputs<uint16_t>(p, n);
      return;
    }
    case 4: {
      std::vector<uint32_t*> p;
      for (void* v : ptrs) p.push_back(static_cast<uint32_t*>(v));
      opts.template setOutputs<uint32_t>(p, n);
      return;
    }
    default: {
      std::vector<uint64_t*> p;
      for (void* v : ptrs) p.push_back(static_cast<uint64_t*>(v));
      opts.template setOutputs<uint64_t>(p, n);
      return;
    }
  }
}

// The host buffers a collective works in: the tensors themselves when they
// are contiguous cpu tensors, else contiguous copies written back after.
// Only the tensors the collective writes (its outputs: `first_written` on)
// are written back and have their version bumped: an allgather's input may
// be saved for backward.
struct Buffers {
  std::vector<Tensor> targets;  // what the caller passed
  std::vector<Tensor> host;     // what Gloo reads and writes
  size_t first_written;
  Buffers(const std::vector<Tensor>& tensors, size_t first_written) : targets(tensors), first_written(first_written) {
    NoGradGuard no_grad;
    for (const Tensor& t : tensors) host.push_back(t.is_contiguous() ? t : t.contiguous());
  }
  // After the collective (the worker's thread, for cpu tensors).
  void write_back() {
    NoGradGuard no_grad;
    for (size_t i = first_written; i < targets.size(); ++i) {
      if (host[i].impl() != targets[i].impl()) targets[i].copy_(host[i]);
      targets[i].storage()->bump_version();
    }
  }
};

// Gloo writes to its sockets with writev and never ignores SIGPIPE: a peer
// that died would kill this process instead of failing the collective. Its
// threads (the device's loop, our worker) run with SIGPIPE blocked, so the
// write fails with EPIPE and Gloo throws; a SIGPIPE left pending on the
// calling thread by the rendezvous is taken before its mask is restored.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SigpipeBlocked() {
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    timespec zero{0, 0};
    while (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1 && sigtimedwait(&set, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t old_;
};

// A collective's description without the device index: ranks on cuda:0 and
// cuda:1 make the same call.
std::string signature_of(std::string what) {
  const std::string tag = " on cuda:";
  if (size_t at = what.find(tag); at != std::string::npos) {
    size_t end = at + tag.size();
    while (end < what.size() && std::isdigit(static_cast<unsigned char>(what[end]))) ++end;
    what.erase(at + tag.size() - 1, end - (at + tag.size() - 1));
  }
  return what;
}

bool is_loopback(const std::string& h) { return h == "localhost" || h.rfind("127.", 0) == 0 || h == "::1"; }

std::string default_host(const Store& store) {
  if (const char* h = std::getenv("TANDEM_GLOO_HOSTNAME"); h && *h) return h;
  // The store's address: reaching it over loopback means every rank is on
  // this machine, and loopback is then the one address sure to work.
  const Store* s = &store;
  while (auto* p = dynamic_cast<const PrefixStore*>(s)) s = p->underlying().get();
  if (auto* tcp = dynamic_cast<const TCPStore*>(s); tcp && is_loopback(tcp->host())) return "127.0.0.1";
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  // PyTorch's rule too: the host name, if it resolves to an address this
  // machine can bind.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &res) != 0 || !res) return "127.0.0.1";
  bool ok = false;
  for (addrinfo* a = res; a && !ok; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    ok = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(res);
  return ok ? std::string(name) : "127.0.0.1";
}

class ProcessGroupGloo final : public ProcessGroup {
 public:
  ProcessGroupGloo(std::shared_ptr<Store> store, int rank, int size, Ms timeout)
      : ProcessGroup(rank, size), store_(std::move(store)), timeout_(timeout) {
    ::gloo::transport::tcp::attr attr;
    if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
      attr.iface = iface;
    else
      attr.hostname = default_host(*store_);
    try {
      SigpipeBlocked no_sigpipe;
      device_ = ::gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
      context->setTimeout(timeout);
      GlooStore gloo_store(store_);
      context->connectFullMesh(gloo_store, device_);
      context_ = std::move(context);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      TANDEM_CHECK(false, DistributedError, "init_process_group(gloo): rank ", rank, " of ", size,
                   " could not connect to the other ranks (through the store at ", store_->describe(), ", host '",
                   attr.iface.empty() ? attr.hostname : "interface " + attr.iface, "', timeout ",
                   timeout.count() / 1000.0, " s): ", e.what(),
                   ". Did every rank start, with the same world size? Set GLOO_SOCKET_IFNAME to choose the "
                   "network interface");
    }
    {
      SigpipeBlocked no_sigpipe;  // inherited by the worker
      worker_ = std::thread([this] { loop(); });
    }
  }

  ~ProcessGroupGloo() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  std::string getBackendName() const override { return "gloo"; }

  std::shared_ptr<Work> allreduce(std::vector<Tensor>& tensors, const AllreduceOptions& opts) override {
    detail::check_collective_tensors("allreduce", tensors, /*same_shape=*/true);
    ReduceFn fn = reduce_fn("allreduce", tensors[0].dtype(), opts.reduceOp);
    ReduceOp op = opts.reduceOp;
    std::string what = str_cat("allreduce (", reduce_op_name(op), ", ", detail::describe_tensors(tensors), ")");
    return run_staged(what, tensors, opts.timeout, [this, fn, op](std::vector<Tensor>& host, uint32_t tag, Ms t) {
      gloo_allreduce(host, fn, tag, t);
      if (op == ReduceOp::AVG)
        for (Tensor& h : host) h.div_(static_cast<double>(size_));
    });
  }

  std::shared_ptr<Work> allreduce_coalesced(std::vector<Tensor>& tensors, const AllreduceOptions& opts) override {
    detail::check_collective_tensors("allreduce_coalesced", tensors, /*same_shape=*/false);
    ReduceFn fn = reduce_fn("allreduce_coalesced", tensors[0].dtype(), opts.reduceOp);
    ReduceOp op = opts.reduceOp;
    std::string what = str_cat("allreduce_coalesced (", reduce_op_name(op), ", ", tensors.size(), " tensors, ",
                               detail::describe_tensors(tensors), ")");
    return run_staged(what, tensors, opts.timeout, [this, fn, op](std::vector<Tensor>& host, uint32_t tag, Ms t) {
      // One flat buffer, one exchange, then each tensor its slice back.
      NoGradGuard no_grad;
      std::vector<Tensor> flat;
      for (const Tensor& h : host) flat.push_back(h.reshape({-1}));
      Tensor joined = cat(flat);
      std::vector<Tensor> one{joined};
      gloo_allreduce(one, fn, tag, t);
      if (op == ReduceOp::AVG) joined.div_(static_cast<double>(size_));
      int64_t at = 0;
      for (Tensor& h : host) {
        h.reshape({-1}).copy_(joined.slice(0, at, at + h.numel()));
        at += h.numel();
      }
    });
  }

  std::shared_ptr<Work> broadcast(std::vector<Tensor>& tensors, const BroadcastOptions& opts) override {
    detail::check_collective_tensors("broadcast", tensors, /*same_shape=*/true);
    check_root("broadcast", opts.rootRank);
    TANDEM_CHECK(opts.rootTensor >= 0 && opts.rootTensor < static_cast<int64_t>(tensors.size()), ValueError,
                 "broadcast: invalid root tensor ", opts.rootTensor, " for ", tensors.size(), " tensors");
    int root = static_cast<int>(opts.rootRank);
    int64_t root_tensor = opts.rootTensor;
    std::string what = str_cat("broadcast (from rank ", root, ", ", detail::describe_tensors(tensors), ")");
    return run_staged(what, tensors, opts.timeout,
                      [this, root, root_tensor](std::vector<Tensor>& host, uint32_t tag, Ms t) {
                        Tensor& src = host[static_cast<size_t>(root_tensor)];
                        ::gloo::BroadcastOptions o(context_);
                        uint8_t* p = static_cast<uint8_t*>(src.data_ptr());
                        if (rank_ == root) o.setInput<uint8_t>(p, src.nbytes());
                        o.setOutput<uint8_t>(p, src.nbytes());
                        o.setRoot(root);
                        o.setTag(tag);
                        o.setTimeout(t);
                        ::gloo::broadcast(o);
                        NoGradGuard no_grad;
                        for (Tensor& h : host)
                          if (h.impl() != src.impl()) h.copy_(src);
                      });
  }

  std::shared_ptr<Work> allgather(std::vector<std::vector<Tensor>>& outputs, std::vector<Tensor>& inputs,
                                  const AllgatherOptions& opts) override {
    TANDEM_CHECK(inputs.size() == 1 && outputs.size() == 1, ValueError,
                 "allgather: the gloo backend takes one input tensor and one output list, got ", inputs.size(),
                 " inputs and ", outputs.size(), " output lists");
    detail::check_collective_tensors("allgather", inputs, true);
    std::vector<Tensor>& out = outputs[0];
    TANDEM_CHECK(static_cast<int>(out.size()) == size_, ValueError,
                 "allgather: the output list must hold one tensor "
                 "per rank (",
                 size_, "), got ", out.size());
    std::vector<Tensor> all{inputs[0]};  // the input first: only the list after it is written
    all.insert(all.end(), out.begin(), out.end());
    detail::check_collective_tensors("allgather", all, true);
    std::string what = str_cat("allgather (", detail::describe_tensors(inputs), " from each rank)");
    // The gathered bytes land in one contiguous buffer, then in the list.
    return run_staged(
        what, all, opts.timeout,
        [this](std::vector<Tensor>& host, uint32_t tag, Ms t) {
          NoGradGuard no_grad;
          Tensor& in = host.front();
          Tensor gathered = empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
          ::gloo::AllgatherOptions o(context_);
          o.setInput<uint8_t>(static_cast<uint8_t*>(in.data_ptr()), in.nbytes());
          o.setOutput<uint8_t>(static_cast<uint8_t*>(gathered.data_ptr()), gathered.nbytes());
          o.setTag(tag);
          o.setTimeout(t);
          ::gloo::allgather(o);
          for (int r = 0; r < size_; ++r)
            host[static_cast<size_t>(r) + 1].reshape({-1}).copy_(
                gathered.slice(0, r * in.numel(), (r + 1) * in.numel()));
        },
        /*first_written=*/1);
  }

  std::shared_ptr<Work> reduce_scatter(std::vector<Tensor>& outputs, std::vector<std::vector<Tensor>>& inputs,
                                       const ReduceScatterOptions& opts) override {
    TANDEM_CHECK(outputs.size() == 1 && inputs.size() == 1, ValueError,
                 "reduce_scatter: the gloo backend takes one output tensor and one input list, got ", outputs.size(),
                 " outputs and ", inputs.size(), " input lists");
    std::vector<Tensor>& in = inputs[0];
    TANDEM_CHECK(static_cast<int>(in.size()) == size_, ValueError,
                 "reduce_scatter: the input list must hold one "
                 "tensor per rank (",
                 size_, "), got ", in.size());
    std::vector<Tensor> all = in;
    all.push_back(outputs[0]);
    detail::check_collective_tensors("reduce_scatter", all, true);
    ReduceFn fn = reduce_fn("reduce_scatter", outputs[0].dtype(), opts.reduceOp);
    ReduceOp op = opts.reduceOp;
    std::string what =
        str_cat("reduce_scatter (", reduce_op_name(op), ", ", detail::describe_tensors(outputs), " to each rank)");
    // Gloo 0.5's options-style API has no reduce-scatter: an allreduce of
    // the whole list, keeping this rank's part (PyTorch's Gloo does the same).
    return run_staged(
        what, all, opts.timeout,
        [this, fn, op](std::vector<Tensor>& host, uint32_t tag, Ms t) {
          NoGradGuard no_grad;
          std::vector<Tensor> flat;
          for (int r = 0; r < size_; ++r) flat.push_back(host[static_cast<size_t>(r)].reshape({-1}));
          Tensor joined = cat(flat);
          std::vector<Tensor> one{joined};
          gloo_allreduce(one, fn, tag, t);
          int64_t n = host.back().numel();
          Tensor mine = joined.slice(0, rank_ * n, (rank_ + 1) * n);
          if (op == ReduceOp::AVG) mine.div_(static_cast<double>(size_));
          host.back().reshape({-1}).copy_(mine);
        },
        /*first_written=*/static_cast<size_t>(size_));
  }

  std::shared_ptr<Work> barrier(const BarrierOptions& opts) override {
    std::vector<Tensor> none;
    return enqueue("barrier", none, opts.timeout, [this](std::vector<Tensor>&, uint32_t tag, Ms t) {
      ::gloo::BarrierOptions o(context_);
      o.setTag(tag);
      o.setTimeout(t);
      ::gloo::barrier(o);
    });
  }

 private:
  using Body = std::function<void(std::vector<Tensor>& host, uint32_t tag, Ms timeout)>;
  struct Task {
    std::shared_ptr<Work> work;
    std::shared_ptr<Buffers> buffers;
    Body body;
    Ms timeout;
    uint64_t seq;
    std::string signature;  // what(), without the sequence number: equal on every rank
  };

  // Gloo's allreduce of every buffer into all of them (the buffers of one rank
  // are reduced together too, c10d's multi-tensor form).
  void gloo_allreduce(std::vector<Tensor>& buffers, ReduceFn fn, uint32_t tag, Ms timeout) {
    ::gloo::AllreduceOptions o(context_);
    set_outputs(o, buffers);
    o.setReduceFunction(fn);
    o.setTag(tag);
    o.setTimeout(timeout);
    ::gloo::allreduce(o);
  }

  void check_root(const char* op, int64_t root) const {
    TANDEM_CHECK(root >= 0 && root < size_, ValueError, op, ": invalid root rank ", root,
                 ", it should be in the interval [0, ", size_ - 1, "]");
  }

  // cpu tensors: queued, and written back by the worker. cuda tensors: copied
  // to host memory here, queued, waited for, and copied back here, on the
  // caller's streams (the Gloo build has no CUDA).
  std::shared_ptr<Work> run_staged(const std::string& what, std::vector<Tensor>& tensors, Ms timeout, Body body,
                                   size_t first_written = 0) {
    if (tensors.empty() || tensors[0].device().is_cpu())
      return enqueue(what, tensors, timeout, std::move(body), first_written);
    std::vector<Tensor> host;
    {
      NoGradGuard no_grad;
      for (const Tensor& t : tensors) host.push_back(t.to(Device(kCPU)).contiguous());
    }
    std::shared_ptr<Work> staged = enqueue(what, host, timeout, std::move(body), first_written);
    auto work = std::make_shared<Work>(staged->what(), tensors);
    work->start();  // the exchange and the copies back: what the caller waits for
    try {
      staged->wait();
      NoGradGuard no_grad;
      for (size_t i = first_written; i < tensors.size(); ++i) tensors[i].copy_(host[i]);
      work->finish();
    } catch (...) {
      work->finish(std::current_exception());
    }
    return work;
  }

  std::shared_ptr<Work> enqueue(const std::string& what, const std::vector<Tensor>& tensors, Ms timeout, Body body,
                                size_t first_written = 0) {
    auto buffers = std::make_shared<Buffers>(tensors, first_written);
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t seq = ++seq_;
    // "allreduce (SUM, ...)" -> "allreduce #7 (SUM, ...)"
    size_t space = std::min(what.find(' '), what.size());
    auto work = std::make_shared<Work>(str_cat(what.substr(0, space), " #", seq, what.substr(space)), tensors);
    Task task{work, std::move(buffers), std::move(body), timeout.count() < 0 ? timeout_ : timeout,
              seq,  signature_of(what)};
    if (detail::BlockingScope::active() && queue_.empty() && !busy_) {
      // A caller that will wait anyway, with nothing queued before it, runs
      // the collective itself: no hand-off to the worker and back (tens of
      // microseconds, a small allreduce's time). busy_ keeps the worker off
      // Gloo meanwhile, so the order is still the order of the calls.
      busy_ = true;
      lock.unlock();
      {
        SigpipeBlocked no_sigpipe;
        execute(task);
      }
      lock.lock();
      busy_ = false;
      cv_.notify_all();
      return work;
    }
    queue_.push_back(std::move(task));
    cv_.notify_all();
    return work;
  }

  // Runs one collective and finishes its Work; one thread at a time (busy_).
  void execute(Task& task) {
    task.work->start();
    std::exception_ptr error;
    if (failed_) {
      error = failed_;
    } else {
      try {
        if (debug_) check_same_collective(task);
        // The bodies' ops (AVG's division, the copies) are not a graph's.
        NoGradGuard no_grad;
        task.body(task.buffers->host, static_cast<uint32_t>(task.seq), task.timeout);
        task.buffers->write_back();
      } catch (const Error&) {
        error = std::current_exception();
      } catch (const std::exception& e) {
        error = std::make_exception_ptr(DistributedError(describe_failure(task, e.what())));
        // A Gloo context is unusable after an I/O error: the collectives
        // queued after it fail with the same error, at once.
        failed_ = error;
      }
    }
    task.buffers.reset();
    task.work->finish(error);
  }

  void loop() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return (stop_ && !busy_) || (!queue_.empty() && !busy_); });
        if (queue_.empty()) return;  // stop_, and nothing left to run
        task = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      execute(task);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_ = false;
      }
      cv_.notify_all();
    }
  }

  // TANDEM_DISTRIBUTED_DEBUG: every rank's description of this collective
  // (op, reduction, dtype, element count, root) gathered first and compared,
  // so that a mismatch is an error naming both sides on every rank, not a
  // hang or Gloo aborting the process (PyTorch's TORCH_DISTRIBUTED_DEBUG=
  // DETAIL fingerprint). The collective itself then does not run, on any rank.
  void check_same_collective(const Task& task) {
    constexpr size_t kWidth = 192;
    std::vector<uint8_t> mine(kWidth, 0), all(kWidth * static_cast<size_t>(size_), 0);
    std::memcpy(mine.data(), task.signature.data(), std::min(task.signature.size(), kWidth - 1));
    ::gloo::AllgatherOptions o(context_);
    o.setInput<uint8_t>(mine.data(), kWidth);
    o.setOutput<uint8_t>(all.data(), all.size());
    o.setTag(static_cast<uint32_t>(task.seq) | 0x80000000u);
    o.setTimeout(task.timeout);
    ::gloo::allgather(o);
    auto text = [&](int r) {
      return std::string(reinterpret_cast<const char*>(&all[static_cast<size_t>(r) * kWidth]));
    };
    std::string first = text(0), differs;
    for (int r = 1; r < size_; ++r)
      if (text(r) != first) differs += str_cat(", rank ", r, " called ", text(r));
    TANDEM_CHECK(differs.empty(), DistributedError, "TANDEM_DISTRIBUTED_DEBUG: collective #", task.seq,
                 " differs between ranks: rank 0 called ", first, differs,
                 ". Every rank must call the same collectives, with the same sizes, in the same order; none of them "
                 "ran this one");
  }

  std::string describe_failure(const Task& task, const std::string& gloo_message) const {
    return str_cat(task.work->what(), " failed on rank ", rank_, " of ", size_, " (gloo, timeout ",
                   task.timeout.count() / 1000.0, " s): ", gloo_message,
                   ". Another rank exited, died, stalled, or called a different collective: every rank must call the "
                   "same collectives in the same order");
  }

  std::shared_ptr<Store> store_;
  Ms timeout_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::rendezvous::Context> context_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  bool busy_ = false;  // a collective is running, on the worker or inline
  // TANDEM_DISTRIBUTED_DEBUG=1 (or PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL).
  const bool debug_ = [] {
    const char* t = std::getenv("TANDEM_DISTRIBUTED_DEBUG");
    const char* p = std::getenv("TORCH_DISTRIBUTED_DEBUG");
    return (t && std::string(t) != "0" && *t) || (p && std::string(p) == "DETAIL");
  }();
  uint64_t seq_ = 0;
  std::exception_ptr failed_;  // touched by the one thread running a collective
  std::thread worker_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<Store> store, int rank, int size, Ms timeout) {
  TANDEM_CHECK(store != nullptr, ValueError, "make_gloo_group: the store is null");
  return std::make_shared<ProcessGroupGloo>(std::move(store), rank, size, timeout);
}

}  // namespace tandem::distributed

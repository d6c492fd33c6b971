// DistributedDataParallel and its Reducer: the model check and broadcast at
// construction, the buckets, the hooks that start each bucket's allreduce
// during backward, and the end-of-pass callback that averages the gradients.
#include "nn/parallel/distributed.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <sstream>

#include "distributed/process_group_private.h"
#include "tensor/core/errors.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/shape_ops.h"

namespace tandem::nn::parallel {

namespace {

using distributed::ProcessGroup;
using distributed::Work;
using tandem::detail::str_cat;

// Rank 0's values into every rank's tensors, one broadcast per dtype and
// device (the tensors flattened into one buffer).
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors) {
  NoGradGuard no_grad;
  distributed::detail::BlockingScope blocking;
  std::map<std::pair<int, std::string>, std::vector<Tensor>> groups;
  for (const Tensor& t : tensors)
    if (t.defined() && t.numel() > 0) groups[{static_cast<int>(t.dtype()), t.device().str()}].push_back(t);
  for (auto& [key, ts] : groups) {
    std::vector<Tensor> flat;
    for (const Tensor& t : ts) flat.push_back(t.reshape({-1}));
    std::vector<Tensor> buffer{cat(flat)};
    group.broadcast(buffer)->wait();
    int64_t at = 0;
    for (Tensor& t : ts) {
      Tensor src = buffer[0].slice(0, at, at + t.numel()).view(t.sizes());
      // Written through the data, not as an op a graph would see: a
      // parameter is a leaf that requires grad.
      autograd::alias_without_history(t).copy_(src);
      at += t.numel();
    }
  }
}

// One line per parameter: what must be equal across ranks.
std::vector<std::string> describe_parameters(const OrderedDict<std::string, Tensor>& params) {
  std::vector<std::string> lines;
  for (const auto& item : params) {
    const Tensor& p = item.value();
    lines.push_back(str_cat("'", item.key(), "' ", shape_str(p.sizes()), " ", dtype_name(p.dtype()),
                            p.requires_grad() ? "" : " (no grad)"));
  }
  return lines;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Every rank's model against rank 0's; on a mismatch every rank throws the
// same error, naming the first rank and parameter that differ.
void check_same_model(ProcessGroup& group, const OrderedDict<std::string, Tensor>& params) {
  distributed::detail::BlockingScope blocking;
  std::vector<std::string> lines = describe_parameters(params);
  uint64_t h = 0;
  for (const std::string& l : lines) h = fnv1a(l + "\n", h == 0 ? 1469598103934665603ull : h);
  int n = group.getSize();
  Tensor mine = empty({2}, kInt64);
  mine.data_ptr<int64_t>()[0] = static_cast<int64_t>(lines.size());
  mine.data_ptr<int64_t>()[1] = static_cast<int64_t>(h & 0x7fffffffffffffffull);
  std::vector<std::vector<Tensor>> out(1);
  for (int r = 0; r < n; ++r) out[0].push_back(empty({2}, kInt64));
  std::vector<Tensor> in{mine};
  group.allgather(out, in)->wait();
  int differs = -1;
  auto word = [&](int r, int k) { return out[0][static_cast<size_t>(r)].data_ptr<int64_t>()[k]; };
  for (int r = 1; r < n && differs < 0; ++r)
    if (word(r, 0) != word(0, 0) || word(r, 1) != word(0, 1)) differs = r;
  if (differs < 0) return;
  // The descriptions themselves, padded to the longest, to say what differs.
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  Tensor len = empty({1}, kInt64);
  len.data_ptr<int64_t>()[0] = static_cast<int64_t>(text.size());
  std::vector<std::vector<Tensor>> lens(1);
  for (int r = 0; r < n; ++r) lens[0].push_back(empty({1}, kInt64));
  std::vector<Tensor> len_in{len};
  group.allgather(lens, len_in)->wait();
  int64_t longest = 0;
  for (const Tensor& l : lens[0]) longest = std::max(longest, l.item<int64_t>());
  Tensor bytes = zeros({longest}, kUInt8);
  std::copy(text.begin(), text.end(), bytes.data_ptr<uint8_t>());
  std::vector<std::vector<Tensor>> all(1);
  for (int r = 0; r < n; ++r) all[0].push_back(empty({longest}, kUInt8));
  std::vector<Tensor> bytes_in{bytes};
  group.allgather(all, bytes_in)->wait();
  auto lines_of = [&](int r) {
    const uint8_t* p = all[0][r].data_ptr<uint8_t>();
    std::string s(reinterpret_cast<const char*>(p), static_cast<size_t>(lens[0][r].item<int64_t>()));
    std::vector<std::string> out_lines;
    std::istringstream is(s);
    for (std::string l; std::getline(is, l);) out_lines.push_back(l);
    return out_lines;
  };
  std::vector<std::string> zero = lines_of(0), other = lines_of(differs);
  std::string detail;
  size_t k = 0;
  while (k < zero.size() && k < other.size() && zero[k] == other[k]) ++k;
  if (k < zero.size() && k < other.size())
    detail = str_cat("parameter ", k, " is ", zero[k], " on rank 0 and ", other[k], " on rank ", differs);
  else
    detail = str_cat("rank ", differs, " has ", other.size(), " parameters, while rank 0 has ", zero.size(),
                     k < zero.size() ? str_cat(" (the first missing: ", zero[k], ")")
                                     : str_cat(" (the first extra: ", other[k], ")"));
  TANDEM_CHECK(false, DistributedError, "DistributedDataParallel: DDP expects the same model on every rank, but ",
               detail, ". Build the same model on every rank (the same layers, in the same order)");
}

}  // namespace

// ---- the Reducer

struct Reducer::State {
  struct Param {
    std::string name;
    Tensor tensor;
    size_t bucket = 0;
    int64_t offset = 0;  // in the bucket's buffer, in elements
    bool ready = false;  // its gradient is in the bucket this pass
  };
  struct Bucket {
    std::vector<size_t> params;
    Tensor buffer;  // (total elements): the gradients, flattened, in the bucket's order
    size_t pending = 0;
    std::shared_ptr<Work> work;
  };

  std::shared_ptr<ProcessGroup> group;
  bool find_unused = false;
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  std::mutex mutex;    // a pass's hooks and callback run on one thread; this guards against a second
  bool armed = false;  // a forward armed the hooks and its pass has not finished
  bool callback_queued = false;
  size_t next_bucket = 0;  // buckets start in order: the same order on every rank
  Reducer::CommStats stats;

  void arm() {
    for (Param& p : params) p.ready = false;
    for (Bucket& b : buckets) {
      b.pending = b.params.size();
      b.work.reset();
    }
    next_bucket = 0;
    callback_queued = false;
    armed = true;
  }

  // The bucket's slot of parameter i, shaped as the parameter.
  Tensor slot(size_t i) {
    Param& p = params[i];
    return buckets[p.bucket].buffer.slice(0, p.offset, p.offset + p.tensor.numel()).view(p.tensor.sizes());
  }

  void mark_ready(size_t i, const Tensor& grad) {
    Param& p = params[i];
    if (p.ready) return;
    {
      NoGradGuard no_grad;
      Tensor s = slot(i);
      if (grad.defined())
        s.copy_(grad);
      else
        s.zero_();
    }
    p.ready = true;
    --buckets[p.bucket].pending;
    launch_ready();
  }

  void launch_ready() {
    while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) {
      Bucket& b = buckets[next_bucket++];
      // Divided first, then summed: the average, without overflowing a
      // 16-bit bucket (PyTorch's default communication hook).
      b.buffer.div_(static_cast<double>(group->getSize()));
      std::vector<Tensor> one{b.buffer};
      b.work = group->allreduce(one);
    }
  }

  // The end of the pass: the buckets of unused parameters, then every
  // allreduce waited for and each gradient replaced by the average.
  void finalize() {
    armed = false;
    std::vector<size_t> unused;
    for (size_t i = 0; i < params.size(); ++i)
      if (!params[i].ready) unused.push_back(i);
    if (!unused.empty() && !find_unused) {
      std::string names;
      for (size_t k = 0; k < unused.size() && k < 8; ++k) names += (k ? ", " : "") + params[unused[k]].name;
      if (unused.size() > 8) names += str_cat(" and ", unused.size() - 8, " more");
      for (Bucket& b : buckets)
        if (b.work) b.work->wait();
      TANDEM_CHECK(false, DistributedError, "DistributedDataParallel: this backward pass on rank ", group->getRank(),
                   " gave no gradient to ", unused.size(), unused.size() == 1 ? " parameter" : " parameters", " (",
                   names,
                   "), so their buckets cannot be reduced. Use every parameter in producing the loss, or "
                   "construct DistributedDataParallel with find_unused_parameters(true)");
    }
    Tensor used_map;
    std::shared_ptr<Work> used_work;
    if (find_unused) {
      // Which parameters some rank used: one used on none keeps its .grad().
      used_map = zeros({static_cast<int64_t>(params.size())}, kInt32);
      int32_t* u = used_map.data_ptr<int32_t>();
      for (size_t i = 0; i < params.size(); ++i) u[i] = params[i].ready ? 1 : 0;
      for (size_t i : unused) mark_ready(i, params[i].tensor.grad());
      distributed::AllreduceOptions opts;
      opts.reduceOp = distributed::ReduceOp::MAX;
      std::vector<Tensor> one{used_map};
      used_work = group->allreduce(one, opts);
    }
    auto waited_from = std::chrono::steady_clock::now();
    for (Bucket& b : buckets) b.work->wait();
    if (used_work) used_work->wait();
    stats.exposed_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - waited_from).count();
    for (Bucket& b : buckets) stats.allreduce_s += b.work->duration_s();
    ++stats.passes;
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      if (used_map.defined() && used_map.data_ptr<int32_t>()[i] == 0) continue;
      Tensor& g = params[i].tensor.mutable_grad();
      Tensor avg = slot(i);
      if (g.defined())
        g.copy_(avg);
      else
        g = avg.clone();
    }
  }
};

Reducer::Reducer(const OrderedDict<std::string, Tensor>& named_parameters, std::shared_ptr<ProcessGroup> group,
                 const DistributedDataParallelOptions& options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.group = std::move(group);
  s.find_unused = options.find_unused_parameters();
  for (const auto& item : named_parameters)
    if (item.value().requires_grad()) s.params.push_back(State::Param{item.key(), item.value()});
  // Buckets in reverse parameter order, one dtype and device each: the
  // first up to first_bucket_cap_mb, then bucket_cap_mb; a bucket closes
  // once the parameter added last brings it to its cap.
  TANDEM_CHECK(options.bucket_cap_mb() > 0 && options.first_bucket_cap_mb() > 0, ValueError,
               "DistributedDataParallel: bucket_cap_mb and first_bucket_cap_mb must be positive, got ",
               options.bucket_cap_mb(), " and ", options.first_bucket_cap_mb());
  std::map<std::pair<int, std::string>, size_t> open;  // (dtype, device) -> bucket being filled
  std::vector<int64_t> bytes;
  std::vector<double> caps;
  for (size_t k = s.params.size(); k-- > 0;) {
    State::Param& p = s.params[k];
    auto key = std::make_pair(static_cast<int>(p.tensor.dtype()), p.tensor.device().str());
    auto it = open.find(key);
    if (it == open.end()) {
      double cap = (s.buckets.empty() ? options.first_bucket_cap_mb() : options.bucket_cap_mb()) * 1024 * 1024;
      it = open.emplace(key, s.buckets.size()).first;
      s.buckets.emplace_back();
      bytes.push_back(0);
      caps.push_back(cap);
    }
    size_t b = it->second;
    p.bucket = b;
    p.offset = bytes[b] / static_cast<int64_t>(p.tensor.element_size());
    s.buckets[b].params.push_back(k);
    bytes[b] += static_cast<int64_t>(p.tensor.nbytes());
    if (static_cast<double>(bytes[b]) >= caps[b]) open.erase(it);
  }
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    const Tensor& first = s.params[s.buckets[b].params[0]].tensor;
    s.buckets[b].buffer = zeros({bytes[b] / static_cast<int64_t>(first.element_size())},
                                TensorOptions().dtype(first.dtype()).device(first.device()));
  }
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i) {
    hooks_.push_back(autograd::register_post_accumulate_grad_hook(s.params[i].tensor, [weak, i](Tensor& leaf) {
      std::shared_ptr<State> st = weak.lock();
      if (!st || !st->armed) return;  // a pass DDP's forward did not arm (no_sync, or outside it)
      if (!st->callback_queued) {
        st->callback_queued = true;
        autograd::queue_callback([weak] {
          if (std::shared_ptr<State> s2 = weak.lock(); s2 && s2->armed) s2->finalize();
        });
      }
      st->mark_ready(i, leaf.grad());
    }));
  }
}

Reducer::~Reducer() {
  for (autograd::RemovableHandle& h : hooks_) h.remove();
  // Nothing may still write into the buckets once they go.
  for (State::Bucket& b : state_->buckets) {
    if (!b.work) continue;
    try {
      b.work->wait();
    } catch (const std::exception&) {
    }
  }
}

void Reducer::prepare_for_forward(bool sync) {
  State& s = *state_;
  if (s.armed && s.callback_queued) {
    // A hook ran but the end-of-pass callback did not: the pass threw. Its
    // launched allreduces are let finish; the other ranks may be waiting in
    // theirs for this rank's next buckets until their timeout.
    s.armed = false;
    for (State::Bucket& b : s.buckets) {
      if (!b.work) continue;
      try {
        b.work->wait();
      } catch (const std::exception&) {
      }
    }
    TANDEM_CHECK(false, DistributedError,
                 "DistributedDataParallel: Expected to have finished reduction in the prior iteration before "
                 "starting a new one. The last backward pass on rank ",
                 s.group->getRank(),
                 " stopped (it threw) before its gradients were averaged, so they are this rank's alone and the "
                 "other ranks may be waiting for its buckets; fix what made it throw, or stop every rank");
  }
  // A forward whose pass never came (or a second forward before one
  // backward, as a GAN's discriminator runs twice) just arms again, as
  // PyTorch's: nothing was launched yet.
  // Buffers follow their parameters if the module moved or changed dtype
  // since (offsets are in elements, so they still hold).
  for (State::Bucket& b : s.buckets) {
    const Tensor& first = s.params[b.params[0]].tensor;
    if (b.buffer.device() != first.device() || b.buffer.dtype() != first.dtype())
      b.buffer = zeros(b.buffer.sizes(), TensorOptions().dtype(first.dtype()).device(first.device()));
  }
  s.armed = false;
  if (sync && GradMode::is_enabled()) s.arm();
}

Reducer::CommStats Reducer::comm_stats() const { return state_->stats; }
void Reducer::reset_comm_stats() { state_->stats = CommStats{}; }

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const State::Bucket& b : state_->buckets) out.push_back(b.params);
  return out;
}

// ---- DistributedDataParallel

void DistributedDataParallelImpl::init(std::shared_ptr<Module> module, DistributedDataParallelOptions options) {
  TANDEM_CHECK(module != nullptr, ValueError, "DistributedDataParallel: the module is null");
  module_ = register_module("module", std::move(module));
  options_ = std::move(options);
  group_ = options_.process_group() ? options_.process_group() : distributed::default_group();
  OrderedDict<std::string, Tensor> params = module_->named_parameters();
  bool any = false;
  for (const auto& item : params) any = any || item.value().requires_grad();
  TANDEM_CHECK(any, ValueError,
               "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
               "gradient.");
  check_same_model(*group_, params);
  std::vector<Tensor> state = module_->parameters();
  for (const Tensor& b : module_->buffers()) state.push_back(b);
  broadcast_coalesced(*group_, state);
  reducer_ = std::make_unique<Reducer>(params, group_, options_);
}

void DistributedDataParallelImpl::before_forward() {
  reducer_->prepare_for_forward(sync_);
  if (options_.broadcast_buffers() && is_training() && group_->getSize() > 1) {
    std::vector<Tensor> buffers = module_->buffers();
    if (!buffers.empty()) broadcast_coalesced(*group_, buffers);
  }
}

Tensor DistributedDataParallelImpl::forward(const Tensor& x) {
  TANDEM_CHECK(forward_ != nullptr, ValueError,
               "DistributedDataParallel::forward(x): the wrapped module has no forward(const Tensor&); call "
               "ddp->run([&] { return model->forward(...); }) instead");
  before_forward();
  return forward_(x);
}

}  // namespace tandem::nn::parallel

// Autocast (tensor/ops/autocast.h): the per-thread state, the policy table's
// lookup, the casts and the cast cache.
#include "tensor/ops/autocast.h"

#include <array>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "tensor/core/errors.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/op_table.h"

namespace tandem {

namespace {

using autocast::Policy;

struct DeviceState {
  bool enabled = false;
  Dtype dtype;
};

// Per thread, as PyTorch's: the state of each device type, the nesting of
// guards (the outermost one's end clears the cache), and Excluded.
struct State {
  std::array<DeviceState, 2> devices{DeviceState{false, kBFloat16}, DeviceState{false, kFloat16}};
  bool cache_enabled = true;
  int nesting = 0;
  bool excluded = false;
  bool any_enabled() const { return !excluded && (devices[0].enabled || devices[1].enabled); }
};
thread_local State t_state;

DeviceState& device_state(DeviceType t) { return t_state.devices[static_cast<size_t>(t)]; }

struct Entry {
  const char* name;
  Policy cuda, cpu;
};
constexpr Entry kTable[] = {
#define X(name, cuda, cpu) {name, Policy::cuda, Policy::cpu},
    TANDEM_AUTOCAST_OPS(X)
#undef X
};

// The cast cache, per thread: (source, target dtype, grad mode) -> the cast,
// with the source's version when it was made. The source is held, so its
// address cannot be reused by another tensor while the entry lives.
struct CacheKey {
  const TensorImpl* source;
  Dtype dtype;
  bool grad_mode;
  bool operator<(const CacheKey& o) const {
    return std::tie(source, dtype, grad_mode) < std::tie(o.source, o.dtype, o.grad_mode);
  }
};
struct CacheValue {
  std::shared_ptr<TensorImpl> source;
  const Storage* storage;  // set_data (Module::to) swaps the storage under one TensorImpl
  uint64_t version;
  Tensor cast;
};
thread_local std::map<CacheKey, CacheValue> t_cache;

bool is_castable(Dtype d) { return d == kFloat32 || d == kFloat16 || d == kBFloat16; }

// A weight: the one kind of tensor worth caching a cast of (PyTorch's
// heuristic, from Apex).
bool cacheable(const Tensor& t, Dtype to) {
  return t_state.cache_enabled && to != kFloat32 && t.dtype() == kFloat32 && t.requires_grad() && t.is_leaf() &&
         t.impl()->view_base == nullptr;
}

Tensor cast(const Tensor& t, Dtype to) {
  if (t.dtype() == to) return t;
  if (!cacheable(t, to)) return t.to(to);
  const CacheKey key{t.impl(), to, GradMode::is_enabled()};
  auto it = t_cache.find(key);
  if (it != t_cache.end() && it->second.storage == t.storage().get() && it->second.version == t._version())
    return it->second.cast;
  Tensor c = t.to(to);
  t_cache[key] = CacheValue{t.shared_impl(), t.storage().get(), t._version(), c};
  return c;
}

// The device type autocast looks at for an op: its first defined input's.
std::optional<DeviceType> device_type_of(const Tensor* begin, const Tensor* end) {
  for (const Tensor* t = begin; t != end; ++t)
    if (t->defined()) return t->device().type();
  return std::nullopt;
}

std::optional<std::vector<Tensor>> cast_inputs(const char* op, const Tensor* begin, const Tensor* end) {
  if (!t_state.any_enabled()) return std::nullopt;
  const std::optional<DeviceType> type = device_type_of(begin, end);
  if (!type || !device_state(*type).enabled) return std::nullopt;
  const Policy policy = autocast::policy(op, *type);
  if (policy == Policy::None) return std::nullopt;
  auto eligible = [&](const Tensor& t) { return t.defined() && t.device().type() == *type && is_castable(t.dtype()); };
  std::optional<Dtype> to;
  switch (policy) {
    case Policy::Lower: to = device_state(*type).dtype; break;
    case Policy::Float32: to = kFloat32; break;
    case Policy::Promote:
      for (const Tensor* t = begin; t != end; ++t)
        if (eligible(*t)) to = to ? promote_types(*to, t->dtype()) : t->dtype();
      break;
    case Policy::None: break;
  }
  std::vector<Tensor> out(begin, end);
  if (to) {
    for (Tensor& t : out)
      if (eligible(t)) t = cast(t, *to);
  }
  return out;
}

}  // namespace

AutocastGuard::AutocastGuard(DeviceType device_type, std::optional<Dtype> dtype, bool enabled, bool cache_enabled)
    : device_type_(device_type),
      prev_enabled_(device_state(device_type).enabled),
      prev_dtype_(device_state(device_type).dtype),
      prev_cache_enabled_(t_state.cache_enabled) {
  const Dtype lower = dtype.value_or(device_type == kCUDA ? kFloat16 : kBFloat16);
  TANDEM_CHECK(!enabled || lower == kFloat16 || lower == kBFloat16, ValueError, "AutocastGuard: autocast on ",
               device_type_name(device_type), " casts to float16 or bfloat16, but got dtype ", lower,
               " (for float32 everywhere, leave autocast off: AutocastGuard(", device_type_name(device_type),
               ", std::nullopt, /*enabled=*/false))");
  DeviceState& s = device_state(device_type);
  s.enabled = enabled;
  if (lower == kFloat16 || lower == kBFloat16) s.dtype = lower;
  t_state.cache_enabled = cache_enabled;
  ++t_state.nesting;
}

AutocastGuard::~AutocastGuard() {
  DeviceState& s = device_state(device_type_);
  s.enabled = prev_enabled_;
  s.dtype = prev_dtype_;
  t_state.cache_enabled = prev_cache_enabled_;
  if (--t_state.nesting == 0) autocast::clear_cache();
}

namespace autocast {

// Off inside a listed op's body and a backward pass (Excluded), as PyTorch's
// is_autocast_enabled is off there.
bool is_enabled(DeviceType device_type) { return !t_state.excluded && device_state(device_type).enabled; }
Dtype get_dtype(DeviceType device_type) { return device_state(device_type).dtype; }
bool is_cache_enabled() { return t_state.cache_enabled; }
size_t cache_size() { return t_cache.size(); }
void clear_cache() { t_cache.clear(); }

Policy policy(const char* op, DeviceType device_type) {
  // Every op asks while autocast is on (add and mul too): a hash lookup.
  static const std::unordered_map<std::string_view, const Entry*> by_name = [] {
    std::unordered_map<std::string_view, const Entry*> m;
    for (const Entry& e : kTable) m.emplace(e.name, &e);
    return m;
  }();
  auto it = by_name.find(op);
  if (it == by_name.end()) return Policy::None;
  return device_type == kCUDA ? it->second->cuda : it->second->cpu;
}

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::None: return "none";
    case Policy::Lower: return "lower";
    case Policy::Float32: return "float32";
    case Policy::Promote: return "promote";
  }
  return "unknown";
}

std::vector<const char*> listed_ops() {
  std::vector<const char*> names;
  for (const Entry& e : kTable) names.push_back(e.name);
  return names;
}

namespace detail {

std::optional<std::vector<Tensor>> inputs(const char* op, std::initializer_list<Tensor> tensors) {
  return cast_inputs(op, tensors.begin(), tensors.end());
}

std::optional<std::vector<Tensor>> inputs(const char* op, const std::vector<Tensor>& tensors) {
  return cast_inputs(op, tensors.data(), tensors.data() + tensors.size());
}

Excluded::Excluded() : prev_(t_state.excluded) { t_state.excluded = true; }
Excluded::~Excluded() { t_state.excluded = prev_; }

}  // namespace detail

}  // namespace autocast

}  // namespace tandem

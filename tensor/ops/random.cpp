// Front end of the random ops: the generators, and rand/randn/randint and the
// in-place fills (checks, counter reservation, allocation, dispatch).
#include "tensor/ops/random.h"

#include <cmath>
#include <limits>
#include <random>

#include "kernels/random.h"
#include "tensor/core/grad_record.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/elementwise.h"

namespace tandem {

// ---------------------------------------------------------------- generators

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) | rd();
  manual_seed(s);
  return s;
}

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset_;
}

void Generator::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  offset_ = offset;
}

PhiloxState Generator::reserve(uint64_t counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  PhiloxState state{seed_, offset_};
  offset_ += counters;
  return state;
}

namespace {

// More than any machine has GPUs; emulation allows 16.
constexpr int kMaxCudaGenerators = 64;

struct DefaultGenerators {
  Generator cpu;
  Generator cuda[kMaxCudaGenerators];
};

DefaultGenerators& defaults() {
  static DefaultGenerators g;
  return g;
}

}  // namespace

Generator& default_generator(Device device) {
  if (device.is_cpu()) return defaults().cpu;
  int index = device.has_index() ? device.index() : 0;
  TANDEM_CHECK(index < kMaxCudaGenerators, DeviceError, "default_generator: device ", device.str(), " is beyond the ",
               kMaxCudaGenerators, " cuda generators Tandem keeps");
  return defaults().cuda[index];
}

void manual_seed(uint64_t seed) {
  defaults().cpu.manual_seed(seed);
  for (Generator& g : defaults().cuda) g.manual_seed(seed);
}

uint64_t initial_seed() { return defaults().cpu.initial_seed(); }

// ---------------------------------------------------------------- checks
namespace {

// kernel: the name PyTorch's error quotes ("check_uniform_bounds", ...).
void check_floating(const char* op, const char* kernel, Dtype d) {
  TANDEM_CHECK(is_floating_point(d), DtypeError, "\"", kernel, "\" not implemented for '", torch_scalar_name(d),
               "': ", op,
               " draws floating point numbers and needs dtype float32, float64, float16 or bfloat16, "
               "got ",
               dtype_name(d), ". Use randint for integers");
}

void check_uniform_bounds(const char* op, double from, double to) {
  TANDEM_CHECK(std::isfinite(from) && std::isfinite(to), ValueError, op, ": expects finite bounds, got from=", from,
               ", to=", to);
  TANDEM_CHECK(from <= to, ValueError, op, " expects to return a [from, to) range, but found from=", from,
               " > to=", to);
}

void check_normal_params(const char* op, double mean, double std) {
  TANDEM_CHECK(std::isfinite(mean) && std::isfinite(std), ValueError, op,
               ": expects a finite mean and std, got mean=", mean, ", std=", std);
  TANDEM_CHECK(std >= 0.0, ValueError, op, " expects std >= 0.0, but found std ", std);
}

// The integers a dtype holds exactly: for floats, the range where every
// integer is representable (PyTorch only warns beyond it; rounding there
// could return `high` itself).
std::pair<int64_t, int64_t> exact_int_range(Dtype d) {
  switch (d) {
    case kBool: return {0, 1};
    case kUInt8: return {0, 255};
    case kInt32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case kInt64: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    case kFloat16: return {-(int64_t{1} << 11), int64_t{1} << 11};
    case kBFloat16: return {-(int64_t{1} << 8), int64_t{1} << 8};
    case kFloat32: return {-(int64_t{1} << 24), int64_t{1} << 24};
    case kFloat64: return {-(int64_t{1} << 53), int64_t{1} << 53};
  }
  return {0, 0};
}

void check_randint(const char* op, int64_t low, int64_t high, Dtype d) {
  TANDEM_CHECK(low < high, ValueError, "random_ expects 'from' to be less than 'to', but got from=", low,
               " >= to=", high);
  auto [lo, hi] = exact_int_range(d);
  const char* holds = is_floating_point(d) ? " holds every integer only in [" : " holds [";
  TANDEM_CHECK(low >= lo && low <= hi, ValueError, op, ": from is out of bounds for ", dtype_name(d),
               ": got from=", low, ", but ", dtype_name(d), holds, lo, ", ", hi, "]");
  TANDEM_CHECK(high - 1 >= lo && high - 1 <= hi, ValueError, op, ": to - 1 is out of bounds for ", dtype_name(d),
               ": got to=", high, ", but ", dtype_name(d), holds, lo, ", ", hi, "]");
}

uint64_t ceil_div(int64_t n, int64_t k) { return static_cast<uint64_t>((n + k - 1) / k); }

// Counters a fill of n elements uses (the table in random.h).
uint64_t uniform_counters(Dtype d, int64_t n) { return d == kFloat64 ? ceil_div(n, 2) : ceil_div(n, 4); }
uint64_t normal_counters(int64_t n) { return static_cast<uint64_t>(n); }
uint64_t randint_counters(int64_t n) { return ceil_div(n, 2); }

// ---------------------------------------------------------------- fills
// out is contiguous and freshly allocated or owned by the caller.

void fill_uniform(const Tensor& out, Generator& gen, double from, double to) {
  return dispatch(out.device(), cpu::uniform, cuda::uniform, out,
                  gen.reserve(uniform_counters(out.dtype(), out.numel())), from, to);
}

void fill_normal(const Tensor& out, Generator& gen, double mean, double std) {
  return dispatch(out.device(), cpu::normal, cuda::normal, out, gen.reserve(normal_counters(out.numel())), mean, std);
}

void fill_randint(const Tensor& out, Generator& gen, int64_t low, int64_t high) {
  return dispatch(out.device(), cpu::randint, cuda::randint, out, gen.reserve(randint_counters(out.numel())), low,
                  high);
}

TensorOptions like(const Tensor& t, const TensorOptions& options) {
  TensorOptions o = options;
  if (!o.has_dtype()) o = o.dtype(t.dtype());
  if (!o.has_device()) o = o.device(t.device());
  return o;
}

Generator& generator_for(Generator* gen, Device device) { return gen != nullptr ? *gen : default_generator(device); }

// Fills t through `fill` on a contiguous tensor: t itself, or a temporary
// copied into t when t is a strided view. For autograd the old values are
// gone, as with fill_ (a FillBackward0 node).
template <typename Fill>
Tensor& fill_inplace(const char* op, Tensor& t, const Fill& fill) {
  detail::check_writable(t, op);
  autograd::check_inplace(t, op);
  autograd::Recorder rec(autograd::GradOp::Fill, {t});
  if (t.is_contiguous()) {
    fill(t);
    t.storage()->bump_version();
  } else {
    Tensor tmp = detail::make_result(t.sizes(), t.dtype(), t.device(), t.origin());
    fill(tmp);
    t.copy_(tmp);
  }
  rec.finish_inplace(t);
  return t;
}

}  // namespace

// ---------------------------------------------------------------- factories
namespace {

// gen null: the default generator of the result's device.
Tensor rand_impl(IntArrayRef sizes, Generator* gen, const TensorOptions& options, const SourceLoc& loc) {
  check_floating("rand", "check_uniform_bounds", options.dtype());
  Tensor out = detail::create("tandem::rand", sizes, options, loc);
  fill_uniform(out, generator_for(gen, out.device()), 0.0, 1.0);
  return detail::finish_factory(out, options);
}

Tensor randn_impl(IntArrayRef sizes, Generator* gen, const TensorOptions& options, const SourceLoc& loc) {
  check_floating("randn", "normal_kernel_cpu", options.dtype());
  Tensor out = detail::create("tandem::randn", sizes, options, loc);
  fill_normal(out, generator_for(gen, out.device()), 0.0, 1.0);
  return detail::finish_factory(out, options);
}

Tensor randint_impl(int64_t low, int64_t high, IntArrayRef sizes, Generator* gen, const TensorOptions& options,
                    const SourceLoc& loc) {
  TensorOptions o = options.has_dtype() ? options : options.dtype(kInt64);
  check_randint("randint", low, high, o.dtype());
  Tensor out = detail::create("tandem::randint", sizes, o, loc);
  fill_randint(out, generator_for(gen, out.device()), low, high);
  return detail::finish_factory(out, o);
}

}  // namespace

Tensor rand(IntArrayRef sizes, const TensorOptions& options, SourceLoc loc) {
  return rand_impl(sizes, nullptr, options, loc);
}
Tensor rand(IntArrayRef sizes, Generator& gen, const TensorOptions& options, SourceLoc loc) {
  return rand_impl(sizes, &gen, options, loc);
}
Tensor randn(IntArrayRef sizes, const TensorOptions& options, SourceLoc loc) {
  return randn_impl(sizes, nullptr, options, loc);
}
Tensor randn(IntArrayRef sizes, Generator& gen, const TensorOptions& options, SourceLoc loc) {
  return randn_impl(sizes, &gen, options, loc);
}
Tensor randint(int64_t high, IntArrayRef sizes, const TensorOptions& options, SourceLoc loc) {
  return randint_impl(0, high, sizes, nullptr, options, loc);
}
Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, const TensorOptions& options, SourceLoc loc) {
  return randint_impl(low, high, sizes, nullptr, options, loc);
}
Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, Generator& gen, const TensorOptions& options,
               SourceLoc loc) {
  return randint_impl(low, high, sizes, &gen, options, loc);
}

Tensor rand_like(const Tensor& t, const TensorOptions& options, SourceLoc loc) {
  check_defined("rand_like", {{"input", t}});
  TensorOptions o = like(t, options);
  check_floating("rand_like", "check_uniform_bounds", o.dtype());
  Tensor out = detail::create("tandem::rand_like", t.sizes(), o, loc);
  fill_uniform(out, default_generator(out.device()), 0.0, 1.0);
  return detail::finish_factory(out, o);
}

Tensor randn_like(const Tensor& t, const TensorOptions& options, SourceLoc loc) {
  check_defined("randn_like", {{"input", t}});
  TensorOptions o = like(t, options);
  check_floating("randn_like", "normal_kernel_cpu", o.dtype());
  Tensor out = detail::create("tandem::randn_like", t.sizes(), o, loc);
  fill_normal(out, default_generator(out.device()), 0.0, 1.0);
  return detail::finish_factory(out, o);
}

// ---------------------------------------------------------------- in place

Tensor& uniform_(Tensor& t, double from, double to, Generator* gen) {
  check_defined("uniform_", {{"self", t}});
  check_floating("uniform_", "check_uniform_bounds", t.dtype());
  check_uniform_bounds("uniform_", from, to);
  Generator& g = generator_for(gen, t.device());
  return fill_inplace("uniform_", t, [&](const Tensor& out) { fill_uniform(out, g, from, to); });
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_defined("normal_", {{"self", t}});
  check_floating("normal_", "normal_kernel_cpu", t.dtype());
  check_normal_params("normal_", mean, std);
  Generator& g = generator_for(gen, t.device());
  return fill_inplace("normal_", t, [&](const Tensor& out) { fill_normal(out, g, mean, std); });
}

Tensor& random_(Tensor& t, int64_t low, int64_t high, Generator* gen) {
  check_defined("random_", {{"self", t}});
  check_randint("random_", low, high, t.dtype());
  Generator& g = generator_for(gen, t.device());
  return fill_inplace("random_", t, [&](const Tensor& out) { fill_randint(out, g, low, high); });
}

}  // namespace tandem

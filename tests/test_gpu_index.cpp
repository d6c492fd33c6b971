// Real-GPU checks of the CUDA indexing, random and range kernels
// (kernels/cuda/index.cu, random.cu, ranges.cu) and cat's one-launch copy,
// against the CPU backend: every dtype, contiguous, transposed and strided
// operands, 0-dim and empty tensors, into poisoned outputs compared byte for
// byte. Tests tagged [plan] check the host-side plans (index_offsets.h,
// cat_plan.h) by running the kernels' arithmetic on the cpu; they need no GPU,
// but this binary's main skips everything (exit 77) without one.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "helpers.h"
#include "kernels/cuda/cat_plan.h"
#include "kernels/cuda/index_offsets.h"
#include "kernels/cuda/shape_ops.h"
#include "kernels/index.h"
#include "kernels/random.h"
#include "kernels/ranges.h"

using namespace tandem;
using test::kernel_error;
using test::waited;

namespace {

const Device kGpu("cuda:0");

// ---------------------------------------------------------------- inputs

// Values of dtype on the cpu: never all zero, negative where the dtype allows.
Tensor values(IntArrayRef shape, Dtype dt, uint64_t seed) {
  Generator g(seed);
  if (dt == kBool) return randint(0, 2, shape, g, kBool);
  if (dt == kUInt8) return randint(0, 256, shape, g, kUInt8);
  if (is_floating_point(dt)) return randn(shape, g, kFloat64).mul(4.0).to(dt);
  return randint(-1000, 1000, shape, g, dt);
}

Tensor indices(IntArrayRef shape, int64_t size, uint64_t seed, Dtype dt = kInt64) {
  Generator g(seed);
  return randint(0, size, shape, g, dt);
}

Tensor to_gpu(const Tensor& t) { return t.contiguous().to(kGpu); }

// Where an operand's elements sit in its buffer; the values are the same.
enum class Layout { Contiguous, Transposed, Strided };
constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Strided};

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Strided: return "strided (step 2 in the last dim)";
  }
  return "?";
}

// A buffer that holds x's values in layout l, and l's view of such a
// buffer, which has x's shape and values.
Tensor base_for(const Tensor& x, Layout l) {
  const int64_t last = x.dim() - 1;
  if (l == Layout::Transposed && x.dim() >= 2) return x.transpose(0, last).contiguous();
  if (l == Layout::Strided && x.dim() >= 1) {
    Shape wide = x.sizes().vec();
    wide.back() *= 2;
    Tensor base = values(wide, x.dtype(), 99);  // the gaps hold other values
    base.slice(last, 0, std::nullopt, 2).copy_(x);
    return base;
  }
  return x.contiguous().clone();
}
Tensor view_of(const Tensor& base, Layout l, int64_t ndim) {
  if (l == Layout::Transposed && ndim >= 2) return base.transpose(0, ndim - 1);
  if (l == Layout::Strided && ndim >= 1) return base.slice(ndim - 1, 0, std::nullopt, 2);
  return base;
}
Tensor lay_out_cpu(const Tensor& x, Layout l) { return view_of(base_for(x, l), l, x.dim()); }

// x's values in layout l, as a view on the cpu and the same view on the gpu,
// each over its own base buffer (compared whole after in-place ops).
struct Laid {
  Tensor cpu, gpu, cpu_base, gpu_base;
};

Laid lay_out(const Tensor& x, Layout l) {
  Tensor cbase = base_for(x, l), gbase = to_gpu(cbase);
  return {view_of(cbase, l, x.dim()), view_of(gbase, l, x.dim()), cbase, gbase};
}

// A cuda tensor whose bytes are all 0xA5: a kernel must overwrite every element.
Tensor poisoned(IntArrayRef shape, Dtype dt) {
  Tensor h = empty(shape, dt);
  if (h.nbytes() > 0) std::memset(h.data_ptr(), 0xA5, h.nbytes());
  return h.to(kGpu);
}

// ---------------------------------------------------------------- comparisons

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor h = t.cpu().contiguous();
  const auto* p = static_cast<const uint8_t*>(h.data_ptr());
  return std::vector<uint8_t>(p, p + h.nbytes());
}

// Same shape, dtype and bytes (bit for bit, every element written).
void check_bits(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(gpu.sizes().vec() == cpu.sizes().vec());
  REQUIRE(gpu.dtype() == cpu.dtype());
  std::vector<uint8_t> a = bytes_of(gpu), e = bytes_of(cpu);
  if (a != e) {
    const size_t es = cpu.element_size();
    size_t i = 0;
    while (a[i] == e[i]) ++i;
    const int64_t k = static_cast<int64_t>(i / es);
    FAIL("element " << k << " (row-major) differs: gpu " << gpu.cpu().contiguous().flatten()[k].item<double>()
                    << ", cpu " << cpu.contiguous().flatten()[k].item<double>() << " (" << cpu.dtype() << ")");
  }
}

// Distance in units in the last place between two floats of dtype dt, from
// their bit patterns (sign-magnitude mapped onto a line, so -0 == +0).
int64_t ulp_distance(const uint8_t* a, const uint8_t* b, Dtype dt) {
  auto ord = [](uint64_t bits, int width) {
    const uint64_t mag = bits & ((uint64_t{1} << (width - 1)) - 1);
    return (bits >> (width - 1)) ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
  };
  uint64_t x = 0, y = 0;
  const size_t es = element_size(dt);
  std::memcpy(&x, a, es);
  std::memcpy(&y, b, es);
  const int width = static_cast<int>(es * 8);
  return std::abs(ord(x, width) - ord(y, width));
}

int64_t max_ulp_distance(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.sizes().vec() == cpu.sizes().vec());
  std::vector<uint8_t> a = bytes_of(gpu), e = bytes_of(cpu);
  const size_t es = cpu.element_size();
  int64_t worst = 0;
  for (size_t i = 0; i < a.size(); i += es) worst = std::max(worst, ulp_distance(&a[i], &e[i], cpu.dtype()));
  return worst;
}

// Float sums in another order: each of at most m additions into an element
// rounds once (unit roundoff u), so two orders differ by at most 2 m u times
// the sum of the terms' magnitudes (magnitude, per element).
void check_sum_order(const Tensor& gpu, const Tensor& cpu, const Tensor& magnitude, int m) {
  const Dtype dt = cpu.dtype();
  const double u = dt == kFloat64 ? 0x1p-53 : dt == kFloat32 ? 0x1p-24 : dt == kFloat16 ? 0x1p-11 : 0x1p-8;
  REQUIRE(gpu.sizes().vec() == cpu.sizes().vec());
  std::vector<double> g = gpu.to_vector<double>(), c = cpu.to_vector<double>(), s = magnitude.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (!(std::abs(g[i] - c[i]) <= 2 * m * u * s[i]))
      FAIL("element " << i << ": gpu " << g[i] << ", cpu " << c[i] << ", allowed " << 2 * m * u * s[i] << " (" << dt
                      << ")");
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// ================================================================ host-side plans

TEST_CASE("strided offsets merge dims and find every element", "[plan]") {
  for (Layout l : kLayouts) {
    INFO(layout_name(l));
    Tensor x = lay_out_cpu(values({3, 1, 4, 5}, kFloat32, 1), l);
    Tensor y = lay_out_cpu(values({3, 1, 4, 5}, kFloat32, 2), Layout::Transposed);
    auto p = cuda::make_strided_offsets<2>(x.sizes(), {x.strides().vec(), y.strides().vec()}, "test");
    CHECK(p.ndim <= 3);  // the size-1 dim is dropped
    int64_t i = 0;
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t c = 0; c < 4; ++c)
        for (int64_t d = 0; d < 5; ++d, ++i) {
          int64_t off32[2], off64[2];
          p.offsets<uint32_t>(static_cast<uint32_t>(i), off32);
          p.offsets<uint64_t>(static_cast<uint64_t>(i), off64);
          CHECK(off32[0] == a * x.stride(0) + c * x.stride(2) + d * x.stride(3));
          CHECK(off32[1] == a * y.stride(0) + c * y.stride(2) + d * y.stride(3));
          CHECK(off64[0] == off32[0]);
          CHECK(off64[1] == off32[1]);
        }
  }
  auto contiguous = cuda::make_strided_offsets<1>({6, 7, 8}, {Shape{56, 8, 1}}, "test");
  CHECK(contiguous.ndim == 1);
  CHECK(contiguous.sizes[0] == 336);
  auto scalar = cuda::make_strided_offsets<1>({}, {Shape{}}, "test");
  CHECK(scalar.ndim == 0);
  int64_t off[1];
  scalar.offsets<uint32_t>(0u, off);
  CHECK(off[0] == 0);
  // 17 dims of size 2 that cannot merge (every stride is 3x the next).
  Shape sizes(17, 2), strides(17, 1);
  for (int d = 15; d >= 0; --d) strides[d] = strides[d + 1] * 6;
  CHECK_THROWS_AS(cuda::make_strided_offsets<1>(sizes, {strides}, "gather"), ShapeError);
}

namespace {
// What cat_kernel does, on the cpu: every entry of every launch copied.
template <typename I>
Tensor emulate_cat(const std::vector<Tensor>& inputs, int64_t dim, const Tensor& expected) {
  Tensor out = empty(expected.sizes(), expected.dtype());
  std::memset(out.data_ptr(), 0xA5, out.nbytes());
  const size_t es = out.element_size();
  for (const cuda::CatLaunch& l : cuda::plan_cat(out, inputs, dim)) {
    REQUIRE(l.batch.count >= 1);
    REQUIRE(l.batch.count <= cuda::kCatBatch);
    for (int k = 0; k < l.batch.count; ++k) {
      const cuda::CatInput& e = l.batch.inputs[k];
      REQUIRE(e.ndim <= cuda::kCatDims);
      for (int64_t j = 0; j < e.numel; ++j) {
        int64_t o = cuda::cat_out_offset<I>(e, l.batch.out_row, static_cast<I>(j));
        int64_t s = cuda::cat_source_offset<I>(e, static_cast<I>(j));
        std::memcpy(static_cast<char*>(out.data_ptr()) + o * es, static_cast<const char*>(e.data) + s * es, es);
      }
    }
  }
  return out;
}
}  // namespace

TEST_CASE("cat's plan covers every input element once", "[plan]") {
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (int n : {1, 2, 5, 300}) {
      INFO("dim " << dim << ", " << n << " inputs");
      std::vector<Tensor> inputs;
      for (int i = 0; i < n; ++i) {
        Shape s{3, 2, 4};
        s[dim] = i % 4;  // some inputs are empty along dim
        inputs.push_back(lay_out_cpu(values(s, kInt32, 10 + i), kLayouts[i % 3]));
      }
      inputs.push_back(empty({0}, kInt32));  // the legacy 1-D empty input
      Tensor expected = cat(inputs, dim);
      test::check_equal(emulate_cat<uint32_t>(inputs, dim, expected), expected);
      test::check_equal(emulate_cat<uint64_t>(inputs, dim, expected), expected);
      if (n == 300) CHECK(cuda::plan_cat(expected, inputs, dim).size() > 1);
    }
  }
  // A 7-dim input whose permutation keeps every dim apart: split into runs.
  Tensor wide = values({2, 3, 2, 3, 2, 3, 2}, kFloat64, 5).permute({6, 5, 4, 3, 2, 1, 0});
  Tensor other = values({2, 3, 2, 3, 2, 3, 2}, kFloat64, 6).permute({6, 5, 4, 3, 2, 1, 0}).contiguous();
  for (int64_t dim : {0, 3, 6}) {
    Tensor expected = cat({other, wide, other}, dim);
    test::check_equal(emulate_cat<uint32_t>({other, wide, other}, dim, expected), expected);
  }
}

// ================================================================ gather, index_select

TEST_CASE("gather on the gpu matches the cpu", "[gpu][gather]") {
  for (Dtype dt : test::kAllDtypes) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      for (Layout ls : kLayouts) {
        for (Layout li : kLayouts) {
          INFO(dt << ", dim " << dim << ", self " << layout_name(ls) << ", index " << layout_name(li));
          Tensor x = values({4, 5, 6}, dt, 1);
          Shape ishape{3, 4, 5};
          ishape[dim] = 7;
          Tensor idx = indices(ishape, x.size(dim), 2 + dim);
          Laid s = lay_out(x, ls), i = lay_out(idx, li);
          Tensor expected = gather(s.cpu, dim, i.cpu);
          check_bits(gather(s.gpu, dim, i.gpu), expected);
          Tensor out = poisoned(ishape, dt);
          cuda::gather(out, s.gpu, dim, i.gpu);
          check_bits(out, expected);
        }
      }
    }
  }
  // 0-dim and empty
  Tensor s0 = values({}, kFloat32, 3), i0 = tensor(int64_t{0}), i1 = tensor({int64_t{0}});
  check_bits(gather(to_gpu(s0), 0, to_gpu(i0)), gather(s0, 0, i0));
  check_bits(gather(to_gpu(s0), 0, to_gpu(i1)), gather(s0, 0, i1));
  Tensor v = values({5}, kInt32, 4), i4 = tensor(int64_t{4});
  check_bits(gather(to_gpu(v), 0, to_gpu(i4)), gather(v, 0, i4));
  Tensor e = empty({3, 0}, kInt64);
  Tensor m = values({3, 4}, kFloat16, 5);
  check_bits(gather(to_gpu(m), 1, to_gpu(e)), gather(m, 1, e));
  // A grid-stride loop over more elements than the grid has threads.
  Tensor big = values({1000, 700}, kFloat32, 6);
  Tensor bidx = indices({1000, 900}, 700, 7);
  check_bits(gather(to_gpu(big), 1, to_gpu(bidx)), gather(big, 1, bidx));
}

TEST_CASE("index_select on the gpu matches the cpu", "[gpu][index_select]") {
  for (Dtype dt : test::kAllDtypes) {
    for (Dtype it : {kInt64, kInt32}) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        for (Layout ls : kLayouts) {
          INFO(dt << ", index " << it << ", dim " << dim << ", self " << layout_name(ls));
          Tensor x = values({4, 5, 6}, dt, 1);
          Laid s = lay_out(x, ls);
          // A strided index with duplicates.
          Laid i = lay_out(indices({9}, x.size(dim), 3, it), Layout::Strided);
          Tensor expected = index_select(s.cpu, dim, i.cpu);
          check_bits(index_select(s.gpu, dim, i.gpu), expected);
          Tensor out = poisoned(expected.sizes(), dt);
          cuda::index_select(out, s.gpu, dim, i.gpu);
          check_bits(out, expected);
        }
      }
    }
  }
  Tensor s0 = values({}, kFloat64, 3), i0 = tensor(int64_t{0}), i1 = tensor({0}, kInt32);
  check_bits(index_select(to_gpu(s0), 0, to_gpu(i0)), index_select(s0, 0, i0));
  check_bits(index_select(to_gpu(s0), 0, to_gpu(i1)), index_select(s0, 0, i1));
  Tensor m = values({3, 4}, kBFloat16, 4), none = empty({0}, kInt64);
  check_bits(index_select(to_gpu(m), 1, to_gpu(none)), index_select(m, 1, none));
  check_bits(index_select(to_gpu(m), 0, to_gpu(i0)), index_select(m, 0, i0));
}

// ================================================================ scatter_add

TEST_CASE("scatter_add on the gpu matches the cpu, duplicates included", "[gpu][scatter_add]") {
  for (Dtype dt : test::kAllDtypes) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      for (Layout layout : kLayouts) {
        INFO(dt << ", dim " << dim << ", self, index and src " << layout_name(layout));
        Tensor x = values({4, 5, 6}, dt, 1);
        Shape ishape{3, 4, 5}, sshape{4, 5, 6};
        ishape[dim] = 20;  // 20 indices into 4..6 positions: many duplicates
        sshape[dim] = 21;
        Laid self = lay_out(x, layout);
        Laid idx = lay_out(indices(ishape, x.size(dim), 7 + dim), layout);
        Laid src = lay_out(values(sshape, dt, 8), layout);
        // Integers (wrapping uint8) and bool are exact. Float sums depend on
        // the order the atomics land in: magnitude holds, per element of the
        // base, the sum of the magnitudes of everything added there.
        Tensor magnitude;
        if (is_floating_point(dt)) {
          magnitude = self.cpu_base.abs().to(kFloat64);
          view_of(magnitude, layout, x.dim()).scatter_add_(dim, idx.cpu, src.cpu.abs().to(kFloat64));
        }
        self.cpu.scatter_add_(dim, idx.cpu, src.cpu);
        self.gpu.scatter_add_(dim, idx.gpu, src.gpu);
        if (is_floating_point(dt))
          check_sum_order(self.gpu_base, self.cpu_base, magnitude, 21);
        else
          check_bits(self.gpu_base, self.cpu_base);
      }
    }
  }
  // Sums that every order gets exactly: halves of integers in float dtypes.
  for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dt);
    Tensor self = zeros({3}, dt), src = full({64}, 0.5, dt), idx = indices({64}, 3, 11);
    Tensor gself = to_gpu(self);
    gself.scatter_add_(0, to_gpu(idx), to_gpu(src));
    check_bits(gself, self.scatter_add_(0, idx, src));
  }
  // Out of place, 0-dim and empty.
  // (Integer values: float32 sums them exactly in any order.)
  Tensor x = values({4, 3}, kInt32, 1).to(kFloat32), src = values({6, 3}, kInt32, 2).to(kFloat32);
  Tensor idx = indices({6, 3}, 4, 3);
  check_bits(scatter_add(to_gpu(x), 0, to_gpu(idx), to_gpu(src)), scatter_add(x, 0, idx, src));
  Tensor s0 = values({}, kInt64, 4), i0 = tensor(int64_t{0}), v0 = values({}, kInt64, 5);
  check_bits(to_gpu(s0).scatter_add_(0, to_gpu(i0), to_gpu(v0)), s0.clone().scatter_add_(0, i0, v0));
  Tensor none = empty({0, 3}, kInt64);
  check_bits(to_gpu(x).scatter_add_(0, to_gpu(none), to_gpu(src)), x.clone().scatter_add_(0, none, src));
}

// ================================================================ one_hot

TEST_CASE("one_hot on the gpu matches the cpu", "[gpu][one_hot]") {
  for (Layout l : kLayouts) {
    INFO(layout_name(l));
    Laid in = lay_out(indices({4, 7}, 5, 1), l);
    check_bits(one_hot(in.gpu, 5), one_hot(in.cpu, 5));
    check_bits(one_hot(in.gpu, 9), one_hot(in.cpu, 9));
    Tensor out = poisoned({4, 7, 6}, kInt64);
    cuda::one_hot(out, in.gpu);
    check_bits(out, one_hot(in.cpu, 6));
  }
  Tensor s0 = tensor(int64_t{3});
  check_bits(one_hot(to_gpu(s0), 4), one_hot(s0, 4));
  check_bits(one_hot(to_gpu(empty({0}, kInt64)), 3), one_hot(empty({0}, kInt64), 3));
}

// ================================================================ errors

TEST_CASE("an out-of-range index raises the cpu's IndexError on the gpu", "[gpu][errors]") {
  Tensor x = values({4, 5}, kFloat32, 1);
  for (int64_t bad : {4, -1, 1000}) {
    INFO("index " << bad);
    Tensor idx = indices({3, 5}, 4, 2);
    idx.select(0, 1).select(0, 2).fill_(bad);
    std::string expected = error_of([&] { gather(x, 0, idx); });
    CHECK(expected == detail::str_cat("gather(): index ", bad, " is out of bounds for dimension 0 with size 4"));
    // On the gpu the error comes at the next wait (kernels/cuda/device_check.h).
    const Device gpu = to_gpu(x).device();
    CHECK_THROWS_AS(waited(gather(to_gpu(x), 0, to_gpu(idx))), IndexError);
    CHECK_THAT(error_of([&] { waited(gather(to_gpu(x), 0, to_gpu(idx))); }), kernel_error(expected, gpu));

    Tensor self = to_gpu(x);
    CHECK_THAT(error_of([&] { waited(self.scatter_add_(0, to_gpu(idx), to_gpu(x))); }),
               kernel_error(error_of([&] { x.clone().scatter_add_(0, idx, x); }), gpu));

    for (Dtype it : {kInt64, kInt32}) {
      Tensor vidx = tensor({int64_t{0}, bad, int64_t{1}}).to(it);
      CHECK_THAT(error_of([&] { waited(index_select(to_gpu(x), 0, to_gpu(vidx))); }),
                 kernel_error(error_of([&] { index_select(x, 0, vidx); }), gpu));
    }
  }
  // Every index is out of range along a dim of size 0, 0 included.
  Tensor empty_dim = values({0, 3}, kFloat32, 1), zero = zeros({2, 3}, kInt64);
  CHECK_THAT(error_of([&] { waited(gather(to_gpu(empty_dim), 0, to_gpu(zero))); }),
             kernel_error("gather(): index 0 is out of bounds for dimension 0 with size 0", to_gpu(zero).device()));
  // The stream is still usable after the error.
  Tensor idx = indices({3, 5}, 4, 2);
  check_bits(gather(to_gpu(x), 0, to_gpu(idx)), gather(x, 0, idx));
}

// ================================================================ random

TEST_CASE("uniform and randint on the gpu are the cpu's bits", "[gpu][random]") {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{5}, int64_t{4097}, int64_t{100003}}) {
    for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      INFO("uniform " << dt << ", n " << n);
      Generator gc(1234), gg(1234);
      gc.set_offset(77);
      gg.set_offset(77);
      Tensor c = rand({n}, gc, dt), g = rand({n}, gg, TensorOptions(dt).device(kGpu));
      check_bits(g, c);
      CHECK(gg.offset() == gc.offset());
      Tensor out = poisoned({n}, dt), ref = empty({n}, dt);
      cpu::uniform(ref, PhiloxState{99, 5}, -2.5, 3.0);
      cuda::uniform(out, PhiloxState{99, 5}, -2.5, 3.0);
      check_bits(out, ref);
    }
    for (Dtype dt : test::kAllDtypes) {
      const int64_t lo = dt == kBool ? 0 : dt == kUInt8 ? 3 : -50, hi = dt == kBool ? 2 : dt == kUInt8 ? 250 : 70;
      INFO("randint " << dt << " [" << lo << ", " << hi << "), n " << n);
      Generator gc(42), gg(42);
      check_bits(randint(lo, hi, {n}, gg, TensorOptions(dt).device(kGpu)), randint(lo, hi, {n}, gc, dt));
      Tensor out = poisoned({n}, dt), ref = empty({n}, dt);
      cpu::randint(ref, PhiloxState{7, 123456789}, lo, hi);
      cuda::randint(out, PhiloxState{7, 123456789}, lo, hi);
      check_bits(out, ref);
    }
  }
  // A range wider than 2^63 and a seed that needs 64 bits.
  Tensor ref = empty({1001}, kInt64), out = poisoned({1001}, kInt64);
  const int64_t lo = INT64_MIN + 5, hi = INT64_MAX - 3;
  cpu::randint(ref, PhiloxState{0xDEADBEEFCAFEF00Dull, 3}, lo, hi);
  cuda::randint(out, PhiloxState{0xDEADBEEFCAFEF00Dull, 3}, lo, hi);
  check_bits(out, ref);
  // An in-place fill of a strided view, through a temporary.
  Tensor base = zeros({6, 8}), gbase = to_gpu(base);
  Tensor view = base.slice(1, 0, std::nullopt, 2), gview = gbase.slice(1, 0, std::nullopt, 2);
  Generator gc(5), gg(5);
  uniform_(view, -1, 1, &gc);
  uniform_(gview, -1, 1, &gg);
  check_bits(gbase, base);
}

TEST_CASE("normal on the gpu is within an ulp of the cpu", "[gpu][random]") {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{100003}}) {
    for (Dtype dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      INFO(dt << ", n " << n);
      Generator gc(2024), gg(2024);
      Tensor c = randn({n}, gc, dt), g = randn({n}, gg, TensorOptions(dt).device(kGpu));
      CHECK(gg.offset() == gc.offset());
      // CUDA's double log and cos are within 1-2 ulps of glibc's: after
      // rounding to float32 or narrower that moves a result by at most one
      // step; float64 keeps the few-ulp difference (tensor/ops/random.h).
      CHECK(max_ulp_distance(g, c) <= (dt == kFloat64 ? 8 : 1));
      Tensor out = poisoned({n}, dt), ref = empty({n}, dt);
      cpu::normal(ref, PhiloxState{11, 1u << 20}, 0.5, 3.0);
      cuda::normal(out, PhiloxState{11, 1u << 20}, 0.5, 3.0);
      CHECK(max_ulp_distance(out, ref) <= (dt == kFloat64 ? 8 : 1));
    }
  }
}

// ================================================================ ranges

TEST_CASE("arange, linspace and eye on the gpu are the cpu's bits", "[gpu][ranges]") {
  const Dtype numeric[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8};
  for (Dtype dt : numeric) {
    INFO(dt);
    const bool fl = is_floating_point(dt);
    check_bits(arange(0, 200, 1, TensorOptions(dt).device(kGpu)), arange(0, 200, 1, dt));
    check_bits(arange(7, 7, 1, TensorOptions(dt).device(kGpu)), arange(7, 7, 1, dt));
    if (dt != kUInt8) check_bits(arange(100, -57, -3, TensorOptions(dt).device(kGpu)), arange(100, -57, -3, dt));
    if (fl) {
      check_bits(arange(-1.0, 2.5, 0.1, TensorOptions(dt).device(kGpu)), arange(-1.0, 2.5, 0.1, dt));
      check_bits(arange(0.0, 1e4, 0.37, TensorOptions(dt).device(kGpu)), arange(0.0, 1e4, 0.37, dt));
    }
    for (int64_t steps : {0, 1, 2, 5, 100, 1001}) {
      INFO("linspace steps " << steps);
      check_bits(linspace(0, 250, steps, TensorOptions(dt).device(kGpu)), linspace(0, 250, steps, dt));
      if (dt != kUInt8)
        check_bits(linspace(-10, 10, steps, TensorOptions(dt).device(kGpu)), linspace(-10, 10, steps, dt));
      if (fl) {
        check_bits(linspace(-3.5, 7.25, steps, TensorOptions(dt).device(kGpu)), linspace(-3.5, 7.25, steps, dt));
        check_bits(linspace(1.0, 0.0, steps, TensorOptions(dt).device(kGpu)), linspace(1.0, 0.0, steps, dt));
      }
    }
  }
  for (Dtype dt : test::kAllDtypes) {
    const std::pair<int64_t, int64_t> shapes[] = {{0, 3}, {3, 0}, {1, 1}, {3, 5}, {5, 3}, {64, 64}};
    for (auto [n, m] : shapes) {
      INFO("eye " << dt << " " << n << "x" << m);
      check_bits(eye(n, m, TensorOptions(dt).device(kGpu)), eye(n, m, dt));
      Tensor out = poisoned({n, m}, dt), ref = empty({n, m}, dt);
      cpu::eye(ref);
      cuda::eye(out);
      check_bits(out, ref);
    }
  }
  // Poisoned outputs for the direct kernel calls.
  Tensor out = poisoned({1000}, kFloat32), ref = empty({1000}, kFloat32);
  cpu::arange(ref, Scalar(-3.0), Scalar(0.01));
  cuda::arange(out, Scalar(-3.0), Scalar(0.01));
  check_bits(out, ref);
  out = poisoned({999}, kBFloat16);
  ref = empty({999}, kBFloat16);
  cpu::linspace(ref, Scalar(-1.0), Scalar(1.0));
  cuda::linspace(out, Scalar(-1.0), Scalar(1.0));
  check_bits(out, ref);
}

// ================================================================ cat

TEST_CASE("cat on the gpu matches the cpu", "[gpu][cat]") {
  for (Dtype dt : test::kAllDtypes) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      for (int n : {1, 2, 5, 300}) {
        INFO(dt << ", dim " << dim << ", " << n << " inputs");
        std::vector<Tensor> cpu_in, gpu_in;
        for (int i = 0; i < n; ++i) {
          Shape s{3, 2, 4};
          s[dim] = (i * 7) % 5;  // sizes 0..4 along dim, some empty
          Laid t = lay_out(values(s, dt, 100 + i), kLayouts[i % 3]);
          cpu_in.push_back(t.cpu);
          gpu_in.push_back(t.gpu);
        }
        cpu_in.push_back(empty({0}, dt));  // PyTorch's legacy empty input
        gpu_in.push_back(empty({0}, TensorOptions(dt).device(kGpu)));
        Tensor expected = cat(cpu_in, dim);
        check_bits(cat(gpu_in, dim), expected);
        Tensor out = poisoned(expected.sizes(), dt);
        cuda::cat(out, gpu_in, dim);
        check_bits(out, expected);
      }
    }
  }
  // A 7-dim input that needs more dims than a parameter block holds.
  // (Reversing the dims of a contiguous tensor leaves no two dims mergeable.)
  Tensor base = values({2, 3, 2, 3, 2, 3, 2}, kFloat16, 5), other = values({2, 3, 2, 3, 2, 3, 2}, kFloat16, 6);
  Tensor wide = base.permute({6, 5, 4, 3, 2, 1, 0}), gwide = to_gpu(base).permute({6, 5, 4, 3, 2, 1, 0});
  for (int64_t dim : {0, 3, 6}) {
    INFO("7-dim, dim " << dim);
    check_bits(cat({to_gpu(other), gwide, to_gpu(other)}, dim), cat({other, wide, other}, dim));
  }
  // stack, an empty result, and mixed dtypes (the converting per-input path).
  Tensor a = values({3, 4}, kFloat32, 1), b = values({3, 4}, kFloat32, 2);
  check_bits(stack({to_gpu(a), to_gpu(b)}, 1), stack({a, b}, 1));
  check_bits(cat({to_gpu(empty({0, 4})), to_gpu(empty({0, 4}))}, 0), cat({empty({0, 4}), empty({0, 4})}, 0));
  Tensor c = values({2, 4}, kInt32, 3);
  check_bits(cat({to_gpu(a), to_gpu(c)}, 0), cat({a, c}, 0));
}

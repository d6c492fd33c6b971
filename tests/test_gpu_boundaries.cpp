// Real-GPU checks of the CUDA kernels at their launch boundaries: for each
// kernel family of kernels/cuda/*.cu, the sizes that sit on and just across
// one of its launcher's block, tile, chunk, vector or batch boundaries (T - 1,
// T, T + 1 for a boundary T, named where each list is built), with every
// dtype the op takes and with transposed, stepped, expanded and offset
// operands, each against the same op on the CPU, into poisoned outputs.
// Where a launcher's plan is host code (loops.h, reduce_plan.h, cat_plan.h,
// norm_plan.h) the test first checks that its sizes land on each side of the
// boundary, so that a changed constant shows instead of leaving the sizes
// beside the point. Skipped (exit 77) without a real or simulated GPU.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"
#include "kernels/conv.h"
#include "kernels/cuda/cat_plan.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/loops.h"
#include "kernels/cuda/norm_plan.h"
#include "kernels/cuda/reduce_plan.h"
#include "kernels/cuda/shape_ops.h"
#include "kernels/elementwise.h"
#include "kernels/elementwise_plan.h"
#include "kernels/embedding.h"
#include "kernels/index.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pool.h"
#include "kernels/random.h"
#include "kernels/ranges.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "tensor/core/shape.h"

using namespace tandem;
using test::Tolerance;

namespace {

const Device kGpu("cuda:0");
constexpr Dtype kFloats[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

// ---------------------------------------------------------------- inputs

// Values of dtype on the cpu: never all zero, negative where the dtype allows.
Tensor values(IntArrayRef shape, Dtype dt, uint64_t seed) {
  Generator g(seed);
  if (dt == kBool) return randint(0, 2, shape, g, kBool);
  if (dt == kUInt8) return randint(0, 256, shape, g, kUInt8);
  if (is_floating_point(dt)) return randn(shape, g, kFloat64).mul(4.0).to(dt);
  return randint(-1000, 1000, shape, g, dt);
}

// Values whose sums and products of pairs are exact in every order:
// multiples of 1/q in [lo, hi] for the floats (a float32 sum of them is
// exact while q times its terms' total magnitude stays under 2^24, and the
// 16-bit floats accumulate in float), integers in [lo, hi] otherwise ([0,
// hi] for uint8), random bits for bool.
Tensor coarse(IntArrayRef shape, Dtype dt, uint64_t seed, double lo = -4, double hi = 4, double q = 4) {
  Generator g(seed);
  if (dt == kBool) return randint(0, 2, shape, g, kBool);
  if (!is_floating_point(dt)) {
    const auto l = static_cast<int64_t>(dt == kUInt8 ? std::max(lo, 0.0) : lo);
    return randint(l, static_cast<int64_t>(hi) + 1, shape, g, dt);
  }
  const auto l = static_cast<int64_t>(lo * q), h = static_cast<int64_t>(hi * q);
  return randint(l, h + 1, shape, g, kFloat64).div(q).to(dt);
}

// A cpu tensor whose elements no kernel writes: NaN in the floats (which
// matches no expected value), bytes 0xA5 in the integers, true in bool (a
// byte that is neither 0 nor 1 is undefined behaviour to read as a bool:
// UBSan in the sanitizer build says so).
Tensor poison(IntArrayRef shape, Dtype dt) {
  if (is_floating_point(dt)) return full(shape, std::numeric_limits<double>::quiet_NaN(), dt);
  if (dt == kBool) return full(shape, true, dt);
  Tensor t = empty(shape, dt);
  if (t.nbytes() > 0) std::memset(t.data_ptr(), 0xA5, t.nbytes());
  return t;
}

// Where an operand's elements sit in its buffer. The values are the same in
// every layout, but for Expanded, whose view repeats x's first index along
// dim 0.
enum class Layout { Contiguous, Transposed, Stepped, Expanded, Offset };
constexpr Layout kStridedLayouts[] = {Layout::Transposed, Layout::Stepped, Layout::Expanded, Layout::Offset};

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed (last two dims)";
    case Layout::Stepped: return "sliced with step 2 (last dim)";
    case Layout::Expanded: return "expanded (dim 0)";
    case Layout::Offset: return "at storage offset 1 (misaligned)";
  }
  return "?";
}

// One operand on both devices: the same view of buffers with the same bytes.
struct Laid {
  Tensor cpu, gpu;            // the views the kernels see
  Tensor cpu_base, gpu_base;  // the whole buffers under them
};

Laid lay_out(const Tensor& x, Layout l) {
  const int64_t nd = x.dim(), n = x.numel();
  const Shape shape = x.sizes().vec();
  Tensor base = x.contiguous().clone();
  std::function<Tensor(const Tensor&)> view = [](const Tensor& t) { return t; };
  if (l == Layout::Transposed && nd >= 2) {
    base = x.transpose(nd - 2, nd - 1).contiguous();
    view = [nd](const Tensor& t) { return t.transpose(nd - 2, nd - 1); };
  } else if (l == Layout::Stepped && nd >= 1) {
    Shape wide = shape;
    wide.back() *= 2;
    base = values(wide, x.dtype(), 99);  // the gaps hold other values
    base.slice(nd - 1, 0, std::nullopt, 2).copy_(x);
    view = [nd](const Tensor& t) { return t.slice(nd - 1, 0, std::nullopt, 2); };
  } else if (l == Layout::Expanded && nd >= 1 && shape[0] > 0) {
    base = x.narrow(0, 0, 1).contiguous();
    view = [shape](const Tensor& t) { return t.expand(shape); };
  } else if (l == Layout::Offset) {
    base = values({n + 1}, x.dtype(), 98);
    base.narrow(0, 1, n).copy_(x.reshape({n}));
    view = [n, shape](const Tensor& t) { return t.narrow(0, 1, n).view(shape); };
  }
  const Tensor gpu_base = base.to(kGpu);  // a contiguous copy: bytes only
  return {view(base), view(gpu_base), base, gpu_base};
}

Laid on_both(const Tensor& x) { return lay_out(x, Layout::Contiguous); }

std::string describe(const Tensor& t) {
  std::ostringstream s;
  s << t.dtype() << " " << shape_str(t.sizes()) << " strides " << shape_str(t.strides()) << " offset "
    << t.storage_offset();
  return s.str();
}

// The CPU side on one thread while a test case runs. Its kernels give the
// same results on any number of threads (exact on the coarse values, within
// tolerance otherwise), and this file runs thousands of small CPU ops,
// between which OpenMP's idle threads spin: on a busy machine that more than
// tripled the binary's time. (The simulated GPU runs on one host thread.)
struct OneCpuThread {
  OneCpuThread() { set_num_threads(1); }
  ~OneCpuThread() { set_num_threads(0); }
  OneCpuThread(const OneCpuThread&) = delete;
  OneCpuThread& operator=(const OneCpuThread&) = delete;
};

// ---------------------------------------------------------------- comparisons

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor h = t.cpu().contiguous();
  const auto* p = static_cast<const uint8_t*>(h.data_ptr());
  return std::vector<uint8_t>(p, p + h.nbytes());
}

// Same shape, dtype and bytes: every element written, bit for bit.
void check_bits(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.sizes().vec() == cpu.sizes().vec());
  REQUIRE(gpu.dtype() == cpu.dtype());
  const std::vector<uint8_t> a = bytes_of(gpu), e = bytes_of(cpu);
  if (a == e) return;
  size_t i = 0;
  while (a[i] == e[i]) ++i;
  const auto k = static_cast<int64_t>(i / cpu.element_size());
  FAIL("element " << k << " (row-major) of " << shape_str(cpu.sizes()) << " differs: gpu "
                  << gpu.cpu().contiguous().flatten()[k].item<double>() << ", cpu "
                  << cpu.contiguous().flatten()[k].item<double>() << " (" << cpu.dtype() << ")");
}

// Floats within tol (the dtype's by default), the rest bit for bit.
void check_result(const Tensor& gpu, const Tensor& cpu, std::optional<Tolerance> tol = std::nullopt) {
  if (is_floating_point(cpu.dtype()))
    test::check_close(gpu.cpu(), cpu, tol);
  else
    check_bits(gpu, cpu);
}
constexpr Tolerance kExact{0, 0};

// run(on_gpu, out) on both devices into poisoned outputs of `shape` laid out
// in out_layout, then the whole output buffers compared: every element of
// the view written, nothing outside it touched.
void compare_op(IntArrayRef shape, Dtype out_dt, const std::function<void(bool, const Tensor&)>& run,
                std::optional<Tolerance> tol = std::nullopt, Layout out_layout = Layout::Contiguous) {
  const Laid out = lay_out(poison(shape, out_dt), out_layout);
  run(false, out.cpu);
  run(true, out.gpu);
  check_result(out.gpu_base, out.cpu_base, tol);
}

// Threads a grid-stride launch keeps at most (kernels/cuda/launch.cuh:
// kGridStrideBlocksPerSm 8 blocks of kGridStrideThreads 256 per
// multiprocessor): past it, threads take a second element.
int64_t grid_stride_cap() { return int64_t{cuda::get_device_properties(0).multi_processor_count} * 8 * 256; }
// One block of a grid-stride launch (kGridStrideThreads), and the cap, each
// from just under to just over.
std::vector<int64_t> grid_stride_sizes() {
  const int64_t cap = grid_stride_cap();
  return {255, 256, 257, cap - 1, cap, cap + 1};
}

// ================================================================ elementwise (loops.cuh, copy.cu)

// kernels/cuda/loops.cuh: the vector kernel runs kVectorThreads (128) x
// kVectorUnroll (4) vectors of V elements a block and the numel % V tail in
// the first block; the strided kernel kStridedThreads (128) x
// kStridedUnroll (4) elements a block.
constexpr int64_t kVectorThreads = 128, kVectorUnroll = 4;
constexpr int64_t kStridedThreads = 128, kStridedBlock = 128 * 4;

// The sizes around each boundary of the vector kernel with V elements a
// vector: shorter than a vector (the tail alone), one vector, one and a
// tail; a vector for each thread of the first unrolled pass; one block;
// three blocks, the last with one vector and a tail.
std::vector<int64_t> vector_sizes(int64_t V) {
  const int64_t pass = kVectorThreads * V, block = kVectorThreads * kVectorUnroll * V;
  return {V - 1, V, V + 1, pass - 1, pass, pass + 1, block - 1, block, block + 1, 2 * block + V + 1};
}

// Whether out = f(inputs) takes the vectorized kernel with V elements a vector.
template <int N>
bool takes_vector_kernel(const std::array<const Tensor*, N>& ops, int V) {
  const ElementwisePlan<N> p = make_plan<N>(ops);
  int sizes[N];
  for (int k = 0; k < N; ++k) sizes[k] = static_cast<int>(ops[k]->element_size());
  uint32_t broadcast = 0;
  return cuda::can_vectorize<N>(p, sizes, V, &broadcast);
}

}  // namespace

TEST_CASE("elementwise ops at the vector kernel's vector, pass, block and tail boundaries",
          "[gpu][boundaries][elementwise]") {
  const OneCpuThread cpu_threads;
  static_assert(cuda::kVectorBytes == 16);
  for (Dtype dt : test::kAllDtypes) {
    const int V = cuda::kVectorBytes / static_cast<int>(element_size(dt));  // a, b, out of dt; a bool is narrower
    const Scalar alpha = dt == kBool ? Scalar(true) : Scalar(2);
    for (int64_t n : vector_sizes(V)) {
      const Laid a = on_both(values({n}, dt, 1)), b = on_both(values({n}, dt, 2)), c = on_both(values({n}, kBool, 3));
      const Laid s = on_both(values({}, dt, 4));  // a 0-dim operand: a broadcast in the vector kernel
      INFO(dt << ", n " << n << " (" << V << " a vector)");
      // (A single element is a 0-dim plan: the strided kernel.)
      const Tensor probe = empty({n}, TensorOptions(dt).device(kGpu));
      CHECK(takes_vector_kernel<3>({&probe, &a.gpu, &b.gpu}, V) == (n > 1));
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::binary(BinaryOp::Add, out, a.gpu, b.gpu, alpha)
          : cpu::binary(BinaryOp::Add, out, a.cpu, b.cpu, alpha);
      });
      compare_op({n}, kBool, [&](bool g, const Tensor& out) {
        g ? cuda::binary(BinaryOp::Lt, out, a.gpu, b.gpu) : cpu::binary(BinaryOp::Lt, out, a.cpu, b.cpu);
      });
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::where(out, c.gpu, a.gpu, b.gpu) : cpu::where(out, c.cpu, a.cpu, b.cpu);
      });
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::binary(BinaryOp::Mul, out, a.gpu, s.gpu) : cpu::binary(BinaryOp::Mul, out, a.cpu, s.cpu);
      });
      compare_op({n}, dt, [&](bool g, const Tensor& out) { g ? cuda::fill(out, 3) : cpu::fill(out, 3); });
    }
  }
  // Conversions: V from the wider of the two dtypes.
  for (Dtype to : test::kAllDtypes) {
    for (Dtype from : test::kAllDtypes) {
      if (to == from) continue;  // a memcpy
      const int V = cuda::kVectorBytes / static_cast<int>(std::max(element_size(to), element_size(from)));
      for (int64_t n : vector_sizes(V)) {
        INFO(from << " -> " << to << ", n " << n);
        const Laid x = on_both(coarse({n}, from, 5, -3, 3));
        compare_op(
            {n}, to, [&](bool g, const Tensor& out) { g ? cuda::copy(out, x.gpu) : cpu::copy(out, x.cpu); }, kExact);
      }
    }
  }
}

TEST_CASE("elementwise ops at the strided kernel's pass and block boundaries, strided operands",
          "[gpu][boundaries][elementwise]") {
  const OneCpuThread cpu_threads;
  // 1-D (stepped, offset): around one unrolled pass of kStridedThreads and
  // one block of kStridedThreads x kStridedUnroll, and two blocks and one;
  // 2-D (every layout): 7 x 73, 16 x 32, 27 x 19 around one block, 31 x 33,
  // 32 x 32, 25 x 41 around two.
  const int64_t pass = kStridedThreads, block = kStridedBlock;
  const std::vector<Shape> shapes = {{pass - 1},  {pass},          {pass + 1}, {block - 1}, {block},
                                     {block + 1}, {2 * block + 1}, {7, 73},    {16, 32},    {27, 19},
                                     {31, 33},    {32, 32},        {25, 41}};
  for (Dtype dt : test::kAllDtypes) {
    const Scalar alpha = dt == kBool ? Scalar(true) : Scalar(2);
    for (const Shape& shape : shapes) {
      for (Layout l : kStridedLayouts) {
        if ((l == Layout::Transposed || l == Layout::Expanded) && shape.size() < 2) continue;
        const Laid a = lay_out(values(shape, dt, 6), l), b = on_both(values(shape, dt, 7));
        INFO("a " << describe(a.gpu) << ", " << layout_name(l));
        const Tensor probe = empty(shape, TensorOptions(dt).device(kGpu));
        CHECK_FALSE(takes_vector_kernel<3>({&probe, &a.gpu, &b.gpu}, 16 / static_cast<int>(element_size(dt))));
        compare_op(shape, dt, [&](bool g, const Tensor& out) {
          g ? cuda::binary(BinaryOp::Add, out, a.gpu, b.gpu, alpha)
            : cpu::binary(BinaryOp::Add, out, a.cpu, b.cpu, alpha);
        });
        // Into a strided output (an expanded one would overlap itself).
        if (l != Layout::Expanded)
          compare_op(
              shape, dt,
              [&](bool g, const Tensor& out) {
                g ? cuda::binary(BinaryOp::Sub, out, b.gpu, a.gpu, alpha)
                  : cpu::binary(BinaryOp::Sub, out, b.cpu, a.cpu, alpha);
              },
              std::nullopt, l);
        compare_op(
            shape, kBool,
            [&](bool g, const Tensor& out) {
              g ? cuda::binary(BinaryOp::Ge, out, a.gpu, b.gpu) : cpu::binary(BinaryOp::Ge, out, a.cpu, b.cpu);
            },
            std::nullopt, l == Layout::Expanded ? Layout::Contiguous : l);
      }
    }
  }
}

TEST_CASE("copies through the tiled transpose at its tile boundaries, every element size", "[gpu][boundaries][copy]") {
  const OneCpuThread cpu_threads;
  // kernels/cuda/copy.cu: kTile (32) x kTile tiles moved by kTile x kTileRows
  // (8) threads; sides under kMinTileSide (8) stay on the strided kernel.
  const std::vector<Shape> shapes = {
      {7, 100},    {100, 7},            // a side of kMinTileSide - 1: the strided kernel
      {8, 8},      {8, 65},             // kMinTileSide: one partial tile; a row of three
      {31, 31},    {32, 32}, {33, 33},  // under one tile, one tile, a tile and a strip
      {63, 65},    {64, 64}, {65, 63},  // two tiles a side, each way across
      {3, 33, 31},                      // a batch of matrices (tiles of the outer dim)
  };
  for (Dtype dt : test::kAllDtypes) {
    for (const Shape& shape : shapes) {
      const int64_t nd = static_cast<int64_t>(shape.size());
      const Tensor x = values(shape, dt, 8);
      // The source transposed into a contiguous destination, a contiguous
      // source into a transposed destination, and into a destination whose
      // rows are 3 elements longer than its width, at an offset (dst_ld !=
      // cols).
      const Laid src = lay_out(x, Layout::Transposed), plain = on_both(x);
      INFO(dt << ", " << shape_str(shape));
      compare_op(
          shape, dt, [&](bool g, const Tensor& out) { g ? cuda::copy(out, src.gpu) : cpu::copy(out, src.cpu); },
          kExact);
      compare_op(
          shape, dt, [&](bool g, const Tensor& out) { g ? cuda::copy(out, plain.gpu) : cpu::copy(out, plain.cpu); },
          kExact, Layout::Transposed);
      Shape wide = shape;
      wide.back() += 3;
      const Laid pitched = on_both(poison(wide, dt));
      const Tensor dc = pitched.cpu.narrow(nd - 1, 1, shape.back()), dg = pitched.gpu.narrow(nd - 1, 1, shape.back());
      cpu::copy(dc, src.cpu);
      cuda::copy(dg, src.gpu);
      check_result(pitched.gpu, pitched.cpu, kExact);
      // A stepped transposed source: strided, through the strided kernel.
      const Laid stepped = lay_out(x.transpose(nd - 2, nd - 1), Layout::Stepped);
      const Tensor sc = stepped.cpu.transpose(nd - 2, nd - 1), sg = stepped.gpu.transpose(nd - 2, nd - 1);
      compare_op(
          shape, dt, [&](bool g, const Tensor& out) { g ? cuda::copy(out, sg) : cpu::copy(out, sc); }, kExact);
      // A conversion of the transposed source (the conversion kernels).
      const Dtype other = dt == kFloat32 ? kBFloat16 : kFloat32;
      compare_op(
          shape, other, [&](bool g, const Tensor& out) { g ? cuda::copy(out, src.gpu) : cpu::copy(out, src.cpu); },
          kExact);
    }
  }
}

// ================================================================ reductions (reduce.cu, reduce_plan.h)

namespace {

// kVecWidth of kernels/cuda/block_reduce.cuh: 16 bytes a vector, at most 8
// elements.
int vec_width(Dtype dt) {
  const int size = static_cast<int>(element_size(dt));
  return size >= 2 ? 16 / size : 8;
}

// The threads a reduction's grid should fill: four blocks of kReduceThreads
// per multiprocessor, what an sm_90 multiprocessor holds (and what the
// simulated GPU's occupancy query answers). The sizes below have a few
// outputs, for which the plan depends on this only through "far more than
// one block".
int64_t reduce_resident() {
  return int64_t{cuda::get_device_properties(0).multi_processor_count} * 4 * cuda::kReduceThreads;
}

Shape keep_shape(const Tensor& in, IntArrayRef dims) {
  Shape keep = in.sizes().vec();
  for (int64_t d : dims) keep[static_cast<size_t>(d)] = 1;
  return keep;
}

struct ReducePlan {
  cuda::ReduceLayout layout;
  cuda::ReduceLaunch launch;
};

// The launch reduce.cu picks for the view in_gpu over dims.
ReducePlan reduce_plan(const Tensor& in_gpu, IntArrayRef dims) {
  const Tensor out = empty(keep_shape(in_gpu, dims), in_gpu.dtype());
  ReducePlan p;
  p.layout = cuda::make_reduce_layout(out, in_gpu);
  const bool aligned = reinterpret_cast<uintptr_t>(in_gpu.data_ptr()) % 16 == 0;
  p.launch = cuda::plan_reduce_launch(p.layout, vec_width(in_gpu.dtype()), aligned, reduce_resident());
  return p;
}

void compare_reduce(ReduceOp op, const Laid& in, IntArrayRef dims, std::optional<Tolerance> tol,
                    const ReduceParams& params = {}) {
  INFO("reduce op " << static_cast<int>(op) << " over dims " << shape_str(dims) << " of " << describe(in.gpu));
  const Shape keep = keep_shape(in.cpu, dims);
  const Tensor expected = poison(keep, in.cpu.dtype()), got = poison(keep, in.cpu.dtype()).to(kGpu);
  cpu::reduce(op, expected, in.cpu, params);
  cuda::reduce(op, got, in.gpu, params);
  check_result(got, expected, tol);
}

void compare_arg(bool is_max, const Laid& in, int64_t dim) {
  INFO((is_max ? "argmax" : "argmin") << " over dim " << dim << " of " << describe(in.gpu));
  const Shape keep = keep_shape(in.cpu, {dim});
  const Tensor values_cpu = poison(keep, in.cpu.dtype()), indices_cpu = poison(keep, kInt64);
  const Tensor values_gpu = values_cpu.to(kGpu), indices_gpu = indices_cpu.to(kGpu);
  cpu::arg_reduce(is_max, values_cpu, indices_cpu, in.cpu);
  cuda::arg_reduce(is_max, values_gpu, indices_gpu, in.gpu);
  check_bits(indices_gpu, indices_cpu);
  check_bits(values_gpu, values_cpu);
}

// The reductions whose partials merge differently, on one input: sums,
// means, extrema and arg extrema are exact on coarse values (sums exact in
// any order, many ties); products of +-1 too; var (Welford), logsumexp and
// the 2-norm round in another order, within the dtype's tolerance.
void compare_reductions(const Tensor& x, Layout l, IntArrayRef dims, uint64_t seed) {
  const Dtype dt = x.dtype();
  const Laid in = lay_out(x, l);
  compare_reduce(ReduceOp::Sum, in, dims, kExact);
  compare_reduce(ReduceOp::Amax, in, dims, kExact);
  compare_reduce(ReduceOp::Amin, in, dims, kExact);
  if (dims.size() == 1) {
    compare_arg(true, in, dims[0]);
    compare_arg(false, in, dims[0]);
  }
  if (dt == kInt32 || dt == kInt64 || is_floating_point(dt)) {
    const Tensor signs = coarse(x.sizes(), kInt64, seed, 0, 1).mul(2).sub(1).to(dt);
    compare_reduce(ReduceOp::Prod, lay_out(signs, l), dims, kExact);
  }
  if (!is_floating_point(dt)) return;
  compare_reduce(ReduceOp::Mean, in, dims, kExact);
  compare_reduce(ReduceOp::Var, in, dims, std::nullopt);
  compare_reduce(ReduceOp::LogSumExp, in, dims, std::nullopt);
  compare_reduce(ReduceOp::Norm, in, dims, std::nullopt);
}

}  // namespace

TEST_CASE("row reductions at the lane-group, block-widening and split boundaries", "[gpu][boundaries][reduce]") {
  const OneCpuThread cpu_threads;
  // Three outputs of R elements each, one run (the inner dim): a group of
  // bx lanes folds w = ceil(R / vec) vectors, bx = pow2(w) up to a warp;
  // bx doubles while w >= 2 * bx * kMinItemsPerThread (8), and a split
  // across grid y comes once a thread would fold 2 * 8 items.
  struct RowCase {
    int64_t w, extra;  // R = w * vec + extra
    int block_x;
    int64_t splits;
    const char* what;
  };
  const RowCase cases[] = {
      {16, 0, 16, 1, "16 vectors: a half-warp group"},
      {16, 1, 32, 1, "17 vectors (the last partial): a warp"},
      {480, 0, 32, 1, "480 vectors: 15 per lane, no split"},
      {480, 1, 32, 2, "481 vectors: 16 per lane, two splits"},
      {512, -1, 64, 1, "512 vectors, the last partial: two warps, no split"},
      {512, 1, 64, 1, "513 vectors: two warps"},
      {4096, 0, cuda::kReduceThreads, 1, "4096 vectors: a whole block"},
  };
  for (Dtype dt : test::kAllDtypes) {
    const int vec = vec_width(dt);
    uint64_t seed = 10;
    for (const RowCase& c : cases) {
      const int64_t R = c.w * vec + c.extra;
      INFO(dt << ", R " << R << ": " << c.what);
      const Tensor x = coarse({3, R}, dt, seed++, -4, 4, 2);
      const ReducePlan p = reduce_plan(on_both(x).gpu, {1});
      REQUIRE(p.layout.contiguous_run);
      CHECK(p.launch.block_x == c.block_x);
      CHECK(p.launch.splits == c.splits);
      // Contiguous rows, and rows that start off the vector boundary (each
      // at another offset: the scalar heads and tails).
      compare_reductions(x, Layout::Contiguous, {1}, seed);
      compare_reductions(x, Layout::Offset, {1}, seed);
      // At the split boundary: columns (transposed), strided runs (stepped)
      // and a broadcast row (expanded).
      if (c.w == 480)
        for (Layout l : {Layout::Transposed, Layout::Stepped, Layout::Expanded}) {
          INFO(layout_name(l));
          compare_reductions(x, l, {1}, seed);
        }
    }
  }
}

TEST_CASE("column reductions at the vector-output, warp, split and shared-memory boundaries",
          "[gpu][boundaries][reduce]") {
  const OneCpuThread cpu_threads;
  for (Dtype dt : test::kAllDtypes) {
    const int64_t vec = vec_width(dt);
    struct ColumnCase {
      int64_t R, N;
      int vec_outputs, block_y;
      int64_t splits;  // -1: not checked
      const char* what;
    };
    const ColumnCase cases[] = {
        {960, 8 * vec, static_cast<int>(vec), 64, 1, "8 vector lanes, 15 rows a thread: no split"},
        {961, 8 * vec, static_cast<int>(vec), 64, 2, "16 rows a thread: two splits"},
        {961, 8 * vec + 1, 1, 16, -1, "N not a multiple of the vector: scalar outputs"},
        {32, vec, static_cast<int>(vec), 32, 1, "one lane, 32 rows: one warp folds"},
        {33, vec, static_cast<int>(vec), 64, 1, "one lane, 33 rows: two warps through shared memory"},
    };
    uint64_t seed = 30;
    for (const ColumnCase& c : cases) {
      INFO(dt << ", (" << c.R << ", " << c.N << ") over dim 0: " << c.what);
      const Tensor x = coarse({c.R, c.N}, dt, seed++, -4, 4, 2);
      const ReducePlan p = reduce_plan(on_both(x).gpu, {0});
      REQUIRE(p.layout.columns);
      CHECK(p.launch.vec_outputs == c.vec_outputs);
      CHECK(p.launch.block_y == c.block_y);
      if (c.splits >= 0) CHECK(p.launch.splits == c.splits);
      compare_reductions(x, Layout::Contiguous, {0}, seed);
      compare_reductions(x, Layout::Offset, {0}, seed);  // misaligned: scalar outputs
      // Below the split: outputs far apart (transposed: rows), a stepped
      // row of outputs, and a reduced dim of stride 0 (expanded).
      if (c.R == 960)
        for (Layout l : {Layout::Transposed, Layout::Stepped, Layout::Expanded}) {
          INFO(layout_name(l));
          compare_reductions(x, l, {0}, seed);
        }
    }
  }
  // Var's Welford accumulators (3 doubles) of all the vector outputs of a
  // 512-thread block in shared memory at once: 4 x 512 x 24 bytes, exactly
  // the 48 KiB a launch gets without opting in, for float32 (float64: 2
  // outputs, half of it); for the 16-bit floats (8 outputs a vector) twice
  // that, so one output at a time.
  for (Dtype dt : kFloats) {
    const int64_t N = 32 * vec_width(dt);
    for (int64_t R : {16, 17}) {
      INFO(dt << ", (" << R << ", " << N << ") over dim 0");
      const Tensor x = coarse({R, N}, dt, 40, -4, 4, 2);
      const ReducePlan p = reduce_plan(on_both(x).gpu, {0});
      CHECK(p.launch.block_x * p.launch.block_y == cuda::kReduceThreads);
      CHECK(p.launch.vec_outputs == vec_width(dt));
      for (int64_t correction : {0, 1}) {
        ReduceParams params;
        params.correction = correction;
        compare_reduce(ReduceOp::Var, on_both(x), {0}, std::nullopt, params);
        compare_reduce(ReduceOp::Std, on_both(x), {0}, std::nullopt, params);
      }
    }
  }
}

// ================================================================ softmax (softmax.cu)

namespace {

// Register slots per lane (softmax.cu: kSoftmaxSlotBytes of opmath values).
int softmax_slots(Dtype dt) { return cuda::kSoftmaxSlotBytes / (dt == kFloat64 ? 8 : 4); }

cuda::SoftmaxLaunch softmax_plan(const Tensor& x_gpu, int64_t dim, int per_thread) {
  const DimSplit s = split_at_dim(x_gpu.sizes(), dim);
  const bool aligned = reinterpret_cast<uintptr_t>(x_gpu.data_ptr()) % 16 == 0;
  return cuda::plan_softmax(s.outer, s.size, s.inner, vec_width(x_gpu.dtype()), per_thread, aligned);
}

void compare_softmax(const Laid& x, int64_t dim, bool log) {
  INFO((log ? "log_softmax" : "softmax") << " over dim " << dim << " of " << describe(x.gpu));
  const Tensor expected = poison(x.cpu.sizes(), x.cpu.dtype()), got = poison(x.cpu.sizes(), x.cpu.dtype()).to(kGpu);
  cpu::softmax(expected, x.cpu, dim, log);
  cuda::softmax(got, x.gpu, dim, log);
  check_result(got, expected);
}

// grad_in from the forward's output of x and a grad of multiples of 1/16 in
// [-1, 1], both in x's layout.
void compare_softmax_backward(const Tensor& x, Layout l, int64_t dim, bool log, uint64_t seed) {
  const Laid out = lay_out(log ? x.log_softmax(dim) : x.softmax(dim), l);
  const Laid grad = lay_out(coarse(x.sizes(), x.dtype(), seed, -1, 1, 16), l);
  INFO((log ? "log_softmax" : "softmax") << " backward over dim " << dim << " of " << describe(grad.gpu));
  const Tensor expected = poison(x.sizes(), x.dtype()), got = poison(x.sizes(), x.dtype()).to(kGpu);
  cpu::softmax_backward(expected, grad.cpu, out.cpu, dim, log);
  cuda::softmax_backward(got, grad.gpu, out.gpu, dim, log);
  check_result(got, expected);
}

}  // namespace

TEST_CASE("softmax over rows at the register-group and register/online boundaries", "[gpu][boundaries][softmax]") {
  const OneCpuThread cpu_threads;
  // A row of n lives in g = pow2(ceil(n / P)) lanes of P register slots
  // (P = 32 floats, 16 doubles) while n <= P x kSoftmaxThreads, in vectors
  // when n % V == 0 and the row is aligned; longer rows take the online
  // kernel. The backward holds grad and out: P / 2 slots.
  for (Dtype dt : kFloats) {
    const int64_t V = vec_width(dt);
    for (bool backward : {false, true}) {
      const int64_t P = softmax_slots(dt) / (backward ? 2 : 1), full = P * cuda::kSoftmaxThreads;
      const std::vector<int64_t> sizes = {
          P,        P + 1,        // one lane a row, two
          32 * P,   32 * P + 1,   // a warp a row (shuffles only), two warps (shared memory)
          128 * P,  128 * P + 1,  // 128 lanes: one row a block from here
          full - 1, full,         // the last register sizes, scalar and vectorized
          full + 1, full + V,     // the online kernel, scalar and vectorized
      };
      uint64_t seed = 50;
      for (int64_t n : sizes) {
        const int64_t rows = n > 32 * P + 1 ? 2 : 3;
        const Tensor x = coarse({rows, n}, dt, seed++, -8, 8, 16);
        INFO(dt << (backward ? " backward" : "") << ", rows of " << n);
        const cuda::SoftmaxLaunch L = softmax_plan(on_both(x).gpu, 1, static_cast<int>(P));
        CHECK(L.kind == (n <= full ? cuda::SoftmaxLaunch::Registers : cuda::SoftmaxLaunch::Online));
        CHECK(L.vectorized == (n % V == 0));
        if (n <= full) CHECK(L.block_x == cuda::plan::pow2_at_least(cuda::plan::div_up(n, P)));
        for (bool log : {false, true}) {
          if (backward) {
            compare_softmax_backward(x, Layout::Contiguous, 1, log, seed);
            if (n % V == 0) compare_softmax_backward(x, Layout::Offset, 1, log, seed);  // the scalar path
          } else {
            compare_softmax(on_both(x), 1, log);
            if (n % V == 0) compare_softmax(lay_out(x, Layout::Offset), 1, log);
          }
        }
      }
    }
  }
}

TEST_CASE("softmax over outer dims at the column kernel's block boundaries", "[gpu][boundaries][softmax]") {
  const OneCpuThread cpu_threads;
  // inner > 1: bx = pow2(min(inner, 32)) threads across the inner index,
  // by = min(pow2(n), kSoftmaxColumnThreads / bx) (at least a warp) along
  // the softmax dim, reduce_y through shared memory once by spans warps.
  struct ColumnCase {
    Shape shape;  // (outer, n, inner), softmax over dim 1
    int block_x, block_y;
    const char* what;
  };
  const ColumnCase cases[] = {
      {{3, 17, 1}, 0, 0, "inner 1: the row kernels"},
      {{3, 16, 2}, 2, 16, "inner 2, n 16: one warp holds the column"},
      {{3, 17, 2}, 2, 32, "inner 2, n 17: two warps, shared memory"},
      {{2, 256, 2}, 2, 256, "inner 2, n 256: one element a thread"},
      {{2, 257, 2}, 2, 256, "inner 2, n 257: a thread takes two"},
      {{2, 16, 31}, 32, 16, "inner 31: one chunk, a lane idle"},
      {{2, 16, 32}, 32, 16, "inner 32: one chunk"},
      {{2, 16, 33}, 32, 16, "inner 33: two chunks"},
  };
  for (Dtype dt : kFloats) {
    uint64_t seed = 70;
    for (const ColumnCase& c : cases) {
      INFO(dt << ", " << shape_str(c.shape) << ": " << c.what);
      const Tensor x = coarse(c.shape, dt, seed++, -8, 8, 16);
      for (bool backward : {false, true}) {
        const int P = softmax_slots(dt) / (backward ? 2 : 1);
        const cuda::SoftmaxLaunch L = softmax_plan(on_both(x).gpu, 1, P);
        if (c.block_x == 0) {
          CHECK(L.kind == cuda::SoftmaxLaunch::Registers);
        } else {
          CHECK(L.kind == cuda::SoftmaxLaunch::Columns);
          CHECK(L.block_x == c.block_x);
          CHECK(L.block_y == c.block_y);
        }
        for (bool log : {false, true}) {
          if (backward)
            compare_softmax_backward(x, Layout::Contiguous, 1, log, seed);
          else
            compare_softmax(on_both(x), 1, log);
        }
      }
    }
  }
  // Non-contiguous inputs through the front end, which makes them
  // contiguous for the kernels.
  for (Dtype dt : kFloats) {
    for (Layout l : kStridedLayouts) {
      const Laid x = lay_out(coarse({33, 40}, dt, 80, -8, 8, 16), l);
      INFO(dt << ", " << layout_name(l));
      for (int64_t dim : {0, 1}) {
        test::check_close(x.gpu.softmax(dim).cpu(), x.cpu.softmax(dim));
        test::check_close(x.gpu.log_softmax(dim).cpu(), x.cpu.log_softmax(dim));
      }
    }
  }
}

// ================================================================ indexing (index.cu, cat_plan.h)

namespace {

Tensor indices(IntArrayRef shape, int64_t size, uint64_t seed, Dtype dt = kInt64) {
  Generator g(seed);
  return randint(0, size, shape, g, dt);
}

// One dtype of each element size: gather, index_select and cat move raw
// elements by size (dispatch_bytes), so these are all their instantiations.
constexpr Dtype kElementSizes[] = {kUInt8, kBFloat16, kFloat32, kFloat64};

}  // namespace

TEST_CASE("gather and index_select at the grid-stride block and grid boundaries", "[gpu][boundaries][index]") {
  const OneCpuThread cpu_threads;
  // n indices (one thread each) into a 1-D table: one block of 256, the
  // whole grid, the grid and one (a thread's second element).
  const int64_t cap = grid_stride_cap();
  for (int64_t n : grid_stride_sizes()) {
    const bool big = n >= cap - 1;
    for (Dtype dt : test::kAllDtypes) {
      if (big && std::find(std::begin(kElementSizes), std::end(kElementSizes), dt) == std::end(kElementSizes)) continue;
      INFO(dt << ", n " << n);
      const Laid self = on_both(values({1000}, dt, 1));
      const Laid idx = on_both(indices({n}, 1000, 2));
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::gather(out, self.gpu, 0, idx.gpu) : cpu::gather(out, self.cpu, 0, idx.cpu);
      });
      const Laid idx32 = on_both(indices({n}, 1000, 3, kInt32));
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::index_select(out, self.gpu, 0, idx32.gpu) : cpu::index_select(out, self.cpu, 0, idx32.cpu);
      });
    }
  }
  // 2-D, around one block, along each dim, with strided operands: the
  // table transposed, stepped or offset, the index expanded (repeated rows)
  // or stepped.
  const std::vector<Shape> shapes = {{15, 17}, {16, 16}, {1, 257}};
  for (Dtype dt : test::kAllDtypes) {
    for (const Shape& ishape : shapes) {
      for (int64_t dim : {0, 1}) {
        for (Layout ls : {Layout::Contiguous, Layout::Transposed, Layout::Stepped, Layout::Offset}) {
          for (Layout li : {Layout::Contiguous, Layout::Expanded, Layout::Stepped}) {
            Shape sshape = ishape;
            sshape[static_cast<size_t>(dim)] = 9;
            const Laid self = lay_out(values(sshape, dt, 4), ls), idx = lay_out(indices(ishape, 9, 5), li);
            INFO(dt << ", dim " << dim << ", self " << describe(self.gpu) << ", index " << describe(idx.gpu));
            compare_op(ishape, dt, [&](bool g, const Tensor& out) {
              g ? cuda::gather(out, self.gpu, dim, idx.gpu) : cpu::gather(out, self.cpu, dim, idx.cpu);
            });
          }
          const Laid self = lay_out(values({9, 13}, dt, 6), ls);
          const Laid idx = lay_out(indices({ishape[1]}, self.cpu.size(dim), 7), Layout::Stepped);
          Shape oshape = self.cpu.sizes().vec();
          oshape[static_cast<size_t>(dim)] = ishape[1];
          INFO(dt << ", index_select dim " << dim << ", self " << describe(self.gpu));
          compare_op(oshape, dt, [&](bool g, const Tensor& out) {
            g ? cuda::index_select(out, self.gpu, dim, idx.gpu) : cpu::index_select(out, self.cpu, dim, idx.cpu);
          });
        }
      }
    }
  }
  // kMaxOffsetDims (16) non-mergeable dims: the table reversed, so that no
  // two of its dims merge (17 are refused: test_gpu_index).
  for (Dtype dt : kElementSizes) {
    const Shape sixteen(16, 2);
    std::vector<int64_t> reversed(16);
    for (int64_t d = 0; d < 16; ++d) reversed[static_cast<size_t>(d)] = 15 - d;
    const Laid base = on_both(values(sixteen, dt, 8));
    const Tensor sc = base.cpu.permute(reversed), sg = base.gpu.permute(reversed);
    const Laid idx = on_both(indices(sixteen, 2, 9));
    INFO(dt << ", 16 dims");
    compare_op(sixteen, dt, [&](bool g, const Tensor& out) {
      g ? cuda::gather(out, sg, 3, idx.gpu) : cpu::gather(out, sc, 3, idx.cpu);
    });
  }
}

TEST_CASE("scatter_add at the grid-stride boundaries, every dtype's atomics", "[gpu][boundaries][index]") {
  const OneCpuThread cpu_threads;
  // Atomic adds of coarse values, which every order sums exactly: multiples
  // of 1/2 in [-1, 1] (a slot of 4096 takes about 66 of them, whose sum
  // bfloat16's 8 bits still hold); 1-byte dtypes add through the 32-bit
  // word that holds their neighbours.
  for (int64_t n : grid_stride_sizes()) {
    for (Dtype dt : test::kAllDtypes) {
      INFO(dt << ", n " << n);
      const Laid self = on_both(coarse({4096}, dt, 10, -1, 1, 2));
      const Laid idx = on_both(indices({n}, 4096, 11)), src = on_both(coarse({n}, dt, 12, -1, 1, 2));
      cpu::scatter_add(self.cpu, 0, idx.cpu, src.cpu);
      cuda::scatter_add(self.gpu, 0, idx.gpu, src.gpu);
      check_bits(self.gpu_base, self.cpu_base);
    }
  }
  // Strided self, index and src around one block.
  for (Dtype dt : test::kAllDtypes) {
    for (const Shape& ishape : std::vector<Shape>{{15, 17}, {16, 16}, {1, 257}}) {
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Stepped, Layout::Offset}) {
        for (int64_t dim : {0, 1}) {
          Shape sshape = ishape;
          sshape[static_cast<size_t>(dim)] = 5;
          const Laid self = lay_out(coarse(sshape, dt, 13, -1, 1, 2), l);
          const Laid idx = lay_out(indices(ishape, 5, 14), l == Layout::Transposed ? Layout::Stepped : l);
          const Laid src = lay_out(coarse(ishape, dt, 15, -1, 1, 2), l == Layout::Offset ? Layout::Transposed : l);
          INFO(dt << ", dim " << dim << ", self " << describe(self.gpu) << ", index " << describe(idx.gpu) << ", src "
                  << describe(src.gpu));
          cpu::scatter_add(self.cpu, dim, idx.cpu, src.cpu);
          cuda::scatter_add(self.gpu, dim, idx.gpu, src.gpu);
          check_bits(self.gpu_base, self.cpu_base);
        }
      }
    }
  }
}

TEST_CASE("cat at the kCatBatch and kCatDims boundaries", "[gpu][boundaries][cat]") {
  const OneCpuThread cpu_threads;
  // kCatBatch (32) inputs a launch: 31, 32, 33, 64 and 65 inputs take 1, 1,
  // 2, 2 and 3 launches.
  static_assert(cuda::kCatBatch == 32 && cuda::kCatDims == 4);
  const Layout layouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Stepped, Layout::Expanded, Layout::Offset};
  for (Dtype dt : test::kAllDtypes) {
    for (int count : {31, 32, 33, 64, 65}) {
      for (int64_t dim : {0, 1}) {
        std::vector<Laid> laid;
        std::vector<Tensor> cpu_in, gpu_in;
        for (int i = 0; i < count; ++i) {
          Shape s{3, 4};
          s[static_cast<size_t>(dim)] = 1 + i % 3;
          laid.push_back(lay_out(values(s, dt, 20 + static_cast<uint64_t>(i)), layouts[i % 5]));
          cpu_in.push_back(laid.back().cpu);
          gpu_in.push_back(laid.back().gpu);
        }
        INFO(dt << ", " << count << " inputs along dim " << dim);
        const Tensor expected = cat(cpu_in, dim);
        const Tensor out = poison(expected.sizes(), dt).to(kGpu);
        CHECK(cuda::plan_cat(out, gpu_in, dim).size() == static_cast<size_t>((count + 31) / 32));
        cuda::cat(out, gpu_in, dim);
        check_bits(out, expected);
      }
    }
  }
  // kCatDims dims that do not merge (a reversed contiguous tensor) fit one
  // entry; one more splits the input into runs along its outermost dim.
  for (Dtype dt : kElementSizes) {
    for (const Shape& shape : std::vector<Shape>{{2, 3, 4, 5}, {2, 3, 4, 5, 3}}) {
      const int64_t nd = static_cast<int64_t>(shape.size());
      std::vector<int64_t> reversed(static_cast<size_t>(nd));
      for (int64_t d = 0; d < nd; ++d) reversed[static_cast<size_t>(d)] = nd - 1 - d;
      const Laid base = on_both(values(shape, dt, 30));
      const Tensor wide_c = base.cpu.permute(reversed), wide_g = base.gpu.permute(reversed);
      const Laid other = on_both(values(wide_c.sizes(), dt, 31));
      for (int64_t dim : {int64_t{0}, nd - 1}) {
        INFO(dt << ", " << nd << " non-mergeable dims, along dim " << dim);
        const Tensor expected = cat({other.cpu, wide_c, other.cpu}, dim);
        const Tensor out = poison(expected.sizes(), dt).to(kGpu);
        const auto plan = cuda::plan_cat(out, {other.gpu, wide_g, other.gpu}, dim);
        REQUIRE(plan.size() == 1);
        CHECK(plan[0].batch.count == (nd <= cuda::kCatDims ? 3 : 2 + wide_c.size(0)));
        cuda::cat(out, {other.gpu, wide_g, other.gpu}, dim);
        check_bits(out, expected);
      }
    }
  }
  // An input past the grid-stride cap beside a short one: the grid is sized
  // by the largest entry, and its threads take a second element.
  for (Dtype dt : kElementSizes) {
    const int64_t n = grid_stride_cap() + 1;
    const Laid big = on_both(values({n}, dt, 32)), small = lay_out(values({300}, dt, 33), Layout::Stepped);
    INFO(dt << ", " << n << " and 300 elements");
    const Tensor expected = cat({small.cpu, big.cpu}, 0);
    const Tensor out = poison({n + 300}, dt).to(kGpu);
    cuda::cat(out, {small.gpu, big.gpu}, 0);
    check_bits(out, expected);
  }
}

// ================================================================ optimizers and foreach (optim.cu)

namespace {

// kernels/cuda/optim.cu: a block per kChunk (65536) elements of a tensor; a
// launch's TensorList holds (16 KiB - 64) / (Depth pointers, an int64 size,
// an int32 chunk start and the per-tensor scalars) tensors, so a list one
// longer takes a second launch.
constexpr int64_t kChunk = 65536;
template <typename Aux>
constexpr int64_t list_capacity(int64_t depth) {
  return (16 * 1024 - 64) / (depth * static_cast<int64_t>(sizeof(void*)) + 8 + 4 + static_cast<int64_t>(sizeof(Aux)));
}

// Tensors of the given sizes on both devices (coarse values in [lo, hi]),
// views of one buffer each side (one allocation and copy for a list of
// hundreds), each starting on a 16-element boundary (every vector width's),
// or one element after it, off the boundary, for every third tensor where
// offsets is set. The gaps between them must stay as they are.
struct List {
  Laid buffer;
  std::vector<Tensor> cpu, gpu;
  void check(const char* what) const {
    if (!buffer.cpu_base.defined()) return;
    INFO(what << ", a list of " << cpu.size() << " in one buffer of " << buffer.cpu_base.numel());
    check_result(buffer.gpu_base, buffer.cpu_base);
  }
};

List list_of(const std::vector<int64_t>& sizes, Dtype dt, uint64_t seed, double lo, double hi, bool offsets) {
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    at = (at + 15) / 16 * 16 + (offsets && i % 3 == 1 ? 1 : 0);
    starts.push_back(at);
    at += sizes[i];
  }
  List l;
  l.buffer = on_both(coarse({at}, dt, seed, lo, hi, 16));
  for (size_t i = 0; i < sizes.size(); ++i) {
    l.cpu.push_back(l.buffer.cpu.narrow(0, starts[i], sizes[i]));
    l.gpu.push_back(l.buffer.gpu.narrow(0, starts[i], sizes[i]));
  }
  return l;
}

// f<M>() with M the opmath type of dt (float for the 16-bit floats), the
// type of the optimizers' per-tensor scalars.
template <typename F>
void with_opmath(Dtype dt, const F& f) {
  if (dt == kFloat64)
    f.template operator()<double>();
  else
    f.template operator()<float>();
}

void compare_sgd(const std::vector<int64_t>& sizes, Dtype dt, bool offsets, bool momentum) {
  fn::SgdHyper h;
  h.lr = 0.125;
  if (momentum) {
    h.momentum = 0.875;
    h.weight_decay = 0.0625;
    h.nesterov = true;
  }
  const List p = list_of(sizes, dt, 100, -2, 2, offsets), g = list_of(sizes, dt, 200, -2, 2, offsets);
  const List b = momentum ? list_of(sizes, dt, 300, -2, 2, offsets) : List{};
  std::vector<uint8_t> fresh(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) fresh[i] = momentum && i % 2 == 0;
  // With momentum, also the fused step's unscale (by 3: the reciprocal
  // rounds) and its flag, clear.
  const Tensor scale = momentum ? full({}, 3.0, kFloat32) : Tensor(), found_inf = momentum ? zeros({}) : Tensor();
  cpu::sgd_step(p.cpu, g.cpu, b.cpu, fresh, h, found_inf, scale);
  cuda::sgd_step(p.gpu, g.gpu, b.gpu, fresh, h, momentum ? found_inf.to(kGpu) : Tensor(),
                 momentum ? scale.to(kGpu) : Tensor());
  p.check("sgd param");
  b.check("sgd momentum buffer");
  g.check("sgd grad");
}

void compare_adam(const std::vector<int64_t>& sizes, Dtype dt, bool offsets, bool adamw_amsgrad) {
  fn::AdamHyper h;
  h.lr = 0.01;
  h.weight_decay = 0.125;
  h.amsgrad = adamw_amsgrad;
  h.decoupled_weight_decay = adamw_amsgrad;
  const List p = list_of(sizes, dt, 400, -2, 2, offsets), g = list_of(sizes, dt, 500, -2, 2, offsets);
  const List m = list_of(sizes, dt, 600, -1, 1, offsets), v = list_of(sizes, dt, 700, 0, 1, offsets);
  const List vmax = adamw_amsgrad ? list_of(sizes, dt, 800, 0, 1, offsets) : List{};
  std::vector<double> steps(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) steps[i] = static_cast<double>(1 + i % 3);
  if (!adamw_amsgrad) {
    cpu::adam_step(p.cpu, g.cpu, m.cpu, v.cpu, vmax.cpu, steps, {}, h, Tensor(), Tensor());
    cuda::adam_step(p.gpu, g.gpu, m.gpu, v.gpu, vmax.gpu, steps, {}, h, Tensor(), Tensor());
  } else {
    // Fused Adam: the counts on the device, incremented and turned into bias
    // corrections in the kernel, and the unscale by 3 in it.
    std::vector<Tensor> counts_cpu, counts_gpu;
    for (double step : steps) {
      counts_cpu.push_back(full({}, step - 1, kFloat32));
      counts_gpu.push_back(counts_cpu.back().to(kGpu));
    }
    const Tensor scale = full({}, 3.0, kFloat32), found_inf = zeros({});
    cpu::adam_step(p.cpu, g.cpu, m.cpu, v.cpu, vmax.cpu, {}, counts_cpu, h, found_inf, scale);
    cuda::adam_step(p.gpu, g.gpu, m.gpu, v.gpu, vmax.gpu, {}, counts_gpu, h, found_inf.to(kGpu), scale.to(kGpu));
    for (size_t i = 0; i < steps.size(); ++i) {
      CHECK(counts_gpu[i].item<double>() == steps[i]);
      CHECK(counts_cpu[i].item<double>() == steps[i]);
    }
    g.check("adam grad");
  }
  p.check("adam param");
  m.check("adam exp_avg");
  v.check("adam exp_avg_sq");
  vmax.check("adam max_exp_avg_sq");
}

void compare_foreach(const std::vector<int64_t>& sizes, Dtype dt, bool offsets, const std::vector<double>& orders) {
  const List x = list_of(sizes, dt, 900, -2, 2, offsets);
  const auto n = static_cast<int64_t>(sizes.size());
  for (double p : orders) {
    INFO("foreach_norm p " << p);
    const Tensor expected = poison({n}, dt), got = poison({n}, dt).to(kGpu);
    cpu::foreach_norm(x.cpu, p, expected);
    cuda::foreach_norm(x.gpu, p, got);
    check_result(got, expected);
  }
  const Tensor scale = full({1}, -0.75, dt);
  cpu::foreach_mul_(x.cpu, scale);
  cuda::foreach_mul_(x.gpu, scale.to(kGpu));
  x.check("foreach_mul_ tensor");
}

}  // namespace

TEST_CASE("optimizer steps and foreach ops at the chunk boundary, aligned or not", "[gpu][boundaries][optim]") {
  const OneCpuThread cpu_threads;
  // A block per kChunk elements: one short of a chunk, one, one and a
  // single element, two and a vector's tail; every third tensor misaligned
  // (the scalar loop) when `offsets`.
  const std::vector<int64_t> sizes = {kChunk - 1, kChunk, kChunk + 1, 2 * kChunk + 3};
  for (Dtype dt : kFloats) {
    for (bool offsets : {false, true}) {
      INFO(dt << (offsets ? ", some misaligned" : ", aligned"));
      compare_sgd(sizes, dt, offsets, true);
      compare_sgd(sizes, dt, offsets, false);
      compare_adam(sizes, dt, offsets, false);
      compare_adam(sizes, dt, offsets, true);
      compare_foreach(sizes, dt, offsets, {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()});
    }
  }
}

TEST_CASE("optimizer steps and foreach ops at the tensor-list capacity of a launch", "[gpu][boundaries][optim]") {
  const OneCpuThread cpu_threads;
  // capacity - 1, capacity and capacity + 1 short tensors (1 to 9 elements:
  // vector tails), for each list depth and per-tensor scalar size.
  auto short_sizes = [](int64_t count) {
    std::vector<int64_t> s(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) s[static_cast<size_t>(i)] = 1 + i % 9;
    return s;
  };
  for (Dtype dt : kFloats) {
    with_opmath(dt, [&]<typename M>() {
      struct Op {
        const char* name;
        int64_t capacity;
        std::function<void(const std::vector<int64_t>&)> run;
      };
      const Op ops[] = {
          {"sgd", list_capacity<fn::SgdTensorScalars<M>>(2),
           [&](const std::vector<int64_t>& s) { compare_sgd(s, dt, true, false); }},
          {"sgd with momentum", list_capacity<fn::SgdTensorScalars<M>>(3),
           [&](const std::vector<int64_t>& s) { compare_sgd(s, dt, true, true); }},
          {"adam", list_capacity<fn::AdamTensorScalars<M>>(4),
           [&](const std::vector<int64_t>& s) { compare_adam(s, dt, true, false); }},
          {"adamw with amsgrad", list_capacity<fn::AdamTensorScalars<M>>(5),
           [&](const std::vector<int64_t>& s) { compare_adam(s, dt, true, true); }},
          // foreach_norm's scalar is the output slot (int32); foreach_mul_
          // has none (a 1-byte empty struct), and more tensors a list.
          {"foreach_norm", list_capacity<int32_t>(1),
           [&](const std::vector<int64_t>& s) { compare_foreach(s, dt, true, {2.0}); }},
          {"foreach_mul_", list_capacity<char>(1),
           [&](const std::vector<int64_t>& s) {
             const List x = list_of(s, dt, 950, -2, 2, true);
             const Tensor scale = full({1}, 1.5, dt);
             cpu::foreach_mul_(x.cpu, scale);
             cuda::foreach_mul_(x.gpu, scale.to(kGpu));
             x.check("foreach_mul_ tensor");
           }},
      };
      for (const Op& op : ops) {
        // (foreach_norm runs two kernels of a 512-thread block with barriers
        // per tensor, a second of the simulator's time a call: there only
        // capacity + 1, a full launch and then one of a single tensor.)
        const bool norm = std::string(op.name) == "foreach_norm";
        for (int64_t count : {op.capacity - 1, op.capacity, op.capacity + 1}) {
          if (norm && count != op.capacity + 1) continue;
          INFO(dt << ", " << op.name << ", " << count << " tensors (a launch holds " << op.capacity << ")");
          op.run(short_sizes(count));
        }
      }
    });
  }
}

// ================================================================ batch norm, layer norm (norm.cu, norm_plan.h)

namespace {

Dtype stats_dtype(Dtype dt) { return dt == kFloat64 ? kFloat64 : kFloat32; }

// Batch norm forward (training with running statistics, or eval) and
// backward (every gradient) of x on both devices, outputs poisoned. The
// backward takes the cpu forward's statistics on both devices.
//
// The GPU sums a channel's values in float (kernels/cuda/norm.h), the CPU
// in double: they agree within float32's tolerance where a sum does not
// cancel (zero-mean data put gradient sums of a few hundred values 5e-5
// relative from the CPU's). So x is centred on 8 and the grad is
// 0.125 (x - 8) plus [0.5, 1.5]: Sum g, Sum g (x - mean) and
// Sum g (x - running_mean) stay away from 0, and grad_input, which removes
// the grad's correlation with x, keeps the rest.
Tensor bn_input(IntArrayRef shape, Dtype dt, uint64_t seed) { return values(shape, kFloat64, seed).add(8).to(dt); }
Tensor bn_grad(const Tensor& x, uint64_t seed) {
  return x.to(kFloat64).sub(8).mul(0.125).add(coarse(x.sizes(), kFloat64, seed, 0.5, 1.5, 16)).to(x.dtype());
}

void compare_batch_norm(const Tensor& x, bool training, uint64_t seed) {
  const Dtype dt = x.dtype(), M = stats_dtype(dt);
  const int64_t C = x.size(1);
  INFO((training ? "training" : "eval") << ", input " << describe(x));
  const Laid xl = on_both(x), w = on_both(coarse({C}, M, seed, 0.5, 2)), b = on_both(coarse({C}, M, seed + 1));
  const Laid rm = on_both(coarse({C}, M, seed + 2)), rv = on_both(coarse({C}, M, seed + 3, 0.25, 4));
  const Tensor out_c = poison(x.sizes(), dt), mean_c = poison({C}, M), invstd_c = poison({C}, M);
  const Tensor out_g = out_c.to(kGpu), mean_g = mean_c.to(kGpu), invstd_g = invstd_c.to(kGpu);
  cpu::batch_norm(out_c, mean_c, invstd_c, xl.cpu, w.cpu, b.cpu, rm.cpu, rv.cpu, training, 0.125, 1e-5);
  cuda::batch_norm(out_g, mean_g, invstd_g, xl.gpu, w.gpu, b.gpu, rm.gpu, rv.gpu, training, 0.125, 1e-5);
  {
    INFO("out, mean, invstd, running mean, running var");
    check_result(out_g, out_c);
    check_result(mean_g, mean_c);
    check_result(invstd_g, invstd_c);
    check_result(rm.gpu, rm.cpu);
    check_result(rv.gpu, rv.cpu);
  }

  const Laid g = on_both(bn_grad(x, seed + 4));
  const Laid mean = on_both(mean_c), invstd = on_both(invstd_c);
  const Tensor gi_c = poison(x.sizes(), dt), gw_c = poison({C}, M), gb_c = poison({C}, M);
  const Tensor gi_g = gi_c.to(kGpu), gw_g = gw_c.to(kGpu), gb_g = gb_c.to(kGpu);
  cpu::batch_norm_backward(gi_c, gw_c, gb_c, g.cpu, xl.cpu, w.cpu, mean.cpu, invstd.cpu, training);
  cuda::batch_norm_backward(gi_g, gw_g, gb_g, g.gpu, xl.gpu, w.gpu, mean.gpu, invstd.gpu, training);
  INFO("grad_input, grad_weight, grad_bias");
  check_result(gi_g, gi_c);
  check_result(gw_g, gw_c);
  check_result(gb_g, gb_c);
}

void compare_layer_norm(const Tensor& x, bool affine, uint64_t seed) {
  const Dtype dt = x.dtype(), M = stats_dtype(dt);
  const int64_t rows = x.size(0), D = x.numel() / rows;
  INFO("layer norm of " << describe(x) << (affine ? ", affine" : ""));
  const Laid xl = on_both(x);
  const Laid w = affine ? on_both(coarse({D}, M, seed, 0.5, 2)) : Laid{};
  const Laid b = affine ? on_both(coarse({D}, M, seed + 1)) : Laid{};
  const Tensor out_c = poison(x.sizes(), dt), mean_c = poison({rows}, M), invstd_c = poison({rows}, M);
  const Tensor out_g = out_c.to(kGpu), mean_g = mean_c.to(kGpu), invstd_g = invstd_c.to(kGpu);
  cpu::layer_norm(out_c, mean_c, invstd_c, xl.cpu, w.cpu, b.cpu, 1e-5);
  cuda::layer_norm(out_g, mean_g, invstd_g, xl.gpu, w.gpu, b.gpu, 1e-5);
  check_result(out_g, out_c);
  check_result(mean_g, mean_c);
  check_result(invstd_g, invstd_c);

  const Laid g = on_both(coarse(x.sizes(), dt, seed + 2, -2, 2, 16));
  const Laid mean = on_both(mean_c), invstd = on_both(invstd_c);
  const Tensor gi_c = poison(x.sizes(), dt), gw_c = poison({D}, M), gb_c = poison({D}, M);
  const Tensor gi_g = gi_c.to(kGpu), gw_g = gw_c.to(kGpu), gb_g = gb_c.to(kGpu);
  cpu::layer_norm_backward(gi_c, gw_c, gb_c, g.cpu, xl.cpu, w.cpu, mean.cpu, invstd.cpu);
  cuda::layer_norm_backward(gi_g, gw_g, gb_g, g.gpu, xl.gpu, w.gpu, mean.gpu, invstd.gpu);
  INFO("grad_input, grad_weight, grad_bias");
  check_result(gi_g, gi_c);
  check_result(gw_g, gw_c);
  check_result(gb_g, gb_c);
}

}  // namespace

TEST_CASE("batch norm at the plane/band, band-width and split boundaries", "[gpu][boundaries][norm]") {
  const OneCpuThread cpu_threads;
  const int64_t sms = cuda::get_device_properties(0).multi_processor_count;
  struct BnCase {
    Shape shape;  // (N, C, L...)
    bool planes;
    int64_t grid_x, splits;
    const char* what;
  };
  const BnCase cases[] = {
      {{2, 3, 31}, false, 3, 1, "planes of kNormPlaneMin - 1: bands of 32 slots, the last short"},
      {{2, 3, 32}, true, 3, 1, "planes of kNormPlaneMin: the plane kernel"},
      {{2, 3, 33}, true, 3, 1, "planes of kNormPlaneMin + 1"},
      {{4, 31}, false, 1, 1, "(N, C) with C * L = 31 slots: one band, a lane idle"},
      {{4, 32}, false, 1, 1, "32 slots: one full band"},
      {{4, 33}, false, 2, 1, "33 slots: two bands"},
      {{128, 33}, false, 2, 1, "128 rows: each thread of a band sums 16"},
      {{129, 33}, false, 2, 2, "129 rows: the rows split in two"},
      {{128, 3, 32}, true, 3, 1, "N * L = 4096: one block a plane"},
      {{129, 3, 32}, true, 3, 2, "N * L = 4128: two blocks a plane"},
  };
  for (const BnCase& c : cases) {
    const cuda::ChannelSumsPlan plan = cuda::channel_sums_plan(nchw_of(c.shape), sms);
    INFO(shape_str(c.shape) << ": " << c.what);
    CHECK(plan.planes == c.planes);
    CHECK(plan.grid_x == c.grid_x);
    CHECK(plan.splits == c.splits);
    for (Dtype dt : kFloats) {
      for (bool training : {true, false}) compare_batch_norm(bn_input(c.shape, dt, 40), training, 41);
    }
  }
  // The elementwise passes at the grid-stride cap, and a non-contiguous
  // input through the front end (which makes it contiguous).
  compare_batch_norm(bn_input({1, 1, grid_stride_cap() + 1}, kFloat32, 42), true, 43);
  for (Dtype dt : kFloats) {
    for (Layout l : kStridedLayouts) {
      const Laid x = lay_out(bn_input({6, 5, 33}, dt, 44), l);
      const Laid w = on_both(coarse({5}, stats_dtype(dt), 45, 0.5, 2)), b = on_both(coarse({5}, stats_dtype(dt), 46));
      INFO(dt << ", " << layout_name(l));
      test::check_close(batch_norm(x.gpu, w.gpu, b.gpu, {}, {}, true).cpu(),
                        batch_norm(x.cpu, w.cpu, b.cpu, {}, {}, true));
    }
  }
}

TEST_CASE("layer norm at the row-group widths and the parameter-gradient split", "[gpu][boundaries][norm]") {
  const OneCpuThread cpu_threads;
  // A row of D per group of x lanes, x = 32 doubling while 4 x < D up to 256
  // (kNormThreads), 128 / x rows a block: D = 128 | 129 (32 | 64 lanes),
  // 256 | 257 (64 | 128), 512 | 513 (128 | 256), 1024 | 1025 (256 lanes of 4
  // values, and more). Rows: 5, so that the last block has idle rows where
  // x < 128.
  for (Dtype dt : kFloats) {
    for (int64_t D : {128, 129, 256, 257, 512, 513, 1024, 1025}) {
      for (bool affine : {true, false}) compare_layer_norm(values({5, D}, dt, 50), affine, 51);
    }
  }
  // The weight and bias gradients: bands of 32 columns whose rows split
  // once a thread would sum more than kNormPerThread of them.
  const int64_t sms = cuda::get_device_properties(0).multi_processor_count;
  CHECK(cuda::layer_norm_param_splits(128, 33, sms) == 1);
  CHECK(cuda::layer_norm_param_splits(129, 33, sms) == 2);
  for (Dtype dt : kFloats) {
    for (int64_t rows : {128, 129}) compare_layer_norm(values({rows, 33}, dt, 52), true, 53);
    for (Layout l : kStridedLayouts) {
      const Laid x = lay_out(values({7, 4, 33}, dt, 54), l);
      INFO(dt << ", " << layout_name(l));
      test::check_close(layer_norm(x.gpu, {33}).cpu(), layer_norm(x.cpu, {33}));
    }
  }
}

// ================================================================ pooling (pool.cu)

namespace {

// Every pooling kernel of p over x (N, C, H, W) on both devices, forward
// and backward, outputs poisoned. Max pooling on coarse values (ties: the
// first maximum wins), with its indices; the averages within tolerance.
void compare_pools(const Tensor& x, const Pool2dParams& p, const Shape& adaptive_out) {
  const Dtype dt = x.dtype();
  const int64_t H = x.size(2), W = x.size(3);
  const int64_t OH = pool_output_size(H, p.kernel_h, p.stride_h, p.pad_h, p.dilation_h, p.ceil_mode);
  const int64_t OW = pool_output_size(W, p.kernel_w, p.stride_w, p.pad_w, p.dilation_w, p.ceil_mode);
  const Shape out_shape{x.size(0), x.size(1), OH, OW};
  INFO("pools of " << describe(x) << " -> " << shape_str(out_shape) << ", kernel " << p.kernel_h << "x" << p.kernel_w
                   << ", stride " << p.stride_h << "x" << p.stride_w << ", pad " << p.pad_h << "x" << p.pad_w
                   << ", dilation " << p.dilation_h << "x" << p.dilation_w << (p.ceil_mode ? ", ceil_mode" : ""));
  const Laid in = on_both(x), gy = on_both(coarse(out_shape, dt, 60, -2, 2, 16));
  {
    INFO("max_pool2d");
    const Tensor out_c = poison(out_shape, dt), ind_c = poison(out_shape, kInt64);
    const Tensor out_g = out_c.to(kGpu), ind_g = ind_c.to(kGpu);
    cpu::max_pool2d(out_c, ind_c, in.cpu, p);
    cuda::max_pool2d(out_g, ind_g, in.gpu, p);
    check_bits(out_g, out_c);
    check_bits(ind_g, ind_c);
    const Tensor gx_c = poison(x.sizes(), dt), gx_g = gx_c.to(kGpu);
    cpu::max_pool2d_backward(gx_c, gy.cpu, ind_c, p);
    cuda::max_pool2d_backward(gx_g, gy.gpu, ind_g, p);
    check_result(gx_g, gx_c);
  }
  if (p.dilation_h == 1 && p.dilation_w == 1) {
    INFO("avg_pool2d");
    const Tensor out_c = poison(out_shape, dt), out_g = out_c.to(kGpu);
    cpu::avg_pool2d(out_c, in.cpu, p);
    cuda::avg_pool2d(out_g, in.gpu, p);
    check_result(out_g, out_c);
    const Tensor gx_c = poison(x.sizes(), dt), gx_g = gx_c.to(kGpu);
    cpu::avg_pool2d_backward(gx_c, gy.cpu, p);
    cuda::avg_pool2d_backward(gx_g, gy.gpu, p);
    check_result(gx_g, gx_c);
  }
  if (!adaptive_out.empty()) {
    INFO("adaptive_avg_pool2d to " << shape_str(adaptive_out));
    const Shape a_shape{x.size(0), x.size(1), adaptive_out[0], adaptive_out[1]};
    const Tensor out_c = poison(a_shape, dt), out_g = out_c.to(kGpu);
    cpu::adaptive_avg_pool2d(out_c, in.cpu);
    cuda::adaptive_avg_pool2d(out_g, in.gpu);
    check_result(out_g, out_c);
    const Laid ag = on_both(coarse(a_shape, dt, 61, -2, 2, 16));
    const Tensor gx_c = poison(x.sizes(), dt), gx_g = gx_c.to(kGpu);
    cpu::adaptive_avg_pool2d_backward(gx_c, ag.cpu);
    cuda::adaptive_avg_pool2d_backward(gx_g, ag.gpu);
    check_result(gx_g, gx_c);
  }
}

Pool2dParams pool_params(int64_t k, int64_t s, int64_t pad, int64_t d = 1, bool ceil_mode = false) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = d;
  p.ceil_mode = ceil_mode;
  return p;
}

}  // namespace

TEST_CASE("pooling at the grid-stride boundaries and the window edges", "[gpu][boundaries][pool]") {
  const OneCpuThread cpu_threads;
  // One thread an output (forward) or an input element (backward), 256 a
  // block. A 3x3 window, stride 2, padding 1 makes 15 x 17 = 255, 16 x 16 =
  // 256 and 1 x 257 outputs of 29 x 33, 31 x 31 and 1 x 513 inputs.
  const Pool2dParams p3 = pool_params(3, 2, 1);
  for (Dtype dt : kFloats) {
    for (const Shape& s : std::vector<Shape>{{1, 1, 29, 33}, {1, 1, 31, 31}, {1, 1, 1, 513}}) {
      compare_pools(coarse(s, dt, 62, -2, 2, 2), p3, {5, 7});
    }
    // Window edges: dilation, ceil_mode's partial last window, padding of
    // half the kernel, a window as large as the input, stride past the
    // kernel; average pooling without the padding in the divisor, or with
    // a divisor of its own; adaptive windows that overlap, tile, and
    // repeat (more outputs than inputs).
    const Tensor x = coarse({2, 3, 11, 10}, dt, 63, -2, 2, 2);
    compare_pools(x, pool_params(3, 2, 1, 2), {});
    compare_pools(x, pool_params(3, 2, 1, 1, true), {4, 3});
    compare_pools(x, pool_params(2, 3, 1, 1, true), {11, 10});
    compare_pools(x, pool_params(5, 1, 2), {13, 12});
    compare_pools(coarse({2, 3, 4, 4}, dt, 64, -2, 2, 2), pool_params(4, 4, 0), {1, 1});
    Pool2dParams no_pad = pool_params(3, 2, 1, 1, true);
    no_pad.count_include_pad = false;
    compare_pools(x, no_pad, {});
    Pool2dParams divisor = pool_params(3, 2, 1);
    divisor.divisor_override = 5;
    compare_pools(x, divisor, {});
  }
  // The grid-stride cap: 1 x (cap - 1, cap, cap + 1) outputs of a 1 x 2
  // window, whose backward passes run over cap, cap + 1, cap + 2 inputs.
  const int64_t cap = grid_stride_cap();
  for (int64_t w : {cap, cap + 1, cap + 2}) {
    Pool2dParams p = pool_params(1, 1, 0);
    p.kernel_w = 2;
    compare_pools(coarse({1, 1, 1, w}, kFloat32, 65, -2, 2, 2), p, {1, w / 2});
  }
  // Non-contiguous inputs through the front end (made contiguous there).
  for (Dtype dt : kFloats) {
    for (Layout l : kStridedLayouts) {
      const Laid x = lay_out(coarse({2, 3, 9, 8}, dt, 66, -2, 2, 2), l);
      INFO(dt << ", " << layout_name(l));
      auto [vg, ig] = max_pool2d_with_indices(x.gpu, {3}, {2}, {1});
      auto [vc, ic] = max_pool2d_with_indices(x.cpu, {3}, {2}, {1});
      check_bits(vg, vc);
      check_bits(ig, ic);
      test::check_close(avg_pool2d(x.gpu, {2}, {1}).cpu(), avg_pool2d(x.cpu, {2}, {1}));
      test::check_close(adaptive_avg_pool2d(x.gpu, {4, 3}).cpu(), adaptive_avg_pool2d(x.cpu, {4, 3}));
    }
  }
}

// ================================================================ convolution (conv.cu)

namespace {

Conv2dParams conv_params(int64_t stride, int64_t pad, int64_t dilation = 1, int64_t groups = 1) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  return p;
}

// conv2d and its two backward passes of x (N, C_in, H, W) and w on both
// devices, outputs poisoned. The values are multiples of 1/4 in [-1, 1]:
// every product and sum is exact in float32, whatever order the GEMMs take;
// the tolerance stays the dtype's for cuDNN's transforms on a real GPU.
void compare_conv(const Shape& xs, const Shape& ws, const Conv2dParams& p, Dtype dt) {
  const int64_t OH = conv_output_size(xs[2], ws[2], p.stride_h, p.pad_h, p.dilation_h);
  const int64_t OW = conv_output_size(xs[3], ws[3], p.stride_w, p.pad_w, p.dilation_w);
  const Shape ys{xs[0], ws[0], OH, OW};
  INFO("conv2d " << dt << ", input " << shape_str(xs) << ", weight " << shape_str(ws) << " -> " << shape_str(ys)
                 << ", stride " << p.stride_h << ", pad " << p.pad_h << ", dilation " << p.dilation_h << ", groups "
                 << p.groups);
  const Laid x = on_both(coarse(xs, dt, 70, -1, 1)), w = on_both(coarse(ws, dt, 71, -1, 1));
  const Laid b = on_both(coarse({ws[0]}, dt, 72, -1, 1)), gy = on_both(coarse(ys, dt, 73, -1, 1));
  const Tensor y_c = poison(ys, dt), y_g = y_c.to(kGpu);
  cpu::conv2d(y_c, x.cpu, w.cpu, b.cpu, p);
  cuda::conv2d(y_g, x.gpu, w.gpu, b.gpu, p);
  check_result(y_g, y_c);
  const Tensor gx_c = poison(xs, dt), gx_g = gx_c.to(kGpu);
  cpu::conv2d_backward_input(gx_c, gy.cpu, w.cpu, p);
  cuda::conv2d_backward_input(gx_g, gy.gpu, w.gpu, p);
  check_result(gx_g, gx_c);
  const Tensor gw_c = poison(ws, dt), gw_g = gw_c.to(kGpu);
  cpu::conv2d_backward_weight(gw_c, gy.cpu, x.cpu, p);
  cuda::conv2d_backward_weight(gw_g, gy.gpu, x.gpu, p);
  check_result(gw_g, gw_c);
}

}  // namespace

TEST_CASE("conv2d: the direct path, im2col and col2im at their grid-stride boundaries", "[gpu][boundaries][conv]") {
  const OneCpuThread cpu_threads;
  for (Dtype dt : kFloats) {
    // 1x1, stride 1, no padding: the input is its own column matrix; with
    // padding or a stride it is not (im2col, col2im).
    compare_conv({2, 3, 5, 7}, {4, 3, 1, 1}, conv_params(1, 0), dt);
    compare_conv({2, 3, 5, 7}, {4, 3, 1, 1}, conv_params(1, 1), dt);
    compare_conv({2, 3, 5, 7}, {4, 3, 1, 1}, conv_params(2, 0), dt);
    // Groups, dilation, stride and padding together.
    compare_conv({2, 4, 9, 11}, {6, 2, 3, 3}, conv_params(2, 1, 2, 2), dt);
    // im2col of one thread a column entry, 256 a block: a 1x1 kernel of
    // stride 2 has N x OH x OW entries, 15 x 17 = 255, 16 x 16 = 256 and
    // 1 x 257.
    for (const Shape& xs : std::vector<Shape>{{1, 1, 29, 33}, {1, 1, 31, 31}, {1, 1, 1, 513}})
      compare_conv(xs, {2, 1, 1, 1}, conv_params(2, 0), dt);
    // col2im of one thread an input element: 255, 256, 257 of them under a
    // padded 1x1 kernel (not the direct path).
    for (const Shape& xs : std::vector<Shape>{{1, 1, 15, 17}, {1, 1, 16, 16}, {1, 1, 1, 257}})
      compare_conv(xs, {2, 1, 1, 1}, conv_params(1, 1), dt);
  }
  // Past the grid-stride cap: cap + 1 column entries and 2 cap + 1 input
  // elements. (The batch's chunks of kColumnBytes, 256 MiB of columns,
  // need more device memory than these runs have.)
  const int64_t cap = grid_stride_cap();
  compare_conv({1, 1, 1, 2 * cap + 1}, {1, 1, 1, 1}, conv_params(2, 0), kFloat32);
  // Non-contiguous operands through the front end.
  for (Dtype dt : kFloats) {
    for (Layout l : kStridedLayouts) {
      const Laid x = lay_out(coarse({2, 3, 8, 9}, dt, 74, -1, 1), l),
                 w = lay_out(coarse({4, 3, 3, 3}, dt, 75, -1, 1), l);
      INFO(dt << ", " << layout_name(l));
      test::check_close(conv2d(x.gpu, w.gpu, {}, 1, 1).cpu(), conv2d(x.cpu, w.cpu, {}, 1, 1));
    }
  }
}

// ================================================================ embedding (embedding.cu)

TEST_CASE("embedding and its backward at the grid-stride boundaries", "[gpu][boundaries][embedding]") {
  const OneCpuThread cpu_threads;
  // One thread a value of the K x D output: one block of 256 as one row or
  // as 256 rows of one value, and the grid-stride cap in rows of one.
  const int64_t cap = grid_stride_cap();
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 255}, {1, 256},     {1, 257}, {255, 1},    {256, 1},
                                                           {257, 1}, {cap - 1, 1}, {cap, 1}, {cap + 1, 1}};
  for (auto [K, D] : shapes) {
    const bool big = K >= cap - 1;
    for (Dtype it : {kInt64, kInt32}) {
      const int64_t num = 37;
      const Laid idx = on_both(indices({K}, num, 80, it));
      // The forward moves elements by size: every dtype.
      for (Dtype dt : test::kAllDtypes) {
        if (big && (it == kInt32 || dt != kFloat32)) continue;
        const Laid w = on_both(values({num, D}, dt, 81));
        INFO(dt << ", " << it << " indices, K " << K << ", D " << D);
        compare_op({K, D}, dt, [&](bool g, const Tensor& out) {
          g ? cuda::embedding(out, w.gpu, idx.gpu) : cpu::embedding(out, w.cpu, idx.cpu);
        });
      }
      // The backward adds rows with atomics: coarse grads, whose sums every
      // order gets exactly (multiples of 1/2 in [-1, 1], a few hundred to a
      // row at most for the 256-row cases, and at the cap, where float32
      // still holds them); scaled by frequency they are not exact, and take
      // the dtype's tolerance.
      for (Dtype dt : kFloats) {
        if (big && (it == kInt32 || dt != kFloat32)) continue;
        const Laid gy = on_both(coarse({K, D}, dt, 82, -1, 1, 2));
        for (int64_t padding : {int64_t{-1}, int64_t{5}}) {
          for (bool scale : {false, true}) {
            INFO(dt << ", " << it << " indices, K " << K << ", D " << D << ", padding_idx " << padding
                    << (scale ? ", scale_grad_by_freq" : ""));
            compare_op(
                {num, D}, dt,
                [&](bool g, const Tensor& gw) {
                  g ? cuda::embedding_backward(gw, gy.gpu, idx.gpu, padding, scale)
                    : cpu::embedding_backward(gw, gy.cpu, idx.cpu, padding, scale);
                },
                scale ? std::nullopt : std::optional<Tolerance>(kExact));
          }
        }
      }
    }
  }
  // Non-contiguous indices and weight through the front end.
  for (Layout l : kStridedLayouts) {
    const Laid w = lay_out(values({37, 6}, kFloat32, 83), l), idx = lay_out(indices({5, 9}, 37, 84), l);
    INFO(layout_name(l));
    check_bits(embedding(w.gpu, idx.gpu), embedding(w.cpu, idx.cpu));
  }
}

// ================================================================ random fills (random.cu)

namespace {

// Distance in units in the last place between two floats of dtype dt, from
// their bit patterns (sign-magnitude mapped onto a line, so -0 == +0).
int64_t max_ulp_distance(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.sizes().vec() == cpu.sizes().vec());
  const std::vector<uint8_t> a = bytes_of(gpu), e = bytes_of(cpu);
  const size_t es = cpu.element_size();
  const int width = static_cast<int>(es * 8);
  auto ord = [width](uint64_t bits) {
    const uint64_t mag = bits & ((uint64_t{1} << (width - 1)) - 1);
    return (bits >> (width - 1)) ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
  };
  int64_t worst = 0;
  for (size_t i = 0; i < a.size(); i += es) {
    uint64_t x = 0, y = 0;
    std::memcpy(&x, &a[i], es);
    std::memcpy(&y, &e[i], es);
    worst = std::max(worst, std::abs(ord(x) - ord(y)));
  }
  return worst;
}

}  // namespace

TEST_CASE("random fills at the Philox counter and grid-stride boundaries", "[gpu][boundaries][random]") {
  const OneCpuThread cpu_threads;
  // tensor/ops/random.h: a counter serves 4 elements of a 32- or 16-bit
  // uniform, 2 of a float64 uniform or of randint, 1 of normal; the kernels
  // run a thread a counter, 256 a block, up to the grid-stride cap. Sizes:
  // a counter's elements from one short to one over, around one block of
  // counters, and around the cap for float32 and int64 (the cap's loop is
  // the same code for every dtype).
  const int64_t cap = grid_stride_cap();
  auto sizes_for = [&](int64_t per_counter, bool at_cap) {
    std::vector<int64_t> s = {per_counter - 1, per_counter, per_counter + 1};
    for (int64_t c : {int64_t{256}, at_cap ? cap : int64_t{0}}) {
      if (c == 0) continue;
      for (int64_t n : {per_counter * c - 1, per_counter * c, per_counter * c + 1}) s.push_back(n);
    }
    return s;
  };
  const PhiloxState st{0x1234ABCDull, 77};
  for (Dtype dt : kFloats) {
    const int64_t per = dt == kFloat64 ? 2 : 4;
    for (int64_t n : sizes_for(per, dt == kFloat32)) {
      if (n == 0) continue;
      INFO("uniform " << dt << ", n " << n);
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::uniform(out, st, -2.5, 3.0) : cpu::uniform(out, st, -2.5, 3.0);
      });
      // The factory reserves ceil(n / per) counters on either device.
      Generator gc(99), gg(99);
      check_bits(rand({n}, gg, TensorOptions(dt).device(kGpu)), rand({n}, gc, dt));
      CHECK(gg.offset() == gc.offset());
      CHECK(gc.offset() == static_cast<uint64_t>((n + per - 1) / per));
    }
  }
  for (Dtype dt : test::kAllDtypes) {
    const int64_t lo = dt == kBool ? 0 : dt == kUInt8 ? 3 : -50, hi = dt == kBool ? 2 : dt == kUInt8 ? 250 : 70;
    for (int64_t n : sizes_for(2, dt == kInt64)) {
      INFO("randint " << dt << " [" << lo << ", " << hi << "), n " << n);
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::randint(out, st, lo, hi) : cpu::randint(out, st, lo, hi);
      });
    }
  }
  // normal: CUDA's double log and cos are within an ulp or two of glibc's,
  // so after rounding to float32 or narrower one step at most, float64 a few
  // ulps (tensor/ops/random.h); the GPU's own numbers are the same bits on
  // every run.
  for (Dtype dt : kFloats) {
    for (int64_t n : sizes_for(1, dt == kFloat32)) {
      if (n == 0) continue;
      INFO("normal " << dt << ", n " << n);
      const Tensor ref = poison({n}, dt), a = poison({n}, dt).to(kGpu), b = poison({n}, dt).to(kGpu);
      cpu::normal(ref, st, 0.5, 3.0);
      cuda::normal(a, st, 0.5, 3.0);
      cuda::normal(b, st, 0.5, 3.0);
      check_bits(a, b.cpu());
      CHECK(max_ulp_distance(a, ref) <= (dt == kFloat64 ? 8 : 1));
    }
  }
  // A strided in-place fill goes through a contiguous temporary.
  for (Layout l : {Layout::Transposed, Layout::Stepped, Layout::Offset}) {
    const Laid x = lay_out(zeros({33, 31}), l);
    Generator gc(5), gg(5);
    Tensor vc = x.cpu, vg = x.gpu;
    uniform_(vc, -1, 1, &gc);
    uniform_(vg, -1, 1, &gg);
    INFO(layout_name(l));
    check_bits(x.gpu_base, x.cpu_base);
  }
}

// ================================================================ ranges (ranges.cu)

TEST_CASE("arange, linspace and eye at the grid-stride boundaries", "[gpu][boundaries][ranges]") {
  const OneCpuThread cpu_threads;
  const Dtype numeric[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8};
  const int64_t cap = grid_stride_cap();
  for (Dtype dt : numeric) {
    const bool wide = dt == kFloat32 || dt == kInt64;  // the cap for these two
    for (int64_t n : grid_stride_sizes()) {
      if (n >= cap - 1 && !wide) continue;
      INFO(dt << ", n " << n);
      // Steps that keep the 16-bit floats in range; uint8 counts from 0 and
      // wraps past 255, as a conversion to it does.
      const Scalar start = dt == kUInt8 ? Scalar(0) : Scalar(-7);
      const Scalar step = is_floating_point(dt) ? Scalar(0.015625) : dt == kUInt8 ? Scalar(1) : Scalar(3);
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::arange(out, start, step) : cpu::arange(out, start, step);
      });
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::linspace(out, Scalar(2), Scalar(200)) : cpu::linspace(out, Scalar(2), Scalar(200));
      });
    }
    // linspace of one step is a copy of start, of two its two ends.
    for (int64_t n : {1, 2}) {
      compare_op({n}, dt, [&](bool g, const Tensor& out) {
        g ? cuda::linspace(out, Scalar(5), Scalar(9)) : cpu::linspace(out, Scalar(5), Scalar(9));
      });
    }
  }
  // eye: a thread a diagonal element, min(n, m) of them.
  for (Dtype dt : test::kAllDtypes) {
    for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{255, 300}, {256, 256}, {300, 257}, {257, 1}}) {
      INFO("eye " << dt << " " << n << "x" << m);
      compare_op({n, m}, dt, [&](bool g, const Tensor& out) { g ? cuda::eye(out) : cpu::eye(out); });
    }
  }
}

// The CUDA GEMM plan (kernels/cuda/gemm_plan.h) run on the CPU: each plan is
// carried out by a host emulation of what cuBLAS does with the arguments (and
// of the packing and integer kernels' indexing), reading the operands'
// storage with bounds checks, and compared with the CPU matmul. So the
// layouts, the packing decisions and the batch split are checked everywhere,
// not only on a GPU.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "helpers.h"
#include "kernels/cuda/gemm_plan.h"

using namespace tandem;
using namespace tandem::cuda;
using test::make;

namespace {

// A tensor's whole storage as float64, with the tensor's offset into it:
// every read goes through at(), so a plan that reads outside is caught.
struct Buffer {
  std::vector<double> data;
  int64_t offset = 0;
  bool out_of_bounds = false;
  double at(int64_t i) {
    int64_t j = offset + i;
    if (j < 0 || j >= static_cast<int64_t>(data.size())) {
      out_of_bounds = true;
      return 0;
    }
    return data[static_cast<size_t>(j)];
  }
};

Buffer buffer_of(const Tensor& t) {
  REQUIRE(t.dtype() == kFloat64);
  REQUIRE(t.is_cpu());
  const double* base = static_cast<const double*>(t.storage()->data());
  Buffer b;
  b.data.assign(base, base + t.storage()->nbytes() / sizeof(double));
  b.offset = t.storage_offset();
  return b;
}

// What cuBLAS computes from the arguments, column-major: C = op(A) @ op(B)
// for each of `count` batches, checking cuBLAS's rules for the lds first.
void emulate_cublas(const CublasGemmArgs& g, Buffer& first, int64_t first_at, Buffer& second, int64_t second_at,
                    std::vector<double>& c, int64_t c_at) {
  CHECK(g.ld_first >= std::max<int64_t>(1, g.trans_first ? g.k : g.m));
  CHECK(g.ld_second >= std::max<int64_t>(1, g.trans_second ? g.n : g.k));
  CHECK(g.ldc >= std::max<int64_t>(1, g.m));
  for (int64_t p = 0; p < g.count; ++p)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < g.k; ++l) {
          int64_t ai = g.trans_first ? l + i * g.ld_first : i + l * g.ld_first;
          int64_t bi = g.trans_second ? j + l * g.ld_second : l + j * g.ld_second;
          s += first.at(first_at + p * g.stride_first + ai) * second.at(second_at + p * g.stride_second + bi);
        }
        size_t ci = static_cast<size_t>(c_at + p * g.stride_c + i + j * g.ldc);
        REQUIRE(ci < c.size());
        c[ci] = s;
      }
}

// What the pack kernel writes: (count, rows, cols) contiguous.
Buffer emulate_pack(Buffer& src, int64_t at, const PackedShape& s, int64_t batch, int64_t rs, int64_t cs) {
  Buffer dst;
  dst.data.resize(static_cast<size_t>(s.numel()));
  for (int64_t p = 0; p < s.count; ++p)
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t j = 0; j < s.cols; ++j)
        dst.data[static_cast<size_t>((p * s.rows + r) * s.cols + j)] = src.at(at + p * batch + r * rs + j * cs);
  return dst;
}

std::vector<int64_t> batch_part(IntArrayRef v) { return std::vector<int64_t>(v.begin(), v.end() - 2); }

GemmPlan plan_of(const Tensor& a, const Tensor& b) {
  int64_t nd = a.dim();
  return plan_gemm(batch_part(a.sizes()), batch_part(a.strides()), batch_part(b.strides()), a.size(nd - 2),
                   b.size(nd - 1), a.size(nd - 1), a.stride(nd - 2), a.stride(nd - 1), b.stride(nd - 2),
                   b.stride(nd - 1));
}

// a: (batch..., M, K), b: (batch..., K, N), float64 cpu views at one batch
// shape. Runs the plan the way linalg.cu's cuBLAS path and its integer path
// do, and checks both against the CPU matmul.
GemmPlan check_plan(const Tensor& a, const Tensor& b) {
  GemmPlan plan = plan_of(a, b);
  std::vector<double> expected = matmul(a, b).contiguous().to_vector<double>();
  Buffer ab = buffer_of(a), bb = buffer_of(b);

  // cuBLAS path: pack where planned, then C^T = B^T A^T per call.
  std::vector<double> c(expected.size(), std::nan(""));
  CublasGemmArgs g = cublas_gemm_args(plan);
  for_each_gemm_call(plan, [&](int64_t ao, int64_t bo, int64_t co) {
    Buffer pa, pb;
    Buffer* first = &bb;
    Buffer* second = &ab;
    int64_t first_at = bo, second_at = ao;
    if (plan.a.pack) {
      pa = emulate_pack(ab, ao, packed_a(plan), plan.a_batch, plan.a_rs, plan.a_cs);
      second = &pa, second_at = 0;
    }
    if (plan.b.pack) {
      pb = emulate_pack(bb, bo, packed_b(plan), plan.b_batch, plan.b_rs, plan.b_cs);
      first = &pb, first_at = 0;
    }
    emulate_cublas(g, *first, first_at, *second, second_at, c, co);
    CHECK_FALSE(pa.out_of_bounds);
    CHECK_FALSE(pb.out_of_bounds);
  });
  CHECK_FALSE(ab.out_of_bounds);
  CHECK_FALSE(bb.out_of_bounds);
  test::check_close(make(c, {static_cast<int64_t>(c.size())}, kFloat64),
                    make(expected, {static_cast<int64_t>(expected.size())}, kFloat64));

  // Integer kernel: raw strides, no packing.
  std::vector<double> ci(expected.size(), std::nan(""));
  for_each_gemm_call(plan, [&](int64_t ao, int64_t bo, int64_t co) {
    for (int64_t z = 0; z < plan.count; ++z)
      for (int64_t i = 0; i < plan.m; ++i)
        for (int64_t j = 0; j < plan.n; ++j) {
          double s = 0;
          for (int64_t l = 0; l < plan.k; ++l)
            s += ab.at(ao + z * plan.a_batch + i * plan.a_rs + l * plan.a_cs) *
                 bb.at(bo + z * plan.b_batch + l * plan.b_rs + j * plan.b_cs);
          size_t at = static_cast<size_t>(co + z * plan.c_batch + i * plan.n + j);
          REQUIRE(at < ci.size());
          ci[at] = s;
        }
  });
  CHECK_FALSE(ab.out_of_bounds);
  CHECK_FALSE(bb.out_of_bounds);
  test::check_close(make(ci, {static_cast<int64_t>(ci.size())}, kFloat64),
                    make(expected, {static_cast<int64_t>(expected.size())}, kFloat64));
  return plan;
}

Tensor values(IntArrayRef shape, double seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.37 * static_cast<double>(i) + seed);
  return test::make(v, shape, kFloat64);
}

}  // namespace

TEST_CASE("gemm plan: operand layouts", "[gemm_plan]") {
  // row-major, its transpose, padded rows, and the forms that need a copy
  CHECK(gemm_operand(3, 4, 4, 1).ld == 4);
  CHECK_FALSE(gemm_operand(3, 4, 4, 1).trans);
  CHECK(gemm_operand(3, 4, 1, 3).trans);
  CHECK(gemm_operand(3, 4, 1, 3).ld == 3);
  CHECK(gemm_operand(3, 4, 9, 1).ld == 9);
  CHECK(gemm_operand(3, 4, 8, 2).pack);  // both strides non-unit
  CHECK(gemm_operand(3, 4, 0, 1).pack);  // expanded rows overlap
  CHECK(gemm_operand(3, 4, 2, 1).pack);  // rows overlap
  // size-1 dims: their stride never matters, the ld is the smallest legal one
  CHECK_FALSE(gemm_operand(1, 4, 0, 1).pack);
  CHECK(gemm_operand(1, 4, 0, 1).ld == 4);
  CHECK_FALSE(gemm_operand(1, 4, 7, 3).pack);
  CHECK(gemm_operand(1, 4, 7, 3).trans);
  CHECK(gemm_operand(1, 4, 7, 3).ld == 3);
  CHECK_FALSE(gemm_operand(5, 1, 1, 0).pack);
  CHECK(gemm_operand(1, 1, 0, 0).ld == 1);
}

TEST_CASE("gemm plan: single products in every layout", "[gemm_plan]") {
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {1, 7, 1}, {1, 5, 9}, {6, 1, 4}, {7, 5, 1}, {7, 9, 5}, {13, 8, 11}}) {
    INFO("M " << M << " K " << K << " N " << N);
    Tensor a = values({M, K}, 1), b = values({K, N}, 2);
    GemmPlan p = check_plan(a, b);
    CHECK(p.count == 1);
    CHECK(p.calls() == 1);
    CHECK_FALSE(p.a.pack);
    CHECK_FALSE(p.b.pack);
    // transposed operands are read in place, with the op flag
    Tensor at = values({K, M}, 3).t(), bt = values({N, K}, 4).t();
    p = check_plan(at, bt);
    CHECK_FALSE(p.a.pack);
    CHECK_FALSE(p.b.pack);
    if (M > 1 && K > 1) CHECK(p.a.trans);
    if (N > 1 && K > 1) CHECK(p.b.trans);
    check_plan(at, b);
    check_plan(a, bt);
    // column slices: rows further apart than their length, still in place
    Tensor as = values({M, K + 3}, 5).narrow(1, 2, K), bs = values({K, N + 2}, 6).narrow(1, 1, N);
    p = check_plan(as, bs);
    CHECK_FALSE(p.a.pack);
    CHECK_FALSE(p.b.pack);
    // every other column and row: both strides non-unit, packed
    Tensor ast = values({2 * M, 2 * K}, 7).slice(0, 0, std::nullopt, 2).slice(1, 1, std::nullopt, 2);
    Tensor bst = values({2 * K, 2 * N}, 8).slice(0, 1, std::nullopt, 2).slice(1, 0, std::nullopt, 2);
    p = check_plan(ast, bst);
    CHECK(p.a.pack == (M > 1 && K > 1));
    CHECK(p.b.pack == (K > 1 && N > 1));
    // expanded rows (stride 0): packed when there is more than one
    Tensor ae = values({1, K}, 9).expand({M, K});
    p = check_plan(ae, b);
    CHECK(p.a.pack == (M > 1));
  }
}

TEST_CASE("gemm plan: batches", "[gemm_plan]") {
  const int64_t B = 5, M = 3, K = 4, N = 6;
  SECTION("contiguous batches: one strided batch") {
    GemmPlan p = check_plan(values({B, M, K}, 1), values({B, K, N}, 2));
    CHECK(p.count == B);
    CHECK(p.calls() == 1);
    CHECK(p.a_batch == M * K);
    CHECK(p.b_batch == K * N);
    CHECK(p.c_batch == M * N);
  }
  SECTION("transposed matrices in the batch: op flags, no copy") {
    GemmPlan p = check_plan(values({B, K, M}, 1).transpose(1, 2), values({B, N, K}, 2).transpose(1, 2));
    CHECK(p.count == B);
    CHECK(p.a.trans);
    CHECK(p.b.trans);
    CHECK_FALSE(p.a.pack);
    CHECK_FALSE(p.b.pack);
  }
  SECTION("b shared by the batch: folded into one GEMM of B*M rows") {
    GemmPlan p = check_plan(values({B, M, K}, 1), values({K, N}, 2).expand({B, K, N}));
    CHECK(p.count == 1);
    CHECK(p.calls() == 1);
    CHECK(p.m == B * M);
    // M = 1: the batch is the rows, at any row stride
    p = check_plan(values({B, 2 * K}, 3).narrow(1, 0, K).unsqueeze(1), values({K, N}, 2).expand({B, K, N}));
    CHECK(p.m == B);
    CHECK(p.count == 1);
  }
  SECTION("b shared, but a's batch does not stack: a strided batch with b's stride 0") {
    GemmPlan p = check_plan(values({B, K, M}, 1).transpose(1, 2), values({K, N}, 2).expand({B, K, N}));
    CHECK(p.count == B);
    CHECK(p.b_batch == 0);
    CHECK_FALSE(p.a.pack);
  }
  SECTION("a stacked column-major would overlap: not folded, no copy") {
    // a (B, M, K) at strides (M, 1, M): each matrix column-major, the batches interleaved
    std::vector<double> storage(static_cast<size_t>(M * (K + B)));
    for (size_t i = 0; i < storage.size(); ++i) storage[i] = 0.1 * static_cast<double>(i) - 1;
    Tensor a = from_blob(storage.data(), {B, M, K}, {M, 1, M}, kFloat64);
    GemmPlan p = check_plan(a, values({K, N}, 2).expand({B, K, N}));
    CHECK(p.count == B);
    CHECK_FALSE(p.a.pack);
  }
  SECTION("a shared by the batch: stride 0") {
    GemmPlan p = check_plan(values({M, K}, 1).expand({B, M, K}), values({B, K, N}, 2));
    CHECK(p.count == B);
    CHECK(p.a_batch == 0);
    CHECK(p.b_batch == K * N);
  }
  SECTION("packed operands in a batch, shared or not") {
    Tensor a = values({2 * M, 2 * K}, 1).slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 2).expand({B, M, K});
    Tensor b = values({B, 2 * K, 3 * N}, 2).slice(1, 1, std::nullopt, 2).slice(2, 2, std::nullopt, 3);
    GemmPlan p = check_plan(a, b);
    CHECK(p.count == B);
    CHECK(p.a.pack);
    CHECK(p.b.pack);
    CHECK(packed_a(p).count == 1);
    CHECK(packed_b(p).count == B);
  }
  SECTION("b shared and a packed: folded, and packed as one matrix") {
    Tensor a = values({B, 2 * M, 2 * K}, 1).slice(1, 0, std::nullopt, 2).slice(2, 0, std::nullopt, 2);
    GemmPlan p = check_plan(a, values({K, N}, 2).expand({B, K, N}));
    CHECK(p.count == 1);
    CHECK(p.m == B * M);
    CHECK(p.a.pack);
  }
  SECTION("batch dims that do not merge: a loop of strided batches over the largest") {
    // (2, 3, M, K) @ (3, K, N) broadcast to (2, 3, K, N)
    GemmPlan p = check_plan(values({2, 3, M, K}, 1), values({3, K, N}, 2).expand({2, 3, K, N}));
    CHECK(p.count == 3);
    CHECK(p.calls() == 2);
    // (3, 1, M, K) @ (1, 4, K, N)
    p = check_plan(values({3, 1, M, K}, 1).expand({3, 4, M, K}), values({1, 4, K, N}, 2).expand({3, 4, K, N}));
    CHECK(p.count == 4);
    CHECK(p.calls() == 3);
    // permuted batch dims, three of them
    Tensor a = values({4, 2, 3, M, K}, 3).permute({1, 0, 2, 3, 4});
    Tensor b = values({2, 4, 3, K, N}, 4);
    p = check_plan(a, b);
    CHECK(p.calls() * p.count == 24);
  }
  SECTION("size-1 batch dims are dropped") {
    GemmPlan p = check_plan(values({1, B, 1, M, K}, 1), values({1, B, 1, K, N}, 2));
    CHECK(p.count == B);
    CHECK(p.calls() == 1);
    p = check_plan(values({1, 1, M, K}, 1), values({1, 1, K, N}, 2));
    CHECK(p.count == 1);
  }
}

TEST_CASE("gemm plan: cuBLAS arguments swap the operands and fit int32 when they can", "[gemm_plan]") {
  GemmPlan p = plan_of(values({4, 3, 5}, 1), values({4, 5, 2}, 2));
  CublasGemmArgs g = cublas_gemm_args(p);
  CHECK(g.m == 2);  // out's columns
  CHECK(g.n == 3);  // out's rows
  CHECK(g.k == 5);
  CHECK(g.ld_first == 2);
  CHECK(g.ld_second == 5);
  CHECK(g.ldc == 2);
  CHECK(g.stride_first == 10);
  CHECK(g.stride_second == 15);
  CHECK(g.stride_c == 6);
  CHECK(g.count == 4);
  CHECK(fits_int32(g));
  g.ld_first = int64_t{1} << 31;
  CHECK_FALSE(fits_int32(g));
}

// CPU elementwise kernels: map each op kind to its functor and run it
// through cpu_kernel.
#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/cpu/loops.h"
#include "kernels/functors/elementwise.h"

namespace tandem::cpu {

namespace {

template <typename T, template <typename> class F, typename... Args>
void run_unary(const Tensor& out, const Tensor& in, Args... args) {
  using M = opmath_t<T>;
  cpu_kernel<T, T>(out, {&in}, F<M>{args...});
}

template <typename T>
std::pair<opmath_t<T>, opmath_t<T>> clamp_bounds(const UnaryParams& p) {
  using M = opmath_t<T>;
  M lo = std::numeric_limits<M>::has_infinity ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::lowest();
  M hi = std::numeric_limits<M>::has_infinity ? std::numeric_limits<M>::infinity() : std::numeric_limits<M>::max();
  if (p.a) lo = p.a->to<M>();
  if (p.b) hi = p.b->to<M>();
  return {lo, hi};
}

// A copy through a transpose (t().contiguous(), copy_ into a transposed
// view) walks one side across its rows: element by element that is a new
// cache line, and often a new page, per element. Instead it goes by tiles of
// kTile x kTile elements, each copied in kBlock x kBlock blocks of fixed size
// whose rows are whole cache lines (for 8-byte types) on both sides, so that
// a line is used up while it is in L1 even when the row strides are powers of
// two and every line of a tile maps to the same cache set.
constexpr int64_t kTile = 64;
constexpr int64_t kBlock = 8;
static_assert(kTile % kBlock == 0, "tiles are made of whole blocks");

// Whether the plan's two innermost dims are contiguous in swapped operands:
// one along the innermost dim, the other along the dim outside it.
template <typename To, typename From>
bool swapped_inner_dims(const ElementwisePlan<2>& p) {
  if (p.ndim < 2) return false;
  const int64_t* inner = p.strides[p.ndim - 1];
  const int64_t* outer = p.strides[p.ndim - 2];
  constexpr int64_t to = sizeof(To), from = sizeof(From);
  return (inner[0] == to && outer[1] == from && inner[1] != from) ||
         (inner[1] == from && outer[0] == to && inner[0] != to);
}

// dst = src over a plan with swapped_inner_dims, tiles shared among threads.
template <typename To, typename From>
void copy_tiles(const ElementwisePlan<2>& p) {
  const int last = p.ndim - 1;
  // Name the two dims so that dst is contiguous along j and src along i:
  // dst(i, j) = dst[i * dst_ld + j], src(i, j) = src[i + j * src_ld].
  const bool dst_inner = p.strides[last][0] == int64_t{sizeof(To)};
  const int di = dst_inner ? last - 1 : last, dj = dst_inner ? last : last - 1;
  const int64_t rows = p.sizes[di], cols = p.sizes[dj];
  // Every byte stride of a tensor is a multiple of its element size.
  const int64_t dst_ld = p.strides[di][0] / int64_t{sizeof(To)}, src_ld = p.strides[dj][1] / int64_t{sizeof(From)};
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t tiles = row_tiles * col_tiles;
  const int64_t matrices = p.numel / (rows * cols);
  const fn::Cast<To> cast{};
  auto convert = [&](From x) { return static_cast<To>(cast(static_cast<opmath_t<From>>(x))); };
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (kTile * kTile));
  parallel_for(0, matrices * tiles, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      // The matrix's offsets over the outer dims, then the tile inside it.
      int64_t m = t / tiles, dst_off = 0, src_off = 0;
      for (int d = last - 2; d >= 0; --d) {
        const int64_t idx = m % p.sizes[d];
        m /= p.sizes[d];
        dst_off += idx * p.strides[d][0];
        src_off += idx * p.strides[d][1];
      }
      To* dst = reinterpret_cast<To*>(p.data[0] + dst_off);
      const From* src = reinterpret_cast<const From*>(p.data[1] + src_off);
      const int64_t i0 = (t % tiles) / col_tiles * kTile, j0 = (t % tiles) % col_tiles * kTile;
      const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
      for (int64_t ib = i0; ib < i1; ib += kBlock) {
        for (int64_t jb = j0; jb < j1; jb += kBlock) {
          To* d = dst + ib * dst_ld + jb;
          const From* s = src + ib + jb * src_ld;
          if (ib + kBlock <= i1 && jb + kBlock <= j1) {
            for (int64_t i = 0; i < kBlock; ++i)
              for (int64_t j = 0; j < kBlock; ++j) d[i * dst_ld + j] = convert(s[i + j * src_ld]);
          } else {
            const int64_t bi = std::min(kBlock, i1 - ib), bj = std::min(kBlock, j1 - jb);
            for (int64_t i = 0; i < bi; ++i)
              for (int64_t j = 0; j < bj; ++j) d[i * dst_ld + j] = convert(s[i + j * src_ld]);
          }
        }
      }
    }
  });
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& params) {
  // Ops defined on every numeric dtype.
  switch (op) {
    case UnaryOp::Neg:
      return dispatch_numeric(out.dtype(), "neg (cpu)", [&]<typename T>() { run_unary<T, fn::Neg>(out, in); });
    case UnaryOp::Abs:
      return dispatch_numeric(out.dtype(), "abs (cpu)", [&]<typename T>() { run_unary<T, fn::Abs>(out, in); });
    case UnaryOp::Relu:
      return dispatch_numeric(out.dtype(), "relu (cpu)", [&]<typename T>() { run_unary<T, fn::Relu>(out, in); });
    case UnaryOp::PowScalar:
      return dispatch_numeric(out.dtype(), "pow (cpu)",
                              [&]<typename T>() { run_unary<T, fn::PowScalar>(out, in, params.a->to<opmath_t<T>>()); });
    case UnaryOp::Clamp:
      return dispatch_numeric(out.dtype(), "clamp (cpu)", [&]<typename T>() {
        auto [lo, hi] = clamp_bounds<T>(params);
        run_unary<T, fn::Clamp>(out, in, lo, hi);
      });
    default: break;
  }
  // Ops defined on floating dtypes only (the front end promotes integers).
  dispatch_floating(out.dtype(), op_name(op), [&]<typename T>() {
    switch (op) {
      case UnaryOp::Exp: return run_unary<T, fn::Exp>(out, in);
      case UnaryOp::Log: return run_unary<T, fn::Log>(out, in);
      case UnaryOp::Log1p: return run_unary<T, fn::Log1p>(out, in);
      case UnaryOp::Sqrt: return run_unary<T, fn::Sqrt>(out, in);
      case UnaryOp::Rsqrt: return run_unary<T, fn::Rsqrt>(out, in);
      case UnaryOp::Sin: return run_unary<T, fn::Sin>(out, in);
      case UnaryOp::Cos: return run_unary<T, fn::Cos>(out, in);
      case UnaryOp::Tanh: return run_unary<T, fn::Tanh>(out, in);
      case UnaryOp::Sigmoid: return run_unary<T, fn::Sigmoid>(out, in);
      case UnaryOp::Gelu: return run_unary<T, fn::Gelu>(out, in);
      case UnaryOp::GeluTanh: return run_unary<T, fn::GeluTanh>(out, in);
      case UnaryOp::Silu: return run_unary<T, fn::Silu>(out, in);
      case UnaryOp::Neg:
      case UnaryOp::Abs:
      case UnaryOp::Relu:
      case UnaryOp::PowScalar:
      case UnaryOp::Clamp: break;  // handled above
    }
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  dispatch_all(a.dtype(), op_name(op), [&]<typename T>() {
    using M = opmath_t<T>;
    switch (op) {
      case BinaryOp::Add: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Add<M>{alpha.to<M>()});
      case BinaryOp::Sub: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Sub<M>{alpha.to<M>()});
      case BinaryOp::Mul: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Mul<M>{});
      case BinaryOp::Div: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Div<M>{});
      case BinaryOp::Pow: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Pow<M>{});
      case BinaryOp::Maximum: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Maximum<M>{});
      case BinaryOp::Minimum: return cpu_kernel<T, T, T>(out, {&a, &b}, fn::Minimum<M>{});
      case BinaryOp::Eq: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Eq<M>{});
      case BinaryOp::Ne: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Ne<M>{});
      case BinaryOp::Lt: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Lt<M>{});
      case BinaryOp::Le: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Le<M>{});
      case BinaryOp::Gt: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Gt<M>{});
      case BinaryOp::Ge: return cpu_kernel<bool, T, T>(out, {&a, &b}, fn::Ge<M>{});
    }
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where (cpu)", [&]<typename T>() {
    cpu_kernel<T, bool, T, T>(out, {&cond, &a, &b}, fn::Where<opmath_t<T>>{});
  });
}

void masked_fill(const Tensor& out, const Tensor& in, const Tensor& mask, const Scalar& value) {
  dispatch_all(out.dtype(), "masked_fill (cpu)", [&]<typename T>() {
    cpu_kernel<T, T, bool>(out, {&in, &mask}, fn::MaskedFill<opmath_t<T>>{value.to<opmath_t<T>>()});
  });
}

void fill(const Tensor& out, const Scalar& value) {
  dispatch_all(out.dtype(), "fill (cpu)", [&]<typename T>() {
    T v = value.to<T>();
    cpu_kernel<T>(out, {}, [v]() { return v; });
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;  // an empty tensor may wrap a null pointer (from_blob)
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  dispatch_all(dst.dtype(), "copy (cpu)", [&]<typename To>() {
    dispatch_all(src.dtype(), "copy (cpu)", [&]<typename From>() {
      const ElementwisePlan<2> plan = make_plan<2>({&dst, &src});
      if (swapped_inner_dims<To, From>(plan)) return copy_tiles<To, From>(plan);
      cpu_kernel<To, From>(plan, fn::Cast<To>{});
    });
  });
}

}  // namespace tandem::cpu

// CPU elementwise kernels: each op kind's functor (kernels/functors/visit.h)
// run through cpu_kernel.
#include "kernels/elementwise.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cpu/loops.h"
#include "kernels/functors/elementwise.h"
#include "kernels/functors/visit.h"

namespace tandem::cpu {

namespace {

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
  if (is_numeric_unary(op)) {
    // The dtype error names the backend, e.g. "pow (cpu) is not implemented for dtype bool".
    const std::string name = std::string(op_name(op)) + " (cpu)";
    return dispatch_numeric(out.dtype(), name.c_str(), [&]<typename T>() {
      fn::visit_numeric_unary<opmath_t<T>>(op, params, [&](auto f) { cpu_kernel<T, T>(out, {&in}, f); });
    });
  }
  // The front end promotes integer inputs of these to float32.
  dispatch_floating(out.dtype(), op_name(op), [&]<typename T>() {
    fn::visit_floating_unary<opmath_t<T>>(op, params, [&](auto f) { cpu_kernel<T, T>(out, {&in}, f); });
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
            const UnaryParams& params) {
  dispatch_all(a.dtype(), op_name(op), [&]<typename T>() {
    using M = opmath_t<T>;
    if (is_comparison(op))
      return fn::visit_comparison<M>(op, [&](auto f) { cpu_kernel<bool, T, T>(out, {&a, &b}, f); });
    fn::visit_arithmetic<M>(op, alpha, params, [&](auto f) { cpu_kernel<T, T, T>(out, {&a, &b}, f); });
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

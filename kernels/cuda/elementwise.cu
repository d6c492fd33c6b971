// CUDA elementwise kernels: each op kind mapped to its functor in
// kernels/functors/elementwise.h, as kernels/cpu/elementwise.cpp does, and
// run through gpu_kernel. Copies and conversions are in copy.cu.
#include <cstring>
#include <limits>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/loops.cuh"
#include "kernels/functors/elementwise.h"

namespace tandem::gpu {

namespace {

template <typename T, template <typename> class F, typename... Args>
void run_unary(const Tensor& out, const Tensor& in, Args... args) {
  using M = opmath_t<T>;
  gpu_kernel<T, T>(out, {&in}, F<M>{args...});
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

// Whether every byte of v is zero (so that memset can fill with it).
template <typename T>
bool all_zero_bytes(const T& v) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  for (unsigned char b : bytes)
    if (b != 0) return false;
  return true;
}

// The six comparisons share one kernel per dtype, which halves what binary
// compiles: the op is a kernel argument, the same for every thread, and each
// branch is the CPU's functor.
template <typename M>
struct Compare {
  BinaryOp op;
  TANDEM_HD_INLINE bool operator()(M a, M b) const {
    switch (op) {
      case BinaryOp::Eq: return fn::Eq<M>{}(a, b);
      case BinaryOp::Ne: return fn::Ne<M>{}(a, b);
      case BinaryOp::Lt: return fn::Lt<M>{}(a, b);
      case BinaryOp::Le: return fn::Le<M>{}(a, b);
      case BinaryOp::Gt: return fn::Gt<M>{}(a, b);
      default: return fn::Ge<M>{}(a, b);
    }
  }
};

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& params) {
  // Ops defined on every numeric dtype.
  switch (op) {
    case UnaryOp::Neg:
      return dispatch_numeric(out.dtype(), "neg (cuda)", [&]<typename T>() { run_unary<T, fn::Neg>(out, in); });
    case UnaryOp::Abs:
      return dispatch_numeric(out.dtype(), "abs (cuda)", [&]<typename T>() { run_unary<T, fn::Abs>(out, in); });
    case UnaryOp::Relu:
      return dispatch_numeric(out.dtype(), "relu (cuda)", [&]<typename T>() { run_unary<T, fn::Relu>(out, in); });
    case UnaryOp::PowScalar:
      return dispatch_numeric(out.dtype(), "pow (cuda)",
                              [&]<typename T>() { run_unary<T, fn::PowScalar>(out, in, params.a->to<opmath_t<T>>()); });
    case UnaryOp::Clamp:
      return dispatch_numeric(out.dtype(), "clamp (cuda)", [&]<typename T>() {
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
      case BinaryOp::Add: return gpu_kernel<T, T, T>(out, {&a, &b}, fn::Add<M>{alpha.to<M>()});
      case BinaryOp::Sub: return gpu_kernel<T, T, T>(out, {&a, &b}, fn::Sub<M>{alpha.to<M>()});
      case BinaryOp::Mul: return gpu_kernel<T, T, T>(out, {&a, &b}, fn::Mul<M>{});
      case BinaryOp::Div: return gpu_kernel<T, T, T>(out, {&a, &b}, fn::Div<M>{});
      case BinaryOp::Pow: return gpu_kernel<T, T, T>(out, {&a, &b}, fn::Pow<M>{});
      case BinaryOp::Maximum: return gpu_kernel<T, T, T>(out, {&a, &b}, fn::Maximum<M>{});
      case BinaryOp::Minimum: return gpu_kernel<T, T, T>(out, {&a, &b}, fn::Minimum<M>{});
      case BinaryOp::Eq:
      case BinaryOp::Ne:
      case BinaryOp::Lt:
      case BinaryOp::Le:
      case BinaryOp::Gt:
      case BinaryOp::Ge: return gpu_kernel<bool, T, T>(out, {&a, &b}, Compare<M>{op});
    }
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where (cuda)", [&]<typename T>() {
    gpu_kernel<T, bool, T, T>(out, {&cond, &a, &b}, fn::Where<opmath_t<T>>{});
  });
}

void masked_fill(const Tensor& out, const Tensor& in, const Tensor& mask, const Scalar& value) {
  dispatch_all(out.dtype(), "masked_fill (cuda)", [&]<typename T>() {
    gpu_kernel<T, T, bool>(out, {&in, &mask}, fn::MaskedFill<opmath_t<T>>{value.to<opmath_t<T>>()});
  });
}

void fill(const Tensor& out, const Scalar& value) {
  if (out.numel() == 0) return;
  dispatch_all(out.dtype(), "fill (cuda)", [&]<typename T>() {
    // The value rounded to T as the CPU's fill does, then widened exactly.
    const T v = value.to<T>();
    if (out.is_contiguous() && (sizeof(T) == 1 || all_zero_bytes(v))) {
      DeviceGuard guard(out.device().index());
      unsigned char byte;
      std::memcpy(&byte, &v, 1);
      TANDEM_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), byte, out.nbytes(), stream_of(out)));
      return;
    }
    gpu_kernel<T>(out, {}, fn::Fill<opmath_t<T>>{static_cast<opmath_t<T>>(v)});
  });
}

}  // namespace tandem::gpu

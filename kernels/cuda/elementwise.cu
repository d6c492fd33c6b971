// CUDA elementwise kernels: each op kind's functor (kernels/functors/visit.h,
// as for the cpu) run through gpu_kernel. Copies and conversions are in copy.cu.
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cuda/loops.cuh"
#include "kernels/elementwise.h"
#include "kernels/functors/elementwise.h"
#include "kernels/functors/visit.h"

namespace tandem::cuda {

namespace {

// Whether every byte of v is zero (so that memset can fill with it).
template <typename T>
bool all_zero_bytes(const T& v) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  for (unsigned char b : bytes)
    if (b != 0) return false;
  return true;
}

}  // namespace

// Each group of ops is one op set (kernels/functors/visit.h): one kernel
// per dtype and group, the op chosen once per thread.
void unary(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& params) {
  if (is_numeric_unary(op)) {
    // The dtype error names the backend, e.g. "pow (cuda) is not implemented for dtype bool".
    const std::string name = std::string(op_name(op)) + " (cuda)";
    return dispatch_numeric(out.dtype(), name.c_str(), [&]<typename T>() {
      gpu_kernel<T, T>(out, {&in}, fn::NumericUnaryOps<opmath_t<T>>::make(op, params));
    });
  }
  // The front end promotes integer inputs of these to float32.
  dispatch_floating(out.dtype(), op_name(op), [&]<typename T>() {
    gpu_kernel<T, T>(out, {&in}, fn::FloatingUnaryOps<opmath_t<T>>::make(op, params));
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
            const UnaryParams& params) {
  dispatch_all(a.dtype(), op_name(op), [&]<typename T>() {
    using M = opmath_t<T>;
    // The six comparisons are one functor, the op a branch per element
    // (each is one instruction).
    if (is_comparison(op)) return gpu_kernel<bool, T, T>(out, {&a, &b}, fn::Compare<M>{op});
    if constexpr (std::is_floating_point_v<M>) {
      if (is_activation_backward(op))
        return gpu_kernel<T, T, T>(out, {&a, &b}, fn::ActivationBackward<M>::make(op, params));
    }
    gpu_kernel<T, T, T>(out, {&a, &b}, fn::ArithmeticOps<M>::make(op, alpha));
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

}  // namespace tandem::cuda

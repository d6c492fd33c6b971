// Elementwise ops: unary math, binary arithmetic and comparisons with
// broadcasting and PyTorch's type promotion, where, clamp, and the C++
// operators. Each also exists as a Tensor member (tensor.h).
#pragma once

#include <optional>
#include <string>

#include "tensor/core/op_table.h"
#include "tensor/core/tensor.h"

namespace tandem {

namespace detail {
// The op table's unary ops (tensor/core/op_table.h) out of place and in
// place: checks, dtype (compute, else the input's, or float32 for a
// floating-only op on integers), the kernel, and the autograd node.
Tensor unary_op(UnaryOp op, const Tensor& x, const UnaryParams& params = {}, std::optional<Dtype> compute = {});
Tensor& unary_inplace(UnaryOp op, Tensor& x, const UnaryParams& params = {}, std::optional<Dtype> compute = {});
}  // namespace detail

// torch.result_type for two tensors / a tensor and a scalar: dimensioned
// tensors outrank 0-dim tensors, which outrank scalars, within a category
// (bool < integer < floating).
Dtype result_type(const Tensor& a, const Tensor& b);
Dtype result_type(const Tensor& a, const Scalar& b);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
// x > 0 ? x : negative_slope * x, as torch.nn.functional.leaky_relu.
inline Tensor leaky_relu(const Tensor& x, const Scalar& negative_slope = 0.01) {
  return detail::unary_op(UnaryOp::LeakyRelu, x, LeakyReluParams{negative_slope.to_double()});
}
inline Tensor& leaky_relu_(Tensor& x, const Scalar& negative_slope = 0.01) {
  return detail::unary_inplace(UnaryOp::LeakyRelu, x, LeakyReluParams{negative_slope.to_double()});
}
// x > 0 ? scale * x : scale * alpha * (exp(input_scale * x) - 1), as torch.elu.
inline Tensor elu(const Tensor& x, const Scalar& alpha = 1, const Scalar& scale = 1, const Scalar& input_scale = 1) {
  return detail::unary_op(UnaryOp::Elu, x, EluParams{alpha.to_double(), scale.to_double(), input_scale.to_double()});
}
inline Tensor& elu_(Tensor& x, const Scalar& alpha = 1, const Scalar& scale = 1, const Scalar& input_scale = 1) {
  return detail::unary_inplace(UnaryOp::Elu, x,
                               EluParams{alpha.to_double(), scale.to_double(), input_scale.to_double()});
}
// log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold, as
// torch.nn.functional.softplus.
inline Tensor softplus(const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20) {
  return detail::unary_op(UnaryOp::Softplus, x, SoftplusParams{beta.to_double(), threshold.to_double()});
}
Tensor pow(const Tensor& x, const Scalar& exponent);
Tensor pow(const Tensor& x, const Tensor& exponent);
Tensor pow(const Scalar& x, const Tensor& exponent);

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give float32
Tensor div(const Tensor& a, const Scalar& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);

// cond ? a : b, broadcasting all three; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);
// x where mask is false, value where it is true. Out of place, x and the
// bool mask broadcast together; in place (masked_fill_), mask must broadcast
// to x. value converts as in torch: truncated for integers, overflow is an
// error.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);

// C++ operators, as libtorch's.
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Scalar& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Scalar& b);

namespace detail {
// A 0-dim tensor holding s on device, of dtype, as ops use for scalar operands.
Tensor scalar_tensor(const Scalar& s, Dtype dtype, Device device);
// Throws if writing into t would write some element twice (expanded views).
void check_writable(const Tensor& t, const char* op);

// The activations' derivatives, each one pass over memory: grad_output times
// the activation's derivative, from its output (relu, tanh, sigmoid) or its
// input (gelu, silu). For autograd's rules when they do not record; they
// record nothing, so they refuse inputs that require grad in grad mode.
// grad_output and output/self: one shape, device and floating dtype.
// relu_backward gives 0 where output <= 0 or is NaN (PyTorch's
// threshold_backward passes grad_output at NaN).
Tensor relu_backward(const Tensor& grad_output, const Tensor& output);
Tensor tanh_backward(const Tensor& grad_output, const Tensor& output);
Tensor sigmoid_backward(const Tensor& grad_output, const Tensor& output);
Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, const std::string& approximate = "none");
Tensor silu_backward(const Tensor& grad_output, const Tensor& self);
// Any activation backward of the op table (is_activation_backward(op)), its
// forward's params; the saved tensor is the forward's output or input as the
// table says.
Tensor activation_backward(BinaryOp op, const Tensor& grad_output, const Tensor& saved, const UnaryParams& params = {});
}  // namespace detail

}  // namespace tandem

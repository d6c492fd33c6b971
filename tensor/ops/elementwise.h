// Elementwise ops: unary math, binary arithmetic and comparisons with
// broadcasting and PyTorch's type promotion, where, clamp, and the C++
// operators. Each also exists as a Tensor member (tensor.h).
#pragma once

#include <optional>
#include <string>

#include "tensor/core/tensor.h"

namespace tandem {

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
}  // namespace detail

}  // namespace tandem

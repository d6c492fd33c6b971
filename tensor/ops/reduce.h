// Reductions with PyTorch's semantics: sum, mean, prod, max/min (whole tensor
// or along a dim with indices), amax/amin, argmax/argmin, var/std, norm,
// logsumexp, and softmax/log_softmax. Each also exists as a Tensor member.
// dims may be negative; an empty dims list means every dim; keepdim keeps
// the reduced dims with size 1.
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>

#include "tensor/core/tensor.h"

namespace tandem {

// Integer and bool inputs sum (and multiply) to int64 unless dtype is given;
// the input is converted to dtype first. float16/bfloat16 accumulate in
// float32. A sum over nothing is 0, a product over nothing 1.
Tensor sum(const Tensor& x, std::optional<Dtype> dtype = std::nullopt);
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim = false, std::optional<Dtype> dtype = std::nullopt);
Tensor prod(const Tensor& x, std::optional<Dtype> dtype = std::nullopt);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false, std::optional<Dtype> dtype = std::nullopt);
// Floating inputs (or a floating dtype) only; the mean of nothing is NaN.
Tensor mean(const Tensor& x, std::optional<Dtype> dtype = std::nullopt);
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim = false, std::optional<Dtype> dtype = std::nullopt);

// The largest / smallest element as a 0-dim tensor; NaN propagates.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// (values, indices) along dim; indices are int64, the first occurrence on
// ties, and a NaN wins with its index.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
// Without dim: the index into the flattened tensor.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// Sum of squared deviations / (N - correction); inf or NaN when N - correction
// <= 0. Floating inputs only.
Tensor var(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false);
// Vector p-norm over dims: p = 2, 1, 0 (count of non-zeros), inf, -inf or any
// other real. Floating inputs only.
Tensor norm(const Tensor& x, const Scalar& p = 2, IntArrayRef dims = {}, bool keepdim = false);
// log(sum(exp(x))) over dims, computed without overflow; integers give float32.
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false);

// exp(x) / sum(exp(x)) along dim, stable (the max is subtracted first). The
// input is converted to dtype first when given; integers need a dtype.
Tensor softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype = std::nullopt);

namespace detail {
// The gradient of softmax (log = false) or log_softmax (log = true) along
// dim in one pass, from the forward's output and the gradient grad flowing
// into it (PyTorch's _softmax_backward_data / _log_softmax_backward_data):
//   softmax:     output * (grad - (grad * output).sum(dim, true))
//   log_softmax: grad - exp(output) * grad.sum(dim, true)
// grad and output: one shape, device and floating dtype, any strides; the
// result is contiguous, of that dtype. 16-bit floats accumulate in float32.
// It records no graph node, so it refuses an input that requires grad while
// grad mode is on: autograd calls it only when it does not record.
Tensor softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim, bool log);
}  // namespace detail

}  // namespace tandem

// Front end of batch_norm, layer_norm and embedding and of their fused
// backward ops: PyTorch's checks (in its words, then the fix), the
// statistics' dtype, allocation, the backend switch, and the autograd record.
//
// Node layouts (autograd/rules_norm.cpp reads them; the payloads are in
// tensor/core/node_params.h):
//   BatchNorm: inputs {input, weight, bias}; saved {input, weight, mean, invstd};
//              BatchNormParams {training, eps}
//   LayerNorm: inputs {input, weight, bias}; saved {input, weight, mean, invstd};
//              LayerNormParams {normalized_shape, eps}
//   Embedding: inputs {weight}; saved {indices};
//              EmbeddingParams {num_weights, padding_idx (wrapped), scale_grad_by_freq}
#include "tensor/ops/norm.h"

#include <string>
#include <vector>

#include "kernels/embedding.h"
#include "kernels/norm.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/node_params.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/shape_ops.h"

namespace tandem {

namespace {

using autograd::GradOp;
using autograd::Recorder;

bool is_16bit(Dtype d) { return d == kFloat16 || d == kBFloat16; }

// The dtype of the statistics and of the parameters as the kernels take
// them: float32 for 16-bit inputs, else the input's.
Dtype stats_dtype(Dtype input) { return is_16bit(input) ? kFloat32 : input; }

// t as a contiguous tensor of dtype (itself when it already is one).
Tensor as_contiguous(const Tensor& t, Dtype dtype) { return t.defined() ? t.to(dtype).contiguous() : t; }

void check_floating_input(const char* op, const char* kernel, const Tensor& input) {
  TANDEM_CHECK(input.is_floating_point(), DtypeError, "\"", kernel, "\" not implemented for '",
               torch_scalar_name(input.dtype()), "': ", op, "() needs a floating input (float32, float64, float16 or ",
               "bfloat16), but got ", input.dtype(), "; convert it first, e.g. input.to(kFloat32)");
}

// A parameter (weight, bias, running statistics) takes the input's dtype,
// or float32 beside a 16-bit input.
void check_param_dtype(const char* op, const char* name, const Tensor& p, const Tensor& input) {
  if (!p.defined() || p.dtype() == input.dtype() || (is_16bit(input.dtype()) && p.dtype() == kFloat32)) return;
  TANDEM_CHECK(false, DtypeError, op, "(): expected ", name, " to have the input's dtype ", input.dtype(),
               is_16bit(input.dtype()) ? " (or float32)" : "", ", but got ", p.dtype(),
               "; convert one of them, e.g. input.to(", p.dtype(), ") or, for a module, module->to(", input.dtype(),
               ")");
}

// The fused backward ops record nothing: they refuse to run where a graph
// would be expected of them.
void check_not_recording(const char* op, std::initializer_list<NamedTensor> args, const char* composite) {
  if (!GradMode::is_enabled()) return;
  for (const auto& a : args)
    TANDEM_CHECK(!a.tensor.defined() || !a.tensor.requires_grad(), ValueError, op,
                 "(): records no graph, but grad mode is on and ", a.name,
                 " requires grad; call it inside a NoGradGuard, or differentiate ", composite,
                 " itself (autograd::grad with create_graph=true)");
}

// The gradient of a parameter in the parameter's dtype (the kernels give
// the statistics' dtype).
Tensor to_param_dtype(const Tensor& grad, const Tensor& param) {
  return grad.defined() && param.defined() ? grad.to(param.dtype()) : grad;
}

}  // namespace

// ---------------------------------------------------------------- batch_norm
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  check_defined(op, {{"input", input}});
  // The parameters first: a wrong-device input is then told to move.
  check_same_device(op, {{"weight", weight},
                         {"bias", bias},
                         {"running_mean", running_mean},
                         {"running_var", running_var},
                         {"input", input}});
  TANDEM_CHECK(input.dim() >= 2, ShapeError, "batch_norm(): expected an input of shape (N, C) or (N, C, *), ",
               "but got a ", input.dim(), "-D input of shape ", shape_str(input.sizes()),
               "; add the batch dim, e.g. input.unsqueeze(0)");
  check_floating_input(op, "batch_norm", input);
  const int64_t C = input.size(1);
  for (const NamedTensor& p : {NamedTensor{"running_mean", running_mean}, NamedTensor{"running_var", running_var},
                               NamedTensor{"weight", weight}, NamedTensor{"bias", bias}}) {
    if (!p.tensor.defined()) continue;
    TANDEM_CHECK(p.tensor.numel() == C, ShapeError, p.name, " should contain ", C, " elements not ", p.tensor.numel(),
                 " (batch_norm: one per channel, the input's size(1); input shape ", shape_str(input.sizes()), ")");
    check_param_dtype(op, p.name, p.tensor, input);
  }
  if (!training) {
    TANDEM_CHECK(running_mean.defined(), ValueError,
                 "running_mean must be defined in evaluation mode (batch_norm with training=false normalises with "
                 "the running statistics; pass them, or training=true to use the batch's)");
    TANDEM_CHECK(running_var.defined(), ValueError,
                 "running_var must be defined in evaluation mode (batch_norm with training=false normalises with "
                 "the running statistics; pass them, or training=true to use the batch's)");
  } else {
    TANDEM_CHECK(input.numel() / std::max<int64_t>(C, 1) != 1 || C == 0, ValueError,
                 "Expected more than 1 value per channel when training, got input size ", shape_str(input.sizes()),
                 " (the variance of one value is undefined; use a batch of 2 or more, or eval mode)");
  }

  Recorder rec(GradOp::BatchNorm, {input, weight, bias});
  const Device device = input.device();
  const Dtype M = stats_dtype(input.dtype());
  const Origin origin = Origin::computed(op, input.origin());
  const Tensor in = input.contiguous();
  const Tensor w = as_contiguous(weight, M), b = as_contiguous(bias, M);
  // The kernels update the running statistics in place: a contiguous
  // statistics-dtype tensor is passed as it is, another one by a copy that
  // is copied back.
  const Tensor rm = as_contiguous(running_mean, M), rv = as_contiguous(running_var, M);
  Tensor out = detail::make_result(input.sizes(), input.dtype(), device, origin);
  Tensor mean = detail::make_result({C}, M, device, origin);
  Tensor invstd = detail::make_result({C}, M, device, origin);
  dispatch(device, cpu::batch_norm, cuda::batch_norm, out, mean, invstd, in, w, b, rm, rv, training, momentum, eps);
  if (training && input.numel() > 0) {
    NoGradGuard no_grad;
    for (const auto& [stat, written] : {std::pair{running_mean, rm}, std::pair{running_var, rv}}) {
      if (!stat.defined()) continue;
      if (written.is_same(stat))
        stat.storage()->bump_version();
      else
        Tensor(stat).copy_(written);
    }
  }
  if (rec) {
    rec.save(input);
    rec.save(weight);
    rec.save(mean);
    rec.save(invstd);
    rec.node().payload = autograd::BatchNormParams{training, eps};
  }
  return rec.finish(out);
}

std::tuple<Tensor, Tensor, Tensor> detail::batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                               const Tensor& weight, const Tensor& mean,
                                                               const Tensor& invstd, bool training,
                                                               std::array<bool, 3> output_mask) {
  const char* op = "batch_norm_backward";
  check_defined(op, {{"grad_out", grad_out}, {"input", input}, {"mean", mean}, {"invstd", invstd}});
  check_same_device(op,
                    {{"input", input}, {"grad_out", grad_out}, {"weight", weight}, {"mean", mean}, {"invstd", invstd}});
  TANDEM_CHECK(input.dim() >= 2, ShapeError, op, "(): expected an input of shape (N, C, *), but got ",
               shape_str(input.sizes()));
  TANDEM_CHECK(grad_out.sizes() == input.sizes(), ShapeError, op, "(): expected grad_out of the input's shape ",
               shape_str(input.sizes()), ", but got ", shape_str(grad_out.sizes()));
  check_floating_input(op, "batch_norm_backward", input);
  TANDEM_CHECK(grad_out.dtype() == input.dtype(), DtypeError, op, "(): expected grad_out of the input's dtype ",
               input.dtype(), ", but got ", grad_out.dtype(), "; convert it first, e.g. grad_out.to(input.dtype())");
  const int64_t C = input.size(1);
  const Dtype M = stats_dtype(input.dtype());
  for (const NamedTensor& s : {NamedTensor{"mean", mean}, NamedTensor{"invstd", invstd}}) {
    TANDEM_CHECK(s.tensor.numel() == C && s.tensor.dtype() == M, ShapeError, op, "(): expected ", s.name, " of ", C,
                 " values of dtype ", M, " (the forward's statistics), but got shape ", shape_str(s.tensor.sizes()),
                 " of dtype ", s.tensor.dtype());
  }
  if (weight.defined()) {
    TANDEM_CHECK(weight.numel() == C, ShapeError, "weight should contain ", C, " elements not ", weight.numel());
    check_param_dtype(op, "weight", weight, input);
  }
  check_not_recording(op, {{"grad_out", grad_out}, {"input", input}, {"weight", weight}}, "batch_norm");

  const Device device = input.device();
  const Origin origin = Origin::computed(op, grad_out.origin());
  const Tensor g = grad_out.contiguous(), x = input.contiguous();
  const Tensor w = as_contiguous(weight, M), mu = as_contiguous(mean, M), is = as_contiguous(invstd, M);
  Tensor grad_input = output_mask[0] ? detail::make_result(input.sizes(), input.dtype(), device, origin) : Tensor();
  Tensor grad_weight = output_mask[1] ? detail::make_result({C}, M, device, origin) : Tensor();
  Tensor grad_bias = output_mask[2] ? detail::make_result({C}, M, device, origin) : Tensor();
  dispatch(device, cpu::batch_norm_backward, cuda::batch_norm_backward, grad_input, grad_weight, grad_bias, g, x, w, mu,
           is, training);
  return {grad_input, to_param_dtype(grad_weight, weight), to_param_dtype(grad_bias, weight)};
}

// ---------------------------------------------------------------- layer_norm
namespace {

// rows = the product of input's leading sizes; checks normalized_shape
// against input's trailing sizes and the parameters' shapes.
int64_t check_layer_norm(const char* op, const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                         const Tensor& bias) {
  const auto k = static_cast<int64_t>(normalized_shape.size());
  TANDEM_CHECK(k >= 1, ShapeError,
               "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got "
               "normalized_shape = []; pass the trailing sizes to normalise over, e.g. {input.size(-1)}");
  bool fits = input.dim() >= k;
  for (int64_t i = 0; fits && i < k; ++i) fits = input.size(input.dim() - k + i) == normalized_shape[i];
  TANDEM_CHECK(fits, ShapeError, "Given normalized_shape=", shape_str(normalized_shape),
               ", expected input with shape [*, ", shape_str(normalized_shape).substr(1), ", but got input of size",
               shape_str(input.sizes()), " (", op, " normalises over the input's last ", k, " dims)");
  for (const NamedTensor& p : {NamedTensor{"weight", weight}, NamedTensor{"bias", bias}}) {
    if (!p.tensor.defined()) continue;
    TANDEM_CHECK(p.tensor.sizes() == normalized_shape, ShapeError, "Expected ", p.name,
                 " to be of same shape as normalized_shape, but got ", p.name, " of shape ",
                 shape_str(p.tensor.sizes()), " and normalized_shape = ", shape_str(normalized_shape));
    check_param_dtype(op, p.name, p.tensor, input);
  }
  int64_t rows = 1;
  for (int64_t d = 0; d < input.dim() - k; ++d) rows *= input.size(d);
  return rows;
}

}  // namespace

Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const char* op = "layer_norm";
  if (auto in = autocast::detail::inputs(op, {input, weight, bias}))
    return autocast::detail::excluded([&] { return layer_norm((*in)[0], normalized_shape, (*in)[1], (*in)[2], eps); });
  check_defined(op, {{"input", input}});
  check_same_device(op, {{"weight", weight}, {"bias", bias}, {"input", input}});
  check_floating_input(op, "LayerNormKernelImpl", input);
  const int64_t rows = check_layer_norm(op, input, normalized_shape, weight, bias);

  Recorder rec(GradOp::LayerNorm, {input, weight, bias});
  const Device device = input.device();
  const Dtype M = stats_dtype(input.dtype());
  const Origin origin = Origin::computed(op, input.origin());
  const Tensor in = input.contiguous();
  const Tensor w = as_contiguous(weight, M), b = as_contiguous(bias, M);
  Tensor out = detail::make_result(input.sizes(), input.dtype(), device, origin);
  Tensor mean = detail::make_result({rows}, M, device, origin);
  Tensor invstd = detail::make_result({rows}, M, device, origin);
  dispatch(device, cpu::layer_norm, cuda::layer_norm, out, mean, invstd, in, w, b, eps);
  if (rec) {
    rec.save(input);
    rec.save(weight);
    rec.save(mean);
    rec.save(invstd);
    rec.node().payload = autograd::LayerNormParams{normalized_shape.vec(), eps};
  }
  return rec.finish(out);
}

std::tuple<Tensor, Tensor, Tensor> detail::layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                               IntArrayRef normalized_shape, const Tensor& weight,
                                                               const Tensor& mean, const Tensor& invstd,
                                                               std::array<bool, 3> output_mask) {
  const char* op = "layer_norm_backward";
  check_defined(op, {{"grad_out", grad_out}, {"input", input}, {"mean", mean}, {"invstd", invstd}});
  check_same_device(op,
                    {{"input", input}, {"grad_out", grad_out}, {"weight", weight}, {"mean", mean}, {"invstd", invstd}});
  check_floating_input(op, "layer_norm_backward", input);
  const int64_t rows = check_layer_norm(op, input, normalized_shape, weight, {});
  TANDEM_CHECK(grad_out.sizes() == input.sizes(), ShapeError, op, "(): expected grad_out of the input's shape ",
               shape_str(input.sizes()), ", but got ", shape_str(grad_out.sizes()));
  TANDEM_CHECK(grad_out.dtype() == input.dtype(), DtypeError, op, "(): expected grad_out of the input's dtype ",
               input.dtype(), ", but got ", grad_out.dtype(), "; convert it first, e.g. grad_out.to(input.dtype())");
  const Dtype M = stats_dtype(input.dtype());
  for (const NamedTensor& s : {NamedTensor{"mean", mean}, NamedTensor{"invstd", invstd}}) {
    TANDEM_CHECK(s.tensor.numel() == rows && s.tensor.dtype() == M, ShapeError, op, "(): expected ", s.name, " of ",
                 rows, " values (one per row) of dtype ", M, " (the forward's statistics), but got shape ",
                 shape_str(s.tensor.sizes()), " of dtype ", s.tensor.dtype());
  }
  check_not_recording(op, {{"grad_out", grad_out}, {"input", input}, {"weight", weight}}, "layer_norm");

  const Device device = input.device();
  const Origin origin = Origin::computed(op, grad_out.origin());
  const Tensor g = grad_out.contiguous(), x = input.contiguous();
  const Tensor w = as_contiguous(weight, M), mu = as_contiguous(mean, M), is = as_contiguous(invstd, M);
  Tensor grad_input = output_mask[0] ? detail::make_result(input.sizes(), input.dtype(), device, origin) : Tensor();
  Tensor grad_weight = output_mask[1] ? detail::make_result(normalized_shape, M, device, origin) : Tensor();
  Tensor grad_bias = output_mask[2] ? detail::make_result(normalized_shape, M, device, origin) : Tensor();
  dispatch(device, cpu::layer_norm_backward, cuda::layer_norm_backward, grad_input, grad_weight, grad_bias, g, x, w, mu,
           is);
  return {grad_input, to_param_dtype(grad_weight, weight), to_param_dtype(grad_bias, weight)};
}

// ---------------------------------------------------------------- embedding
namespace {

void check_indices_dtype(const char* op, const Tensor& indices) {
  TANDEM_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, DtypeError,
               "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but "
               "got ",
               indices.dtype(), " instead (while checking arguments for ", op,
               "); convert the indices first, e.g. indices.to(kInt64)");
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx,
                 bool scale_grad_by_freq) {
  const char* op = "embedding";
  check_defined(op, {{"weight", weight}, {"indices", indices}});
  check_same_device(op, {{"weight", weight}, {"indices", indices}});
  TANDEM_CHECK(weight.dim() == 2, ShapeError, "'weight' must be 2-D (num_embeddings, embedding_dim), but got shape ",
               shape_str(weight.sizes()));
  check_indices_dtype(op, indices);
  const int64_t num = weight.size(0), D = weight.size(1);
  std::optional<int64_t> pad;  // padding_idx, wrapped
  if (padding_idx) {
    pad = *padding_idx < 0 ? *padding_idx + num : *padding_idx;
    TANDEM_CHECK(*pad >= 0 && *pad < num, ValueError, "Padding_idx must be within num_embeddings (padding_idx ",
                 *padding_idx, " with num_embeddings ", num, "; valid: ", -num, " to ", num - 1, ")");
  }

  Recorder rec(GradOp::Embedding, {weight});
  Shape shape = indices.sizes().vec();
  shape.push_back(D);
  Tensor out = detail::make_result(shape, weight.dtype(), weight.device(), Origin::computed(op, weight.origin()));
  const Tensor w = weight.contiguous(), idx = indices.contiguous().reshape({indices.numel()});
  dispatch(weight.device(), cpu::embedding, cuda::embedding, out, w, idx);
  if (rec) {
    rec.save(indices);
    rec.node().payload = autograd::EmbeddingParams{num, pad, scale_grad_by_freq};
  }
  return rec.finish(out);
}

Tensor detail::embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights,
                                  std::optional<int64_t> padding_idx, bool scale_grad_by_freq) {
  const char* op = "embedding_backward";
  check_defined(op, {{"grad_out", grad_out}, {"indices", indices}});
  check_same_device(op, {{"grad_out", grad_out}, {"indices", indices}});
  check_indices_dtype(op, indices);
  TANDEM_CHECK(grad_out.is_floating_point(), DtypeError, op, "(): expected a floating grad_out, but got ",
               grad_out.dtype());
  TANDEM_CHECK(grad_out.dim() == indices.dim() + 1 &&
                   IntArrayRef(grad_out.sizes().data(), indices.sizes().size()) == indices.sizes(),
               ShapeError, op, "(): expected grad_out of shape (indices' shape..., embedding_dim), the indices having ",
               "shape ", shape_str(indices.sizes()), ", but got ", shape_str(grad_out.sizes()));
  TANDEM_CHECK(num_weights >= 0, ValueError, op, "(): num_weights must be non-negative, got ", num_weights);
  TANDEM_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < num_weights), ValueError, op,
               "(): padding_idx must be in [0, num_weights = ", num_weights, "), got ", padding_idx.value_or(0));
  check_not_recording(op, {{"grad_out", grad_out}}, "embedding");
  const int64_t K = indices.numel(), D = grad_out.size(-1);
  // The kernels check the indices (deferred on a GPU: kernels/cuda/device_check.h).
  Tensor grad_weight = detail::make_result({num_weights, D}, grad_out.dtype(), grad_out.device(),
                                           Origin::computed(op, grad_out.origin()));
  const Tensor g = grad_out.contiguous().reshape({K, D}), idx = indices.contiguous().reshape({K});
  dispatch(grad_out.device(), cpu::embedding_backward, cuda::embedding_backward, grad_weight, g, idx,
           padding_idx.value_or(-1), scale_grad_by_freq);
  return grad_weight;
}

}  // namespace tandem

// Front end of the reductions and softmax: dims and dtypes checked and
// resolved, result shapes (keepdim or not), allocation, and the dispatch to a
// backend. The Tensor members of the "reductions" block are defined here too.
#include "tensor/ops/reduce.h"

#include <algorithm>
#include <cmath>

#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/node_params.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"

namespace tandem {

namespace {

using autograd::GradOp;
using autograd::Recorder;

// The shapes of one reduction: the input's with every reduced dim at size 1
// (what the kernels see) and the result's (the same with keepdim, else
// without the reduced dims).
struct ReduceShape {
  std::vector<int64_t> dims;  // wrapped, sorted
  Shape keep, out;
};

ReduceShape reduce_shape(const Tensor& x, IntArrayRef dims, bool keepdim, const char* op) {
  ReduceShape r;
  r.dims = reduction_dims(dims, x.dim(), op);
  r.keep = x.sizes().vec();
  for (int64_t d : r.dims) r.keep[d] = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (keepdim || std::find(r.dims.begin(), r.dims.end(), d) == r.dims.end()) r.out.push_back(r.keep[d]);
  return r;
}

int64_t reduced_numel(const Tensor& x, const ReduceShape& r) {
  int64_t n = 1;
  for (int64_t d : r.dims) n *= x.size(d);
  return n;
}

// The contiguous result viewed at the keepdim shape, for the kernels.
Tensor keepdim_view(const Tensor& out, const ReduceShape& r) {
  return detail::make_view(out, r.keep, contiguous_strides(r.keep), 0);
}

// Reductions with no identity (max, min, ...) cannot reduce an empty dim.
void check_nonzero_reduced(const Tensor& x, const ReduceShape& r, const char* op) {
  if (x.numel() != 0) return;
  for (int64_t d : r.dims)
    TANDEM_CHECK(x.size(d) != 0, IndexError, op, "(): Expected reduction dim ", d,
                 " to have non-zero size (input shape ", shape_str(x.sizes()), ")");
}

// What every reduction's node keeps, as autograd/rules_reduce.cpp reads it:
// a ReductionParams payload (tensor/core/node_params.h), the reduced dims
// wrapped and sorted (every dim for a full reduction, none for a 0-dim input),
// keepdim, and the kernel's params (Var, Std: correction; Norm: p). Per op:
//   Sum, Mean:              nothing else
//   Prod:                   saved = {input, output}; dims has one dim, or every dim for prod()
//   MaxAll, MinAll:         saved = {input, output}; dims = every dim, keepdim = false
//   Amax, Amin, LogSumExp:  saved = {input, output}
//   MaxDim, MinDim:         saved = {indices}; dims = {dim}
//   Var:                    saved = {input}
//   Std, Norm:              saved = {input, output}
// Softmax and LogSoftmax are not reductions: a DimParams payload, saved = {output}.
void record_reduction(Recorder& rec, const ReduceShape& r, bool keepdim, const ReduceParams& params = {}) {
  rec.node().payload = autograd::ReductionParams{r.dims, keepdim, params};
}

// in already has the dtype the result takes; origin is the user's input's.
Tensor reduce_op(ReduceOp op, const char* name, const Tensor& in, const ReduceShape& r, const Origin& origin,
                 const ReduceParams& params = {}) {
  Tensor out = detail::make_result(r.out, in.dtype(), in.device(), Origin::computed(name, origin));
  dispatch(in.device(), cpu::reduce, cuda::reduce, op, keepdim_view(out, r), in, params);
  return out;
}

// values may be undefined (argmax, argmin).
void run_arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in) {
  return dispatch(in.device(), cpu::arg_reduce, cuda::arg_reduce, is_max, values, indices, in);
}

// Integers and bool sum and multiply to int64, as torch.
Dtype sum_dtype(const Tensor& x, std::optional<Dtype> dtype) {
  return dtype.value_or(is_integral(x.dtype(), true) ? kInt64 : x.dtype());
}

void check_mean_dtype(const Tensor& x, std::optional<Dtype> dtype) {
  if (dtype) {
    TANDEM_CHECK(is_floating_point(*dtype), DtypeError,
                 "mean(): could not infer output dtype. Optional dtype must be either a floating point or complex "
                 "dtype. Got: ",
                 torch_scalar_name(*dtype), " (", *dtype, "); pass a floating dtype such as kFloat32");
  } else {
    TANDEM_CHECK(x.is_floating_point(), DtypeError,
                 "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
                 "dtype. Got: ",
                 torch_scalar_name(x.dtype()), " (", x.dtype(),
                 "); pass dtype=kFloat32 or convert the input first, e.g. x.to(kFloat32).mean()");
  }
}

// The largest or smallest values over r (amax/amin, and max()/min() over
// everything); the node (op) keeps the input and the output.
Tensor extremum(const Tensor& x, const ReduceShape& r, bool keepdim, bool is_max, GradOp op, const char* name) {
  Recorder rec(op, {x});
  Tensor out = reduce_op(is_max ? ReduceOp::Amax : ReduceOp::Amin, name, x, r, x.origin());
  if (rec) {
    record_reduction(rec, r, keepdim);
    rec.save(x);
    rec.save_output(out);
  }
  return rec.finish(out);
}

Tensor max_min_all(const Tensor& x, bool is_max) {
  const char* name = is_max ? "max" : "min";
  check_defined(name, {{"self", x}});
  TANDEM_CHECK(x.numel() > 0, ValueError, name,
               "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
               "the 'dim' argument.");
  return extremum(x, reduce_shape(x, {}, false, name), false, is_max, is_max ? GradOp::MaxAll : GradOp::MinAll, name);
}

std::tuple<Tensor, Tensor> max_min_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "max" : "min";
  check_defined(name, {{"self", x}});
  ReduceShape r = reduce_shape(x, {dim}, keepdim, name);
  check_nonzero_reduced(x, r, name);
  Recorder rec(is_max ? GradOp::MaxDim : GradOp::MinDim, {x});
  Tensor values = detail::make_result(r.out, x.dtype(), x.device(), Origin::computed(name, x.origin()));
  Tensor indices = detail::make_result(r.out, kInt64, x.device(), Origin::computed(name, x.origin()));
  run_arg_reduce(is_max, keepdim_view(values, r), keepdim_view(indices, r), x);
  if (rec) {
    record_reduction(rec, r, keepdim);
    rec.save(indices);
  }
  return {rec.finish(values), indices};
}

Tensor amax_amin(const Tensor& x, IntArrayRef dims, bool keepdim, bool is_max) {
  const char* name = is_max ? "amax" : "amin";
  check_defined(name, {{"self", x}});
  ReduceShape r = reduce_shape(x, dims, keepdim, name);
  check_nonzero_reduced(x, r, name);
  return extremum(x, r, keepdim, is_max, is_max ? GradOp::Amax : GradOp::Amin, name);
}

Tensor argmax_argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "argmax" : "argmin";
  check_defined(name, {{"self", x}});
  if (dim) {
    ReduceShape r = reduce_shape(x, {*dim}, keepdim, name);
    check_nonzero_reduced(x, r, name);
    Tensor indices = detail::make_result(r.out, kInt64, x.device(), Origin::computed(name, x.origin()));
    run_arg_reduce(is_max, Tensor(), keepdim_view(indices, r), x);
    return indices;
  }
  // No dim: the index into the flattened tensor.
  TANDEM_CHECK(x.numel() > 0, ValueError, name, "(): Expected reduction dim to be specified for input.numel() == 0.");
  Shape out_shape = keepdim ? Shape(x.dim(), 1) : Shape{};
  Tensor indices = detail::make_result(out_shape, kInt64, x.device(), Origin::computed(name, x.origin()));
  run_arg_reduce(is_max, Tensor(), detail::make_view(indices, {1}, {1}, 0), x.reshape({-1}));
  return indices;
}

Tensor var_std(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim, bool take_sqrt) {
  const char* name = take_sqrt ? "std" : "var";
  check_defined(name, {{"self", x}});
  TANDEM_CHECK(x.is_floating_point(), DtypeError, name,
               "(): std and var only support floating point and complex dtypes, but the input is ", x.dtype(),
               "; convert it first, e.g. x.to(kFloat32)");
  ReduceShape r = reduce_shape(x, dims, keepdim, name);
  ReduceParams params;
  params.correction = correction;
  Recorder rec(take_sqrt ? GradOp::Std : GradOp::Var, {x});
  Tensor out = reduce_op(take_sqrt ? ReduceOp::Std : ReduceOp::Var, name, x, r, x.origin(), params);
  if (rec) {
    record_reduction(rec, r, keepdim, params);
    rec.save(x);
    if (take_sqrt) rec.save_output(out);
  }
  return rec.finish(out);
}

Tensor softmax_op(const Tensor& x, int64_t dim, std::optional<Dtype> dtype, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  if (!dtype) {  // an explicit dtype is kept (PyTorch's fp32_set_opt_dtype)
    if (auto in = autocast::detail::inputs(name, {x}))
      return autocast::detail::excluded([&] { return softmax_op((*in)[0], dim, dtype, log); });
  }
  check_defined(name, {{"self", x}});
  Dtype dt = dtype.value_or(x.dtype());
  TANDEM_CHECK(is_floating_point(dt), DtypeError, name, "(): needs a floating dtype to compute in, but got ", dt,
               dtype ? " (the dtype argument)" : " (the input's dtype)", "; PyTorch fails with \"", name,
               "_lastdim_kernel_impl\" not implemented for '", torch_scalar_name(dt), "'. Pass dtype=kFloat32, e.g. x.",
               name, "(", dim, ", kFloat32)");
  int64_t d = wrap_dim(dim, x.dim(), name);
  Recorder rec(log ? GradOp::LogSoftmax : GradOp::Softmax, {x});
  Tensor in = x.to(dt).contiguous();
  Tensor out = detail::make_result(x.sizes(), dt, x.device(), Origin::computed(name, x.origin()));
  dispatch(x.device(), cpu::softmax, cuda::softmax, out, in, d, log);
  if (rec) {
    rec.node().payload = autograd::DimParams{d};  // see record_reduction
    rec.save_output(out);
  }
  return rec.finish(out);
}

Tensor prod_op(const Tensor& x, const ReduceShape& r, bool keepdim, std::optional<Dtype> dtype) {
  Recorder rec(GradOp::Prod, {x});
  Tensor out = reduce_op(ReduceOp::Prod, "prod", x.to(sum_dtype(x, dtype)), r, x.origin());
  if (rec) {
    record_reduction(rec, r, keepdim);
    rec.save(x);
    rec.save_output(out);
  }
  return rec.finish(out);
}

}  // namespace

// ---------------------------------------------------------------- sum, mean, prod
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<Dtype> dtype) {
  if (!dtype) {
    if (auto in = autocast::detail::inputs("sum", {x}))
      return autocast::detail::excluded([&] { return sum((*in)[0], dims, keepdim, dtype); });
  }
  check_defined("sum", {{"self", x}});
  ReduceShape r = reduce_shape(x, dims, keepdim, "sum");
  Recorder rec(GradOp::Sum, {x});
  Tensor out = reduce_op(ReduceOp::Sum, "sum", x.to(sum_dtype(x, dtype)), r, x.origin());
  if (rec) record_reduction(rec, r, keepdim);
  return rec.finish(out);
}
Tensor sum(const Tensor& x, std::optional<Dtype> dtype) { return sum(x, IntArrayRef(), false, dtype); }

Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<Dtype> dtype) {
  check_defined("mean", {{"self", x}});
  check_mean_dtype(x, dtype);
  ReduceShape r = reduce_shape(x, dims, keepdim, "mean");
  Recorder rec(GradOp::Mean, {x});
  Tensor out = reduce_op(ReduceOp::Mean, "mean", x.to(dtype.value_or(x.dtype())), r, x.origin());
  if (rec) record_reduction(rec, r, keepdim);
  return rec.finish(out);
}
Tensor mean(const Tensor& x, std::optional<Dtype> dtype) { return mean(x, IntArrayRef(), false, dtype); }

Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<Dtype> dtype) {
  if (!dtype) {
    if (auto in = autocast::detail::inputs("prod", {x}))
      return autocast::detail::excluded([&] { return prod((*in)[0], dim, keepdim, dtype); });
  }
  check_defined("prod", {{"self", x}});
  return prod_op(x, reduce_shape(x, {dim}, keepdim, "prod"), keepdim, dtype);
}
Tensor prod(const Tensor& x, std::optional<Dtype> dtype) {
  if (!dtype) {
    if (auto in = autocast::detail::inputs("prod", {x}))
      return autocast::detail::excluded([&] { return prod((*in)[0], dtype); });
  }
  check_defined("prod", {{"self", x}});
  return prod_op(x, reduce_shape(x, {}, false, "prod"), false, dtype);
}

// ---------------------------------------------------------------- max, min and friends
Tensor max(const Tensor& x) { return max_min_all(x, true); }
Tensor min(const Tensor& x) { return max_min_all(x, false); }
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return max_min_dim(x, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return max_min_dim(x, dim, keepdim, false);
}
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) { return amax_amin(x, dims, keepdim, true); }
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) { return amax_amin(x, dims, keepdim, false); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return argmax_argmin(x, dim, keepdim, true);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return argmax_argmin(x, dim, keepdim, false);
}

// ---------------------------------------------------------------- statistics and norms
Tensor var(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  return var_std(x, dims, correction, keepdim, false);
}
Tensor std(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  return var_std(x, dims, correction, keepdim, true);
}

Tensor norm(const Tensor& x, const Scalar& p, IntArrayRef dims, bool keepdim) {
  if (auto in = autocast::detail::inputs("norm", {x}))
    return autocast::detail::excluded([&] { return norm((*in)[0], p, dims, keepdim); });
  check_defined("norm", {{"self", x}});
  TANDEM_CHECK(x.is_floating_point(), DtypeError, "norm(): expected a floating point input, but got ", x.dtype(),
               " (PyTorch: linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
               torch_scalar_name(x.dtype()), "); convert it first, e.g. x.to(kFloat32)");
  const double order = p.to_double();
  TANDEM_CHECK(!std::isnan(order), ValueError, "norm(): the order p must be a number, got nan");
  ReduceShape r = reduce_shape(x, dims, keepdim, "norm");
  TANDEM_CHECK(!(order < 0 || std::isinf(order)) || reduced_numel(x, r) > 0, ValueError,
               "norm(): linalg.vector_norm cannot compute the ", p,
               " norm on an empty tensor because the operation does not have an identity (input shape ",
               shape_str(x.sizes()), ")");
  ReduceParams params;
  params.p = order;
  Recorder rec(GradOp::Norm, {x});
  Tensor out = reduce_op(ReduceOp::Norm, "norm", x, r, x.origin(), params);
  if (rec) {
    record_reduction(rec, r, keepdim, params);
    rec.save(x);
    rec.save_output(out);
  }
  return rec.finish(out);
}

Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim) {
  if (auto in = autocast::detail::inputs("logsumexp", {x}))
    return autocast::detail::excluded([&] { return logsumexp((*in)[0], dims, keepdim); });
  check_defined("logsumexp", {{"self", x}});
  ReduceShape r = reduce_shape(x, dims, keepdim, "logsumexp");
  Recorder rec(GradOp::LogSumExp, {x});
  Tensor in = is_integral(x.dtype(), true) ? x.to(kFloat32) : x;
  Tensor out = reduce_op(ReduceOp::LogSumExp, "logsumexp", in, r, x.origin());
  if (rec) {
    record_reduction(rec, r, keepdim);
    rec.save(x);
    rec.save_output(out);
  }
  return rec.finish(out);
}

// ---------------------------------------------------------------- softmax
Tensor softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) { return softmax_op(x, dim, dtype, false); }
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) { return softmax_op(x, dim, dtype, true); }

Tensor detail::softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim, bool log) {
  const char* name = log ? "log_softmax_backward_data" : "softmax_backward_data";
  check_inputs(name, {{"grad", grad}, {"output", output}});
  TANDEM_CHECK(grad.sizes() == output.sizes(), ShapeError, name, "(): expected grad of the output's shape ",
               shape_str(output.sizes()), ", but got ", shape_str(grad.sizes()));
  TANDEM_CHECK(output.is_floating_point(), DtypeError, name,
               "(): expected a floating output (a softmax result), but got ", output.dtype());
  TANDEM_CHECK(grad.dtype() == output.dtype(), DtypeError, name, "(): expected grad of the output's dtype ",
               output.dtype(), ", but got ", grad.dtype(), "; convert it first, e.g. grad.to(output.dtype())");
  const int64_t d = wrap_dim(dim, output.dim(), name);
  TANDEM_CHECK(!GradMode::is_enabled() || (!grad.requires_grad() && !output.requires_grad()), ValueError, name,
               "(): records no graph, but grad mode is on and ", grad.requires_grad() ? "grad" : "output",
               " requires grad; call it inside a NoGradGuard, or write the gradient with differentiable ops (",
               log ? "grad - exp(output) * grad.sum(dim, true)" : "output * (grad - (grad * output).sum(dim, true))",
               ")");
  const Tensor g = grad.contiguous(), y = output.contiguous();
  Tensor grad_in =
      detail::make_result(output.sizes(), output.dtype(), output.device(), Origin::computed(name, grad.origin()));
  dispatch(output.device(), cpu::softmax_backward, cuda::softmax_backward, grad_in, g, y, d, log);
  return grad_in;
}

// ---------------------------------------------------------------- Tensor members
Tensor Tensor::sum(std::optional<Dtype> dtype) const { return tandem::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dims, bool keepdim, std::optional<Dtype> dtype) const {
  return tandem::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean(std::optional<Dtype> dtype) const { return tandem::mean(*this, dtype); }
Tensor Tensor::mean(IntArrayRef dims, bool keepdim, std::optional<Dtype> dtype) const {
  return tandem::mean(*this, dims, keepdim, dtype);
}
Tensor Tensor::prod(std::optional<Dtype> dtype) const { return tandem::prod(*this, dtype); }
Tensor Tensor::prod(int64_t dim, bool keepdim, std::optional<Dtype> dtype) const {
  return tandem::prod(*this, dim, keepdim, dtype);
}
Tensor Tensor::max() const { return tandem::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return tandem::max(*this, dim, keepdim); }
Tensor Tensor::min() const { return tandem::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return tandem::min(*this, dim, keepdim); }
Tensor Tensor::amax(IntArrayRef dims, bool keepdim) const { return tandem::amax(*this, dims, keepdim); }
Tensor Tensor::amin(IntArrayRef dims, bool keepdim) const { return tandem::amin(*this, dims, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return tandem::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return tandem::argmin(*this, dim, keepdim); }
Tensor Tensor::var(IntArrayRef dims, int64_t correction, bool keepdim) const {
  return tandem::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(IntArrayRef dims, int64_t correction, bool keepdim) const {
  return tandem::std(*this, dims, correction, keepdim);
}
Tensor Tensor::norm(const Scalar& p, IntArrayRef dims, bool keepdim) const {
  return tandem::norm(*this, p, dims, keepdim);
}
Tensor Tensor::softmax(int64_t dim, std::optional<Dtype> dtype) const { return tandem::softmax(*this, dim, dtype); }
Tensor Tensor::log_softmax(int64_t dim, std::optional<Dtype> dtype) const {
  return tandem::log_softmax(*this, dim, dtype);
}
Tensor Tensor::logsumexp(IntArrayRef dims, bool keepdim) const { return tandem::logsumexp(*this, dims, keepdim); }

}  // namespace tandem

// Front end of gather, scatter_add, index_select and one_hot: PyTorch's
// checks on dims, shapes and dtypes, output allocation, backend dispatch, and
// the autograd record of the floating ops (one_hot is integer: no node).
// Index values are checked by the kernels as they read them.
#include "tensor/ops/index.h"

#include <algorithm>
#include <tuple>

#include "kernels/index.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/node_params.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/reduce.h"

namespace tandem {

namespace {

// gather and scatter treat a 0-dim tensor as a 1-dim one of size 1.
int64_t nonempty_dim(const Tensor& t) { return std::max<int64_t>(t.dim(), 1); }
int64_t nonempty_size(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }

void check_index_int64(const char* op, const Tensor& index) {
  TANDEM_CHECK(index.dtype() == kInt64, DtypeError, op, "(): Expected dtype int64 for index, but got ", index.dtype());
}

void check_gather_shape(const Tensor& t, int64_t dim, const Tensor& index) {
  TANDEM_CHECK(nonempty_dim(t) == nonempty_dim(index), ShapeError,
               "gather(): Index tensor must have the same number of dimensions as input tensor (index ",
               shape_str(index.sizes()), ", input ", shape_str(t.sizes()), ")");
  for (int64_t d = 0; d < nonempty_dim(t); ++d) {
    TANDEM_CHECK(d == dim || nonempty_size(index, d) <= nonempty_size(t, d), ShapeError,
                 "gather(): Size does not match at dimension ", d, " expected index ", shape_str(index.sizes()),
                 " to be smaller than self ", shape_str(t.sizes()), " apart from dimension ", dim);
  }
}

// The checks shared by scatter_add and scatter_add_; returns the wrapped dim.
int64_t check_scatter_add(const char* op, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  check_inputs(op, {{"self", self}, {"index", index}, {"src", src}});
  dim = wrap_dim(dim, self.dim(), op);
  if (index.numel() != 0) check_index_int64("scatter_add", index);
  TANDEM_CHECK(self.dtype() == src.dtype(), DtypeError,
               "scatter_add(): Expected self.dtype to be equal to src.dtype (self is ", self.dtype(), ", src is ",
               src.dtype(), "); convert src first with src.to(self.dtype())");
  if (index.numel() == 0) return dim;
  TANDEM_CHECK(nonempty_dim(index) == nonempty_dim(self), ShapeError,
               "scatter_add(): Index tensor must have the same number of dimensions as self tensor (index ",
               shape_str(index.sizes()), ", self ", shape_str(self.sizes()), ")");
  TANDEM_CHECK(nonempty_dim(index) == nonempty_dim(src), ShapeError,
               "scatter_add(): Index tensor must have the same number of dimensions as src tensor (index ",
               shape_str(index.sizes()), ", src ", shape_str(src.sizes()), ")");
  for (int64_t d = 0; d < nonempty_dim(self); ++d) {
    TANDEM_CHECK((d == dim || nonempty_size(index, d) <= nonempty_size(self, d)) &&
                     nonempty_size(index, d) <= nonempty_size(src, d),
                 ShapeError, "scatter_add(): Expected index ", shape_str(index.sizes()), " to be smaller than self ",
                 shape_str(self.sizes()), " apart from dimension ", dim, " and to be smaller size than src ",
                 shape_str(src.sizes()));
  }
  return dim;
}

void run_scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  if (index.numel() == 0) return;
  return dispatch(self.device(), cpu::scatter_add, cuda::scatter_add, self, dim, index, src);
}

// Gather, IndexSelect: inputs {t}, saved {index}, a DimParams payload (the
// dim, wrapped). ScatterAdd (also in place): inputs {t, src}, saved {index if
// src needs grad}, a DimParams payload.
void record_index_op(autograd::Recorder& rec, int64_t dim, const Tensor& index, bool save_index = true) {
  if (!rec) return;
  rec.node().payload = autograd::DimParams{dim};
  if (save_index) rec.save(index);
}

}  // namespace

Tensor gather(const Tensor& t, int64_t dim, const Tensor& index) {
  check_inputs("gather", {{"self", t}, {"index", index}});
  dim = wrap_dim(dim, t.dim(), "gather");
  autograd::Recorder rec(autograd::GradOp::Gather, {t});
  Tensor out = detail::make_result(index.sizes(), t.dtype(), t.device(), Origin::computed("gather", t.origin()));
  if (index.numel() != 0) {
    check_index_int64("gather", index);
    check_gather_shape(t, dim, index);
    dispatch(t.device(), cpu::gather, cuda::gather, out, t, dim, index);
  }
  record_index_op(rec, dim, index);
  return rec.finish(out);
}

Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  if (auto in = autocast::detail::inputs("scatter_add", {t, index, src}))
    return autocast::detail::excluded([&] { return scatter_add((*in)[0], dim, (*in)[1], (*in)[2]); });
  dim = check_scatter_add("scatter_add", t, dim, index, src);
  autograd::Recorder rec(autograd::GradOp::ScatterAdd, {t, src});
  Tensor out = detail::make_result(t.sizes(), t.dtype(), t.device(), Origin::computed("scatter_add", t.origin()));
  out.copy_(t);
  run_scatter_add(out, dim, index, src);
  record_index_op(rec, dim, index, rec && rec.node().needs_input_grad(1));
  return rec.finish(out);
}

Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  check_inputs("index_select", {{"self", t}, {"index", index}});
  dim = wrap_dim(dim, t.dim(), "index_select");
  TANDEM_CHECK(index.dim() <= 1, IndexError,
               "index_select(): Index is supposed to be a vector, but got index of shape ", shape_str(index.sizes()));
  TANDEM_CHECK(t.dim() > 0 || index.numel() == 1, IndexError,
               "index_select(): Index to scalar can have only 1 value, got ", index.numel(), " value(s)");
  TANDEM_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, DtypeError,
               "index_select(): Expected dtype int32 or int64 for index, but got ", index.dtype());
  Shape shape = t.sizes().vec();
  if (t.dim() > 0) shape[dim] = index.numel();
  autograd::Recorder rec(autograd::GradOp::IndexSelect, {t});
  Tensor out = detail::make_result(shape, t.dtype(), t.device(), Origin::computed("index_select", t.origin()));
  dispatch(t.device(), cpu::index_select, cuda::index_select, out, t, dim, index);
  record_index_op(rec, dim, index);
  return rec.finish(out);
}

Tensor one_hot(const Tensor& t, int64_t num_classes) {
  check_defined("one_hot", {{"self", t}});
  TANDEM_CHECK(t.dtype() == kInt64, DtypeError,
               "one_hot is only applicable to index tensor of type LongTensor (int64), but got ", t.dtype());
  Shape shape = t.sizes().vec();
  Origin origin = Origin::computed("one_hot", t.origin());
  if (t.numel() == 0) {
    TANDEM_CHECK(num_classes > 0, ValueError,
                 "one_hot: Can not infer total number of classes from empty tensor (num_classes = ", num_classes,
                 "); pass num_classes explicitly");
    shape.push_back(num_classes);
    return detail::make_result(shape, kInt64, t.device(), origin);
  }
  // The class values decide the output's shape, so they are read back here.
  int64_t lo = t.amin().item<int64_t>(), hi = t.amax().item<int64_t>();
  TANDEM_CHECK(lo >= 0, ValueError, "one_hot: Class values must be non-negative. Got a class value of ", lo);
  if (num_classes == -1) num_classes = hi + 1;
  TANDEM_CHECK(num_classes > hi, ValueError,
               "one_hot: Class values must be smaller than num_classes. Got a class value of ", hi,
               " with num_classes = ", num_classes);
  shape.push_back(num_classes);
  Tensor out = detail::make_result(shape, kInt64, t.device(), origin);
  dispatch(t.device(), cpu::one_hot, cuda::one_hot, out, t);
  return out;
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return tandem::gather(*this, dim, index); }
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tandem::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return tandem::index_select(*this, dim, index); }

Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  dim = check_scatter_add("scatter_add_", *this, dim, index, src);
  detail::check_writable(*this, "scatter_add_");
  autograd::check_inplace(*this, "scatter_add_");
  autograd::Recorder rec(autograd::GradOp::ScatterAdd, {*this, src});
  run_scatter_add(*this, dim, index, src);
  storage()->bump_version();
  record_index_op(rec, dim, index, rec && rec.node().needs_input_grad(1));
  rec.finish_inplace(*this);
  return *this;
}

}  // namespace tandem

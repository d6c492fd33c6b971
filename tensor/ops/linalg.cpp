// Front end of the matrix products: torch.matmul's rank rules, the device,
// dtype and shape checks in PyTorch's words, the output allocation, the
// dispatch, and one autograd node per call. Operands reach the kernel as
// strided views, never copied here.
#include "tensor/ops/linalg.h"

#include <algorithm>
#include <string>

#include "kernels/linalg.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/cuda_matmul.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"

namespace tandem {

namespace {

// Equal dtypes (the products never promote, as in PyTorch), and not bool.
void check_dtypes(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  TANDEM_CHECK(a.dtype() == b.dtype(), DtypeError,
               "expected m1 and m2 to have the same dtype, but got: ", torch_cpp_type_name(a.dtype()),
               " != ", torch_cpp_type_name(b.dtype()), " (", op, ": ", a_name, " is ", a.dtype(), ", ", b_name, " is ",
               b.dtype(), "; ", op, " does not promote, convert one first, e.g. ", b_name, ".to(", a_name,
               ".dtype()))");
  TANDEM_CHECK(a.dtype() != kBool, NotImplementedError, op,
               " is not implemented for dtype bool (convert the operands to a numeric dtype first, e.g. "
               ".to(kFloat32))");
}

void check_rank(const Tensor& t, int64_t rank, const char* what, const char* op, const char* hint) {
  TANDEM_CHECK(t.dim() == rank, ShapeError, what, ", but got a ", t.dim(), "-D tensor of shape ", shape_str(t.sizes()),
               " (", op, " takes ", hint, "; use matmul for other ranks)");
}

// Product of all sizes but the last: the rows of t folded into one matrix.
int64_t folded_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return rows;
}

Shape concat(Shape a, IntArrayRef b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// t as a (batch..., rows, cols) strided view without copying: the batch dims
// broadcast to `batch` (stride 0 where expanded); a 1-D t becomes a (1, K) row
// (lhs) or a (K, 1) column (rhs).
Tensor batched_view(const Tensor& t, bool lhs, const Shape& batch) {
  int64_t nd = t.dim();
  Shape sizes, strides;
  if (nd == 1) {
    int64_t k = t.size(0), s = t.stride(0);
    sizes = lhs ? Shape{1, k} : Shape{k, 1};
    strides = lhs ? Shape{k * s, s} : Shape{s, 1};
    strides.insert(strides.begin(), batch.size(), 0);
  } else {
    IntArrayRef all_sizes = t.sizes(), all_strides = t.strides();
    IntArrayRef bsizes(all_sizes.data(), static_cast<size_t>(nd - 2));
    IntArrayRef bstrides(all_strides.data(), static_cast<size_t>(nd - 2));
    sizes = {t.size(nd - 2), t.size(nd - 1)};
    strides = concat(broadcast_strides(bsizes, bstrides, batch), Shape{t.stride(nd - 2), t.stride(nd - 1)});
  }
  return detail::make_view(t, concat(batch, sizes), std::move(strides), t.storage_offset());
}

// out = a @ b with a: (batch..., M, K) and b: (batch..., K, N) as views; the
// result has out_shape, the same elements as (batch..., M, N).
Tensor run_product(const char* op, const Tensor& a, const Tensor& b, const Shape& batch, const Shape& out_shape) {
  Tensor av = batched_view(a, true, batch), bv = batched_view(b, false, batch);
  int64_t M = av.size(-2), N = bv.size(-1);
  Tensor out = detail::make_result(out_shape, a.dtype(), a.device(), Origin::computed(op, a.origin()));
  Shape kshape = concat(batch, Shape{M, N});
  Tensor ov = detail::make_view(out, kshape, contiguous_strides(kshape), out.storage_offset());
  dispatch(out.device(), cpu::matmul, cuda::matmul, ov, av, bv, cuda::matmul_allow_tf32());
  return out;
}

// Runs the product under a node of op (Mm, Bmm, Matmul): inputs {a, b},
// saved {a if b needs grad, b if a needs grad} (undefined where not needed);
// the rule reads the ranks from the inputs' sizes. run_product writes into
// views of its output: grad mode is off while recording, so nothing else records.
Tensor recorded_product(autograd::GradOp grad_op, const char* op, const Tensor& a, const Tensor& b, const Shape& batch,
                        const Shape& out_shape) {
  autograd::Recorder rec(grad_op, {a, b});
  Tensor out = run_product(op, a, b, batch, out_shape);
  if (rec) {
    rec.save(rec.node().needs_input_grad(1) ? a : Tensor());
    rec.save(rec.node().needs_input_grad(0) ? b : Tensor());
  }
  return rec.finish(out);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (auto in = autocast::detail::inputs("matmul", {a, b}))
    return autocast::detail::excluded([&] { return matmul((*in)[0], (*in)[1]); });
  check_inputs("matmul", {{"self", a}, {"other", b}});
  int64_t da = a.dim(), db = b.dim();
  TANDEM_CHECK(da >= 1 && db >= 1, ShapeError, "both arguments to matmul need to be at least 1D, but they are ", da,
               "D and ", db, "D");
  check_dtypes("matmul", "self", a, "other", b);
  int64_t k = a.size(-1), kb = db >= 2 ? b.size(-2) : b.size(0);
  int64_t n = db >= 2 ? b.size(-1) : 1;
  // The shape messages are those of the op torch.matmul reduces each rank
  // pair to: dot, mv, mm with a's batch folded into rows, or bmm.
  if (da == 1 && db == 1) {
    TANDEM_CHECK(k == kb, ShapeError, "inconsistent tensor size, expected tensor [", k, "] and src [", kb,
                 "] to have the same number of elements, but got ", k, " and ", kb, " elements respectively");
  } else if (db == 1) {
    int64_t rows = folded_rows(a);
    TANDEM_CHECK(k == kb, ShapeError, "size mismatch, got input (", rows, "), mat (", rows, "x", k, "), vec (", kb,
                 ")");
  } else if (db == 2) {
    int64_t rows = da == 1 ? 1 : folded_rows(a);
    TANDEM_CHECK(k == kb, ShapeError, "mat1 and mat2 shapes cannot be multiplied (", rows, "x", k, " and ", kb, "x", n,
                 ")");
  }
  IntArrayRef as = a.sizes(), bs = b.sizes();
  Shape batch = broadcast_shapes(IntArrayRef(as.data(), static_cast<size_t>(std::max<int64_t>(da - 2, 0))),
                                 IntArrayRef(bs.data(), static_cast<size_t>(std::max<int64_t>(db - 2, 0))), "matmul");
  int64_t batch_numel = shape_numel(batch);
  TANDEM_CHECK(k == kb, ShapeError, "Expected size for first two dimensions of batch2 tensor to be: [", batch_numel,
               ", ", k, "] but got: [", batch_numel, ", ", kb, "].");
  Shape out_shape = batch;
  if (da >= 2) out_shape.push_back(a.size(-2));
  if (db >= 2) out_shape.push_back(n);
  return recorded_product(autograd::GradOp::Matmul, "matmul", a, b, batch, out_shape);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  if (auto in = autocast::detail::inputs("mm", {a, b}))
    return autocast::detail::excluded([&] { return mm((*in)[0], (*in)[1]); });
  check_inputs("mm", {{"mat1", a}, {"mat2", b}});
  check_rank(a, 2, "self must be a matrix", "mm", "two 2-D tensors");
  check_rank(b, 2, "mat2 must be a matrix", "mm", "two 2-D tensors");
  check_dtypes("mm", "mat1", a, "mat2", b);
  TANDEM_CHECK(a.size(1) == b.size(0), ShapeError, "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
               a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  return recorded_product(autograd::GradOp::Mm, "mm", a, b, {}, {a.size(0), b.size(1)});
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (auto in = autocast::detail::inputs("bmm", {a, b}))
    return autocast::detail::excluded([&] { return bmm((*in)[0], (*in)[1]); });
  check_inputs("bmm", {{"batch1", a}, {"batch2", b}});
  check_rank(a, 3, "batch1 must be a 3D tensor", "bmm", "(B, M, K) and (B, K, N) tensors");
  check_rank(b, 3, "batch2 must be a 3D tensor", "bmm", "(B, M, K) and (B, K, N) tensors");
  check_dtypes("bmm", "batch1", a, "batch2", b);
  TANDEM_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2), ShapeError,
               "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ", a.size(2),
               "] but got: [", b.size(0), ", ", b.size(1), "].");
  return recorded_product(autograd::GradOp::Bmm, "bmm", a, b, {a.size(0)}, {a.size(0), a.size(1), b.size(2)});
}

Tensor Tensor::matmul(const Tensor& other) const { return tandem::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return tandem::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return tandem::bmm(*this, other); }

}  // namespace tandem

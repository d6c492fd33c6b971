// Front end of the elementwise ops: checks, type promotion, broadcasting,
// output allocation, and the dispatch to a backend.
#include "tensor/ops/elementwise.h"

#include <cmath>
#include <limits>

#include "kernels/elementwise.h"
#include "tensor/core/grad_record.h"
#include "tensor/core/node_params.h"
#include "tensor/core/op_table.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"

namespace tandem {

// ---------------------------------------------------------------- promotion
namespace {

struct PromotionState {
  std::optional<Dtype> dim, zero, wrapped;
};

void update(std::optional<Dtype>& slot, Dtype d) { slot = slot ? promote_types(*slot, d) : d; }

// PyTorch's combine_categories: a lower-priority operand only matters when it
// is of a higher category (bool < integer < floating).
std::optional<Dtype> combine(std::optional<Dtype> higher, std::optional<Dtype> lower) {
  if (!higher) return lower;
  if (is_floating_point(*higher) || !lower) return higher;
  if (*higher == kBool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return higher;
}

void add_tensor(PromotionState& s, const Tensor& t) { update(t.dim() > 0 ? s.dim : s.zero, t.dtype()); }

Dtype finish(const PromotionState& s) { return *combine(s.dim, combine(s.zero, s.wrapped)); }

// Whether a result of dtype `from` may be written into a tensor of dtype `to`.
bool can_cast(Dtype from, Dtype to) {
  if (is_floating_point(from) && is_integral(to, true)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

// Whether value converts to dtype without overflow, by PyTorch's rule for
// values written into a tensor (fill_, masked_fill, clamp bounds): floats
// must lie in the type's finite range (infinities are fine for floating
// types, NaN only for them); integers too, except that an unsigned type also
// takes negative integers down to -max, which wrap. Bool takes anything.
bool fits(const Scalar& value, Dtype dtype) {
  if (dtype == kBool || value.is_bool()) return true;
  double lo = 0, hi = 0;
  switch (dtype) {
    case kFloat64: return true;
    case kFloat32:
      hi = std::numeric_limits<float>::max();
      lo = -hi;
      break;
    case kFloat16:
      hi = 65504.0;
      lo = -hi;
      break;
    case kBFloat16:
      hi = 0x1.fep+127;
      lo = -hi;
      break;
    case kInt64:
      lo = -0x1p63;
      hi = 0x1p63;
      break;  // hi exclusive, see below
    case kInt32:
      lo = std::numeric_limits<int32_t>::min();
      hi = std::numeric_limits<int32_t>::max();
      break;
    case kUInt8:
      lo = 0;
      hi = 255;
      break;
    case kBool: return true;
  }
  if (value.is_integral()) {
    int64_t v = value.to_int();
    if (dtype == kInt64) return true;
    if (dtype == kUInt8) return v <= 255 && v >= -255;
    return static_cast<double>(v) >= lo && static_cast<double>(v) <= hi;
  }
  double d = value.to_double();
  if (std::isnan(d) || std::isinf(d)) return is_floating_point(dtype);
  if (dtype == kInt64) return d >= lo && d < hi;
  return d >= lo && d <= hi;
}

void check_fits(const char* op, const Scalar& value, Dtype dtype) {
  TANDEM_CHECK(fits(value, dtype), ValueError, op, ": value ", value, " cannot be converted to type ", dtype,
               " without overflow");
}

// PyTorch's alpha rules for add and sub.
void check_alpha(const char* op, Dtype result, const Scalar& alpha) {
  TANDEM_CHECK(!(is_integral(result, true) && alpha.is_floating_point()), DtypeError, op,
               ": for integral input tensors, argument alpha must not be a floating point number (got alpha = ", alpha,
               ", result dtype ", result, ")");
  TANDEM_CHECK(!(alpha.is_bool() && result != kBool), DtypeError, op,
               ": boolean alpha is only supported for bool results (result dtype ", result, ")");
}

void fill_unchecked(const Tensor& t, const Scalar& value) { dispatch(t.device(), cpu::fill, cuda::fill, t, value); }

// A read-only operand that shares memory with the tensor an op writes into
// but is not that very view (x.add_(x.t()), x.copy_(x[0])) would be read
// after it was overwritten: copy it first. PyTorch refuses these instead.
Tensor unaliased(const Tensor& src, const Tensor& dst) {
  if (!src.shares_storage(dst)) return src;
  if (src.storage_offset() == dst.storage_offset() && src.sizes() == dst.sizes() && src.strides() == dst.strides())
    return src;
  return src.clone();
}

}  // namespace

Dtype result_type(const Tensor& a, const Tensor& b) {
  PromotionState s;
  add_tensor(s, a);
  add_tensor(s, b);
  return finish(s);
}

Dtype result_type(const Tensor& a, const Scalar& b) {
  PromotionState s;
  add_tensor(s, a);
  update(s.wrapped, b.default_dtype());
  return finish(s);
}

namespace detail {

Tensor scalar_tensor(const Scalar& s, Dtype dtype, Device device) {
  Tensor t = make_result({}, dtype, device, Origin{});
  fill_unchecked(t, s);  // wraps like PyTorch's wrapped numbers: uint8 + 300 adds 44
  return t;
}

void check_writable(const Tensor& t, const char* op) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    TANDEM_CHECK(t.stride(d) != 0 || t.size(d) <= 1, ValueError, op,
                 ": unsupported operation: more than one element of the written-to tensor refers to a single "
                 "memory location (it is an expanded view, shape ",
                 shape_str(t.sizes()), "). Call .clone() on it before writing in place");
  }
}

}  // namespace detail

// ---------------------------------------------------------------- autograd
namespace {

using autograd::grad_op;
using autograd::GradOp;
using autograd::Recorder;

// The node's parameters: the op's UnaryParams (autograd/rules_elementwise.cpp
// reads them back as node.params<UnaryParams>()).
void record_unary_params(autograd::Node& node, const UnaryParams& p) { node.payload = p; }

// Binary rules keep [a, b] (undefined where not needed); Add and Sub keep
// no tensor but an AddParams payload (alpha). self_old: a's value before an
// in-place write (a itself out of place).
void record_binary(Recorder& rec, BinaryOp op, const Tensor& self_old, const Tensor& b, const Scalar& alpha) {
  autograd::Node& n = rec.node();
  bool need_a = n.needs_input_grad(0), need_b = n.needs_input_grad(1);
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub: n.payload = autograd::AddParams{alpha}; break;
    case BinaryOp::Mul:
      rec.save(need_b ? self_old : Tensor());
      rec.save(need_a ? b : Tensor());
      break;
    case BinaryOp::Div:
      rec.save(need_b ? self_old : Tensor());
      rec.save(b);
      break;
    case BinaryOp::Pow:
    case BinaryOp::Maximum:
    case BinaryOp::Minimum:
      rec.save(self_old);
      rec.save(b);
      break;
    default: break;
  }
}

}  // namespace

// ---------------------------------------------------------------- dispatch
namespace {

void run_unary(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p = {}) {
  return dispatch(out.device(), cpu::unary, cuda::unary, op, out, in, p);
}

void run_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha,
                const UnaryParams& params = {}) {
  return dispatch(out.device(), cpu::binary, cuda::binary, op, out, a, b, alpha, params);
}

void check_unary_dtype(UnaryOp op, Dtype dtype) {
  TANDEM_CHECK(!(op == UnaryOp::Neg && dtype == kBool), DtypeError,
               "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
               "mask, use logical_not() or x.eq(false) instead");
  TANDEM_CHECK(!((op == UnaryOp::Abs || op == UnaryOp::Relu) && dtype == kBool), DtypeError, op_name(op),
               ": bool inputs are not supported; convert with .to(kInt64) or .to(kFloat32) first");
}

}  // namespace

namespace detail {

Tensor unary_op(UnaryOp op, const Tensor& x, const UnaryParams& p, std::optional<Dtype> compute) {
  const char* name = op_name(op);
  if (!compute) {
    if (auto in = autocast::detail::inputs(name, {x}))
      return autocast::detail::excluded([&] { return unary_op(op, (*in)[0], p, compute); });
  }
  check_defined(name, {{"input", x}});
  check_unary_dtype(op, x.dtype());
  Recorder rec(grad_op(op), {x});
  Dtype dt = compute.value_or(!is_numeric_unary(op) && !is_floating_point(x.dtype()) ? kFloat32 : x.dtype());
  Tensor out = detail::make_result(x.sizes(), dt, x.device(), Origin::computed(name, x.origin()));
  run_unary(op, out, x.dtype() == dt ? x : x.to(dt), p);
  if (rec) {
    record_unary_params(rec.node(), p);
    if (unary_keeps(op) == Keep::Input) rec.save(x);
    if (unary_keeps(op) == Keep::Output) rec.save_output(out);
  }
  return rec.finish(out);
}

Tensor& unary_inplace(UnaryOp op, Tensor& x, const UnaryParams& p, std::optional<Dtype> compute) {
  const char* name = op_name(op);
  check_defined(name, {{"input", x}});
  check_unary_dtype(op, x.dtype());
  detail::check_writable(x, name);
  Dtype dt = compute.value_or(!is_numeric_unary(op) && !is_floating_point(x.dtype()) ? kFloat32 : x.dtype());
  TANDEM_CHECK(can_cast(dt, x.dtype()), DtypeError, name, "_: result type ", dt,
               " can't be cast to the desired output type ", x.dtype());
  autograd::check_inplace(x, name, "_");
  Recorder rec(grad_op(op), {x});
  if (rec) {
    record_unary_params(rec.node(), p);
    if (unary_keeps(op) == Keep::Input) rec.save_original(x);
  }
  if (dt == x.dtype()) {
    run_unary(op, x, x, p);
  } else {
    Tensor tmp = detail::make_result(x.sizes(), dt, x.device(), x.origin());
    run_unary(op, tmp, x.to(dt), p);
    x.copy_(tmp);
  }
  x.storage()->bump_version();
  if (rec && unary_keeps(op) == Keep::Output) rec.save_output(x);
  rec.finish_inplace(x);
  return x;
}

}  // namespace detail

using detail::unary_inplace;
using detail::unary_op;

namespace {

void check_binary_dtypes(BinaryOp op, Dtype a, Dtype b) {
  TANDEM_CHECK(!(op == BinaryOp::Sub && a == kBool && b == kBool), DtypeError,
               "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
               "logical_xor() operator instead");
  TANDEM_CHECK(!(op == BinaryOp::Sub && (a == kBool || b == kBool)), DtypeError,
               "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
               "invert a mask, use logical_not() instead");
}

Dtype compute_dtype(BinaryOp op, Dtype common) {
  if (op == BinaryOp::Div && !is_floating_point(common)) return kFloat32;
  return common;
}

bool has_alpha(BinaryOp op) { return op == BinaryOp::Add || op == BinaryOp::Sub; }

Tensor binary_compute(BinaryOp op, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const char* name = op_name(op);
  check_inputs(name, {{"self", a}, {"other", b}});
  check_binary_dtypes(op, a.dtype(), b.dtype());
  Dtype dt = compute_dtype(op, result_type(a, b));
  if (has_alpha(op)) check_alpha(name, dt, alpha);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  Tensor out =
      detail::make_result(shape, is_comparison(op) ? kBool : dt, a.device(), Origin::computed(name, a.origin()));
  run_binary(op, out, a.to(dt), b.to(dt), alpha);
  return out;
}

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b, const Scalar& alpha = 1) {
  if (auto in = autocast::detail::inputs(op_name(op), {a, b}))
    return autocast::detail::excluded([&] { return binary_op(op, (*in)[0], (*in)[1], alpha); });
  if (is_comparison(op)) return binary_compute(op, a, b, alpha);
  TANDEM_INTERNAL_ASSERT(is_arithmetic(op), op_name(op), " has no derivative");
  Recorder rec(grad_op(op), {a, b});
  Tensor out = binary_compute(op, a, b, alpha);
  if (rec) record_binary(rec, op, a, b, alpha);
  return rec.finish(out);
}

Tensor binary_op(BinaryOp op, const Tensor& a, const Scalar& b, const Scalar& alpha = 1) {
  check_defined(op_name(op), {{"self", a}});
  Dtype dt = compute_dtype(op, result_type(a, b));
  check_binary_dtypes(op, a.dtype(), b.is_bool() ? kBool : dt);
  if (has_alpha(op)) check_alpha(op_name(op), dt, alpha);
  Tensor bt = detail::scalar_tensor(b, dt, a.device());
  std::optional<Recorder> rec;
  if (!is_comparison(op)) rec.emplace(grad_op(op), Recorder::Inputs{a, bt});
  Tensor out = detail::make_result(a.sizes(), is_comparison(op) ? kBool : dt, a.device(),
                                   Origin::computed(op_name(op), a.origin()));
  run_binary(op, out, a.to(dt), bt, alpha);
  if (!rec) return out;
  if (*rec) record_binary(*rec, op, a, bt, alpha);
  return rec->finish(out);
}

Tensor& binary_inplace(BinaryOp op, Tensor& a, const Tensor& b, const Scalar& alpha = 1) {
  const char* name = op_name(op);
  check_inputs(name, {{"self", a}, {"other", b}});
  check_binary_dtypes(op, a.dtype(), b.dtype());
  detail::check_writable(a, name);
  Dtype dt = compute_dtype(op, result_type(a, b));
  TANDEM_CHECK(can_cast(dt, a.dtype()), DtypeError, name, "_: result type ", dt,
               " can't be cast to the desired output type ", a.dtype());
  if (has_alpha(op)) check_alpha(name, dt, alpha);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  TANDEM_CHECK(IntArrayRef(shape) == a.sizes(), ShapeError, name, "_: output with shape ", shape_str(a.sizes()),
               " doesn't match the broadcast shape ", shape_str(shape));
  autograd::check_inplace(a, name, "_");
  Recorder rec(grad_op(op), {a, b});
  if (rec) {
    // Mul and Div keep a's old value (for b's gradient); the others keep nothing of a.
    bool keep_old_a = (op == BinaryOp::Mul || op == BinaryOp::Div) && rec.node().needs_input_grad(1);
    Tensor old_a = a;
    if (keep_old_a) {
      AutoGradMode record(true);
      old_a = a.clone();
    }
    record_binary(rec, op, old_a, b, alpha);
  }
  if (dt == a.dtype()) {
    run_binary(op, a, a, unaliased(b.to(dt), a), alpha);
  } else {
    Tensor tmp = detail::make_result(a.sizes(), dt, a.device(), a.origin());
    run_binary(op, tmp, a.to(dt), b.to(dt), alpha);
    a.copy_(tmp);
  }
  a.storage()->bump_version();
  rec.finish_inplace(a);
  return a;
}

Tensor& binary_inplace(BinaryOp op, Tensor& a, const Scalar& b, const Scalar& alpha = 1) {
  check_defined(op_name(op), {{"self", a}});
  Dtype dt = compute_dtype(op, result_type(a, b));
  check_binary_dtypes(op, a.dtype(), b.is_bool() ? kBool : dt);
  return binary_inplace(op, a, detail::scalar_tensor(b, dt, a.device()), alpha);
}

// A scalar operand standing first (2 - x, 2 / x, pow(2, x), where(c, 2, x)):
// a 0-dim tensor on the device of the tensor operand, carrying its origin so
// that the result (and any device error) points at that tensor's line.
Tensor wrap_scalar(const Scalar& s, const Tensor& like, Dtype dtype) {
  Tensor t = detail::scalar_tensor(s, dtype, like.device());
  t.set_origin(like.origin());
  return t;
}

}  // namespace

// ---------------------------------------------------------------- unary
Tensor neg(const Tensor& x) { return unary_op(UnaryOp::Neg, x); }
Tensor abs(const Tensor& x) { return unary_op(UnaryOp::Abs, x); }
Tensor exp(const Tensor& x) { return unary_op(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary_op(UnaryOp::Log, x); }
Tensor log1p(const Tensor& x) { return unary_op(UnaryOp::Log1p, x); }
Tensor sqrt(const Tensor& x) { return unary_op(UnaryOp::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary_op(UnaryOp::Rsqrt, x); }
Tensor sin(const Tensor& x) { return unary_op(UnaryOp::Sin, x); }
Tensor cos(const Tensor& x) { return unary_op(UnaryOp::Cos, x); }
Tensor tanh(const Tensor& x) { return unary_op(UnaryOp::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary_op(UnaryOp::Sigmoid, x); }
Tensor relu(const Tensor& x) { return unary_op(UnaryOp::Relu, x); }
Tensor silu(const Tensor& x) { return unary_op(UnaryOp::Silu, x); }
Tensor erf(const Tensor& x) { return unary_op(UnaryOp::Erf, x); }

Tensor gelu(const Tensor& x, const std::string& approximate) {
  TANDEM_CHECK(approximate == "none" || approximate == "tanh", ValueError,
               "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return unary_op(approximate == "tanh" ? UnaryOp::GeluTanh : UnaryOp::Gelu, x);
}

Tensor pow(const Tensor& x, const Scalar& exponent) {
  if (auto in = autocast::detail::inputs("pow", {x}))
    return autocast::detail::excluded([&] { return pow((*in)[0], exponent); });
  check_defined("pow", {{"self", x}});
  TANDEM_CHECK(!(is_integral(x.dtype(), true) && exponent.is_integral() && exponent.to_int() < 0), ValueError,
               "pow: integers to negative integer powers are not allowed (", x.dtype(), " tensor to the power ",
               exponent, "); convert the tensor to a floating dtype first");
  Dtype dt = result_type(x, exponent);
  return unary_op(UnaryOp::PowScalar, x, PowScalarParams{exponent}, dt);
}
Tensor pow(const Tensor& x, const Tensor& exponent) { return binary_op(BinaryOp::Pow, x, exponent); }
Tensor pow(const Scalar& x, const Tensor& exponent) {
  // The exponent is cast before the scalar is wrapped in its dtype (PyTorch's pow.Scalar keeps x exact).
  if (auto in = autocast::detail::inputs("pow", {exponent}))
    return autocast::detail::excluded([&] { return pow(x, (*in)[0]); });
  check_defined("pow", {{"exponent", exponent}});
  return binary_op(BinaryOp::Pow, wrap_scalar(x, exponent, result_type(exponent, x)), exponent);
}

// ---------------------------------------------------------------- binary
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return binary_op(BinaryOp::Add, a, b, alpha); }
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return binary_op(BinaryOp::Add, a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return binary_op(BinaryOp::Sub, a, b, alpha); }
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return binary_op(BinaryOp::Sub, a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Mul, a, b); }
Tensor mul(const Tensor& a, const Scalar& b) { return binary_op(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Div, a, b); }
Tensor div(const Tensor& a, const Scalar& b) { return binary_op(BinaryOp::Div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Minimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return binary_op(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return binary_op(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return binary_op(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return binary_op(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return binary_op(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return binary_op(BinaryOp::Ge, a, b); }

// ---------------------------------------------------------------- where, clamp, masked_fill
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_inputs("where", {{"condition", cond}, {"input", a}, {"other", b}});
  TANDEM_CHECK(cond.dtype() == kBool, DtypeError,
               "where: expected condition to be a bool tensor, but got a tensor with dtype ", cond.dtype());
  Dtype dt = result_type(a, b);
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Recorder rec(GradOp::Where, {a, b});
  Tensor out = detail::make_result(shape, dt, a.device(), Origin::computed("where", a.origin()));
  dispatch(out.device(), cpu::where, cuda::where, out, cond, a.to(dt), b.to(dt));
  if (rec) rec.save(cond);  // saved: {cond}
  return rec.finish(out);
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  check_inputs("where", {{"condition", cond}, {"input", a}});
  Dtype dt = result_type(a, b);
  check_fits("where", b, dt);
  return where(cond, a, wrap_scalar(b, a, dt));
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  check_inputs("where", {{"condition", cond}, {"other", b}});
  Dtype dt = result_type(b, a);
  check_fits("where", a, dt);
  return where(cond, wrap_scalar(a, b, dt), b);
}

namespace {
Dtype clamp_dtype(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  PromotionState s;
  add_tensor(s, x);
  if (lo) update(s.wrapped, lo->default_dtype());
  if (hi) update(s.wrapped, hi->default_dtype());
  return finish(s);
}

// The dtype clamp computes in, after checking the bounds fit it.
Dtype checked_clamp_dtype(const char* op, const Tensor& x, const std::optional<Scalar>& min,
                          const std::optional<Scalar>& max) {
  TANDEM_CHECK(min || max, ValueError, op, ": at least one of 'min' or 'max' must not be None");
  Dtype dt = clamp_dtype(x, min, max);
  TANDEM_CHECK(dt != kBool, DtypeError, op, ": not supported for bool tensors with bool bounds");
  if (min) check_fits(op, *min, dt);
  if (max) check_fits(op, *max, dt);
  return dt;
}
}  // namespace

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  check_defined("clamp", {{"self", x}});
  return unary_op(UnaryOp::Clamp, x, ClampParams{min, max}, checked_clamp_dtype("clamp", x, min, max));
}
Tensor clamp_min(const Tensor& x, const Scalar& min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& max) { return clamp(x, std::nullopt, max); }

namespace {
// Checks masked_fill's arguments; returns the broadcast shape of x and mask.
// The value is converted to x's dtype (2.5 fills an int tensor with 2, as
// PyTorch) and must fit it.
Shape check_masked_fill(const char* name, const Tensor& x, const Tensor& mask, const Scalar& value) {
  check_inputs(name, {{"self", x}, {"mask", mask}});
  TANDEM_CHECK(mask.dtype() == kBool, DtypeError, name, ": only supports boolean masks, but got mask with dtype ",
               mask.dtype());
  check_fits(name, value, x.dtype());
  return broadcast_shapes(x.sizes(), mask.sizes(), name);
}

void run_masked_fill(const Tensor& out, const Tensor& x, const Tensor& mask, const Scalar& value) {
  return dispatch(out.device(), cpu::masked_fill, cuda::masked_fill, out, x, mask, value);
}
}  // namespace

// Out of place, x and mask broadcast together (as torch.masked_fill).
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  Shape shape = check_masked_fill("masked_fill", x, mask, value);
  Recorder rec(GradOp::MaskedFill, {x});
  Tensor out = detail::make_result(shape, x.dtype(), x.device(), Origin::computed("masked_fill", x.origin()));
  run_masked_fill(out, x, mask, value);
  if (rec) rec.save(mask);  // saved: {mask}
  return rec.finish(out);
}

// ---------------------------------------------------------------- activation backward
namespace detail {
// grad_output and the saved tensor (named "output" or "self" in messages, as
// the table's saved column says) as checked in elementwise.h; no promotion,
// no broadcasting, no recording.
Tensor activation_backward(BinaryOp op, const Tensor& grad_output, const Tensor& saved, const UnaryParams& params) {
  TANDEM_INTERNAL_ASSERT(is_activation_backward(op), "activation_backward: ", op_name(op), " is not one");
  const char* name = op_name(op);
  const char* saved_name = activation_backward_saves(op) == Keep::Output ? "output" : "self";
  check_inputs(name, {{"grad_output", grad_output}, {saved_name, saved}});
  TANDEM_CHECK(is_floating_point(grad_output.dtype()) && grad_output.dtype() == saved.dtype(), DtypeError, name,
               ": expected grad_output and ", saved_name, " of one floating dtype, got ", grad_output.dtype(), " and ",
               saved.dtype());
  TANDEM_CHECK(grad_output.sizes() == saved.sizes(), ShapeError, name, ": expected grad_output and ", saved_name,
               " of one shape, got ", shape_str(grad_output.sizes()), " and ", shape_str(saved.sizes()));
  TANDEM_CHECK(!(GradMode::is_enabled() && (grad_output.requires_grad() || saved.requires_grad())), ValueError, name,
               ": records no graph, so its result cannot be differentiated, but an input requires grad; call it "
               "under NoGradGuard, or differentiate the composite formula instead");
  Tensor out = detail::make_result(grad_output.sizes(), grad_output.dtype(), grad_output.device(),
                                   Origin::computed(name, grad_output.origin()));
  run_binary(op, out, grad_output, saved, 1, params);
  return out;
}

Tensor relu_backward(const Tensor& grad_output, const Tensor& output) {
  return activation_backward(BinaryOp::ReluBackward, grad_output, output);
}
Tensor tanh_backward(const Tensor& grad_output, const Tensor& output) {
  return activation_backward(BinaryOp::TanhBackward, grad_output, output);
}
Tensor sigmoid_backward(const Tensor& grad_output, const Tensor& output) {
  return activation_backward(BinaryOp::SigmoidBackward, grad_output, output);
}
Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, const std::string& approximate) {
  TANDEM_CHECK(approximate == "none" || approximate == "tanh", ValueError,
               "gelu_backward: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return activation_backward(approximate == "tanh" ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward, grad_output,
                             self);
}
Tensor silu_backward(const Tensor& grad_output, const Tensor& self) {
  return activation_backward(BinaryOp::SiluBackward, grad_output, self);
}
}  // namespace detail

// ---------------------------------------------------------------- operators
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) {
  check_defined("sub", {{"other", b}});
  Dtype dt = result_type(b, a);
  check_binary_dtypes(BinaryOp::Sub, a.is_bool() ? kBool : dt, b.dtype());
  return sub(wrap_scalar(a, b, dt), b);
}
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) {
  check_defined("div", {{"other", b}});
  return div(wrap_scalar(a, b, result_type(b, a)), b);
}
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return a.div_(b); }

// ---------------------------------------------------------------- Tensor members
Tensor Tensor::neg() const { return tandem::neg(*this); }
Tensor Tensor::abs() const { return tandem::abs(*this); }
Tensor Tensor::exp() const { return tandem::exp(*this); }
Tensor Tensor::log() const { return tandem::log(*this); }
Tensor Tensor::log1p() const { return tandem::log1p(*this); }
Tensor Tensor::sqrt() const { return tandem::sqrt(*this); }
Tensor Tensor::rsqrt() const { return tandem::rsqrt(*this); }
Tensor Tensor::sin() const { return tandem::sin(*this); }
Tensor Tensor::cos() const { return tandem::cos(*this); }
Tensor Tensor::tanh() const { return tandem::tanh(*this); }
Tensor Tensor::sigmoid() const { return tandem::sigmoid(*this); }
Tensor Tensor::relu() const { return tandem::relu(*this); }
Tensor Tensor::gelu(const std::string& approximate) const { return tandem::gelu(*this, approximate); }
Tensor Tensor::silu() const { return tandem::silu(*this); }
Tensor Tensor::erf() const { return tandem::erf(*this); }
Tensor Tensor::pow(const Scalar& e) const { return tandem::pow(*this, e); }
Tensor Tensor::pow(const Tensor& e) const { return tandem::pow(*this, e); }
Tensor& Tensor::neg_() { return unary_inplace(UnaryOp::Neg, *this); }
Tensor& Tensor::abs_() { return unary_inplace(UnaryOp::Abs, *this); }
Tensor& Tensor::exp_() { return unary_inplace(UnaryOp::Exp, *this); }
Tensor& Tensor::log_() { return unary_inplace(UnaryOp::Log, *this); }
Tensor& Tensor::sqrt_() { return unary_inplace(UnaryOp::Sqrt, *this); }
Tensor& Tensor::sigmoid_() { return unary_inplace(UnaryOp::Sigmoid, *this); }
Tensor& Tensor::tanh_() { return unary_inplace(UnaryOp::Tanh, *this); }
Tensor& Tensor::relu_() { return unary_inplace(UnaryOp::Relu, *this); }
Tensor& Tensor::pow_(const Scalar& e) {
  TANDEM_CHECK(!(is_integral(dtype(), true) && e.is_integral() && e.to_int() < 0), ValueError,
               "pow_: integers to negative integer powers are not allowed");
  return unary_inplace(UnaryOp::PowScalar, *this, PowScalarParams{e}, result_type(*this, e));
}

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return tandem::add(*this, o, alpha); }
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const { return tandem::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return tandem::sub(*this, o, alpha); }
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const { return tandem::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return tandem::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return tandem::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return tandem::div(*this, o); }
Tensor Tensor::div(const Scalar& o) const { return tandem::div(*this, o); }
Tensor Tensor::maximum(const Tensor& o) const { return tandem::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return tandem::minimum(*this, o); }
Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) { return binary_inplace(BinaryOp::Add, *this, o, alpha); }
Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) { return binary_inplace(BinaryOp::Add, *this, o, alpha); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) { return binary_inplace(BinaryOp::Sub, *this, o, alpha); }
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) { return binary_inplace(BinaryOp::Sub, *this, o, alpha); }
Tensor& Tensor::mul_(const Tensor& o) { return binary_inplace(BinaryOp::Mul, *this, o); }
Tensor& Tensor::mul_(const Scalar& o) { return binary_inplace(BinaryOp::Mul, *this, o); }
Tensor& Tensor::div_(const Tensor& o) { return binary_inplace(BinaryOp::Div, *this, o); }
Tensor& Tensor::div_(const Scalar& o) { return binary_inplace(BinaryOp::Div, *this, o); }

// The value is converted to the tensor's dtype (2.5 fills an int tensor with
// 2, as PyTorch) and must fit it. Expanded views may be filled: every write
// to a shared element stores the same value (PyTorch allows it too).
Tensor& Tensor::fill_(const Scalar& value) {
  check_defined("fill_", {{"self", *this}});
  check_fits("fill_", value, dtype());
  autograd::check_inplace(*this, "fill_");
  Recorder rec(GradOp::Fill, {*this});
  fill_unchecked(*this, value);
  storage()->bump_version();
  rec.finish_inplace(*this);
  return *this;
}
Tensor& Tensor::zero_() { return fill_(0); }

Tensor Tensor::eq(const Tensor& o) const { return tandem::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return tandem::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return tandem::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return tandem::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return tandem::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return tandem::ge(*this, o); }
Tensor Tensor::eq(const Scalar& o) const { return tandem::eq(*this, o); }
Tensor Tensor::ne(const Scalar& o) const { return tandem::ne(*this, o); }
Tensor Tensor::lt(const Scalar& o) const { return tandem::lt(*this, o); }
Tensor Tensor::le(const Scalar& o) const { return tandem::le(*this, o); }
Tensor Tensor::gt(const Scalar& o) const { return tandem::gt(*this, o); }
Tensor Tensor::ge(const Scalar& o) const { return tandem::ge(*this, o); }

Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return tandem::clamp(*this, min, max);
}
Tensor Tensor::clamp_min(const Scalar& min) const { return tandem::clamp_min(*this, min); }
Tensor Tensor::clamp_max(const Scalar& max) const { return tandem::clamp_max(*this, max); }
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  check_defined("clamp_", {{"self", *this}});
  return unary_inplace(UnaryOp::Clamp, *this, ClampParams{min, max}, checked_clamp_dtype("clamp_", *this, min, max));
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return tandem::masked_fill(*this, mask, value);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) {
  Shape shape = check_masked_fill("masked_fill_", *this, mask, value);
  TANDEM_CHECK(IntArrayRef(shape) == sizes(), ShapeError, "masked_fill_: mask of shape ", shape_str(mask.sizes()),
               " cannot be broadcast to the input's shape ", shape_str(sizes()));
  detail::check_writable(*this, "masked_fill_");
  autograd::check_inplace(*this, "masked_fill_");
  Recorder rec(GradOp::MaskedFill, {*this});
  if (rec) rec.save(mask.clone());  // a clone: mask may share memory with self
  run_masked_fill(*this, *this, unaliased(mask, *this), value);
  storage()->bump_version();
  rec.finish_inplace(*this);
  return *this;
}

}  // namespace tandem

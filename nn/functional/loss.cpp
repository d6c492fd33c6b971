// The losses of nn/functional/loss.h: each checks its arguments at the door
// in PyTorch's words, then composes differentiable tensor ops (log_softmax,
// gather, masked_fill, sums), so autograd and every device come for free.
#include "nn/functional/loss.h"

#include <iostream>
#include <mutex>
#include <vector>

#include "kernels/cuda/device_check.h"
#include "tensor/core/errors.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/shape.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/index.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/shape_ops.h"

namespace tandem::nn {

const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return "none";
    case Reduction::Mean: return "mean";
    case Reduction::Sum: return "sum";
  }
  TANDEM_INTERNAL_ASSERT(false, "unknown Reduction ", static_cast<int>(reduction));
}

}  // namespace tandem::nn

namespace tandem::nn::functional {

namespace {

Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return loss;
    case Reduction::Mean: return loss.mean();
    case Reduction::Sum: return loss.sum();
  }
  TANDEM_INTERNAL_ASSERT(false, "unknown Reduction ", static_cast<int>(reduction));
}

void check_floating_input(const char* op, const Tensor& input, const char* what) {
  TANDEM_CHECK(input.is_floating_point(), DtypeError, op, ": expected a floating-point input (", what, "), got ",
               input.dtype(), "; convert it with input.to(kFloat32)");
}

// ---------------------------------------------------------------- class-index targets

// The class dim of an input of shape (C) or (N, C, d1, ...).
int64_t class_dim_of(const Tensor& input) { return input.dim() == 1 ? 0 : 1; }

void check_label_smoothing(double label_smoothing) {
  TANDEM_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
               "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
}

// weight: (C) of the input's dtype, or undefined.
void check_class_weight(const char* op, const Tensor& input, const Tensor& weight) {
  if (!weight.defined()) return;
  const int64_t n_classes = input.size(class_dim_of(input));
  TANDEM_CHECK(weight.dim() == 1 && weight.numel() == n_classes, ShapeError, op,
               ": weight tensor should be defined either for all ", n_classes,
               " classes or no classes but got weight tensor of shape: ", shape_str(weight.sizes()),
               " (the input's class dim is dim ", class_dim_of(input), " of ", shape_str(input.sizes()), ")");
  TANDEM_CHECK(weight.dtype() == input.dtype(), DtypeError, "expected scalar type ", torch_scalar_name(input.dtype()),
               " but found ", torch_scalar_name(weight.dtype()), " (", op, ": the weight is ", weight.dtype(),
               " and the input ", input.dtype(), "; convert the weight with weight.to(input.dtype()))");
}

// The shape a target of class indices has for this input: () for (C), (N)
// for (N, C), (N, d1, ...) for (N, C, d1, ...).
Shape class_index_shape(const Tensor& input) {
  if (input.dim() == 1) return {};
  Shape shape{input.size(0)};
  for (int64_t d = 2; d < input.dim(); ++d) shape.push_back(input.size(d));
  return shape;
}

// The shape and dtype rules of PyTorch's nll_loss_nd for a target of class
// indices.
void check_class_index_target(const char* op, const Tensor& input, const Tensor& target) {
  TANDEM_CHECK(target.dtype() == kInt64, DtypeError, "expected scalar type Long but found ",
               torch_scalar_name(target.dtype()), " (", op, ": a target of class indices must be int64, got ",
               target.dtype(), " of shape ", shape_str(target.sizes()), "; convert it with target.to(kInt64))");
  if (input.dim() == 1) {
    TANDEM_CHECK(target.dim() == 0, ShapeError, "size mismatch (got input: ", shape_str(input.sizes()),
                 ", target: ", shape_str(target.sizes()), ") (", op,
                 ": an input of shape (C) takes a 0-dim target holding one class index)");
    return;
  }
  const Shape expected = class_index_shape(input);
  TANDEM_CHECK(target.dim() == 0 || target.size(0) == input.size(0), ShapeError, "Expected input batch_size (",
               input.size(0), ") to match target batch_size (", target.size(0), "). (", op, ": input of shape ",
               shape_str(input.sizes()), " takes a target of shape ", shape_str(expected), ")");
  TANDEM_CHECK(input.dim() != 2 || target.dim() <= 1, ShapeError,
               "0D or 1D target tensor expected, multi-target not supported (", op, ": input of shape ",
               shape_str(input.sizes()), " takes a target of shape ", shape_str(expected), ", got ",
               shape_str(target.sizes()), ")");
  TANDEM_CHECK(target.sizes() == IntArrayRef(expected), ShapeError, "Expected target size ", shape_str(expected),
               ", got ", shape_str(target.sizes()), " (", op, ": input of shape ", shape_str(input.sizes()),
               " is (N, C, d1, ...) and takes a target of shape (N, d1, ...))");
}

// IndexError naming the first target (in row-major order) outside
// [0, n_classes) that is not ignore_index, as PyTorch's CPU kernel does. The
// scan runs on a host copy: only on the error path.
[[noreturn]] void throw_target_out_of_bounds(const char* op, const Tensor& target, int64_t n_classes,
                                             int64_t ignore_index) {
  const std::vector<int64_t> values = target.to_vector<int64_t>();
  for (int64_t v : values) {
    if (v != ignore_index && (v < 0 || v >= n_classes)) {
      throw IndexError(detail::str_cat("Target ", v, " is out of bounds. (", op, ": class indices must lie in [0, ",
                                       n_classes, ") for an input with ", n_classes,
                                       " classes, or equal ignore_index=", ignore_index, ")"));
    }
  }
  TANDEM_INTERNAL_ASSERT(false, op, ": no target out of bounds found on the host");
}

// The loss of each target: -weight[t] * logp[n, t, ...] mixed with the label
// smoothing term, 0 where t == ignore_index, then reduced; Mean divides by the
// total weight (or the count) of the targets not ignored, as PyTorch.
//   logp: (C) or (N, C, d1, ...); target: () or (N, d1, ...), int64, checked.
Tensor class_index_loss(const char* op, const Tensor& logp, const Tensor& target, const Tensor& weight,
                        Reduction reduction, int64_t ignore_index, double label_smoothing) {
  const int64_t class_dim = class_dim_of(logp);
  const int64_t n_classes = logp.size(class_dim);
  Tensor ignored = target.eq(ignore_index);      // target's shape, bool
  Tensor safe = target.masked_fill(ignored, 0);  // a valid index everywhere once checked
  if (safe.numel() > 0 && !safe.device().is_cuda()) {
    // On the cpu, a pair of reductions read at once, and the first bad target
    // named. On a cuda device the gather below checks them without a wait,
    // in the target's words, and the error comes at the next one
    // (kernels/cuda/device_check.h).
    std::vector<int64_t> ends = stack({safe.amin(), safe.amax()}).to_vector<int64_t>();
    if (ends[0] < 0 || ends[1] >= n_classes) throw_target_out_of_bounds(op, target, n_classes, ignore_index);
  }
  Tensor picked;         // target's shape, logp at each target class
  Tensor target_weight;  // target's shape: weight[t], 0 where ignored
  {
    cuda::detail::ClassTargetScope as_targets(op, ignore_index);
    picked = logp.gather(class_dim, safe.unsqueeze(class_dim)).squeeze(class_dim);
    if (weight.defined()) {
      target_weight = weight.index_select(0, safe.reshape({-1})).view(target.sizes()).masked_fill(ignored, 0);
    }
  }
  Tensor loss = weight.defined() ? picked.neg() * target_weight : picked.neg();
  if (label_smoothing > 0) {
    // PyTorch's smoothing term: the (weighted) sum of -logp over the classes.
    Tensor weighted = logp;
    if (weight.defined()) {
      Shape bshape(logp.dim(), 1);
      bshape[class_dim] = n_classes;
      weighted = logp * weight.reshape(bshape);
    }
    Tensor smooth = weighted.sum({class_dim}).neg();
    loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / static_cast<double>(n_classes));
  }
  // masked_fill rather than a product with 0, so that an ignored target whose
  // log-probability is -inf (a masked logit) still contributes 0, not NaN.
  loss = loss.masked_fill(ignored, 0);
  switch (reduction) {
    case Reduction::None: return loss;
    case Reduction::Sum: return loss.sum();
    case Reduction::Mean: {
      // All targets ignored, or none at all: 0 / 0 = NaN, as PyTorch.
      Tensor denominator = weight.defined() ? target_weight.sum() : target.ne(ignore_index).sum();
      return loss.sum() / denominator;
    }
  }
  TANDEM_INTERNAL_ASSERT(false, "unknown Reduction ", static_cast<int>(reduction));
}

void check_class_input(const char* op, const Tensor& input, const char* what) {
  TANDEM_CHECK(input.dim() >= 1, ShapeError, "Expected 1 or more dimensions (got 0) (", op,
               ": the input must be (C), (N, C) or (N, C, d1, ...))");
  check_floating_input(op, input, what);
}

// ---------------------------------------------------------------- class-probability targets

// -sum over classes of target * logp (each class weighted), PyTorch's
// cross_entropy_loss_prob_target. Mean divides by the number of
// distributions, N * d1 * ...
Tensor probability_target_loss(const Tensor& logp, const Tensor& target, const Tensor& weight, Reduction reduction,
                               double label_smoothing) {
  const int64_t class_dim = class_dim_of(logp);
  const int64_t n_classes = logp.size(class_dim);
  Tensor smoothed = target;
  if (label_smoothing > 0) {
    smoothed = target * (1.0 - label_smoothing) + label_smoothing / static_cast<double>(n_classes);
  }
  Tensor product = logp * smoothed;
  if (weight.defined()) {
    Shape bshape(logp.dim(), 1);
    bshape[class_dim] = n_classes;
    product = product * weight.reshape(bshape);
  }
  switch (reduction) {
    case Reduction::None: return product.sum({class_dim}).neg();
    case Reduction::Sum: return product.sum().neg();
    case Reduction::Mean: {
      // No distributions at all: 0 / 0 = NaN, as PyTorch.
      const double count = logp.numel() == 0 ? 0.0 : static_cast<double>(logp.numel()) / static_cast<double>(n_classes);
      return product.sum().neg() / count;
    }
  }
  TANDEM_INTERNAL_ASSERT(false, "unknown Reduction ", static_cast<int>(reduction));
}

// ---------------------------------------------------------------- elementwise losses

// PyTorch's warning for a target that only broadcasts to the input, printed
// once per loss per process (libtorch prints it on every call, which floods
// a training loop).
void warn_if_broadcast(const char* op, const Tensor& input, const Tensor& target, std::once_flag& once) {
  if (input.sizes() == target.sizes()) return;
  std::call_once(once, [&] {
    std::cerr << "tandem: warning: " << op << ": Using a target size (" << shape_str(target.sizes())
              << ") that is different to the input size (" << shape_str(input.sizes())
              << "). This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                 "same size.\n";
  });
}

void check_pointwise(const char* op, const Tensor& input, const Tensor& target) {
  check_inputs(op, {{"input", input}, {"target", target}});
  TANDEM_CHECK(is_floating_point(result_type(input, target)), DtypeError, op,
               ": expected a floating-point input or target, got ", input.dtype(), " and ", target.dtype(),
               "; convert the input with input.to(kFloat32)");
  broadcast_shapes(input.sizes(), target.sizes(), op);
}

// Whether a tensor of shape `from` broadcasts to exactly `to`.
bool broadcasts_to(IntArrayRef from, IntArrayRef to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

void check_elementwise_weight(const char* op, const char* name, const Tensor& weight, const Tensor& input) {
  if (!weight.defined()) return;
  TANDEM_CHECK(broadcasts_to(weight.sizes(), input.sizes()), ShapeError, op, ": ", name, " of shape ",
               shape_str(weight.sizes()), " does not broadcast to the input's shape ", shape_str(input.sizes()),
               " (for an (N, C) input, give a (C) tensor to weigh each class)");
  TANDEM_CHECK(weight.dtype() == input.dtype(), DtypeError, "expected scalar type ", torch_scalar_name(input.dtype()),
               " but found ", torch_scalar_name(weight.dtype()), " (", op, ": ", name, " is ", weight.dtype(),
               " and the input ", input.dtype(), "; convert it with ", name, ".to(input.dtype()))");
}

std::once_flag mse_broadcast_warning, l1_broadcast_warning;

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& options) {
  const char* op = "cross_entropy";
  const Tensor& weight = options.weight();
  if (auto in = autocast::detail::inputs(op, {input, target, weight})) {
    return autocast::detail::excluded(
        [&] { return cross_entropy((*in)[0], (*in)[1], CrossEntropyFuncOptions(options).weight((*in)[2])); });
  }
  check_inputs(op, {{"input", input}, {"target", target}});
  check_same_device(op, {{"input", input}, {"target", target}, {"weight", weight}});
  check_class_input(op, input, "logits");
  check_label_smoothing(options.label_smoothing());
  const int64_t class_dim = class_dim_of(input);
  if (input.sizes() == target.sizes()) {
    // A target of the input's shape holds class probabilities, as in PyTorch.
    TANDEM_CHECK(target.is_floating_point(), DtypeError,
                 "Expected floating point type for target with class probabilities, got ",
                 torch_scalar_name(target.dtype()), " (", op, ": a target of the input's shape ",
                 shape_str(input.sizes()), " holds class probabilities; class indices have shape ",
                 shape_str(class_index_shape(input)), ")");
    TANDEM_CHECK(options.ignore_index() < 0, ValueError, "ignore_index is not supported for floating point target (",
                 op, ": got ignore_index=", options.ignore_index(),
                 " with class-probability targets; leave it at its default -100)");
    if (weight.defined()) check_class_weight(op, input, weight);
    return probability_target_loss(input.log_softmax(class_dim), target, weight, options.reduction(),
                                   options.label_smoothing());
  }
  TANDEM_CHECK(!target.is_floating_point(), DtypeError, "expected scalar type Long but found ",
               torch_scalar_name(target.dtype()), " (", op, ": a floating target holds class probabilities and must ",
               "have the input's shape ", shape_str(input.sizes()), ", got ", shape_str(target.sizes()),
               "; a target of class indices is int64 of shape ", shape_str(class_index_shape(input)), ")");
  check_class_index_target(op, input, target);
  check_class_weight(op, input, weight);
  return class_index_loss(op, input.log_softmax(class_dim), target, weight, options.reduction(), options.ignore_index(),
                          options.label_smoothing());
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options) {
  const char* op = "nll_loss";
  const Tensor& weight = options.weight();
  if (auto in = autocast::detail::inputs(op, {input, target, weight})) {
    return autocast::detail::excluded(
        [&] { return nll_loss((*in)[0], (*in)[1], NLLLossFuncOptions(options).weight((*in)[2])); });
  }
  check_inputs(op, {{"input", input}, {"target", target}});
  check_same_device(op, {{"input", input}, {"target", target}, {"weight", weight}});
  check_class_input(op, input, "log-probabilities");
  check_class_index_target(op, input, target);
  check_class_weight(op, input, weight);
  return class_index_loss(op, input, target, weight, options.reduction(), options.ignore_index(), 0.0);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options) {
  if (auto in = autocast::detail::inputs("mse_loss", {input, target}))
    return autocast::detail::excluded([&] { return mse_loss((*in)[0], (*in)[1], options); });
  check_pointwise("mse_loss", input, target);
  warn_if_broadcast("mse_loss", input, target, mse_broadcast_warning);
  Tensor diff = input - target;
  return reduce(diff * diff, options.reduction());
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options) {
  if (auto in = autocast::detail::inputs("l1_loss", {input, target}))
    return autocast::detail::excluded([&] { return l1_loss((*in)[0], (*in)[1], options); });
  check_pointwise("l1_loss", input, target);
  warn_if_broadcast("l1_loss", input, target, l1_broadcast_warning);
  return reduce((input - target).abs(), options.reduction());
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& options) {
  const char* op = "binary_cross_entropy_with_logits";
  const Tensor& weight = options.weight();
  const Tensor& pos_weight = options.pos_weight();
  if (auto in = autocast::detail::inputs(op, {input, target, weight, pos_weight})) {
    return autocast::detail::excluded([&] {
      return binary_cross_entropy_with_logits(
          (*in)[0], (*in)[1], BinaryCrossEntropyWithLogitsFuncOptions(options).weight((*in)[2]).pos_weight((*in)[3]));
    });
  }
  check_inputs(op, {{"input", input}, {"target", target}});
  check_same_device(op, {{"input", input}, {"target", target}, {"weight", weight}, {"pos_weight", pos_weight}});
  check_floating_input(op, input, "logits");
  TANDEM_CHECK(target.is_floating_point(), DtypeError, op,
               ": expected a floating-point target (probabilities in [0, 1]), got ", target.dtype(),
               "; convert it with target.to(input.dtype())");
  TANDEM_CHECK(target.sizes() == input.sizes(), ShapeError, "Target size (", shape_str(target.sizes()),
               ") must be the same as input size (", shape_str(input.sizes()), ") (", op,
               ": for one logit per example, reshape the target, e.g. target.view_as(input))");
  check_elementwise_weight(op, "weight", weight, input);
  check_elementwise_weight(op, "pos_weight", pos_weight, input);

  // -log(sigmoid(x)) = log(1 + exp(-x)) = m + log(exp(-m) + exp(-x - m)) for
  // any m; m = max(-x, 0) keeps both exponents <= 0. The identity holds for
  // every m, so m is a constant to autograd: the gradient is exact
  // everywhere, x = 0 included (where relu/abs forms get 0 instead of -1/2).
  Tensor m;
  {
    NoGradGuard no_grad;
    m = input.neg().clamp_min(0);
  }
  Tensor neg_log_sigmoid = (input.neg() - m).exp().add(m.neg().exp()).log().add(m);
  // (1 - t) * x - log(sigmoid(x)) * (1 + (pos_weight - 1) * t), PyTorch's form.
  Tensor log_weight = pos_weight.defined() ? (pos_weight - 1.0) * target + 1.0 : Tensor();
  Tensor loss = (1.0 - target) * input + (log_weight.defined() ? neg_log_sigmoid * log_weight : neg_log_sigmoid);
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, options.reduction());
}

}  // namespace tandem::nn::functional

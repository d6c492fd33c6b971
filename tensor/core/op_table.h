// The op table: every elementwise op declared once, with what each layer
// needs to know of it. The lists are X-macros; each layer expands them with
// its own X, so that nothing about an op is written twice:
//   here                           UnaryOp, BinaryOp, their names and dtype groups, UnaryParams
//   tensor/core/autograd_meta.h    GradOp's elementwise values and PyTorch's node names
//   kernels/functors/visit.h       op -> functor, for the CPU loops and the CUDA launchers alike
//   tensor/ops/elementwise.cpp     what autograd keeps of each op
//   autograd/rules.cpp             the dispatch to the unary and binary rules
// Adding an op (docs/architecture.md, "How to add an op"): a line here (and its
// parameter struct if it takes any), its functor in kernels/functors/elementwise.h,
// its public function in tensor/ops/elementwise.h, its derivative in
// autograd/rules_elementwise.cpp (a switch without default: a missing one is a
// compile error).
#pragma once

#include <cstdint>
#include <optional>
#include <variant>

#include "tensor/core/scalar.h"

// ---- unary ops: X(Name, "name", dtypes, keeps, Params, fused backward, "node name")
//   Name      UnaryOp::Name, GradOp::Name, and its functor fn::Name<M>
//   dtypes    Numeric: every numeric dtype, computed in its own type;
//             Floating: floating dtypes, integer and bool inputs computed in float32
//   keeps     what the derivative needs besides the gradient: Nothing, Input or Output
//             (an in-place op keeps a copy of its input, taken before the write)
//   Params    NoParams, or the struct below that its functor is built from
//   backward  the activation-backward BinaryOp its rule runs when nothing records, or None
//   node name what grad_fn()->name() says, PyTorch's name
#define TANDEM_UNARY_OPS(X)                                                                             \
  X(Neg, "neg", Numeric, Nothing, NoParams, None, "NegBackward0")                                       \
  X(Abs, "abs", Numeric, Input, NoParams, None, "AbsBackward0")                                         \
  X(Exp, "exp", Floating, Output, NoParams, None, "ExpBackward0")                                       \
  X(Log, "log", Floating, Input, NoParams, None, "LogBackward0")                                        \
  X(Log1p, "log1p", Floating, Input, NoParams, None, "Log1PBackward0")                                  \
  X(Sqrt, "sqrt", Floating, Output, NoParams, None, "SqrtBackward0")                                    \
  X(Rsqrt, "rsqrt", Floating, Output, NoParams, None, "RsqrtBackward0")                                 \
  X(Sin, "sin", Floating, Input, NoParams, None, "SinBackward0")                                        \
  X(Cos, "cos", Floating, Input, NoParams, None, "CosBackward0")                                        \
  X(Tanh, "tanh", Floating, Output, NoParams, TanhBackward, "TanhBackward0")                            \
  X(Sigmoid, "sigmoid", Floating, Output, NoParams, SigmoidBackward, "SigmoidBackward0")                \
  X(Relu, "relu", Numeric, Output, NoParams, ReluBackward, "ReluBackward0")                             \
  X(Gelu, "gelu", Floating, Input, NoParams, GeluBackward, "GeluBackward0")                             \
  X(GeluTanh, "gelu", Floating, Input, NoParams, GeluTanhBackward, "GeluBackward0")                     \
  X(Silu, "silu", Floating, Input, NoParams, SiluBackward, "SiluBackward0")                             \
  X(Erf, "erf", Floating, Input, NoParams, None, "ErfBackward0")                                        \
  X(PowScalar, "pow", Numeric, Input, PowScalarParams, None, "PowBackward0")                            \
  X(Clamp, "clamp", Numeric, Input, ClampParams, None, "ClampBackward1")                                \
  X(LeakyRelu, "leaky_relu", Floating, Input, LeakyReluParams, LeakyReluBackward, "LeakyReluBackward0") \
  X(Elu, "elu", Floating, Input, EluParams, EluBackward, "EluBackward0")                                \
  X(Softplus, "softplus", Floating, Input, SoftplusParams, SoftplusBackward, "SoftplusBackward0")

// ---- binary ops, in three groups. BinaryOp lists them in this order.
// X(Name, "name", "node name"): (M, M) -> M on every numeric dtype, with a
// derivative (GradOp::Name). Add and Sub take alpha: a +- alpha * b.
#define TANDEM_ARITHMETIC_OPS(X)            \
  X(Add, "add", "AddBackward0")             \
  X(Sub, "sub", "SubBackward0")             \
  X(Mul, "mul", "MulBackward0")             \
  X(Div, "div", "DivBackward0")             \
  X(Pow, "pow", "PowBackward1")             \
  X(Maximum, "maximum", "MaximumBackward0") \
  X(Minimum, "minimum", "MinimumBackward0")

// X(Name, "name"): (M, M) -> bool; no derivative.
#define TANDEM_COMPARISON_OPS(X) X(Eq, "eq") X(Ne, "ne") X(Lt, "lt") X(Le, "le") X(Gt, "gt") X(Ge, "ge")

// X(Name, "name", saved, Params): an activation's derivative in one pass,
// (grad, saved) -> grad_input, floating dtypes only, built from the forward
// op's Params; saved is the forward's Input or Output. What the rules run
// when they do not record; never recorded itself.
#define TANDEM_ACTIVATION_BACKWARD_OPS(X)                             \
  X(ReluBackward, "relu_backward", Output, NoParams)                  \
  X(TanhBackward, "tanh_backward", Output, NoParams)                  \
  X(SigmoidBackward, "sigmoid_backward", Output, NoParams)            \
  X(GeluBackward, "gelu_backward", Input, NoParams)                   \
  X(GeluTanhBackward, "gelu_backward", Input, NoParams)               \
  X(SiluBackward, "silu_backward", Input, NoParams)                   \
  X(LeakyReluBackward, "leaky_relu_backward", Input, LeakyReluParams) \
  X(EluBackward, "elu_backward", Input, EluParams)                    \
  X(SoftplusBackward, "softplus_backward", Input, SoftplusParams)

// ---- autocast: X("name", cuda, cpu), the precision each op runs in inside
// an AutocastGuard for a tensor of that device type (tensor/ops/autocast.h),
// PyTorch's lists (aten/src/ATen/autocast_mode.h and .cpp: the CUDA and CPU
// registrations) restricted to the ops Tandem has. An op not listed runs in
// the dtypes it is given (PyTorch's fallthrough: relu, add, mean, dropout,
// the pools, batch_norm, whose statistics are float32 in the kernel for a
// 16-bit input). Only float32, float16 and bfloat16 tensors are cast;
// float64, integer and bool tensors never are.
//   Lower    every floating input in the guard's dtype (float16 or bfloat16):
//            PyTorch's lower_precision_fp
//   Float32  every floating input in float32: fp32, fp32_set_opt_dtype (an
//            op given an explicit dtype is not cast) and fp32_append_dtype
//   Promote  the floating inputs in the widest of their dtypes (float16 with
//            bfloat16: float32): promote
//   None     as not listed (the op is in the other device's list only)
#define TANDEM_AUTOCAST_OPS(X)                                                                                        \
  /* matrix products and convolutions */                                                                              \
  X("matmul", Lower, Lower)                                                                                           \
  X("mm", Lower, Lower)                                                                                               \
  X("bmm", Lower, Lower)                                                                                              \
  X("linear", Lower, Lower)                                                                                           \
  X("conv2d", Lower, Lower)                                                                                           \
  /* pointwise ops whose range or accuracy needs float32 */                                                           \
  X("exp", Float32, None)                                                                                             \
  X("log", Float32, None)                                                                                             \
  X("log1p", Float32, None)                                                                                           \
  X("rsqrt", Float32, None)                                                                                           \
  X("pow", Float32, None)                                                                                             \
  X("softplus", Float32, None)                                                                                        \
  /* reductions and normalisations */                                                                                 \
  X("sum", Float32, None)                                                                                             \
  X("prod", Float32, Float32)                                                                                         \
  X("softmax", Float32, None)                                                                                         \
  X("log_softmax", Float32, None)                                                                                     \
  X("logsumexp", Float32, None)                                                                                       \
  X("norm", Float32, None)                                                                                            \
  X("layer_norm", Float32, None)                                                                                      \
  /* losses (cross_entropy on cuda: PyTorch's log_softmax and nll_loss are) */                                        \
  X("cross_entropy", Float32, Float32)                                                                                \
  X("nll_loss", Float32, Float32)                                                                                     \
  X("mse_loss", Float32, Float32)                                                                                     \
  X("l1_loss", Float32, Float32)                                                                                      \
  X("binary_cross_entropy_with_logits", Float32, Float32)                                                             \
  /* mixed inputs (cat and stack promote by themselves too; where is not listed: it promotes natively, a 0-dim tensor \
   * not widening the others) */                                                                                      \
  X("cat", Promote, Promote)                                                                                          \
  X("stack", Promote, Promote)                                                                                        \
  X("scatter_add", Promote, None)

// ---- parameter structs: X(Params), each defined below.
#define TANDEM_UNARY_PARAMS(X) X(PowScalarParams) X(ClampParams) X(LeakyReluParams) X(EluParams) X(SoftplusParams)

namespace tandem {

struct NoParams {};
struct PowScalarParams {
  Scalar exponent;  // x ^ exponent
};
struct ClampParams {
  std::optional<Scalar> min, max;  // min(max(x, min), max); an absent bound is no bound
};
struct LeakyReluParams {
  double negative_slope = 0.01;  // x > 0 ? x : negative_slope * x
};
struct EluParams {
  // x > 0 ? scale * x : scale * alpha * (exp(input_scale * x) - 1)
  double alpha = 1, scale = 1, input_scale = 1;
};
struct SoftplusParams {
  // beta * x > threshold ? x : log(1 + exp(beta * x)) / beta
  double beta = 1, threshold = 20;
};

#define TANDEM_OP_TABLE_COMMA(P) , P
using UnaryParams = std::variant<NoParams TANDEM_UNARY_PARAMS(TANDEM_OP_TABLE_COMMA)>;
#undef TANDEM_OP_TABLE_COMMA

enum class UnaryOp : int8_t {
#define X(Name, ...) Name,
  TANDEM_UNARY_OPS(X)
#undef X
};

enum class BinaryOp : int8_t {
#define X(Name, ...) Name,
  TANDEM_ARITHMETIC_OPS(X) TANDEM_COMPARISON_OPS(X) TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X
};

#define X(...) +1
inline constexpr int kUnaryOpCount = 0 TANDEM_UNARY_OPS(X);
inline constexpr int kArithmeticOpCount = 0 TANDEM_ARITHMETIC_OPS(X);
inline constexpr int kComparisonOpCount = 0 TANDEM_COMPARISON_OPS(X);
#undef X

constexpr const char* op_name(UnaryOp op) {
  switch (op) {
#define X(Name, name, ...) \
  case UnaryOp::Name: return name;
    TANDEM_UNARY_OPS(X)
#undef X
  }
  return "unknown";
}

constexpr const char* op_name(BinaryOp op) {
  switch (op) {
#define X(Name, name, ...) \
  case BinaryOp::Name: return name;
    TANDEM_ARITHMETIC_OPS(X) TANDEM_COMPARISON_OPS(X) TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X
  }
  return "unknown";
}

// Whether op is defined on every numeric dtype (the dtypes column); the
// others are floating only.
constexpr bool is_numeric_unary(UnaryOp op) {
  switch (op) {
#define X(Name, name, dtypes, ...) \
  case UnaryOp::Name:              \
    return TANDEM_OP_TABLE_IS_##dtypes;
#define TANDEM_OP_TABLE_IS_Numeric true
#define TANDEM_OP_TABLE_IS_Floating false
    TANDEM_UNARY_OPS(X)
#undef TANDEM_OP_TABLE_IS_Numeric
#undef TANDEM_OP_TABLE_IS_Floating
#undef X
  }
  return false;
}

// What a unary op's derivative needs besides the gradient (the keeps column).
enum class Keep : int8_t { Nothing, Input, Output };
constexpr Keep unary_keeps(UnaryOp op) {
  switch (op) {
#define X(Name, name, dtypes, keeps, ...) \
  case UnaryOp::Name: return Keep::keeps;
    TANDEM_UNARY_OPS(X)
#undef X
  }
  return Keep::Input;
}

constexpr bool is_arithmetic(BinaryOp op) { return static_cast<int>(op) < kArithmeticOpCount; }
constexpr bool is_comparison(BinaryOp op) {
  return static_cast<int>(op) >= kArithmeticOpCount && static_cast<int>(op) < kArithmeticOpCount + kComparisonOpCount;
}
constexpr bool is_activation_backward(BinaryOp op) {
  return static_cast<int>(op) >= kArithmeticOpCount + kComparisonOpCount;
}

// Which of the forward's tensors an activation backward reads (the saved column).
constexpr Keep activation_backward_saves(BinaryOp op) {
  switch (op) {
#define X(Name, name, saved, Params) \
  case BinaryOp::Name: return Keep::saved;
    TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X
    default: break;
  }
  return Keep::Nothing;
}

// The activation backward a unary op's rule runs when it does not record
// (the backward column), if it has one.
namespace op_table_detail {
inline constexpr std::optional<BinaryOp> None = std::nullopt;
#define X(Name, ...) inline constexpr std::optional<BinaryOp> Name = BinaryOp::Name;
TANDEM_ACTIVATION_BACKWARD_OPS(X)
#undef X
}  // namespace op_table_detail

constexpr std::optional<BinaryOp> fused_backward(UnaryOp op) {
  switch (op) {
#define X(Name, name, dtypes, keeps, Params, backward, ...) \
  case UnaryOp::Name: return op_table_detail::backward;
    TANDEM_UNARY_OPS(X)
#undef X
  }
  return std::nullopt;
}

// Reductions: the kernels of kernels/*/reduce.h.
enum class ReduceOp : int8_t { Sum, Mean, Prod, Amax, Amin, LogSumExp, Norm, Var, Std };

struct ReduceParams {
  double p = 2;            // Norm: the order (inf and -inf allowed)
  int64_t correction = 1;  // Var, Std: divide by N - correction
};

}  // namespace tandem

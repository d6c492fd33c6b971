// Names of the elementwise op kinds, for messages.
#include "kernels/op_kinds.h"

namespace tandem {

const char* op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Log1p: return "log1p";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Sin: return "sin";
    case UnaryOp::Cos: return "cos";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Gelu: return "gelu";
    case UnaryOp::GeluTanh: return "gelu";
    case UnaryOp::Silu: return "silu";
    case UnaryOp::Erf: return "erf";
    case UnaryOp::PowScalar: return "pow";
    case UnaryOp::Clamp: return "clamp";
  }
  return "unknown";
}

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Pow: return "pow";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::Eq: return "eq";
    case BinaryOp::Ne: return "ne";
    case BinaryOp::Lt: return "lt";
    case BinaryOp::Le: return "le";
    case BinaryOp::Gt: return "gt";
    case BinaryOp::Ge: return "ge";
    case BinaryOp::ReluBackward: return "relu_backward";
    case BinaryOp::TanhBackward: return "tanh_backward";
    case BinaryOp::SigmoidBackward: return "sigmoid_backward";
    case BinaryOp::GeluBackward: return "gelu_backward";
    case BinaryOp::GeluTanhBackward: return "gelu_backward";
    case BinaryOp::SiluBackward: return "silu_backward";
  }
  return "unknown";
}

}  // namespace tandem

// nn::functional::linear through matmul (one GEMM with the weight read
// transposed, no copy) and a broadcast bias add.
#include "nn/functional/linear.h"

#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/linalg.h"

namespace tandem::nn::functional {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (auto in = autocast::detail::inputs("linear", {input, weight, bias}))
    return autocast::detail::excluded([&] { return linear((*in)[0], (*in)[1], (*in)[2]); });
  TANDEM_CHECK(input.defined() && weight.defined(), ValueError, "linear: input and weight must be defined");
  // The weight first: when the input is on the wrong device, the message
  // says to move the input, which is almost always the fix.
  check_same_device("linear", {{"weight", weight}, {"input", input}, {"bias", bias}});
  TANDEM_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be 2-D (out_features, in_features), got ",
               weight.sizes());
  TANDEM_CHECK(input.dim() >= 1, ShapeError, "linear: input must have at least 1 dimension, got a scalar");
  TANDEM_CHECK(input.size(-1) == weight.size(1), ShapeError, "linear: mat1 and mat2 shapes cannot be multiplied (",
               input.numel() / std::max<int64_t>(input.size(-1), 1), "x", input.size(-1), " and ", weight.size(1), "x",
               weight.size(0), "): the input's last dimension is ", input.size(-1), " but in_features is ",
               weight.size(1));
  TANDEM_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), ShapeError,
               "linear: bias must have shape [", weight.size(0), "], got ", bias.sizes());
  TANDEM_CHECK(input.dtype() == weight.dtype(), DtypeError,
               "linear: expected input and weight to have the same dtype, but got input ", input.dtype(),
               " and weight ", weight.dtype(), " (convert the input with .to(", weight.dtype(),
               ") or the model with ->to(dtype))");
  Tensor out = input.matmul(weight.t());
  return bias.defined() ? out.add(bias) : out;
}

}  // namespace tandem::nn::functional

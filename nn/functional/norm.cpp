// nn::functional::batch_norm, layer_norm and embedding over tensor/ops/norm.h.
#include "nn/functional/norm.h"

#include "tensor/core/grad_mode.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/norm.h"
#include "tensor/ops/reduce.h"

namespace tandem::nn::functional {

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options) {
  return tandem::batch_norm(input, options.weight(), options.bias(), running_mean, running_var, options.training(),
                            options.momentum(), options.eps());
}

Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& options) {
  return tandem::layer_norm(input, options.normalized_shape(), options.weight(), options.bias(), options.eps());
}

namespace {

// PyTorch's embedding_renorm_: each row of weight that indices names is
// scaled by max_norm / (norm + 1e-7) where its norm exceeds max_norm.
void renorm_rows(const Tensor& weight, const Tensor& indices, double max_norm, double norm_type) {
  // PyTorch's embedding_renorm_ is one native op, not autocast: nothing in it is cast here either.
  autocast::detail::Excluded no_autocast;
  NoGradGuard no_grad;
  const int64_t num = weight.size(0);
  const TensorOptions options = TensorOptions(weight.dtype()).device(weight.device());
  const Tensor idx = indices.reshape({indices.numel()}).to(kInt64);
  const Tensor named = zeros({num}, options).scatter_add(0, idx, ones({idx.numel()}, options)).gt(0).unsqueeze(1);
  const Tensor norms = weight.norm(norm_type, {1}, /*keepdim=*/true);
  const Tensor scale = where(named, where(norms.gt(max_norm), max_norm / (norms + 1e-7), 1.0), 1.0);
  Tensor(weight).mul_(scale);
}

}  // namespace

Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options) {
  TANDEM_CHECK(!options.sparse(), NotImplementedError,
               "embedding: sparse gradients (sparse=true) are not supported: Tandem has no sparse tensors; use "
               "sparse=false (a dense gradient of the whole table)");
  std::optional<int64_t> padding_idx = options.padding_idx();
  if (options.max_norm()) {
    check_defined("embedding", {{"input", input}, {"weight", weight}});
    check_same_device("embedding", {{"weight", weight}, {"input", input}});
    TANDEM_CHECK(weight.dim() == 2, ShapeError, "'weight' must be 2-D (num_embeddings, embedding_dim), but got shape ",
                 shape_str(weight.sizes()));
    TANDEM_CHECK(weight.is_floating_point(), DtypeError, "embedding: max_norm needs a floating weight, but got ",
                 weight.dtype());
    // The indices are checked by the lookup, after the rescale: check them first.
    TANDEM_CHECK(input.dtype() == kInt64 || input.dtype() == kInt32, DtypeError,
                 "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
                 "but got ",
                 input.dtype(),
                 " instead (while checking arguments for embedding); convert the indices first, e.g. "
                 "indices.to(kInt64)");
    if (input.numel() > 0) {
      const int64_t lo = input.amin().item<int64_t>(), hi = input.amax().item<int64_t>();
      const int64_t bad = lo < 0 ? lo : hi;
      TANDEM_CHECK(lo >= 0 && hi < weight.size(0), IndexError, "embedding(): index out of range in self (index ", bad,
                   " of a table of ", weight.size(0), " rows, num_embeddings; valid indices are 0 to ",
                   weight.size(0) - 1, ")");
    }
    renorm_rows(weight, input, *options.max_norm(), options.norm_type());
  }
  return tandem::embedding(weight, input, padding_idx, options.scale_grad_by_freq());
}

}  // namespace tandem::nn::functional

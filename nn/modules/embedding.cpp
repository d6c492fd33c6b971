// nn::Embedding.
#include "nn/modules/embedding.h"

#include <ostream>

#include "nn/functional/norm.h"
#include "nn/init.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/factory.h"

namespace tandem::nn {

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& options_) : options(options_) {
  const int64_t num = options.num_embeddings(), dim = options.embedding_dim();
  TANDEM_CHECK(num >= 0 && dim >= 0, ValueError,
               "Embedding: num_embeddings and embedding_dim must be non-negative, got ", num, " and ", dim);
  if (options.padding_idx()) {
    const int64_t p = *options.padding_idx();
    TANDEM_CHECK(p >= -num && p < num, ValueError, "Padding_idx must be within num_embeddings (padding_idx ", p,
                 " with num_embeddings ", num, "; valid: ", -num, " to ", num - 1, ")");
    options.padding_idx(p < 0 ? p + num : p);
  }
  if (options._weight().defined()) {
    const Tensor& w = options._weight();
    TANDEM_CHECK(w.dim() == 2 && w.size(0) == num && w.size(1) == dim, ShapeError,
                 "Shape of weight does not match num_embeddings and embedding_dim: expected [", num, ", ", dim,
                 "], got ", shape_str(w.sizes()));
    weight = register_parameter("weight", w.detach());
  } else {
    weight = register_parameter("weight", empty({num, dim}));
    reset_parameters();
  }
}

void EmbeddingImpl::reset_parameters() {
  init::normal_(weight);
  if (options.padding_idx()) {
    NoGradGuard no_grad;
    weight.select(0, *options.padding_idx()).zero_();
  }
}

Tensor EmbeddingImpl::forward(const Tensor& input) {
  return functional::embedding(input, weight,
                               functional::EmbeddingFuncOptions()
                                   .padding_idx(options.padding_idx())
                                   .max_norm(options.max_norm())
                                   .norm_type(options.norm_type())
                                   .scale_grad_by_freq(options.scale_grad_by_freq())
                                   .sparse(options.sparse()));
}

// PyTorch's extra_repr: the sizes, then only the options that differ from
// their defaults.
void EmbeddingImpl::pretty_print(std::ostream& stream) const {
  stream << "Embedding(" << options.num_embeddings() << ", " << options.embedding_dim();
  if (options.padding_idx()) stream << ", padding_idx=" << *options.padding_idx();
  if (options.max_norm()) stream << ", max_norm=" << *options.max_norm();
  if (options.norm_type() != 2.0) stream << ", norm_type=" << options.norm_type();
  if (options.scale_grad_by_freq()) stream << ", scale_grad_by_freq=true";
  if (options.sparse()) stream << ", sparse=true";
  stream << ")";
}

Embedding Embedding::from_pretrained(const Tensor& embeddings, const EmbeddingFromPretrainedOptions& options) {
  TANDEM_CHECK(embeddings.defined() && embeddings.dim() == 2, ShapeError,
               "Embeddings parameter is expected to be 2-dimensional (num_embeddings, embedding_dim), got ",
               embeddings.defined() ? shape_str(embeddings.sizes()) : std::string("an undefined tensor"));
  Embedding e(EmbeddingOptions(embeddings.size(0), embeddings.size(1))
                  ._weight(embeddings)
                  .padding_idx(options.padding_idx())
                  .max_norm(options.max_norm())
                  .norm_type(options.norm_type())
                  .scale_grad_by_freq(options.scale_grad_by_freq())
                  .sparse(options.sparse()));
  e->weight.requires_grad_(!options.freeze());
  return e;
}

}  // namespace tandem::nn

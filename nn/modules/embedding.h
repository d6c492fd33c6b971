// nn::Embedding, a lookup table of learnable rows, as libtorch's.
#pragma once

#include "nn/module.h"
#include "nn/options/norm.h"

namespace tandem::nn {

// weight: (num_embeddings, embedding_dim), drawn from N(0, 1) with the
// padding_idx row zeroed (or options._weight). forward(input): int64 or
// int32 indices of any shape S -> (S..., embedding_dim).
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  // N(0, 1), the padding row zeroed.
  void reset_parameters();
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& stream) const override;

  EmbeddingOptions options;  // padding_idx, when given, is wrapped to [0, num_embeddings)
  Tensor weight;
};

class Embedding : public ModuleHolder<EmbeddingImpl> {
 public:
  using ModuleHolder<EmbeddingImpl>::ModuleHolder;
  Embedding() = default;
  // A table holding embeddings (num_embeddings, embedding_dim), copied as
  // they are (the padding row is not zeroed), frozen unless options say not.
  static Embedding from_pretrained(const Tensor& embeddings, const EmbeddingFromPretrainedOptions& options = {});
};

}  // namespace tandem::nn

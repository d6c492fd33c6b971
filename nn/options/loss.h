// Options of the losses, in libtorch's builder style and names:
//   nn::CrossEntropyLossOptions().weight(w).ignore_index(-1).reduction(kSum)
// The functional forms take the same structs under libtorch's aliases
// (nn::functional::CrossEntropyFuncOptions, ...).
#pragma once

#include <cstdint>

#include "tensor/core/arg.h"
#include "tensor/core/tensor.h"

namespace tandem::nn {

// How a loss reduces its per-element values: kept (None), averaged (Mean) or
// summed (Sum), PyTorch's reduction='none' | 'mean' | 'sum'.
enum class Reduction { None, Mean, Sum };

// "none", "mean" or "sum", as PyTorch spells the argument.
const char* reduction_name(Reduction reduction);

struct CrossEntropyLossOptions {
  // A manual rescaling weight of each class: (C), of the input's dtype.
  TANDEM_ARG(Tensor, weight) = {};
  // A class index whose targets contribute nothing, neither to the loss nor
  // to the mean's denominator (class-index targets only).
  TANDEM_ARG(int64_t, ignore_index) = -100;
  TANDEM_ARG(Reduction, reduction) = Reduction::Mean;
  // In [0, 1]: the target becomes (1 - label_smoothing) times itself plus
  // label_smoothing spread uniformly over the C classes.
  TANDEM_ARG(double, label_smoothing) = 0.0;
};

struct NLLLossOptions {
  TANDEM_ARG(Tensor, weight) = {};
  TANDEM_ARG(int64_t, ignore_index) = -100;
  TANDEM_ARG(Reduction, reduction) = Reduction::Mean;
};

struct MSELossOptions {
  MSELossOptions() = default;
  MSELossOptions(Reduction reduction) : reduction_(reduction) {}  // NOLINT(google-explicit-constructor): as libtorch
  TANDEM_ARG(Reduction, reduction) = Reduction::Mean;
};

struct L1LossOptions {
  L1LossOptions() = default;
  L1LossOptions(Reduction reduction) : reduction_(reduction) {}  // NOLINT(google-explicit-constructor): as libtorch
  TANDEM_ARG(Reduction, reduction) = Reduction::Mean;
};

struct BCEWithLogitsLossOptions {
  // A rescaling weight of each element, broadcast to the input's shape.
  TANDEM_ARG(Tensor, weight) = {};
  TANDEM_ARG(Reduction, reduction) = Reduction::Mean;
  // The weight of the positive term, broadcast to the input's shape; for a
  // multi-label (N, C) input, a (C) tensor weighs each class's positives.
  TANDEM_ARG(Tensor, pos_weight) = {};
};

namespace functional {
using CrossEntropyFuncOptions = CrossEntropyLossOptions;
using NLLLossFuncOptions = NLLLossOptions;
using MSELossFuncOptions = MSELossOptions;
using L1LossFuncOptions = L1LossOptions;
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsLossOptions;
}  // namespace functional

}  // namespace tandem::nn

namespace tandem {
// libtorch's torch::kNone, torch::kMean, torch::kSum.
inline constexpr nn::Reduction kNone = nn::Reduction::None;
inline constexpr nn::Reduction kMean = nn::Reduction::Mean;
inline constexpr nn::Reduction kSum = nn::Reduction::Sum;
}  // namespace tandem

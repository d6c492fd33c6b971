// Options of convolution and pooling, in libtorch's builder style and names:
//   nn::Conv2dOptions(3, 8, 3).stride(1).padding(1).bias(false)
//   nn::MaxPool2dOptions(2).stride(2)
// Sizes take one value for both dims or two, {h, w} (libtorch's
// ExpandingArray<2>). The functional forms take F::Conv2dFuncOptions (no
// channel counts, the bias as an option) and the pooling options under
// libtorch's aliases (F::MaxPool2dFuncOptions, ...).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "tensor/core/arg.h"
#include "tensor/core/tensor.h"

namespace tandem::nn {

// Two sizes (h, w) given as one value for both, or as {h, w}. It remembers
// which, so that modules print themselves as PyTorch does ("kernel_size=2"
// against "kernel_size=(2, 3)").
class ExpandingArray2 {
 public:
  ExpandingArray2(int64_t v) : values_{v, v}, single_(true) {}  // NOLINT(google-explicit-constructor)
  ExpandingArray2(int64_t h, int64_t w) : values_{h, w} {}
  ExpandingArray2(std::initializer_list<int64_t> list);  // one or two values

  IntArrayRef ref() const { return IntArrayRef(values_.data(), 2); }
  operator IntArrayRef() const { return ref(); }  // NOLINT(google-explicit-constructor)
  int64_t operator[](size_t i) const { return values_.at(i); }
  bool single() const { return single_; }
  bool operator==(const ExpandingArray2& o) const { return values_ == o.values_; }

 private:
  std::array<int64_t, 2> values_;
  bool single_ = false;
};

// "(3, 3)", or "3" when given as one value and `as_given`.
std::string format_pair(const ExpandingArray2& v, bool as_given);

// libtorch's torch::kSame / torch::kValid for a convolution's padding.
enum class PaddingString { Same, Valid };

// A convolution's padding: sizes, or "same" / "valid".
class Conv2dPadding {
 public:
  Conv2dPadding(int v) : sizes_(v) {}                                   // NOLINT(google-explicit-constructor)
  Conv2dPadding(int64_t v) : sizes_(v) {}                               // NOLINT(google-explicit-constructor)
  Conv2dPadding(std::initializer_list<int64_t> list) : sizes_(list) {}  // NOLINT(google-explicit-constructor)
  Conv2dPadding(const ExpandingArray2& sizes) : sizes_(sizes) {}        // NOLINT(google-explicit-constructor)
  Conv2dPadding(PaddingString s) : sizes_(0), mode_(s) {}               // NOLINT(google-explicit-constructor)
  // "same" or "valid"; anything else is a ValueError.
  Conv2dPadding(const char* s);         // NOLINT(google-explicit-constructor)
  Conv2dPadding(const std::string& s);  // NOLINT(google-explicit-constructor)

  // Sizes, when not a string.
  const ExpandingArray2& sizes() const { return sizes_; }
  std::optional<PaddingString> mode() const { return mode_; }
  bool is_zero() const { return !mode_ && sizes_[0] == 0 && sizes_[1] == 0; }
  // "same", "valid" or "(1, 1)", as PyTorch prints a module's padding.
  std::string str() const;

 private:
  ExpandingArray2 sizes_;
  std::optional<PaddingString> mode_;
};

// How a convolution pads: zeros only (PyTorch also has reflect, replicate
// and circular; Tandem refuses them with NotImplementedError).
enum class PaddingMode { Zeros, Reflect, Replicate, Circular };
const char* padding_mode_name(PaddingMode mode);  // "zeros", ...

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TANDEM_ARG(int64_t, in_channels);
  TANDEM_ARG(int64_t, out_channels);
  TANDEM_ARG(ExpandingArray2, kernel_size);
  TANDEM_ARG(ExpandingArray2, stride) = 1;
  TANDEM_ARG(Conv2dPadding, padding) = 0;
  TANDEM_ARG(ExpandingArray2, dilation) = 1;
  TANDEM_ARG(int64_t, groups) = 1;
  TANDEM_ARG(bool, bias) = true;
  TANDEM_ARG(PaddingMode, padding_mode) = PaddingMode::Zeros;
};

struct MaxPool2dOptions {
  // The stride defaults to the kernel size.
  MaxPool2dOptions(ExpandingArray2 kernel_size)  // NOLINT(google-explicit-constructor)
      : kernel_size_(kernel_size), stride_(kernel_size) {}
  TANDEM_ARG(ExpandingArray2, kernel_size);
  TANDEM_ARG(ExpandingArray2, stride);
  TANDEM_ARG(ExpandingArray2, padding) = 0;
  TANDEM_ARG(ExpandingArray2, dilation) = 1;
  TANDEM_ARG(bool, ceil_mode) = false;
};

struct AvgPool2dOptions {
  // The stride defaults to the kernel size.
  AvgPool2dOptions(ExpandingArray2 kernel_size)  // NOLINT(google-explicit-constructor)
      : kernel_size_(kernel_size), stride_(kernel_size) {}
  TANDEM_ARG(ExpandingArray2, kernel_size);
  TANDEM_ARG(ExpandingArray2, stride);
  TANDEM_ARG(ExpandingArray2, padding) = 0;
  TANDEM_ARG(bool, ceil_mode) = false;
  TANDEM_ARG(bool, count_include_pad) = true;
  TANDEM_ARG(std::optional<int64_t>, divisor_override) = std::nullopt;
};

struct AdaptiveAvgPool2dOptions {
  AdaptiveAvgPool2dOptions(ExpandingArray2 output_size)  // NOLINT(google-explicit-constructor)
      : output_size_(output_size) {}
  TANDEM_ARG(ExpandingArray2, output_size);
};

namespace functional {
// conv2d's options without the layer's channel counts; the bias is one.
struct Conv2dFuncOptions {
  TANDEM_ARG(Tensor, bias) = {};
  TANDEM_ARG(ExpandingArray2, stride) = 1;
  TANDEM_ARG(Conv2dPadding, padding) = 0;
  TANDEM_ARG(ExpandingArray2, dilation) = 1;
  TANDEM_ARG(int64_t, groups) = 1;
};
using MaxPool2dFuncOptions = MaxPool2dOptions;
using AvgPool2dFuncOptions = AvgPool2dOptions;
using AdaptiveAvgPool2dFuncOptions = AdaptiveAvgPool2dOptions;
}  // namespace functional

}  // namespace tandem::nn

namespace tandem {
// libtorch's torch::kSame, torch::kValid, torch::kZeros, ...
inline constexpr nn::PaddingString kSame = nn::PaddingString::Same;
inline constexpr nn::PaddingString kValid = nn::PaddingString::Valid;
inline constexpr nn::PaddingMode kZeros = nn::PaddingMode::Zeros;
inline constexpr nn::PaddingMode kReflect = nn::PaddingMode::Reflect;
inline constexpr nn::PaddingMode kReplicate = nn::PaddingMode::Replicate;
inline constexpr nn::PaddingMode kCircular = nn::PaddingMode::Circular;
}  // namespace tandem

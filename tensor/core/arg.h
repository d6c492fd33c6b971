// TANDEM_ARG: a named, chainable option, as libtorch's TORCH_ARG:
//   struct LinearOptions { TANDEM_ARG(bool, bias) = true; };
//   LinearOptions(784, 256).bias(false);   opts.bias() reads it.
#pragma once

#define TANDEM_ARG(T, name)                                       \
 public:                                                          \
  inline auto name(const T& new_##name)->decltype(*this) {        \
    this->name##_ = new_##name;                                   \
    return *this;                                                 \
  }                                                               \
  inline const T& name() const noexcept { return this->name##_; } \
  inline T& name() noexcept { return this->name##_; }             \
                                                                  \
 private:                                                         \
  T name##_

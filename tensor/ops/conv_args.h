// Internal to tensor/ops (conv.cpp, pool.cpp), not a public header: the 2-D
// window arguments as (h, w) and the floating-dtype check, with the caller's
// words in the messages.
#pragma once

#include <cstdint>

#include "tensor/core/errors.h"
#include "tensor/core/int_array_ref.h"
#include "tensor/core/tensor.h"

namespace tandem::detail {

// (h, w) of a window argument: kernel, stride, padding, dilation, output size.
struct Pair {
  int64_t h, w;
};

// v as (h, w): one value for both, or two. Any other length is a ValueError
// whose message is the caller's parts followed by v ("..., but got stride=[1, 2, 3]").
template <typename... Parts>
Pair expand_pair(IntArrayRef v, const Parts&... message) {
  TANDEM_CHECK(v.size() == 1 || v.size() == 2, ValueError, message..., shape_str(v));
  return v.size() == 1 ? Pair{v[0], v[0]} : Pair{v[0], v[1]};
}

// PyTorch's message for an op without integer kernels, plus the fix:
// `what` names what to convert ("the tensors", "the input").
inline void check_floating(const char* op, const Tensor& t, const char* what) {
  TANDEM_CHECK(t.is_floating_point(), NotImplementedError, "\"", op, "\" not implemented for '",
               torch_scalar_name(t.dtype()), "' (", op, " computes in a floating dtype on ", t.device().str(),
               "; convert ", what, " first, e.g. .to(kFloat32))");
}

}  // namespace tandem::detail

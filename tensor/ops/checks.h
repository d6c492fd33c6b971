// The checks every op runs at its door: defined inputs and the same-device
// rule. They build their messages only when they fail.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "tensor/core/tensor.h"

namespace tandem {

struct NamedTensor {
  const char* name;
  const Tensor& tensor;
};

// Throws ValueError if an argument is an undefined tensor.
void check_defined(const char* op, std::initializer_list<NamedTensor> args);

// Throws DeviceError unless all args are on one device. The message starts
// exactly as PyTorch's ("Expected all tensors to be on the same device, but
// found at least two devices, cuda:0 and cpu!"), then names the op and the
// arguments, where each was made or moved, and the fix: the general advice
// (move one of them with .to()), or `fix` when the caller knows a better one
// (a caller on a hot path builds it only once it knows the devices differ).
void check_same_device(const char* op, std::initializer_list<NamedTensor> args, std::string_view fix = {});
void check_same_device(const char* op, const char* list_name, const std::vector<Tensor>& tensors);

// The C++ type PyTorch prints for a dtype in its dtype-mismatch messages
// ("float", "c10::Half", "long int"), so that ours read (and search) as its.
const char* torch_cpp_type_name(Dtype dtype);

// Both checks, for ops with two or more tensor arguments.
inline void check_inputs(const char* op, std::initializer_list<NamedTensor> args) {
  check_defined(op, args);
  check_same_device(op, args);
}

}  // namespace tandem

// How an area of kernels is declared once for both backends. The area's
// header (kernels/elementwise.h, kernels/norm.h, ...) lists its kernels,
// each as K(return type, name, (parameters)):
//
//   #define TANDEM_NORM_KERNELS(K)
//     K(void, layer_norm, (const Tensor& out, const Tensor& input, double eps))
//   TANDEM_KERNELS(TANDEM_NORM_KERNELS)
//
// (the #define's lines continued with backslashes)
//
// which declares tandem::cpu::layer_norm and tandem::cuda::layer_norm with one
// signature: the CPU kernel is defined in kernels/cpu/, the CUDA one in
// kernels/cuda/ (a .cu file, or the simulated build's host copy of it). In a
// build without CUDA the cuda:: kernels are defined right here instead, each
// throwing NotImplementedError ("<name>: Tandem was built without CUDA
// support ..."): the one place that error comes from. No op reaches them
// there (an emulated device runs the CPU kernels), but a missing definition
// would not link. Kernels only one backend has are declared in that
// backend's own headers.
#pragma once

#include "kernels/cuda/no_cuda.h"
#include "tandem/version.h"

#define TANDEM_KERNEL_DECLARE(ret, name, params) ret name params;
#define TANDEM_KERNEL_WITHOUT_CUDA(ret, name, params) \
  [[noreturn]] inline ret name params { ::tandem::detail::no_cuda(#name); }

// TANDEM_CUDA_KERNELS(LIST): kernels only CUDA has (the CPU does the op in
// its front end), declared the same way.
#if TANDEM_WITH_CUDA
#define TANDEM_CUDA_KERNELS(LIST) \
  namespace tandem::cuda {        \
  LIST(TANDEM_KERNEL_DECLARE)     \
  }
#define TANDEM_KERNELS(LIST)  \
  namespace tandem::cpu {     \
  LIST(TANDEM_KERNEL_DECLARE) \
  }                           \
  namespace tandem::cuda {    \
  LIST(TANDEM_KERNEL_DECLARE) \
  }
#else
#define TANDEM_CUDA_KERNELS(LIST)                                                                                 \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"") namespace tandem::cuda{ \
      LIST(TANDEM_KERNEL_WITHOUT_CUDA)} _Pragma("GCC diagnostic pop")
#define TANDEM_KERNELS(LIST)                                                                                      \
  namespace tandem::cpu {                                                                                         \
  LIST(TANDEM_KERNEL_DECLARE)                                                                                     \
  }                                                                                                               \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"") namespace tandem::cuda{ \
      LIST(TANDEM_KERNEL_WITHOUT_CUDA)} _Pragma("GCC diagnostic pop")
#endif

// The CUDA convolution's choice of implementation (kernels/cuda/conv.cu;
// kernels/cuda/stub.cpp in a build without CUDA). Its kernels:
// kernels/conv.h.
#pragma once

#include "kernels/conv.h"

namespace tandem::cuda {

// "cudnn" or "im2col+cublas": which implementation this build has.
const char* conv2d_implementation();
// Whether the convolution may take cuDNN where the build has it (else, and
// always without it, im2col + cuBLAS): cuda::set_cudnn_enabled.
void set_cudnn_enabled(bool enabled);
bool cudnn_enabled();

}  // namespace tandem::cuda

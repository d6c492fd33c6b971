// Precision switches of the CUDA matrix products, like
// torch.backends.cuda.matmul: whether float32 products may run on TF32
// tensor cores. Process-wide; a build without CUDA keeps the setting too.
#pragma once

namespace tandem::cuda {

// TF32 rounds each float32 input to 10 mantissa bits (sums stay float32):
// several times faster on Ampere and newer GPUs, with errors near 1e-3 of the
// products' magnitude instead of 1e-6. Off by default, as in PyTorch.
void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();

// torch.backends.cudnn.enabled: whether convolutions may run on cuDNN where
// the build has it; off, they take the im2col + cuBLAS path that builds
// without cuDNN (and the simulated GPU) run. On by default.
void set_cudnn_enabled(bool enabled);
bool cudnn_enabled();

}  // namespace tandem::cuda

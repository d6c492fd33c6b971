// The versions of the CUDA libraries a build links, for `tandem info` and
// bug reports. Implemented by runtime.cpp (CUDA builds) and stub.cpp.
#pragma once

namespace tandem::cuda::detail {

// CUDA's integers (runtime and driver 13000 = 13.0, cuBLAS 130100 = 13.1.0,
// cuDNN 91900 = 9.19.0); 0 where the library is absent from the build, and
// driver 0 where no driver is installed. Never throws.
struct Versions {
  int runtime = 0;
  int driver = 0;
  int cublas = 0;
  int cudnn = 0;
};
Versions versions();

}  // namespace tandem::cuda::detail

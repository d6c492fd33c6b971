// What the examples share: a cuda device to make mistakes on (an emulated
// one where there is no GPU), a way to show the exact error Tandem gives, and
// generated images that stand in for Fashion-MNIST wherever it is missing.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <typeinfo>

#include "kernels/cuda/runtime.h"  // cuda::detail::device_count(): real GPUs only
#include "tandem/tandem.h"

namespace examples {

// Tandem reads TANDEM_EMULATE_CUDA and TANDEM_EMULATE_CUDA_MEMORY once, at
// its first question about cuda devices (any tandem::cuda:: call, the first
// tensor on cuda), and keeps the answer. So the first line of main() may
// still set them: when the user set nothing and the CUDA runtime sees no GPU,
// one emulated device. cuda::detail::device_count() asks the runtime alone,
// not the emulation switch, so it does not fix the answer too early.
// `memory` caps the emulated device (e.g. "256M") unless the user chose a
// cap; a real GPU ignores it.
inline void emulate_a_gpu_if_none(const char* memory = nullptr) {
  if (std::getenv("TANDEM_EMULATE_CUDA") == nullptr && tandem::cuda::detail::device_count() == 0)
    setenv("TANDEM_EMULATE_CUDA", "1", /*overwrite=*/1);
  if (memory != nullptr) setenv("TANDEM_EMULATE_CUDA_MEMORY", memory, /*overwrite=*/0);
}

// cuda:0, after saying what it is. Call it first in main().
inline tandem::Device cuda_device(const char* memory = nullptr) {
  emulate_a_gpu_if_none(memory);
  TANDEM_CHECK(tandem::cuda::is_available(), DeviceError,
               "this example needs a GPU, or an emulated one: unset TANDEM_EMULATE_CUDA or set it to 1");
  tandem::Device device("cuda:0");
  std::printf("device: %s, %s\n", device.str().c_str(), tandem::cuda::get_device_name(0).c_str());
  if (tandem::cuda::is_emulated())
    std::printf("note: no GPU in use: cuda:0 is emulated (TANDEM_EMULATE_CUDA=%s), host memory and CPU kernels\n",
                std::getenv("TANDEM_EMULATE_CUDA"));
  return device;
}

// Runs `mistake`, which should throw, and prints the error's type and its
// exact text (what()). Returns false when nothing was thrown.
inline bool shows_error(const char* what, const std::function<void()>& mistake) {
  std::printf("\n--- mistake: %s\n", what);
  try {
    mistake();
  } catch (const tandem::Error& e) {
    std::printf("%s:\n%s\n", tandem::detail::demangle(typeid(e)).c_str(), e.what());
    return true;
  }
  std::printf("no error: the mistake went unnoticed\n");
  return false;
}

inline void fix(const char* what) { std::printf("\n--- fix: %s\n", what); }

// main(): the body's exit code, or 1 after printing anything it throws.
inline int run(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "unexpected error: %s\n", e.what());
    return 1;
  }
}

// n images of noise, (1, 28, 28) float32, each labelled 0..9 by one fixed
// random linear rule: Fashion-MNIST's shapes, learnable, and on every machine.
inline std::shared_ptr<tandem::data::TensorDataset> synthetic_images(int64_t n, uint64_t seed = 0) {
  tandem::Generator gen(seed);
  tandem::Tensor images = tandem::randn({n, 1, 28, 28}, gen);
  tandem::Tensor rule = tandem::randn({28 * 28, 10}, gen);
  tandem::Tensor labels = images.flatten(1).matmul(rule).argmax(1);  // (n) int64
  return std::make_shared<tandem::data::TensorDataset>(images, labels);
}

}  // namespace examples

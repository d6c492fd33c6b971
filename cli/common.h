// What the tandem command's subcommands share: their error types and exit
// codes, the dataset, the device choice and number formatting.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "tensor/core/device.h"
#include "tensor/core/tensor.h"

namespace tandem::cli {

// Exit codes: 0 done, 1 an error at run time (data, files, devices failing),
// 2 a usage error (a flag, a value, a device that is not there), 130
// stopped by Ctrl-C (128 + SIGINT, the shell's convention).
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;

// A flag or value the user got wrong: one line on stderr, exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The train and test sets of an MNIST-layout folder, already cut to their
// first `train_examples` / `test_examples` examples (0: all).
struct Data {
  std::string root;
  std::string name;  // "Fashion-MNIST" or "MNIST-layout data"
  std::shared_ptr<data::Dataset> train, test;
  int64_t train_size = 0, test_size = 0;
  // Class names for the per-class table: Fashion-MNIST's, or the digits.
  std::vector<std::string> classes;
};
// root "" means Debian's dataset-fashion-mnist (or $TANDEM_FASHION_MNIST). A missing dataset is an Error
// saying how to install it or what --data wants.
Data load_data(const std::string& root, int64_t train_examples, int64_t test_examples, bool need_train = true);

// --device: "auto" (cuda when a device is there, else cpu), "cpu", "cuda",
// "cuda:N". Sets `why` to the reason for an auto choice. A malformed string
// or a device that is not there is a UsageError.
Device choose_device(const std::string& flag, std::string* why);
// "cpu", or "cuda:0 (NVIDIA H200)", "cuda:0 (Tandem emulated CUDA device 0)".
std::string describe_device(Device device);

// OpenBLAS picks its kernels when it loads, before main, and its
// DYNAMIC_ARCH build falls back to its oldest ones (Prescott, SSE3) on a CPU
// model it does not know, even one with AVX-512: GEMMs 3 to 6 times slower
// (bench/results/2026-12-01-cpu-nn-openblas-kernels.txt). Unless OPENBLAS_CORETYPE is set, choose_blas_kernels sets it
// to the kernels the CPU can run (SkylakeX, Haswell) and runs the program again (execv of the executable, at the top of
// main); it returns when there is nothing to change. blas_note says what was chosen, or what to set; "" when there is
// nothing to say.
void choose_blas_kernels(char** argv);
std::string blas_note();

// uint8 pixels (N, 1, 28, 28) to the float32 input the models take:
// x / 255, then (x - mean) / std with Fashion-MNIST's training-set values.
Tensor prepare_images(const Tensor& pixels);

// 1234567 -> "1,234,567"; 45321.7 -> "45.3k"; bytes -> "12.3 MiB"; seconds -> "1:05".
std::string thousands(int64_t n);
std::string compact(double x);
std::string bytes(double n);
std::string clock_time(double seconds);

}  // namespace tandem::cli

// The tandem command's shared pieces: the dataset, the device choice, formatting.
#include "cli/common.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "data/mnist.h"
#include "kernels/cuda/runtime.h"
#include "tandem/version.h"
#include "tensor/core/errors.h"
#include "tensor/ops/cuda.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/runtime.h"

#if TANDEM_WITH_OPENBLAS
#include <cblas.h>
#endif

namespace tandem::cli {

namespace {

// Fashion-MNIST's training-set mean and standard deviation of x / 255.
constexpr double kMean = 0.2860, kStd = 0.3530;

std::shared_ptr<data::Dataset> first(const data::MNIST& set, int64_t n, int64_t* size) {
  int64_t all = set.images().size(0);
  *size = n > 0 ? std::min(n, all) : all;
  return std::make_shared<data::TensorDataset>(set.images().narrow(0, 0, *size), set.targets().narrow(0, 0, *size));
}

bool looks_like_fashion(const std::string& root) {
  std::string lower;
  for (char c : root) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("fashion") != std::string::npos;
}

}  // namespace

Data load_data(const std::string& root_flag, int64_t train_examples, int64_t test_examples, bool need_train) {
  Data d;
  bool default_root = root_flag.empty();
  // TANDEM_FASHION_MNIST moves the default, as TORCH_HOME does PyTorch's.
  const char* env = std::getenv("TANDEM_FASHION_MNIST");
  d.root = !default_root ? root_flag : (env != nullptr && *env != 0 ? env : data::FashionMNIST::kDefaultRoot);
  d.name = default_root || looks_like_fashion(d.root) ? "Fashion-MNIST" : "MNIST-layout data";
  std::error_code ec;
  if (!std::filesystem::is_directory(d.root, ec)) {
    if (default_root)
      throw Error(
          detail::str_cat("Fashion-MNIST is not installed (no folder ", d.root,
                          "): install it with 'sudo apt-get install dataset-fashion-mnist', or give --data DIR, a "
                          "folder holding the four IDX files of MNIST's layout"));
    throw Error(detail::str_cat("--data ", d.root,
                                ": no such folder; give a folder holding train-images-idx3-ubyte, "
                                "train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte "
                                "(each may end in .gz)"));
  }
  if (need_train) d.train = first(data::MNIST(d.root, data::MNIST::Mode::kTrain), train_examples, &d.train_size);
  d.test = first(data::MNIST(d.root, data::MNIST::Mode::kTest), test_examples, &d.test_size);
  if (d.name == "Fashion-MNIST") {
    for (const char* c : data::FashionMNIST::kClasses) d.classes.emplace_back(c);
  } else {
    for (int i = 0; i < 10; ++i) d.classes.push_back(std::to_string(i));
  }
  return d;
}

Device choose_device(const std::string& flag, std::string* why) {
  if (flag == "auto") {
    if (cuda::is_available()) {
      *why = cuda::is_emulated() ? "auto: emulated CUDA devices are on (TANDEM_EMULATE_CUDA)"
                                 : "auto: a CUDA device is available";
      return Device(kCUDA, cuda::current_device());
    }
    *why = "auto: no CUDA device (" + cuda::detail::unavailable_reason() + ")";
    return Device(kCPU);
  }
  why->clear();
  Device device(kCPU);
  try {
    device = Device(flag);
  } catch (const Error&) {
    throw UsageError("--device " + flag + ": not a device; expected auto, cpu, cuda or cuda:N (e.g. cuda:0)");
  }
  if (device.is_cpu()) return device;
  if (!cuda::is_available())
    throw UsageError("--device " + flag + ": there is no CUDA device here (" + cuda::detail::unavailable_reason() +
                     "); use --device cpu or auto, or set TANDEM_EMULATE_CUDA=1 to emulate one");
  try {
    return resolve_device(device, "tandem");
  } catch (const Error&) {
    int n = cuda::device_count();
    throw UsageError(detail::str_cat(
        "--device ", flag, ": there is no such device; this machine has ", n,
        n == 1 ? " CUDA device, cuda:0" : " CUDA devices, cuda:0 to cuda:", n == 1 ? "" : std::to_string(n - 1)));
  }
}

std::string describe_device(Device device) {
  if (device.is_cpu()) return "cpu";
  return device.str() + " (" + cuda::get_device_name(device.index()) + ")";
}

namespace {

// OpenBLAS's kernels for this CPU when its own choice is older than the CPU:
// "SkylakeX" on AVX-512 (F, BW, DQ, VL), "Haswell" on AVX2 with FMA; ""
// when its choice stands. Its DYNAMIC_ARCH build falls back to Prescott
// (SSE3) on a CPU model it does not know.
std::string better_blas_core() {
#if TANDEM_WITH_OPENBLAS
  std::string core = openblas_get_corename();
  if (core != "Prescott" && core != "Core2" && core != "Penryn" && core != "Nehalem" && core != "Dunnington") return "";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line) && line.rfind("flags", 0) != 0) {
  }
  line += ' ';
  auto has = [&](const char* flag) { return line.find(std::string(" ") + flag + " ") != std::string::npos; };
  if (has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl")) return "SkylakeX";
  if (has("avx2") && has("fma")) return "Haswell";
#endif
  return "";
}

constexpr const char* kChosenMarker = "TANDEM_CHOSE_OPENBLAS_CORETYPE";

}  // namespace

void choose_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv(kChosenMarker) != nullptr) return;
  std::string core = better_blas_core();
  if (core.empty()) return;
#if TANDEM_WITH_OPENBLAS
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  setenv(kChosenMarker, openblas_get_corename(), 1);
  // The real path, not /proc/self/exe, so that ps and top show "tandem".
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = 0;
    execv(self, argv);
  }
  // No re-exec (no /proc): run on with OpenBLAS's own choice.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kChosenMarker);
#endif
}

std::string blas_note() {
#if TANDEM_WITH_OPENBLAS
  if (const char* was = std::getenv(kChosenMarker); was != nullptr && std::getenv("OPENBLAS_CORETYPE") != nullptr)
    return detail::str_cat("tandem chose OpenBLAS's ", std::getenv("OPENBLAS_CORETYPE"),
                           " kernels: OpenBLAS does not know this CPU model and would run its ", was,
                           " kernels, its GEMMs 3 to 6 times slower (set OPENBLAS_CORETYPE to choose yourself)");
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";  // the user's choice
  if (std::string core = better_blas_core(); !core.empty())
    return detail::str_cat("OpenBLAS runs its ", openblas_get_corename(), " kernels on a CPU that can run its faster ",
                           core, " ones: set OPENBLAS_CORETYPE=", core);
#endif
  return "";
}

Tensor prepare_images(const Tensor& pixels) { return pixels.to(kFloat32).div(255).sub(kMean).div(kStd); }

std::string thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string compact(double x) {
  char buf[32];
  if (x >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", x / 1e6);
  } else if (x >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.1fk", x / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", x);
  }
  return buf;
}

std::string bytes(double n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (n >= 1024 && u < 4) {
    n /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return buf;
}

std::string clock_time(double seconds) {
  auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  }
  return buf;
}

}  // namespace tandem::cli

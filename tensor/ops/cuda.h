// tandem::cuda: what the program can ask about GPUs, like torch.cuda. With
// TANDEM_EMULATE_CUDA=N set, N emulated devices backed by host memory and
// the CPU kernels answer instead, and say so in their names.
#pragma once

#include <cstddef>
#include <string>

namespace tandem::cuda {

struct DeviceProperties {
  std::string name;
  int major = 0;
  int minor = 0;
  size_t total_memory = 0;
  int multi_processor_count = 0;
  bool emulated = false;
};

bool is_available();
int device_count();
std::string get_device_name(int device = 0);
DeviceProperties get_device_properties(int device = 0);
// True when cuda devices are emulated on the host (TANDEM_EMULATE_CUDA).
bool is_emulated();
// Whether this build of Tandem links the CUDA runtime at all.
bool is_built();
void synchronize(int device = -1);

}  // namespace tandem::cuda

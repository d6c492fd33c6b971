// Parsing and printing of Device.
#include "tensor/core/device.h"

#include <charconv>
#include <ostream>

#include "tensor/core/errors.h"

namespace tandem {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
  }
  return "unknown";
}

Device::Device(DeviceType type, int index) : type_(type), index_(index) {
  TANDEM_CHECK(index >= -1, ValueError, "Device index must be -1 or non-negative, got ", index);
  TANDEM_CHECK(!(type == DeviceType::CPU && index > 0), ValueError, "CPU device index must be -1 or zero, got ", index);
  if (type == DeviceType::CPU) index_ = -1;
}

static Device parse_device(std::string_view spec) {
  auto bad = [&]() {
    return ValueError(detail::str_cat("Invalid device string: '", spec,
                                      "'. Expected 'cpu', 'cuda' or 'cuda:N' with N a non-negative device index"));
  };
  std::string_view type = spec;
  std::string_view index;
  if (auto colon = spec.find(':'); colon != std::string_view::npos) {
    type = spec.substr(0, colon);
    index = spec.substr(colon + 1);
    if (index.empty()) throw bad();
  }
  DeviceType dtype;
  if (type == "cpu") {
    dtype = DeviceType::CPU;
  } else if (type == "cuda") {
    dtype = DeviceType::CUDA;
  } else {
    throw bad();
  }
  int idx = -1;
  if (!index.empty()) {
    auto [ptr, ec] = std::from_chars(index.data(), index.data() + index.size(), idx);
    if (ec != std::errc() || ptr != index.data() + index.size() || idx < 0) throw bad();
    if (dtype == DeviceType::CPU && idx != 0) throw bad();
  }
  return Device(dtype, idx);
}

Device::Device(std::string_view spec) : Device(parse_device(spec)) {}

std::string Device::str() const {
  std::string s(device_type_name(type_));
  if (index_ >= 0) {
    s += ':';
    s += std::to_string(index_);
  }
  return s;
}

std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }
std::ostream& operator<<(std::ostream& os, DeviceType type) { return os << device_type_name(type); }

}  // namespace tandem

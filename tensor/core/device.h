// Device: a type (cpu, cuda) and an index, parsed from and printed as
// "cpu", "cuda", "cuda:1" like torch.device.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace tandem {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };

constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;

std::string_view device_type_name(DeviceType type);

class Device {
 public:
  // index -1 means "the current device of that type" (resolved when memory is
  // allocated); a cpu device always has index -1.
  Device(DeviceType type, int index = -1);
  // "cpu", "cuda", "cuda:N"; anything else throws ValueError.
  Device(std::string_view spec);
  Device(const char* spec) : Device(std::string_view(spec)) {}
  Device(const std::string& spec) : Device(std::string_view(spec)) {}

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool has_index() const { return index_ >= 0; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  std::string str() const;

  bool operator==(const Device& other) const = default;

 private:
  DeviceType type_;
  int index_;
};

std::ostream& operator<<(std::ostream& os, const Device& device);
std::ostream& operator<<(std::ostream& os, DeviceType type);

}  // namespace tandem

template <>
struct std::hash<tandem::Device> {
  size_t operator()(const tandem::Device& d) const noexcept {
    return std::hash<int>()(static_cast<int>(d.type()) * 4096 + d.index());
  }
};

// Tensors to and from safetensors files, the format of Hugging Face's
// `safetensors` package, so that PyTorch reads what Tandem writes and back:
//
//   8 bytes   N, the header's length, unsigned little-endian
//   N bytes   a JSON object, padded with spaces to a multiple of 8:
//               {"__metadata__": {"key": "value", ...},
//                "fc.weight": {"dtype": "F32", "shape": [256, 784], "data_offsets": [0, 802816]}, ...}
//   the rest  the byte buffer: each tensor's elements, row-major, little-endian,
//             at [begin, end) from the buffer's start; the ranges tile the
//             buffer exactly, without holes or overlaps.
//
// Tandem writes tensors as the safetensors package does (by dtype alignment,
// largest first, then by name, so every tensor is aligned to its element
// size) and records two things in the metadata under the key
// "tandem.devices": the names in the order they were given, and the device
// each tensor was saved from, as a JSON object {"fc.weight": "cuda:0", ...}.
// Loading without map_location puts each tensor back on that device and in
// that order; files without the key (written by PyTorch) load on the cpu, in
// file order, as safetensors.torch.load_file does.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/core/ordered_dict.h"
#include "tensor/core/tensor.h"

namespace tandem::safetensors {

// The metadata key Tandem writes (see above); a caller's metadata may not use it.
inline constexpr std::string_view kDevicesKey = "tandem.devices";
// Headers longer than this are refused, as by the safetensors package.
inline constexpr uint64_t kMaxHeaderSize = 100'000'000;

// The format's dtype name ("F32", "BF16", "BOOL", ...) of a Tandem dtype.
std::string_view dtype_to_name(Dtype dtype);
// Tandem's dtype for a format name. A valid name that Tandem has no dtype for
// (I8, I16, U16, U32, U64, the 8-bit floats, ...) is a DtypeError; a name the
// format does not have is a SerializationError.
Dtype dtype_from_name(std::string_view name);

struct TensorInfo {
  std::string name;
  Dtype dtype;
  Shape shape;
  uint64_t begin, end;           // data_offsets, relative to the buffer
  std::optional<Device> device;  // the saved device, when Tandem wrote the file
};

// A checked header: every offset inside the file, the ranges tiling the
// buffer, each span equal to shape x element size, the metadata strings only.
struct Header {
  uint64_t header_size = 0;                     // N; the buffer starts at 8 + N
  std::vector<TensorInfo> tensors;              // in load order (see above)
  std::map<std::string, std::string> metadata;  // the caller's: without kDevicesKey
};

struct LoadResult {
  OrderedDict<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // as given to save_file (Tandem's own key removed)
};

// Writes the tensors (any device, dtype and layout: a non-contiguous tensor is
// written as its contiguous copy, a cuda one copied to the host one tensor at
// a time) and the metadata strings to path, atomically: the bytes go to
// path + ".tmp.<pid>" in the same folder, which is flushed to disk (fsync) and
// renamed over path. If anything fails, the previous file at path is left as
// it was and the temporary file is removed. Two views of the same memory are
// saved as two tensors. Throws ValueError (undefined tensor, reserved
// metadata key) or SerializationError (the file system refused).
void save_file(const OrderedDict<std::string, Tensor>& tensors, const std::string& path,
               const std::map<std::string, std::string>& metadata = {});
// The same bytes, in memory.
std::string save_bytes(const OrderedDict<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads a file written by save_file or by any safetensors writer. Every
// tensor goes to map_location when given ("cuda" means the current device),
// else to the device it was saved from; a device that does not exist here is a
// DeviceError naming the file, the tensor and the device, before anything is
// read. A file that does not hold what its header claims (truncated, header
// length or offsets out of the file, overlapping ranges or holes, trailing
// bytes, invalid JSON or UTF-8, unknown dtype, shape that does not match the
// bytes, duplicate names, bool bytes other than 0 and 1) is a
// SerializationError naming the file and the tensor. The file is read once,
// each tensor straight into its memory (through a host buffer for a GPU).
// Tensors are leaves that do not require grad, created at loc.
LoadResult load_file(const std::string& path, std::optional<Device> map_location = std::nullopt,
                     std::source_location loc = std::source_location::current());
// The same from bytes in memory; `name` stands for the file in messages.
LoadResult load_bytes(std::string_view bytes, std::optional<Device> map_location = std::nullopt,
                      const std::string& name = "<bytes>", std::source_location loc = std::source_location::current());

// Only the header, checked against the file's size (nothing else is read).
Header read_header(const std::string& path);
Header read_header_bytes(std::string_view bytes, const std::string& name = "<bytes>");

}  // namespace tandem::safetensors

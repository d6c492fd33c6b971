// safetensors reading and writing (tensor/io/safetensors.h): the header is
// built and checked here with tensor/io/json_private.h; the bytes move through a Sink
// (a temporary file, or a string) and a Source (a file read with pread, or
// bytes in memory).
#include "tensor/io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_map>

#include "kernels/cuda/runtime.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/shape.h"
#include "tensor/io/json_private.h"
#include "tensor/ops/cuda.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/runtime.h"

namespace tandem::safetensors {

// The format is little-endian and so are the tensors in memory: bytes are
// copied as they are.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

struct DtypeEntry {
  Dtype dtype;
  std::string_view name;
  // Position in the safetensors package's Dtype enum, which lists dtypes by
  // increasing alignment: its writer orders tensors by this, largest first.
  int rank;
};
constexpr DtypeEntry kDtypes[] = {
    {kBool, "BOOL", 0}, {kUInt8, "U8", 1},     {kFloat16, "F16", 7},  {kBFloat16, "BF16", 8},
    {kInt32, "I32", 9}, {kFloat32, "F32", 11}, {kFloat64, "F64", 12}, {kInt64, "I64", 13},
};
static_assert(std::size(kDtypes) == kNumDtypes, "every dtype needs a safetensors name");

// Dtypes of the format that Tandem does not have.
constexpr std::string_view kForeignDtypes[] = {"I8",      "I16",     "U16",     "U32",     "U64", "F8_E5M2",
                                               "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64"};

const DtypeEntry& entry_of(Dtype dtype) {
  for (const auto& e : kDtypes) {
    if (e.dtype == dtype) return e;
  }
  TANDEM_INTERNAL_ASSERT(false, "dtype without a safetensors name");
}

std::string supported_names() {
  std::string out;
  for (const auto& e : kDtypes) out += detail::str_cat(out.empty() ? "" : ", ", e.name);
  return out;
}

// ---- where the bytes come from

class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  // Exactly n bytes at offset (checked against size() by the caller).
  virtual void read(uint64_t offset, void* dst, size_t n) const = 0;
};

class FileSource final : public Source {
 public:
  FileSource(const std::string& path, const char* op) : path_(path), op_(op) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    TANDEM_CHECK(fd_ >= 0, SerializationError, op, ": cannot open '", path, "': ", std::strerror(errno));
    struct stat st;
    bool stat_ok = ::fstat(fd_, &st) == 0;
    if (!stat_ok || !S_ISREG(st.st_mode)) {
      int err = errno;
      ::close(fd_);
      TANDEM_CHECK(false, SerializationError, op, ": cannot read '", path,
                   "': ", stat_ok ? "not a regular file" : std::strerror(err));
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, size_t n) const override {
    auto* out = static_cast<char*>(dst);
    while (n > 0) {
      // pread moves at most about 2 GiB a call on Linux.
      size_t chunk = std::min<size_t>(n, size_t{1} << 30);
      ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      TANDEM_CHECK(got >= 0, SerializationError, op_, ": reading '", path_, "' failed: ", std::strerror(errno));
      TANDEM_CHECK(got > 0, SerializationError, op_, ": '", path_, "' became shorter while it was read (", size_,
                   " bytes when opened): was it written to at the same time?");
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }

 private:
  std::string path_;
  const char* op_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

class BytesSource final : public Source {
 public:
  explicit BytesSource(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(uint64_t offset, void* dst, size_t n) const override {
    if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::string_view bytes_;
};

// ---- the header

// Every problem with a file's contents: "load_file: 'ckpt.safetensors': ...".
class Checker {
 public:
  Checker(const char* op, const std::string& name) : op_(op), name_(name) {}
  template <typename... Args>
  [[noreturn]] void fail(const Args&... parts) const {
    throw SerializationError(detail::str_cat(op_, ": '", name_, "': ", parts...));
  }
  template <typename... Args>
  void check(bool cond, const Args&... parts) const {
    if (!cond) [[unlikely]]
      fail(parts...);
  }
  const char* op() const { return op_; }
  const std::string& name() const { return name_; }

 private:
  const char* op_;
  const std::string& name_;
};

uint64_t non_negative_int(const Checker& c, const json::Value& v, const std::string& tensor, const char* field) {
  c.check(v.is_number_integer(), "tensor '", tensor, "': ", field, " must hold integers, got ",
          v.is_string() ? "a string" : "a ", v.is_string() ? "" : json::type_name(v));
  int64_t i = json::as_int(v);
  c.check(i >= 0, "tensor '", tensor, "': ", field, " holds ", i, ", a negative number");
  return static_cast<uint64_t>(i);
}

TensorInfo parse_tensor_entry(const Checker& c, const std::string& name, const json::Value& entry) {
  c.check(entry.is_object(), "tensor '", name, "': expected an object with dtype, shape and data_offsets, got ",
          json::type_name(entry));
  const json::Value* dtype = nullptr;
  const json::Value* shape = nullptr;
  const json::Value* offsets = nullptr;
  for (const auto& [field, value] : entry.items()) {
    if (field == "dtype") {
      dtype = &value;
    } else if (field == "shape") {
      shape = &value;
    } else if (field == "data_offsets") {
      offsets = &value;
    } else {
      c.fail("tensor '", name, "': unknown field ", json::quote(field),
             " (a tensor entry holds dtype, shape and data_offsets only)");
    }
  }
  c.check(dtype && shape && offsets, "tensor '", name, "': the entry has no ",
          !dtype   ? "dtype"
          : !shape ? "shape"
                   : "data_offsets");

  TensorInfo info;
  info.name = name;
  c.check(dtype->is_string(), "tensor '", name, "': dtype must be a string, got ", json::type_name(*dtype));
  const std::string& dtype_name = json::as_string(*dtype);
  try {
    info.dtype = dtype_from_name(dtype_name);
  } catch (const DtypeError& e) {
    throw DtypeError(detail::str_cat(c.op(), ": '", c.name(), "': tensor '", name, "': ", e.what()));
  } catch (const SerializationError& e) {
    c.fail("tensor '", name, "': ", e.what());
  }

  c.check(shape->is_array(), "tensor '", name, "': shape must be an array, got ", json::type_name(*shape));
  for (const json::Value& d : *shape) {
    info.shape.push_back(static_cast<int64_t>(non_negative_int(c, d, name, "shape")));
  }
  // The product of the non-zero sizes must fit in int64 even when a size is
  // 0: the tensor's strides (contiguous_strides) multiply them.
  int64_t nonzero_numel = 1;
  bool has_zero = false;
  for (int64_t d : info.shape) {
    has_zero = has_zero || d == 0;
    if (d != 0 && __builtin_mul_overflow(nonzero_numel, d, &nonzero_numel)) {
      c.fail("tensor '", name, "': shape ", shape_str(info.shape),
             " is too large to exist (its non-zero sizes multiply past 2^63 - 1)");
    }
  }
  uint64_t nbytes = 0;
  if (!has_zero && __builtin_mul_overflow(static_cast<uint64_t>(nonzero_numel), element_size(info.dtype), &nbytes)) {
    c.fail("tensor '", name, "': shape ", shape_str(info.shape), " of ", dtype_name,
           " is too large to exist (its size in bytes is over 2^64 - 1)");
  }

  c.check(offsets->is_array() && offsets->size() == 2, "tensor '", name,
          "': data_offsets must be an array of two integers [begin, end]");
  info.begin = non_negative_int(c, (*offsets)[0], name, "data_offsets");
  info.end = non_negative_int(c, (*offsets)[1], name, "data_offsets");
  c.check(info.begin <= info.end, "tensor '", name, "': data_offsets [", info.begin, ", ", info.end,
          "] end before they begin");
  if (info.end - info.begin != nbytes) {
    c.fail("tensor '", name, "': data_offsets [", info.begin, ", ", info.end, "] span ", info.end - info.begin,
           " bytes, but shape ", shape_str(info.shape), " of ", dtype_name, " needs ", nbytes);
  }
  return info;
}

// Reads "tandem.devices": each tensor's saved device, and the save order.
void apply_devices(const Checker& c, const std::string& text, std::vector<TensorInfo>& tensors) {
  json::Value devices;
  try {
    devices = json::parse(text);
  } catch (const json::ParseError& e) {
    c.fail("metadata '", kDevicesKey, "' is not valid JSON: ", e.what());
  }
  c.check(devices.is_object(), "metadata '", kDevicesKey, "' must be a JSON object of tensor names to devices, got ",
          json::type_name(devices));
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) index.emplace(tensors[i].name, i);
  // The save order as indices into tensors; nothing is moved until every
  // tensor is known to be named (the JSON parser refuses duplicate keys).
  std::vector<size_t> order;
  order.reserve(tensors.size());
  std::vector<bool> named(tensors.size(), false);
  for (const auto& [name, device] : devices.items()) {
    auto it = index.find(name);
    c.check(it != index.end(), "metadata '", kDevicesKey, "' names tensor '", name, "', which the file does not hold");
    c.check(device.is_string(), "metadata '", kDevicesKey, "': the device of tensor '", name,
            "' must be a string such as \"cuda:0\", got ", json::type_name(device));
    try {
      tensors[it->second].device = Device(json::as_string(device));
    } catch (const ValueError& e) {
      c.fail("metadata '", kDevicesKey, "': tensor '", name, "': ", e.what());
    }
    order.push_back(it->second);
    named[it->second] = true;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    c.check(named[i], "metadata '", kDevicesKey, "' does not name tensor '", tensors[i].name,
            "', which the file holds");
  }
  std::vector<TensorInfo> ordered;
  ordered.reserve(tensors.size());
  for (size_t i : order) ordered.push_back(std::move(tensors[i]));
  tensors = std::move(ordered);
}

Header parse_header(const Source& source, const Checker& c) {
  uint64_t size = source.size();
  c.check(size >= 8, "the file is ", size,
          " bytes long, shorter than the 8-byte header length: it is truncated or not a safetensors file");
  uint64_t n = 0;
  source.read(0, &n, 8);
  c.check(n <= kMaxHeaderSize, "the header length ", n, " is over the format's limit of ", kMaxHeaderSize,
          " bytes: the file is corrupt or not a safetensors file");
  c.check(n <= size - 8, "the header length ", n, " runs past the end of the file (", size,
          " bytes in all): the file is truncated or its header length is corrupt");
  std::string text(n, '\0');
  source.read(8, text.data(), n);

  json::Value root;
  try {
    root = json::parse(text);
  } catch (const json::ParseError& e) {
    c.fail("the header is not valid JSON: ", e.what());
  }
  c.check(root.is_object(), "the header must be a JSON object, got ", json::type_name(root));

  Header header;
  header.header_size = n;
  std::optional<std::string> devices;
  for (const auto& [key, value] : root.items()) {
    if (key != "__metadata__") {
      header.tensors.push_back(parse_tensor_entry(c, key, value));
      continue;
    }
    c.check(value.is_object(), "__metadata__ must be an object of strings, got ", json::type_name(value));
    for (const auto& [k, v] : value.items()) {
      c.check(v.is_string(), "__metadata__ key '", k, "': values must be strings, got ", json::type_name(v));
      if (k == kDevicesKey) {
        devices = json::as_string(v);
      } else {
        header.metadata.emplace(k, json::as_string(v));
      }
    }
  }

  // The ranges, in buffer order, must tile [0, buffer size) exactly.
  uint64_t buffer_size = size - 8 - n;
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t expected = 0;
  const TensorInfo* previous = nullptr;
  for (const auto& info : header.tensors) {
    c.check(info.end <= buffer_size, "tensor '", info.name, "': data_offsets [", info.begin, ", ", info.end,
            "] run past the end of the buffer (", buffer_size, " bytes after the header): the file is truncated");
    if (info.begin > expected) {
      c.fail("tensor '", info.name, "': data_offsets [", info.begin, ", ", info.end, "] leave a hole of ",
             info.begin - expected, " bytes after ", previous ? "tensor '" + previous->name + "'" : "the header",
             " (the tensors must tile the buffer)");
    }
    if (info.begin < expected) {
      // Sorted by begin, so expected > 0 and there is a previous tensor.
      c.fail("tensor '", info.name, "': data_offsets [", info.begin, ", ", info.end, "] overlap tensor '",
             previous->name, "' at [", previous->begin, ", ", previous->end, ")");
    }
    expected = info.end;
    previous = &info;
  }
  if (expected != buffer_size) {
    c.fail(buffer_size - expected, " trailing bytes after ",
           previous ? "the last tensor '" + previous->name + "'" : "the header", " (the buffer is ", buffer_size,
           " bytes, the tensors cover ", expected, ")");
  }

  if (devices) apply_devices(c, *devices, header.tensors);
  return header;
}

// ---- devices

// The device a tensor loads on, checked to exist here.
Device target_device(const Checker& c, const TensorInfo& info, const std::optional<Device>& map_location) {
  if (map_location) return resolve_device(*map_location, c.op());
  Device saved = info.device.value_or(Device(kCPU));
  if (!saved.is_cuda()) return saved;
  int count = cuda::device_count();
  if (count == 0) {
    throw DeviceError(detail::str_cat(
        c.op(), ": '", c.name(), "': tensor '", info.name, "' was saved from ", saved.str(),
        ". Attempting to deserialize object on a CUDA device but CUDA is not available (",
        cuda::detail::unavailable_reason(),
        "). If you are running on a CPU-only machine, pass map_location to load the tensors on the cpu: "
        "map_location = Device(\"cpu\")"));
  }
  if (saved.has_index() && saved.index() >= count) {
    throw DeviceError(detail::str_cat(c.op(), ": '", c.name(), "': tensor '", info.name, "' was saved from ",
                                      saved.str(), ". Attempting to deserialize object on CUDA device ", saved.index(),
                                      " but there ", count == 1 ? "is " : "are ", count, " CUDA device",
                                      count == 1 ? "" : "s", " (cuda:0 to cuda:", count - 1,
                                      "). Pass map_location to load the tensors on an existing device, e.g. "
                                      "map_location = Device(\"cuda:0\") or Device(\"cpu\")"));
  }
  return resolve_device(saved, c.op());
}

void check_bools(const Checker& c, const TensorInfo& info, const unsigned char* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] > 1) [[unlikely]] {
      c.fail("tensor '", info.name, "' (BOOL) holds the byte ", static_cast<int>(bytes[i]), " at element ", i,
             ": booleans must be 0 or 1");
    }
  }
}

// origin_op names the loader in the tensors' Origin.
LoadResult load(const Source& source, const Checker& c, const std::optional<Device>& map_location,
                const char* origin_op, const std::source_location& loc) {
  Header header = parse_header(source, c);
  std::vector<Device> devices;
  devices.reserve(header.tensors.size());
  for (const auto& info : header.tensors) devices.push_back(target_device(c, info, map_location));

  const uint64_t buffer_start = 8 + header.header_size;
  LoadResult result;
  result.metadata = std::move(header.metadata);
  std::vector<unsigned char> staging;
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const TensorInfo& info = header.tensors[i];
    Tensor t = detail::make_result(info.shape, info.dtype, devices[i], Origin::created(origin_op, loc));
    size_t nbytes = static_cast<size_t>(info.end - info.begin);
    if (nbytes > 0) {
      if (devices[i].is_cpu()) {
        source.read(buffer_start + info.begin, t.data_ptr(), nbytes);
        if (info.dtype == kBool) check_bools(c, info, static_cast<const unsigned char*>(t.data_ptr()), nbytes);
      } else {
        // Pageable staging: copy_bytes waits for the copy, so it can be reused.
        staging.resize(nbytes);
        source.read(buffer_start + info.begin, staging.data(), nbytes);
        if (info.dtype == kBool) check_bools(c, info, staging.data(), nbytes);
        copy_bytes(t.data_ptr(), devices[i], staging.data(), Device(kCPU), nbytes);
      }
    }
    result.tensors.insert(info.name, std::move(t));
  }
  return result;
}

// ---- writing

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(const void* data, size_t n) = 0;
};

class StringSink final : public Sink {
 public:
  explicit StringSink(std::string& out) : out_(out) {}
  void write(const void* data, size_t n) override { out_.append(static_cast<const char*>(data), n); }

 private:
  std::string& out_;
};

// A temporary file beside the target, renamed over it by commit(); removed if
// commit() is never reached.
class AtomicFileSink final : public Sink {
 public:
  explicit AtomicFileSink(const std::string& path) : path_(path) {
    tmp_ = path + ".tmp." + std::to_string(::getpid());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      int err = errno;
      TANDEM_CHECK(false, SerializationError, "save_file: cannot create the temporary file '", tmp_, "' to write '",
                   path, "': ", std::strerror(err),
                   err == EEXIST ? " (another save to the same path is under way in this process, or a crashed one "
                                   "left it behind: remove it)"
                                 : "");
    }
  }
  ~AtomicFileSink() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  AtomicFileSink(const AtomicFileSink&) = delete;
  AtomicFileSink& operator=(const AtomicFileSink&) = delete;

  void write(const void* data, size_t n) override {
    // Small pieces (headers, small tensors) are gathered into one write.
    if (buffer_.size() + n <= kBufferSize) {
      buffer_.append(static_cast<const char*>(data), n);
      return;
    }
    flush();
    if (n <= kBufferSize) {
      buffer_.append(static_cast<const char*>(data), n);
    } else {
      write_all(data, n);
    }
  }

  void commit() {
    flush();
    check(::fsync(fd_) == 0, "flushing it to disk (fsync)");
    int fd = fd_;
    fd_ = -1;
    check(::close(fd) == 0, "closing it");
    check(::rename(tmp_.c_str(), path_.c_str()) == 0, "renaming it over the target");
    committed_ = true;
    // Make the rename itself durable. Some file systems cannot sync a folder;
    // the file is in place either way, so a failure here is not an error.
    std::string dir = path_.find('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/') + 1);
    int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

 private:
  static constexpr size_t kBufferSize = size_t{4} << 20;

  void check(bool ok, const char* doing) {
    TANDEM_CHECK(ok, SerializationError, "save_file: writing '", path_, "' failed while ", doing, " (",
                 std::strerror(errno), "); the previous file, if any, is unchanged");
  }
  void write_all(const void* data, size_t n) {
    auto* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t put = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
      if (put < 0 && errno == EINTR) continue;
      check(put > 0, "writing the temporary file");
      p += put;
      n -= static_cast<size_t>(put);
    }
  }
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  std::string buffer_;
};

struct Plan {
  std::string header;         // padded JSON
  std::vector<size_t> order;  // indices into the dict, in file order
};

Plan plan(const char* op, const OrderedDict<std::string, Tensor>& tensors,
          const std::map<std::string, std::string>& metadata) {
  const auto& items = tensors.items();
  json::Value devices = json::Value::object();
  for (const auto& item : items) {
    TANDEM_CHECK(item.second.defined(), ValueError, op, ": tensor '", item.first,
                 "' is undefined: only defined tensors can be saved");
    TANDEM_CHECK(item.first != "__metadata__", ValueError, op,
                 ": a tensor may not be named '__metadata__': the format reserves it for the metadata");
    TANDEM_CHECK(json::is_valid_utf8(item.first), ValueError, op, ": tensor name ", json::quote(item.first),
                 " is not valid UTF-8, which the format's JSON header requires");
    json::append_member(devices, item.first, item.second.device().str());
  }
  std::map<std::string, std::string> all_metadata;
  for (const auto& [k, v] : metadata) {
    TANDEM_CHECK(k != kDevicesKey, ValueError, op, ": the metadata key '", kDevicesKey,
                 "' is Tandem's own (the device of each tensor): use another key");
    TANDEM_CHECK(json::is_valid_utf8(k) && json::is_valid_utf8(v), ValueError, op, ": metadata key ", json::quote(k),
                 " or its value is not valid UTF-8, which the format's JSON header requires");
    all_metadata.emplace(k, v);
  }
  all_metadata.emplace(std::string(kDevicesKey), json::dump(devices));

  // The safetensors package's order: by dtype alignment, largest first, then by name.
  Plan p;
  p.order.resize(items.size());
  std::iota(p.order.begin(), p.order.end(), size_t{0});
  std::sort(p.order.begin(), p.order.end(), [&](size_t a, size_t b) {
    int ra = entry_of(items[a].second.dtype()).rank, rb = entry_of(items[b].second.dtype()).rank;
    if (ra != rb) return ra > rb;
    return items[a].first < items[b].first;
  });

  json::Value root = json::Value::object();
  root["__metadata__"] = all_metadata;
  uint64_t offset = 0;
  for (size_t i : p.order) {
    const Tensor& t = items[i].second;
    uint64_t end = offset + t.nbytes();
    json::append_member(root, items[i].first,
                        {{"dtype", entry_of(t.dtype()).name},
                         {"shape", std::vector<int64_t>(t.sizes().begin(), t.sizes().end())},
                         {"data_offsets", {offset, end}}});
    offset = end;
  }
  p.header = json::dump(root);
  p.header.append((8 - p.header.size() % 8) % 8, ' ');
  TANDEM_CHECK(p.header.size() <= kMaxHeaderSize, ValueError, op, ": the header would be ", p.header.size(),
               " bytes, over the format's limit of ", kMaxHeaderSize, " (too many tensors or too much metadata)");
  return p;
}

void write(Sink& sink, const OrderedDict<std::string, Tensor>& tensors, const Plan& p) {
  uint64_t n = p.header.size();
  sink.write(&n, 8);
  sink.write(p.header.data(), p.header.size());
  NoGradGuard no_grad;
  for (size_t i : p.order) {
    Tensor t = tensors.items()[i].second;
    if (t.numel() == 0) continue;
    // Made contiguous on its own device, then brought to the host, one
    // tensor at a time so that a checkpoint never needs twice its memory.
    if (!t.is_contiguous()) t = t.contiguous();
    if (!t.is_cpu()) t = t.to(Device(kCPU));
    sink.write(t.data_ptr(), t.nbytes());
  }
}

}  // namespace

std::string_view dtype_to_name(Dtype dtype) { return entry_of(dtype).name; }

Dtype dtype_from_name(std::string_view name) {
  for (const auto& e : kDtypes) {
    if (e.name == name) return e.dtype;
  }
  for (std::string_view foreign : kForeignDtypes) {
    TANDEM_CHECK(name != foreign, DtypeError, "dtype ", name, " has no Tandem equivalent (Tandem holds ",
                 supported_names(), "): convert the tensor to one of these before saving it");
  }
  throw SerializationError(
      detail::str_cat("unknown dtype ", json::quote(name), " (the format's dtypes include ", supported_names(), ")"));
}

void save_file(const OrderedDict<std::string, Tensor>& tensors, const std::string& path,
               const std::map<std::string, std::string>& metadata) {
  Plan p = plan("save_file", tensors, metadata);
  AtomicFileSink sink(path);
  write(sink, tensors, p);
  sink.commit();
}

std::string save_bytes(const OrderedDict<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  Plan p = plan("save_bytes", tensors, metadata);
  std::string out;
  StringSink sink(out);
  write(sink, tensors, p);
  return out;
}

LoadResult load_file(const std::string& path, std::optional<Device> map_location, std::source_location loc) {
  FileSource source(path, "load_file");
  return load(source, Checker("load_file", path), map_location, "tandem::safetensors::load_file", loc);
}

LoadResult load_bytes(std::string_view bytes, std::optional<Device> map_location, const std::string& name,
                      std::source_location loc) {
  return load(BytesSource(bytes), Checker("load_bytes", name), map_location, "tandem::safetensors::load_bytes", loc);
}

Header read_header(const std::string& path) {
  FileSource source(path, "read_header");
  return parse_header(source, Checker("read_header", path));
}

Header read_header_bytes(std::string_view bytes, const std::string& name) {
  return parse_header(BytesSource(bytes), Checker("read_header_bytes", name));
}

}  // namespace tandem::safetensors

// IDX files (data/idx.h): the whole file is read into memory, gunzipped when
// it starts with gzip's magic, and its header checked against its length
// before a tensor is allocated; the values are then copied (byte-swapped from
// big-endian) into the tensor.
#include "data/idx.h"

#include <errno.h>
#include <sys/stat.h>

#include <bit>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

#include "tensor/core/errors.h"
#include "tensor/core/shape.h"
#include "tensor/ops/factory.h"

#ifdef TANDEM_WITH_ZLIB
#include <zlib.h>
#endif

namespace tandem::data {

namespace {

// ---- the bytes of a file

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

std::vector<uint8_t> read_file(const std::string& path, const char* op) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  TANDEM_CHECK(f != nullptr, SerializationError, op, ": cannot open '", path, "': ", std::strerror(errno));
  struct stat st;
  TANDEM_CHECK(::fstat(::fileno(f.get()), &st) == 0, SerializationError, op, ": cannot stat '", path,
               "': ", std::strerror(errno));
  TANDEM_CHECK(!S_ISDIR(st.st_mode), SerializationError, op, ": '", path, "' is a directory, not a file");
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  errno = 0;  // fread need not set it: a stale value would name the wrong cause
  size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f.get());
  int read_errno = errno;
  TANDEM_CHECK(!std::ferror(f.get()), SerializationError, op, ": error reading '", path, "'",
               read_errno ? tandem::detail::str_cat(": ", std::strerror(read_errno)) : std::string());
  // A file that shrank between fstat and fread.
  TANDEM_CHECK(got == bytes.size(), SerializationError, op, ": '", path, "' has ", bytes.size(), " bytes but only ",
               got, " could be read (did it change while being read?)");
  return bytes;
}

bool is_gzip(const std::vector<uint8_t>& bytes) { return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b; }

// ---- gzip

#ifdef TANDEM_WITH_ZLIB

// The first allocation is ISIZE, capped at this many bytes per compressed
// byte plus kFirstSlack: real IDX files compress far less (Fashion-MNIST's
// 1.8-2:1, MNIST's images about 4.7:1), while a corrupt ISIZE may claim 4 GiB
// for a file of a few MB. Past the first allocation the buffer doubles as the
// data comes.
constexpr size_t kFirstRatio = 8;
constexpr size_t kFirstSlack = 64 << 10;

// out resized to `size` bytes, or OutOfMemoryError naming the file.
void resize_output(std::vector<uint8_t>& out, size_t size, size_t decompressed, const std::string& path,
                   const char* op) {
  try {
    out.resize(size);
  } catch (const std::bad_alloc&) {
    TANDEM_CHECK(false, OutOfMemoryError, op, ": '", path, "': out of memory growing the buffer for the decompressed ",
                 "data to ", size, " bytes (", decompressed, " bytes decompressed so far)");
  }
}

struct InflateStream {
  z_stream zs{};
  bool open = false;
  ~InflateStream() {
    if (open) inflateEnd(&zs);
  }
};

// Gunzips every member of a gzip file (gzip(1) and Python's gzip module read
// concatenated members as one stream). Zero bytes after the last member are
// ignored, as both do; any other trailing bytes are an error. inflate checks
// each member's CRC-32 and length trailer.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& in, const std::string& path, const char* op) {
  // ISIZE, the last member's uncompressed length mod 2^32, is only a hint for
  // the first allocation: a corrupt or concatenated file may lie.
  size_t hint = in.size() >= 18
                    ? static_cast<size_t>(in[in.size() - 4]) | static_cast<size_t>(in[in.size() - 3]) << 8 |
                          static_cast<size_t>(in[in.size() - 2]) << 16 | static_cast<size_t>(in[in.size() - 1]) << 24
                    : 0;
  hint = std::min(hint, in.size() * kFirstRatio + kFirstSlack);
  std::vector<uint8_t> out;
  resize_output(out, std::max<size_t>(hint, 4096), 0, path, op);

  InflateStream s;
  int rc = inflateInit2(&s.zs, 15 + 16);  // 15-bit window, gzip wrapper only
  TANDEM_CHECK(rc == Z_OK, SerializationError, op, ": '", path, "': zlib cannot start decompressing (",
               s.zs.msg ? s.zs.msg : zError(rc), ")");
  s.open = true;

  size_t in_pos = 0, out_pos = 0;
  int members = 1;
  for (;;) {
    if (out_pos == out.size()) resize_output(out, out.size() * 2, out_pos, path, op);
    // zlib counts in uInt (32 bits): feed and drain at most that much at a time.
    size_t in_chunk = std::min<size_t>(in.size() - in_pos, UINT_MAX);
    size_t out_chunk = std::min<size_t>(out.size() - out_pos, UINT_MAX);
    s.zs.next_in = const_cast<Bytef*>(in.data() + in_pos);
    s.zs.avail_in = static_cast<uInt>(in_chunk);
    s.zs.next_out = out.data() + out_pos;
    s.zs.avail_out = static_cast<uInt>(out_chunk);
    rc = inflate(&s.zs, Z_NO_FLUSH);
    in_pos += in_chunk - s.zs.avail_in;
    out_pos += out_chunk - s.zs.avail_out;

    if (rc == Z_STREAM_END) {
      if (in_pos == in.size()) break;
      if (in.size() - in_pos >= 2 && in[in_pos] == 0x1f && in[in_pos + 1] == 0x8b) {
        inflateReset(&s.zs);
        ++members;
        continue;
      }
      bool zeros = true;
      for (size_t i = in_pos; i < in.size() && zeros; ++i) zeros = in[i] == 0;
      TANDEM_CHECK(zeros, SerializationError, op, ": '", path, "': ", in.size() - in_pos,
                   " trailing bytes after the end of the gzip stream (member ", members, " ended at byte ", in_pos,
                   " of ", in.size(), ") that are not another gzip member");
      break;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && in_pos == in.size()) {
      // No progress with room to write: the input ran out mid-stream.
      TANDEM_CHECK(false, SerializationError, op, ": '", path,
                   "': truncated gzip stream: the input ended before the end of the stream (", in.size(),
                   " compressed bytes read, ", out_pos, " bytes decompressed); the file is incomplete");
    }
    if (rc == Z_BUF_ERROR) continue;  // the output was full: grow it
    TANDEM_CHECK(rc != Z_MEM_ERROR, OutOfMemoryError, op, ": '", path, "': zlib ran out of memory while decompressing");
    TANDEM_CHECK(false, SerializationError, op, ": '", path,
                 "': corrupt gzip stream: ", s.zs.msg ? s.zs.msg : zError(rc), " (at compressed byte ", in_pos, " of ",
                 in.size(), ", after ", out_pos, " decompressed bytes)");
  }
  out.resize(out_pos);
  return out;
}

#else

std::vector<uint8_t> gunzip(const std::vector<uint8_t>&, const std::string& path, const char* op) {
  throw NotImplementedError(tandem::detail::str_cat(
      op, ": '", path,
      "' is gzip-compressed, but Tandem was built without zlib; gunzip the file or rebuild with zlib1g-dev installed"));
}

#endif

std::vector<uint8_t> read_bytes(const std::string& path, const char* op) {
  std::vector<uint8_t> bytes = read_file(path, op);
  if (is_gzip(bytes)) bytes = gunzip(bytes, path, op);
  return bytes;
}

// ---- IDX

uint32_t load_be32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 |
         static_cast<uint32_t>(p[3]);
}

// Copies n big-endian values of `width` bytes from src into dst, in host order.
void copy_from_big_endian(void* dst, const uint8_t* src, size_t n, size_t width) {
  if (width == 1 || std::endian::native == std::endian::big) {
    std::memcpy(dst, src, n * width);
    return;
  }
  if (width == 4) {
    auto* d = static_cast<uint32_t*>(dst);
    for (size_t i = 0; i < n; ++i) {
      uint32_t v;
      std::memcpy(&v, src + 4 * i, 4);
      d[i] = __builtin_bswap32(v);
    }
  } else {
    TANDEM_INTERNAL_ASSERT(width == 8, "IDX values are 1, 4 or 8 bytes wide");
    auto* d = static_cast<uint64_t*>(dst);
    for (size_t i = 0; i < n; ++i) {
      uint64_t v;
      std::memcpy(&v, src + 8 * i, 8);
      d[i] = __builtin_bswap64(v);
    }
  }
}

constexpr int kMaxIdxDims = 8;

}  // namespace

std::vector<uint8_t> read_maybe_gzipped(const std::string& path) { return read_bytes(path, "read_maybe_gzipped"); }

bool has_gzip() {
#ifdef TANDEM_WITH_ZLIB
  return true;
#else
  return false;
#endif
}

Tensor read_idx(const std::string& path) {
  const char* op = "read_idx";
  std::vector<uint8_t> bytes = read_bytes(path, op);
  TANDEM_CHECK(!bytes.empty(), SerializationError, op, ": '", path, "' is empty (0 bytes): not an IDX file");
  TANDEM_CHECK(bytes.size() >= 4, SerializationError, op, ": '", path,
               "' is too short for an IDX header: ", bytes.size(), " bytes, but the magic number alone takes 4");
  uint32_t magic = load_be32(bytes.data());
  char magic_hex[16];
  std::snprintf(magic_hex, sizeof magic_hex, "0x%08x", magic);
  TANDEM_CHECK(bytes[0] == 0 && bytes[1] == 0, SerializationError, op, ": '", path, "': wrong magic number ", magic_hex,
               ": not an IDX file (an IDX file starts with two zero bytes, its type byte and its number ",
               "of dimensions)");

  uint8_t type = bytes[2];
  Dtype dtype = kUInt8;
  switch (type) {
    case 0x08: dtype = kUInt8; break;
    case 0x0C: dtype = kInt32; break;
    case 0x0D: dtype = kFloat32; break;
    case 0x0E: dtype = kFloat64; break;
    case 0x09:
    case 0x0B:
      TANDEM_CHECK(false, NotImplementedError, op, ": '", path, "' holds ", type == 0x09 ? "int8" : "int16",
                   " values (IDX type ", type == 0x09 ? "0x09" : "0x0B", "), and Tandem has no ",
                   type == 0x09 ? "int8" : "int16", " dtype; convert the file to uint8, int32 or float32");
    default: {
      char type_hex[8];
      std::snprintf(type_hex, sizeof type_hex, "0x%02x", type);
      TANDEM_CHECK(false, SerializationError, op, ": '", path, "': unknown IDX type ", type_hex, " (magic number ",
                   magic_hex, "); the IDX types are 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32 ",
                   "and 0x0E float64");
    }
  }

  int ndim = bytes[3];
  TANDEM_CHECK(ndim >= 1 && ndim <= kMaxIdxDims, SerializationError, op, ": '", path, "': the header declares ", ndim,
               " dimensions; Tandem reads IDX files with 1 to ", kMaxIdxDims);
  size_t header = 4 + 4 * static_cast<size_t>(ndim);
  TANDEM_CHECK(bytes.size() >= header, SerializationError, op, ": '", path, "' is too short for its IDX header: ", ndim,
               " dimensions need ", header, " bytes of header, but the file has ", bytes.size());

  Shape sizes;
  uint64_t numel = 1;
  for (int d = 0; d < ndim; ++d) {
    auto size = static_cast<int32_t>(load_be32(bytes.data() + 4 + 4 * d));
    TANDEM_CHECK(size >= 0, SerializationError, op, ": '", path, "': dimension ", d, " has a negative size ", size);
    sizes.push_back(size);
    TANDEM_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(size), &numel), SerializationError, op, ": '",
                 path, "': the sizes ", shape_str(sizes), "... hold more elements than 64 bits can count");
  }
  size_t width = element_size(dtype);
  uint64_t expected = 0;
  TANDEM_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(width), &expected) &&
                   expected <= static_cast<uint64_t>(INT64_MAX),
               SerializationError, op, ": '", path, "': the sizes ", shape_str(sizes), " of ", dtype_name(dtype),
               " values hold more bytes than 64 bits can count");
  size_t found = bytes.size() - header;
  TANDEM_CHECK(found >= expected, SerializationError, op, ": '", path, "' is truncated: its header says ",
               shape_str(sizes), " ", dtype_name(dtype), " values, so expected ", expected,
               " bytes of data after the header, found ", found);
  TANDEM_CHECK(found == expected, SerializationError, op, ": '", path, "' has ", found - expected,
               " trailing bytes: its header says ", shape_str(sizes), " ", dtype_name(dtype), " values, so expected ",
               expected, " bytes of data after the header, found ", found);

  Tensor t = empty(sizes, TensorOptions(dtype));
  copy_from_big_endian(t.data_ptr(), bytes.data() + header, numel, width);
  return t;
}

}  // namespace tandem::data

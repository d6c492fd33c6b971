// Datasets and transforms: IDX files (every dtype, gzip or not, every
// malformed header, truncated and corrupt gzip streams) written here into a
// temporary folder, MNIST from a generated folder and the real Fashion-MNIST
// when Debian's package is installed, TensorDataset, and the transforms
// (values, seeded draws, errors, printing) on every device.
#include <dlfcn.h>
#include <stdlib.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/idx.h"
#include "data/mnist.h"
#include "data/transforms.h"
#include "helpers.h"
#include "tensor/core/philox.h"

#if __has_include(<zlib.h>)
#include <zlib.h>
#define TEST_HAS_ZLIB_H 1
#endif

using namespace tandem;
using namespace tandem::data;
namespace fs = std::filesystem;

// The exception's type and a part of its message.
#define REQUIRE_THROWS_ERROR(expr, Type, text)        \
  do {                                                \
    REQUIRE_THROWS_AS(expr, Type);                    \
    REQUIRE_THROWS_WITH(expr, Catch::Contains(text)); \
  } while (0)

namespace {

using Bytes = std::vector<uint8_t>;

// A fresh folder under the system's temporary one, removed with everything
// in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tandem_data_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}
void put_be64(Bytes& b, uint64_t v) {
  for (int s = 56; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

// An IDX header: 0 0 type ndim, then the sizes big-endian.
Bytes idx_header(uint8_t type, const std::vector<int32_t>& sizes) {
  Bytes b = {0, 0, type, static_cast<uint8_t>(sizes.size())};
  for (int32_t s : sizes) put_be32(b, static_cast<uint32_t>(s));
  return b;
}

Bytes idx_uint8(const std::vector<int32_t>& sizes, const std::vector<uint8_t>& values) {
  Bytes b = idx_header(0x08, sizes);
  b.insert(b.end(), values.begin(), values.end());
  return b;
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// gzip through zlib's deflate (windowBits 15 + 16: the gzip wrapper). The
// test binary is not linked against zlib itself (tests/meson.build gives it
// only tandem_dep), so the functions are looked up in the process, where
// libtandem's zlib is loaded.
#ifdef TEST_HAS_ZLIB_H
struct ZlibDeflate {
  decltype(&::deflateInit2_) init = nullptr;
  decltype(&::deflate) deflate = nullptr;
  decltype(&::deflateEnd) end = nullptr;
  decltype(&::zlibVersion) version = nullptr;
};
const ZlibDeflate& zlib_deflate() {
  static ZlibDeflate z = [] {
    ZlibDeflate r;
    r.init = reinterpret_cast<decltype(&::deflateInit2_)>(::dlsym(RTLD_DEFAULT, "deflateInit2_"));
    r.deflate = reinterpret_cast<decltype(&::deflate)>(::dlsym(RTLD_DEFAULT, "deflate"));
    r.end = reinterpret_cast<decltype(&::deflateEnd)>(::dlsym(RTLD_DEFAULT, "deflateEnd"));
    r.version = reinterpret_cast<decltype(&::zlibVersion)>(::dlsym(RTLD_DEFAULT, "zlibVersion"));
    return r;
  }();
  return z;
}
bool can_gzip() {
  const ZlibDeflate& z = zlib_deflate();
  return has_gzip() && z.init && z.deflate && z.end && z.version;
}
Bytes gzip(const Bytes& in, int level = 6) {
  const ZlibDeflate& z = zlib_deflate();
  REQUIRE(can_gzip());
  z_stream s{};
  REQUIRE(z.init(&s, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, z.version(), sizeof(z_stream)) == Z_OK);
  Bytes out(in.size() + in.size() / 100 + 64);
  s.next_in = const_cast<Bytef*>(in.data());
  s.avail_in = static_cast<uInt>(in.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  int rc = z.deflate(&s, Z_FINISH);
  REQUIRE(rc == Z_STREAM_END);
  out.resize(s.total_out);
  z.end(&s);
  return out;
}
#else
bool can_gzip() { return false; }
Bytes gzip(const Bytes&, int = 6) {
  FAIL("no zlib.h");
  return {};
}
#endif

// Both read_idx paths for one IDX content: the plain file and its gzip.
std::vector<std::string> write_both(const TempDir& dir, const std::string& name, const Bytes& idx) {
  std::vector<std::string> paths = {dir.file(name)};
  write_file(paths[0], idx);
  if (can_gzip()) {
    paths.push_back(dir.file(name + ".gz"));
    write_file(paths[1], gzip(idx));
  }
  return paths;
}

}  // namespace

// ---- IDX

TEST_CASE("read_idx reads every IDX dtype, plain and gzipped", "[data][idx]") {
  if (!can_gzip()) WARN("no zlib in this build: only the plain files are read");
  TempDir dir;

  SECTION("uint8 (0x08)") {
    for (const std::string& path : write_both(dir, "u8", idx_uint8({2, 3}, {0, 1, 127, 128, 254, 255}))) {
      INFO(path);
      Tensor t = read_idx(path);
      REQUIRE(t.dtype() == kUInt8);
      REQUIRE(t.sizes() == IntArrayRef{2, 3});
      REQUIRE(t.is_cpu());
      CHECK(t.to_vector<int>() == std::vector<int>{0, 1, 127, 128, 254, 255});
    }
  }
  SECTION("int32 (0x0C)") {
    Bytes b = idx_header(0x0C, {4});
    for (int32_t v : {0, -1, 2147483647, -123456789}) put_be32(b, static_cast<uint32_t>(v));
    for (const std::string& path : write_both(dir, "i32", b)) {
      Tensor t = read_idx(path);
      REQUIRE(t.dtype() == kInt32);
      REQUIRE(t.sizes() == IntArrayRef{4});
      CHECK(t.to_vector<int32_t>() == std::vector<int32_t>{0, -1, 2147483647, -123456789});
    }
  }
  SECTION("float32 (0x0D)") {
    std::vector<float> values = {-1.5f, 0.0f, 3.25f, 1e30f, -0.1f, 7.0f};
    Bytes b = idx_header(0x0D, {1, 2, 3});
    for (float v : values) put_be32(b, std::bit_cast<uint32_t>(v));
    for (const std::string& path : write_both(dir, "f32", b)) {
      Tensor t = read_idx(path);
      REQUIRE(t.dtype() == kFloat32);
      REQUIRE(t.sizes() == IntArrayRef{1, 2, 3});
      CHECK(t.to_vector<float>() == values);
    }
  }
  SECTION("float64 (0x0E)") {
    std::vector<double> values = {3.141592653589793, -2.5e-300};
    Bytes b = idx_header(0x0E, {2});
    for (double v : values) put_be64(b, std::bit_cast<uint64_t>(v));
    for (const std::string& path : write_both(dir, "f64", b)) {
      Tensor t = read_idx(path);
      REQUIRE(t.dtype() == kFloat64);
      CHECK(t.to_vector<double>() == values);
    }
  }
  SECTION("a size of zero: an empty tensor") {
    for (const std::string& path : write_both(dir, "empty", idx_uint8({0, 28, 28}, {}))) {
      Tensor t = read_idx(path);
      REQUIRE(t.sizes() == IntArrayRef{0, 28, 28});
      REQUIRE(t.numel() == 0);
    }
  }
  SECTION("eight dimensions") {
    for (const std::string& path : write_both(dir, "8d", idx_uint8({1, 2, 1, 1, 1, 1, 1, 2}, {5, 6, 7, 8}))) {
      Tensor t = read_idx(path);
      REQUIRE(t.dim() == 8);
      CHECK(t.to_vector<int>() == std::vector<int>{5, 6, 7, 8});
    }
  }
}

TEST_CASE("read_idx: IDX types Tandem has no dtype for", "[data][idx]") {
  TempDir dir;
  Bytes i8 = idx_header(0x09, {2});
  i8.insert(i8.end(), {0xff, 0x01});
  Bytes i16 = idx_header(0x0B, {1});
  i16.insert(i16.end(), {0x80, 0x00});
  for (const std::string& path : write_both(dir, "i8", i8)) {
    REQUIRE_THROWS_ERROR(read_idx(path), NotImplementedError, "holds int8 values (IDX type 0x09)");
    REQUIRE_THROWS_WITH(read_idx(path), Catch::Contains("Tandem has no int8 dtype"));
  }
  for (const std::string& path : write_both(dir, "i16", i16)) {
    REQUIRE_THROWS_ERROR(read_idx(path), NotImplementedError, "holds int16 values (IDX type 0x0B)");
    REQUIRE_THROWS_WITH(read_idx(path), Catch::Contains("Tandem has no int16 dtype"));
  }
}

TEST_CASE("read_idx: malformed files", "[data][idx]") {
  TempDir dir;
  auto bad = [&](const std::string& name, const Bytes& bytes) {
    std::string path = dir.file(name);
    write_file(path, bytes);
    return path;
  };

  SECTION("a missing file") {
    std::string path = dir.file("nope");
    REQUIRE_THROWS_ERROR(read_idx(path), SerializationError, "cannot open '" + path + "': No such file or directory");
    REQUIRE_THROWS_ERROR(read_maybe_gzipped(path), SerializationError, "read_maybe_gzipped: cannot open");
  }
  SECTION("a directory") {
    REQUIRE_THROWS_ERROR(read_idx(dir.str()), SerializationError, "is a directory, not a file");
  }
  SECTION("an empty file") {
    std::string path = bad("empty", {});
    REQUIRE_THROWS_ERROR(read_idx(path), SerializationError, "read_idx: '" + path + "' is empty (0 bytes)");
    CHECK(read_maybe_gzipped(path).empty());
  }
  SECTION("shorter than the magic number") {
    REQUIRE_THROWS_ERROR(read_idx(bad("short", {0, 0, 8})), SerializationError,
                         "is too short for an IDX header: 3 bytes, but the magic number alone takes 4");
  }
  SECTION("shorter than the sizes") {
    Bytes b = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0};
    REQUIRE_THROWS_ERROR(read_idx(bad("short_sizes", b)), SerializationError,
                         "3 dimensions need 16 bytes of header, but the file has 10");
  }
  SECTION("a wrong magic number") {
    Bytes zip = {'P', 'K', 3, 4, 0, 0, 0, 0};
    std::string path = bad("zip", zip);
    REQUIRE_THROWS_ERROR(read_idx(path), SerializationError,
                         "read_idx: '" + path + "': wrong magic number 0x504b0304: not an IDX file");
    Bytes one_zero = {0, 1, 8, 1, 0, 0, 0, 0};
    REQUIRE_THROWS_ERROR(read_idx(bad("one_zero", one_zero)), SerializationError, "wrong magic number 0x00010801");
  }
  SECTION("an unknown type byte") {
    Bytes b = idx_header(0x07, {1});
    b.push_back(0);
    REQUIRE_THROWS_ERROR(read_idx(bad("type", b)), SerializationError,
                         "unknown IDX type 0x07 (magic number 0x00000701); the IDX types are 0x08 uint8");
  }
  SECTION("zero or more than eight dimensions") {
    REQUIRE_THROWS_ERROR(read_idx(bad("ndim0", {0, 0, 8, 0, 42})), SerializationError,
                         "the header declares 0 dimensions; Tandem reads IDX files with 1 to 8");
    Bytes nine = idx_uint8({1, 1, 1, 1, 1, 1, 1, 1, 1}, {3});
    REQUIRE_THROWS_ERROR(read_idx(bad("ndim9", nine)), SerializationError,
                         "the header declares 9 dimensions; Tandem reads IDX files with 1 to 8");
  }
  SECTION("a negative size") {
    REQUIRE_THROWS_ERROR(read_idx(bad("neg", idx_uint8({2, -5}, {}))), SerializationError,
                         "dimension 1 has a negative size -5");
  }
  SECTION("sizes whose product overflows") {
    REQUIRE_THROWS_ERROR(read_idx(bad("overflow", idx_uint8({2147483647, 2147483647, 2147483647}, {}))),
                         SerializationError, "hold more elements than 64 bits can count");
    // 2^63 elements fit a 64-bit count, 2^66 bytes do not.
    REQUIRE_THROWS_ERROR(read_idx(bad("overflow_bytes", idx_header(0x0E, {1 << 30, 1 << 30, 8}))), SerializationError,
                         "the sizes [1073741824, 1073741824, 8] of float64 values hold more bytes than 64 bits");
  }
  SECTION("data shorter than the header says") {
    std::string path = bad("truncated", idx_uint8({2, 3}, {1, 2, 3, 4}));
    REQUIRE_THROWS_ERROR(read_idx(path), SerializationError,
                         "read_idx: '" + path +
                             "' is truncated: its header says [2, 3] uint8 values, so expected 6 bytes of data after "
                             "the header, found 4");
    Bytes f32 = idx_header(0x0D, {1000000});
    REQUIRE_THROWS_ERROR(read_idx(bad("truncated_f32", f32)), SerializationError,
                         "expected 4000000 bytes of data after the header, found 0");
  }
  SECTION("data longer than the header says") {
    REQUIRE_THROWS_ERROR(read_idx(bad("long", idx_uint8({2}, {1, 2, 3}))), SerializationError,
                         "has 1 trailing bytes: its header says [2] uint8 values, so expected 2 bytes of data after "
                         "the header, found 3");
  }
}

TEST_CASE("read_idx: gzip streams", "[data][idx][gzip]") {
  TempDir dir;
  if (!has_gzip()) {
    // A gzip magic is enough for the build without zlib to refuse the file.
    std::string path = dir.file("x.gz");
    write_file(path, {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3});
    REQUIRE_THROWS_ERROR(read_idx(path), NotImplementedError,
                         "is gzip-compressed, but Tandem was built without zlib; gunzip the file or rebuild with "
                         "zlib1g-dev");
    return;
  }
  REQUIRE(can_gzip());

  // 300 values with some repetition, so that deflate uses back-references.
  std::vector<uint8_t> values(300);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>((i * i) % 7 + (i / 50) * 30);
  Bytes idx = idx_uint8({3, 100}, values);
  Bytes gz = gzip(idx, 9);
  std::string path = dir.file("small.gz");
  Tensor expected = read_idx([&] {
    write_file(path, gz);
    return path;
  }());
  REQUIRE(expected.to_vector<uint8_t>() == values);

  SECTION("read_maybe_gzipped gives the uncompressed bytes") {
    CHECK(read_maybe_gzipped(path) == idx);
    std::string plain = dir.file("plain");
    write_file(plain, idx);
    CHECK(read_maybe_gzipped(plain) == idx);
  }
  SECTION("every truncation throws") {
    std::string cut = dir.file("cut.gz");
    for (size_t n = 1; n < gz.size(); ++n) {
      INFO("the first " << n << " of " << gz.size() << " bytes");
      write_file(cut, Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(n)));
      CHECK_THROWS_AS(read_idx(cut), SerializationError);
    }
    write_file(cut, Bytes(gz.begin(), gz.end() - 4));
    REQUIRE_THROWS_ERROR(read_idx(cut), SerializationError,
                         "truncated gzip stream: the input ended before the end of the stream");
    write_file(cut, Bytes(gz.begin(), gz.begin() + 20));
    REQUIRE_THROWS_ERROR(read_maybe_gzipped(cut), SerializationError, "read_maybe_gzipped: '" + cut + "': truncated");
  }
  SECTION("every single-byte corruption throws or changes nothing") {
    // Flipping a byte of the deflate data or the trailer is caught by
    // inflate, the CRC-32 or the length; the header's time stamp, extra flags
    // and OS byte (4..9) are not checked by anyone and change nothing.
    std::string bad = dir.file("bad.gz");
    int thrown = 0;
    for (size_t i = 0; i < gz.size(); ++i) {
      INFO("byte " << i << " of " << gz.size() << " flipped");
      Bytes b = gz;
      b[i] ^= 0xff;
      write_file(bad, b);
      try {
        Tensor t = read_idx(bad);
        CHECK((i >= 4 && i < 10));
        CHECK(t.to_vector<uint8_t>() == values);
      } catch (const SerializationError&) {
        ++thrown;
      }
    }
    CHECK(thrown == static_cast<int>(gz.size()) - 6);
  }
  SECTION("corrupt streams name zlib's reason") {
    std::string bad = dir.file("bad.gz");
    Bytes b = gz;
    b[b.size() - 8] ^= 0x01;  // CRC-32
    write_file(bad, b);
    REQUIRE_THROWS_ERROR(read_idx(bad), SerializationError,
                         "read_idx: '" + bad + "': corrupt gzip stream: incorrect data check");
    b = gz;
    b[b.size() - 1] ^= 0x01;  // ISIZE
    write_file(bad, b);
    REQUIRE_THROWS_ERROR(read_idx(bad), SerializationError, "corrupt gzip stream: incorrect length check");
    b = gz;
    b[2] = 7;  // compression method
    write_file(bad, b);
    REQUIRE_THROWS_ERROR(read_idx(bad), SerializationError, "corrupt gzip stream: unknown compression method");
  }
  SECTION("concatenated members read as one stream; zero padding is ignored, other trailing bytes are not") {
    Bytes head(idx.begin(), idx.begin() + 100), tail(idx.begin() + 100, idx.end());
    std::string two = dir.file("two.gz");
    write_file(two, concat(gzip(head), gzip(tail)));
    CHECK(read_idx(two).to_vector<uint8_t>() == values);
    write_file(two, concat(gz, Bytes(7, 0)));
    CHECK(read_idx(two).to_vector<uint8_t>() == values);
    write_file(two, concat(gz, {0, 'x', 0}));
    REQUIRE_THROWS_ERROR(read_idx(two), SerializationError,
                         "3 trailing bytes after the end of the gzip stream (member 1 ended at byte " +
                             std::to_string(gz.size()) + " of " + std::to_string(gz.size() + 3) +
                             ") that are not another gzip member");
    // A second member cut short.
    Bytes second = gzip(tail);
    write_file(two, concat(gzip(head), Bytes(second.begin(), second.end() - 3)));
    REQUIRE_THROWS_ERROR(read_idx(two), SerializationError, "truncated gzip stream");
  }
  SECTION("an ISIZE trailer that lies is only a hint") {
    // ISIZE sizes the first allocation (at most 1032 bytes per compressed
    // byte, deflate's largest ratio): the output grows past a small one, and
    // inflate's length check still rejects a wrong one.
    Bytes big_values(200000);
    for (size_t i = 0; i < big_values.size(); ++i) big_values[i] = static_cast<uint8_t>(i % 251);
    Bytes big = gzip(idx_uint8({200000}, big_values));
    std::string lying = dir.file("lying.gz");
    for (uint8_t isize : {0x01, 0xff}) {
      Bytes b = big;
      std::fill(b.end() - 4, b.end(), isize);
      write_file(lying, b);
      REQUIRE_THROWS_ERROR(read_idx(lying), SerializationError, "corrupt gzip stream: incorrect length check");
    }
    // Two members: the hint is the last one's length, 0 here.
    write_file(lying, concat(big, gzip({})));
    CHECK(read_idx(lying).to_vector<uint8_t>() == big_values);
  }
}

// ---- MNIST

namespace {

// A root folder in MNIST's layout: 5 train and 3 test images of 4x3 pixels.
struct MnistFolder {
  TempDir dir;
  std::vector<uint8_t> train_images, test_images;
  std::vector<uint8_t> train_labels = {3, 0, 9, 1, 7}, test_labels = {2, 2, 5};

  explicit MnistFolder(bool gz) {
    for (int i = 0; i < 5 * 12; ++i) train_images.push_back(static_cast<uint8_t>(i * 4 + 1));
    for (int i = 0; i < 3 * 12; ++i) test_images.push_back(static_cast<uint8_t>(250 - i));
    put("train-images-idx3-ubyte", idx_uint8({5, 4, 3}, train_images), gz);
    put("train-labels-idx1-ubyte", idx_uint8({5}, train_labels), gz);
    put("t10k-images-idx3-ubyte", idx_uint8({3, 4, 3}, test_images), gz);
    put("t10k-labels-idx1-ubyte", idx_uint8({3}, test_labels), gz);
  }
  void put(const std::string& name, const Bytes& idx, bool gz) {
    std::error_code ec;
    fs::remove(dir.file(name), ec);
    fs::remove(dir.file(name + ".gz"), ec);
    if (gz) {
      write_file(dir.file(name + ".gz"), gzip(idx));
    } else {
      write_file(dir.file(name), idx);
    }
  }
};

}  // namespace

TEST_CASE("MNIST reads a folder of IDX files", "[data][mnist]") {
  std::vector<bool> kinds = {false};
  if (can_gzip()) kinds.push_back(true);
  for (bool gz : kinds) {
    DYNAMIC_SECTION((gz ? "gzipped" : "plain")) {
      MnistFolder folder(gz);
      MNIST train(folder.dir.str());
      REQUIRE(train.size() == 5);
      CHECK(train.name() == "MNIST(train, 5 examples)");
      CHECK(train.is_train());
      CHECK(train.root() == folder.dir.str());
      REQUIRE(train.images().sizes() == IntArrayRef{5, 1, 4, 3});
      REQUIRE(train.images().dtype() == kUInt8);
      REQUIRE(train.targets().dtype() == kInt64);
      CHECK(train.targets().to_vector<int>() == std::vector<int>{3, 0, 9, 1, 7});
      CHECK(train.images().to_vector<uint8_t>() == folder.train_images);

      Example<> ex = train.get(2);
      REQUIRE(ex.data.sizes() == IntArrayRef{1, 4, 3});
      REQUIRE(ex.data.dtype() == kUInt8);
      CHECK(ex.data.shares_storage(train.images()));
      CHECK(ex.data.to_vector<uint8_t>() ==
            std::vector<uint8_t>(folder.train_images.begin() + 24, folder.train_images.begin() + 36));
      REQUIRE(ex.target.dim() == 0);
      REQUIRE(ex.target.dtype() == kInt64);
      CHECK(ex.target.item<int64_t>() == 9);
      REQUIRE_THROWS_ERROR(train.get(5), IndexError, "MNIST: index 5 is out of range for 5 examples");

      MNIST test(folder.dir.str(), MNIST::Mode::kTest);
      CHECK(test.name() == "MNIST(test, 3 examples)");
      CHECK_FALSE(test.is_train());
      CHECK(test.targets().to_vector<int>() == std::vector<int>{2, 2, 5});
      CHECK(test.get(1).data.to_vector<uint8_t>() ==
            std::vector<uint8_t>(folder.test_images.begin() + 12, folder.test_images.begin() + 24));

      FashionMNIST fashion(folder.dir.str(), false);
      CHECK(fashion.name() == "FashionMNIST(test, 3 examples)");
      REQUIRE_THROWS_ERROR(fashion.get(100), IndexError, "FashionMNIST: index 100 is out of range for 3 examples");
    }
  }
}

TEST_CASE("MNIST: missing and inconsistent files", "[data][mnist]") {
  MnistFolder folder(false);
  const std::string root = folder.dir.str();

  SECTION("a root without the files") {
    TempDir empty;
    std::string gz = empty.file("train-images-idx3-ubyte.gz"), plain = empty.file("train-images-idx3-ubyte");
    REQUIRE_THROWS_ERROR(MNIST(empty.str()), SerializationError,
                         "MNIST: cannot find train-images-idx3-ubyte in '" + empty.str() + "': tried '" + gz +
                             "' and '" + plain + "'; pass the folder that holds the files");
    REQUIRE_THROWS_ERROR(FashionMNIST(empty.str(), false), SerializationError,
                         "FashionMNIST: cannot find t10k-images-idx3-ubyte");
    REQUIRE_THROWS_WITH(FashionMNIST(empty.str()),
                        Catch::Contains("; pass the folder that holds the files (Debian's dataset-fashion-mnist "
                                        "package puts them in /usr/share/datasets/fashion-mnist)"));
  }
  SECTION("a missing label file") {
    fs::remove(folder.dir.file("t10k-labels-idx1-ubyte"));
    REQUIRE_THROWS_ERROR(MNIST(root, false), SerializationError, "cannot find t10k-labels-idx1-ubyte");
    CHECK(MNIST(root, true).size() == 5);
  }
  SECTION("the .gz file comes first") {
    if (!can_gzip()) return;
    write_file(folder.dir.file("train-labels-idx1-ubyte.gz"), gzip(idx_uint8({5}, {1, 1, 1, 1, 1})));
    CHECK(MNIST(root).targets().to_vector<int>() == std::vector<int>{1, 1, 1, 1, 1});
  }
  SECTION("image and label counts differ") {
    folder.put("train-labels-idx1-ubyte", idx_uint8({4}, {1, 2, 3, 4}), false);
    REQUIRE_THROWS_ERROR(MNIST(root), SerializationError,
                         "holds 5 images but '" + folder.dir.file("train-labels-idx1-ubyte") +
                             "' holds 4 labels; the two files must come from the same split");
  }
  SECTION("a label out of range") {
    folder.put("train-labels-idx1-ubyte", idx_uint8({5}, {1, 2, 3, 10, 4}), false);
    REQUIRE_THROWS_ERROR(MNIST(root), SerializationError, "': label 3 is 10, but MNIST has 10 classes (labels 0 to 9)");
  }
  SECTION("images of the wrong dtype or rank") {
    Bytes i32 = idx_header(0x0C, {5, 4, 3});
    for (int i = 0; i < 60; ++i) put_be32(i32, 1);
    folder.put("train-images-idx3-ubyte", i32, false);
    REQUIRE_THROWS_ERROR(MNIST(root), SerializationError,
                         "train-images-idx3-ubyte' should hold uint8 images (N, H, W), but holds int32 values of "
                         "shape [5, 4, 3]");
    folder.put("train-images-idx3-ubyte", idx_uint8({5, 12}, std::vector<uint8_t>(60, 1)), false);
    REQUIRE_THROWS_ERROR(MNIST(root), SerializationError, "but holds uint8 values of shape [5, 12]");
  }
  SECTION("labels of the wrong rank") {
    folder.put("train-labels-idx1-ubyte", idx_uint8({5, 1}, {1, 2, 3, 4, 5}), false);
    REQUIRE_THROWS_ERROR(MNIST(root), SerializationError,
                         "should hold uint8 labels (N), but holds uint8 values of shape [5, 1]");
  }
  SECTION("a corrupt file") {
    write_file(folder.dir.file("train-images-idx3-ubyte"), {1, 2, 3, 4, 5});
    REQUIRE_THROWS_ERROR(MNIST(root), SerializationError, "wrong magic number 0x01020304");
  }
}

TEST_CASE("FashionMNIST from Debian's dataset-fashion-mnist", "[data][mnist][fashion]") {
  if (!fs::exists(FashionMNIST::kDefaultRoot) || !has_gzip()) {
    if (!fs::exists(FashionMNIST::kDefaultRoot)) {
      REQUIRE_THROWS_ERROR(FashionMNIST(), SerializationError,
                           "; install Debian's dataset-fashion-mnist package (apt install dataset-fashion-mnist), or "
                           "pass the folder that holds the files");
    }
    WARN("skipped: " << FashionMNIST::kDefaultRoot << " is absent (apt install dataset-fashion-mnist) or this build "
                     << "has no zlib");
    return;
  }
  FashionMNIST train;
  FashionMNIST test(FashionMNIST::kDefaultRoot, FashionMNIST::Mode::kTest);
  REQUIRE(train.size() == 60000);
  REQUIRE(test.size() == 10000);
  CHECK(train.name() == "FashionMNIST(train, 60000 examples)");
  CHECK(test.name() == "FashionMNIST(test, 10000 examples)");
  REQUIRE(train.images().sizes() == IntArrayRef{60000, 1, 28, 28});
  REQUIRE(test.images().sizes() == IntArrayRef{10000, 1, 28, 28});
  CHECK(FashionMNIST::kClasses[9] == std::string("Ankle boot"));

  // The numbers below were computed from the same files with Python's gzip
  // module (/usr/bin/python3: gzip.open(...).read(), header skipped, sum()
  // and slices over the raw bytes), independently of read_idx.
  CHECK(train.targets().narrow(0, 0, 10).to_vector<int>() == std::vector<int>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  CHECK(test.targets().narrow(0, 0, 10).to_vector<int>() == std::vector<int>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
  CHECK(train.get(0).data.sum(kInt64).item<int64_t>() == 76247);
  CHECK(train.get(59999).data.sum(kInt64).item<int64_t>() == 16684);
  CHECK(test.get(0).data.sum(kInt64).item<int64_t>() == 33456);
  CHECK(train.get(0).data.select(0, 0).select(0, 14).to_vector<int>() ==
        std::vector<int>{0,   0,   1,   4,   6,   7,   2,   0,   0,   0,   0,   0,   237, 226,
                         217, 223, 222, 219, 222, 221, 216, 223, 229, 215, 218, 255, 77,  0});
  // Each of the ten classes has 6000 training examples.
  std::vector<int> counts(10);
  for (int64_t label : train.targets().to_vector<int64_t>()) ++counts.at(static_cast<size_t>(label));
  CHECK(counts == std::vector<int>(10, 6000));
  CHECK(train.get(0).target.item<int64_t>() == 9);
}

// ---- TensorDataset

DEVICE_TEST_CASE("TensorDataset: examples are slices of the two tensors", "[data][dataset]") {
  Tensor data = test::make({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor target = test::make({7, 8, 9}, {3}, kInt64);
  if (device.is_cpu()) {
    TensorDataset ds(data, target);
    REQUIRE(ds.size() == 3);
    CHECK(ds.name() == "TensorDataset(data [3, 2], target [3])");
    Example<> ex = ds.get(1);
    CHECK(ex.data.to_vector<float>() == std::vector<float>{3, 4});
    CHECK(ex.data.shares_storage(data));
    REQUIRE(ex.target.dim() == 0);
    CHECK(ex.target.item<int64_t>() == 8);
    REQUIRE_THROWS_ERROR(ds.get(3), IndexError, "TensorDataset: index 3 is out of range for 3 examples");
    REQUIRE_THROWS_ERROR(TensorDataset(data, test::make({1, 2}, {2}, kInt64)), ShapeError,
                         "TensorDataset: size mismatch between tensors: data has 3 examples (shape [3, 2]) but "
                         "target has 2 (shape [2])");
    REQUIRE_THROWS_ERROR(TensorDataset(data, test::make({1}, {}, kInt64)), ShapeError,
                         "need a first dimension to index examples by; got shapes [3, 2] and []");
    REQUIRE_THROWS_ERROR(TensorDataset(Tensor(), target), ValueError, "data and target must be defined tensors");
  } else {
    REQUIRE_THROWS_ERROR(TensorDataset(data.to(device), target), DeviceError,
                         "TensorDataset: data and target must be on the cpu (the DataLoader's `device` option moves "
                         "batches); got data on " +
                             device.str());
  }
}

// ---- transforms

namespace {
using namespace tandem::data::transforms;

// The draws transforms.cpp documents, recomputed from the raw Philox words:
// one counter per random transform, a uniform double from words 0-1, crop
// offsets from words 0-1 (top) and 2-3 (left).
Philox4x32 counter_words(uint64_t seed, uint64_t counter) { return philox(counter, 0, seed); }
bool expected_flip(uint64_t seed, uint64_t counter, double p) {
  Philox4x32 r = counter_words(seed, counter);
  uint64_t x = (static_cast<uint64_t>(r.w[1]) << 32) | r.w[0];
  return std::ldexp(static_cast<double>(x >> 11), -53) < p;
}
std::pair<int64_t, int64_t> expected_crop_offset(uint64_t seed, uint64_t counter, int64_t rows, int64_t cols) {
  Philox4x32 r = counter_words(seed, counter);
  uint64_t top = (static_cast<uint64_t>(r.w[1]) << 32) | r.w[0];
  uint64_t left = (static_cast<uint64_t>(r.w[3]) << 32) | r.w[2];
  return {static_cast<int64_t>(top % static_cast<uint64_t>(rows)),
          static_cast<int64_t>(left % static_cast<uint64_t>(cols))};
}

// An image (C, H, W) with values 1, 2, ... in row-major order (no zeros, so
// that padding shows).
Tensor counting_image(int64_t c, int64_t h, int64_t w, Device device, Dtype dtype = kUInt8) {
  std::vector<double> v(static_cast<size_t>(c * h * w));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  return test::make(v, {c, h, w}, dtype, device);
}

// The (C, h, w) window at (top, left) of x (C, H, W) zero-padded by pad on
// every side, built element by element.
std::vector<double> window(const std::vector<double>& x, int64_t c, int64_t height, int64_t width, int64_t pad,
                           int64_t top, int64_t left, int64_t h, int64_t w) {
  std::vector<double> out;
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < w; ++j) {
        int64_t r = top + i - pad, q = left + j - pad;
        bool inside = r >= 0 && r < height && q >= 0 && q < width;
        out.push_back(inside ? x[static_cast<size_t>((k * height + r) * width + q)] : 0.0);
      }
    }
  }
  return out;
}
}  // namespace

DEVICE_TEST_CASE("ToFloat converts and scales", "[data][transforms]") {
  Tensor x = test::make({0, 1, 2, 127, 128, 255}, {1, 2, 3}, kUInt8, device);
  Tensor y = ToFloat()(x);
  REQUIRE(y.dtype() == kFloat32);
  REQUIRE(y.device() == device);
  test::check_values(y, {0, 1 / 255.0, 2 / 255.0, 127 / 255.0, 128 / 255.0, 1});
  CHECK(x.to_vector<int>() == std::vector<int>{0, 1, 2, 127, 128, 255});

  Tensor d = ToFloat(0.5, kFloat64)(x);
  REQUIRE(d.dtype() == kFloat64);
  test::check_values(d, {0, 0.5, 1, 63.5, 64, 127.5}, test::Tolerance{0, 0});
  Tensor one = ToFloat(1.0)(x);
  test::check_values(one, {0, 1, 2, 127, 128, 255}, test::Tolerance{0, 0});

  // A floating input of the same dtype is scaled into a new tensor.
  Tensor f = test::make({2, -4}, {2}, kFloat32, device);
  test::check_values(ToFloat(0.25)(f), {0.5, -1});
  test::check_values(f, {2, -4});
  test::check_values(ToFloat(1.0, kFloat16)(f), {2, -4});

  CHECK(ToFloat().name() == "ToFloat(scale=0.00392157)");
  CHECK(ToFloat(2, kFloat64).name() == "ToFloat(scale=2, dtype=float64)");
  REQUIRE_THROWS_ERROR(ToFloat(1.0, kInt64), DtypeError,
                       "ToFloat: dtype must be a floating dtype (float32, float64, float16 or bfloat16); got int64");
}

DEVICE_TEST_CASE("Normalize subtracts the mean and divides by the std per channel", "[data][transforms]") {
  // x: (2, 2, 2); channel 0 is 1..4, channel 1 is 10, 20, 30, 40.
  Tensor x = test::make({1, 2, 3, 4, 10, 20, 30, 40}, {2, 2, 2}, kFloat32, device);
  Tensor y = Normalize({0.5, 10}, {2, 4})(x);
  REQUIRE(y.device() == device);
  test::check_values(y, {0.25, 0.75, 1.25, 1.75, 0, 2.5, 5, 7.5});
  test::check_values(x, {1, 2, 3, 4, 10, 20, 30, 40});  // the input is left alone

  // One mean for both channels, one std per channel.
  test::check_values(Normalize({1}, {1, 10})(x), {0, 1, 2, 3, 0.9, 1.9, 2.9, 3.9});
  // One value each: any shape, a 2-D (H, W) image or a batch (N, C, H, W).
  test::check_values(Normalize({2}, {0.5})(x.select(0, 0)), {-2, 0, 2, 4});
  test::check_values(Normalize({0.5, 10}, {2, 4})(x.unsqueeze(0)), {0.25, 0.75, 1.25, 1.75, 0, 2.5, 5, 7.5});
  Tensor d = Normalize({1, 2}, {2, 2})(x.to(kFloat64));
  REQUIRE(d.dtype() == kFloat64);
  test::check_values(d, {0, 0.5, 1, 1.5, 4, 9, 14, 19});

  CHECK(Normalize({0.286}, {0.353}).name() == "Normalize(mean=[0.286], std=[0.353])");
  CHECK(Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}).name() ==
        "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])");

  Tensor u8 = test::make({1, 2}, {1, 1, 2}, kUInt8, device);
  REQUIRE_THROWS_ERROR(Normalize({0.5}, {0.5})(u8), DtypeError,
                       "Normalize: input tensor should be a float tensor. Got uint8; add transforms::ToFloat() before "
                       "Normalize");
  REQUIRE_THROWS_ERROR(Normalize({0.5, 0.5, 0.5}, {1, 1, 1})(x), ShapeError,
                       "Normalize: mean has 3 values and std 3, but the image of shape [2, 2, 2] has 2 channels");
  REQUIRE_THROWS_ERROR(Normalize({0.5, 1}, {1})(x.select(0, 0)), ShapeError,
                       "Normalize: expected a tensor image of size (..., C, H, W) for per-channel mean and std, got "
                       "shape [2, 2]");
  REQUIRE_THROWS_ERROR(Normalize({0.5}, {1, 0}), ValueError,
                       "Normalize: std evaluated to zero (std[1] = 0), leading to division by zero");
  REQUIRE_THROWS_ERROR(Normalize({}, {1}), ValueError, "Normalize: mean and std need at least one value each");
  REQUIRE_THROWS_ERROR(Normalize({1, 2}, {1, 2, 3}), ValueError,
                       "Normalize: mean has 2 values and std 3; give as many of each");
}

DEVICE_TEST_CASE("RandomHorizontalFlip flips the last dim with probability p", "[data][transforms]") {
  Tensor x = counting_image(2, 2, 3, device);
  Tensor flipped = RandomHorizontalFlip(1.0)(x);
  REQUIRE(flipped.device() == device);
  test::check_equal(flipped, test::make({3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10}, {2, 2, 3}, kUInt8, device));
  test::check_equal(RandomHorizontalFlip(0.0)(x), x);
  // Width 1 and a plain 2-D image.
  Tensor col = counting_image(1, 3, 1, device);
  test::check_equal(RandomHorizontalFlip(1.0)(col), col);
  test::check_equal(RandomHorizontalFlip(1.0)(x.select(0, 1)),
                    test::make({9, 8, 7, 12, 11, 10}, {2, 3}, kUInt8, device));

  // Over 2000 seeds the fraction flipped is near p, and each draw is the
  // documented one.
  RandomHorizontalFlip flip(0.3);
  int flips = 0;
  for (uint64_t s = 0; s < 2000; ++s) {
    Generator gen(s * 7919 + 1);
    Tensor y = flip(x, gen);
    REQUIRE(gen.offset() == 1);
    bool did = y.to_vector<int>() != x.to_vector<int>();
    REQUIRE(did == expected_flip(s * 7919 + 1, 0, 0.3));
    flips += did;
  }
  CHECK(std::abs(flips / 2000.0 - 0.3) < 0.05);  // 5 standard deviations

  CHECK(RandomHorizontalFlip().name() == "RandomHorizontalFlip(p=0.5)");
  REQUIRE_THROWS_ERROR(RandomHorizontalFlip(1.5), ValueError,
                       "RandomHorizontalFlip: p must be a probability in [0, 1]; got 1.5");
  REQUIRE_THROWS_ERROR(RandomHorizontalFlip(-0.1), ValueError, "got -0.1");
  REQUIRE_THROWS_ERROR(RandomHorizontalFlip(1.0)(test::make({1, 2}, {2}, kUInt8, device)), ShapeError,
                       "RandomHorizontalFlip: expected an image (..., H, W) with at least 2 dims, got shape [2]");
}

DEVICE_TEST_CASE("RandomCrop pads with zeros and crops at the drawn offset", "[data][transforms]") {
  struct Case {
    int64_t c, height, width, h, w, pad;
  };
  for (Case k : {Case{1, 5, 5, 5, 5, 2}, Case{2, 4, 5, 3, 2, 1}, Case{1, 6, 4, 3, 3, 0}, Case{1, 2, 2, 4, 4, 1}}) {
    DYNAMIC_SECTION("(" << k.c << ", " << k.height << ", " << k.width << ") crop " << k.h << "x" << k.w << " padding "
                        << k.pad) {
      Tensor x = counting_image(k.c, k.height, k.width, device);
      std::vector<double> xv = x.to_vector<double>();
      RandomCrop crop(k.h, k.w, k.pad);
      int64_t rows = k.height + 2 * k.pad - k.h + 1, cols = k.width + 2 * k.pad - k.w + 1;
      std::set<std::pair<int64_t, int64_t>> seen;
      for (uint64_t s = 0; s < 300; ++s) {
        Generator gen(s);
        Tensor y = crop(x, gen);
        REQUIRE(gen.offset() == 1);
        REQUIRE(y.device() == device);
        REQUIRE(y.dtype() == kUInt8);
        REQUIRE(y.sizes() == IntArrayRef{k.c, k.h, k.w});
        auto [top, left] = expected_crop_offset(s, 0, rows, cols);
        INFO("seed " << s << ": top " << top << ", left " << left);
        REQUIRE(y.to_vector<double>() == window(xv, k.c, k.height, k.width, k.pad, top, left, k.h, k.w));
        seen.insert({top, left});
      }
      CHECK(static_cast<int64_t>(seen.size()) == rows * cols);  // every offset turns up
    }
  }
  SECTION("a window inside the image is a view, as torchvision's") {
    Tensor x = counting_image(1, 6, 6, device);
    Generator gen(3);
    CHECK(RandomCrop(4)(x, gen).shares_storage(x));
  }
  SECTION("errors and printing") {
    Tensor x = counting_image(1, 28, 28, device);
    REQUIRE_THROWS_ERROR(RandomCrop(33, 2)(x), ValueError,
                         "RandomCrop: Required crop size (33, 33) is larger than input image size (32, 32) (28, 28) "
                         "after padding 2");
    REQUIRE_THROWS_ERROR(RandomCrop(29)(x), ValueError,
                         "Required crop size (29, 29) is larger than input image size (28, 28); crop smaller");
    REQUIRE_THROWS_ERROR(RandomCrop(28, -1), ValueError, "RandomCrop: padding must be >= 0; got -1");
    REQUIRE_THROWS_ERROR(RandomCrop(0, 5, 0), ValueError, "RandomCrop: the crop size must be positive; got (0, 5)");
    REQUIRE_THROWS_ERROR(RandomCrop(2)(test::make({1, 2}, {2}, kUInt8, device)), ShapeError,
                         "RandomCrop: expected an image (..., H, W) with at least 2 dims, got shape [2]");
    CHECK(RandomCrop(28, 2).name() == "RandomCrop(size=(28, 28), padding=2)");
    CHECK(RandomCrop(24, 20, 0).name() == "RandomCrop(size=(24, 20))");
  }
}

DEVICE_TEST_CASE("Compose, Lambda and seeded determinism", "[data][transforms]") {
  // A 28x28 uint8 image with no symmetry and no zeros.
  std::vector<double> v(784);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 37) % 251 + 1);
  Tensor x = test::make(v, {1, 28, 28}, kUInt8, device);

  Compose chain({ToFloat(), Normalize({0.286}, {0.353}), RandomHorizontalFlip(0.5), RandomCrop(28, 2)});
  CHECK(chain.name() ==
        "Compose(ToFloat(scale=0.00392157), Normalize(mean=[0.286], std=[0.353]), RandomHorizontalFlip(p=0.5), "
        "RandomCrop(size=(28, 28), padding=2))");

  // The chain is its transforms applied in order, drawing from one generator.
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    Generator gen(seed), again(seed), by_hand(seed);
    Tensor y = chain(x, gen);
    REQUIRE(gen.offset() == 2);  // one counter per random transform
    REQUIRE(y.device() == device);
    REQUIRE(y.dtype() == kFloat32);
    REQUIRE(y.sizes() == IntArrayRef{1, 28, 28});
    test::check_equal(chain(x, again), y);
    Tensor z = Normalize({0.286}, {0.353})(ToFloat()(x, by_hand), by_hand);
    z = RandomHorizontalFlip(0.5)(z, by_hand);
    test::check_equal(RandomCrop(28, 2)(z, by_hand), y);
  }
  // Different examples get different crops.
  std::set<std::vector<float>> distinct;
  for (size_t i = 0; i < 20; ++i) {
    Generator gen(example_seed(i));
    distinct.insert(chain(x, gen).to_vector<float>());
  }
  CHECK(distinct.size() >= 15);
  // Without a generator: the one seeded from example_seed(0).
  Generator first(example_seed(0));
  test::check_equal(chain(x), chain(x, first));

  Lambda square("Square", [](const Tensor& t) { return t.mul(t); });
  CHECK(square.name() == "Square");
  test::check_values(square(test::make({-2, 3}, {2}, kFloat32, device)), {4, 9});
  Compose none({});
  CHECK(none.name() == "Compose()");
  CHECK(none(x).is_same(x));
  CHECK(Compose({square, RandomCrop(1)}).name() == "Compose(Square, RandomCrop(size=(1, 1)))");
  REQUIRE_THROWS_ERROR(Lambda("nothing", nullptr), ValueError, "Lambda 'nothing': the function is empty");
  REQUIRE_THROWS_ERROR(Transform("raw", nullptr), ValueError, "Transform 'raw': the function is empty");
}

TEST_CASE("TransformDataset applies a seeded transform to each example", "[data][transforms][dataset]") {
  std::vector<double> v(6 * 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 200 + 1);
  Tensor data = test::make(v, {6, 1, 4, 4}, kUInt8);
  Tensor target = test::make({0, 1, 2, 3, 4, 5}, {6}, kInt64);
  Compose chain({ToFloat(), RandomHorizontalFlip(), RandomCrop(4, 1)});
  TransformDataset ds(TensorDataset(data, target), chain);
  REQUIRE(ds.size() == 6);
  CHECK(ds.name() ==
        "TransformDataset(TensorDataset(data [6, 1, 4, 4], target [6]), Compose(ToFloat(scale=0.00392157), "
        "RandomHorizontalFlip(p=0.5), RandomCrop(size=(4, 4), padding=1)))");
  std::set<std::vector<float>> distinct;
  for (size_t i = 0; i < 6; ++i) {
    Example<> ex = ds.get(i);
    Generator gen(example_seed(i));
    Tensor expected = chain(data.select(0, static_cast<int64_t>(i)), gen);
    test::check_equal(ex.data, expected);
    test::check_equal(ds.get(i).data, expected);  // the same every time
    CHECK(ex.target.item<int64_t>() == static_cast<int64_t>(i));
    distinct.insert(ex.data.to_vector<float>());
  }
  CHECK(distinct.size() == 6);

  // Inside a loader the seed comes from the loader's seed and epoch.
  {
    data::detail::LoaderThreadGuard guard({true, 5, 1, 0, 1});
    Generator gen(data::detail::mix_seed(5, 1, 3));
    test::check_equal(ds.get(3).data, chain(data.select(0, 3), gen));
  }
  REQUIRE_THROWS_ERROR(ds.get(6), IndexError, "TensorDataset: index 6 is out of range for 6 examples");
  REQUIRE_THROWS_ERROR(TransformDataset(std::shared_ptr<Dataset>(), chain), ValueError,
                       "TransformDataset: the base dataset is null");
  auto shared = std::make_shared<TensorDataset>(data, target);
  TransformDataset from_shared(shared, ToFloat());
  CHECK(from_shared.base() == shared);
  CHECK(from_shared.transform().name() == "ToFloat(scale=0.00392157)");
}

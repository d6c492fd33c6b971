// Datasets: IDX files (every dtype, gzip or not, every malformed header,
// truncated and corrupt gzip streams) written here into a temporary folder,
// MNIST from a generated folder and the real Fashion-MNIST when Debian's
// package is installed, and TensorDataset (the transforms:
// test_data_transforms.cpp).
#include <sys/resource.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/idx.h"
#include "data/mnist.h"
#include "helpers.h"

#ifdef TANDEM_TEST_ZLIB
#include <zlib.h>
#endif

using namespace tandem;
using namespace tandem::data;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

using test::TempDir;

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

// gzip through zlib's deflate (windowBits 15 + 16: the gzip wrapper).
#ifdef TANDEM_TEST_ZLIB
bool can_gzip() { return has_gzip(); }
Bytes gzip(const Bytes& in, int level = 6) {
  REQUIRE(can_gzip());
  z_stream s{};
  REQUIRE(deflateInit2(&s, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&s, static_cast<uLong>(in.size())));
  s.next_in = const_cast<Bytef*>(in.data());
  s.avail_in = static_cast<uInt>(in.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&s, Z_FINISH);
  REQUIRE(rc == Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}
#else
bool can_gzip() { return false; }
Bytes gzip(const Bytes&, int = 6) {
  FAIL("this test was built without zlib");
  return {};
}
#endif

// While it lives, the process may map at most `headroom` bytes more than it
// does now (RLIMIT_AS), so that an allocation past that throws bad_alloc.
// Inactive under AddressSanitizer and ThreadSanitizer, which map terabytes
// of shadow memory as they go, and beside a real GPU, whose driver maps as
// it likes from threads of its own.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(size_t headroom) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    (void)headroom;
#else
    if (cuda::is_available() && !cuda::is_emulated()) return;
    std::ifstream statm("/proc/self/statm");
    size_t pages = 0;
    if (!(statm >> pages) || ::getrlimit(RLIMIT_AS, &old_) != 0) return;
    struct rlimit capped = old_;
    capped.rlim_cur = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) + headroom;
    if (old_.rlim_cur != RLIM_INFINITY && old_.rlim_cur < capped.rlim_cur) return;
    active_ = ::setrlimit(RLIMIT_AS, &capped) == 0;
#endif
  }
  ~AddressSpaceCap() {
    if (active_) ::setrlimit(RLIMIT_AS, &old_);
  }
  AddressSpaceCap(const AddressSpaceCap&) = delete;
  AddressSpaceCap& operator=(const AddressSpaceCap&) = delete;
  bool active() const { return active_; }

 private:
  struct rlimit old_ {};
  bool active_ = false;
};

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

// ---- the shared test helpers these tests lean on

TEST_CASE("REQUIRE_THROWS_ERROR evaluates its expression once; TempDir cleans up", "[data][helpers]") {
  int calls = 0;
  auto throwing = [&calls] {
    ++calls;
    throw ValueError("bad value 7; try 8");
  };
  REQUIRE_THROWS_ERROR(throwing(), ValueError, "bad value 7");
  CHECK(calls == 1);
  REQUIRE_THROWS_ERROR(throwing(), Error, "try 8");  // a base class of the thrown type
  CHECK(calls == 2);

  fs::path kept;
  {
    TempDir a, b;
    kept = a.path();
    CHECK(a.str() != b.str());
    CHECK(fs::is_directory(a.path()));
    CHECK(a.listing().empty());
    write_file(a.file("x"), {1, 2});
    fs::create_directory(a.file("sub"));
    write_file(a.file("sub/y"), {3});
    CHECK(a.listing() == std::vector<std::string>{"sub", "x"});
  }
  CHECK_FALSE(fs::exists(kept));
}

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
    // ISIZE sizes the first allocation (at most 8 bytes per compressed byte
    // and 64 KiB): the output grows past a small one, and inflate's length
    // check still rejects a wrong one.
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

    // 512 KiB stored uncompressed, claiming 4 GiB: the first allocation is
    // 4.2 MB, not the claim (nor 1032 bytes per compressed byte, 541 MB).
    Bytes noise(1 << 19);
    for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    Bytes claim = gzip(idx_uint8({1 << 19}, noise), 0);
    std::fill(claim.end() - 4, claim.end(), 0xff);
    write_file(lying, claim);
    AddressSpaceCap cap(64 << 20);
    if (!cap.active()) WARN("RLIMIT_AS could not be lowered: the allocation size is not checked");
    REQUIRE_THROWS_ERROR(read_idx(lying), SerializationError, "corrupt gzip stream: incorrect length check");
  }
  SECTION("running out of memory while decompressing names the file") {
    std::string zeros = dir.file("zeros.gz");
    write_file(zeros, gzip(idx_uint8({64 << 20}, Bytes(64 << 20, 0)), 1));  // 64 MiB in about 64 KB
    AddressSpaceCap cap(16 << 20);
    if (!cap.active()) {
      WARN("RLIMIT_AS could not be lowered: out of memory is not tested");
      return;
    }
    REQUIRE_THROWS_ERROR(read_idx(zeros), OutOfMemoryError,
                         "read_idx: '" + zeros + "': out of memory growing the buffer for the decompressed data to ");
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
  SECTION("a file whose existence cannot be told") {
    // A symbolic link to itself: stat fails with ELOOP, not "no such file".
    std::string gz = folder.dir.file("train-images-idx3-ubyte.gz");
    fs::create_symlink("train-images-idx3-ubyte.gz", gz);
    REQUIRE_THROWS_ERROR(MNIST(root), SerializationError,
                         "MNIST: cannot tell whether '" + gz + "' exists: Too many levels of symbolic links");
    // A folder that may not be searched (root may search any).
    if (::geteuid() != 0) {
      fs::permissions(root, fs::perms::owner_read | fs::perms::owner_write);
      std::string message;
      try {
        MNIST m(root, false);
      } catch (const SerializationError& e) {
        message = e.what();
      }
      fs::permissions(root, fs::perms::owner_all);
      CHECK_THAT(message,
                 Catch::Contains("MNIST: cannot tell whether '" + folder.dir.file("t10k-images-idx3-ubyte.gz") +
                                 "' exists: Permission denied"));
    }
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

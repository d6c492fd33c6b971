// Checkpoints: Tandem's strict JSON over nlohmann-json (tensor/io/json_private.h), safetensors files
// (tensor/io/safetensors: round trips of every dtype and layout on every
// device, the saved device and map_location, a file written by PyTorch's
// safetensors package, every kind of corrupt file, atomic writes), and
// nn::save / nn::load of modules and training checkpoints (nn/serialize).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "nn/serialize.h"
#include "nn/serialize_private.h"
#include "tensor/io/json_private.h"
#include "tensor/io/safetensors.h"

using namespace tandem;
using Catch::Contains;
namespace fs = std::filesystem;
namespace st = tandem::safetensors;

namespace {

using test::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// The elements' bytes, row-major, as the file holds them.
std::string bytes_of(const Tensor& t) {
  Tensor c = t.to(Device(kCPU)).contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// Same dtype, shape, device and bits (NaN payloads and -0.0 included); a
// loaded tensor is also contiguous and does not require grad.
void check_same(const Tensor& actual, const Tensor& expected, Device device, bool loaded = true) {
  REQUIRE(actual.defined());
  CHECK(actual.dtype() == expected.dtype());
  CHECK(actual.sizes() == expected.sizes());
  CHECK(actual.device() == device);
  if (loaded) {
    CHECK(actual.is_contiguous());
    CHECK(!actual.requires_grad());
  }
  CHECK(bytes_of(actual) == bytes_of(expected));
}

// A file from a header written by hand: length, header padded with spaces to
// 8 bytes, then the buffer.
std::string craft(const std::string& header, const std::string& buffer = "") {
  std::string h = header;
  h.append((8 - h.size() % 8) % 8, ' ');
  uint64_t n = h.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + h + buffer;
}

// n float32 values 1, 2, ... as raw bytes.
std::string f32_bytes(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    float v = static_cast<float>(i + 1);
    out.append(reinterpret_cast<const char*>(&v), 4);
  }
  return out;
}

// Loads bytes from a file (so that the message names it) and returns the error text.
template <typename Error>
std::string load_error(const TempDir& dir, const std::string& bytes, const std::string& name = "bad.safetensors") {
  std::string path = dir.file(name);
  write_bytes(path, bytes);
  try {
    st::load_file(path, Device(kCPU));
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("no " << typeid(Error).name() << " loading " << name);
  return "";
}

// A small model: a Linear, a float buffer and an int64 buffer.
struct NetImpl : nn::Module {
  NetImpl() : fc(register_module("fc", nn::Linear(3, 2))) {
    running = register_buffer("running", zeros({2}));
    count = register_buffer("count", zeros({}, kInt64));
  }
  Tensor forward(const Tensor& x) { return fc(x) + running; }
  nn::Linear fc;
  Tensor running, count;
};
TANDEM_MODULE(Net);

// A Net on device with known values in every tensor of its state.
Net make_net(Device device, double base) {
  Net net;
  net->to(device);
  NoGradGuard no_grad;
  net->fc->weight.copy_(test::make({base, base + 1, base + 2, base + 3, base + 4, base + 5}, {2, 3}));
  net->fc->bias.copy_(test::make({-base, base / 2}, {2}));
  net->running.copy_(test::make({base * 10, base * 20}, {2}));
  net->count.fill_(static_cast<int64_t>(base));
  return net;
}

void check_same_state(const nn::Module& actual, const nn::Module& expected) {
  OrderedDict<std::string, Tensor> a = actual.state_dict(), e = expected.state_dict();
  REQUIRE(a.keys() == e.keys());
  for (const auto& item : e) {
    INFO(item.first);
    check_same(a[item.first], item.second, item.second.device(), /*loaded=*/false);
    CHECK(a[item.first].requires_grad() == item.second.requires_grad());
  }
}

}  // namespace

// ---------------------------------------------------------------- JSON

TEST_CASE("json: parses every kind of value, keeping object order", "[checkpoint][json]") {
  json::Value v = json::parse(
      " {\"z\": 1, \"a\": [true, false, null, -0, 12.5, -3e2, 1E-3], \"m\": {\"k\": \"v\"}, \"e\": {}, \"ea\": [] }\n");
  REQUIRE(v.is_object());
  REQUIRE(v.size() == 5);
  std::vector<std::string> keys;
  for (const auto& [key, value] : v.items()) keys.push_back(key);
  CHECK(keys[0] == "z");
  CHECK(keys[1] == "a");
  CHECK(keys[2] == "m");
  CHECK(json::as_int(json::at(v, "z")) == 1);
  const json::Value& a = json::as_array(json::at(v, "a"));
  REQUIRE(a.size() == 7);
  CHECK(json::as_bool(a[0]));
  CHECK(!json::as_bool(a[1]));
  CHECK(a[2].is_null());
  CHECK(a[3].is_number_integer());
  CHECK(json::as_int(a[3]) == 0);
  CHECK(json::as_double(a[4]) == 12.5);
  CHECK(a[5].is_number_float());
  CHECK(json::as_double(a[5]) == -300.0);
  CHECK(json::as_double(a[6]) == 0.001);
  CHECK(json::as_string(json::at(json::at(v, "m"), "k")) == "v");
  CHECK(json::at(v, "e").size() == 0);
  CHECK(json::at(v, "ea").size() == 0);
  CHECK(!v.contains("missing"));
  CHECK(json::as_double(json::parse("1")) == 1.0);  // an integer reads as a double too
}

TEST_CASE("json: integers and doubles at their limits", "[checkpoint][json]") {
  CHECK(json::as_int(json::parse("9223372036854775807")) == std::numeric_limits<int64_t>::max());
  CHECK(json::as_int(json::parse("-9223372036854775808")) == std::numeric_limits<int64_t>::min());
  CHECK(json::as_double(json::parse("1.7976931348623157e308")) == std::numeric_limits<double>::max());
  CHECK(json::as_double(json::parse("5e-324")) == std::numeric_limits<double>::denorm_min());
  CHECK(json::as_double(json::parse("1e-400")) == 0.0);  // underflow rounds to zero, as strtod
  CHECK(std::signbit(json::as_double(json::parse("-0.0"))));
  CHECK(json::as_double(json::parse("0.1")) == 0.1);
}

TEST_CASE("json: string escapes, \\u escapes and UTF-8", "[checkpoint][json]") {
  CHECK(json::as_string(json::parse(R"("a\"b\\c\/d\be\ff\ng\rh\ti")")) == "a\"b\\c/d\be\ff\ng\rh\ti");
  CHECK(json::as_string(json::parse(R"("\u0041\u00e9\u20AC")")) == "A\xc3\xa9\xe2\x82\xac");  // A é €
  CHECK(json::as_string(json::parse(R"("\ud83d\ude00")")) == "\xf0\x9f\x98\x80");             // U+1F600
  CHECK(json::as_string(json::parse("\"\xc3\xa9\xf0\x9f\x98\x80\"")) == "\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(json::as_string(json::parse(R"("\u0000")")) == std::string(1, '\0'));
  CHECK(json::is_valid_utf8("plain \xc3\xa9"));
  CHECK(!json::is_valid_utf8("\xff"));
  CHECK(!json::is_valid_utf8("\xc0\xaf"));          // overlong '/'
  CHECK(!json::is_valid_utf8("\xed\xa0\x80"));      // surrogate
  CHECK(!json::is_valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK(!json::is_valid_utf8("\xe2\x82"));          // cut off
}

TEST_CASE("json: writes compact text that reads back the same", "[checkpoint][json]") {
  json::Value v = {{"b", 1},
                   {"a", json::Value::array({true, nullptr, -2.5})},
                   {"s", "q\"\\\n\x01\xc3\xa9"},
                   {"d", 1.0},
                   {"big", 1e300},
                   {"tenth", 0.1},
                   {"e", json::Value::object()}};
  std::string text = json::dump(v);
  CHECK(text == R"({"b":1,"a":[true,null,-2.5],"s":"q\"\\\n\u0001)"
                "\xc3\xa9"
                R"(","d":1.0,"big":1e+300,"tenth":0.1,"e":{}})");
  CHECK(json::parse(text) == v);
  CHECK(json::at(json::parse(text), "d").is_number_float());  // 1.0 stays a double
  CHECK(json::dump(json::Value::array(), 2) == "[]");
  CHECK(json::dump({{"a", {1, 2}}}, 2) == "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
  CHECK(json::quote("x\ty") == "\"x\\ty\"");
  // Every double reads back exactly.
  for (double d : {0.1, 1.0 / 3.0, -1e-310, 123456789.0, 6.02214076e23, -0.0}) {
    double back = json::as_double(json::parse(json::dump(json::Value(d))));
    CHECK(std::memcmp(&back, &d, sizeof d) == 0);
  }
  json::Value o = json::Value::object();
  o["x"] = 1;
  o["y"] = 2;
  o["x"] = 3;
  CHECK(json::dump(o) == R"({"x":3,"y":2})");
  json::append_member(o, "z", 4);
  CHECK(json::dump(o) == R"({"x":3,"y":2,"z":4})");
  json::Value arr = json::Value::array();
  arr.push_back("s");
  CHECK(json::dump(arr) == R"(["s"])");
}

TEST_CASE("json: every parse error names what and where", "[checkpoint][json]") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"", "JSON: unexpected end of input: expected a value at byte 0 (line 1, column 1)"},
      {"{\"a\":1,}", "expected a string key, got '}' at byte 7 (line 1, column 8)"},
      {"[1,]", "unexpected ']': expected a value at byte 3"},
      {"[1 2]", "expected ',' or ']' after an array element, got '2' at byte 3"},
      {"{\"a\" 1}", "expected ':' after the key \"a\", got '1' at byte 5"},
      {"{\"a\":1 \"b\":2}", "expected ',' or '}' after an object member, got '\"' at byte 7"},
      {"{\"a\":1", "unexpected end of input: expected ',' or '}' in an object at byte 6"},
      {"{\n  \"a\": 1,\n  \"a\": 2\n}", "duplicate key \"a\" at byte 14 (line 3, column 3)"},
      {"\"abc", "unterminated string at byte 0"},
      {"\"a\\qb\"", "invalid escape '\\q' in a string at byte 2"},
      {"\"\\u12G4\"", "invalid \\u escape: expected 4 hex digits, got 'G' at byte 5"},
      {"\"\\ud800\"", "high surrogate not followed by a low one at byte 1"},
      {"\"\\udc00\"", "lone low surrogate at byte 1"},
      {"\"a\tb\"", "control character byte 0x09 in a string: write it as an escape at byte 2"},
      {"\"\xff\"", "invalid UTF-8 (byte 0xff): this byte cannot start a character at byte 1"},
      {"\"\xc3(\"", "invalid UTF-8 (byte 0x28): expected a continuation byte at byte 2"},
      {"\"\xe0\x80\xaf\"", "invalid UTF-8 (byte 0xe0): overlong encoding at byte 1"},
      {"\"\xed\xa0\x80\"", "encoded surrogate at byte 1"},
      {"01", "invalid number: leading zero at byte 0"},
      {"-", "invalid number: expected a digit after '-' at byte 1"},
      {"1.", "invalid number: expected a digit after '.' at byte 2"},
      {"1e", "invalid number: expected a digit in the exponent at byte 2"},
      {"+1", "unexpected '+': expected a value at byte 0"},
      {"NaN", "unexpected 'N': expected a value at byte 0"},
      {"nul", "invalid literal: expected 'null' at byte 0"},
      {"9223372036854775808", "integer 9223372036854775808 does not fit in a signed 64-bit integer at byte 0"},
      {"1e400", "number 1e400 is out of the range of a double at byte 0"},
      {"{} x", "unexpected 'x' after the JSON value at byte 3"},
      {"{}\x01", "unexpected byte 0x01 after the JSON value at byte 2"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    REQUIRE_THROWS_AS(json::parse(c.text), json::ParseError);
    REQUIRE_THROWS_WITH(json::parse(c.text), Contains(c.message));
  }
  try {
    json::parse("[\n1,\n  x]");
    FAIL("no error");
  } catch (const json::ParseError& e) {
    CHECK(e.offset() == 7);
    CHECK(e.line() == 3);
    CHECK(e.column() == 3);
    CHECK(e.reason() == "unexpected 'x': expected a value");
  }
  // Nesting is bounded, so that a hostile header cannot make a tree that deep.
  std::string deep(200, '[');
  REQUIRE_THROWS_WITH(json::parse(deep), Contains("nesting deeper than 128 levels at byte 128"));
  CHECK(json::parse(std::string(100, '[') + std::string(100, ']')).is_array());
  json::ParseOptions shallow;
  shallow.max_depth = 2;
  REQUIRE_THROWS_WITH(json::parse("[[[]]]", shallow), Contains("nesting deeper than 2 levels"));
}

// nlohmann-json's own parser ends the text at a NUL byte, skips a byte order
// mark, keeps the last of duplicate keys, reads integers past int64 as
// unsigned or double, and nests without bound: each is refused here.
TEST_CASE("json: what nlohmann-json alone would take is refused", "[checkpoint][json]") {
  using namespace std::string_literals;
  struct Case {
    std::string text;
    const char* message;
  };
  const Case cases[] = {
      {"{}\0\0\0"s, "JSON: unexpected byte 0x00 after the JSON value at byte 2 (line 1, column 3)"},
      {"[1]\0]"s, "unexpected byte 0x00 after the JSON value at byte 3"},
      {"1\0"s, "unexpected byte 0x00 after the JSON value at byte 1"},
      {"\0"s, "unexpected byte 0x00: expected a value at byte 0"},
      {"[1\0]"s, "expected ',' or ']' after an array element, got byte 0x00 at byte 2"},
      {"{\"a\":\0}"s, "unexpected byte 0x00: expected a value at byte 5"},
      {"\"a\0b\""s, "control character byte 0x00 in a string: write it as an escape at byte 2"},
      {"\xef\xbb\xbf{}", "unexpected byte 0xef: expected a value at byte 0"},
      {"{\"a\":{\"b\":1,\"c\":2,\"b\":3}}", "duplicate key \"b\" at byte 18"},
      {"[{\"a\":1},{\"a\":2,\"\\u0061\":3}]", "duplicate key \"a\" at byte 16"},
      {"-9223372036854775809", "integer -9223372036854775809 does not fit in a signed 64-bit integer at byte 0"},
      {"[18446744073709551615]", "integer 18446744073709551615 does not fit in a signed 64-bit integer at byte 1"},
      {"[0, 100000000000000000000]", "integer 100000000000000000000 does not fit in a signed 64-bit integer at byte 4"},
      {"[1e400]", "number 1e400 is out of the range of a double at byte 1"},
      {"[-1e400]", "number -1e400 is out of the range of a double at byte 1"},
      {"/* c */ 1", "unexpected '/': expected a value at byte 0"},
      {"[1] // c", "unexpected '/' after the JSON value at byte 4"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    REQUIRE_THROWS_AS(json::parse(c.text), json::ParseError);
    REQUIRE_THROWS_WITH(json::parse(c.text), Contains(c.message));
  }
  // The same keys in different objects, and a key again after its object closed, are fine.
  CHECK(json::dump(json::parse(R"({"a":{"a":1},"b":{"a":2}})")) == R"({"a":{"a":1},"b":{"a":2}})");
  // Integers are stored signed, so that they compare equal however they were made.
  CHECK(json::parse("[5]") == json::Value::array({5}));
  CHECK(json::parse("5").is_number_integer());
  CHECK(!json::parse("5").is_number_unsigned());
}

TEST_CASE("json: typed access and writing errors", "[checkpoint][json]") {
  json::Value i = 3;
  REQUIRE_THROWS_AS(json::as_string(i), ValueError);
  REQUIRE_THROWS_WITH(json::as_string(i), "JSON: expected a string, got an integer");
  REQUIRE_THROWS_WITH(json::as_int(json::Value("s")), "JSON: expected an integer, got a string");
  REQUIRE_THROWS_WITH(json::as_int(json::Value(1.5)), "JSON: expected an integer, got a number");
  REQUIRE_THROWS_WITH(json::as_array(json::Value::object()), "JSON: expected an array, got an object");
  REQUIRE_THROWS_WITH(json::as_bool(json::Value::array()), "JSON: expected a boolean, got an array");
  REQUIRE_THROWS_WITH(json::as_double(json::Value()), "JSON: expected a number, got a null");
  REQUIRE_THROWS_WITH(json::at(i, "k"), "JSON: expected an object, got an integer");
  REQUIRE_THROWS_AS(json::at(json::Value::object(), "k"), KeyError);
  REQUIRE_THROWS_WITH(json::at(json::Value::object(), "k"), "JSON: the object has no member \"k\"");
  REQUIRE_THROWS_AS(json::dump(std::nan("")), ValueError);
  REQUIRE_THROWS_WITH(json::dump(std::numeric_limits<double>::infinity()),
                      "JSON: cannot write inf: NaN and infinities have no JSON form (store them as strings)");
  // NaN inside a container too: nlohmann-json would write null.
  REQUIRE_THROWS_WITH(json::dump({{"a", {1.0, std::nan("")}}}), Contains("JSON: cannot write nan"));
  // What parse would refuse is not written either.
  REQUIRE_THROWS_WITH(json::dump(json::Value(uint64_t{1} << 63)),
                      "JSON: integer 9223372036854775808 does not fit in a signed 64-bit integer");
  REQUIRE_THROWS_WITH(json::as_int(json::Value(uint64_t{1} << 63)),
                      "JSON: integer 9223372036854775808 does not fit in a signed 64-bit integer");
  REQUIRE_THROWS_AS(json::dump(json::Value::array({"\xc3"})), ValueError);
  REQUIRE_THROWS_WITH(json::dump(json::Value::array({"\xc3"})),
                      "JSON: cannot write the string \"\xc3\": it is not valid UTF-8");
  json::Value bad_key = json::Value::object();
  bad_key["\xc3"] = 1;
  REQUIRE_THROWS_AS(json::dump(bad_key), ValueError);
  REQUIRE_THROWS_WITH(json::dump(bad_key), "JSON: cannot write the key \"\xc3\": it is not valid UTF-8");
  CHECK(json::as_int(json::Value(uint64_t{7})) == 7);
}

// ---------------------------------------------------------------- safetensors

TEST_CASE("safetensors: dtype names", "[checkpoint][safetensors]") {
  for (Dtype d : test::kAllDtypes) CHECK(st::dtype_from_name(st::dtype_to_name(d)) == d);
  CHECK(st::dtype_to_name(kBFloat16) == "BF16");
  CHECK(st::dtype_to_name(kBool) == "BOOL");
  REQUIRE_THROWS_AS(st::dtype_from_name("I16"), DtypeError);
  REQUIRE_THROWS_WITH(st::dtype_from_name("I16"),
                      "dtype I16 has no Tandem equivalent (Tandem holds BOOL, U8, F16, BF16, I32, F32, F64, I64): "
                      "convert the tensor to one of these before saving it");
  REQUIRE_THROWS_AS(st::dtype_from_name("F33"), SerializationError);
  REQUIRE_THROWS_WITH(st::dtype_from_name("F33"), Contains("unknown dtype \"F33\""));
}

TEST_CASE("safetensors: the header is laid out as the safetensors package lays it out", "[checkpoint][safetensors]") {
  OrderedDict<std::string, Tensor> tensors;
  tensors.insert("b", test::make({1, 0}, {2}, kBool));
  tensors.insert("a", test::make({1, 2}, {2}));
  tensors.insert("c", test::make({5}, {}, kInt64));
  tensors.insert("aa", test::make({3}, {1}));
  std::string bytes = st::save_bytes(tensors, {{"format", "pt"}});
  // By alignment, largest first (I64, F32, ..., BOOL), then by name; the
  // metadata first, its keys sorted; the header padded to 8 with spaces.
  std::string header =
      R"({"__metadata__":{"format":"pt","tandem.devices":"{\"b\":\"cpu\",\"a\":\"cpu\",\"c\":\"cpu\",\"aa\":\"cpu\"}"},)"
      R"("c":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("aa":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
      R"("b":{"dtype":"BOOL","shape":[2],"data_offsets":[20,22]}})";
  size_t padded = (header.size() + 7) / 8 * 8;
  REQUIRE(bytes.size() == 8 + padded + 22);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n == padded);
  CHECK(bytes.substr(8, header.size()) == header);
  CHECK(bytes.substr(8 + header.size(), padded - header.size()) == std::string(padded - header.size(), ' '));
  int64_t c = 5;
  float a[] = {1, 2, 3};
  CHECK(bytes.substr(8 + padded, 8) == std::string(reinterpret_cast<const char*>(&c), 8));
  CHECK(bytes.substr(8 + padded + 8, 12) == std::string(reinterpret_cast<const char*>(a), 12));
  CHECK(bytes.substr(8 + padded + 20) == std::string("\x01\x00", 2));

  // Loading gives the tensors back in the order they were given.
  st::LoadResult back = st::load_bytes(bytes);
  CHECK(back.tensors.keys() == std::vector<std::string>{"b", "a", "c", "aa"});
  CHECK(back.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  st::Header h = st::read_header_bytes(bytes);
  CHECK(h.header_size == padded);
  REQUIRE(h.tensors.size() == 4);
  CHECK(h.tensors[0].name == "b");
  CHECK(h.tensors[0].begin == 20);
  CHECK(h.tensors[0].end == 22);
  CHECK(h.tensors[0].device == Device(kCPU));
  CHECK(h.tensors[2].shape.empty());

  // No tensors at all: the header is the metadata alone.
  std::string empty = st::save_bytes({});
  CHECK(empty.substr(8) == R"({"__metadata__":{"tandem.devices":"{}"}})");  // 40 bytes: no padding
  CHECK(st::load_bytes(empty).tensors.empty());
}

DEVICE_TEST_CASE("safetensors: every dtype and layout round-trips on its device", "[checkpoint][safetensors]") {
  TempDir dir;
  OrderedDict<std::string, Tensor> tensors;
  std::vector<double> values = {1.5, -2, 0, 3.25, 100, -0.5, 7, 1, 2, 250, 0.125, -9};
  for (Dtype d : test::kAllDtypes) {
    std::vector<double> v = values;
    if (d == kUInt8)
      for (double& x : v) x = std::abs(std::trunc(x));
    tensors.insert(std::string("x_") + std::string(dtype_name(d)), test::make(test::as_dtype(v, d), {3, 4}, d, device));
  }
  Tensor base = test::make(values, {3, 4}, kFloat64, device);
  tensors.insert("scalar", test::make({2.5}, {}, kFloat32, device));
  tensors.insert("scalar_bool", test::make({1}, {}, kBool, device));
  tensors.insert("empty", test::make({}, {0, 3}, kFloat32, device));
  tensors.insert("empty_int", test::make({}, {2, 0, 5}, kInt32, device));
  tensors.insert("transposed", base.t());
  tensors.insert("strided", base.slice(1, 0, 4, 2));
  tensors.insert("narrowed", base.narrow(0, 1, 2));  // a view at an offset into its storage
  tensors.insert("row", base[2]);
  tensors.insert("expanded", test::make({1, 2}, {2, 1}, kFloat16, device).expand({2, 3}));
  Tensor special = test::make({0, 0, 0, -0.0}, {4}, kFloat32, device);
  special.narrow(0, 0, 3).copy_(
      test::make({std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                  std::numeric_limits<double>::quiet_NaN()},
                 {3}, kFloat32, device));
  tensors.insert("special", special);
  Tensor with_grad = test::leaf({1, 2}, {2}, device);
  tensors.insert("requires_grad", with_grad * 2);  // with history: saved as a value

  std::string path = dir.file("all.safetensors");
  st::save_file(tensors, path, {{"epoch", "3"}, {"note", "\xc3\xa9t\xc3\xa9 \"quoted\""}});
  CHECK(dir.listing() == std::vector<std::string>{"all.safetensors"});

  // The file holds exactly the views' elements: no storage beyond them.
  size_t data = 0;
  for (const auto& item : tensors) data += item.second.nbytes();
  st::Header header = st::read_header(path);
  CHECK(fs::file_size(path) == 8 + header.header_size + data);

  st::LoadResult back = st::load_file(path);
  CHECK(back.tensors.keys() == tensors.keys());
  CHECK(back.metadata == std::map<std::string, std::string>{{"epoch", "3"}, {"note", "\xc3\xa9t\xc3\xa9 \"quoted\""}});
  for (const auto& item : tensors) {
    INFO(item.first);
    check_same(back.tensors[item.first], item.second, device);
  }
  CHECK(back.tensors["x_float32"].origin().describe().find("tandem::safetensors::load_file") != std::string::npos);

  // With map_location every tensor goes there.
  st::LoadResult on_cpu = st::load_file(path, Device(kCPU));
  for (const auto& item : tensors) {
    INFO(item.first);
    check_same(on_cpu.tensors[item.first], item.second, Device(kCPU));
  }
  // The bytes form is the same file.
  CHECK(st::save_bytes(tensors, {{"epoch", "3"}, {"note", "\xc3\xa9t\xc3\xa9 \"quoted\""}}) == read_bytes(path));
}

TEST_CASE("safetensors: a tensor saved from a GPU comes back on it", "[checkpoint][safetensors]") {
  if (cuda::device_count() < 2) return;  // the emulated run (TANDEM_EMULATE_CUDA=2) or two real GPUs
  TempDir dir;
  OrderedDict<std::string, Tensor> tensors;
  tensors.insert("w0", test::make({1, 2, 3, 4}, {2, 2}, kFloat32, Device("cuda:0")));
  tensors.insert("w1", test::make({5, 6}, {2}, kBFloat16, Device("cuda:1")).expand({3, 2}));
  tensors.insert("h", test::make({7}, {1}, kInt64, Device(kCPU)));
  std::string path = dir.file("gpu.safetensors");
  st::save_file(tensors, path);
  CHECK(st::read_header(path).tensors[0].device == Device("cuda:0"));

  st::LoadResult back = st::load_file(path);
  check_same(back.tensors["w0"], tensors["w0"], Device("cuda:0"));
  check_same(back.tensors["w1"], tensors["w1"], Device("cuda:1"));
  check_same(back.tensors["h"], tensors["h"], Device(kCPU));

  st::LoadResult on_cpu = st::load_file(path, Device("cpu"));
  for (const auto& item : tensors) check_same(on_cpu.tensors[item.first], item.second, Device(kCPU));
  st::LoadResult on_1 = st::load_file(path, Device("cuda:1"));
  for (const auto& item : tensors) check_same(on_1.tensors[item.first], item.second, Device("cuda:1"));
  // "cuda" is the current device.
  st::LoadResult on_current = st::load_file(path, Device("cuda"));
  for (const auto& item : tensors) check_same(on_current.tensors[item.first], item.second, Device("cuda:0"));
}

TEST_CASE("safetensors: a saved device that does not exist here is a DeviceError naming the fix",
          "[checkpoint][safetensors]") {
  TempDir dir;
  // As Tandem writes it on a machine with six GPUs.
  std::string header = R"({"__metadata__":{"tandem.devices":"{\"w\":\"cuda:5\",\"b\":\"cpu\"}"},)"
                       R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  std::string path = dir.file("six_gpus.safetensors");
  write_bytes(path, craft(header, f32_bytes(3)));
  REQUIRE_THROWS_AS(st::load_file(path), DeviceError);
  if (cuda::device_count() == 0) {
    REQUIRE_THROWS_WITH(st::load_file(path),
                        Contains("load_file: '" + path +
                                 "': tensor 'w' was saved from cuda:5. Attempting to deserialize object on a CUDA "
                                 "device but CUDA is not available (") &&
                            Contains("). If you are running on a CPU-only machine, pass map_location to load the "
                                     "tensors on the cpu: map_location = Device(\"cpu\")"));
  } else {
    REQUIRE_THROWS_WITH(
        st::load_file(path),
        Contains("load_file: '" + path +
                 "': tensor 'w' was saved from cuda:5. Attempting to deserialize object on CUDA device 5 but there "
                 "are " +
                 std::to_string(cuda::device_count()) + " CUDA devices (cuda:0 to cuda:") &&
            Contains("). Pass map_location to load the tensors on an existing device, e.g. map_location = "
                     "Device(\"cuda:0\") or Device(\"cpu\")"));
  }
  REQUIRE_THROWS_WITH(st::load_bytes(craft(header, f32_bytes(3))), Contains("load_bytes: '<bytes>': tensor 'w'"));
  // map_location is the fix.
  st::LoadResult back = st::load_file(path, Device(kCPU));
  CHECK(back.tensors.keys() == std::vector<std::string>{"w", "b"});
  test::check_values(back.tensors["w"], {1, 2});
  CHECK(back.tensors["w"].device() == Device(kCPU));
  // A map_location that does not exist is resolve_device's error.
  if (cuda::device_count() == 0) {
    REQUIRE_THROWS_AS(st::load_file(path, Device("cuda:0")), DeviceError);
    REQUIRE_THROWS_WITH(st::load_file(path, Device("cuda:0")),
                        Contains("load_file: cannot use device 'cuda:0': CUDA is not available"));
  } else {
    REQUIRE_THROWS_WITH(st::load_file(path, Device("cuda:7")), Contains("load_file: invalid device 'cuda:7'"));
  }
}

TEST_CASE("safetensors: a file written by PyTorch's safetensors package", "[checkpoint][safetensors]") {
  // tests/data/safetensors_reference.safetensors: scripts/gen_safetensors_reference.py
  // (safetensors 0.8.0, torch 1.13.1), the same values as below.
  std::string path = std::string(TANDEM_TEST_DATA) + "/safetensors_reference.safetensors";
  st::LoadResult f = st::load_file(path);
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  // Without Tandem's metadata: on the cpu, in file order, as safetensors.torch.load_file.
  CHECK(f.tensors.keys() == std::vector<std::string>{"empty_i64", "i64", "f64", "layer.0.weight", "empty", "f32",
                                                     "f32_special", "scalar", "i32", "bf16", "f16", "u8", "bool"});
  for (const auto& item : f.tensors) CHECK(item.second.device() == Device(kCPU));
  const double inf = std::numeric_limits<double>::infinity();

  CHECK(f.tensors["f32"].dtype() == kFloat32);
  CHECK(f.tensors["f32"].sizes() == Shape{2, 3});
  CHECK(f.tensors["f32"].to_vector<float>() == std::vector<float>{1.5f, -2.25f, 3.0f, 0.1f, 1e-8f, -0.0f});
  CHECK(std::signbit(f.tensors["f32"].to_vector<float>()[5]));
  std::vector<float> special = f.tensors["f32_special"].to_vector<float>();
  CHECK(special[0] == inf);
  CHECK(special[1] == -inf);
  CHECK(std::isnan(special[2]));
  CHECK(f.tensors["f64"].dtype() == kFloat64);
  CHECK(f.tensors["f64"].to_vector<double>() == std::vector<double>{3.141592653589793, -1e300, 5e-324});
  CHECK(f.tensors["f16"].dtype() == kFloat16);
  test::check_values(f.tensors["f16"], {1.0, -0.5, 65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24)},
                     test::Tolerance{0, 0});
  CHECK(f.tensors["bf16"].dtype() == kBFloat16);
  test::check_values(f.tensors["bf16"], {1.0, -2.0, 3.140625, std::ldexp(1.0, 100), -std::ldexp(1.0, -126)},
                     test::Tolerance{0, 0});
  CHECK(f.tensors["i64"].to_vector<int64_t>() ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0, -1});
  CHECK(f.tensors["i32"].dtype() == kInt32);
  CHECK(f.tensors["i32"].sizes() == Shape{2, 2});
  CHECK(f.tensors["i32"].to_vector<int32_t>() ==
        std::vector<int32_t>{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 7, -7});
  CHECK(f.tensors["u8"].to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 127, 255});
  CHECK(f.tensors["bool"].to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(f.tensors["scalar"].dim() == 0);
  CHECK(f.tensors["scalar"].item<float>() == 2.5f);
  CHECK(f.tensors["empty"].sizes() == Shape{0, 3});
  CHECK(f.tensors["empty_i64"].sizes() == Shape{2, 0});
  CHECK(f.tensors["empty_i64"].dtype() == kInt64);
  CHECK(f.tensors["layer.0.weight"].to_vector<double>() == std::vector<double>{1, 2, 3, 4});

  // Tandem writes the byte buffer exactly as the package did: same order,
  // same offsets, same bytes (only the metadata differs).
  std::string theirs = read_bytes(path);
  std::string ours = st::save_bytes(f.tensors, f.metadata);
  st::Header their_header = st::read_header(path);
  st::Header our_header = st::read_header_bytes(ours);
  CHECK(theirs.substr(8 + their_header.header_size) == ours.substr(8 + our_header.header_size));
  for (const auto& info : their_header.tensors) {
    INFO(info.name);
    auto it = std::find_if(our_header.tensors.begin(), our_header.tensors.end(),
                           [&](const st::TensorInfo& o) { return o.name == info.name; });
    REQUIRE(it != our_header.tensors.end());
    CHECK(it->begin == info.begin);
    CHECK(it->end == info.end);
    CHECK(!info.device.has_value());
  }
}

TEST_CASE("safetensors: corrupt files are SerializationErrors naming the file and the tensor",
          "[checkpoint][safetensors]") {
  TempDir dir;
  OrderedDict<std::string, Tensor> tensors;
  tensors.insert("weight", test::make({1, 2, 3, 4, 5, 6}, {2, 3}));
  tensors.insert("bias", test::make({7, 8}, {2}, kFloat64));
  const std::string good = st::save_bytes(tensors);
  const uint64_t n = st::read_header_bytes(good).header_size;
  const std::string path = dir.file("bad.safetensors");
  auto error = [&](const std::string& bytes) { return load_error<SerializationError>(dir, bytes); };
  auto with_length = [&](uint64_t length) {
    std::string b = good;
    std::memcpy(b.data(), &length, 8);
    return b;
  };

  SECTION("truncated") {
    for (size_t size : {size_t{0}, size_t{4}, size_t{7}}) {
      INFO(size);
      CHECK_THAT(error(good.substr(0, size)),
                 Contains("load_file: '" + path + "': the file is " + std::to_string(size) +
                          " bytes long, shorter than the 8-byte header length: it is truncated or not a safetensors "
                          "file"));
    }
    for (size_t size : {size_t{8}, size_t{9}, size_t{8 + n / 2}, size_t{8 + n - 1}}) {
      INFO(size);
      CHECK_THAT(error(good.substr(0, size)),
                 Contains("load_file: '" + path + "': the header length " + std::to_string(n) +
                          " runs past the end of the file (" + std::to_string(size) +
                          " bytes in all): the file is truncated or its header length is corrupt"));
    }
    // In the buffer: the last tensor in the file (weight, F32 after bias, F64) is cut.
    for (size_t cut : {size_t{1}, size_t{24}}) {
      INFO(cut);
      CHECK_THAT(error(good.substr(0, good.size() - cut)),
                 Contains("load_file: '" + path +
                          "': tensor 'weight': data_offsets [16, 40] run past the end of the "
                          "buffer (" +
                          std::to_string(40 - cut) + " bytes after the header): the file is truncated"));
    }
    // Cut at the end of bias: weight is wholly gone.
    CHECK_THAT(error(good.substr(0, 8 + n + 16)), Contains("tensor 'weight': data_offsets [16, 40] run past the end"));
  }

  SECTION("header length lying") {
    CHECK_THAT(error(with_length(uint64_t{1} << 40)),
               Contains("load_file: '" + path +
                        "': the header length 1099511627776 is over the format's limit of "
                        "100000000 bytes: the file is corrupt or not a safetensors file"));
    CHECK_THAT(error(with_length(~uint64_t{0})), Contains("the header length 18446744073709551615 is over"));
    CHECK_THAT(error(with_length(good.size())), Contains("runs past the end of the file"));
    // Shorter: the JSON is cut.
    CHECK_THAT(error(with_length(n - 8)), Contains("load_file: '" + path + "': the header is not valid JSON: JSON: "));
    // Longer: the header takes in buffer bytes.
    CHECK_THAT(error(with_length(n + 8)), Contains("the header is not valid JSON: JSON: unexpected byte 0x00 after "
                                                   "the JSON value at byte " +
                                                   std::to_string(n)));
  }

  SECTION("trailing bytes") {
    CHECK_THAT(error(good + "abc"),
               Contains("load_file: '" + path +
                        "': 3 trailing bytes after the last tensor 'weight' (the buffer is 43 bytes, the tensors "
                        "cover 40)"));
    CHECK_THAT(error(craft("{}", "x")), Contains("1 trailing bytes after the header"));
  }

  SECTION("offsets") {
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           f32_bytes(3))),
               Contains("load_file: '" + path + "': tensor 'b': data_offsets [4, 12] overlap tensor 'a' at [0, 8)"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                           f32_bytes(2))),
               Contains("tensor 'b': data_offsets [0, 8] overlap tensor 'a' at [0, 8)"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                           f32_bytes(5))),
               Contains("tensor 'b': data_offsets [12, 20] leave a hole of 4 bytes after tensor 'a' (the tensors "
                        "must tile the buffer)"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32_bytes(2))),
               Contains("tensor 'a': data_offsets [4, 8] leave a hole of 4 bytes after the header"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32_bytes(2))),
               Contains("load_file: '" + path +
                        "': tensor 'a': data_offsets [0, 8] span 8 bytes, but shape [3] of F32 needs 12"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[8,4]}})", f32_bytes(2))),
               Contains("tensor 'a': data_offsets [8, 4] end before they begin"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", f32_bytes(2))),
               Contains("tensor 'a': data_offsets holds -8, a negative number"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", f32_bytes(2))),
               Contains("tensor 'a': data_offsets must be an array of two integers [begin, end]"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", f32_bytes(2))),
               Contains("tensor 'a': data_offsets must hold integers, got a number"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,1e30]}})", f32_bytes(2))),
               Contains("tensor 'a': data_offsets must hold integers, got a number"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})", f32_bytes(2))),
               Contains("tensor 'a': data_offsets must hold integers, got a string"));
  }

  SECTION("dtype, shape and entry") {
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", f32_bytes(2))),
               Contains("load_file: '" + path + "': tensor 'a': unknown dtype \"F33\""));
    CHECK_THAT(error(craft(R"({"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", f32_bytes(2))),
               Contains("tensor 'a': dtype must be a string, got integer"));
    std::string i16 =
        load_error<DtypeError>(dir, craft(R"({"a":{"dtype":"I16","shape":[4],"data_offsets":[0,8]}})", f32_bytes(2)));
    CHECK_THAT(i16, Contains("load_file: '" + path + "': tensor 'a': dtype I16 has no Tandem equivalent"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32_bytes(2))),
               Contains("tensor 'a': shape holds -2, a negative number"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", f32_bytes(2))),
               Contains("tensor 'a': shape must be an array, got integer"));
    CHECK_THAT(
        error(craft(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", f32_bytes(2))),
        Contains("tensor 'a': shape [4294967296, 4294967296] is too large to exist (its non-zero sizes multiply "
                 "past 2^63 - 1)"));
    // A size of 0 makes the tensor empty, but its strides still multiply the
    // other sizes: 2^40 * 2^40 does not fit in int64.
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776,0],"data_offsets":[0,0]}})")),
               Contains("load_file: '" + path +
                        "': tensor 'a': shape [1099511627776, 1099511627776, 0] is too large to exist (its non-zero "
                        "sizes multiply past 2^63 - 1)"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[0,3037000500,3037000500],"data_offsets":[0,0]}})")),
               Contains("tensor 'a': shape [0, 3037000500, 3037000500] is too large to exist"));
    // Non-zero sizes that multiply to 2^62 fit: an empty tensor of that shape loads.
    st::LoadResult huge_empty =
        st::load_bytes(craft(R"({"a":{"dtype":"F32","shape":[2147483648,0,2147483648],"data_offsets":[0,0]}})"));
    CHECK(huge_empty.tensors["a"].sizes() == IntArrayRef({2147483648, 0, 2147483648}));
    CHECK(huge_empty.tensors["a"].numel() == 0);
    // 2^62 elements fit in int64, their 2^65 bytes of F64 do not fit in uint64.
    CHECK_THAT(
        error(craft(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", f32_bytes(2))),
        Contains("load_file: '" + path +
                 "': tensor 'a': shape [4611686018427387904] of F64 is too large to exist (its size in bytes "
                 "is over 2^64 - 1)"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", f32_bytes(2))),
               Contains("tensor 'a': the entry has no shape"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", f32_bytes(2))),
               Contains("tensor 'a': unknown field \"extra\" (a tensor entry holds dtype, shape and data_offsets "
                        "only)"));
    CHECK_THAT(error(craft(R"({"a":[1,2]})", f32_bytes(2))),
               Contains("tensor 'a': expected an object with dtype, shape and data_offsets, got array"));
    CHECK_THAT(
        error(craft(R"({"a":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", std::string("\x01\x02\x00", 3))),
        Contains("load_file: '" + path +
                 "': tensor 'a' (BOOL) holds the byte 2 at element 1: booleans must "
                 "be 0 or 1"));
  }

  SECTION("JSON") {
    std::string b = good;
    b[8 + 1] = '#';  // the first key's opening quote
    CHECK_THAT(error(b), Contains("load_file: '" + path +
                                  "': the header is not valid JSON: JSON: expected a string key, got '#' at byte 1 "
                                  "(line 1, column 2)"));
    CHECK_THAT(error(craft("[]")), Contains("the header must be a JSON object, got array"));
    CHECK_THAT(error(craft("{\"\xff\":1}")), Contains("the header is not valid JSON: JSON: invalid UTF-8"));
    CHECK_THAT(error(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           f32_bytes(2))),
               Contains("load_file: '" + path + "': the header is not valid JSON: JSON: duplicate key \"a\" at byte"));
    CHECK_THAT(error(craft(R"({"__metadata__":{"k":1}})")),
               Contains("__metadata__ key 'k': values must be strings, got integer"));
    CHECK_THAT(error(craft(R"({"__metadata__":[]})")),
               Contains("__metadata__ must be an object of strings, got array"));
  }

  SECTION("Tandem's device metadata") {
    auto with_devices = [&](const std::string& devices) {
      return craft(R"({"__metadata__":{"tandem.devices":)" + json::quote(devices) +
                       R"(},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                   f32_bytes(1));
    };
    CHECK_THAT(error(with_devices(R"({"a":"cpu","b":"cpu"})")),
               Contains("metadata 'tandem.devices' names tensor 'b', which the file does not hold"));
    CHECK_THAT(error(with_devices("{}")), Contains("metadata 'tandem.devices' does not name tensor 'a', which the "
                                                   "file holds"));
    // Two tensors, one named: the message names the other one.
    std::string two = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    CHECK_THAT(error(craft(R"({"__metadata__":{"tandem.devices":"{\"a\":\"cpu\"}"},)" + two.substr(1), f32_bytes(2))),
               Contains("load_file: '" + path +
                        "': metadata 'tandem.devices' does not name tensor 'b', which the file holds"));
    CHECK_THAT(error(craft(R"({"__metadata__":{"tandem.devices":"{\"b\":\"cpu\"}"},)" + two.substr(1), f32_bytes(2))),
               Contains("metadata 'tandem.devices' does not name tensor 'a', which the file holds"));
    CHECK_THAT(error(with_devices(R"({"a":"tpu:0"})")), Contains("metadata 'tandem.devices': tensor 'a': "));
    CHECK_THAT(error(with_devices(R"({"a":0})")),
               Contains("metadata 'tandem.devices': the device of tensor 'a' must be a string such as \"cuda:0\", "
                        "got integer"));
    CHECK_THAT(error(with_devices("[")), Contains("metadata 'tandem.devices' is not valid JSON: JSON: "));
    CHECK_THAT(error(with_devices("[]")), Contains("metadata 'tandem.devices' must be a JSON object of tensor names "
                                                   "to devices, got array"));
  }

  SECTION("not a file") {
    REQUIRE_THROWS_AS(st::load_file(dir.file("missing.safetensors")), SerializationError);
    REQUIRE_THROWS_WITH(st::load_file(dir.file("missing.safetensors")),
                        "load_file: cannot open '" + dir.file("missing.safetensors") + "': No such file or directory");
    REQUIRE_THROWS_WITH(st::load_file(dir.str()), "load_file: cannot read '" + dir.str() + "': not a regular file");
  }

  // The good file itself loads.
  CHECK(st::load_bytes(good).tensors.size() == 2);
}

TEST_CASE("safetensors: every truncation and every one-byte change of a file is an error or a valid load",
          "[checkpoint][safetensors]") {
  OrderedDict<std::string, Tensor> tensors;
  tensors.insert("w", test::make({1, 2, 3, 4}, {2, 2}));
  tensors.insert("flags", test::make({1, 0, 1}, {3}, kBool));
  tensors.insert("n", test::make({5}, {}, kInt64));
  const std::string good = st::save_bytes(tensors);
  auto load = [](const std::string& bytes) {
    try {
      st::load_bytes(bytes);
      return true;
    } catch (const Error&) {  // SerializationError, DtypeError or DeviceError: never a crash
      return false;
    }
  };
  REQUIRE(load(good));
  int refused = 0;
  for (size_t size = 0; size < good.size(); ++size) CHECK(!load(good.substr(0, size)));
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char change : {0x00, 0x01, 0x20, 0x7f, 0xff}) {
      std::string b = good;
      b[i] = static_cast<char>(static_cast<unsigned char>(b[i]) ^ change);
      refused += load(b) ? 0 : 1;
    }
  }
  // Data bytes may change into other valid values; most header changes may not.
  CHECK(refused > static_cast<int>(good.size()));
}

TEST_CASE("safetensors: what cannot be saved", "[checkpoint][safetensors]") {
  OrderedDict<std::string, Tensor> tensors;
  tensors.insert("a", test::make({1}, {1}));
  REQUIRE_THROWS_AS(st::save_bytes(tensors, {{"tandem.devices", "x"}}), ValueError);
  REQUIRE_THROWS_WITH(st::save_bytes(tensors, {{"tandem.devices", "x"}}),
                      "save_bytes: the metadata key 'tandem.devices' is Tandem's own (the device of each tensor): use "
                      "another key");
  REQUIRE_THROWS_WITH(st::save_bytes(tensors, {{"k", "\xff"}}),
                      "save_bytes: metadata key \"k\" or its value is not valid UTF-8, which the format's JSON header "
                      "requires");
  OrderedDict<std::string, Tensor> bad_name;
  bad_name.insert("\xc3", test::make({1}, {1}));
  REQUIRE_THROWS_WITH(st::save_bytes(bad_name), Contains("save_bytes: tensor name \"\xc3\" is not valid UTF-8"));
  OrderedDict<std::string, Tensor> reserved;
  reserved.insert("__metadata__", test::make({1}, {1}));
  REQUIRE_THROWS_WITH(st::save_bytes(reserved),
                      "save_bytes: a tensor may not be named '__metadata__': the format reserves it for the metadata");
  OrderedDict<std::string, Tensor> undefined;
  undefined.insert("a", Tensor());
  REQUIRE_THROWS_AS(st::save_bytes(undefined), ValueError);
  REQUIRE_THROWS_WITH(st::save_bytes(undefined),
                      "save_bytes: tensor 'a' is undefined: only defined tensors can be saved");
}

TEST_CASE("safetensors: a failed save leaves the previous file as it was", "[checkpoint][safetensors]") {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  OrderedDict<std::string, Tensor> first;
  first.insert("w", test::make({1, 2, 3}, {3}));
  st::save_file(first, path);
  const std::string before = read_bytes(path);

  SECTION("a tensor that cannot be saved") {
    OrderedDict<std::string, Tensor> second;
    second.insert("w", test::make({4, 5, 6}, {3}));
    second.insert("broken", Tensor());
    REQUIRE_THROWS_WITH(st::save_file(second, path), Contains("save_file: tensor 'broken' is undefined"));
  }

  SECTION("a write that fails midway") {
    // The file size limit makes write() fail with EFBIG after 64 KiB: the
    // header and part of the data are in the temporary file by then.
    OrderedDict<std::string, Tensor> big;
    big.insert("w", zeros({1 << 20}));
    struct rlimit old_limit;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_limit;
    small.rlim_cur = 64 << 10;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string message;
    try {
      st::save_file(big, path);
    } catch (const SerializationError& e) {
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    ::signal(SIGXFSZ, old_handler);
    CHECK(message == "save_file: writing '" + path +
                         "' failed while writing the temporary file (File too large); the previous file, if any, is "
                         "unchanged");
  }

  SECTION("a folder that does not exist") {
    std::string elsewhere = dir.file("no/such/folder/model.safetensors");
    REQUIRE_THROWS_AS(st::save_file(first, elsewhere), SerializationError);
    REQUIRE_THROWS_WITH(st::save_file(first, elsewhere), "save_file: cannot create the temporary file '" + elsewhere +
                                                             ".tmp." + std::to_string(::getpid()) + "' to write '" +
                                                             elsewhere + "': No such file or directory");
  }

  SECTION("a temporary file left by a crash") {
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    write_bytes(tmp, "junk");
    REQUIRE_THROWS_WITH(st::save_file(first, path),
                        Contains("save_file: cannot create the temporary file '" + tmp + "' to write '" + path +
                                 "': File exists (another save to the same path is under way in this process, or a "
                                 "crashed one left it behind: remove it)"));
    CHECK(read_bytes(tmp) == "junk");  // not ours: left alone
    fs::remove(tmp);
  }

  CHECK(read_bytes(path) == before);
  CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
  // And a save that works replaces it.
  OrderedDict<std::string, Tensor> third;
  third.insert("v", test::make({9}, {1}, kInt64));
  st::save_file(third, path);
  CHECK(st::load_file(path).tensors.keys() == std::vector<std::string>{"v"});
  CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
}

// ---------------------------------------------------------------- nn

DEVICE_TEST_CASE("nn::save and nn::load: a module's state on every device", "[checkpoint][nn]") {
  TempDir dir;
  std::string path = dir.file("net.safetensors");
  Net saved = make_net(device, 1);
  nn::save(saved, path);
  st::LoadResult file = st::load_file(path);
  CHECK(file.tensors.keys() == std::vector<std::string>{"running", "count", "fc.weight", "fc.bias"});
  CHECK(file.metadata == std::map<std::string, std::string>{{"format", "pt"}});

  // Loaded in place: the same tensors, on their device, still parameters.
  Net loaded = make_net(device, 100);
  Tensor weight = loaded->fc->weight;
  nn::LoadStateDictResult result = nn::load(loaded, path);
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  check_same_state(*loaded, *saved);
  CHECK(loaded->fc->weight.is_same(weight));
  CHECK(loaded->fc->weight.requires_grad());
  CHECK(loaded->fc->weight.is_leaf());

  // map_location: the values go through the cpu into the module's device.
  Net via_cpu = make_net(device, 7);
  nn::load(via_cpu, path, Device(kCPU));
  check_same_state(*via_cpu, *saved);

  // A module saved on one device loads into a module on another.
  if (auto other = test::other_device(device)) {
    Net elsewhere = make_net(*other, 5);
    nn::load(elsewhere, path);
    CHECK(elsewhere->fc->weight.device() == *other);
    CHECK(elsewhere->fc->weight.to_vector<float>() == saved->fc->weight.to_vector<float>());
  }

  // Through a shared_ptr, an Impl, and plain dicts.
  std::shared_ptr<NetImpl> ptr = make_net(device, 3).ptr();
  nn::save(ptr, dir.file("ptr.safetensors"));
  nn::save(*ptr, dir.file("impl.safetensors"));
  CHECK(read_bytes(dir.file("ptr.safetensors")) == read_bytes(dir.file("impl.safetensors")));
  nn::load(ptr, path);
  check_same_state(*ptr, *saved);
  nn::save(saved->state_dict(), dir.file("dict.safetensors"));
  OrderedDict<std::string, Tensor> dict = nn::load(dir.file("dict.safetensors"));
  CHECK(dict.keys() == saved->state_dict().keys());
  check_same(dict["fc.bias"], saved->fc->bias, device);
  CHECK(nn::load(dir.file("dict.safetensors"), Device(kCPU))["fc.bias"].device() == Device(kCPU));
}

TEST_CASE("nn::load: strict and non-strict with missing, unexpected and mismatched keys", "[checkpoint][nn]") {
  TempDir dir;
  Net source = make_net(Device(kCPU), 1);
  OrderedDict<std::string, Tensor> state = source->state_dict();
  const std::string path = dir.file("state.safetensors");
  auto untouched = [](const Net& net) { check_same_state(*net, *make_net(Device(kCPU), 9)); };

  SECTION("missing") {
    OrderedDict<std::string, Tensor> partial = state;
    partial.erase("fc.bias");
    partial.erase("count");
    nn::save(partial, path);
    Net net = make_net(Device(kCPU), 9);
    REQUIRE_THROWS_AS(nn::load(net, path), KeyError);
    REQUIRE_THROWS_WITH(nn::load(net, path),
                        "Error(s) in loading state_dict for Net:\n\tMissing key(s) in "
                        "state_dict: \"count\", \"fc.bias\". \n(loading '" +
                            path + "')");
    untouched(net);
    nn::LoadStateDictResult result = nn::load(net, path, std::nullopt, /*strict=*/false);
    CHECK(result.missing_keys == std::vector<std::string>{"count", "fc.bias"});
    CHECK(result.unexpected_keys.empty());
    CHECK(net->fc->weight.to_vector<float>() == source->fc->weight.to_vector<float>());
    CHECK(net->fc->bias.to_vector<float>() == make_net(Device(kCPU), 9)->fc->bias.to_vector<float>());
  }

  SECTION("unexpected") {
    OrderedDict<std::string, Tensor> extra = state;
    extra.insert("extra.w", test::make({1}, {1}));
    nn::save(extra, path);
    Net net = make_net(Device(kCPU), 9);
    REQUIRE_THROWS_WITH(nn::load(net, path),
                        "Error(s) in loading state_dict for Net:\n\tUnexpected key(s) in "
                        "state_dict: \"extra.w\". \n(loading '" +
                            path + "')");
    untouched(net);
    nn::LoadStateDictResult result = nn::load(net, path, Device(kCPU), /*strict=*/false);
    CHECK(result.missing_keys.empty());
    CHECK(result.unexpected_keys == std::vector<std::string>{"extra.w"});
    check_same_state(*net, *source);
  }

  SECTION("missing and unexpected together") {
    OrderedDict<std::string, Tensor> renamed = state;
    renamed.erase("fc.weight");
    renamed.insert("fc.weights", state["fc.weight"]);
    nn::save(renamed, path);
    Net net = make_net(Device(kCPU), 9);
    REQUIRE_THROWS_WITH(nn::load(net, path),
                        "Error(s) in loading state_dict for Net:\n\tMissing key(s) in "
                        "state_dict: \"fc.weight\". \n\tUnexpected key(s) in state_dict: "
                        "\"fc.weights\". \n(loading '" +
                            path + "')");
  }

  SECTION("mismatched shape: an error even when not strict") {
    OrderedDict<std::string, Tensor> wrong = state;
    wrong.insert_or_assign("fc.weight", zeros({3, 3}));
    nn::save(wrong, path);
    Net net = make_net(Device(kCPU), 9);
    const std::string message =
        "Error(s) in loading state_dict for Net:\n\tsize mismatch for fc.weight: copying a param with shape [3, 3] "
        "from checkpoint, the shape in current model is [2, 3].\n(loading '" +
        path + "')";
    REQUIRE_THROWS_WITH(nn::load(net, path), message);
    REQUIRE_THROWS_WITH(nn::load(net, path, std::nullopt, /*strict=*/false), message);
    untouched(net);
  }
}

TEST_CASE("nn::load: a module saved from a GPU this machine lacks", "[checkpoint][nn]") {
  TempDir dir;
  // Net's state as Tandem writes it from cuda:5.
  std::string devices = R"({"running":"cuda:5","count":"cuda:5","fc.weight":"cuda:5","fc.bias":"cuda:5"})";
  std::string header = R"({"__metadata__":{"tandem.devices":)" + json::quote(devices) +
                       R"(},"count":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                       R"("fc.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]},)"
                       R"("running":{"dtype":"F32","shape":[2],"data_offsets":[32,40]},)"
                       R"("fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[40,48]}})";
  int64_t count = 4;
  std::string path = dir.file("gpu5.safetensors");
  write_bytes(path, craft(header, std::string(reinterpret_cast<const char*>(&count), 8) + f32_bytes(10)));
  Net net;
  REQUIRE_THROWS_AS(nn::load(net, path), DeviceError);
  REQUIRE_THROWS_WITH(nn::load(net, path), Contains("tensor 'running' was saved from cuda:5") &&
                                               Contains("ass map_location") && Contains(path));
  nn::load(net, path, Device(kCPU));
  CHECK(net->count.item<int64_t>() == 4);
  CHECK(net->fc->weight.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(net->running.to_vector<float>() == std::vector<float>{7, 8});
  CHECK(net->fc->bias.to_vector<float>() == std::vector<float>{9, 10});
}

DEVICE_TEST_CASE("nn::Checkpoint: model, optimizer state, scheduler and epoch in one file", "[checkpoint][nn]") {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Net net = make_net(device, 2);
  nn::Checkpoint ckpt;
  ckpt.add_module(*net);
  // Optimizer state as an optimizer would give it: per parameter index.
  std::map<int64_t, OrderedDict<std::string, Tensor>> state;
  state[0].insert("exp_avg", test::make({0.5, 0.25, 1, 2, 3, 4}, {2, 3}, kFloat32, device));
  state[0].insert("step", test::make({3}, {}, kFloat32, device));
  state[1].insert("exp_avg", test::make({0.125, -1}, {2}, kFloat32, device));
  state[12].insert("momentum_buffer", test::make({7}, {1}, kFloat64, device));
  ckpt.add_indexed_tensors(nn::Checkpoint::kOptimizerStatePrefix, state);
  json::Value groups =
      json::Value::array({{{"options", {{"lr", 0.001}, {"betas", {0.9, 0.999}}}}, {"params", {0, 1}}}});
  nn::set_json(ckpt, nn::Checkpoint::kOptimizerParamGroups, groups);
  nn::set_json(ckpt, nn::Checkpoint::kScheduler, {{"last_epoch", 4}, {"gamma", 0.5}});
  ckpt.set_int(nn::Checkpoint::kEpoch, 4);
  ckpt.set("note", "run 17");
  ckpt.save(path);
  CHECK(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});

  // The file is a plain safetensors file with the documented names.
  st::LoadResult raw = st::load_file(path, Device(kCPU));
  CHECK(raw.tensors.keys() == std::vector<std::string>{"model.running", "model.count", "model.fc.weight",
                                                       "model.fc.bias", "optimizer.state.0.exp_avg",
                                                       "optimizer.state.0.step", "optimizer.state.1.exp_avg",
                                                       "optimizer.state.12.momentum_buffer"});
  CHECK(raw.metadata ==
        std::map<std::string, std::string>{
            {"epoch", "4"},
            {"note", "run 17"},
            {"optimizer.param_groups", R"([{"options":{"lr":0.001,"betas":[0.9,0.999]},"params":[0,1]}])"},
            {"scheduler", R"({"last_epoch":4,"gamma":0.5})"},
            {"tandem.checkpoint", "1"}});

  nn::Checkpoint back = nn::Checkpoint::load(path);
  CHECK(back.source() == path);
  Net restored = make_net(device, 50);
  nn::LoadStateDictResult result = back.load_module(*restored);
  CHECK(result.missing_keys.empty());
  check_same_state(*restored, *net);
  auto state_back = back.indexed_tensors(nn::Checkpoint::kOptimizerStatePrefix);
  REQUIRE(state_back.size() == 3);
  CHECK(state_back[0].keys() == std::vector<std::string>{"exp_avg", "step"});
  for (const auto& [index, tensors] : state) {
    for (const auto& item : tensors) {
      INFO(index << " " << item.first);
      check_same(state_back[index][item.first], item.second, device);
    }
  }
  CHECK(nn::get_json(back, nn::Checkpoint::kOptimizerParamGroups) == groups);
  CHECK(json::as_double(json::at(nn::get_json(back, nn::Checkpoint::kScheduler), "gamma")) == 0.5);
  CHECK(back.get_int(nn::Checkpoint::kEpoch) == 4);
  CHECK(back.get("note") == "run 17");
  CHECK(back.contains("note"));
  CHECK(!back.contains("nothing"));
  CHECK(back.tensors("model.").keys() == net->state_dict().keys());
  CHECK(back.tensors("nothing.").empty());

  // map_location moves everything.
  nn::Checkpoint on_cpu = nn::Checkpoint::load(path, Device(kCPU));
  for (const auto& item : on_cpu.all_tensors()) CHECK(item.second.device() == Device(kCPU));
  Net restored_cpu = make_net(Device(kCPU), 50);
  on_cpu.load_module(*restored_cpu);
  CHECK(restored_cpu->fc->weight.to_vector<float>() == net->fc->weight.to_vector<float>());
}

TEST_CASE("nn::Checkpoint: errors", "[checkpoint][nn]") {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  nn::Checkpoint ckpt;
  ckpt.set_int("epoch", 2);
  ckpt.set("bad_int", "12x");
  ckpt.set("bad_json", "{\"a\":");
  ckpt.add_tensor("optimizer.state.x.exp_avg", zeros({1}));
  ckpt.save(path);
  nn::Checkpoint back = nn::Checkpoint::load(path);

  REQUIRE_THROWS_AS(back.get("epochs"), KeyError);
  REQUIRE_THROWS_WITH(back.get("epochs"), "checkpoint '" + path +
                                              "' has no metadata 'epochs' (it has 'bad_int', 'bad_json', 'epoch', "
                                              "'tandem.checkpoint')");
  REQUIRE_THROWS_WITH(nn::Checkpoint().get("epoch"), "checkpoint has no metadata 'epoch' (it has 'tandem.checkpoint')");
  REQUIRE_THROWS_AS(back.get_int("bad_int"), SerializationError);
  REQUIRE_THROWS_WITH(back.get_int("bad_int"),
                      "checkpoint '" + path + "': metadata 'bad_int' is \"12x\", not an integer");
  REQUIRE_THROWS_WITH(nn::get_json(back, "bad_json"),
                      Contains("checkpoint '" + path +
                               "': metadata 'bad_json' is not valid JSON: JSON: unexpected end "
                               "of input: expected a value at byte 5"));
  REQUIRE_THROWS_WITH(back.indexed_tensors("optimizer.state."),
                      "checkpoint '" + path +
                          "': tensor 'optimizer.state.x.exp_avg' does not follow the layout "
                          "'optimizer.state.<index>.<name>'");
  for (const char* name : {"optimizer.state.1", "optimizer.state.1.", "optimizer.state.01.a", "optimizer.state.-1.a"}) {
    nn::Checkpoint c;
    c.add_tensor(name, zeros({1}));
    REQUIRE_THROWS_WITH(c.indexed_tensors("optimizer.state."), Contains(std::string("tensor '") + name + "'"));
  }
  REQUIRE_THROWS_WITH(ckpt.add_tensor("optimizer.state.x.exp_avg", zeros({1})),
                      "checkpoint tensor 'optimizer.state.x.exp_avg' already defined");
  REQUIRE_THROWS_WITH(ckpt.add_indexed_tensors("s.", {{-1, {}}}),
                      "Checkpoint::add_indexed_tensors: index -1 under 's.' is negative");
  REQUIRE_THROWS_AS(ckpt.set("tandem.checkpoint", "2"), ValueError);
  REQUIRE_THROWS_WITH(ckpt.set("tandem.checkpoint", "2"),
                      "Checkpoint::set: 'tandem.checkpoint' is the checkpoint layout's version, which Tandem sets");
  REQUIRE_THROWS_WITH(nn::set_json(ckpt, "x", std::nan("")), Contains("JSON: cannot write nan"));

  // Not a checkpoint, or a later layout.
  Net net;
  nn::save(net, dir.file("plain.safetensors"));
  REQUIRE_THROWS_AS(nn::Checkpoint::load(dir.file("plain.safetensors")), SerializationError);
  REQUIRE_THROWS_WITH(nn::Checkpoint::load(dir.file("plain.safetensors")),
                      "Checkpoint::load: '" + dir.file("plain.safetensors") +
                          "' is not a training checkpoint (its metadata has no 'tandem.checkpoint'): load a plain "
                          "state dict with nn::load instead");
  st::save_file({}, dir.file("v2.safetensors"), {{"tandem.checkpoint", "2"}});
  REQUIRE_THROWS_WITH(nn::Checkpoint::load(dir.file("v2.safetensors")),
                      "Checkpoint::load: '" + dir.file("v2.safetensors") +
                          "' has checkpoint layout version 2, and this Tandem reads version 1 only");

  // The model part names the checkpoint.
  nn::Checkpoint partial;
  partial.add_tensor("model.fc.weight", zeros({2, 3}));
  REQUIRE_THROWS_WITH(
      partial.load_module(*net),
      Contains("Missing key(s) in state_dict: \"running\", \"count\", \"fc.bias\". \n(loading the model "
               "of checkpoint)"));
}

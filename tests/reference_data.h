// Reading the PyTorch reference files in tests/data (reference.txt,
// autograd_reference.txt, conv_reference.txt, nn_loss_reference.txt,
// nn_norm_reference.txt, from the scripts/gen_*_reference.py of the same
// name): the parts their formats share. Each is a list of records: a case
// line, "case <name> <words...> <key=value...>", then tensor lines,
// "t <dtype> <ndim> <sizes...> <values...>"; blank and '#' lines are skipped.
// ReferenceReader walks them; a test's Case derives from ReferenceCase for
// the attribute lookups, whose errors name the file and the case.
#pragma once

#include <cstdlib>
#include <fstream>
#include <istream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace tandem::test {

// tests/data/<file>, opened; throws when it cannot be.
inline std::ifstream open_reference(const std::string& file) {
  const std::string path = std::string(TANDEM_TEST_DATA) + "/" + file;
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return f;
}

// A dtype's name as torch prints it ("float32", "int64", ...); `file` names
// the data file in the error.
inline Dtype parse_dtype(const std::string& s, const std::string& file) {
  static const std::map<std::string, Dtype> m = {{"float32", kFloat32},   {"float64", kFloat64}, {"float16", kFloat16},
                                                 {"bfloat16", kBFloat16}, {"int64", kInt64},     {"int32", kInt32},
                                                 {"uint8", kUInt8},       {"bool", kBool}};
  auto it = m.find(s);
  if (it == m.end()) throw std::runtime_error(file + ": unknown dtype " + s);
  return it->second;
}

// A tensor line, "t <dtype> <ndim> <sizes...> <values...>", as a cpu tensor.
inline Tensor parse_tensor(const std::string& line, const std::string& file) {
  std::istringstream in(line);
  std::string tag, dtype;
  int64_t ndim;
  in >> tag >> dtype >> ndim;
  if (tag != "t") throw std::runtime_error(file + ": expected a tensor line, got: " + line);
  Shape sizes(ndim);
  for (auto& s : sizes) in >> s;
  std::vector<double> values;
  std::string v;
  while (in >> v) values.push_back(std::strtod(v.c_str(), nullptr));
  // The values were printed with repr() from tensors of this dtype, so the
  // float64 round trip and the conversion back are exact.
  Tensor flat = from_blob(values.data(), {static_cast<int64_t>(values.size())}, kFloat64);
  return flat.to(parse_dtype(dtype, file)).reshape(sizes).clone();
}

// The "key=value" words left on a case line.
inline std::map<std::string, std::string> parse_attrs(std::istream& in) {
  std::map<std::string, std::string> attrs;
  std::string kv;
  while (in >> kv) {
    auto eq = kv.find('=');
    attrs[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return attrs;
}

// The same values laid out with the first and last dims swapped in memory:
// the non-contiguous variant each reference case also runs.
inline Tensor non_contiguous(const Tensor& t) {
  if (t.dim() < 2) return t;
  return t.transpose(0, -1).contiguous().transpose(0, -1);
}

// A case line's name, its words between the name and the key=value ones, and
// those as attrs. The lookups throw naming the file and the case.
struct ReferenceCase {
  std::string file, name;
  std::vector<std::string> words;
  std::map<std::string, std::string> attrs;

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  const std::string& attr(const std::string& key) const {
    auto it = attrs.find(key);
    if (it == attrs.end()) throw std::runtime_error(file + ": case " + name + " has no " + key);
    return it->second;
  }
  int64_t int_attr(const std::string& key) const { return std::stoll(attr(key)); }
  double double_attr(const std::string& key) const { return std::stod(attr(key)); }
  // "1" (a 0/1 flag).
  bool flag(const std::string& key) const { return attr(key) == "1"; }
  // A float, or nullopt for "none".
  std::optional<double> optional_double(const std::string& key) const {
    const std::string& v = attr(key);
    return v == "none" ? std::nullopt : std::optional<double>(std::stod(v));
  }
  // "a,b,..." as integers.
  std::vector<int64_t> ints_attr(const std::string& key) const {
    std::vector<int64_t> out;
    std::istringstream in(attr(key));
    for (std::string s; std::getline(in, s, ',');) out.push_back(std::stoll(s));
    return out;
  }
  // "h,w" as {h, w}.
  Shape pair_attr(const std::string& key) const {
    std::vector<int64_t> v = ints_attr(key);
    if (v.size() != 2) throw std::runtime_error(file + ": case " + name + ": " + key + " is not a pair h,w");
    return {v[0], v[1]};
  }
  // The i-th word after the name, as an integer.
  int64_t int_word(size_t i) const {
    if (i >= words.size()) throw std::runtime_error(file + ": case " + name + " has no word " + std::to_string(i));
    return std::stoll(words[i]);
  }
};

// Walks a reference file: next_case() fills the next case line, next_tensor()
// parses the tensor line after it.
class ReferenceReader {
 public:
  explicit ReferenceReader(std::string file) : file_(std::move(file)), in_(open_reference(file_)) {}

  const std::string& file() const { return file_; }

  // Reads the next case line into c (its `n_words` words after the name into
  // c.words, the rest as attrs); false at the end of the file.
  bool next_case(ReferenceCase& c, size_t n_words = 0) {
    std::string line;
    while (std::getline(in_, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      std::string tag;
      in >> tag >> c.name;
      if (tag != "case" || c.name.empty()) throw std::runtime_error(file_ + ": expected a case line, got: " + line);
      c.file = file_;
      c.words.resize(n_words);
      for (auto& w : c.words)
        if (!(in >> w))
          throw std::runtime_error(file_ + ": case " + c.name + " has fewer than " + std::to_string(n_words) +
                                   " words before its key=value ones");
      c.attrs = parse_attrs(in);
      case_ = c.name;
      return true;
    }
    return false;
  }

  // The next line, a tensor line of the current case.
  Tensor next_tensor() {
    std::string line;
    if (!std::getline(in_, line)) throw std::runtime_error(file_ + ": truncated in case " + case_);
    return parse_tensor(line, file_);
  }

 private:
  std::string file_;
  std::ifstream in_;
  std::string case_;
};

}  // namespace tandem::test

// Reading the PyTorch reference files in tests/data (reference.txt from
// scripts/gen_reference.py, autograd_reference.txt from
// scripts/gen_autograd_reference.py): the parts both formats share.
#pragma once

#include <cstdlib>
#include <fstream>
#include <istream>
#include <map>
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

}  // namespace tandem::test

// Reading tests/data/optim_reference.txt (scripts/gen_optim_reference.py):
// optimizer trajectories, clip_grad_norm_ cases and scheduler sequences
// recorded from PyTorch 1.13. The format is described in the script.
#pragma once

#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "reference_data.h"

namespace tandem::test {

struct OptimCase {
  std::string name, optimizer;
  Dtype dtype = kFloat64;
  int64_t steps = 0;
  std::vector<int64_t> sizes;                                   // parameters per group
  std::vector<std::map<std::string, double>> options;           // per group, by state-dict key
  std::vector<Tensor> initial;                                  // one per parameter
  std::vector<std::vector<Tensor>> grads;                       // [step][param]; undefined: no gradient
  std::vector<std::vector<Tensor>> expected;                    // [step][param] after the step
  std::vector<std::tuple<int64_t, std::string, Tensor>> state;  // after the last step
};

struct ClipCase {
  std::string name;
  double max_norm = 0, norm_type = 0;
  std::vector<Tensor> grads, clipped;
  Tensor total;
};

struct SchedCase {
  std::string name, kind, optimizer;
  std::vector<double> lrs;
  int64_t steps = 0;
  std::map<std::string, std::string> args;
  std::vector<std::vector<double>> rows;  // lr per group, then momentum per group
};

struct OptimReference {
  std::vector<OptimCase> cases;
  std::vector<ClipCase> clips;
  std::vector<SchedCase> scheds;
};

inline std::vector<double> parse_list(const std::string& s) {
  std::vector<double> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::strtod(item.c_str(), nullptr));
  return out;
}

inline const OptimReference& optim_reference() {
  static const OptimReference ref = [] {
    const std::string file = "optim_reference.txt";
    std::ifstream f = open_reference(file);
    OptimReference r;
    std::string line;
    auto next = [&]() -> std::string {
      if (!std::getline(f, line)) throw std::runtime_error(file + ": unexpected end");
      return line;
    };
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      std::string tag;
      in >> tag;
      if (tag == "case") {
        OptimCase c;
        in >> c.name;
        auto attrs = parse_attrs(in);
        c.optimizer = attrs.at("optimizer");
        c.dtype = parse_dtype(attrs.at("dtype"), file);
        c.steps = std::stoll(attrs.at("steps"));
        for (double s : parse_list(attrs.at("sizes"))) c.sizes.push_back(static_cast<int64_t>(s));
        c.options.resize(c.sizes.size());
        for (const auto& [key, value] : attrs) {
          if (key.size() < 3 || key[0] != 'g' || key.find('.') == std::string::npos) continue;
          const size_t dot = key.find('.');
          c.options.at(std::stoul(key.substr(1, dot - 1)))[key.substr(dot + 1)] = std::strtod(value.c_str(), nullptr);
        }
        int64_t n = 0;
        for (int64_t s : c.sizes) n += s;
        for (int64_t i = 0; i < n; ++i) c.initial.push_back(parse_tensor(next(), file));
        for (int64_t k = 0; k < c.steps; ++k) {
          std::vector<Tensor> g, e;
          for (int64_t i = 0; i < n; ++i) g.push_back(next() == "none" ? Tensor() : parse_tensor(line, file));
          for (int64_t i = 0; i < n; ++i) e.push_back(parse_tensor(next(), file));
          c.grads.push_back(g);
          c.expected.push_back(e);
        }
        std::istringstream st(next());
        int64_t count;
        st >> tag >> count;
        if (tag != "state") throw std::runtime_error(file + ": expected a state line in " + c.name);
        for (int64_t i = 0; i < count; ++i) {
          std::istringstream s(next());
          int64_t index;
          std::string key;
          s >> tag >> index >> key;
          c.state.emplace_back(index, key, parse_tensor(next(), file));
        }
        r.cases.push_back(std::move(c));
      } else if (tag == "clip") {
        ClipCase c;
        in >> c.name;
        auto attrs = parse_attrs(in);
        c.max_norm = std::strtod(attrs.at("max_norm").c_str(), nullptr);
        c.norm_type = std::strtod(attrs.at("norm_type").c_str(), nullptr);
        const int64_t n = std::stoll(attrs.at("n"));
        for (int64_t i = 0; i < n; ++i) c.grads.push_back(parse_tensor(next(), file));
        c.total = parse_tensor(next(), file);
        for (int64_t i = 0; i < n; ++i) c.clipped.push_back(parse_tensor(next(), file));
        r.clips.push_back(std::move(c));
      } else if (tag == "sched") {
        SchedCase c;
        in >> c.name >> c.kind;
        c.args = parse_attrs(in);
        c.optimizer = c.args.at("optimizer");
        c.lrs = parse_list(c.args.at("lrs"));
        c.steps = std::stoll(c.args.at("steps"));
        for (int64_t k = 0; k <= c.steps; ++k) {
          std::istringstream v(next());
          v >> tag;
          if (tag != "v") throw std::runtime_error(file + ": expected a v line in " + c.name);
          std::vector<double> row;
          std::string x;
          while (v >> x) row.push_back(std::strtod(x.c_str(), nullptr));
          c.rows.push_back(row);
        }
        r.scheds.push_back(std::move(c));
      } else {
        throw std::runtime_error(file + ": unknown record: " + line);
      }
    }
    return r;
  }();
  return ref;
}

}  // namespace tandem::test

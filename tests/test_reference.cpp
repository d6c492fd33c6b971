// Checks Tandem's ops against reference values produced by PyTorch
// (tests/data/reference.txt, written by scripts/gen_reference.py). Each case
// runs on every device, with contiguous and with non-contiguous inputs, and
// must match PyTorch's result dtype and values (per-dtype tolerance).
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "helpers.h"
#include "reference_data.h"

using namespace tandem;

namespace {

using test::non_contiguous;

struct Case : test::ReferenceCase {
  std::string op;
  std::vector<Tensor> inputs, outputs;
};

const std::string kFile = "reference.txt";

std::vector<Case> load_cases() {
  test::ReferenceReader file(kFile);
  std::vector<Case> cases;
  // case <name> <op> <n_inputs> <n_outputs> <key=value...>
  for (Case c; file.next_case(c, 3); c = Case()) {
    c.op = c.words[0];
    const int64_t n_in = c.int_word(1), n_out = c.int_word(2);
    for (int64_t i = 0; i < n_in + n_out; ++i) (i < n_in ? c.inputs : c.outputs).push_back(file.next_tensor());
    cases.push_back(std::move(c));
  }
  return cases;
}

Scalar scalar_attr(const Case& c, const std::string& key) {
  const std::string& s = c.attr(key);
  if (s.find_first_of(".en") != std::string::npos) return Scalar(std::stod(s));
  return Scalar(static_cast<int64_t>(std::stoll(s)));
}
int64_t int_attr(const Case& c, const std::string& key, int64_t fallback = 0) {
  return c.has_attr(key) ? c.int_attr(key) : fallback;
}
std::vector<int64_t> dims_attr(const Case& c) {
  if (!c.has_attr("dims") || c.attr("dims") == "none") return {};
  return c.ints_attr("dims");
}

using Fn = std::function<std::vector<Tensor>(const Case&, const std::vector<Tensor>&)>;

std::map<std::string, Fn> ops() {
  std::map<std::string, Fn> m;
  auto unary = [&](const char* name, Tensor (*f)(const Tensor&)) {
    m[name] = [f](const Case&, const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; };
  };
  unary("neg", neg);
  unary("abs", abs);
  unary("exp", exp);
  unary("log", log);
  unary("log1p", log1p);
  unary("sqrt", sqrt);
  unary("rsqrt", rsqrt);
  unary("sin", sin);
  unary("cos", cos);
  unary("tanh", tanh);
  unary("sigmoid", sigmoid);
  unary("relu", relu);
  unary("silu", silu);
  m["gelu"] = [](const Case&, const std::vector<Tensor>& x) { return std::vector<Tensor>{gelu(x[0])}; };
  m["gelu_tanh"] = [](const Case&, const std::vector<Tensor>& x) { return std::vector<Tensor>{gelu(x[0], "tanh")}; };
  m["leaky_relu"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{leaky_relu(x[0], c.double_attr("negative_slope"))};
  };
  m["elu"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{elu(x[0], c.double_attr("alpha"), c.double_attr("scale"), c.double_attr("input_scale"))};
  };
  m["softplus"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{softplus(x[0], c.double_attr("beta"), c.double_attr("threshold"))};
  };
  m["pow_scalar"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{pow(x[0], scalar_attr(c, "exponent"))};
  };
  auto binary = [&](const char* name, Tensor (*f)(const Tensor&, const Tensor&)) {
    m[name] = [f](const Case&, const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0], x[1])}; };
  };
  binary("mul", mul);
  binary("div", div);
  binary("maximum", maximum);
  binary("minimum", minimum);
  binary("eq", eq);
  binary("ne", ne);
  binary("lt", lt);
  binary("le", le);
  binary("gt", gt);
  binary("ge", ge);
  m["pow"] = [](const Case&, const std::vector<Tensor>& x) { return std::vector<Tensor>{pow(x[0], x[1])}; };
  m["add"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{add(x[0], x[1], c.has_attr("alpha") ? scalar_attr(c, "alpha") : Scalar(1))};
  };
  m["sub"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{sub(x[0], x[1], c.has_attr("alpha") ? scalar_attr(c, "alpha") : Scalar(1))};
  };
  m["where"] = [](const Case&, const std::vector<Tensor>& x) { return std::vector<Tensor>{where(x[0], x[1], x[2])}; };
  m["clamp"] = [](const Case& c, const std::vector<Tensor>& x) {
    std::optional<Scalar> lo, hi;
    if (c.has_attr("min")) lo = scalar_attr(c, "min");
    if (c.has_attr("max")) hi = scalar_attr(c, "max");
    return std::vector<Tensor>{clamp(x[0], lo, hi)};
  };
  m["masked_fill"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{masked_fill(x[0], x[1], scalar_attr(c, "value"))};
  };
  m["sum"] = [](const Case& c, const std::vector<Tensor>& x) {
    auto dims = dims_attr(c);
    return std::vector<Tensor>{dims.empty() ? x[0].sum() : x[0].sum(dims, int_attr(c, "keepdim"))};
  };
  m["mean"] = [](const Case& c, const std::vector<Tensor>& x) {
    auto dims = dims_attr(c);
    return std::vector<Tensor>{dims.empty() ? x[0].mean() : x[0].mean(dims, int_attr(c, "keepdim"))};
  };
  m["amax"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].amax(dims_attr(c), int_attr(c, "keepdim"))};
  };
  m["amin"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].amin(dims_attr(c), int_attr(c, "keepdim"))};
  };
  m["var"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].var(dims_attr(c), 1, int_attr(c, "keepdim"))};
  };
  m["std"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].std(dims_attr(c), 1, int_attr(c, "keepdim"))};
  };
  m["logsumexp"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].logsumexp(dims_attr(c), int_attr(c, "keepdim"))};
  };
  m["norm"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].norm(scalar_attr(c, "p"), dims_attr(c), int_attr(c, "keepdim"))};
  };
  m["max_dim"] = [](const Case& c, const std::vector<Tensor>& x) {
    auto [v, i] = x[0].max(int_attr(c, "dim"), int_attr(c, "keepdim"));
    return std::vector<Tensor>{v, i};
  };
  m["min_dim"] = [](const Case& c, const std::vector<Tensor>& x) {
    auto [v, i] = x[0].min(int_attr(c, "dim"), int_attr(c, "keepdim"));
    return std::vector<Tensor>{v, i};
  };
  m["argmax"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].argmax(int_attr(c, "dim"))};
  };
  m["argmin"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].argmin(int_attr(c, "dim"))};
  };
  m["softmax"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].softmax(int_attr(c, "dim"))};
  };
  m["log_softmax"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].log_softmax(int_attr(c, "dim"))};
  };
  m["prod"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{x[0].prod(int_attr(c, "dim"))};
  };
  m["matmul"] = [](const Case&, const std::vector<Tensor>& x) { return std::vector<Tensor>{matmul(x[0], x[1])}; };
  m["cat"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{cat(x, int_attr(c, "dim"))};
  };
  m["stack"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{stack(x, int_attr(c, "dim"))};
  };
  m["gather"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{gather(x[0], int_attr(c, "dim"), x[1])};
  };
  m["scatter_add"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{scatter_add(x[0], int_attr(c, "dim"), x[1], x[2])};
  };
  m["index_select"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{index_select(x[0], int_attr(c, "dim"), x[1])};
  };
  m["one_hot"] = [](const Case& c, const std::vector<Tensor>& x) {
    return std::vector<Tensor>{one_hot(x[0], int_attr(c, "num_classes", -1))};
  };
  return m;
}

// Reductions and softmax over float16/bfloat16 round intermediate results
// differently from torch's CPU kernels; allow a few ulps more.
test::Tolerance tolerance_for(const Case& c, Dtype dtype) {
  test::Tolerance t = test::tolerance(dtype);
  if (dtype == kFloat32) return {2e-5, 2e-6};
  if (is_reduced_float(dtype) && c.op != "neg" && c.op != "abs") return {t.rtol * 2, t.atol * 4};
  return t;
}

}  // namespace

DEVICE_TEST_CASE("ops match PyTorch's reference values", "[reference]") {
  static const std::vector<Case> cases = load_cases();
  static const std::map<std::string, Fn> table = ops();
  REQUIRE(cases.size() > 400);
  for (const Case& c : cases) {
    INFO("case " << c.name << " (op " << c.op << ") on " << device.str());
    auto it = table.find(c.op);
    REQUIRE(it != table.end());
    for (bool strided : {false, true}) {
      INFO((strided ? "non-contiguous inputs" : "contiguous inputs"));
      std::vector<Tensor> inputs;
      for (const Tensor& t : c.inputs) inputs.push_back(strided ? non_contiguous(t.to(device)) : t.to(device));
      std::vector<Tensor> got = it->second(c, inputs);
      REQUIRE(got.size() == c.outputs.size());
      for (size_t k = 0; k < got.size(); ++k) {
        INFO("output " << k);
        CHECK(got[k].device() == device);
        REQUIRE(got[k].dtype() == c.outputs[k].dtype());
        test::check_close(got[k], c.outputs[k], tolerance_for(c, got[k].dtype()));
      }
    }
  }
}

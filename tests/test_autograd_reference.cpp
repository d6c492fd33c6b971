// Checks Tandem's gradients of composite expressions (an MLP with a
// cross-entropy, a layer norm, attention, second derivatives, ...) against
// PyTorch's (tests/data/autograd_reference.txt, written by
// scripts/gen_autograd_reference.py). Each expression is written here once,
// as in the script; each case runs on every device, with contiguous and with
// non-contiguous leaves, and checks the output, the gradients that
// autograd::grad returns and those backward() accumulates into .grad().
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "helpers.h"
#include "reference_data.h"

using namespace tandem;

namespace {

using test::non_contiguous;

struct Case : test::ReferenceCase {
  std::vector<Tensor> inputs;
  std::vector<bool> requires_grad;  // one flag per input
  Tensor seed;                      // undefined when the output is a scalar
  Tensor output;
  std::vector<Tensor> grads;  // one per input with requires_grad
};

const std::string kFile = "autograd_reference.txt";

std::vector<Case> load_cases() {
  test::ReferenceReader file(kFile);
  std::vector<Case> cases;
  auto next_tensor = [&] { return file.next_tensor(); };
  // case <name> <n_inputs> requires_grad=... seed=...
  for (Case c; file.next_case(c, 1); c = Case()) {
    const int n_in = static_cast<int>(c.int_word(0));
    std::istringstream flags(c.attr("requires_grad"));
    for (std::string flag; std::getline(flags, flag, ',');) c.requires_grad.push_back(flag == "1");
    if (static_cast<int>(c.requires_grad.size()) != n_in)
      throw std::runtime_error(kFile + ": case " + c.name + " has a requires_grad flag count unlike " +
                               std::to_string(n_in) + " inputs");
    for (int i = 0; i < n_in; ++i) c.inputs.push_back(next_tensor());
    if (c.flag("seed")) c.seed = next_tensor();
    c.output = next_tensor();
    for (bool rg : c.requires_grad)
      if (rg) c.grads.push_back(next_tensor());
    cases.push_back(std::move(c));
  }
  return cases;
}

using Inputs = std::vector<Tensor>;
using Expr = std::function<Tensor(const Inputs&)>;

// An int64 index tensor on x's device.
Tensor ids(const Tensor& x, const std::vector<double>& values) {
  return test::make(values, {static_cast<int64_t>(values.size())}, kInt64, x.device());
}

// dy/dx of a scalar y, with history (create_graph), so that it can be
// differentiated again.
Tensor grad_with_graph(const Tensor& y, const Tensor& x) {
  return autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
}

// Each expression as scripts/gen_autograd_reference.py writes it in PyTorch.
std::map<std::string, Expr> expressions() {
  std::map<std::string, Expr> m;

  // ---- layers and losses
  m["mlp_gelu_cross_entropy"] = [](const Inputs& in) {
    // x: (N, C_in), w: (C_in, C), b: (C,), target: (N,) class ids
    const Tensor &x = in[0], &w = in[1], &b = in[2], &target = in[3];
    Tensor h = gelu(matmul(x, w) + b);
    Tensor logp = h.log_softmax(1);
    return -logp.gather(1, target.unsqueeze(1)).mean();
  };
  m["cross_entropy_logsumexp"] = [](const Inputs& in) {
    const Tensor &z = in[0], &target = in[1];
    return (z.logsumexp({1}) - z.gather(1, target.unsqueeze(1)).squeeze(1)).mean();
  };
  m["layer_norm"] = [](const Inputs& in) {
    // x: (B, T, C), normalised over C
    const Tensor &x = in[0], &w = in[1], &b = in[2];
    Tensor mu = x.mean({-1}, true);
    Tensor var = x.var({-1}, /*correction=*/0, true);
    return (x - mu) / sqrt(var + 1e-5) * w + b;
  };
  m["attention"] = [](const Inputs& in) {
    // q, k, v: (B, H, T, D)
    const Tensor &q = in[0], &k = in[1], &v = in[2];
    double d = static_cast<double>(q.size(-1));
    return matmul((matmul(q, k.transpose(-2, -1)) / std::sqrt(d)).softmax(-1), v);
  };
  m["attention_causal_f32"] = [](const Inputs& in) {
    // q, k, v: (B, T, D); mask: (T, T), true above the diagonal
    const Tensor &q = in[0], &k = in[1], &v = in[2], &mask = in[3];
    Tensor scores = bmm(q, k.transpose(1, 2)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
    return bmm(scores.masked_fill(mask, -std::numeric_limits<double>::infinity()).softmax(-1), v);
  };
  m["residual_block"] = [](const Inputs& in) {
    // x: (B, T, C); gamma: (1, 1, C) and c: (T, 1) broadcast against it
    const Tensor &x = in[0], &w = in[1], &b = in[2], &gamma = in[3], &c = in[4];
    return x + gamma * silu(matmul(x, w) + b) + c;
  };
  m["mlp_tanh_mse_f32"] = [](const Inputs& in) {
    const Tensor &x = in[0], &w1 = in[1], &b1 = in[2], &w2 = in[3], &b2 = in[4], &y = in[5];
    Tensor p = tanh(x.mm(w1) + b1).mm(w2) + b2;
    return (p - y).pow(2).mean();
  };
  m["huber_clamp_where_loss"] = [](const Inputs& in) {
    const Tensor &pred = in[0], &target = in[1];
    Tensor d = pred - target;
    Tensor a = d.abs();
    Tensor huber = where(a < 1, 0.5 * d * d, a - 0.5);
    Tensor clipped = clamp(pred, -0.5, 0.8);
    return huber.mean() + 0.1 * clipped.pow(2).sum() + maximum(pred, target).sum() * 0.01 +
           pred.clamp(0.25).sum() * 0.2;
  };
  m["regularizer_lse_norm_std"] = [](const Inputs& in) {
    const Tensor& w = in[0];
    return w.logsumexp({0, 1}) + 0.1 * w.norm(2) + 0.05 * w.norm(1, {1}).sum() + 0.5 * w.std({0}).sum() +
           w.var({1}).mean() + w.norm(3, {0}, true).sum();
  };
  m["l2_normalize_cosine"] = [](const Inputs& in) {
    const Tensor &a = in[0], &b = in[1];
    Tensor an = a / a.norm(2, {1}, true);
    Tensor bn = b / b.norm(2, {1}, true);
    return (an * bn).sum({1});
  };
  m["masked_softmax"] = [](const Inputs& in) {
    // mask true = left out; every row keeps at least one entry
    const Tensor &x = in[0], &mask = in[1];
    return x.masked_fill(mask, -1e9).softmax(-1) + where(mask, 0.0, x).sum({1}, true) * 0.1;
  };
  m["activations"] = [](const Inputs& in) {
    const Tensor& x = in[0];
    Tensor g = gelu(x, "tanh");
    return g * sigmoid(x) + silu(x) / (1 + x * x) + log1p(exp(x)) - erf(x) * relu(x);
  };

  // ---- reductions
  m["var_std_multi_dim"] = [](const Inputs& in) {
    const Tensor& x = in[0];
    return x.var({0, 2}, 1, true) * x.std({1}).unsqueeze(1) + x.mean({0, 1});
  };
  m["prod_max_amax"] = [](const Inputs& in) {
    // x: (3, 4, 5), values in [0.5, 1.5] without ties
    const Tensor& x = in[0];
    return x.prod(1).sum() + std::get<0>(x.max(2)).exp().sum() + x.amax({0, 2}).pow(2).sum() + x.max() +
           std::get<0>(x.min(0, true)).sum() * 0.5 + x.amin({1}).sum() * 0.25;
  };
  m["pow_erf_maximum"] = [](const Inputs& in) {
    // a: (3, 4) positive, b: (4,) broadcast
    const Tensor &a = in[0], &b = in[1];
    return pow(a, b) + erf(a * b) + maximum(a, b) - minimum(a, b) * 0.5 + a.pow(2.5) + a.rsqrt();
  };

  // ---- views, joins and indexing
  m["views_chain"] = [](const Inputs& in) {
    // x: (2, 3, 4), s: (2, 1, 1)
    const Tensor &x = in[0], &s = in[1];
    Tensor y = x.permute({2, 0, 1}).reshape({4, 6}).t();                  // (6, 4), not contiguous
    Tensor z = y.slice(0, 1, 6, 2).narrow(1, 1, 2);                       // (3, 2)
    Tensor u = z.unsqueeze(0).expand({2, 3, 2}) * s;                      // (2, 3, 2)
    Tensor w = x.contiguous().view({6, 4}).transpose(0, 1).select(1, 2);  // (4,)
    Tensor f = x.flatten(1).squeeze();                                    // (2, 12)
    return cat({u.reshape({2, 6}).sin(), f.slice(1, std::nullopt, std::nullopt, 2) * w.sum(),
                x.unsqueeze(2).select(3, 3).squeeze(2)},
               1);
  };
  m["cat_split_stack_chunk"] = [](const Inputs& in) {
    const Tensor &a = in[0], &b = in[1], &c = in[2];
    Tensor x = cat({a, b}, 1);  // (2, 8)
    std::vector<Tensor> p = x.split(IntArrayRef{3, 3, 2}, 1);
    std::vector<Tensor> q = x.chunk(2, 1);                                       // (2, 4) each
    std::vector<Tensor> r = x.split(3, 1);                                       // (2, 3), (2, 3), (2, 2)
    Tensor s = stack({p[0] * p[1], q[1].slice(1, 0, 3).exp(), r[1].tanh()}, 0);  // (3, 2, 3); x[:, 7] unused
    return cat({s.reshape({-1}), c.tanh(), stack({c, c * c}, 1).reshape({-1})}, 0);
  };
  m["embedding_lookup"] = [](const Inputs& in) {
    // table: (V, E); ids: (N,) with repeats; cols: (N, 2) with repeats
    const Tensor &table = in[0], &rows = in[1], &cols = in[2];
    Tensor e = table.index_select(0, rows);  // (N, E)
    Tensor g = e.gather(1, cols);            // (N, 2)
    return g.pow(2).sum({1}) + sigmoid(e).sum({1}) + table.index_select(1, ids(table, {3, 0, 3})).sum();
  };
  m["scatter_add_bag"] = [](const Inputs& in) {
    // base: (B, E), src: (N, E), bag: (N,) which row of base each src row joins
    const Tensor &base = in[0], &src = in[1], &bag = in[2];
    Tensor index = bag.unsqueeze(1).expand({src.size(0), src.size(1)});
    return scatter_add(base, 0, index, src).tanh();
  };
  m["matmul_forms"] = [](const Inputs& in) {
    // a: (2, 3, 4), b: (4, 5), c: (5,), d: (2, 5, 3), v: (4,)
    const Tensor &a = in[0], &b = in[1], &c = in[2], &d = in[3], &v = in[4];
    Tensor r1 = matmul(a, b);                  // (2, 3, 5)
    Tensor r2 = matmul(r1, c);                 // (2, 3)
    Tensor r3 = bmm(r1, d);                    // (2, 3, 3)
    Tensor r4 = a[0].mm(b);                    // (3, 5)
    Tensor r5 = matmul(v, a.transpose(1, 2));  // (2, 3)
    return r2.sum() + (r3 * r3).mean() + r4.tanh().sum() + (r5 * r2).sum();
  };
  m["dtype_roundtrip_f32"] = [](const Inputs& in) {
    // x: float32 (3, 4), w: float64 (4,); computed in float64, returned in float32
    const Tensor &x = in[0], &w = in[1];
    return (x.to(kFloat64) * w).tanh().sum({1}).to(kFloat32) * x.select(1, 0);
  };

  // ---- second derivatives: d/dx of (dy/dx . v), through autograd::grad(create_graph=true)
  m["second_order_elementwise"] = [](const Inputs& in) {
    const Tensor &x = in[0], &v = in[1];
    Tensor y = (x.sin() * x.exp() + 0.1 * x.pow(3) + x.tanh() + sigmoid(x) * x).sum();
    return (grad_with_graph(y, x) * v).sum();
  };
  m["second_order_softmax_matmul"] = [](const Inputs& in) {
    const Tensor &x = in[0], &w = in[1], &v = in[2];
    Tensor z = x.mm(w);
    Tensor y = (z.logsumexp({1}) + gelu(x).sum({1}) * 0.5 + z.softmax(1).select(1, 0)).sum();
    return (grad_with_graph(y, x) * v).sum();
  };
  m["second_order_norm_views"] = [](const Inputs& in) {
    // x: (3, 4)
    const Tensor &x = in[0], &v = in[1];
    Tensor t = x.t().reshape({2, 6});
    Tensor y =
        t.norm(2, {1}).sum() + t.var({1}).sum() + t.index_select(1, ids(x, {0, 5, 0})).pow(3).sum() + x.prod(1).sum();
    return (grad_with_graph(y, x) * v).sum();
  };

  // ---- the parameterised activations
  m["activations_with_params"] = [](const Inputs& in) {
    const Tensor& x = in[0];
    return leaky_relu(x, 0.2) * 1.5 + elu(x, 0.7, 1.5, 2.0) * x + softplus(x, 2.0, 3.0) * softplus(-x);
  };
  m["second_order_activations_with_params"] = [](const Inputs& in) {
    const Tensor &x = in[0], &v = in[1];
    Tensor y =
        (leaky_relu(x, 0.2) * x + elu(x, 0.7) * elu(x, 1.0, 1.5, 2.0) + softplus(x, 2.0, 3.0) * softplus(x)).sum();
    return (grad_with_graph(y, x) * v).sum();
  };
  return m;
}

// Relative and absolute tolerance. In float64 looser than one op's 1e-12:
// PyTorch and Tandem may order sums and evaluate exp/erf/tanh differently,
// and a composite expression compounds that (today they agree within 1e-13);
// a wrong rule is off by far more. float32 as one op (helpers.h).
test::Tolerance tolerance_for(Dtype dtype) {
  if (dtype == kFloat64) return {1e-10, 1e-12};
  return test::tolerance(dtype);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = load_cases();
  return c;
}

const std::map<std::string, Expr>& table() {
  static const std::map<std::string, Expr> m = expressions();
  return m;
}

// One case on one device: the output, then the gradients both ways.
void check_case(const Case& c, const Expr& expr, const Device& device, bool strided) {
  INFO("case " << c.name << " on " << device.str() << " with " << (strided ? "non-" : "") << "contiguous leaves");
  std::vector<Tensor> inputs, leaves;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor t = c.inputs[i].to(device);
    if (strided) t = non_contiguous(t);
    // A fresh leaf: .detach() so that the case's own tensor (which .to() may
    // return as is on the cpu) never gets a .grad().
    if (c.requires_grad[i]) {
      t = t.detach().requires_grad_();
      REQUIRE(t.is_leaf());
      leaves.push_back(t);
    }
    inputs.push_back(t);
  }
  Tensor out = expr(inputs);
  CHECK(out.device() == device);
  REQUIRE(out.dtype() == c.output.dtype());
  REQUIRE(out.requires_grad());
  test::check_close(out, c.output, tolerance_for(out.dtype()));

  std::vector<Tensor> seed;
  if (c.seed.defined()) seed.push_back(c.seed.to(device));
  // autograd::grad hands the gradients back; backward() then accumulates the
  // same ones into .grad() from the retained graph.
  std::vector<Tensor> got = autograd::grad({out}, leaves, seed, /*retain_graph=*/true);
  REQUIRE(got.size() == leaves.size());
  out.backward(seed.empty() ? Tensor() : seed[0]);
  for (size_t k = 0; k < leaves.size(); ++k) {
    INFO("gradient " << k << " of " << leaves.size());
    const Tensor& grad = leaves[k].grad();
    REQUIRE(grad.defined());
    REQUIRE(got[k].defined());
    CHECK(grad.device() == device);
    CHECK(got[k].device() == device);
    CHECK(grad.dtype() == leaves[k].dtype());
    CHECK(got[k].dtype() == leaves[k].dtype());
    CHECK_FALSE(got[k].requires_grad());
    test::check_close(got[k], c.grads[k], tolerance_for(leaves[k].dtype()));
    test::check_close(grad, c.grads[k], tolerance_for(leaves[k].dtype()));
  }
}

}  // namespace

TEST_CASE("every reference case has an expression and every expression a case", "[autograd][reference]") {
  REQUIRE(cases().size() >= 20);
  std::set<std::string> names;
  for (const Case& c : cases()) {
    INFO("case " << c.name);
    CHECK(names.insert(c.name).second);  // no duplicate
    CHECK(table().count(c.name) == 1);
    CHECK(c.output.is_floating_point());
    CHECK(c.seed.defined() == (c.output.dim() > 0));
    CHECK(c.grads.size() == static_cast<size_t>(std::count(c.requires_grad.begin(), c.requires_grad.end(), true)));
  }
  for (const auto& [name, fn] : table()) {
    INFO("expression " << name);
    CHECK(names.count(name) == 1);
  }
}

// Each case in its own section, so that one failing case does not hide the others.
DEVICE_TEST_CASE("composite expressions' gradients match PyTorch's", "[autograd][reference]") {
  for (const Case& c : cases()) {
    auto it = table().find(c.name);
    if (it == table().end()) continue;  // reported by the test above
    for (bool strided : {false, true}) {
      DYNAMIC_SECTION(c.name << (strided ? ", non-contiguous leaves" : ", contiguous leaves")) {
        check_case(c, it->second, device, strided);
      }
    }
  }
}

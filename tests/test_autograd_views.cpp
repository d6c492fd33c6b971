// Gradients of the view ops (gradcheck and gradgradcheck in float64, on every
// device), their node names, and in-place ops on views against PyTorch's
// semantics: CopySlices on the base, stale views regenerating their history
// (AsStridedBackward0), the leaf-view rule, and detach().
#include "helpers.h"

using namespace tandem;
using Catch::Contains;
using test::check_gradients;
using test::check_values;
using test::make;

namespace {

using Fn = autograd::GradcheckFn;

// A float64 leaf of random values that requires grad.
Tensor leaf(IntArrayRef shape, Device device) {
  return randn(shape, TensorOptions(kFloat64).device(device)).requires_grad_();
}

// A smooth function of a view, so that the first derivative depends on the
// input and gradgradcheck runs the view's rule on a gradient with history.
Tensor curve(const Tensor& v) { return v * v.sin(); }

// check_gradients of the view `view_fn` of the first input, as the view
// itself and through curve().
void check_view(const std::function<Tensor(const Tensor&)>& view_fn, const std::vector<Tensor>& inputs) {
  Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor v = view_fn(in[0]);
    return std::vector<Tensor>{v, curve(v)};
  };
  check_gradients(fn, inputs);
}

std::string grad_fn_name(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "(none)"; }

}  // namespace

// ---------------------------------------------------------------- gradients of each view op

DEVICE_TEST_CASE("view, reshape and flatten: gradients", "[autograd][views]") {
  Tensor x = leaf({2, 3, 4}, device);
  check_view([](const Tensor& t) { return t.view({6, 4}); }, {x});
  check_view([](const Tensor& t) { return t.view({-1}); }, {x});
  check_view([](const Tensor& t) { return t.reshape({4, -1, 2}); }, {x});
  check_view([](const Tensor& t) { return t.flatten(1, 2); }, {x});
  check_view([](const Tensor& t) { return t.flatten(-2, -1); }, {x});
  check_view([](const Tensor& t) { return t.flatten(); }, {x});
  // reshape of a non-contiguous view copies: Clone, then View.
  Tensor y = leaf({3, 4}, device);
  check_view([](const Tensor& t) { return t.t().reshape({12}); }, {y});
  check_view([](const Tensor& t) { return t.t().reshape({2, 6}); }, {y});
  Tensor s = leaf({}, device);
  check_view([](const Tensor& t) { return t.flatten(); }, {s});
  check_view([](const Tensor& t) { return t.reshape({1, 1}); }, {s});
}

DEVICE_TEST_CASE("squeeze and unsqueeze: gradients", "[autograd][views]") {
  Tensor x = leaf({2, 1, 3, 1}, device);
  check_view([](const Tensor& t) { return t.squeeze(); }, {x});
  check_view([](const Tensor& t) { return t.squeeze(-1); }, {x});
  check_view([](const Tensor& t) { return t.squeeze(1); }, {x});
  check_view([](const Tensor& t) { return t.squeeze(0); }, {x});  // size 2: unchanged
  check_view([](const Tensor& t) { return t.unsqueeze(0); }, {x});
  check_view([](const Tensor& t) { return t.unsqueeze(-1); }, {x});
  Tensor y = leaf({3, 4}, device);
  check_view([](const Tensor& t) { return t.t().unsqueeze(1); }, {y});
  check_view([](const Tensor& t) { return t.t().unsqueeze(-2).squeeze(); }, {y});
  Tensor s = leaf({}, device);
  check_view([](const Tensor& t) { return t.squeeze(); }, {s});
  check_view([](const Tensor& t) { return t.squeeze(0); }, {s});
  check_view([](const Tensor& t) { return t.unsqueeze(0); }, {s});
}

DEVICE_TEST_CASE("permute, transpose and t: gradients", "[autograd][views]") {
  Tensor x = leaf({2, 3, 4}, device);
  check_view([](const Tensor& t) { return t.permute({2, 0, 1}); }, {x});
  check_view([](const Tensor& t) { return t.permute({-1, 0, -2}); }, {x});
  check_view([](const Tensor& t) { return t.permute({1, 2, 0}).permute({2, 0, 1}); }, {x});
  check_view([](const Tensor& t) { return t.transpose(0, 2); }, {x});
  check_view([](const Tensor& t) { return t.transpose(-1, 0); }, {x});
  check_view([](const Tensor& t) { return t.transpose(1, 1); }, {x});
  Tensor m = leaf({3, 5}, device);
  check_view([](const Tensor& t) { return t.t(); }, {m});
  check_view([](const Tensor& t) { return t.slice(1, 1, 4).t(); }, {m});
  Tensor v = leaf({4}, device);
  check_view([](const Tensor& t) { return t.t(); }, {v});
  Tensor s = leaf({}, device);
  check_view([](const Tensor& t) { return t.t(); }, {s});
  check_view([](const Tensor& t) { return t.transpose(0, -1); }, {s});
}

DEVICE_TEST_CASE("expand and expand_as: gradients", "[autograd][views]") {
  Tensor x = leaf({3, 1}, device);
  check_view([](const Tensor& t) { return t.expand({3, 4}); }, {x});
  check_view([](const Tensor& t) { return t.expand({-1, 4}); }, {x});
  check_view([](const Tensor& t) { return t.expand({2, 3, 4}); }, {x});  // a new leading dim and a size-1 dim
  Tensor v = leaf({3}, device);
  check_view([](const Tensor& t) { return t.expand({2, 4, 3}); }, {v});  // new leading dims only
  Tensor s = leaf({}, device);
  check_view([](const Tensor& t) { return t.expand({2, 3}); }, {s});
  // expand_as against a tensor that requires grad: only self gets a gradient.
  Tensor like = leaf({2, 3, 4}, device);
  Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{curve(in[0].expand_as(in[1]))}; };
  check_gradients(fn, {x, like});
  // A broadcast used twice: the gradient sums over the copies.
  Tensor y = leaf({1, 4}, device);
  Fn twice = [](const std::vector<Tensor>& in) {
    Tensor e = in[0].expand({3, 4});
    return std::vector<Tensor>{e * e.t().t() + e.exp()};
  };
  check_gradients(twice, {y});
}

DEVICE_TEST_CASE("slice and narrow: gradients", "[autograd][views]") {
  Tensor x = leaf({4, 7}, device);
  check_view([](const Tensor& t) { return t.slice(1, 1, 6, 2); }, {x});  // step 2
  check_view([](const Tensor& t) { return t.slice(1, 0, 7, 3); }, {x});  // step 3
  check_view([](const Tensor& t) { return t.slice(0, -3); }, {x});
  check_view([](const Tensor& t) { return t.slice(-1, std::nullopt, -2); }, {x});
  check_view([](const Tensor& t) { return t.slice(0, 2, 2); }, {x});  // empty
  check_view([](const Tensor& t) { return t.narrow(1, 2, 3); }, {x});
  check_view([](const Tensor& t) { return t.narrow(-1, -4, 2); }, {x});
  check_view([](const Tensor& t) { return t.narrow(0, 1, 2).slice(1, 1, 7, 2); }, {x});
  // Of a non-contiguous leaf view.
  check_view([](const Tensor& t) { return t.t().slice(0, 1, 6, 2); }, {x});
}

DEVICE_TEST_CASE("select: gradients", "[autograd][views]") {
  Tensor x = leaf({3, 4, 2}, device);
  check_view([](const Tensor& t) { return t.select(0, 1); }, {x});
  check_view([](const Tensor& t) { return t.select(0, -1); }, {x});
  check_view([](const Tensor& t) { return t.select(-2, -3); }, {x});
  check_view([](const Tensor& t) { return t[2]; }, {x});
  check_view([](const Tensor& t) { return t.select(1, 2).select(0, 0); }, {x});  // down to 1-D, then 0-D below
  check_view([](const Tensor& t) { return t.select(2, 1).select(0, 2).select(0, 3); }, {x});
  check_view([](const Tensor& t) { return t.permute({2, 0, 1}).select(1, 1); }, {x});
}

DEVICE_TEST_CASE("split and chunk pieces used by different functions: gradients", "[autograd][views]") {
  Tensor x = leaf({6, 3}, device);
  Fn split_fn = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> p = in[0].split(2, 0);
    return std::vector<Tensor>{p[0].sin() + p[1].exp() * p[2]};
  };
  check_gradients(split_fn, {x});
  // Uneven sizes; one piece unused (its rows get zero gradient).
  Fn sizes_fn = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> p = in[0].split({1, 2, 3}, 0);
    return std::vector<Tensor>{p[0] * p[2].narrow(0, 1, 1), p[2].slice(0, 0, 3, 2).exp()};
  };
  check_gradients(sizes_fn, {x});
  Tensor y = leaf({4, 6}, device);
  Fn chunk_fn = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> c = in[0].chunk(3, 1);
    return std::vector<Tensor>{c[0] * c[1] - c[2].sin(), c[2].t()};
  };
  check_gradients(chunk_fn, {y});

  // Each piece's gradient lands in its own rows.
  Tensor z = test::leaf({0, 1, 2, 3, 4, 5}, {6}, device);
  std::vector<Tensor> p = z.chunk(3);
  Tensor out = p[0] * 2 + p[1] * 3 + p[2] * p[2];
  out.backward(ones_like(out));
  check_values(z.grad(), {2, 2, 3, 3, 8, 10});
}

DEVICE_TEST_CASE("chains of views of non-contiguous leaves: gradients", "[autograd][views]") {
  Tensor x = leaf({4, 5}, device);
  check_view(
      [](const Tensor& t) {
        return t.t().unsqueeze(0).expand({2, 5, 4}).narrow(2, 1, 2).permute({2, 0, 1}).reshape({-1});
      },
      {x});
  check_view([](const Tensor& t) { return t.slice(1, 0, 5, 2).t().select(1, -1).unsqueeze(1).expand({3, 4}); }, {x});
  check_view([](const Tensor& t) { return t.t().flatten().view({2, 10}).transpose(0, 1).squeeze(); }, {x});
  // Two leaves, views of both.
  Tensor y = leaf({5, 4}, device);
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor a = in[0].t().slice(0, 1, 5, 2);  // (2, 4)
    Tensor b = in[1].narrow(0, 3, 2);        // (2, 4)
    return std::vector<Tensor>{a * b, (a - b).select(1, 0)};
  };
  check_gradients(fn, {x, y});
}

// ---------------------------------------------------------------- nodes

DEVICE_TEST_CASE("view ops record one node each, named as PyTorch's", "[autograd][views]") {
  Tensor x = leaf({2, 3, 1}, device);
  CHECK(grad_fn_name(x.view({6})) == "ViewBackward0");
  CHECK(grad_fn_name(x.reshape({3, 2})) == "ViewBackward0");
  CHECK(grad_fn_name(x.flatten()) == "ViewBackward0");
  CHECK(grad_fn_name(x.squeeze()) == "SqueezeBackward0");
  CHECK(grad_fn_name(x.squeeze(2)) == "SqueezeBackward1");
  CHECK(grad_fn_name(x.unsqueeze(0)) == "UnsqueezeBackward0");
  CHECK(grad_fn_name(x.permute({2, 0, 1})) == "PermuteBackward0");
  CHECK(grad_fn_name(x.transpose(0, 1)) == "TransposeBackward0");
  CHECK(grad_fn_name(x.squeeze().t()) == "TBackward0");
  CHECK(grad_fn_name(x.expand({4, 2, 3, 5})) == "ExpandBackward0");
  CHECK(grad_fn_name(x.expand_as(zeros({2, 3, 2}))) == "ExpandBackward0");
  CHECK(grad_fn_name(x.slice(1, 0, 3, 2)) == "SliceBackward0");
  CHECK(grad_fn_name(x.narrow(1, 1, 2)) == "SliceBackward0");
  CHECK(grad_fn_name(x.select(1, -1)) == "SelectBackward0");
  for (const Tensor& p : x.split(1, 1)) CHECK(grad_fn_name(p) == "SliceBackward0");
  for (const Tensor& p : x.chunk(2, 0)) CHECK(grad_fn_name(p) == "SliceBackward0");
  // reshape that has to copy: a View of a Clone.
  Tensor r = x.transpose(0, 1).reshape({6});
  REQUIRE(grad_fn_name(r) == "ViewBackward0");
  REQUIRE(r.grad_fn()->next_edges.size() == 1);
  CHECK(std::string(r.grad_fn()->next_edges[0].fn->name()) == "CloneBackward0");
  // The view's node leads to the input's: here the leaf's accumulator.
  Tensor s = x.select(0, 1);
  CHECK(std::string(s.grad_fn()->next_edges[0].fn->name()) == "AccumulateGrad");
  CHECK(s.grad_fn()->inputs[0].sizes == Shape{2, 3, 1});
  // Views share storage and stay views of the leaf.
  CHECK(s.shares_storage(x));
  CHECK(s.requires_grad());
  CHECK_FALSE(s.is_leaf());
}

DEVICE_TEST_CASE("views record nothing without grad", "[autograd][views]") {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64, device);
  for (const Tensor& v : {a.t(), a.view({6}), a.select(0, 1), a.expand({2, 2, 3}), a.unsqueeze(0)}) {
    CHECK_FALSE(v.requires_grad());
    CHECK(v.grad_fn() == nullptr);
  }
  Tensor x = leaf({2, 3}, device);
  {
    NoGradGuard no_grad;
    Tensor v = x.t().narrow(0, 1, 2);
    CHECK_FALSE(v.requires_grad());
    CHECK(v.grad_fn() == nullptr);
  }
  // Integer tensors never require grad; their views record nothing.
  Tensor i = make({1, 2, 3, 4}, {2, 2}, kInt64, device);
  CHECK(i.t().grad_fn() == nullptr);
}

DEVICE_TEST_CASE("a rule of a view gives the gradient in the input's layout", "[autograd][views]") {
  // Hand-computed: y = x.t().slice(0, 1, 3) * w, so dy/dx is w placed back
  // where the slice took it from, transposed.
  Tensor x = test::leaf({0, 1, 2, 3, 4, 5}, {2, 3}, device);
  Tensor w = make({10, 20, 30, 40}, {2, 2}, kFloat64, device);
  Tensor y = x.t().slice(0, 1, 3) * w;  // rows 1..2 of x.t(): (2, 2)
  y.backward(ones_like(y));
  check_values(x.grad(), {0, 10, 30, 0, 20, 40});
  // expand sums back; select scatters into zeros.
  Tensor z = test::leaf({1, 2}, {2, 1}, device);
  Tensor e = z.expand({2, 3}) * make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64, device);
  e.backward(ones_like(e));
  check_values(z.grad(), {6, 15});
  Tensor s = test::leaf({1, 2, 3, 4, 5, 6}, {3, 2}, device);
  Tensor r = s.select(0, -1) * 7;
  r.backward(ones_like(r));
  check_values(s.grad(), {0, 0, 0, 0, 7, 7});
}

// ---------------------------------------------------------------- in-place ops on views

DEVICE_TEST_CASE("in-place op on a view: CopySlices on the base", "[autograd][views][inplace]") {
  // PyTorch: x = ones(3, 2, requires_grad=True); y = x * 2; y[1].mul_(3);
  // y.sum().backward() -> x.grad = [[2, 2], [6, 6], [2, 2]].
  Tensor x = test::leaf({1, 2, 3, 4, 5, 6}, {3, 2}, device);
  Tensor y = x * 2;
  Tensor row = y.select(0, 1);
  row.mul_(3);
  CHECK(grad_fn_name(y) == "CopySlices");
  CHECK(grad_fn_name(row) == "AsStridedBackward0");
  REQUIRE(y.grad_fn()->next_edges.size() == 2);
  CHECK(std::string(y.grad_fn()->next_edges[0].fn->name()) == "MulBackward0");
  CHECK(std::string(y.grad_fn()->next_edges[1].fn->name()) == "MulBackward0");
  check_values(y, {2, 4, 18, 24, 10, 12});
  y.backward(ones_like(y));
  check_values(x.grad(), {2, 2, 6, 6, 2, 2});
}

DEVICE_TEST_CASE("in-place ops on views: gradients", "[autograd][views][inplace]") {
  Tensor x = leaf({3, 4}, device);
  Tensor w = leaf({4}, device);
  // The op's node gets the view's part of the gradient, the old base the rest.
  Fn mul_row = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 1.5;
    y.select(0, 1).mul_(in[1]);
    return std::vector<Tensor>{y, curve(y)};
  };
  check_gradients(mul_row, {x, w});
  // The same story with mul_ by a number and add_.
  Fn scale_row = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 1.5;
    y.select(0, 1).mul_(2.5).add_(in[1].sin());
    return std::vector<Tensor>{y, curve(y)};
  };
  check_gradients(scale_row, {x, w});
  // A strided, non-contiguous view; two in-place ops on different views.
  Tensor c = leaf({3, 2}, device);
  Fn two = [](const std::vector<Tensor>& in) {
    Tensor y = in[0].sin() * 2;               // sin keeps its input, not y
    y.t().slice(0, 1, 4, 2).add_(in[1].t());  // columns 1 and 3 of y
    y.narrow(1, 0, 1).mul_(-2).add_(in[0].narrow(1, 3, 1) * in[0].narrow(1, 2, 1));
    return std::vector<Tensor>{y * y};
  };
  check_gradients(two, {x, c});
  // The base read after an in-place op on a view of a view.
  Fn nested = [](const std::vector<Tensor>& in) {
    Tensor y = in[0].sin();
    Tensor v = y.narrow(0, 1, 2);
    v.select(1, 2).copy_(in[1].narrow(0, 0, 2) * 3);
    return std::vector<Tensor>{y, v * v};
  };
  check_gradients(nested, {x, w});
  // fill_ through a view: the filled elements get no gradient.
  Fn filled = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * in[0];
    y.select(1, 0).fill_(2);
    return std::vector<Tensor>{y.exp()};
  };
  check_gradients(filled, {x});
}

DEVICE_TEST_CASE("copy_ into a view of a tensor without grad", "[autograd][views][inplace]") {
  // PyTorch: buf = zeros(4, 3); buf[0:2].copy_(x) -> buf.requires_grad;
  // buf.sum().backward() -> x.grad = ones.
  Tensor x = test::leaf({1, 2, 3, 4, 5, 6}, {2, 3}, device);
  Tensor buf = zeros({4, 3}, TensorOptions(kFloat64).device(device));
  CHECK_FALSE(buf.requires_grad());
  buf.narrow(0, 0, 2).copy_(x);
  CHECK(buf.requires_grad());
  CHECK(grad_fn_name(buf) == "CopySlices");
  check_values(buf, {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0});
  buf.backward(ones_like(buf));
  check_values(x.grad(), {1, 1, 1, 1, 1, 1});

  // Differentiable end to end, into a transposed slot, with the base used.
  Tensor a = leaf({3, 2}, device);
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor b = zeros({4, 3}, TensorOptions(kFloat64).device(in[0].device()));
    b.slice(0, 1, 4, 2).t().copy_(in[0].sin());
    return std::vector<Tensor>{b * b};
  };
  check_gradients(fn, {a});
}

DEVICE_TEST_CASE("a view taken before an in-place op on its base", "[autograd][views][inplace]") {
  // PyTorch: y = x * 1; v = y[0]; y.mul_(2); v.sum().backward() ->
  // x.grad row 0 is 2, the others 0; v.grad_fn is AsStridedBackward0.
  Tensor x = test::leaf({1, 2, 3, 4, 5, 6}, {3, 2}, device);
  Tensor y = x * 1;
  Tensor v = y.select(0, 0);
  CHECK(grad_fn_name(v) == "SelectBackward0");
  y.mul_(2);
  CHECK(grad_fn_name(v) == "AsStridedBackward0");
  check_values(v, {2, 4});
  v.backward(ones_like(v));
  check_values(x.grad(), {2, 2, 0, 0, 0, 0});

  // The stale view used in a function: gradcheck through AsStrided.
  Tensor z = leaf({3, 4}, device);
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * in[0];
    Tensor t = y.t().slice(0, 1, 4, 2);  // (2, 3), strided
    y.narrow(0, 1, 1).mul_(0.5).add_(in[0].narrow(0, 2, 1).sin());
    return std::vector<Tensor>{t, curve(t)};
  };
  check_gradients(fn, {z});
}

DEVICE_TEST_CASE("a stale expanded view sums its repeated elements", "[autograd][views][inplace]") {
  // PyTorch: y = x * 1 (x: (3, 1)); e = y.expand(3, 4); y.mul_(2);
  // (e * w).sum().backward() -> x.grad = 2 * w.sum(1).
  Tensor x = test::leaf({1, 2, 3}, {3, 1}, device);
  Tensor w = make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}, kFloat64, device);
  Tensor y = x * 1;
  Tensor e = y.expand({3, 4});
  y.mul_(2);
  CHECK(grad_fn_name(e) == "AsStridedBackward0");
  Tensor out = e * w;
  out.backward(ones_like(out));
  check_values(x.grad(), {20, 52, 84});

  Tensor z = leaf({3, 1}, device);
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 1;
    Tensor e = y.expand({2, 3, 4});
    y.mul_(3).add_(in[0].exp());
    return std::vector<Tensor>{e, curve(e)};
  };
  check_gradients(fn, {z});
}

DEVICE_TEST_CASE("in-place op on a view of a strided base", "[autograd][views][inplace]") {
  // The base is a detached alias of a strided view (offset 1, strides (6, 2):
  // gaps between its elements), so the gradient is laid out over a buffer
  // larger than the base.
  Tensor x = leaf({2, 3}, device);
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor storage = zeros({4, 6}, TensorOptions(kFloat64).device(in[0].device()));
    Tensor b = storage.slice(1, 1, 6, 2).detach();  // (4, 3), its own base
    Tensor before = b.t().narrow(1, 1, 2);          // (3, 2), taken before the write: goes stale
    b.narrow(0, 1, 2).copy_(in[0].exp());
    b.select(0, 2).mul_(3).add_(in[0].select(0, 0).sin());
    return std::vector<Tensor>{b * b, curve(before)};
  };
  check_gradients(fn, {x});
}

DEVICE_TEST_CASE("in-place op on a view of a leaf that requires grad", "[autograd][views][inplace]") {
  Tensor x = test::leaf({1, 2, 3, 4}, {2, 2}, device);
  REQUIRE_THROWS_WITH(x.select(0, 0).mul_(2),
                      Contains("a view of a leaf tensor that requires grad is being used in an in-place operation"));
  REQUIRE_THROWS_WITH(x.t().narrow(0, 1, 1).copy_(zeros({1, 2}, TensorOptions(kFloat64).device(device))),
                      Contains("a view of a leaf tensor that requires grad is being used in an in-place operation"));
  check_values(x, {1, 2, 3, 4});  // nothing was written
  {
    NoGradGuard no_grad;
    x.select(0, 0).mul_(2);  // as an optimizer does
  }
  check_values(x, {2, 4, 3, 4});
  CHECK(x.is_leaf());
  CHECK(x.requires_grad());
  Tensor y = x * x;
  y.backward(ones_like(y));
  check_values(x.grad(), {4, 8, 6, 8});
}

DEVICE_TEST_CASE("detach shares storage and drops history", "[autograd][views][inplace]") {
  Tensor x = test::leaf({0.5, 1, 1.5, 2}, {2, 2}, device);
  Tensor y = x.exp();
  Tensor d = y.detach();
  CHECK(d.shares_storage(y));
  CHECK_FALSE(d.requires_grad());
  CHECK(d.grad_fn() == nullptr);
  CHECK_FALSE(d.t().requires_grad());
  CHECK_FALSE(x.detach().requires_grad());
  // exp saved its output; changing it through the detached alias makes the
  // backward that needs it fail.
  d.select(0, 0).mul_(2);
  CHECK_FALSE(d.requires_grad());
  REQUIRE_THROWS_WITH(y.backward(ones_like(y)), Contains("modified by an inplace operation"));
  REQUIRE_THROWS_WITH(y.backward(ones_like(y)), Contains("ExpBackward0"));
  // A view op does not save its input: changing it is harmless.
  Tensor z = x.t() * 3;
  x.detach().mul_(10);
  z.backward(ones_like(z));
  check_values(x.grad(), {3, 3, 3, 3});
}

DEVICE_TEST_CASE("CopySlices on a base whose elements share memory is not implemented", "[autograd][views][inplace]") {
  Tensor x = make({1, 2, 3}, {1, 3}, kFloat64, device);
  Tensor b = x.expand({2, 3}).detach();  // its own base, stride 0 on dim 0
  Tensor w = leaf({3}, device);
  b.select(0, 0).mul_(w);  // rows 0 and 1 of b are the same memory
  CHECK(b.requires_grad());
  REQUIRE_THROWS_WITH(b.backward(ones_like(b)), Contains("CopySlices: the base of a view changed in place has "
                                                         "elements that share memory"));
  REQUIRE_THROWS_WITH(b.backward(ones_like(b)), Contains("not implemented"));
}

// Ops that keep self's old value for their rule (mul_, div_ by a tensor
// that requires grad; log_), on views: the kept value must carry its history,
// or the second derivative through it is lost.
DEVICE_TEST_CASE("double backward through in-place ops that keep self's old value, on views",
                 "[autograd][views][inplace]") {
  Tensor x = leaf({3, 4}, device);
  Tensor w = leaf({4}, device);
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 1.5;
    y.select(0, 1).mul_(in[1]);
    y.narrow(0, 2, 1).div_(in[1].exp());
    Tensor row = y.select(0, 0);
    row.mul_(row.clone()).add_(1).log_();  // log(1 + (1.5 x)^2)
    return std::vector<Tensor>{y};
  };
  check_gradients(fn, {x, w});
}

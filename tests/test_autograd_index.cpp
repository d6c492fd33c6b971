// Gradients of the joins (cat, stack), the indexing ops (gather, scatter_add,
// scatter_add_, index_select) and the matrix products (mm, bmm, matmul in
// every rank case): gradcheck and gradgradcheck in float64 on every device,
// with repeated indices, inputs that need no gradient, mixed dtypes,
// broadcast batch dims and transposed leaves; one mm gradient by hand.
#include <functional>

#include "helpers.h"
#include "tensor/core/shape.h"

using namespace tandem;
using test::check_gradients;
using test::check_values;
using test::make;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// n distinct, non-zero, unevenly spaced values (no symmetry to hide a
// transposed or misplaced gradient).
std::vector<double> values(int64_t n, int salt = 0) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(0.37 * static_cast<double>((i * 7 + salt * 5) % 11) - 1.71 + 0.013 * i);
  return v;
}

// A float64 leaf of the given shape on device.
Tensor leaf(IntArrayRef shape, Device device, int salt = 0, bool requires_grad = true) {
  Tensor t = make(values(shape_numel(shape), salt), shape, kFloat64, device);
  if (requires_grad) t.requires_grad_();
  return t;
}

Tensor index(const std::vector<double>& v, IntArrayRef shape, Device device, Dtype dt = kInt64) {
  return make(v, shape, dt, device);
}

// Whether out's node leads straight to its inputs' accumulators: the copies
// and views the op makes inside recorded nothing (out's inputs are leaves).
bool records_one_node(const Tensor& out) {
  for (const autograd::Edge& e : out.grad_fn()->next_edges)
    if (e.valid() && e.fn->op != autograd::GradOp::AccumulateGrad) return false;
  return true;
}

}  // namespace

// ---------------------------------------------------------------- cat, stack
DEVICE_TEST_CASE("cat: gradients along every dim, one input without grad", "[autograd][cat]") {
  for (int64_t dim : {0, 1, -1}) {
    INFO("dim " << dim);
    // (2, 3, 4) joined with sizes 2, 1, 3 along dim.
    auto shape = [&](int64_t k) {
      Shape s = {2, 3, 4};
      s[static_cast<size_t>(dim < 0 ? dim + 3 : dim)] = k;
      return s;
    };
    Tensor a = leaf(shape(2), device, 1);
    Tensor b = leaf(shape(1), device, 2, /*requires_grad=*/false);
    Tensor c = leaf(shape(3), device, 3);
    Fn fn = [&](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[2]}, dim); };
    check_gradients(fn, {a, b, c});

    // b gets nothing; a and c get their slices of the seed.
    Tensor out = fn({a, b, c});
    REQUIRE(out.grad_fn() != nullptr);
    CHECK(std::string(out.grad_fn()->name()) == "CatBackward0");
    CHECK(records_one_node(out));
    Tensor seed = make(values(out.numel(), 4), out.sizes(), kFloat64, device);
    out.backward(seed);
    CHECK_FALSE(b.grad().defined());
    test::check_close(a.grad(), seed.narrow(dim, 0, 2));
    test::check_close(c.grad(), seed.narrow(dim, 3, 3));
  }
}

DEVICE_TEST_CASE("cat: gradients of transposed leaves", "[autograd][cat]") {
  Tensor a = leaf({3, 2}, device, 1), b = leaf({3, 4}, device, 2);
  check_gradients([](const std::vector<Tensor>& in) { return cat({in[0].t(), in[1].t()}, 0); }, {a, b});
}

DEVICE_TEST_CASE("cat: mixed dtypes get gradients in their own dtype", "[autograd][cat]") {
  Tensor a = test::leaf({1.5, -2.0, 0.25, 3.0}, {2, 2}, device, kFloat32);
  Tensor b = test::leaf({0.5, -1.0}, {2, 1}, device);
  Tensor out = cat({a, b}, 1);
  CHECK(out.dtype() == kFloat64);
  CHECK(out.sizes().vec() == Shape{2, 3});
  out.backward(make({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64, device));
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  CHECK(a.grad().dtype() == kFloat32);
  CHECK(b.grad().dtype() == kFloat64);
  CHECK(a.grad().device() == device);
  check_values(a.grad(), {1, 2, 4, 5});
  check_values(b.grad(), {3, 6});

  // gradcheck through the float64 input with the float32 one fixed.
  Tensor c = make({1.5, -2.0, 0.25, 3.0}, {2, 2}, kFloat32, device);
  check_gradients([&](const std::vector<Tensor>& in) { return cat({c, in[0]}, 1); }, {leaf({2, 3}, device)});
}

DEVICE_TEST_CASE("cat: skipped 1-D empty inputs get an empty gradient", "[autograd][cat]") {
  // PyTorch's legacy rule: a [0] tensor joins any cat, and its gradient is an empty [0].
  Tensor e = test::leaf({}, {0}, device);
  Tensor a = leaf({2, 2}, device, 1), b = leaf({2, 3}, device, 2);
  Fn fn = [](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[2]}, 1); };
  check_gradients(fn, {a, e, b});
  Tensor out = fn({a, e, b});
  out.backward(make(values(10, 3), {2, 5}, kFloat64, device));
  REQUIRE(e.grad().defined());
  CHECK(e.grad().sizes().vec() == Shape{0});
  test::check_close(b.grad(), make(values(10, 3), {2, 5}, kFloat64, device).narrow(1, 2, 3));

  // Only empty inputs: the result is an empty [0] and so is each gradient.
  Tensor f = test::leaf({}, {0}, device);
  Tensor empty = cat({e, f}, 0);
  CHECK(empty.sizes().vec() == Shape{0});
  empty.backward(make({}, {0}, kFloat64, device));
  REQUIRE(f.grad().defined());
  CHECK(f.grad().sizes().vec() == Shape{0});
}

DEVICE_TEST_CASE("stack: gradients at dims 0 and -1", "[autograd][stack]") {
  for (int64_t dim : {0, -1, 1}) {
    INFO("dim " << dim);
    Tensor a = leaf({2, 3}, device, 1), b = leaf({2, 3}, device, 2, false), c = leaf({2, 3}, device, 3);
    Fn fn = [&](const std::vector<Tensor>& in) { return stack({in[0], in[1], in[2]}, dim); };
    check_gradients(fn, {a, b, c});
    Tensor out = fn({a, b, c});
    CHECK(std::string(out.grad_fn()->name()) == "StackBackward0");
    CHECK(records_one_node(out));
    Tensor seed = make(values(out.numel(), 5), out.sizes(), kFloat64, device);
    out.backward(seed);
    CHECK_FALSE(b.grad().defined());
    test::check_close(a.grad(), seed.select(dim, 0));
    test::check_close(c.grad(), seed.select(dim, 2));
  }
  // Transposed leaves.
  Tensor a = leaf({3, 2}, device, 1), b = leaf({3, 2}, device, 2);
  check_gradients([](const std::vector<Tensor>& in) { return stack({in[0].t(), in[1].t()}, 1); }, {a, b});
}

// ---------------------------------------------------------------- gather, scatter_add, index_select
DEVICE_TEST_CASE("gather: gradients with repeated indices", "[autograd][gather]") {
  Tensor t = leaf({3, 4}, device, 1);
  // Along dim 1, rows pick 0 twice, 3 three times, ...; index smaller than t in dim 0.
  Tensor i1 = index({0, 0, 3, 3, 3, 1, 2, 2, 0, 1}, {2, 5}, device);
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].gather(1, i1); }, {t});
  Tensor i0 = index({2, 2, 0, 1, 2, 2, 2, 1}, {2, 4}, device);
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].gather(-2, i0); }, {t});
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].t().gather(0, i1.t()); }, {t});

  // By hand: t (1-D), picks 1, 1, 0 -> grad [g2, g0 + g1, 0].
  Tensor v = test::leaf({1, 2, 3}, {3}, device);
  Tensor out = v.gather(0, index({1, 1, 0}, {3}, device));
  CHECK(std::string(out.grad_fn()->name()) == "GatherBackward0");
  out.backward(make({10, 20, 30}, {3}, kFloat64, device));
  check_values(v.grad(), {30, 30, 0});

  // 0-dim t and index.
  Tensor s = test::leaf({2.5}, {}, device);
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].gather(0, index({0}, {}, device)); }, {s});
}

DEVICE_TEST_CASE("scatter_add: gradients of self and src with repeated indices", "[autograd][scatter_add]") {
  Tensor t = leaf({3, 4}, device, 1), src = leaf({2, 5}, device, 2);
  // index (2, 4): smaller than src in dim 1, so src's last column gets zeros.
  Tensor i1 = index({0, 0, 3, 3, 1, 1, 1, 2}, {2, 4}, device);
  Fn along1 = [&](const std::vector<Tensor>& in) { return in[0].scatter_add(1, i1, in[1]); };
  check_gradients(along1, {t, src});
  Tensor i0 = index({2, 2, 0, 2, 2, 1, 2, 0}, {2, 4}, device);
  check_gradients([&](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, i0, in[1]); }, {t, src});
  // Only one of them requiring grad.
  check_gradients(along1, {t, leaf({2, 5}, device, 2, false)});
  check_gradients(along1, {leaf({3, 4}, device, 1, false), src});

  // By hand: t gets grad, src gets grad.gather(1, index), zeros beyond index.
  Tensor out = along1({t, src});
  CHECK(std::string(out.grad_fn()->name()) == "ScatterAddBackward0");
  Tensor seed = make(values(12, 3), {3, 4}, kFloat64, device);
  out.backward(seed);
  test::check_close(t.grad(), seed);
  std::vector<double> s = values(12, 3), expected;
  const int picks[2][4] = {{0, 0, 3, 3}, {1, 1, 1, 2}};
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 4; ++c) expected.push_back(s[static_cast<size_t>(r * 4 + picks[r][c])]);
    expected.push_back(0);
  }
  check_values(src.grad(), expected);

  // The index is only saved when src needs a gradient.
  Tensor t_only = t.scatter_add(1, i1, leaf({2, 5}, device, 2, false));
  CHECK(t_only.grad_fn()->saved.empty());
}

DEVICE_TEST_CASE("scatter_add_: in place on a non-leaf", "[autograd][scatter_add]") {
  Tensor t = leaf({3, 4}, device, 1), src = leaf({2, 4}, device, 2);
  Tensor i1 = index({0, 0, 3, 3, 1, 1, 1, 2}, {2, 4}, device);
  Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 2.0;
    y.scatter_add_(1, i1, in[1]);
    return y;
  };
  check_gradients(fn, {t, src});
  Tensor y = fn({t, src});
  CHECK(std::string(y.grad_fn()->name()) == "ScatterAddBackward0");

  // In place on a slice of a non-leaf: the base's gradient goes through the slice.
  Tensor t4 = leaf({4, 4}, device, 3);
  Fn on_view = [&](const std::vector<Tensor>& in) {
    Tensor base = in[0] * 2.0;
    base.narrow(0, 1, 2).scatter_add_(1, i1, in[1]);
    return base;
  };
  check_gradients(on_view, {t4, src});

  // A leaf that requires grad is refused, as PyTorch does.
  Tensor l = leaf({3, 4}, device, 1);
  REQUIRE_THROWS_WITH(l.scatter_add_(1, i1, src), Catch::Contains("a leaf tensor that requires grad"));
  // Under no_grad it is allowed and records nothing.
  {
    NoGradGuard no_grad;
    l.scatter_add_(1, i1, src);
  }
  CHECK(l.is_leaf());
}

DEVICE_TEST_CASE("index_select: gradients with repeated, int32 and 0-dim indices", "[autograd][index_select]") {
  Tensor t = leaf({4, 3}, device, 1);
  for (Dtype dt : {kInt64, kInt32}) {
    INFO(dt);
    Tensor rep = index({3, 0, 3, 3, 1}, {5}, device, dt);
    check_gradients([&](const std::vector<Tensor>& in) { return in[0].index_select(0, rep); }, {t});
    check_gradients([&](const std::vector<Tensor>& in) { return index_select(in[0], -1, rep.narrow(0, 2, 3) - 1); },
                    {t});
    check_gradients([&](const std::vector<Tensor>& in) { return in[0].t().index_select(1, rep); }, {t});
    // A 0-dim index keeps the dim with size 1.
    check_gradients([&](const std::vector<Tensor>& in) { return in[0].index_select(0, index({2}, {}, device, dt)); },
                    {t});
    // An empty index: the gradient is all zeros.
    check_gradients([&](const std::vector<Tensor>& in) { return in[0].index_select(1, index({}, {0}, device, dt)); },
                    {t});
  }
  // 0-dim t.
  Tensor s = test::leaf({1.25}, {}, device);
  check_gradients([&](const std::vector<Tensor>& in) { return in[0].index_select(0, index({0}, {1}, device)); }, {s});

  // By hand: rows 3, 0, 3 of a (4, 1) column.
  Tensor v = test::leaf({1, 2, 3, 4}, {4, 1}, device);
  Tensor out = v.index_select(0, index({3, 0, 3}, {3}, device, kInt32));
  CHECK(std::string(out.grad_fn()->name()) == "IndexSelectBackward0");
  out.backward(make({1, 10, 100}, {3, 1}, kFloat64, device));
  check_values(v.grad(), {10, 0, 0, 101});
}

DEVICE_TEST_CASE("one_hot records no node", "[autograd][one_hot]") {
  Tensor h = one_hot(index({0, 2, 1}, {3}, device), 3);
  CHECK(h.grad_fn() == nullptr);
  CHECK_FALSE(h.requires_grad());
}

// ---------------------------------------------------------------- mm, bmm, matmul
DEVICE_TEST_CASE("mm: a small gradient by hand", "[autograd][mm]") {
  // a = [[1, 2], [3, 4]], b = [[5, 6, 7], [8, 9, 10]], grad = [[1, 0, 2], [0, 1, 1]]
  // grad_a = grad b^T = [[1*5 + 2*7, 1*8 + 2*10], [6 + 7, 9 + 10]] = [[19, 28], [13, 19]]
  // grad_b = a^T grad = [[1, 3, 2 + 3], [2, 4, 4 + 4]] = [[1, 3, 5], [2, 4, 8]]
  Tensor a = test::leaf({1, 2, 3, 4}, {2, 2}, device);
  Tensor b = test::leaf({5, 6, 7, 8, 9, 10}, {2, 3}, device);
  Tensor out = a.mm(b);
  CHECK(std::string(out.grad_fn()->name()) == "MmBackward0");
  out.backward(make({1, 0, 2, 0, 1, 1}, {2, 3}, kFloat64, device));
  check_values(a.grad(), {19, 28, 13, 19});
  check_values(b.grad(), {1, 3, 5, 2, 4, 8});
}

DEVICE_TEST_CASE("mm: gradients, transposed leaves, one operand without grad", "[autograd][mm]") {
  Tensor a = leaf({3, 4}, device, 1), b = leaf({4, 2}, device, 2);
  Fn fn = [](const std::vector<Tensor>& in) { return mm(in[0], in[1]); };
  check_gradients(fn, {a, b});
  check_gradients(fn, {a, leaf({4, 2}, device, 2, false)});
  check_gradients(fn, {leaf({3, 4}, device, 1, false), b});
  Tensor at = leaf({4, 3}, device, 3), bt = leaf({2, 4}, device, 4);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].t().mm(in[1].t()); }, {at, bt});

  // Only the operand the other's gradient needs is saved: a.mm(fixed) keeps
  // fixed (for grad_a) but not a, so writing a afterwards is harmless and
  // writing fixed is caught.
  Tensor fixed = leaf({4, 2}, device, 2, false);
  Tensor out = a.mm(fixed);
  REQUIRE(out.grad_fn()->saved.size() == 2);
  CHECK_FALSE(out.grad_fn()->saved[0].defined());
  CHECK(out.grad_fn()->saved[1].defined());
  Tensor seed = make(values(6, 5), {3, 2}, kFloat64, device);
  {
    NoGradGuard no_grad;
    a.mul_(2.0);
  }
  out.backward(seed, /*retain_graph=*/true);
  test::check_close(a.grad(), seed.mm(fixed.t()));
  {
    NoGradGuard no_grad;
    fixed.mul_(2.0);
  }
  REQUIRE_THROWS_WITH(out.backward(seed), Catch::Contains("modified by an inplace operation"));
}

DEVICE_TEST_CASE("bmm: gradients", "[autograd][bmm]") {
  Tensor a = leaf({2, 3, 4}, device, 1), b = leaf({2, 4, 5}, device, 2);
  Fn fn = [](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); };
  check_gradients(fn, {a, b});
  check_gradients(fn, {a, leaf({2, 4, 5}, device, 2, false)});
  Tensor at = leaf({2, 4, 3}, device, 3);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].transpose(1, 2).bmm(in[1]); }, {at, b});
  Tensor out = fn({a, b});
  CHECK(std::string(out.grad_fn()->name()) == "BmmBackward0");
}

DEVICE_TEST_CASE("matmul: gradients in every rank case", "[autograd][matmul]") {
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {{4}, {4}},                 // dot
      {{3, 4}, {4}},              // mv
      {{4}, {4, 5}},              // vector times matrix
      {{3, 4}, {4, 5}},           // mm
      {{2, 3, 4}, {4}},           // batched times vector
      {{4}, {2, 4, 5}},           // vector times batched
      {{2, 3, 4}, {4, 5}},        // batched times matrix
      {{3, 4}, {2, 4, 5}},        // matrix times batched
      {{2, 3, 4}, {2, 4, 5}},     // bmm
      {{2, 1, 3, 4}, {5, 4, 6}},  // broadcast batch dims on both sides
      {{1, 3, 4}, {2, 4, 5}},     // a's batch dim broadcast
  };
  for (const Case& c : cases) {
    INFO(shape_str(c.a) << " @ " << shape_str(c.b));
    Tensor a = leaf(c.a, device, 1), b = leaf(c.b, device, 2);
    Fn fn = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    check_gradients(fn, {a, b});
    check_gradients(fn, {a, leaf(c.b, device, 2, false)});
    check_gradients(fn, {leaf(c.a, device, 1, false), b});
    Tensor out = fn({a, b});
    CHECK(std::string(out.grad_fn()->name()) == "MatmulBackward0");
    CHECK(records_one_node(out));
  }
}

DEVICE_TEST_CASE("matmul: transposed leaves", "[autograd][matmul]") {
  Tensor at = leaf({4, 3}, device, 1), bt = leaf({5, 4}, device, 2);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].t().matmul(in[1].t()); }, {at, bt});
  // Batched, transposed in the matrix dims, against a broadcast matrix.
  Tensor a3 = leaf({2, 4, 3}, device, 3);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].transpose(-1, -2).matmul(in[1].t()); }, {a3, bt});
}

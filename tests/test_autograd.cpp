// The autograd engine's behaviour, as PyTorch's: leaves and requires_grad,
// accumulation into .grad(), retain_graph and freed graphs, grad modes,
// detach, retain_grad, autograd::grad with create_graph (higher orders),
// the in-place checks (version counters, leaves), the device rule in
// backward, threads, and memory staying flat over a training loop.
#include <thread>

#include "helpers.h"

using namespace tandem;
using Catch::Contains;
using test::check_close;
using test::check_values;
using test::leaf;
using test::make;

DEVICE_TEST_CASE("leaves, requires_grad and grad_fn", "[autograd]") {
  Tensor x = ones({2, 2}, TensorOptions(kFloat32).device(device).requires_grad(true));
  REQUIRE(x.requires_grad());
  REQUIRE(x.is_leaf());
  REQUIRE(x.grad_fn() == nullptr);
  REQUIRE_FALSE(x.grad().defined());
  Tensor y = x * 2.0 + 1.0;
  REQUIRE(y.requires_grad());
  REQUIRE_FALSE(y.is_leaf());
  REQUIRE(y.grad_fn()->name() == std::string("AddBackward0"));
  REQUIRE(y.grad_fn()->next_edges[0].fn->name() == std::string("MulBackward0"));
  REQUIRE(y.grad_fn()->next_edges[0].fn->next_edges[0].fn->name() == std::string("AccumulateGrad"));
  Tensor plain = ones({2}, TensorOptions().device(device));
  REQUIRE_FALSE(plain.requires_grad());
  REQUIRE((plain * 3.0).grad_fn() == nullptr);
  // Integer results (comparisons, argmax) never require grad.
  REQUIRE_FALSE(y.gt(0).requires_grad());
  REQUIRE_FALSE(y.argmax().requires_grad());
  // requires_grad_ on a leaf, and its errors.
  Tensor z = zeros({3}, TensorOptions(kFloat64).device(device));
  REQUIRE(z.requires_grad_().requires_grad());
  REQUIRE_FALSE(z.requires_grad_(false).requires_grad());
  REQUIRE_THROWS_WITH(y.requires_grad_(false),
                      Contains("you can only change requires_grad flags of leaf tensors") && Contains("AddBackward0"));
  REQUIRE_THROWS_WITH(zeros({2}, TensorOptions(kInt64).device(device)).requires_grad_(),
                      Contains("only tensors of floating point dtype can require gradients (got int64)"));
  REQUIRE_THROWS_WITH(zeros({2}, TensorOptions(kInt64).device(device).requires_grad(true)),
                      Contains("tandem::zeros: only tensors of floating point dtype can require gradients"));
  // Every factory honours requires_grad(true).
  TensorOptions o = TensorOptions(kFloat32).device(device).requires_grad(true);
  for (const Tensor& t : {empty({2}, o), zeros({2}, o), ones({2}, o), full({2}, 1.5, o), rand({2}, o), randn({2}, o),
                          arange(0.0, 2.0, 1.0, o), linspace(0, 1, 2, o), eye(2, o), tensor({1.0, 2.0}, o),
                          zeros_like(x, o), randn_like(x, o)}) {
    REQUIRE(t.requires_grad());
    REQUIRE(t.is_leaf());
  }
}

DEVICE_TEST_CASE("backward accumulates into leaves, like PyTorch", "[autograd]") {
  Tensor x = leaf({1, 2, 3}, {3}, device);
  Tensor w = leaf({4, 5, 6}, {3}, device);
  (x * w).sum().backward();
  check_values(x.grad(), {4, 5, 6});
  check_values(w.grad(), {1, 2, 3});
  REQUIRE(x.grad().device() == device);
  REQUIRE_FALSE(x.grad().requires_grad());
  (x * x).sum().backward();  // a second pass adds: 4+2, 5+4, 6+6
  check_values(x.grad(), {6, 9, 12});
  check_values(w.grad(), {1, 2, 3});
  // A tensor used along two paths gets the sum (diamond).
  Tensor a = leaf({2}, {1}, device);
  Tensor b = a * 3.0;
  (b * b + b).sum().backward();  // d/da (9a^2 + 3a) = 18a + 3
  check_values(a.grad(), {39});
  // The two leaves of one add get independent gradients.
  Tensor p = leaf({1, 1}, {2}, device), q = leaf({1, 1}, {2}, device);
  (p + q).sum().backward();
  {
    NoGradGuard no_grad;
    p.mutable_grad().mul_(5.0);
  }
  check_values(p.grad(), {5, 5});
  check_values(q.grad(), {1, 1});
  // The same after a create_graph pass, whose .grad() has history.
  Tensor p2 = leaf({1, 1}, {2}, device), q2 = leaf({1, 1}, {2}, device);
  (p2 * q2).sum().backward(Tensor(), std::nullopt, /*create_graph=*/true);
  (p2 + q2).sum().backward();
  {
    NoGradGuard no_grad;
    p2.mutable_grad().mul_(10.0);
  }
  check_values(p2.grad(), {20, 20});
  check_values(q2.grad(), {2, 2});
  // zeroing, as optimizers do
  x.mutable_grad().zero_();
  (x * 2.0).sum().backward();
  check_values(x.grad(), {2, 2, 2});
}

DEVICE_TEST_CASE("backward's gradient argument is checked", "[autograd]") {
  Tensor x = leaf({1, 2, 3}, {3}, device);
  Tensor y = x * 2.0;
  REQUIRE_THROWS_WITH(y.backward(),
                      Contains("grad can be implicitly created only for scalar outputs") && Contains("[3]"));
  REQUIRE_THROWS_WITH(
      y.backward(ones({2}, TensorOptions(kFloat64).device(device))),
      Contains("mismatch in shape: grad_output[0] has a shape of [2] and output[0] has a shape of [3]"));
  REQUIRE_THROWS_WITH(y.backward(ones({3}, TensorOptions(kInt64).device(device))),
                      Contains("grad_output[0] must be floating point, got int64"));
  y.backward(make({1, 0.5, 2}, {3}, kFloat64, device));
  check_values(x.grad(), {2, 1, 4});
  Tensor c = ones({2}, TensorOptions(kFloat64).device(device));
  REQUIRE_THROWS_WITH(c.sum().backward(), Contains("element 0 of tensors does not require grad and does not have a "
                                                   "grad_fn"));
  if (auto other = test::other_device(device)) {
    Tensor g = ones({3}, TensorOptions(kFloat64).device(*other));
    REQUIRE_THROWS_WITH(x.mul(2.0).backward(g),
                        Contains("Expected all tensors to be on the same device, but found at least two devices") &&
                            Contains("backward") && Contains("gradient"));
  }
}

DEVICE_TEST_CASE("the graph is freed after backward unless retain_graph", "[autograd]") {
  Tensor x = leaf({0.5, 1.5}, {2}, device);
  Tensor y = x.exp().sum();
  auto node = y.grad_fn()->next_edges[0].fn;  // ExpBackward0, which saved its output
  REQUIRE(node->name() == std::string("ExpBackward0"));
  y.backward(Tensor(), /*retain_graph=*/true);
  REQUIRE_FALSE(node->saved_released());
  y.backward();  // retained: a second pass works and accumulates
  check_values(x.grad(), {2 * std::exp(0.5), 2 * std::exp(1.5)});
  REQUIRE(node->saved_released());
  REQUIRE_THROWS_WITH(y.backward(), Contains("ExpBackward0: trying to backward through the graph a second time") &&
                                        Contains("retain_graph=true"));
  // A graph that saved nothing can be walked again, as in PyTorch.
  Tensor s = (x + 1.0).sum();
  s.backward();
  s.backward();
}

DEVICE_TEST_CASE("grad modes: NoGradGuard, EnableGradGuard, per thread", "[autograd]") {
  Tensor x = leaf({1, 2}, {2}, device);
  REQUIRE(GradMode::is_enabled());
  {
    NoGradGuard no_grad;
    REQUIRE_FALSE(GradMode::is_enabled());
    Tensor y = x * 2.0;
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.grad_fn() == nullptr);
    {
      EnableGradGuard enable;
      REQUIRE((x * 2.0).requires_grad());
    }
    REQUIRE_FALSE((x * 2.0).requires_grad());
    bool other_thread_enabled = false;
    std::thread t([&] { other_thread_enabled = GradMode::is_enabled(); });
    t.join();
    REQUIRE(other_thread_enabled);  // grad mode is per thread
    // Under no_grad a leaf may be changed in place (an optimizer step).
    uint64_t v = x._version();
    x.sub_(x * 0.5);
    REQUIRE(x._version() == v + 1);
  }
  REQUIRE(GradMode::is_enabled());
  check_values(x, {0.5, 1});
}

DEVICE_TEST_CASE("detach and retain_grad", "[autograd]") {
  Tensor x = leaf({1, 2}, {2}, device);
  Tensor y = x * 3.0;
  Tensor d = y.detach();
  REQUIRE_FALSE(d.requires_grad());
  REQUIRE(d.is_leaf());
  REQUIRE(d.shares_storage(y));
  Tensor z = y * y;
  y.retain_grad();
  REQUIRE(y.retains_grad());
  z.sum().backward();
  check_values(y.grad(), {6, 12});  // dz/dy = 2y
  check_values(x.grad(), {18, 36});
  Tensor u = x * 2.0;
  (u * 1.0).sum().backward();
  REQUIRE_FALSE(u.grad().defined());  // not retained
  Tensor w = x * 1.0;
  w.detach_();
  REQUIRE_FALSE(w.requires_grad());
  REQUIRE_THROWS_WITH(ones({1}, TensorOptions(kFloat64).device(device)).retain_grad(),
                      Contains("can't retain_grad on a tensor that doesn't require grad"));
}

DEVICE_TEST_CASE("autograd::grad, allow_unused, and higher-order derivatives", "[autograd]") {
  Tensor x = leaf({2}, {1}, device);
  Tensor y = leaf({3}, {1}, device);
  Tensor f = x * y * y;
  auto g = autograd::grad({f}, {x, y}, {}, std::nullopt, /*create_graph=*/true);
  check_values(g[0], {9});                   // y^2
  check_values(g[1], {12});                  // 2xy
  REQUIRE_FALSE(x.grad().defined());         // grad() does not accumulate
  REQUIRE(g[1].requires_grad());             // create_graph: the results have history
  auto gg = autograd::grad({g[1]}, {x, y});  // d(2xy)/dx = 2y, d(2xy)/dy = 2x
  check_values(gg[0], {6});
  check_values(gg[1], {4});
  // d^3/dx^3 of x^4 at 2: 24x = 48, by three nested passes.
  Tensor p = x.pow(4);
  Tensor d1 = autograd::grad({p}, {x}, {}, std::nullopt, true)[0];
  Tensor d2 = autograd::grad({d1}, {x}, {}, std::nullopt, true)[0];
  Tensor d3 = autograd::grad({d2}, {x})[0];
  check_values(d1, {32});
  check_values(d2, {48});
  check_values(d3, {48});
  REQUIRE_FALSE(d3.requires_grad());
  // backward with create_graph leaves a .grad() with history.
  Tensor q = leaf({1.5}, {1}, device);
  (q * q * q).sum().backward(Tensor(), std::nullopt, /*create_graph=*/true);
  REQUIRE(q.grad().requires_grad());
  auto q2 = autograd::grad({q.grad()}, {q});
  check_values(q2[0], {9});  // 6q
  Tensor unused = leaf({1}, {1}, device);
  REQUIRE_THROWS_WITH(autograd::grad({x * 2.0}, {unused}),
                      Contains("appears to not have been used in the graph") && Contains("allow_unused=true"));
  auto r = autograd::grad({x * 2.0}, {x, unused}, {}, std::nullopt, false, /*allow_unused=*/true);
  check_values(r[0], {2});
  REQUIRE_FALSE(r[1].defined());
  REQUIRE_THROWS_WITH(autograd::grad({x * 2.0}, {ones({1}, TensorOptions(kFloat64).device(device))}),
                      Contains("does not require grad"));
  // Gradients of a non-leaf, and backward(inputs=...) accumulating only there.
  Tensor h = x * 5.0;
  check_values(autograd::grad({(h * h).sum()}, {h})[0], {20});
  Tensor k = x * y;
  k.sum().backward(Tensor(), std::nullopt, false, {y});
  check_values(y.grad(), {2});
  REQUIRE_FALSE(x.grad().defined());
  // Several roots at once.
  Tensor m = leaf({1, 2}, {2}, device);
  autograd::backward({m * 2.0, m * m},
                     {ones({2}, TensorOptions(kFloat64).device(device)), make({1, 10}, {2}, kFloat64, device)});
  check_values(m.grad(), {2 + 2, 2 + 40});
}

DEVICE_TEST_CASE("in-place ops: version counters and the leaf rule", "[autograd]") {
  Tensor x = leaf({0.5, 1.0}, {2}, device);
  REQUIRE_THROWS_WITH(x.add_(1.0), Contains("add_: a leaf tensor that requires grad is being used in an in-place "
                                            "operation") &&
                                       Contains("NoGradGuard"));
  REQUIRE_THROWS_WITH(x.zero_(), Contains("fill_: a leaf tensor that requires grad"));
  REQUIRE_THROWS_WITH(x.exp_(), Contains("exp_: a leaf tensor that requires grad"));
  REQUIRE_THROWS_WITH(x.masked_fill_(x.gt(0), 1.0), Contains("masked_fill_: a leaf tensor that requires grad"));
  REQUIRE_THROWS_WITH(x.copy_(x * 2.0), Contains("copy_: a leaf tensor that requires grad"));
  REQUIRE_THROWS_WITH(uniform_(x), Contains("uniform_: a leaf tensor that requires grad"));
  REQUIRE_THROWS_WITH(normal_(x), Contains("normal_: a leaf tensor that requires grad"));
  {
    NoGradGuard no_grad;  // initializing parameters, as nn.init does
    Tensor p = leaf({0, 0}, {2}, device);
    normal_(p);
    REQUIRE(p.is_leaf());
  }
  // Random fills of a non-leaf cut its old values off, like fill_.
  Tensor r = x * 3.0;
  uniform_(r, 1.0, 2.0);
  REQUIRE(r.grad_fn()->name() == std::string("FillBackward0"));
  (r * x).sum().backward();
  check_close(x.grad(), r.detach());
  x.mutable_grad() = Tensor();
  // exp saves its output; changing that output in place breaks the graph.
  Tensor y = x.exp();
  REQUIRE(y._version() == 0);
  y.add_(1.0);
  REQUIRE(y._version() == 1);
  REQUIRE(y.grad_fn()->name() == std::string("AddBackward0"));
  REQUIRE_THROWS_WITH(y.sum().backward(),
                      Contains("one of the variables needed for gradient computation has been modified by an inplace "
                               "operation") &&
                          Contains("output 0 of ExpBackward0") && Contains("is at version 1; expected version 0") &&
                          Contains("[float64 [2] on " + device.str() + "]"));
  // Changing a saved input: mul saved x's partner.
  Tensor a = x * 1.0, b = x * 2.0;
  Tensor c = a * b;
  b.mul_(3.0);
  REQUIRE_THROWS_WITH(c.sum().backward(), Contains("output 0 of MulBackward0") && Contains("MulBackward0 saved it"));
  // An in-place op on a non-leaf continues its history.
  Tensor z = x * 2.0;
  z.mul_(x);  // z = 2x^2
  REQUIRE(z.grad_fn()->name() == std::string("MulBackward0"));
  REQUIRE(z.grad_fn()->next_edges[0].fn->name() == std::string("MulBackward0"));
  z.sum().backward();
  check_values(x.grad(), {4 * 0.5, 4 * 1.0});
  // A view made under no_grad, changed in place while recording: refused.
  Tensor base = x * 2.0, v, u;
  {
    NoGradGuard no_grad;
    v = base.select(0, 0);
    u = zeros({2}, TensorOptions(kFloat64).device(device)).select(0, 1);
  }
  REQUIRE_THROWS_WITH(v.mul_(2.0), Contains("mul_: a view was created in no_grad mode and is being modified in "
                                            "place with grad mode enabled"));
  REQUIRE_THROWS_WITH(u.copy_(x.select(0, 0)), Contains("CopyBackwards: a view was created in no_grad mode"));
  {
    NoGradGuard no_grad;
    v.mul_(2.0);  // both inside: fine
  }
  // z.mul_(z) overwrites the `other` it saved, as in PyTorch.
  Tensor w = x * 2.0;
  w.mul_(w);
  REQUIRE_THROWS_WITH(w.sum().backward(), Contains("is at version 1; expected version 0"));
}

DEVICE_TEST_CASE("the device rule holds in backward", "[autograd]") {
  Tensor x = leaf({1, 2}, {2}, device);
  Tensor h = x.to(Device(kCPU)) * 3.0;  // moved to the cpu: backward moves the gradient back
  h.sum().backward();
  REQUIRE(x.grad().device() == device);
  check_values(x.grad(), {3, 3});
  if (auto other = test::other_device(device)) {
    Tensor o = leaf({1, 2}, {2}, *other);
    Tensor s = (x.to(*other) * o).sum();
    s.backward();
    REQUIRE(o.grad().device() == *other);
    check_values(o.grad(), {1, 2});
    check_values(x.grad(), {3 + 1, 3 + 2});
    REQUIRE(x.grad().device() == device);
    // copy_ across devices: the gradient goes back to the source's device.
    Tensor dst = zeros({2}, TensorOptions(kFloat64).device(*other));
    dst.copy_(x);
    REQUIRE(dst.requires_grad());
    (dst * 2.0).sum().backward();
    check_values(x.grad(), {6, 7});
    REQUIRE(x.grad().device() == device);
  }
}

DEVICE_TEST_CASE("independent graphs run backward on several threads", "[autograd]") {
  std::vector<std::thread> threads;
  std::vector<double> results(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Tensor x = leaf({1.0 + t}, {1}, device);
      for (int i = 0; i < 20; ++i) (x * x).sum().backward();
      results[t] = x.grad().item<double>();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) REQUIRE(results[t] == 20 * 2 * (1.0 + t));
}

DEVICE_TEST_CASE("memory: no_grad keeps nothing, and a training loop stays flat", "[autograd][memory]") {
  if (!device.is_cuda()) return;  // the allocator's counters are kept per cuda device
  int index = device.index();
  TensorOptions o = TensorOptions(kFloat32).device(device);
  Tensor x = randn({256, 256}, o).requires_grad_();  // 256 KiB
  auto chain = [&] {
    Tensor y = x;
    for (int i = 0; i < 8; ++i) y = (y * 1.5).sin();  // sin keeps its input for backward
    return y;
  };
  size_t base = cuda::memory_allocated(index);
  size_t with_graph, without_graph;
  {
    Tensor y = chain();
    with_graph = cuda::memory_allocated(index) - base;
  }
  REQUIRE(cuda::memory_allocated(index) == base);  // dropping the result frees the graph
  {
    NoGradGuard no_grad;
    Tensor y = chain();
    without_graph = cuda::memory_allocated(index) - base;
  }
  // Graphs that could hold themselves alive are freed with their tensors:
  // an in-place op whose argument is its target, and backward with
  // create_graph (leaf -> .grad() with history -> graph -> leaf).
  {
    Tensor y = x * 1.0;
    y.mul_(y);
    Tensor z = x * 1.0;
    z.mul_(z.t());
    Tensor leaf_p = randn({64}, o).requires_grad_();
    (leaf_p * leaf_p * leaf_p).sum().backward(Tensor(), std::nullopt, /*create_graph=*/true);
    REQUIRE(leaf_p.grad().requires_grad());
  }
  REQUIRE(cuda::memory_allocated(index) == base);
  const size_t one = 256 * 256 * 4;
  REQUIRE(without_graph == one);   // only the result
  REQUIRE(with_graph >= 9 * one);  // the result and the 8 saved inputs of sin

  // A least-squares fit, step after step: the allocator's count must not grow.
  Tensor w = (randn({16, 4}, o) * 0.1).detach().requires_grad_();
  Tensor b = zeros({4}, o.requires_grad(true));
  Tensor X = randn({32, 16}, o), Y = randn({32, 4}, o);
  std::vector<size_t> allocated;
  std::vector<double> losses;
  for (int step = 0; step < 40; ++step) {
    Tensor loss = (X.mm(w) + b - Y).pow(2).mean();
    loss.backward();
    {
      NoGradGuard no_grad;
      w.sub_(w.grad() * 0.05);
      b.sub_(b.grad() * 0.05);
      w.mutable_grad().zero_();
      b.mutable_grad().zero_();
    }
    losses.push_back(loss.item<double>());
    loss = Tensor();
    allocated.push_back(cuda::memory_allocated(index));
  }
  for (size_t i = 1; i < allocated.size(); ++i) REQUIRE(allocated[i] == allocated[1]);
  REQUIRE(losses.back() < 0.9 * losses.front());
}

DEVICE_TEST_CASE("post-accumulate-grad hooks and end-of-pass callbacks", "[autograd][hooks]") {
  Tensor w = test::leaf({1, 2, 3}, {3}, device);
  Tensor v = test::leaf({4, 5, 6}, {3}, device);
  std::vector<std::string> events;
  auto hw = autograd::register_post_accumulate_grad_hook(w, [&](Tensor& leaf) {
    // The gradient is already accumulated when the hook runs.
    events.push_back("w " + std::to_string(leaf.grad().sum().item<double>()));
    autograd::queue_callback([&] {
      events.push_back("end");
      autograd::queue_callback([&] { events.push_back("after end"); });
    });
  });
  auto hv = autograd::register_post_accumulate_grad_hook(
      v, [&](Tensor& leaf) { events.push_back("v " + std::to_string(leaf.grad().sum().item<double>())); });
  // w is used twice: its hook still runs once, after both gradients are summed.
  w.mul(v).add(w).sum().backward();
  REQUIRE(events.size() == 4);
  REQUIRE(events[2] == "end");
  REQUIRE(events[3] == "after end");
  REQUIRE(((events[0] == "w 18.000000" && events[1] == "v 6.000000") ||
           (events[0] == "v 6.000000" && events[1] == "w 18.000000")));
  // A second pass accumulates; the hook sees the sum.
  events.clear();
  w.mul(v).sum().backward();
  REQUIRE(std::count(events.begin(), events.end(), "w 33.000000") == 1);
  // backward(inputs) runs the hooks of the inputs only.
  events.clear();
  autograd::backward({w.mul(v).sum()}, {}, std::nullopt, false, {v});
  REQUIRE(events == std::vector<std::string>{"v 18.000000"});
  // autograd::grad accumulates nothing and runs no hook.
  events.clear();
  autograd::grad({w.mul(v).sum()}, {w, v});
  REQUIRE(events.empty());
  hw.remove();
  hw.remove();  // twice: nothing
  hv.remove();
  w.mul(v).sum().backward();
  REQUIRE(events.empty());
}

TEST_CASE("hook and callback errors", "[autograd][hooks]") {
  Tensor w = test::leaf({1, 2}, {2}, Device(kCPU));
  REQUIRE_THROWS_MATCHES(autograd::register_post_accumulate_grad_hook(w.mul(2), [](Tensor&) {}), ValueError,
                         Catch::Message("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be "
                                        "registered on non-leaf tensors (this one was computed by MulBackward0); "
                                        "register it on the leaf it came from"));
  REQUIRE_THROWS_MATCHES(autograd::register_post_accumulate_grad_hook(zeros({2}), [](Tensor&) {}), ValueError,
                         Catch::Message("register_post_accumulate_grad_hook: cannot register a hook on a tensor that "
                                        "doesn't require gradient; call requires_grad_() first"));
  REQUIRE_THROWS_MATCHES(autograd::queue_callback([] {}), ValueError,
                         Catch::Message("autograd::queue_callback: no backward pass is running on this thread; queue "
                                        "callbacks from a hook that a pass calls"));
  // A hook's exception leaves the pass, and the next pass works.
  auto h = autograd::register_post_accumulate_grad_hook(w, [](Tensor&) { throw ValueError("from the hook"); });
  REQUIRE_THROWS_MATCHES(w.sum().backward(), ValueError, Catch::Message("from the hook"));
  h.remove();
  w.sum().backward();
  test::check_values(w.grad(), {2, 2});
}

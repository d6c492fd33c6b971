// nn::Module: registration and dotted names, moving with to() (identity kept,
// grads and buffers too), modes, zero_grad, apply, state dicts, printing,
// the containers, and the device error that names a parameter.
#include <sstream>

#include "optim/sgd.h"
#include "tests/helpers.h"

using namespace tandem;
using Catch::Contains;

namespace {

struct BlockImpl : nn::Module {
  BlockImpl() : fc(register_module("fc", nn::Linear(3, 2))) {
    scale = register_buffer("scale", full({2}, 2.0));
    steps = register_buffer("steps", zeros({}, kInt64));
    scratch = register_buffer("scratch", zeros({2}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) { return fc(x).mul(scale); }
  nn::Linear fc;
  Tensor scale, steps, scratch;
};
TANDEM_MODULE(Block);

struct NetImpl : nn::Module {
  NetImpl()
      : block(register_module("block", Block())),
        head(register_module("head", nn::Linear(nn::LinearOptions(2, 4).bias(false)))) {
    gain = register_parameter("gain", ones({4}));
  }
  Tensor forward(const Tensor& x) { return head(block(x).relu()).mul(gain); }
  Block block;
  nn::Linear head;
  Tensor gain;
};
TANDEM_MODULE(Net);

std::vector<std::string> keys_of(const OrderedDict<std::string, Tensor>& d) { return d.keys(); }

}  // namespace

TEST_CASE("named_parameters and named_buffers use dotted names in registration order", "[nn][module]") {
  Net net;
  CHECK(keys_of(net->named_parameters()) ==
        std::vector<std::string>{"gain", "block.fc.weight", "block.fc.bias", "head.weight"});
  CHECK(keys_of(net->named_parameters(/*recurse=*/false)) == std::vector<std::string>{"gain"});
  CHECK(net->parameters().size() == 4);
  CHECK(keys_of(net->named_buffers()) == std::vector<std::string>{"block.scale", "block.steps", "block.scratch"});
  // PyTorch's state_dict order: a module's own parameters and buffers, then
  // its children's. The non-persistent buffer is not state.
  CHECK(keys_of(net->state_dict()) == std::vector<std::string>{"gain", "block.scale", "block.steps", "block.fc.weight",
                                                               "block.fc.bias", "head.weight"});
  CHECK(net->named_children().keys() == std::vector<std::string>{"block", "head"});
  CHECK(net->named_modules().keys() == std::vector<std::string>{"", "block", "block.fc", "head"});
  CHECK(net->modules(/*include_self=*/false).size() == 3);
  // The handles are the registered tensors, not copies.
  CHECK(net->named_parameters()["block.fc.weight"].is_same(net->block->fc->weight));
  CHECK(net->block->fc->weight.requires_grad());
  CHECK(net->block->fc->weight.is_leaf());
  CHECK_FALSE(net->block->scale.requires_grad());
  CHECK(net->name() == "Net");
  CHECK(net->block->fc->name() == "Linear");
}

TEST_CASE("registration errors", "[nn][module]") {
  auto m = std::make_shared<nn::Module>();
  m->register_parameter("w", zeros({2}));
  REQUIRE_THROWS_WITH(m->register_parameter("w", zeros({2})), "parameter 'w' already defined");
  REQUIRE_THROWS_WITH(m->register_buffer("w", zeros({2})), Contains("attribute 'w' already exists in Module"));
  REQUIRE_THROWS_WITH(m->register_parameter("a.b", zeros({2})), "parameter name can't contain \".\", got 'a.b'");
  REQUIRE_THROWS_WITH(m->register_buffer("", zeros({2})), "buffer name can't be empty");
  REQUIRE_THROWS_WITH(m->register_module("w", nn::Linear(1, 1)), Contains("attribute 'w' already exists"));
  REQUIRE_THROWS_WITH(m->register_module("x", std::shared_ptr<nn::Module>()),
                      "Cannot register an empty submodule 'x' in Module");
  Tensor a = ones({2}, TensorOptions().requires_grad(true));
  REQUIRE_THROWS_WITH(m->register_parameter("b", a.mul(2)),
                      Contains("Cannot register parameter 'b': it is not a leaf tensor (it was computed by "
                               "MulBackward0); register a detached tensor"));
  nn::Linear empty{nullptr};
  CHECK(empty.is_empty());
  REQUIRE_THROWS_WITH(empty->forward(zeros({1, 1})), Contains("Accessing an empty ModuleHolder"));
  REQUIRE_THROWS_WITH(m->named_parameters()["nope"], "parameter 'nope' is not defined");
  nn::ModuleList list(nn::Linear(1, 1));
  REQUIRE_THROWS_WITH(list[3], "Index 3 is out of range for a ModuleList of size 1");
  REQUIRE_THROWS_WITH(list->at<nn::ReLUImpl>(0), "ModuleList::at: module 0 is a Linear, not the type asked for");
  nn::Sequential seq;
  REQUIRE_THROWS_WITH(seq->forward(zeros({1})), "Cannot call forward() on an empty Sequential");
  REQUIRE_THROWS_WITH(seq[0], "Index 0 is out of range for a Sequential of size 0");
}

TEST_CASE("Linear is initialised as PyTorch's and computes x W^T + b", "[nn][linear]") {
  manual_seed(7);
  nn::Linear fc(400, 300);
  const double bound = 1 / std::sqrt(400.0);
  for (const Tensor& p : {fc->weight, fc->bias}) {
    CHECK(p.dtype() == kFloat32);
    CHECK(p.device() == Device(kCPU));
    CHECK(p.abs().max().item<double>() <= bound);
  }
  CHECK(fc->weight.sizes() == IntArrayRef({300, 400}));
  // U(-b, b) has mean 0 and standard deviation b / sqrt(3): 120000 draws.
  CHECK(std::abs(fc->weight.mean().item<double>()) < 0.02 * bound);
  CHECK(fc->weight.std().item<double>() == Approx(bound / std::sqrt(3.0)).epsilon(0.01));

  nn::Linear small(2, 3);
  {
    NoGradGuard g;
    small->weight.copy_(test::make({1, 2, 3, 4, 5, 6}, {3, 2}));
    small->bias.copy_(test::make({0.5, -1, 2}, {3}));
  }
  test::check_values(small(test::make({1, -1, 2, 0.5}, {2, 2})), {-0.5, -2, 1, 3.5, 7, 15});
  // Extra leading dimensions are kept.
  CHECK(small(zeros({4, 5, 2})).sizes() == IntArrayRef({4, 5, 3}));
  nn::Linear no_bias(nn::LinearOptions(2, 3).bias(false));
  CHECK_FALSE(no_bias->bias.defined());
  CHECK(no_bias->parameters().size() == 1);
}

DEVICE_TEST_CASE("Linear's gradients match finite differences", "[nn][linear]") {
  nn::Linear fc(3, 2);
  fc->to(device, kFloat64);
  Tensor x = test::leaf({0.1, -0.4, 0.9, 1.3, 0.2, -0.7}, {2, 3}, device);
  test::check_gradients([&](const std::vector<Tensor>& in) { return nn::functional::linear(in[0], in[1], in[2]); },
                        {x, fc->weight, fc->bias});
}

TEST_CASE("Linear's errors name the problem", "[nn][linear]") {
  nn::Linear fc(4, 2);
  REQUIRE_THROWS_WITH(fc(zeros({3, 5})),
                      "linear: mat1 and mat2 shapes cannot be multiplied (3x5 and 4x2): the input's last dimension is "
                      "5 but in_features is 4");
  REQUIRE_THROWS_WITH(fc(zeros({3, 4}, kFloat64)),
                      Contains("linear: expected input and weight to have the same dtype, but got input float64 and "
                               "weight float32"));
  REQUIRE_THROWS_WITH(nn::functional::linear(zeros({1, 4}), zeros({2, 4}), zeros({3})),
                      "linear: bias must have shape [2], got [3]");
  REQUIRE_THROWS_WITH(nn::Linear(-1, 2), Contains("Linear: in_features and out_features must be non-negative"));
}

DEVICE_TEST_CASE("to() moves parameters, buffers and grads in place", "[nn][module]") {
  Net net;
  std::vector<Tensor> before = net->parameters();
  TensorImpl* weight_impl = net->block->fc->weight.impl();
  net->forward(ones({5, 3})).sum().backward();
  REQUIRE(net->gain.grad().defined());
  net->to(device);
  for (const Tensor& p : net->parameters()) {
    CHECK(p.device() == device);
    CHECK(p.grad().device() == device);
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
  }
  for (const Tensor& b : net->buffers()) CHECK(b.device() == device);
  // The same tensors: handles taken before the move (an optimizer's) see it.
  std::vector<Tensor> after = net->parameters();
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < after.size(); ++i) CHECK(after[i].is_same(before[i]));
  CHECK(net->block->fc->weight.impl() == weight_impl);
  CHECK(before[0].device() == device);
  // The moved model trains on the device: grads accumulate into the moved grads.
  Tensor g0 = net->gain.grad().clone();
  net->forward(ones({5, 3}, TensorOptions().device(device))).sum().backward();
  test::check_close(net->gain.grad(), g0.mul(2));

  net->to(kFloat64);
  CHECK(net->gain.dtype() == kFloat64);
  CHECK(net->gain.grad().dtype() == kFloat64);
  CHECK(net->block->scale.dtype() == kFloat64);
  CHECK(net->block->steps.dtype() == kInt64);  // integer buffers keep their dtype
  net->to(Device(kCPU), kFloat32);
  CHECK(net->gain.device() == Device(kCPU));
  CHECK(net->gain.dtype() == kFloat32);
  CHECK(net->block->steps.device() == Device(kCPU));
}

DEVICE_TEST_CASE("a model on one device and data on another: the error names the parameter", "[nn][module]") {
  auto other = test::other_device(device);
  if (!other) return;
  Net net;
  net->to(device);
  Tensor x = ones({2, 3}, TensorOptions().device(*other));
  REQUIRE_THROWS_AS(net->forward(x), DeviceError);
  try {
    net->forward(x);
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Contains("Expected all tensors to be on the same device, but found at least two devices, " +
                           device.str() + " and " + other->str() + "! (when checking argument 'input' of linear)"));
    if (device.is_cpu()) {
      CHECK_THAT(m, Contains("weight is on cpu: parameter 'block.fc.weight', moved by Module::to() at"));
    } else {
      CHECK_THAT(m,
                 Contains("weight is on " + device.str() + ": parameter 'block.fc.weight', moved by Module::to() at"));
    }
    CHECK_THAT(m, Contains("test_nn_module.cpp"));
    CHECK_THAT(m, Contains("input = input.to(weight.device())"));
  }
  // A module's tensor on the wrong side: the fix is to move the module, not
  // to reassign its tensor (which would leave the module's copy behind).
  nn::CrossEntropyLoss criterion(nn::CrossEntropyLossOptions().weight(ones({3}, TensorOptions().device(*other))));
  Tensor logits = ones({2, 3}, TensorOptions().device(device)),
         labels = zeros({2}, TensorOptions().dtype(kInt64).device(device));
  REQUIRE_THROWS_WITH(criterion(logits, labels),
                      Contains("Tandem never moves tensors between devices by itself. 'weight' is a module's buffer: "
                               "move the module that holds it, e.g. module->to(input.device()) (for a loss with "
                               "class weights, the loss module too), and move each batch with .to(device).") &&
                          !Contains("weight = weight.to("));
  // A model never moved: its parameters say where they were made.
  nn::Linear fc(3, 1);
  if (!device.is_cpu()) {
    REQUIRE_THROWS_WITH(fc(ones({1, 3}, TensorOptions().device(device))),
                        Contains("weight is on cpu: parameter 'weight', created by tandem::empty at"));
  }
}

TEST_CASE("train() and eval() reach every submodule; Dropout follows them", "[nn][module]") {
  nn::Sequential seq(nn::Linear(4, 4), nn::Dropout(0.5), nn::ReLU());
  CHECK(seq->is_training());
  seq->eval();
  for (const auto& m : seq->modules()) CHECK_FALSE(m->is_training());
  Tensor x = randn({8, 4});
  test::check_close(seq->forward(x), seq->forward(x));  // eval: deterministic
  seq->train();
  for (const auto& m : seq->modules()) CHECK(m->is_training());
}

DEVICE_TEST_CASE("dropout drops with probability p and scales by 1/(1-p)", "[nn][dropout]") {
  manual_seed(3);
  Tensor x = full({200, 100}, 2.0, TensorOptions().device(device).requires_grad(true));
  Tensor y = nn::functional::dropout(x, 0.3, /*training=*/true);
  std::vector<float> v = y.to_vector<float>();
  int64_t kept = 0, wrong = 0;
  for (float e : v) {
    kept += e != 0;
    wrong += e != 0 && std::abs(e - 2 / 0.7f) > 1e-6f;
  }
  CHECK(wrong == 0);
  // 20000 Bernoulli(0.7) draws: mean 14000, sd ~65.
  CHECK(std::abs(kept - 14000) < 400);
  y.sum().backward();
  // d/dx is the mask: 1/(1-p) where kept, 0 where dropped.
  test::check_close(x.grad(), y.detach().div(2));
  // eval, p = 0 and p = 1.
  test::check_close(nn::functional::dropout(x, 0.3, false), x);
  test::check_close(nn::functional::dropout(x, 0.0, true), x);
  CHECK(nn::functional::dropout(x, 1.0, true).abs().sum().item<double>() == 0);
  REQUIRE_THROWS_WITH(nn::functional::dropout(x, 1.5), "dropout probability has to be between 0 and 1, but got 1.5");
  REQUIRE_THROWS_WITH(nn::Dropout(-0.1), "dropout probability has to be between 0 and 1, but got -0.1");
  REQUIRE_THROWS_WITH(nn::functional::dropout(zeros({2}, TensorOptions().dtype(kInt64).device(device))),
                      "dropout: expected a floating point input, got int64");
}

TEST_CASE("zero_grad clears or zeroes every gradient", "[nn][module]") {
  Net net;
  net->forward(ones({2, 3})).sum().backward();
  net->zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : net->parameters()) {
    REQUIRE(p.grad().defined());
    CHECK(p.grad().abs().sum().item<double>() == 0);
  }
  net->zero_grad();
  for (const Tensor& p : net->parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("apply visits every module, parents first", "[nn][module]") {
  Net net;
  std::vector<std::string> names;
  net->apply([&](const std::string& name, nn::Module& m) { names.push_back(name + ":" + m.name()); });
  CHECK(names == std::vector<std::string>{":Net", "block:Block", "block.fc:Linear", "head:Linear"});
  int count = 0;
  net->apply([&](nn::Module& m) {
    if (auto* fc = dynamic_cast<nn::LinearImpl*>(&m)) {
      nn::init::zeros_(fc->weight);
      ++count;
    }
  });
  CHECK(count == 2);
  CHECK(net->head->weight.abs().sum().item<double>() == 0);
}

DEVICE_TEST_CASE("load_state_dict copies onto the model's device; errors are PyTorch's", "[nn][module]") {
  Net source, target;
  target->to(device);
  {
    NoGradGuard g;
    source->block->steps.fill_(5);
  }
  target->load_state_dict(source->state_dict());
  for (const auto& item : target->state_dict()) {
    CHECK(item.second.device() == device);
    test::check_close(item.second, source->state_dict()[item.first]);
  }
  CHECK(target->gain.requires_grad());
  CHECK(target->gain.is_leaf());

  OrderedDict<std::string, Tensor> partial = source->state_dict();
  partial.erase("head.weight");
  partial.insert("extra", zeros({1}));
  try {
    target->load_state_dict(partial);
    FAIL("expected an error");
  } catch (const KeyError& e) {
    CHECK(std::string(e.what()) ==
          "Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: \"head.weight\". \n\tUnexpected "
          "key(s) in state_dict: \"extra\". ");
  }
  nn::LoadStateDictResult r = target->load_state_dict(partial, /*strict=*/false);
  CHECK(r.missing_keys == std::vector<std::string>{"head.weight"});
  CHECK(r.unexpected_keys == std::vector<std::string>{"extra"});

  // A shape mismatch is an error even when not strict, and nothing is copied.
  OrderedDict<std::string, Tensor> wrong = source->state_dict();
  wrong["gain"] = zeros({5});
  wrong["block.scale"] = full({2}, 9.0);
  REQUIRE_THROWS_WITH(target->load_state_dict(wrong, false),
                      "Error(s) in loading state_dict for Net:\n\tsize mismatch for gain: copying a param with shape "
                      "[5] from checkpoint, the shape in current model is [4].");
  CHECK(target->block->scale.to_vector<float>() == std::vector<float>{2, 2});
}

TEST_CASE("a module prints as PyTorch's tree", "[nn][module]") {
  Net net;
  std::ostringstream ss;
  ss << *net;
  CHECK(ss.str() ==
        "Net(\n"
        "  (block): Block(\n"
        "    (fc): Linear(in_features=3, out_features=2, bias=true)\n"
        "  )\n"
        "  (head): Linear(in_features=2, out_features=4, bias=false)\n"
        ")");
  nn::Sequential seq(nn::Flatten(), nn::Linear(4, 2), nn::ReLU(), nn::GELU(nn::GELUOptions().approximate("tanh")),
                     nn::Dropout(0.25), nn::Softmax(1), nn::Tanh(), nn::Sigmoid(), nn::SiLU());
  std::ostringstream s2;
  s2 << seq;
  CHECK(s2.str() ==
        "Sequential(\n"
        "  (0): Flatten(start_dim=1, end_dim=-1)\n"
        "  (1): Linear(in_features=4, out_features=2, bias=true)\n"
        "  (2): ReLU()\n"
        "  (3): GELU(approximate='tanh')\n"
        "  (4): Dropout(p=0.25, inplace=false)\n"
        "  (5): Softmax(dim=1)\n"
        "  (6): Tanh()\n"
        "  (7): Sigmoid()\n"
        "  (8): SiLU()\n"
        ")");
}

DEVICE_TEST_CASE("Sequential and ModuleList compose and register their modules", "[nn][container]") {
  manual_seed(11);
  nn::Linear a(4, 3), b(3, 2);
  nn::Sequential seq(a, nn::ReLU(), b);
  seq->to(device);
  CHECK(seq->size() == 3);
  CHECK(seq->named_parameters().keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(seq->ptr<nn::LinearImpl>(0).get() == a.get());
  CHECK(seq->ptr<nn::LinearImpl>(1) == nullptr);
  Tensor x = randn({5, 4}, TensorOptions().device(device));
  test::check_close(seq->forward(x), b(a(x).relu()));

  nn::ModuleList list;
  list->push_back(nn::Linear(2, 2));
  list->push_back(std::make_shared<nn::TanhImpl>());
  CHECK(list->size() == 2);
  CHECK(list->named_parameters().keys() == std::vector<std::string>{"0.weight", "0.bias"});
  int n = 0;
  for (const auto& m : *list) n += m != nullptr;
  CHECK(n == 2);
  CHECK(list->at<nn::LinearImpl>(0).options.in_features() == 2);
}

DEVICE_TEST_CASE("activation modules compute their functionals", "[nn][activation]") {
  Tensor x = test::make({-2, -0.5, 0, 0.7, 3, -1}, {2, 3}, kFloat32, device);
  test::check_close(nn::ReLU()(x), x.relu());
  test::check_close(nn::GELU()(x), x.gelu());
  test::check_close(nn::GELU(nn::GELUOptions().approximate("tanh"))(x), x.gelu("tanh"));
  test::check_close(nn::SiLU()(x), x.silu());
  test::check_close(nn::Tanh()(x), x.tanh());
  test::check_close(nn::Sigmoid()(x), x.sigmoid());
  test::check_close(nn::Softmax(1)(x), x.softmax(1));
  test::check_close(nn::Flatten()(x.reshape({2, 3, 1})), x);
  Tensor y = x.clone();
  nn::ReLU(nn::ReLUOptions(true))(y);
  test::check_close(y, x.relu());
  REQUIRE_THROWS_WITH(nn::GELU(nn::GELUOptions().approximate("fast")),
                      "GELU: approximate must be 'none' or 'tanh', got 'fast'");
}

DEVICE_TEST_CASE("LeakyReLU, ELU and Softplus: modules, functionals and their printing", "[nn][activation]") {
  Tensor x = test::make({-2, -0.5, 0, 0.7, 3, 12}, {2, 3}, kFloat32, device);
  test::check_values(nn::LeakyReLU()(x), {-0.02, -0.005, 0, 0.7, 3, 12});
  test::check_values(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.5))(x), {-1, -0.25, 0, 0.7, 3, 12});
  test::check_values(nn::ELU()(x), {std::expm1(-2.0), std::expm1(-0.5), 0, 0.7, 3, 12});
  test::check_values(nn::ELU(nn::ELUOptions().alpha(2))(x),
                     {2 * std::expm1(-2.0), 2 * std::expm1(-0.5), 0, 0.7, 3, 12});
  auto sp = [](double v, double beta) { return std::log1p(std::exp(beta * v)) / beta; };
  test::check_values(nn::Softplus()(x), {sp(-2, 1), sp(-0.5, 1), sp(0, 1), sp(0.7, 1), sp(3, 1), sp(12, 1)});
  // beta * x above the threshold gives x itself: 3 * 2 > 5 and 12 * 2 > 5.
  test::check_values(nn::Softplus(nn::SoftplusOptions().beta(2).threshold(5))(x),
                     {sp(-2, 2), sp(-0.5, 2), sp(0, 2), sp(0.7, 2), 3, 12});
  test::check_close(nn::functional::leaky_relu(x, 0.3), leaky_relu(x, 0.3));
  test::check_close(nn::functional::elu(x, 0.3), elu(x, 0.3));
  test::check_close(nn::functional::softplus(x, 0.5, 4), softplus(x, 0.5, 4));
  // inplace writes into the input and returns it.
  Tensor y = x.clone();
  Tensor r = nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.5).inplace(true))(y);
  test::check_values(y, {-1, -0.25, 0, 0.7, 3, 12});
  CHECK(r.data_ptr() == y.data_ptr());
  Tensor z = x.clone();
  nn::functional::elu(z, 1.0, /*inplace=*/true);
  test::check_close(z, elu(x));
  Tensor w = x.clone();
  nn::functional::leaky_relu(w, 0.01, /*inplace=*/false);
  test::check_close(w, x);

  nn::Sequential seq(nn::LeakyReLU(), nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2).inplace(true)),
                     nn::ELU(), nn::ELU(nn::ELUOptions().alpha(0.5).inplace(true)), nn::Softplus(),
                     nn::Softplus(nn::SoftplusOptions().beta(2).threshold(10)));
  std::ostringstream ss;
  ss << seq;
  CHECK(ss.str() ==
        "Sequential(\n"
        "  (0): LeakyReLU(negative_slope=0.01)\n"
        "  (1): LeakyReLU(negative_slope=0.2, inplace=true)\n"
        "  (2): ELU(alpha=1)\n"
        "  (3): ELU(alpha=0.5, inplace=true)\n"
        "  (4): Softplus(beta=1, threshold=20)\n"
        "  (5): Softplus(beta=2, threshold=10)\n"
        ")");
}

TEST_CASE("init follows torch.nn.init", "[nn][init]") {
  Tensor w = empty({64, 32, 3, 3});
  auto [fan_in, fan_out] = nn::init::calculate_fan_in_and_fan_out(w);
  CHECK(fan_in == 32 * 9);
  CHECK(fan_out == 64 * 9);
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::ReLU) == Approx(std::sqrt(2.0)));
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::Tanh) == Approx(5.0 / 3));
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::LeakyReLU, 0.2) == Approx(std::sqrt(2 / 1.04)));
  manual_seed(5);
  nn::init::kaiming_normal_(w, 0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
  CHECK(w.std().item<double>() == Approx(std::sqrt(2.0 / (64 * 9))).epsilon(0.02));
  nn::init::xavier_uniform_(w);
  CHECK(w.abs().max().item<double>() <= std::sqrt(6.0 / (32 * 9 + 64 * 9)));
  nn::init::constant_(w, 0.25);
  CHECK(w.min().item<double>() == 0.25);
  REQUIRE_THROWS_WITH(nn::init::xavier_uniform_(empty({3})),
                      "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (got 1)");
}

TEST_CASE("a tied weight or a shared submodule is one parameter, listed once", "[nn][module]") {
  // Tied: one tensor registered by two modules (an embedding and an output layer).
  Tensor w = ones({3, 2});
  auto first = std::make_shared<nn::Module>(), second = std::make_shared<nn::Module>();
  first->register_parameter("weight", w);
  second->register_parameter("weight", w);
  auto tied = std::make_shared<nn::Module>();
  tied->register_module("embed", first);
  tied->register_module("out", second);
  CHECK(tied->named_parameters().keys() == std::vector<std::string>{"embed.weight"});
  CHECK(tied->state_dict().keys() == std::vector<std::string>{"embed.weight", "out.weight"});

  // Shared: one submodule registered twice.
  auto shared = std::make_shared<nn::LinearImpl>(2, 2);
  auto outer = std::make_shared<nn::Module>();
  outer->register_module("a", shared);
  outer->register_module("b", shared);
  CHECK(outer->named_parameters().keys() == std::vector<std::string>{"a.weight", "a.bias"});
  CHECK(outer->named_modules().keys() == std::vector<std::string>{"", "a"});
  // state_dict keeps every name, as PyTorch's.
  CHECK(outer->state_dict().keys() == std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias"});
  // An optimizer over parameters() takes each tensor once (it refuses repeats).
  optim::SGD sgd(outer->parameters(), optim::SGDOptions(0.1));
  CHECK(sgd.parameters().size() == 2);
  // Moving moves the shared tensors once and keeps them shared.
  outer->to(kFloat64);
  CHECK(shared->weight.dtype() == kFloat64);
}

TEST_CASE("replace_module swaps a submodule; Sequential refuses", "[nn][module]") {
  Net net;
  nn::Linear head(2, 4);
  net->replace_module("head", head);
  CHECK(net->named_children()["head"].get() == head.get());
  CHECK(net->named_parameters().contains("head.bias"));  // the old head had none
  REQUIRE_THROWS_WITH(net->replace_module("tail", head), "No submodule named 'tail' in Net to replace");
  REQUIRE_THROWS_WITH(net->replace_module("head", std::shared_ptr<nn::LinearImpl>()),
                      "Cannot replace submodule 'head' with an empty one");
  nn::Sequential seq(nn::Linear(2, 2), nn::ReLU());
  REQUIRE_THROWS_WITH(seq->replace_module("0", nn::Linear(2, 2)),
                      "Sequential can't replace_module('0'): its forward() would still call the old module. Build a "
                      "new Sequential with the new module instead");
  auto self = std::make_shared<nn::Module>();
  REQUIRE_THROWS_WITH(self->register_module("me", self), "A module can't be its own submodule ('me')");
  nn::Module on_stack;
  REQUIRE_THROWS_WITH(on_stack.named_modules(),
                      "named_modules()/modules() need Module to be owned by a std::shared_ptr "
                      "(std::make_shared<Module>() or a module holder), as in libtorch");
}

TEST_CASE("linear and set_data refuse bad arguments", "[nn][linear]") {
  REQUIRE_THROWS_WITH(nn::functional::linear(Tensor(), zeros({2, 2})), "linear: input and weight must be defined");
  REQUIRE_THROWS_WITH(nn::functional::linear(zeros({2, 2}), zeros({2})),
                      "linear: weight must be 2-D (out_features, in_features), got [2]");
  REQUIRE_THROWS_WITH(nn::functional::linear(zeros({}), zeros({2, 1})),
                      "linear: input must have at least 1 dimension, got a scalar");
  Tensor p = zeros({2}, TensorOptions().requires_grad(true));
  REQUIRE_THROWS_WITH(p.set_data(Tensor()), "set_data: both tensors must be defined");
  REQUIRE_THROWS_WITH(p.set_data(zeros({2}, kInt64)),
                      "set_data: a tensor that requires grad needs floating point data, got int64");
  // set_data keeps identity and grad state.
  Tensor q = ones({3}, kFloat64);
  p.set_data(q);
  CHECK(p.dtype() == kFloat64);
  CHECK(p.numel() == 3);
  CHECK(p.requires_grad());
  CHECK(p.is_leaf());
}

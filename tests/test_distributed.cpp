// Process groups and DistributedDataParallel across real processes on this
// machine: each case starts 2 or 3 copies of this test binary (the hidden
// case "distributed worker", which runs the scenario TANDEM_DIST_SCENARIO
// with torchrun's variables set), and checks that every rank passed its own
// assertions, and, for the faults, how long the survivors took.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "distributed/process_group.h"
#include "nn/parallel/distributed.h"
#include "tests/helpers.h"
#include "tests/subprocess.h"

using namespace tandem;
using Catch::Contains;
namespace dist = tandem::distributed;

namespace {

// ---------------------------------------------------------------- the parent

uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

struct Launch {
  int world = 2;
  std::vector<int> ranks = {};  // those to start (all when empty)
  std::vector<std::string> env = {};
  double timeout_s = 90;
};

// Starts the scenario on each rank and waits for all of them.
std::vector<test::Result> run_world_once(const std::string& scenario, Launch launch) {
  std::string port = std::to_string(free_port());
  if (launch.ranks.empty())
    for (int r = 0; r < launch.world; ++r) launch.ranks.push_back(r);
  std::vector<std::unique_ptr<test::Child>> children;
  for (int r : launch.ranks) {
    test::RunOptions o = test::with_timeout(launch.timeout_s);
    o.env = {"MASTER_ADDR=127.0.0.1",           "MASTER_PORT=" + port,
             "RANK=" + std::to_string(r),       "WORLD_SIZE=" + std::to_string(launch.world),
             "LOCAL_RANK=" + std::to_string(r), "TANDEM_DIST_SCENARIO=" + scenario};
    o.env.insert(o.env.end(), launch.env.begin(), launch.env.end());
    children.push_back(std::make_unique<test::Child>(self_exe(), std::vector<std::string>{"distributed worker"}, o));
  }
  std::vector<test::Result> results;
  for (auto& c : children) results.push_back(c->finish());
  return results;
}

// The same, again on a new port when another process took the one chosen
// between free_port() and rank 0's listen (the suites run side by side).
std::vector<test::Result> run_world(const std::string& scenario, Launch launch = {}) {
  for (int attempt = 0;; ++attempt) {
    std::vector<test::Result> results = run_world_once(scenario, launch);
    bool taken = scenario != "same_master" && results[0].out.find("the port is in use") != std::string::npos;
    if (!taken || attempt == 2) return results;
  }
}

void require_all_passed(const std::vector<test::Result>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r << ": " << results[r]);
    REQUIRE(results[r].exit_code == 0);
  }
}

// ---------------------------------------------------------------- the ranks

// The message of the E that fn throws (failing the test if it throws nothing
// or something else).
template <typename E, typename F>
std::string message_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("nothing of the expected type was thrown");
  return {};
}

int env_int(const char* name) { return std::atoi(std::getenv(name)); }

// The values rank r contributes: distinct per rank and element.
Tensor contribution(int r, Dtype dtype) { return arange(6, TensorOptions(kFloat64)).add(10.0 * r + 1).to(dtype); }

void scenario_collectives() {
  dist::init_process_group("gloo");
  const int rank = dist::get_rank(), n = dist::get_world_size();
  REQUIRE(n == env_int("WORLD_SIZE"));
  REQUIRE(dist::is_initialized());
  REQUIRE(dist::get_backend() == "gloo");
  // DistributedSampler's defaults come from the default group.
  data::DistributedSampler sampler(10);
  REQUIRE(sampler.rank() == rank);
  REQUIRE(sampler.num_replicas() == n);
  for (Dtype dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8}) {
    INFO(dtype_name(dtype));
    std::vector<double> sum(6, 0), prod(6, 1), mn(6, 1e9), mx(6, -1e9);
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < 6; ++i) {
        double v = i + 10.0 * r + 1;
        sum[i] += v;
        prod[i] *= v;
        mn[i] = std::min(mn[i], v);
        mx[i] = std::max(mx[i], v);
      }
    Tensor t = contribution(rank, dtype);
    dist::all_reduce(t);
    test::check_values(t, test::as_dtype(sum, dtype));
    if (dtype != kUInt8 && dtype != kFloat16 && dtype != kBFloat16) {  // products past their range
      t = contribution(rank, dtype);
      dist::all_reduce(t, dist::ReduceOp::PRODUCT);
      test::check_values(t, prod);
    }
    t = contribution(rank, dtype);
    dist::all_reduce(t, dist::ReduceOp::MIN);
    test::check_values(t, mn);
    t = contribution(rank, dtype);
    dist::all_reduce(t, dist::ReduceOp::MAX);
    test::check_values(t, mx);
    if (is_floating_point(dtype)) {
      t = contribution(rank, dtype);
      dist::all_reduce(t, dist::ReduceOp::AVG);
      std::vector<double> avg = sum;
      for (double& v : avg) v /= n;
      test::check_close(t, test::make(test::as_dtype(avg, dtype), {6}, dtype));
    }
    // broadcast from the last rank
    t = contribution(rank, dtype);
    dist::broadcast(t, n - 1);
    test::check_equal(t, contribution(n - 1, dtype));
    // all_gather
    std::vector<Tensor> gathered;
    for (int r = 0; r < n; ++r) gathered.push_back(empty({6}, TensorOptions(dtype)));
    dist::all_gather(gathered, contribution(rank, dtype));
    for (int r = 0; r < n; ++r) test::check_equal(gathered[r], contribution(r, dtype));
    // reduce_scatter: rank r gets the sum over ranks of their input_list[r]
    std::vector<Tensor> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(contribution(rank + r, dtype));
    Tensor out = empty({6}, TensorOptions(dtype));
    dist::reduce_scatter(out, inputs);
    std::vector<double> expect(6, 0);
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < 6; ++i) expect[i] += i + 10.0 * (q + rank) + 1;
    test::check_values(out, test::as_dtype(expect, dtype));
  }
  // A non-contiguous tensor is reduced in place through a copy.
  Tensor base = contribution(rank, kFloat32).reshape({2, 3});
  Tensor tt = base.t();
  dist::all_reduce(tt);
  Tensor expect = zeros({2, 3});
  for (int r = 0; r < n; ++r) expect = expect.add(contribution(r, kFloat32).reshape({2, 3}));
  test::check_equal(base, expect);
  // allreduce_coalesced: tensors of two shapes in one exchange.
  auto pg = dist::default_group();
  std::vector<Tensor> two{full({3}, static_cast<double>(rank + 1)), full({2, 2}, 10.0 * (rank + 1))};
  pg->allreduce_coalesced(two)->wait();
  double tri = n * (n + 1) / 2.0;
  test::check_equal(two[0], full({3}, tri));
  test::check_equal(two[1], full({2, 2}, 10 * tri));
  // Several collectives in flight, waited for at the end, in order.
  std::vector<Tensor> ts;
  std::vector<std::shared_ptr<dist::Work>> works;
  for (int k = 0; k < 8; ++k) {
    ts.push_back(full({1000}, static_cast<double>(k + rank)));
    works.push_back(dist::all_reduce(ts.back(), dist::ReduceOp::SUM, /*async_op=*/true));
  }
  for (int k = 0; k < 8; ++k) {
    REQUIRE(works[k]->wait());
    REQUIRE(works[k]->is_success());
    test::check_equal(ts[k], full({1000}, static_cast<double>(k * n) + n * (n - 1) / 2.0));
  }
  REQUIRE_THAT(works[0]->what(), Contains("allreduce #") && Contains("SUM, float32, 1000 elements"));
  // cuda tensors go through host memory.
  for (const Device& d : test::devices()) {
    if (d.is_cpu()) continue;
    Tensor c = contribution(rank, kFloat32).to(d);
    dist::all_reduce(c);
    REQUIRE(c.device() == d);
    std::vector<double> s(6, 0);
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < 6; ++i) s[i] += i + 10.0 * r + 1;
    test::check_values(c, s);
  }
  // Errors at the door.
  Tensor ints = contribution(rank, kInt64);
  REQUIRE_THROWS_MATCHES(dist::all_reduce(ints, dist::ReduceOp::AVG), DtypeError,
                         Catch::Message("allreduce: ReduceOp::AVG needs a floating point tensor (the sum is divided by "
                                        "the world size), got int64; use SUM and divide yourself"));
  Tensor flags = zeros({3}, TensorOptions(kBool));
  REQUIRE_THROWS_MATCHES(dist::all_reduce(flags), NotImplementedError,
                         Catch::Message("allreduce with ReduceOp::SUM is not implemented for bool tensors on the gloo "
                                        "backend; convert to uint8 or int32 first"));
  std::vector<Tensor> short_list{empty({6})};
  REQUIRE_THROWS_MATCHES(dist::all_gather(short_list, empty({6})), ValueError,
                         Catch::Message(tandem::detail::str_cat("allgather: the output list must hold one tensor per "
                                                                "rank (",
                                                                n, "), got 1")));
  std::vector<Tensor> mixed{empty({6}), empty({6}, TensorOptions(kFloat64))};
  REQUIRE_THROWS_MATCHES(pg->allreduce(mixed), DtypeError,
                         Catch::Message("allreduce: every tensor must have the same dtype, but tensor 1 is float64 "
                                        "and tensor 0 is float32"));
  Tensor one = empty({6});
  REQUIRE_THROWS_MATCHES(dist::broadcast(one, n), ValueError,
                         Catch::Message(tandem::detail::str_cat("broadcast: invalid root rank ", n,
                                                                ", it should be in the interval [0, ", n - 1, "]")));
  REQUIRE_THROWS_MATCHES(dist::init_process_group("gloo"), ValueError,
                         Catch::Message("init_process_group: trying to initialize the default process group twice; "
                                        "call destroy_process_group() first"));
  dist::barrier();
  dist::destroy_process_group();
  REQUIRE_FALSE(dist::is_initialized());
  REQUIRE_THROWS_MATCHES(dist::get_rank(), ValueError,
                         Catch::Message("Default process group has not been initialized, please make sure to call "
                                        "init_process_group."));
}

// The model of the DDP scenarios: three layers, so that small buckets make several.
struct NetImpl : nn::Module {
  explicit NetImpl(int64_t hidden = 16)
      : fc1(register_module("fc1", nn::Linear(8, hidden))),
        fc2(register_module("fc2", nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", nn::Linear(hidden, 3))) {}
  Tensor forward(const Tensor& x) { return fc3(fc2(fc1(x).tanh()).tanh()); }
  nn::Linear fc1, fc2, fc3;
};
TANDEM_MODULE(Net);

// The global batch every rank knows; rank r trains on rows [r*b, (r+1)*b).
std::pair<Tensor, Tensor> global_batch(int64_t rows) {
  Generator gen(123);
  Tensor x = randn({rows, 8}, gen, TensorOptions(kFloat64));
  Tensor y = randint(0, 3, {rows}, gen);
  return {x, y};
}

Net make_net(uint64_t seed, int64_t hidden = 16) {
  manual_seed(seed);
  Net net(hidden);
  net->to(kFloat64);
  return net;
}

// DDP's gradients after each of two SGD steps equal one process's on the
// whole batch, and the replicas stay equal; rank r starts from another
// initialisation, which the construction's broadcast replaces with rank 0's.
void scenario_ddp() {
  dist::init_process_group("gloo");
  const int rank = dist::get_rank(), n = dist::get_world_size();
  const int64_t b = 5;
  auto [x, y] = global_batch(b * n);
  Net local = make_net(100 + rank);
  // Tiny buckets: one or two parameters each, so the ordering across buckets is exercised.
  nn::parallel::DistributedDataParallel ddp(
      local, nn::parallel::DistributedDataParallelOptions().bucket_cap_mb(0.0002).first_bucket_cap_mb(0.0001));
  REQUIRE(ddp->bucket_indices().size() >= 3);
  REQUIRE(ddp->bucket_indices().front().front() == 5);  // fc3.bias first: reverse order
  Net ref = make_net(100);                              // rank 0's initialisation, in one process
  for (const auto& item : ref->named_parameters())
    test::check_equal(local->named_parameters()[item.key()], item.value());
  optim::SGD opt_ddp(local->parameters(), optim::SGDOptions(0.1));
  optim::SGD opt_ref(ref->parameters(), optim::SGDOptions(0.1));
  for (int step = 0; step < 2; ++step) {
    opt_ddp.zero_grad();
    opt_ref.zero_grad();
    Tensor xs = x.slice(0, rank * b, (rank + 1) * b), ys = y.slice(0, rank * b, (rank + 1) * b);
    nn::functional::cross_entropy(ddp(xs), ys).backward();
    nn::functional::cross_entropy(ref(x), y).backward();
    auto mine = local->named_parameters();
    for (const auto& item : ref->named_parameters()) {
      INFO("step " << step << " " << item.key());
      test::check_close(mine[item.key()].grad(), item.value().grad(), test::Tolerance{1e-12, 1e-12});
    }
    opt_ddp.step();
    opt_ref.step();
  }
  // Two passes reduced, their allreduces timed.
  nn::parallel::Reducer::CommStats cs = ddp->comm_stats();
  REQUIRE(cs.passes == 2);
  REQUIRE(cs.allreduce_s > 0);
  REQUIRE(cs.exposed_s >= 0);
  ddp->reset_comm_stats();
  REQUIRE(ddp->comm_stats().passes == 0);
  // The state dict keeps PyTorch's "module." prefix.
  REQUIRE(ddp->state_dict().contains("module.fc1.weight"));
  dist::destroy_process_group();
}

// Two micro-batches under no_sync, then a synchronised one: the average of
// the summed gradients, as one process gets on the three whole batches.
void scenario_no_sync() {
  dist::init_process_group("gloo");
  const int rank = dist::get_rank(), n = dist::get_world_size();
  const int64_t b = 4;
  auto [x, y] = global_batch(3 * b * n);
  Net local = make_net(7);
  nn::parallel::DistributedDataParallel ddp(local);
  Net ref = make_net(7);
  auto shard = [&](const Tensor& t, int k, int r) { return t.slice(0, (k * n + r) * b, (k * n + r + 1) * b); };
  for (int k = 0; k < 3; ++k) {
    if (k < 2) {
      auto guard = ddp->no_sync();
      nn::functional::cross_entropy(ddp(shard(x, k, rank)), shard(y, k, rank)).backward();
    } else {
      nn::functional::cross_entropy(ddp(shard(x, k, rank)), shard(y, k, rank)).backward();
    }
    Tensor xk = x.slice(0, k * n * b, (k + 1) * n * b), yk = y.slice(0, k * n * b, (k + 1) * n * b);
    nn::functional::cross_entropy(ref(xk), yk).backward();
  }
  auto mine = local->named_parameters();
  for (const auto& item : ref->named_parameters()) {
    INFO(item.key());
    test::check_close(mine[item.key()].grad(), item.value().grad(), test::Tolerance{1e-12, 1e-12});
  }
  dist::destroy_process_group();
}

// A layer the loss does not use: an error naming it without
// find_unused_parameters, averaged gradients of the rest with it.
struct BranchyImpl : nn::Module {
  BranchyImpl() : used(register_module("used", nn::Linear(8, 3))), spare(register_module("spare", nn::Linear(8, 3))) {}
  Tensor forward(const Tensor& x) { return used(x); }
  nn::Linear used, spare;
};
TANDEM_MODULE(Branchy);

void scenario_unused() {
  dist::init_process_group("gloo");
  const int rank = dist::get_rank(), n = dist::get_world_size();
  auto [x, y] = global_batch(4 * n);
  Tensor xs = x.slice(0, rank * 4, rank * 4 + 4).to(kFloat32), ys = y.slice(0, rank * 4, rank * 4 + 4);
  {
    manual_seed(3);
    Branchy model;
    nn::parallel::DistributedDataParallel ddp(model);
    REQUIRE_THROWS_MATCHES(
        nn::functional::cross_entropy(ddp(xs), ys).backward(), DistributedError,
        Catch::Message(tandem::detail::str_cat(
            "DistributedDataParallel: this backward pass on rank ", rank,
            " gave no gradient to 2 parameters (spare.weight, spare.bias), so their buckets cannot be reduced. Use "
            "every parameter in producing the loss, or construct DistributedDataParallel with "
            "find_unused_parameters(true)")));
  }
  dist::barrier();
  {
    manual_seed(3);
    Branchy model;
    nn::parallel::DistributedDataParallel ddp(
        model, nn::parallel::DistributedDataParallelOptions().find_unused_parameters(true));
    nn::functional::cross_entropy(ddp(xs), ys).backward();
    REQUIRE_FALSE(model->spare->weight.grad().defined());
    manual_seed(3);
    Branchy ref;
    nn::functional::cross_entropy(ref(x.to(kFloat32)), y).backward();
    test::check_close(model->used->weight.grad(), ref->used->weight.grad());
    // A second pass: the reducer was re-armed.
    model->zero_grad();
    nn::functional::cross_entropy(ddp(xs), ys).backward();
    test::check_close(model->used->weight.grad(), ref->used->weight.grad());
  }
  // Two forwards before one backward (a GAN's discriminator, two views):
  // the pass reduces once, as PyTorch's.
  {
    manual_seed(3);
    Net model;
    nn::parallel::DistributedDataParallel ddp(model);
    Tensor xf = xs;
    Tensor a = ddp(xf), b = ddp(xf.mul(2));
    a.add(b).sum().backward();
    manual_seed(3);
    Net ref;
    Tensor xa = x.to(kFloat32);
    ref(xa).add(ref(xa.mul(2))).sum().div(n).backward();
    test::check_close(model->fc1->weight.grad(), ref->fc1->weight.grad());
    // A pass that throws after DDP's hooks began: the next forward says so.
    auto boom =
        autograd::register_post_accumulate_grad_hook(model->fc3->bias, [](Tensor&) { throw ValueError("boom"); });
    REQUIRE_THROWS_MATCHES(ddp(xf).sum().backward(), ValueError, Catch::Message("boom"));
    boom.remove();
    REQUIRE_THAT(message_of<DistributedError>([&] { (void)ddp(xf); }),
                 Catch::StartsWith("DistributedDataParallel: Expected to have finished reduction in the prior "
                                   "iteration before starting a new one. The last backward pass on rank ") &&
                     Contains("stopped (it threw) before its gradients were averaged"));
    model->zero_grad();
    ddp(xf).sum().backward();  // and the one after works
    REQUIRE(model->fc1->weight.grad().defined());
  }
  dist::destroy_process_group();
}

// Rank 1 builds a wider model: every rank refuses at construction.
void scenario_mismatch() {
  dist::init_process_group("gloo");
  const int rank = dist::get_rank();
  Net model = make_net(1, rank == 1 ? 12 : 16);
  REQUIRE_THROWS_MATCHES(nn::parallel::DistributedDataParallel(model), DistributedError,
                         Catch::Message("DistributedDataParallel: DDP expects the same model on every rank, but "
                                        "parameter 0 is 'fc1.weight' [16, 8] float64 on rank 0 and 'fc1.weight' "
                                        "[12, 8] float64 on rank 1. Build the same model on every rank (the same "
                                        "layers, in the same order)"));
  dist::destroy_process_group();
}

// The pytorch/examples cpp/distributed loop: each gradient all-reduced by
// hand after backward, then divided.
void scenario_manual_allreduce() {
  dist::init_process_group("gloo");
  const int rank = dist::get_rank(), n = dist::get_world_size();
  auto [x, y] = global_batch(3 * n);
  Net model = make_net(11);
  Net ref = make_net(11);
  nn::functional::cross_entropy(model(x.slice(0, 3 * rank, 3 * rank + 3)), y.slice(0, 3 * rank, 3 * rank + 3))
      .backward();
  for (Tensor& p : model->parameters()) {
    Tensor g = p.grad();
    dist::all_reduce(g);
    g.div_(static_cast<double>(n));
  }
  nn::functional::cross_entropy(ref(x), y).backward();
  auto mine = model->named_parameters();
  for (const auto& item : ref->named_parameters())
    test::check_close(mine[item.key()].grad(), item.value().grad(), test::Tolerance{1e-12, 1e-12});
  dist::destroy_process_group();
}

// Faults. The survivors print what they caught and how long it took.
void scenario_peer_exits() {
  dist::init_process_group("gloo", dist::InitProcessGroupOptions().timeout(std::chrono::seconds(3)));
  const int rank = dist::get_rank();
  Tensor t = ones({1000});
  dist::all_reduce(t);
  if (rank == 1) std::_Exit(3);
  auto start = std::chrono::steady_clock::now();
  std::string m = message_of<DistributedError>([&] { dist::all_reduce(t); });
  INFO(m);
  REQUIRE_THAT(m, Contains("allreduce #3 (SUM, float32, 1000 elements) failed on rank 0 of 2 (gloo, timeout 3 s)"));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(s < 4.0);
  // Leaving the broken group returns at once.
  start = std::chrono::steady_clock::now();
  dist::destroy_process_group();
  REQUIRE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 2.0);
  std::_Exit(0);
}

void scenario_peer_stalls() {
  dist::init_process_group("gloo", dist::InitProcessGroupOptions().timeout(std::chrono::milliseconds(1500)));
  const int rank = dist::get_rank();
  Tensor t = ones({10});
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(6));
    std::_Exit(0);
  }
  auto start = std::chrono::steady_clock::now();
  std::string m = message_of<DistributedError>([&] { dist::all_reduce(t); });
  INFO(m);
  REQUIRE_THAT(m, Contains("allreduce #2 (SUM, float32, 10 elements) failed on rank 0 of 2 (gloo, timeout 1.5 s)") &&
                      Contains("Another rank exited, died, stalled, or called a different collective"));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(s < 3.0);
  std::_Exit(0);
}

void scenario_never_starts() {
  auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(dist::init_process_group("gloo", dist::InitProcessGroupOptions().timeout(std::chrono::seconds(2))),
                    DistributedError);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(s < 4.0);
}

void scenario_init_errors() {
  REQUIRE_THROWS_MATCHES(dist::init_process_group("nccl"), NotImplementedError,
                         Catch::Message("init_process_group: the nccl backend is not in this Tandem yet; use gloo "
                                        "(cuda tensors go through host memory there)"));
  REQUIRE_THROWS_MATCHES(dist::init_process_group("glo"), ValueError,
                         Catch::Message("init_process_group: invalid backend 'glo'; choose gloo (cpu tensors), nccl "
                                        "or mpi"));
  REQUIRE_THROWS_MATCHES(
      dist::init_process_group("gloo", dist::InitProcessGroupOptions().init_method("udp://x")), ValueError,
      Catch::Message("init_process_group: unknown init_method 'udp://x'; use env://, tcp://HOST:PORT or file:///PATH"));
  REQUIRE_THROWS_MATCHES(dist::init_process_group("gloo", dist::InitProcessGroupOptions().rank(5)), ValueError,
                         Catch::Message("init_process_group: invalid rank 5, rank should be in the interval [0, 1] "
                                        "for a world size of 2"));
  unsetenv("MASTER_ADDR");
  REQUIRE_THROWS_MATCHES(dist::init_process_group("gloo"), ValueError,
                         Catch::Message("Error initializing tandem::distributed using env:// rendezvous: environment "
                                        "variable MASTER_ADDR expected, but not set (the host of rank 0, e.g. "
                                        "127.0.0.1)"));
  unsetenv("WORLD_SIZE");
  REQUIRE_THROWS_MATCHES(dist::init_process_group("gloo"), ValueError,
                         Catch::Message("Error initializing tandem::distributed using env:// rendezvous: environment "
                                        "variable WORLD_SIZE expected, but not set (looked for WORLD_SIZE, "
                                        "OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS; torchrun and mpirun set "
                                        "them), or pass world_size in InitProcessGroupOptions"));
  REQUIRE_THROWS_MATCHES(dist::destroy_process_group(), ValueError,
                         Catch::Message("destroy_process_group: Default process group has not been initialized, "
                                        "please make sure to call init_process_group."));
}

// TANDEM_DISTRIBUTED_DEBUG: ranks that call different collectives get an
// error naming both sides, and the group goes on working.
void scenario_debug_mismatch() {
  dist::init_process_group("gloo");
  const int rank = dist::get_rank();
  Tensor t = ones({rank == 0 ? 10 : 20});
  REQUIRE_THROWS_MATCHES(dist::all_reduce(t), DistributedError,
                         Catch::Message("TANDEM_DISTRIBUTED_DEBUG: collective #2 differs between ranks: rank 0 called "
                                        "allreduce (SUM, float32, 10 elements), rank 1 called allreduce (SUM, "
                                        "float32, 20 elements). Every rank must call the same collectives, with the "
                                        "same sizes, in the same order; none of them ran this one"));
  test::check_equal(t, ones({rank == 0 ? 10 : 20}));  // untouched
  Tensor u = ones({4});
  if (rank == 0)
    REQUIRE_THROWS_AS(dist::all_reduce(u), DistributedError);
  else
    REQUIRE_THAT(message_of<DistributedError>([&] { dist::broadcast(u, 0); }),
                 Contains("rank 0 called allreduce (SUM, float32, 4 elements), rank 1 called broadcast (from rank 0, "
                          "float32, 4 elements)"));
  dist::all_reduce(u);
  test::check_equal(u, full({4}, 2.0));
  // Ranks on cuda:0 and cuda:1 make the same call.
  std::vector<Device> gpus;
  for (const Device& d : test::devices())
    if (d.is_cuda()) gpus.push_back(d);
  if (gpus.size() >= 2) {
    Tensor g = ones({3}).to(gpus[static_cast<size_t>(rank)]);
    dist::all_reduce(g);
    test::check_values(g, {2, 2, 2});
  }
  dist::destroy_process_group();
}

// Two processes given the same rank: each one that is refused passes.
void scenario_same_rank() {
  REQUIRE_THAT(message_of<DistributedError>([] {
                 dist::init_process_group("gloo", dist::InitProcessGroupOptions().timeout(std::chrono::seconds(3)));
               }),
               Contains(tandem::detail::str_cat("init_process_group: rank ", env_int("RANK"),
                                                " has joined the store at tcp://127.0.0.1:")) &&
                   Contains(" 2 times: two processes were given the same rank, or the store holds an earlier "
                            "run's keys"));
}

void scenario_same_master() {
  REQUIRE_THAT(message_of<DistributedError>([] {
                 dist::init_process_group("gloo", dist::InitProcessGroupOptions().timeout(std::chrono::seconds(3)));
               }),
               Contains("TCPStore: cannot listen on 127.0.0.1:") && Contains("the port is in use"));
}

}  // namespace

TEST_CASE("distributed worker", "[.][dist_worker]") {
  const char* scenario = std::getenv("TANDEM_DIST_SCENARIO");
  if (scenario == nullptr) return;  // run by a filter, not by a parent
  std::string s = scenario;
  if (s == "collectives")
    scenario_collectives();
  else if (s == "ddp")
    scenario_ddp();
  else if (s == "no_sync")
    scenario_no_sync();
  else if (s == "unused")
    scenario_unused();
  else if (s == "mismatch")
    scenario_mismatch();
  else if (s == "manual")
    scenario_manual_allreduce();
  else if (s == "peer_exits")
    scenario_peer_exits();
  else if (s == "peer_stalls")
    scenario_peer_stalls();
  else if (s == "never_starts")
    scenario_never_starts();
  else if (s == "init_errors")
    scenario_init_errors();
  else if (s == "same_rank")
    scenario_same_rank();
  else if (s == "same_master")
    scenario_same_master();
  else if (s == "debug_mismatch")
    scenario_debug_mismatch();
  else
    FAIL("unknown scenario " << s);
}

TEST_CASE("collectives on 2 and 3 gloo ranks", "[distributed]") {
  for (int world : {2, 3}) {
    INFO("world size " << world);
    require_all_passed(run_world("collectives", Launch{world}));
  }
}

TEST_CASE("DDP gradients equal one process's on the whole batch", "[distributed]") {
  for (int world : {2, 3}) {
    INFO("world size " << world);
    require_all_passed(run_world("ddp", Launch{world}));
  }
}

TEST_CASE("DDP no_sync accumulates, the next pass averages the sum", "[distributed]") {
  require_all_passed(run_world("no_sync"));
}

TEST_CASE("DDP unused parameters", "[distributed]") { require_all_passed(run_world("unused")); }

TEST_CASE("DDP refuses models that differ between ranks", "[distributed]") {
  require_all_passed(run_world("mismatch"));
}

TEST_CASE("TANDEM_DISTRIBUTED_DEBUG names both sides of a mismatched collective", "[distributed]") {
  require_all_passed(run_world("debug_mismatch", Launch{2, {}, {"TANDEM_DISTRIBUTED_DEBUG=1"}}));
}

TEST_CASE("a libtorch-style loop all-reducing each gradient by hand", "[distributed]") {
  require_all_passed(run_world("manual"));
}

TEST_CASE("init_process_group errors", "[distributed]") {
  Launch one{2, {0}};
  require_all_passed(run_world("init_errors", one));
}

TEST_CASE("faults: a rank that exits, stalls, never starts, or repeats a rank", "[distributed]") {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<test::Result> r = run_world("peer_exits", Launch{2, {}, {}, 30});
  INFO(r[0]);
  REQUIRE(r[0].exit_code == 0);
  REQUIRE(r[1].exit_code == 3);
  r = run_world("peer_stalls", Launch{2, {}, {}, 30});
  INFO(r[0]);
  REQUIRE(r[0].exit_code == 0);
  r = run_world("never_starts", Launch{2, {0}, {}, 30});
  require_all_passed(r);
  // Two rank 0s: the second cannot serve the store.
  r = run_world("same_master", Launch{2, {0, 0}, {}, 30});
  INFO(r[0] << r[1]);
  REQUIRE(((r[0].exit_code == 0) + (r[1].exit_code == 0)) >= 1);
  // Two rank 1s of 3: one is refused; the others wait for rank 2, which never comes.
  r = run_world("same_rank", Launch{3, {0, 1, 1}, {}, 30});
  INFO(r[0] << r[1] << r[2]);
  REQUIRE(((r[1].exit_code == 0) + (r[2].exit_code == 0)) >= 1);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(s < 60);
}

// bench_allreduce: the allreduce time and bus bandwidth of Tandem's gloo
// process group (distributed::all_reduce, float32 SUM) against Gloo called
// directly on a context of its own, in the same processes and the same run,
// the two interleaved sample by sample, for 1K to 16M floats. The ranks are
// forked from this process and meet on 127.0.0.1.
//
//   build/bench/bench_allreduce [--world 2] [--max-floats 16777216] [--seconds 0.5]
//
// Bus bandwidth is NCCL's: bytes * 2 (n - 1) / n / time, what each rank's
// links carry in a ring allreduce.
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "tensor/ops/factory.h"

using namespace tandem;

namespace {

uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Gloo's rendezvous over a Tandem store (the one gloo.cpp has is private).
class GlooStore : public ::gloo::rendezvous::Store {
 public:
  explicit GlooStore(distributed::Store& s) : s_(s) {}
  void set(const std::string& k, const std::vector<char>& d) override {
    s_.set(k, std::vector<uint8_t>(d.begin(), d.end()));
  }
  std::vector<char> get(const std::string& k) override {
    auto v = s_.get(k);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { s_.wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override { s_.wait(keys, t); }

 private:
  distributed::Store& s_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run_rank(int rank, int world, uint16_t raw_port, int64_t max_floats, double seconds) {
  distributed::init_process_group("gloo");
  // Raw Gloo: its own store and context, on the same loopback device kind.
  distributed::TCPStore raw_store("127.0.0.1", raw_port, world, rank == 0);
  ::gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = ::gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, world);
  GlooStore gs(raw_store);
  context->connectFullMesh(gs, device);
  uint32_t tag = 0;
  if (rank == 0)
    std::printf("%10s %10s %12s %12s %10s %10s %9s\n", "floats", "bytes", "tandem_us", "gloo_us", "tandem_GB/s",
                "gloo_GB/s", "overhead");
  for (int64_t n = 1024; n <= max_floats; n *= 4) {
    Tensor t = full({n}, 1.0);
    std::vector<float> raw(static_cast<size_t>(n), 1.0f);
    std::vector<double> ours, theirs;
    // Warm-up, then samples until the time is spent (at least 5 of each);
    // every rank must run the same count: rank 0 decides and broadcasts it.
    distributed::all_reduce(t);
    auto t0 = std::chrono::steady_clock::now();
    distributed::all_reduce(t);
    double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Tensor count =
        full({1}, static_cast<double>(std::clamp<int64_t>(static_cast<int64_t>(seconds / (2 * one)), 5, 500)));
    distributed::broadcast(count, 0);
    int64_t samples = static_cast<int64_t>(count.item<double>());
    for (int64_t k = 0; k < samples; ++k) {
      auto a = std::chrono::steady_clock::now();
      distributed::all_reduce(t);
      auto b = std::chrono::steady_clock::now();
      ::gloo::AllreduceOptions o(context);
      o.setOutput<float>(raw.data(), static_cast<size_t>(n));
      o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
      o.setTag(tag++);
      ::gloo::allreduce(o);
      auto c = std::chrono::steady_clock::now();
      ours.push_back(std::chrono::duration<double>(b - a).count());
      theirs.push_back(std::chrono::duration<double>(c - b).count());
    }
    if (rank == 0) {
      double bytes = static_cast<double>(n) * 4, factor = 2.0 * (world - 1) / world;
      double mo = median(ours), mt = median(theirs);
      std::printf("%10lld %10.0f %12.1f %12.1f %10.2f %10.2f %8.1f%%\n", static_cast<long long>(n), bytes, mo * 1e6,
                  mt * 1e6, bytes * factor / mo / 1e9, bytes * factor / mt / 1e9, (mo / mt - 1) * 100);
      std::fflush(stdout);
    }
  }
  distributed::barrier();
  distributed::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int world = 2;
  int64_t max_floats = int64_t{1} << 24;
  double seconds = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--world")
      world = std::atoi(argv[i + 1]);
    else if (a == "--max-floats")
      max_floats = std::atoll(argv[i + 1]);
    else if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_allreduce: unknown flag %s (--world N, --max-floats N, --seconds S)\n", argv[i]);
      return 2;
    }
  }
  std::string port = std::to_string(free_port());
  uint16_t raw_port = free_port();
  std::printf("bench_allreduce: %d ranks on 127.0.0.1, float32 SUM, median of interleaved samples\n", world);
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      try {
        std::_Exit(run_rank(r, world, raw_port, max_floats, seconds));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        std::_Exit(1);
      }
    }
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}

// init_process_group: the rank and world size from the options or the
// environment (torchrun's variables, then mpirun's and Slurm's), the store
// from the init method, the checks that the ranks are distinct and the
// store is fresh, then the backend's group.
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "distributed/process_group.h"
#include "distributed/process_group_private.h"
#include "tensor/core/errors.h"

namespace tandem::distributed {

namespace {

using tandem::detail::str_cat;

// The first of the variables that is set, and which one it was.
std::optional<std::pair<std::string, std::string>> first_env(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return std::make_pair(std::string(n), std::string(v));
  return std::nullopt;
}

int parse_int(const std::string& what, const std::string& value, int64_t lo, int64_t hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TANDEM_CHECK(used == value.size() && !value.empty() && v >= lo && v <= hi, ValueError, "init_process_group: ", what,
               " must be an integer in [", lo, ", ", hi, "], got '", value, "'");
  return static_cast<int>(v);
}

// rank or world size: the option when given, else the environment.
int from_env_or_option(int option, const char* what, std::initializer_list<const char*> names, bool required,
                       const std::string& init_method) {
  if (option >= 0) return option;
  auto found = first_env(names);
  if (!found) {
    std::string list;
    for (const char* n : names) list += (list.empty() ? "" : ", ") + std::string(n);
    TANDEM_CHECK(!required, ValueError, "Error initializing tandem::distributed using ", init_method,
                 " rendezvous: environment variable ", *names.begin(), " expected, but not set (looked for ", list,
                 "; torchrun and mpirun set them), or pass ", what, " in InitProcessGroupOptions");
    return -1;
  }
  return parse_int(str_cat(found->first, " (the ", what, ")"), found->second, 0, 1 << 20);
}

struct Rendezvous {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
};

std::pair<std::string, uint16_t> host_port(const std::string& text, const std::string& method) {
  size_t colon = text.rfind(':');
  TANDEM_CHECK(colon != std::string::npos && colon > 0, ValueError, "init_process_group: ", method,
               " needs HOST:PORT, got '", text, "'");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = parse_int(str_cat("the port of ", method), text.substr(colon + 1), 1, 65535);
  return {host, static_cast<uint16_t>(port)};
}

// Before any store: a rank past the world would wait for a master forever.
void check_rank(const Rendezvous& r) {
  TANDEM_CHECK(r.world_size >= 1, ValueError, "init_process_group: the world size must be at least 1, got ",
               r.world_size);
  TANDEM_CHECK(r.rank >= 0 && r.rank < r.world_size, ValueError, "init_process_group: invalid rank ", r.rank,
               ", rank should be in the interval [0, ", r.world_size - 1, "] for a world size of ", r.world_size);
}

Rendezvous rendezvous(const InitProcessGroupOptions& o) {
  Rendezvous r;
  const std::string& method = o.init_method();
  if (o.store()) {
    TANDEM_CHECK(o.rank() >= 0 && o.world_size() > 0, ValueError,
                 "init_process_group: with a store, give rank and world_size too (got rank ", o.rank(), ", world_size ",
                 o.world_size(), ")");
    r.store = o.store();
    r.rank = o.rank();
    r.world_size = o.world_size();
    check_rank(r);
    return r;
  }
  if (method.rfind("env://", 0) == 0) {
    r.world_size = from_env_or_option(o.world_size(), "world_size",
                                      {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, true, method);
    r.rank = from_env_or_option(o.rank(), "rank", {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, true,
                                method);
    auto addr = first_env({"MASTER_ADDR"});
    TANDEM_CHECK(addr.has_value(), ValueError,
                 "Error initializing tandem::distributed using env:// rendezvous: "
                 "environment variable MASTER_ADDR expected, but not set (the host of rank 0, e.g. 127.0.0.1)");
    auto port = first_env({"MASTER_PORT"});
    TANDEM_CHECK(port.has_value(), ValueError,
                 "Error initializing tandem::distributed using env:// rendezvous: "
                 "environment variable MASTER_PORT expected, but not set (a free TCP port on rank 0's host, e.g. "
                 "29500)");
    int p = parse_int("MASTER_PORT", port->second, 1, 65535);
    check_rank(r);
    r.store =
        std::make_shared<TCPStore>(addr->second, static_cast<uint16_t>(p), r.world_size, r.rank == 0, o.timeout());
  } else if (method.rfind("tcp://", 0) == 0) {
    TANDEM_CHECK(o.rank() >= 0 && o.world_size() > 0, ValueError, "init_process_group: ", method,
                 " needs rank and world_size in InitProcessGroupOptions (got rank ", o.rank(), ", world_size ",
                 o.world_size(), ")");
    auto [host, port] = host_port(method.substr(6), "tcp://");
    r.rank = o.rank();
    r.world_size = o.world_size();
    check_rank(r);
    r.store = std::make_shared<TCPStore>(host, port, r.world_size, r.rank == 0, o.timeout());
  } else if (method.rfind("file://", 0) == 0) {
    TANDEM_CHECK(o.rank() >= 0 && o.world_size() > 0, ValueError, "init_process_group: ", method,
                 " needs rank and world_size in InitProcessGroupOptions (got rank ", o.rank(), ", world_size ",
                 o.world_size(), ")");
    std::string path = method.substr(7);
    TANDEM_CHECK(!path.empty(), ValueError, "init_process_group: file:// needs a path, as file:///tmp/run1");
    r.rank = o.rank();
    r.world_size = o.world_size();
    check_rank(r);
    r.store = std::make_shared<FileStore>(path, o.timeout());
  } else {
    TANDEM_CHECK(false, ValueError, "init_process_group: unknown init_method '", method,
                 "'; use env://, tcp://HOST:PORT or file:///PATH");
  }
  return r;
}

}  // namespace

void init_process_group(const std::string& backend, const InitProcessGroupOptions& options) {
  TANDEM_CHECK(backend == "gloo" || backend == "nccl" || backend == "mpi", ValueError,
               "init_process_group: invalid backend '", backend, "'; choose gloo (cpu tensors), nccl or mpi");
  TANDEM_CHECK(backend == "gloo", NotImplementedError, "init_process_group: the ", backend,
               " backend is not in this Tandem yet; use gloo (cuda tensors go through host memory there)");
  TANDEM_CHECK(!is_initialized(), ValueError,
               "init_process_group: trying to initialize the default process group twice; call "
               "destroy_process_group() first");
  TANDEM_CHECK(options.timeout().count() > 0, ValueError, "init_process_group: the timeout must be positive, got ",
               options.timeout().count(), " ms");
  Rendezvous r = rendezvous(options);
  // Two processes with one rank, or a file store left by an earlier run,
  // would otherwise meet in Gloo's rendezvous and hang or fail obscurely.
  int64_t seen = r.store->add(str_cat("tandem/init/rank/", r.rank), 1);
  TANDEM_CHECK(seen == 1, DistributedError, "init_process_group: rank ", r.rank, " has joined the store at ",
               r.store->describe(), " ", seen,
               " times: two processes were given the same rank, or the store "
               "holds an earlier run's keys (a file:// folder is for one run: remove it or give each run a new one)");
  auto prefixed = std::make_shared<PrefixStore>("default_pg/" + backend, r.store);
  std::shared_ptr<ProcessGroup> group = make_gloo_group(prefixed, r.rank, r.world_size, options.timeout());
  // Every rank has its connections before any returns: rank 0, which serves
  // the store, may not go while another still reads addresses from it.
  {
    detail::BlockingScope blocking;
    group->barrier()->wait();
  }
  detail::set_default_group(std::move(group), r.store, backend);
}

}  // namespace tandem::distributed

// The rendezvous stores (distributed/store.h), in one process: a TCPStore
// master on port 0 with clients on threads, FileStores sharing a folder, and
// PrefixStore over both. Semantics, races between clients, waits that end by
// a set or by the timeout (and how long they take), and every error message.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "distributed/store.h"
#include "helpers.h"

using namespace tandem;
using namespace std::chrono_literals;
using Catch::Contains;
using distributed::FileStore;
using distributed::PrefixStore;
using distributed::TCPStore;
namespace fs = std::filesystem;

namespace {

using test::TempDir;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A socket listening on 127.0.0.1 that nobody accepts from: connections
// complete in the kernel's backlog and their bytes go unread.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A port that was free a moment ago (bound, then closed).
uint16_t free_port() {
  Listener l;
  return l.port();
}

std::string addr(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// Runs fn on a thread, keeping what it threw for the test's thread to check
// (Catch2's assertions are not for other threads).
class Background {
 public:
  explicit Background(std::function<void()> fn)
      : thread_([this, fn = std::move(fn)] {
          try {
            fn();
          } catch (const std::exception& e) {
            error_ = e.what();
          }
        }) {}
  ~Background() {
    if (thread_.joinable()) thread_.join();
  }
  // What fn threw ("" if nothing), once it has returned.
  std::string join() {
    thread_.join();
    return error_;
  }

 private:
  std::string error_;
  std::thread thread_;
};

// add(key, 1) `adds` times from each of `stores.size()` threads; every value
// add returned, sorted.
template <typename StoreT>
std::vector<int64_t> add_race(const std::vector<StoreT*>& stores, int adds) {
  std::vector<std::vector<int64_t>> seen(stores.size());
  {
    std::vector<std::unique_ptr<Background>> threads;
    for (size_t t = 0; t < stores.size(); ++t) {
      threads.push_back(std::make_unique<Background>([&, t] {
        for (int i = 0; i < adds; ++i) seen[t].push_back(stores[t]->add("count", 1));
      }));
    }
    for (auto& th : threads) REQUIRE(th->join().empty());
  }
  std::vector<int64_t> all;
  for (const auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  return all;
}

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 1);
  return v;
}

// A connection to 127.0.0.1:port that speaks no protocol of its own.
int connect_raw(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

// A request as the protocol frames it (distributed/store.cpp's header):
// u8 code, u32 field count, then per field a u64 length and the bytes.
std::string frame(uint8_t code, const std::vector<std::string>& fields) {
  std::string out(1, static_cast<char>(code));
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((fields.size() >> shift) & 0xff);
  for (const std::string& f : fields) {
    for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((uint64_t{f.size()} >> shift) & 0xff);
    out += f;
  }
  return out;
}

// Whether the server closes fd within 2 s, reading and dropping what it says.
bool closed_by_peer(int fd) {
  char buf[256];
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 2000) == 1) {
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

const std::string kKeyTimeoutFix =
    " yet: the rank that should may have failed or not reached that point; if it is only slow, raise the timeout)";

}  // namespace

// ---- TCPStore ----------------------------------------------------------

TEST_CASE("TCPStore: a master on port 0 and its clients set, get, check and delete keys", "[distributed][store]") {
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 2s);
  REQUIRE(master.port() != 0);
  CHECK(master.is_master());
  CHECK(master.host() == "127.0.0.1");
  CHECK(master.describe() == "tcp://" + addr(master.port()));
  TCPStore client("127.0.0.1", master.port(), std::nullopt, false, 2s);
  CHECK(!client.is_master());
  CHECK(client.port() == master.port());

  master.set("a", "1");
  CHECK(client.get_string("a") == "1");
  client.set("a", "2");
  CHECK(master.get_string("a") == "2");
  CHECK(client.check({"a"}));
  CHECK(!client.check({"a", "b"}));
  CHECK(client.check({}));
  CHECK(client.delete_key("a"));
  CHECK(!master.delete_key("a"));
  CHECK(!master.check({"a"}));

  // A host name, resolved with getaddrinfo.
  TCPStore by_name("localhost", master.port(), std::nullopt, false, 2s);
  CHECK(by_name.describe() == "tcp://localhost:" + std::to_string(master.port()));
  master.set("b", "x");
  CHECK(by_name.get_string("b") == "x");
}

TEST_CASE("TCPStore: values are bytes: zero bytes, the empty value, 1 MiB", "[distributed][store]") {
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 2s);
  TCPStore client("127.0.0.1", master.port(), std::nullopt, false, 2s);
  const std::vector<uint8_t> zeros = {0, 1, 0, 255, 0};
  master.set("zeros", zeros);
  CHECK(client.get("zeros") == zeros);
  master.set("empty", std::vector<uint8_t>{});
  CHECK(client.get("empty").empty());
  CHECK(client.check({"empty"}));

  std::vector<uint8_t> big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  client.set("big", big);
  CHECK(master.get("big") == big);
  // A key with a zero byte and a slash is a key like another.
  const std::string odd("a\0/b", 4);
  client.set(odd, "v");
  CHECK(master.get_string(odd) == "v");
  CHECK(!master.check({"a"}));
}

TEST_CASE("TCPStore: add counts from 0 in the key's decimal string, and refuses what is not one",
          "[distributed][store]") {
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 2s);
  const std::string prefix = "TCPStore (tcp://" + addr(master.port()) + "): ";
  CHECK(master.add("n", 5) == 5);
  CHECK(master.add("n", -7) == -2);
  CHECK(master.get_string("n") == "-2");
  CHECK(master.add("zero", 0) == 0);
  CHECK(master.check({"zero"}));

  master.set("s", "abc");
  REQUIRE_THROWS_AS(master.add("s", 1), DistributedError);
  REQUIRE_THROWS_WITH(master.add("s", 1),
                      prefix +
                          "add('s', 1): the key holds 'abc', which is not a decimal integer (add() counts in a key "
                          "that only add() writes, or that set() gave a decimal integer)");
  master.set("bin", std::vector<uint8_t>{1, '\\', 0x80});
  REQUIRE_THROWS_WITH(master.add("bin", 2), Contains("the key holds '\\x01\\x5c\\x80', which is"));
  master.set("long", std::string(40, '7') + "x");
  REQUIRE_THROWS_WITH(master.add("long", 2), Contains("the key holds '" + std::string(32, '7') + "'... (41 bytes),"));
  master.set("big", "9223372036854775807");
  REQUIRE_THROWS_WITH(master.add("big", 1),
                      prefix + "add('big', 1) overflows int64: the key holds 9223372036854775807");
  // The refusal leaves the connection in step.
  CHECK(master.add("n", 3) == 1);
}

TEST_CASE("TCPStore: add is atomic across clients and across threads sharing one", "[distributed][store]") {
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 5s);
  TCPStore a("127.0.0.1", master.port(), std::nullopt, false, 5s);
  TCPStore b("127.0.0.1", master.port(), std::nullopt, false, 5s);
  TCPStore shared("127.0.0.1", master.port(), std::nullopt, false, 5s);
  // Each sum seen once: no add was lost or applied twice.
  CHECK(add_race<TCPStore>({&a, &b, &shared, &shared}, 200) == one_to(800));
  CHECK(master.get_string("count") == "800");
}

TEST_CASE("TCPStore: get and wait block until another thread sets the keys", "[distributed][store]") {
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 5s);
  TCPStore client("127.0.0.1", master.port(), std::nullopt, false, 5s);

  auto start = Clock::now();
  {
    Background setter([&] {
      std::this_thread::sleep_for(50ms);
      master.set("late", "v");
    });
    CHECK(client.get_string("late") == "v");
    CHECK(setter.join().empty());
  }
  CHECK(seconds_since(start) >= 0.045);

  Background setter([&] {
    std::this_thread::sleep_for(50ms);
    master.set("x", "1");
    std::this_thread::sleep_for(20ms);
    master.add("y", 1);  // an add answers a waiter as a set does
  });
  start = Clock::now();
  client.wait({"x", "y"});
  CHECK(seconds_since(start) >= 0.065);
  CHECK(setter.join().empty());
  CHECK(client.check({"x", "y"}));
}

TEST_CASE("TCPStore: a get or wait past the timeout names the keys still missing, and the store works after it",
          "[distributed][store]") {
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 2s);
  TCPStore client("127.0.0.1", master.port(), std::nullopt, false, 300ms);
  const std::string prefix = "TCPStore (tcp://" + addr(master.port()) + "): ";

  auto start = Clock::now();
  REQUIRE_THROWS_AS(client.get("never"), DistributedError);
  const double waited = seconds_since(start);
  CHECK(waited >= 0.3);
  CHECK(waited < 1.3);
  REQUIRE_THROWS_WITH(client.get("never"),
                      prefix + "timed out after 0.3 s waiting for key(s) 'never' (no rank has set it" + kKeyTimeoutFix);

  master.set("here", "1");
  start = Clock::now();
  REQUIRE_THROWS_WITH(
      client.wait({"a", "here", "b"}, 200ms),
      prefix + "timed out after 0.2 s waiting for key(s) 'a', 'b' (no rank has set them" + kKeyTimeoutFix);
  CHECK(seconds_since(start) < 1.2);
  std::vector<std::string> many;
  for (int i = 0; i < 10; ++i) many.push_back("k" + std::to_string(i));
  REQUIRE_THROWS_WITH(
      client.wait(many, 100ms),
      Contains("waiting for key(s) 'k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7' and 2 more (no rank"));

  // A timed-out client reconnects: a late answer is not read as another's.
  master.set("never", "now");
  CHECK(client.get_string("here") == "1");
  CHECK(client.get_string("never") == "now");
  client.set_timeout(100ms);
  REQUIRE_THROWS_WITH(client.get("other"), Contains("timed out after 0.1 s waiting for key(s) 'other'"));
}

TEST_CASE("TCPStore: a client retries until the master listens, then times out naming the address",
          "[distributed][store]") {
  const uint16_t port = free_port();
  auto start = Clock::now();
  REQUIRE_THROWS_AS(TCPStore("127.0.0.1", port, std::nullopt, false, 200ms), DistributedError);
  const double waited = seconds_since(start);
  CHECK(waited >= 0.2);
  CHECK(waited < 1.2);
  REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", port, std::nullopt, false, 200ms),
                      "TCPStore: could not connect to the store at " + addr(port) +
                          " within 0.2 s (last error: Connection refused). Is rank 0 running, and are MASTER_ADDR "
                          "and MASTER_PORT the same on every rank?");

  // A master that starts 100 ms after its client.
  std::unique_ptr<TCPStore> master;
  Background starter([&] {
    std::this_thread::sleep_for(100ms);
    master = std::make_unique<TCPStore>("127.0.0.1", port, std::nullopt, true, 2s);
    master->set("ready", "1");
  });
  TCPStore client("127.0.0.1", port, std::nullopt, false, 3s);
  CHECK(client.get_string("ready") == "1");
  CHECK(starter.join().empty());
}

TEST_CASE("TCPStore: a port in use, an address not of this machine, an unknown host and bad arguments",
          "[distributed][store]") {
  Listener taken;
  const std::string port = std::to_string(taken.port());
  REQUIRE_THROWS_AS(TCPStore("127.0.0.1", taken.port(), std::nullopt, true, 1s), DistributedError);
  REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", taken.port(), std::nullopt, true, 1s),
                      "TCPStore: cannot listen on 127.0.0.1:" + port +
                          ": the port is in use (another run, or one that is still exiting?). Choose another "
                          "MASTER_PORT, or stop the process that holds it (`ss -ltnp 'sport = :" +
                          port + "'`)");
  // 192.0.2.1 is TEST-NET-1: never an address of this machine.
  REQUIRE_THROWS_WITH(TCPStore("192.0.2.1", 0, std::nullopt, true, 1s),
                      "TCPStore: cannot listen on 192.0.2.1:0: Cannot assign requested address (MASTER_ADDR must "
                      "name this machine, the one rank 0 runs on; 0.0.0.0 listens on all its addresses)");
  for (bool is_master : {true, false}) {
    REQUIRE_THROWS_AS(TCPStore("no-such-host.invalid", 29500, std::nullopt, is_master, 200ms), DistributedError);
    REQUIRE_THROWS_WITH(TCPStore("no-such-host.invalid", 29500, std::nullopt, is_master, 200ms),
                        Contains("TCPStore: cannot resolve the host 'no-such-host.invalid': ") &&
                            Contains(" (MASTER_ADDR must be the host name or IPv4 address of the machine rank 0 runs "
                                     "on, the same on every rank)"));
  }

  REQUIRE_THROWS_AS(TCPStore("127.0.0.1", 0, 0, true, 1s), ValueError);
  REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", 0, 0, true, 1s),
                      "TCPStore: world_size must be at least 1 (the number of ranks, the master's included), got 0");
  REQUIRE_THROWS_AS(TCPStore("127.0.0.1", 0, std::nullopt, false, 1s), ValueError);
  REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", 0, std::nullopt, false, 1s),
                      "TCPStore: a client needs the master's port, got 0 (only the master may take port 0, which "
                      "picks a free port; pass the master's port() to the other ranks)");
}

TEST_CASE("TCPStore: the master going away while a client waits is an error at once, not a timeout",
          "[distributed][store]") {
  auto master = std::make_unique<TCPStore>("127.0.0.1", 0, std::nullopt, true, 5s);
  const uint16_t port = master->port();
  TCPStore client("127.0.0.1", port, std::nullopt, false, 5s);
  Background stopper([&] {
    std::this_thread::sleep_for(100ms);
    master.reset();
  });
  const auto start = Clock::now();
  REQUIRE_THROWS_AS(client.get("never"), DistributedError);
  CHECK(seconds_since(start) < 2.0);
  CHECK(stopper.join().empty());
  // The same message for a request the store is not there for any more
  // (its next connection attempt fails).
  client.set_timeout(200ms);
  REQUIRE_THROWS_WITH(client.set("k", "v"), Contains("TCPStore: could not connect to the store at " + addr(port) +
                                                     " within 0.2 s (last error: Connection refused)"));

  // The message itself, from a master that goes while a wait is served.
  master = std::make_unique<TCPStore>("127.0.0.1", 0, std::nullopt, true, 5s);
  TCPStore waiter("127.0.0.1", master->port(), std::nullopt, false, 5s);
  Background stopper2([&] {
    std::this_thread::sleep_for(100ms);
    master.reset();
  });
  REQUIRE_THROWS_WITH(waiter.wait({"a", "b"}), "TCPStore: the store at " + addr(waiter.port()) +
                                                   " closed the connection during wait('a', 'b') (rank 0, which "
                                                   "serves it, may have exited or died)");
  CHECK(stopper2.join().empty());
}

TEST_CASE("TCPStore: with world_size, the master's constructor waits for every worker", "[distributed][store]") {
  const uint16_t port = free_port();
  std::unique_ptr<TCPStore> master;
  auto start = Clock::now();
  Background serve([&] { master = std::make_unique<TCPStore>("127.0.0.1", port, 3, true, 3s); });
  std::this_thread::sleep_for(50ms);
  TCPStore w1("127.0.0.1", port, 3, false, 3s);
  std::this_thread::sleep_for(50ms);
  TCPStore w2("127.0.0.1", port, 3, false, 3s);
  REQUIRE(serve.join().empty());
  CHECK(seconds_since(start) >= 0.095);
  CHECK(master->add("__tandem_store_workers", 0) == 3);

  // Without wait_for_workers, the master returns at once.
  TCPStore alone("127.0.0.1", 0, 3, true, 3s, false);
  CHECK(alone.add("__tandem_store_workers", 0) == 1);

  const uint16_t port2 = free_port();
  std::unique_ptr<TCPStore> short_master;
  Background serve2([&] { short_master = std::make_unique<TCPStore>("127.0.0.1", port2, 3, true, 300ms); });
  TCPStore only("127.0.0.1", port2, 3, false, 3s);
  CHECK(serve2.join() == "TCPStore (tcp://" + addr(port2) +
                             "): timed out after 0.3 s waiting for workers: 2 of 3 joined (start every rank with the "
                             "same MASTER_ADDR, MASTER_PORT and WORLD_SIZE; if some are only slow to start, raise the "
                             "timeout)");
  CHECK(short_master == nullptr);
}

TEST_CASE("TCPStore: a server that does not speak the protocol, or never answers, is named", "[distributed][store]") {
  Listener other;
  Background http([&] {
    pollfd p{other.fd(), POLLIN, 0};
    if (::poll(&p, 1, 3000) != 1) throw std::runtime_error("nobody connected");
    const int fd = ::accept(other.fd(), nullptr, nullptr);
    const std::string answer = "HTTP/1.1 400 Bad Request\r\n\r\n";
    (void)::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
    char buf[256];
    pollfd q{fd, POLLIN, 0};
    while (::poll(&q, 1, 3000) == 1 && ::recv(fd, buf, sizeof buf, 0) > 0) {
    }
    ::close(fd);
  });
  REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", other.port(), std::nullopt, false, 2s),
                      "TCPStore: the server at " + addr(other.port()) +
                          " does not speak Tandem's store protocol (it answered the handshake with 'HTTP/'); is "
                          "MASTER_PORT the port of another service?");
  CHECK(http.join().empty());

  Listener silent;
  const auto start = Clock::now();
  REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", silent.port(), std::nullopt, false, 200ms),
                      "TCPStore (tcp://" + addr(silent.port()) +
                          "): timed out after 0.2 s waiting for the store to answer the handshake (is rank 0 stuck, "
                          "or is another program listening on that port?)");
  CHECK(seconds_since(start) < 1.2);
}

TEST_CASE("TCPStore: the server outlives clients that send garbage, stop mid-request or leave while waiting",
          "[distributed][store]") {
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 2s);
  const uint16_t port = master.port();
  auto send_raw = [](int fd, const std::string& bytes) {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  };

  // Bytes that are not a request, and a handshake with another magic: the
  // server hangs up.
  int fd = connect_raw(port);
  send_raw(fd, "GET / HTTP/1.1\r\n\r\n");
  CHECK(closed_by_peer(fd));
  ::close(fd);
  fd = connect_raw(port);
  send_raw(fd, frame(1, {"tandem-store 0"}));
  CHECK(closed_by_peer(fd));
  ::close(fd);

  // Half a SET, then gone.
  fd = connect_raw(port);
  send_raw(fd, frame(2, {"half", std::string(100, 'x')}).substr(0, 40));
  ::close(fd);
  // A GET that waits, then gone: the set that would answer it finds no one.
  fd = connect_raw(port);
  send_raw(fd, frame(1, {"tandem-store 1"}) + frame(3, {"ghost"}));
  std::this_thread::sleep_for(20ms);
  ::close(fd);
  // A SET whose sender leaves before the answer still sets.
  fd = connect_raw(port);
  send_raw(fd, frame(1, {"tandem-store 1"}) + frame(2, {"left", "v"}));
  ::close(fd);

  master.set("ghost", "1");
  CHECK(master.get_string("ghost") == "1");
  CHECK(master.get_string("left") == "v");
  CHECK(!master.check({"half"}));
  TCPStore client("127.0.0.1", port, std::nullopt, false, 2s);
  CHECK(client.add("n", 1) == 1);
}

// ---- FileStore ---------------------------------------------------------

TEST_CASE("FileStore: two instances on one folder share keys, and any key is a file name", "[distributed][store]") {
  TempDir dir;
  const std::string path = dir.file("run/store");  // created with its parents
  FileStore a(path, 1s), b(path, 1s);
  CHECK(a.describe() == "file://" + path);
  CHECK(a.path() == path);

  a.set("x", "1");
  CHECK(b.get_string("x") == "1");
  b.set("x", "2");
  CHECK(a.get_string("x") == "2");
  CHECK(b.check({"x"}));
  CHECK(!b.check({"x", "y"}));
  CHECK(b.delete_key("x"));
  CHECK(!a.delete_key("x"));
  CHECK(!a.check({"x"}));

  const std::vector<std::string> keys = {
      "a/b",   "..", ".", "%41", "A", "", std::string("n\0ul", 4), std::string(300, 'k'), std::string(300, 'k') + "2",
      "x.lock"};
  for (size_t i = 0; i < keys.size(); ++i) a.set(keys[i], "v" + std::to_string(i));
  for (size_t i = 0; i < keys.size(); ++i) CHECK(b.get_string(keys[i]) == "v" + std::to_string(i));

  std::vector<uint8_t> big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  big[0] = 0;
  a.set("big", big);
  CHECK(b.get("big") == big);
  a.set("empty", std::vector<uint8_t>{});
  CHECK(b.get("empty").empty());
  // Only the keys' files: no temporary one left behind.
  for (const auto& e : fs::directory_iterator(path)) CHECK(e.path().filename().string().rfind(".tmp", 0) != 0);
}

TEST_CASE("FileStore: add is atomic across instances on threads, and refuses what is not an integer",
          "[distributed][store]") {
  TempDir dir;
  std::vector<std::unique_ptr<FileStore>> stores;
  for (int i = 0; i < 4; ++i) stores.push_back(std::make_unique<FileStore>(dir.str(), 5s));
  CHECK(add_race<FileStore>({stores[0].get(), stores[1].get(), stores[2].get(), stores[3].get()}, 200) == one_to(800));
  CHECK(stores[0]->get_string("count") == "800");
  CHECK(stores[1]->add("count", -801) == -1);

  stores[0]->set("s", "abc");
  REQUIRE_THROWS_WITH(stores[1]->add("s", 1),
                      "FileStore (file://" + dir.str() +
                          "): add('s', 1): the key holds 'abc', which is not a decimal integer (add() counts in a "
                          "key that only add() writes, or that set() gave a decimal integer)");
}

TEST_CASE("FileStore: get waits for a set from another instance; a wait past the timeout names the missing keys",
          "[distributed][store]") {
  TempDir dir;
  FileStore a(dir.str(), 300ms), b(dir.str(), 2s);
  auto start = Clock::now();
  {
    Background setter([&] {
      std::this_thread::sleep_for(50ms);
      a.set("late", "v");
    });
    CHECK(b.get_string("late") == "v");
    CHECK(setter.join().empty());
  }
  CHECK(seconds_since(start) >= 0.045);

  const std::string prefix = "FileStore (file://" + dir.str() + "): ";
  start = Clock::now();
  REQUIRE_THROWS_WITH(a.get("never"),
                      prefix + "timed out after 0.3 s waiting for key(s) 'never' (no rank has set it" + kKeyTimeoutFix);
  const double waited = seconds_since(start);
  CHECK(waited >= 0.3);
  CHECK(waited < 1.3);
  REQUIRE_THROWS_WITH(
      a.wait({"late", "p", "q"}, 200ms),
      prefix + "timed out after 0.2 s waiting for key(s) 'p', 'q' (no rank has set them" + kKeyTimeoutFix);
  a.wait({"late"}, 0ms);
}

TEST_CASE("FileStore: a folder that cannot be created or written is an error naming the path", "[distributed][store]") {
  REQUIRE_THROWS_AS(FileStore("/proc/tandem_no_such/store", 1s), DistributedError);
  REQUIRE_THROWS_WITH(FileStore("/proc/tandem_no_such/store", 1s),
                      Contains("FileStore: cannot create the folder /proc/tandem_no_such/store: ") &&
                          Contains(" (choose a folder that every rank can write, on a file system they all see)"));
  TempDir dir;
  const std::string file = dir.file("a_file");
  std::ofstream(file) << "x";
  REQUIRE_THROWS_WITH(FileStore(file, 1s), Contains("FileStore: cannot create the folder " + file + ": "));
  REQUIRE_THROWS_AS(FileStore("", 1s), ValueError);
  REQUIRE_THROWS_WITH(FileStore("", 1s),
                      "FileStore: the path is empty; pass the folder that every rank shares (file://PATH's PATH)");

  // A folder that exists but takes no new files (even for root).
  FileStore proc("/proc/self", 200ms);
  REQUIRE_THROWS_AS(proc.set("k", "v"), DistributedError);
  REQUIRE_THROWS_WITH(proc.set("k", "v"), Contains("FileStore (file:///proc/self): cannot write key 'k' to "
                                                   "/proc/self/k: ") &&
                                              Contains(" (the folder must be writable by every rank)"));
  REQUIRE_THROWS_WITH(proc.add("k", 1),
                      Contains("FileStore (file:///proc/self): cannot lock key 'k' for add() (/proc/self/k.lock): "));
}

TEST_CASE("FileStore: a key file that cannot be read or deleted, and a lock held past the timeout",
          "[distributed][store]") {
  TempDir dir;
  FileStore store(dir.str(), 200ms);
  const std::string prefix = "FileStore (file://" + dir.str() + "): ";
  fs::create_directory(dir.file("k"));  // where key 'k''s file goes
  CHECK(store.check({"k"}));
  REQUIRE_THROWS_WITH(store.get("k"), prefix + "cannot read key 'k' from " + dir.file("k") + ": Is a directory");
  REQUIRE_THROWS_WITH(store.delete_key("k"), Contains(prefix + "cannot delete key 'k' (" + dir.file("k") + "): "));

  // flock locks belong to an open file: this one conflicts with the store's.
  const int fd = ::open(dir.file("n.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  const auto start = Clock::now();
  REQUIRE_THROWS_WITH(store.add("n", 1),
                      prefix + "timed out after 0.2 s waiting for the lock on key 'n' (" + dir.file("n.lock") +
                          "), which another add() holds (is a process stopped or stuck inside one?)");
  CHECK(seconds_since(start) < 1.2);
  ::close(fd);
  CHECK(store.add("n", 1) == 1);
}

// ---- PrefixStore -------------------------------------------------------

TEST_CASE("PrefixStore: keys are separated by prefix, over a TCPStore and a FileStore", "[distributed][store]") {
  TempDir dir;
  auto tcp = std::make_shared<TCPStore>("127.0.0.1", 0, std::nullopt, true, 2s);
  auto file = std::make_shared<FileStore>(dir.str(), 2s);
  for (std::shared_ptr<distributed::Store> base :
       {std::shared_ptr<distributed::Store>(tcp), std::shared_ptr<distributed::Store>(file)}) {
    PrefixStore r0("rank0", base), r1("rank1", base);
    r0.set("k", "a");
    r1.set("k", "b");
    CHECK(r0.get_string("k") == "a");
    CHECK(r1.get_string("k") == "b");
    CHECK(base->get_string("rank0/k") == "a");
    CHECK(!base->check({"k"}));
    CHECK(r0.add("n", 2) == 2);
    CHECK(r1.add("n", 5) == 5);
    CHECK(base->get_string("rank0/n") == "2");
    CHECK(r0.check({"k", "n"}));
    CHECK(!r0.check({"k", "other"}));
    r0.wait({"k", "n"});
    CHECK(r0.delete_key("k"));
    CHECK(!r0.check({"k"}));
    CHECK(r1.check({"k"}));
    CHECK(r0.describe() == base->describe() + " (prefix 'rank0')");
    CHECK(r0.underlying() == base);

    PrefixStore nested("inner", std::make_shared<PrefixStore>("outer", base));
    nested.set("k", "c");
    CHECK(base->get_string("outer/inner/k") == "c");
    CHECK(nested.describe() == base->describe() + " (prefix 'outer') (prefix 'inner')");

    // The prefix store's own timeout, and the prefixed key in the message.
    CHECK(r0.timeout() == 2s);
    r0.set_timeout(100ms);
    REQUIRE_THROWS_WITH(r0.get("missing"), Contains("timed out after 0.1 s waiting for key(s) 'rank0/missing'"));
    REQUIRE_THROWS_WITH(r0.wait({"k", "n"}, 100ms), Contains("waiting for key(s) 'rank0/k' (no rank has set it"));
  }

  REQUIRE_THROWS_AS(PrefixStore("p", nullptr), ValueError);
  REQUIRE_THROWS_WITH(PrefixStore("p", nullptr),
                      "PrefixStore('p'): the store is null; pass the store whose keys it "
                      "prefixes (a TCPStore or a FileStore)");
}

// The stores of distributed/store.h: TCPStore (a poll() server on a thread of
// the master's process, and a client in every instance), FileStore (a file
// per key in a shared folder) and PrefixStore.
//
// TCPStore's protocol. Every message, request or reply, is
//   u8 code | u32 field count | per field: u64 length, then the bytes
// (integers big-endian). A reply carries its request's code, or kError with
// one field, the message to throw. A connection opens with kHello carrying
// kMagic, which the server echoes, so that a client that reached another
// service says so instead of misreading its bytes.
//   kHello  magic           -> magic
//   kSet    key, value      -> (nothing)
//   kGet    key             -> value, once the key is set
//   kAdd    key, delta      -> the sum (both decimal strings, as stored)
//   kCheck  key...          -> one byte a key, 1 where it is set
//   kWait   key...          -> (nothing), once every key is set
//   kDelete key             -> one byte, 1 if the key was set
// The server answers one request of a connection at a time: a GET or WAIT
// whose keys are not all set waits in the server, and the SET or ADD that
// completes it answers it. The client applies the timeout; one that times
// out closes its connection (the server then forgets the wait) and opens a
// new one for its next request, so that a late answer is never read as the
// answer to another request.
//
// Workers: every client adds 1 to kWorkersKey when it first connects; the
// master's server, which knows world_size, sets kWorkersReadyKey once the
// count reaches it, and the master's constructor waits for that key.
#include "distributed/store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include "tensor/core/errors.h"

namespace tandem::distributed {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kMagic = "tandem-store 1";
const std::string kWorkersKey = "__tandem_store_workers";
const std::string kWorkersReadyKey = "__tandem_store_workers_ready";

enum class Code : uint8_t { kHello = 1, kSet, kGet, kAdd, kCheck, kWait, kDelete, kError = 0x7f };

struct Message {
  Code code;
  std::vector<std::string> fields;
};

// ---- Messages ----------------------------------------------------------

std::string errno_str(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string seconds_str(milliseconds t) {
  std::ostringstream ss;
  ss << static_cast<double>(t.count()) / 1000.0 << " s";
  return ss.str();
}

// "'a', 'b'", the first 8 keys of a barrier's hundreds.
std::string keys_str(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > kShown) out += detail::str_cat(" and ", keys.size() - kShown, " more");
  return out;
}

// A value quoted for a message: printable bytes as they are, others as \xNN,
// cut after 32 bytes.
std::string value_str(std::string_view v) {
  constexpr size_t kShown = 32;
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < v.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  out += "'";
  if (v.size() > kShown) out += detail::str_cat("... (", v.size(), " bytes)");
  return out;
}

std::string key_timeout_message(const std::string& prefix, milliseconds timeout,
                                const std::vector<std::string>& missing) {
  return detail::str_cat(prefix, ": timed out after ", seconds_str(timeout), " waiting for key(s) ", keys_str(missing),
                         " (no rank has set ", missing.size() == 1 ? "it" : "them",
                         " yet: the rank that should may have failed or not reached that point; if it is only slow, "
                         "raise the timeout)");
}

// add()'s arithmetic, as PyTorch's stores do it: the counter is stored as its
// decimal string, and is 0 while the key is not set.
int64_t counter_add(const std::string& prefix, const std::string& key, const std::string* current, int64_t delta) {
  int64_t value = 0;
  if (current != nullptr) {
    const char* end = current->data() + current->size();
    auto [ptr, ec] = std::from_chars(current->data(), end, value);
    TANDEM_CHECK(!current->empty() && ec == std::errc() && ptr == end, DistributedError, prefix, ": add('", key, "', ",
                 delta, "): the key holds ", value_str(*current),
                 ", which is not a decimal integer (add() counts in a key that only add() writes, or that set() gave "
                 "a decimal integer)");
  }
  int64_t sum = 0;
  TANDEM_CHECK(!__builtin_add_overflow(value, delta, &sum), DistributedError, prefix, ": add('", key, "', ", delta,
               ") overflows int64: the key holds ", value);
  return sum;
}

// ---- Sockets -----------------------------------------------------------

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// The I/O helpers' outcomes, which the caller turns into a message naming
// the request.
struct PeerClosed {};
struct TimedOut {};
struct NotProtocol {
  std::string bytes;
};

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

// Waits for events on fd; false once the deadline has passed.
bool poll_until(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, ms_until(deadline));
    if (r > 0) return true;
    if (r == 0 && Clock::now() >= deadline) return false;
    if (r < 0 && errno != EINTR) return true;  // the next send or recv reports it
  }
}

void send_all(int fd, std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!poll_until(fd, POLLOUT, deadline)) throw TimedOut{};
    } else if (errno != EINTR) {
      throw PeerClosed{};
    }
  }
}

void recv_all(int fd, char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    ssize_t n = ::recv(fd, data, size, MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n == 0) {
      throw PeerClosed{};
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!poll_until(fd, POLLIN, deadline)) throw TimedOut{};
    } else if (errno != EINTR) {
      throw PeerClosed{};
    }
  }
}

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}
void put_u64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}
uint64_t get_be(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string encode(Code code, const std::vector<std::string_view>& fields) {
  size_t size = 5;
  for (std::string_view f : fields) size += 8 + f.size();
  std::string out;
  out.reserve(size);
  out += static_cast<char>(code);
  put_u32(out, static_cast<uint32_t>(fields.size()));
  for (std::string_view f : fields) {
    put_u64(out, f.size());
    out += f;
  }
  return out;
}

bool is_request(uint8_t code) {
  return code >= static_cast<uint8_t>(Code::kHello) && code <= static_cast<uint8_t>(Code::kDelete);
}

enum class Parse { kIncomplete, kComplete, kInvalid };

// Takes the first whole request out of buf into m. Nothing is allocated for a
// length before its bytes have arrived, so a peer that sends garbage costs
// only what it sent.
Parse take_request(std::string& buf, Message& m) {
  if (buf.empty()) return Parse::kIncomplete;
  if (!is_request(static_cast<uint8_t>(buf[0]))) return Parse::kInvalid;
  if (buf.size() < 5) return Parse::kIncomplete;
  const uint64_t count = get_be(buf.data() + 1, 4);
  size_t pos = 5;
  for (uint64_t i = 0; i < count; ++i) {
    if (buf.size() - pos < 8) return Parse::kIncomplete;
    const uint64_t len = get_be(buf.data() + pos, 8);
    if (buf.size() - pos - 8 < len) return Parse::kIncomplete;
    pos += 8 + len;
  }
  m.code = static_cast<Code>(buf[0]);
  m.fields.clear();
  for (size_t p = 5; p < pos;) {
    const size_t len = get_be(buf.data() + p, 8);
    m.fields.emplace_back(buf, p + 8, len);
    p += 8 + len;
  }
  buf.erase(0, pos);
  return Parse::kComplete;
}

// The reply to a request of code `expected` (or kError).
Message read_reply(int fd, Code expected, Clock::time_point deadline) {
  // Bounds past which the bytes are not ours: no reply has more fields than
  // a CHECK's one, nor a value as long as 2^40.
  constexpr uint64_t kMaxFields = 16, kMaxLength = uint64_t{1} << 40;
  char header[5];
  recv_all(fd, header, sizeof header, deadline);
  const auto code = static_cast<Code>(header[0]);
  const uint64_t count = get_be(header + 1, 4);
  if ((code != expected && code != Code::kError) || count > kMaxFields) {
    throw NotProtocol{std::string(header, sizeof header)};
  }
  Message m{code, {}};
  for (uint64_t i = 0; i < count; ++i) {
    char len_bytes[8];
    recv_all(fd, len_bytes, sizeof len_bytes, deadline);
    const uint64_t len = get_be(len_bytes, 8);
    if (len > kMaxLength) throw NotProtocol{std::string(header, sizeof header)};
    std::string field(len, '\0');
    recv_all(fd, field.data(), field.size(), deadline);
    m.fields.push_back(std::move(field));
  }
  return m;
}

void set_nodelay(int fd) {
  // Requests are small and each waits for its answer: Nagle's delay would
  // add up to 40 ms to each.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct Address {
  sockaddr_storage addr;
  socklen_t len;
  int family;
};

// host:port's addresses, IPv4 first, so that a master that listens on
// "localhost" and a client that connects to it pick the same one. Returns
// getaddrinfo's error, 0 on success.
int resolve(const std::string& host, uint16_t port, bool passive, std::vector<Address>& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  int err = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (err != 0) return err;
  out.clear();
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    Address address{};
    std::memcpy(&address.addr, a->ai_addr, a->ai_addrlen);
    address.len = a->ai_addrlen;
    address.family = a->ai_family;
    out.push_back(address);
  }
  ::freeaddrinfo(list);
  std::stable_partition(out.begin(), out.end(), [](const Address& a) { return a.family == AF_INET; });
  return 0;
}

[[noreturn]] void throw_unresolved(const std::string& host, int gai_error) {
  throw DistributedError(detail::str_cat(
      "TCPStore: cannot resolve the host '", host, "': ", ::gai_strerror(gai_error),
      " (MASTER_ADDR must be the host name or IPv4 address of the machine rank 0 runs on, the same on every rank)"));
}

// A listening socket on host:port (port 0: a free one), SO_REUSEADDR so that
// a port a finished run left in TIME_WAIT can be taken again at once.
Fd listen_on(const std::string& host, uint16_t port) {
  std::vector<Address> addresses;
  if (int err = resolve(host, port, true, addresses)) throw_unresolved(host, err);
  int first_error = 0;
  for (const Address& a : addresses) {
    Fd fd(::socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    int one = 1;
    if (fd && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0 &&
        ::listen(fd.get(), SOMAXCONN) == 0) {
      return fd;
    }
    if (first_error == 0) first_error = errno;
  }
  TANDEM_CHECK(first_error != EADDRINUSE, DistributedError, "TCPStore: cannot listen on ", host, ":", port,
               ": the port is in use (another run, or one that is still exiting?). Choose another MASTER_PORT, or "
               "stop the process that holds it (`ss -ltnp 'sport = :",
               port, "'`)");
  throw DistributedError(detail::str_cat("TCPStore: cannot listen on ", host, ":", port, ": ", errno_str(first_error),
                                         " (MASTER_ADDR must name this machine, the one rank 0 runs on; 0.0.0.0 "
                                         "listens on all its addresses)"));
}

uint16_t bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

// One connection attempt, bounded by the deadline; on failure an invalid Fd
// and the reason in err.
Fd try_connect(const Address& a, Clock::time_point deadline, int& err) {
  Fd fd(::socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    err = errno;
    return fd;
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.len) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) {
      err = errno;
      return Fd();
    }
    if (!poll_until(fd.get(), POLLOUT, deadline)) {
      err = ETIMEDOUT;
      return Fd();
    }
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return Fd();
  }
  set_nodelay(fd.get());
  return fd;
}

// ---- The server --------------------------------------------------------

class Server {
 public:
  Server(Fd listener, std::optional<int> world_size, std::string prefix)
      : listener_(std::move(listener)), world_size_(world_size), prefix_(std::move(prefix)) {
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) throw std::system_error(errno, std::generic_category(), "eventfd");
    thread_ = std::thread([this] { run(); });
  }
  ~Server() {
    const uint64_t one = 1;
    while (::write(wake_.get(), &one, sizeof one) < 0 && errno == EINTR) {
    }
    if (thread_.joinable()) thread_.join();
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

 private:
  struct Conn {
    Fd fd;
    std::string in, out;
    size_t out_pos = 0;
    std::optional<Message> pending;  // a GET or WAIT whose keys are not all set
    bool gone = false;               // the peer closed, or broke the protocol
  };

  void run() noexcept {
    try {
      loop();
    } catch (...) {
      // Nowhere to report to: the clients see their connections close.
    }
    conns_.clear();
    listener_.reset();
  }

  void loop() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      fds.push_back({listener_.get(), POLLIN, 0});
      for (const auto& c : conns_) {
        const bool unsent = c->out_pos < c->out.size();
        fds.push_back({c->fd.get(), static_cast<short>(POLLIN | (unsent ? POLLOUT : 0)), 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        throw std::system_error(errno, std::generic_category(), "poll");
      }
      if (fds[0].revents != 0) return;
      for (size_t i = 0; i < conns_.size(); ++i) {
        const short ev = fds[i + 2].revents;
        if (ev & (POLLIN | POLLHUP | POLLERR)) read_from(*conns_[i]);
        if (ev & POLLOUT) flush(*conns_[i]);
      }
      if (fds[1].revents & POLLIN) accept_all();
      // A SET may answer a connection whose next request is already read.
      for (bool progress = true; progress;) {
        progress = false;
        for (const auto& c : conns_) progress = serve(*c) || progress;
      }
      std::erase_if(conns_, [](const auto& c) { return c->gone; });
    }
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      set_nodelay(fd);
      conns_.push_back(std::make_unique<Conn>());
      conns_.back()->fd.reset(fd);
    }
  }

  static void read_from(Conn& c) {
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        // Requests read before the peer closed are still served (a SET is
        // kept); their answers go nowhere.
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c.gone = true;
        return;
      }
    }
  }

  static void flush(Conn& c) {
    while (c.out_pos < c.out.size()) {
      ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out_pos += static_cast<size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return;
      } else if (errno != EINTR) {
        c.gone = true;
        return;
      }
    }
    c.out.clear();
    c.out_pos = 0;
  }

  static void reply(Conn& c, Code code, const std::vector<std::string_view>& fields) {
    if (c.gone) return;
    c.out += encode(code, fields);
    flush(c);
  }

  // Serves c's buffered requests until one has to wait; whether it served any.
  bool serve(Conn& c) {
    bool served = false;
    Message m;
    while (!c.pending) {
      const Parse p = take_request(c.in, m);
      if (p == Parse::kIncomplete) break;
      if (p == Parse::kInvalid) {
        // A stream out of frame cannot be read again.
        c.gone = true;
        c.in.clear();
        break;
      }
      handle(c, std::move(m));
      served = true;
    }
    return served;
  }

  void handle(Conn& c, Message m) {
    const size_t n = m.fields.size();
    switch (m.code) {
      case Code::kHello:
        if (n == 1 && m.fields[0] == kMagic) {
          reply(c, Code::kHello, {kMagic});
        } else {
          c.gone = true;
        }
        return;
      case Code::kSet:
        if (n != 2) break;
        data_[m.fields[0]] = std::move(m.fields[1]);
        reply(c, Code::kSet, {});
        answer_waiters();
        return;
      case Code::kGet:
        if (n != 1) break;
        c.pending = std::move(m);
        try_answer(c);
        return;
      case Code::kAdd: {
        if (n != 2) break;
        int64_t delta = 0;
        const std::string& d = m.fields[1];
        auto [ptr, ec] = std::from_chars(d.data(), d.data() + d.size(), delta);
        if (ec != std::errc() || ptr != d.data() + d.size()) break;
        const std::string& key = m.fields[0];
        auto it = data_.find(key);
        int64_t sum = 0;
        try {
          sum = counter_add(prefix_, key, it == data_.end() ? nullptr : &it->second, delta);
        } catch (const DistributedError& e) {
          reply(c, Code::kError, {e.what()});
          return;
        }
        data_[key] = std::to_string(sum);
        if (key == kWorkersKey && world_size_ && sum >= *world_size_) data_[kWorkersReadyKey] = "1";
        reply(c, Code::kAdd, {std::to_string(sum)});
        answer_waiters();
        return;
      }
      case Code::kCheck: {
        std::string set(n, '\0');
        for (size_t i = 0; i < n; ++i) set[i] = data_.count(m.fields[i]) ? 1 : 0;
        reply(c, Code::kCheck, {set});
        return;
      }
      case Code::kWait:
        c.pending = std::move(m);
        try_answer(c);
        return;
      case Code::kDelete:
        if (n != 1) break;
        reply(c, Code::kDelete, {std::string_view(data_.erase(m.fields[0]) ? "\1" : "\0", 1)});
        return;
      case Code::kError: break;
    }
    c.gone = true;  // a request that is not ours
  }

  void try_answer(Conn& c) {
    const Message& m = *c.pending;
    for (const std::string& key : m.fields) {
      if (!data_.count(key)) return;
    }
    if (m.code == Code::kGet) {
      reply(c, Code::kGet, {data_.at(m.fields[0])});
    } else {
      reply(c, Code::kWait, {});
    }
    c.pending.reset();
  }

  void answer_waiters() {
    for (const auto& c : conns_) {
      if (c->pending) try_answer(*c);
    }
  }

  Fd listener_, wake_;
  std::optional<int> world_size_;
  std::string prefix_;
  std::vector<std::unique_ptr<Conn>> conns_;  // unique_ptr: a Conn& survives accepts
  std::unordered_map<std::string, std::string> data_;
  std::thread thread_;
};

}  // namespace

// ---- TCPStore ----------------------------------------------------------

struct TCPStore::Impl {
  std::string host;
  uint16_t port = 0;
  bool is_master = false;
  std::string address;  // "host:port"
  std::string prefix;   // "TCPStore (tcp://host:port)"

  std::mutex mutex;  // one request in flight: a reply is read by the thread that asked
  Fd fd;             // invalid until connected, and after a timeout or a closed connection

  std::unique_ptr<Server> server;  // the master's

  // Connects, retrying with a backoff until the deadline, and shakes hands.
  void connect(Clock::time_point deadline, milliseconds timeout) {
    milliseconds backoff(10);
    std::string last_error = "none";
    std::vector<Address> addresses;
    for (;;) {
      int gai = resolve(host, port, false, addresses);
      if (gai == EAI_AGAIN) {
        last_error = ::gai_strerror(gai);
      } else if (gai != 0) {
        throw_unresolved(host, gai);
      }
      for (size_t i = 0; gai == 0 && i < addresses.size() && !fd; ++i) {
        int err = 0;
        fd = try_connect(addresses[i], deadline, err);
        if (!fd) last_error = errno_str(err);
      }
      if (fd) break;
      TANDEM_CHECK(Clock::now() < deadline, DistributedError, "TCPStore: could not connect to the store at ", address,
                   " within ", seconds_str(timeout), " (last error: ", last_error,
                   "). Is rank 0 running, and are MASTER_ADDR and MASTER_PORT the same on every rank?");
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
      backoff = std::min(backoff * 2, milliseconds(100));
    }
    std::optional<Message> hello = exchange(Code::kHello, {kMagic}, deadline, "the handshake");
    if (!hello) throw_no_answer(timeout, "the handshake");
    if (hello->fields.size() != 1 || hello->fields[0] != kMagic) {
      fd.reset();
      throw not_protocol("the handshake", encode(Code::kHello, {hello->fields.empty() ? "" : hello->fields[0]}));
    }
  }

  // The reply to one request; nullopt past the deadline. The caller holds
  // the mutex.
  std::optional<Message> request(Code code, const std::vector<std::string_view>& fields, Clock::time_point deadline,
                                 milliseconds timeout, const std::string& what) {
    if (!fd) connect(deadline, timeout);
    return exchange(code, fields, deadline, what);
  }

  std::optional<Message> exchange(Code code, const std::vector<std::string_view>& fields, Clock::time_point deadline,
                                  const std::string& what) {
    try {
      send_all(fd.get(), encode(code, fields), deadline);
      Message reply = read_reply(fd.get(), code, deadline);
      if (reply.code == Code::kError) throw DistributedError(reply.fields.empty() ? "" : reply.fields[0]);
      return reply;
    } catch (const TimedOut&) {
      fd.reset();
      return std::nullopt;
    } catch (const PeerClosed&) {
      fd.reset();
      throw DistributedError(detail::str_cat("TCPStore: the store at ", address, " closed the connection during ", what,
                                             " (rank 0, which serves it, may have exited or died)"));
    } catch (const NotProtocol& e) {
      fd.reset();
      throw not_protocol(what, e.bytes);
    }
  }

  DistributedError not_protocol(const std::string& what, const std::string& bytes) const {
    return DistributedError(detail::str_cat("TCPStore: the server at ", address,
                                            " does not speak Tandem's store protocol (it answered ", what, " with ",
                                            value_str(bytes), "); is MASTER_PORT the port of another service?"));
  }

  // A request that the server answers at once, whose silence is an error.
  Message call(Code code, const std::vector<std::string_view>& fields, milliseconds timeout, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    std::optional<Message> reply = request(code, fields, Clock::now() + timeout, timeout, what);
    if (!reply) throw_no_answer(timeout, what);
    return std::move(*reply);
  }

  [[noreturn]] void throw_no_answer(milliseconds timeout, const std::string& what) {
    throw DistributedError(detail::str_cat(prefix, ": timed out after ", seconds_str(timeout),
                                           " waiting for the store to answer ", what,
                                           " (is rank 0 stuck, or is another program listening on that port?)"));
  }

  // Of keys, those not set, asked after a WAIT timed out (which closed the
  // connection); all of them when the store cannot say.
  std::vector<std::string> missing(const std::vector<std::string>& keys, milliseconds timeout) {
    const milliseconds budget = std::clamp(timeout, milliseconds(100), milliseconds(1000));
    std::vector<std::string_view> fields(keys.begin(), keys.end());
    try {
      std::optional<Message> reply = request(Code::kCheck, fields, Clock::now() + budget, budget, "check");
      if (reply && reply->fields.size() == 1 && reply->fields[0].size() == keys.size()) {
        std::vector<std::string> out;
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!reply->fields[0][i]) out.push_back(keys[i]);
        }
        return out;
      }
    } catch (const Error&) {
    }
    return keys;
  }
};

namespace {

std::string call_str(const char* op, const std::vector<std::string>& keys) {
  return detail::str_cat(op, "(", keys_str(keys), ")");
}
std::string call_str(const char* op, const std::string& key) { return detail::str_cat(op, "('", key, "')"); }

std::string_view bytes_view(const std::vector<uint8_t>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size()};
}

milliseconds non_negative(milliseconds t) { return std::max(t, milliseconds(0)); }

}  // namespace

TCPStore::TCPStore(std::string host, uint16_t port, std::optional<int> world_size, bool is_master,
                   std::chrono::milliseconds timeout, bool wait_for_workers)
    : Store(timeout), impl_(std::make_unique<Impl>()) {
  TANDEM_CHECK(!world_size || *world_size >= 1, ValueError,
               "TCPStore: world_size must be at least 1 (the number of ranks, the master's included), got ",
               *world_size);
  TANDEM_CHECK(is_master || port != 0, ValueError,
               "TCPStore: a client needs the master's port, got 0 (only the master may take port 0, which picks a "
               "free port; pass the master's port() to the other ranks)");
  Impl& s = *impl_;
  s.host = std::move(host);
  s.is_master = is_master;
  timeout = non_negative(timeout);
  const Clock::time_point deadline = Clock::now() + timeout;
  Fd listener;
  if (is_master) {
    listener = listen_on(s.host, port);
    port = bound_port(listener.get());
  }
  s.port = port;
  s.address = detail::str_cat(s.host, ":", port);
  s.prefix = "TCPStore (tcp://" + s.address + ")";
  if (is_master) {
    try {
      s.server = std::make_unique<Server>(std::move(listener), world_size, s.prefix);
    } catch (const std::system_error& e) {
      throw DistributedError(detail::str_cat("TCPStore: cannot listen on ", s.address, ": ", e.what()));
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.connect(deadline, timeout);
  }
  add(kWorkersKey, 1);
  if (is_master && world_size && wait_for_workers) {
    std::unique_lock<std::mutex> lock(s.mutex);
    const std::string what = "the wait for workers";
    if (!s.request(Code::kWait, {kWorkersReadyKey}, deadline, timeout, what)) {
      lock.unlock();
      const int64_t joined = add(kWorkersKey, 0);
      throw DistributedError(detail::str_cat(s.prefix, ": timed out after ", seconds_str(timeout),
                                             " waiting for workers: ", joined, " of ", *world_size,
                                             " joined (start every rank with the same MASTER_ADDR, MASTER_PORT and "
                                             "WORLD_SIZE; if some are only slow to start, raise the timeout)"));
    }
  }
}

// Impl's members stop and join the server (the master's), then close the socket.
TCPStore::~TCPStore() = default;

void TCPStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  impl_->call(Code::kSet, {key, bytes_view(value)}, non_negative(timeout()), call_str("set", key));
}

std::vector<uint8_t> TCPStore::get(const std::string& key) {
  const milliseconds t = non_negative(timeout());
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::optional<Message> reply = impl_->request(Code::kGet, {key}, Clock::now() + t, t, call_str("get", key));
  if (!reply) throw DistributedError(key_timeout_message(impl_->prefix, t, {key}));
  const std::string& value = reply->fields.at(0);
  return std::vector<uint8_t>(value.begin(), value.end());
}

int64_t TCPStore::add(const std::string& key, int64_t value) {
  Message reply = impl_->call(Code::kAdd, {key, std::to_string(value)}, non_negative(timeout()), call_str("add", key));
  return std::stoll(reply.fields.at(0));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  std::vector<std::string_view> fields(keys.begin(), keys.end());
  Message reply = impl_->call(Code::kCheck, fields, non_negative(timeout()), call_str("check", keys));
  const std::string& set = reply.fields.at(0);
  return std::all_of(set.begin(), set.end(), [](char c) { return c != 0; });
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (keys.empty()) return;
  timeout = non_negative(timeout);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<std::string_view> fields(keys.begin(), keys.end());
  if (impl_->request(Code::kWait, fields, Clock::now() + timeout, timeout, call_str("wait", keys))) return;
  std::vector<std::string> missing = impl_->missing(keys, timeout);
  // Set in the instant between the timeout and the check: the wait is over.
  if (missing.empty()) return;
  throw DistributedError(key_timeout_message(impl_->prefix, timeout, missing));
}

bool TCPStore::delete_key(const std::string& key) {
  Message reply = impl_->call(Code::kDelete, {key}, non_negative(timeout()), call_str("delete_key", key));
  return reply.fields.at(0) == "\1";
}

std::string TCPStore::describe() const { return "tcp://" + impl_->address; }
const std::string& TCPStore::host() const { return impl_->host; }
uint16_t TCPStore::port() const { return impl_->port; }
bool TCPStore::is_master() const { return impl_->is_master; }

// ---- FileStore ---------------------------------------------------------

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A key's file name: [A-Za-z0-9_-] kept and every other byte %XX, so that it
// has no '/' and no '.' (the lock and temporary files' names have one). The
// empty key is "%"; a long key is cut and ends in '~' and a hash of the whole
// key, to stay under NAME_MAX with ".lock" added.
std::string file_name(const std::string& key) {
  constexpr size_t kMaxName = 200;
  static const char kHex[] = "0123456789ABCDEF";
  if (key.empty()) return "%";
  std::string out;
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (alnum || c == '_' || c == '-') {
      out += ch;
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  if (out.size() > kMaxName) out = out.substr(0, kMaxName - 17) + "~" + hex64(fnv1a(key));
  return out;
}

// A temporary name no other writer uses: the host (the folder may be shared
// between machines), the process and a count within it.
std::string temp_name() {
  static std::atomic<uint64_t> count{0};
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return detail::str_cat(".tmp.", hex64(fnv1a(host)), ".", ::getpid(), ".", count++);
}

std::string file_prefix(const std::string& path) { return "FileStore (file://" + path + ")"; }

// The file's bytes; nullopt while it does not exist.
std::optional<std::string> read_key(const std::string& prefix, const std::string& key, const std::string& file) {
  auto fail = [&](int err) {
    throw DistributedError(detail::str_cat(prefix, ": cannot read key '", key, "' from ", file, ": ", errno_str(err)));
  };
  Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    fail(errno);
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n == 0) return out;
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (errno != EINTR) {
      fail(errno);
    }
  }
}

// Writes a temporary file and renames it over the key's, so that a reader
// sees the old value or the new one, never a part. No fsync: the readers are
// other processes, which see the rename at once, and a rendezvous does not
// outlive a machine's crash.
void write_key(const std::string& prefix, const std::string& folder, const std::string& key, const std::string& file,
               std::string_view bytes) {
  const std::string temp = folder + "/" + temp_name();
  auto fail = [&](int err) {
    ::unlink(temp.c_str());
    throw DistributedError(detail::str_cat(prefix, ": cannot write key '", key, "' to ", file, ": ", errno_str(err),
                                           " (the folder must be writable by every rank)"));
  };
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) fail(errno);
  while (!bytes.empty()) {
    ssize_t n = ::write(fd.get(), bytes.data(), bytes.size());
    if (n >= 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
    } else if (errno != EINTR) {
      fail(errno);
    }
  }
  if (::close(fd.release()) != 0) fail(errno);
  if (::rename(temp.c_str(), file.c_str()) != 0) fail(errno);
}

// Calls ready() every 1 ms, doubling to 50 ms, until it is true (then true)
// or the deadline passes (then false).
template <typename F>
bool retry_until(F&& ready, Clock::time_point deadline) {
  milliseconds interval(1);
  for (;;) {
    if (ready()) return true;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(interval, deadline - now));
    interval = std::min(interval * 2, milliseconds(50));
  }
}

bool exists(const std::string& file) {
  struct stat st;
  return ::stat(file.c_str(), &st) == 0;
}

}  // namespace

FileStore::FileStore(std::string path, std::chrono::milliseconds timeout) : Store(timeout), path_(std::move(path)) {
  TANDEM_CHECK(!path_.empty(), ValueError,
               "FileStore: the path is empty; pass the folder that every rank shares (file://PATH's PATH)");
  std::error_code ec;
  std::filesystem::create_directories(path_, ec);
  TANDEM_CHECK(!ec, DistributedError, "FileStore: cannot create the folder ", path_, ": ", ec.message(),
               " (choose a folder that every rank can write, on a file system they all see)");
}

FileStore::~FileStore() = default;

std::string FileStore::file_of(const std::string& key) const { return path_ + "/" + file_name(key); }

void FileStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  write_key(file_prefix(path_), path_, key, file_of(key), bytes_view(value));
}

std::vector<uint8_t> FileStore::get(const std::string& key) {
  const milliseconds t = non_negative(timeout());
  std::optional<std::string> value;
  const std::string prefix = file_prefix(path_), file = file_of(key);
  // Read, not stat then read: a key deleted in between is waited for again.
  if (!retry_until([&] { return (value = read_key(prefix, key, file)).has_value(); }, Clock::now() + t)) {
    throw DistributedError(key_timeout_message(prefix, t, {key}));
  }
  return std::vector<uint8_t>(value->begin(), value->end());
}

int64_t FileStore::add(const std::string& key, int64_t value) {
  const milliseconds t = non_negative(timeout());
  const std::string prefix = file_prefix(path_), file = file_of(key), lock_file = file + ".lock";
  auto fail = [&](int err) {
    throw DistributedError(
        detail::str_cat(prefix, ": cannot lock key '", key, "' for add() (", lock_file, "): ", errno_str(err)));
  };
  // The lock file is never deleted: a process could hold a lock on the file
  // while another creates a new one under the same name.
  Fd lock(::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock) fail(errno);
  // LOCK_NB and a retry, so that a process stopped while holding the lock
  // costs a timeout, not a hang.
  const bool locked = retry_until(
      [&] {
        if (::flock(lock.get(), LOCK_EX | LOCK_NB) == 0) return true;
        if (errno != EWOULDBLOCK && errno != EINTR) fail(errno);
        return false;
      },
      Clock::now() + t);
  TANDEM_CHECK(locked, DistributedError, prefix, ": timed out after ", seconds_str(t), " waiting for the lock on key '",
               key, "' (", lock_file, "), which another add() holds (is a process stopped or stuck inside one?)");
  std::optional<std::string> current = read_key(prefix, key, file);
  const int64_t sum = counter_add(prefix, key, current ? &*current : nullptr, value);
  write_key(prefix, path_, key, file, std::to_string(sum));
  return sum;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return exists(file_of(k)); });
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  timeout = non_negative(timeout);
  if (retry_until([&] { return check(keys); }, Clock::now() + timeout)) return;
  std::vector<std::string> missing;
  for (const std::string& k : keys) {
    if (!exists(file_of(k))) missing.push_back(k);
  }
  if (missing.empty()) return;
  throw DistributedError(key_timeout_message(file_prefix(path_), timeout, missing));
}

bool FileStore::delete_key(const std::string& key) {
  const std::string file = file_of(key);
  if (::unlink(file.c_str()) == 0) return true;
  const int err = errno;
  TANDEM_CHECK(err == ENOENT, DistributedError, file_prefix(path_), ": cannot delete key '", key, "' (", file,
               "): ", errno_str(err));
  return false;
}

std::string FileStore::describe() const { return "file://" + path_; }

// ---- PrefixStore -------------------------------------------------------

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultStoreTimeout), prefix_(std::move(prefix)), store_(std::move(store)) {
  TANDEM_CHECK(store_ != nullptr, ValueError, "PrefixStore('", prefix_,
               "'): the store is null; pass the store whose keys it prefixes (a TCPStore or a FileStore)");
}

std::vector<std::string> PrefixStore::keys(const std::vector<std::string>& ks) const {
  std::vector<std::string> out;
  out.reserve(ks.size());
  for (const std::string& k : ks) out.push_back(key(k));
  return out;
}

void PrefixStore::set(const std::string& k, const std::vector<uint8_t>& value) { store_->set(key(k), value); }

std::vector<uint8_t> PrefixStore::get(const std::string& k) {
  // The wait applies this store's timeout, not the underlying one's.
  store_->wait({key(k)}, timeout());
  return store_->get(key(k));
}

int64_t PrefixStore::add(const std::string& k, int64_t value) { return store_->add(key(k), value); }
bool PrefixStore::check(const std::vector<std::string>& ks) { return store_->check(keys(ks)); }
void PrefixStore::wait(const std::vector<std::string>& ks, std::chrono::milliseconds timeout) {
  store_->wait(keys(ks), timeout);
}
bool PrefixStore::delete_key(const std::string& k) { return store_->delete_key(key(k)); }
std::string PrefixStore::describe() const { return store_->describe() + " (prefix '" + prefix_ + "')"; }

}  // namespace tandem::distributed

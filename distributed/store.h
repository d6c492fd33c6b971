// The key-value stores ranks meet through (c10d's Store): a process group's
// rendezvous exchanges each rank's transport address, NCCL's unique id and
// the debug fingerprints through one. TCPStore is a server in the process of
// rank 0 (or whoever is_master) and a client in every process; FileStore is
// a folder on a file system every rank sees; PrefixStore namespaces keys.
//
// Debian's Gloo has no TCP store (only FileStore, HashStore and a Redis
// store that needs a redis-server), so Tandem has its own, as PyTorch does:
// env:// and tcp:// then need nothing but the port. docs/distributed.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tandem::distributed {

// PyTorch's default store and process-group timeout (30 minutes is its
// collective default; its store's is 5).
inline constexpr std::chrono::milliseconds kDefaultStoreTimeout = std::chrono::minutes(5);

class Store {
 public:
  explicit Store(std::chrono::milliseconds timeout = kDefaultStoreTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Sets key to value (overwriting), and wakes whoever waits for it.
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // The value of key, waiting up to timeout() for it to be set.
  virtual std::vector<uint8_t> get(const std::string& key) = 0;
  // Adds value to the integer at key (0 when absent) and returns the sum;
  // atomic across all clients.
  virtual int64_t add(const std::string& key, int64_t value) = 0;
  // Whether every key is set, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key is set; past the timeout, a DistributedError
  // naming the keys still missing, the store and the time waited.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  // Removes key; false if it was not set.
  virtual bool delete_key(const std::string& key) = 0;
  // For messages: "tcp://127.0.0.1:29500", "file:///tmp/run".
  virtual std::string describe() const = 0;

  void set(const std::string& key, const std::string& value) {
    set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string get_string(const std::string& key) {
    std::vector<uint8_t> v = get(key);
    return std::string(v.begin(), v.end());
  }

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  std::chrono::milliseconds timeout_;
};

// A store served over TCP. The master binds host:port (port 0: a free port,
// read back with port()) and runs the server on a thread of its own; every
// instance, the master's included, is a client of it. A client that cannot
// connect retries until the timeout (the master may start later), then
// throws a DistributedError naming the address and what to check. A port
// in use is a DistributedError that names the port and the fix, at
// construction.
//
// With world_size set, the master's constructor waits (up to the timeout)
// until world_size clients, itself included, have connected, as PyTorch's
// wait_for_workers.
class TCPStore : public Store {
 public:
  TCPStore(std::string host, uint16_t port, std::optional<int> world_size = std::nullopt, bool is_master = false,
           std::chrono::milliseconds timeout = kDefaultStoreTimeout, bool wait_for_workers = true);
  ~TCPStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  std::string describe() const override;
  using Store::set;
  using Store::wait;

  const std::string& host() const;
  uint16_t port() const;
  bool is_master() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A store in a folder (created if absent): one file per key, written to a
// temporary name and renamed, so that a reader never sees half a value;
// add() holds an flock on the key's lock file (KEYFILE.lock:
// the key file itself is replaced by each rename). Waits poll the folder.
class FileStore : public Store {
 public:
  explicit FileStore(std::string path, std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  ~FileStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  std::string describe() const override;
  using Store::set;
  using Store::wait;

  const std::string& path() const { return path_; }

 private:
  std::string file_of(const std::string& key) const;
  std::string path_;
};

// Every key of `store` prefixed with "prefix/".
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  std::string describe() const override;
  using Store::set;
  using Store::wait;

  const std::shared_ptr<Store>& underlying() const { return store_; }

 private:
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  std::vector<std::string> keys(const std::vector<std::string>& ks) const;
  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace tandem::distributed

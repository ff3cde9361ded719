// pmds-server — the commands: what each Redis command does to the store and replies, as Redis's
// command documentation says, independent of the network (the event loops are in main.cpp;
// test/server_commands_hw_test.cpp drives this layer directly).
//
// Atomicity. The store's operations are each linearizable; Redis's commands that read and then
// write a key (INCR, APPEND, SET ... GET, GETDEL, SETNX) and those over several keys (MSET,
// MGET, DEL, EXISTS) must also be atomic. Every command that touches keys holds the key's lock
// stripe (4096 reader-writer locks chosen by the key's hash), exclusive to write, shared to
// read, and a multi-key command holds all its stripes, taken in stripe order (no deadlock).
// So no client sees half an MSET or loses an INCR. A crash is another matter: the store's
// criterion decides what survives, key by key (an MSET's keys are written one after another).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "resp.hpp"
#include "store.hpp"

namespace pmds::server {

struct Config {
  std::string bind = "127.0.0.1";
  int port = 6379;
  std::size_t threads = 1;
  std::string requirepass;       // empty: no AUTH needed
  bool enable_flushall = false;  // FLUSHALL and FLUSHDB refused unless set
  std::size_t max_clients = 10000;
  std::size_t max_query_buffer = std::size_t{1} << 30;     // Redis's client-query-buffer-limit
  std::size_t max_pending_output = std::size_t{64} << 20;  // stop reading a client past this
  Limits limits;
};

// What a connection is, as far as commands see it.
struct Session {
  std::uint64_t id = 0;
  std::string name;
  bool authenticated = false;
};

// What the connection does after a command's reply was appended.
enum class After {
  next,   // go on with the next request
  close,  // write what is pending, then close (QUIT)
  sync,   // run store.sync() away from the event loop, then append sync_reply()
};

class Commands {
 public:
  Commands(Store& store, const Config& config, std::size_t recovered_keys, double recovery_ms);

  // Runs one request (args non-empty) and appends its reply.
  After execute(Session& session, std::span<const std::string_view> args, Reply& reply);
  // What After::sync asks for, run on a thread of its own: everything acknowledged is durable.
  void sync() { store_.sync(); }
  // WAITAOF's reply once sync() returned.
  static void sync_reply(Reply& reply);

  // Connection accounting for INFO and maxclients: false when the client must be refused.
  bool client_connected();
  void client_disconnected();
  std::uint64_t next_client_id() { return next_client_id_.fetch_add(1) + 1; }

  std::size_t key_count() const {
    const std::int64_t n = keys_.load(std::memory_order_relaxed);
    return n < 0 ? 0 : static_cast<std::size_t>(n);
  }

  struct Context;  // one command's arguments, session and reply (commands.cpp)

 private:
  // A reader-writer spin lock (pmds::backoff while it waits; a stripe is held for one map
  // operation or a few). Not std::shared_mutex: FLUSHALL holds every stripe at once, and
  // ThreadSanitizer tracks at most 64 pthread locks held by a thread (its check aborts the
  // program); an atomic word it checks as the data it is. Also cheaper: pthread_rwlock_rdlock
  // was 6.8% of the server's cycles at GET -P 16 (perf).
  struct alignas(64) Stripe {
    std::atomic<std::int32_t> state{0};  // readers holding it; -1: a writer does
    void lock();
    void unlock() { state.store(0, std::memory_order_release); }
    void lock_shared();
    void unlock_shared() { state.fetch_sub(1, std::memory_order_release); }
  };
  static constexpr std::size_t stripe_count = 4096;
  std::size_t stripe_of(std::string_view key) const;
  std::vector<std::size_t> stripes_of(std::span<const std::string_view> keys) const;

  friend struct Handlers;
  Store& store_;
  const Config& config_;
  const std::size_t recovered_keys_;
  const double recovery_ms_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::vector<Stripe> stripes_;
  std::atomic<std::int64_t> keys_;  // exact: changed under the key's stripe, by put/remove results
  std::atomic<std::uint64_t> next_client_id_{0};
  std::atomic<std::size_t> clients_{0};
  std::atomic<std::uint64_t> connections_received_{0};
  std::atomic<std::uint64_t> commands_processed_{0};

  // SCAN's cursors: a number standing for "the keys after this one" (Redis's cursors are
  // numbers, and client libraries parse them as such; an ordered map's position is a key).
  // The newest max_cursors are kept; an older one is answered with an error.
  static constexpr std::size_t max_cursors = 65536;
  std::mutex cursors_lock_;
  std::map<std::uint64_t, std::string> cursors_;
  std::uint64_t next_cursor_ = 1;
};

}  // namespace pmds::server

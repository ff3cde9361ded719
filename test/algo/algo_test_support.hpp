// pmds tests — shared drivers for the algo/ structures: concurrent stress tests checked against
// sequential models, and recovery of a durable structure in a new process.
//
// Sets/maps: each thread owns a partition of the keys (checked exactly against its own
// sequential model) and also hits a small shared key range (checked by per-key counts of
// successful inserts and removes: each shared key ends present iff inserts - removes == 1,
// and that difference must be 0 or 1). Then the contents are compared with the union.
// Queues/stacks: every value taken out exactly once; per-producer FIFO for queues.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pmds/algo/flit_policy.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/mirror/policy.hpp"
#include "pmds/pm/pool.hpp"
#include "support/child_process.hpp"
#include "support/set_model.hpp"
#include "support/temp_path.hpp"

namespace pmds::algo::testing {

// Sanitizers make everything ~10x slower: scale the work down there.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr int work_scale = 4;
#else
inline constexpr int work_scale = 1;
#endif

// Every memory policy an algo/ structure is tested under: a new policy joins every algorithm's
// tests by one edit here.
using AllPolicies =
    ::testing::Types<transient, transient_pm_atomic, izraelevitz, flit, mirror::MirrorPolicy<>>;

inline Value value_of(Key k) {
  return k * 0x9E3779B97F4A7C15ull + 7;
}

// The map holding exactly `keys`, each with its value_of.
inline std::map<Key, Value> keys_of(std::initializer_list<Key> keys) {
  std::map<Key, Value> m;
  for (Key k : keys) m.emplace(k, value_of(k));
  return m;
}

// A pool file path removed on destruction (the pool tests' own).
using pmds::test::TempPath;

inline constexpr std::size_t pool_size = 96u << 20;

// A structure under test, with its pool when the policy is durable. Args go to the
// structure's constructor after (pool, root slot) or alone (transient).
template <class S>
class Instance {
 public:
  template <class... Args>
  explicit Instance(Args&&... args) : path_(S::name) {
    if constexpr (S::Policy::durable) {
      pool_.emplace(pm::Pool::create(path_.str(), pool_size, layout(), pool_options()));
      s_ = std::make_unique<S>(create_new, *pool_, std::forward<Args>(args)...);
    } else {
      s_ = std::make_unique<S>(std::forward<Args>(args)...);
    }
  }
  S& operator*() { return *s_; }
  S* operator->() { return s_.get(); }
  pm::Pool& pool() { return *pool_; }

  // Durable: destroys the structure, closes the pool, opens it again and recovers.
  void reopen() {
    if constexpr (S::Policy::durable) {
      s_.reset();
      pool_.reset();
      pool_.emplace(pm::Pool::open(path_.str(), layout()));
      s_ = std::make_unique<S>(open_existing, *pool_);
    }
  }
  static std::string layout() { return std::string("algo/") + S::name; }
  static pm::PoolOptions pool_options() { return pool_options_for<typename S::Policy>(); }

 private:
  TempPath path_;
  std::optional<pm::Pool> pool_;
  std::unique_ptr<S> s_;
};

// ---------------------------------------------------------------------------------------------
// Recovery in a new process.

// Runs `fill(structure)` in a forked child that created the pool; the child then exits with
// the pool open (dirty: no close, no destructor) or after a clean close. Returns the path's
// owner; the caller opens the pool and recovers. `make(pool)` constructs the structure.
template <class S, class Make, class Fill>
void fill_in_child(const std::string& path, Make&& make, Fill&& fill, bool clean_close) {
  const int code = pmds::test::run_in_child([&] {
    auto pool =
        pm::Pool::create(path, pool_size, Instance<S>::layout(), Instance<S>::pool_options());
    auto s = make(pool);
    fill(*s);
    if (!clean_close) ::_exit(0);  // dirty: the pool's clean flag stays unset; nothing unmapped
    s.reset();
    pool.close();
    return 0;
  });
  ASSERT_EQ(code, 0) << "the child failed (100: an exception, 200: it died)";
}

// After recovery: every slot of every used chunk is either live (reached by the trace) or on
// a free list; the trace reached exactly `expected_live` slots.
inline void expect_slot_accounting(pm::Pool& pool, const RecoveryStats& stats,
                                   std::size_t expected_live) {
  std::size_t total = 0;
  pool.allocator().for_each_slot([&](void*, std::size_t) { ++total; });
  EXPECT_EQ(stats.live_slots, expected_live);
  EXPECT_EQ(pool.allocator().free_slots(), total - expected_live);
  EXPECT_EQ(stats.freed_slots + stats.live_slots, total);
  EXPECT_EQ(stats.slots_scanned, total);
}

// Creating a structure in a pool that already holds one, and opening a pool that holds none,
// throw PoolError before anything is written or read.
template <class S>
void pool_misuse_is_a_typed_error() {
  Instance<S> s;  // a structure in a pool
  EXPECT_THROW(S(create_new, s.pool()), PoolError);
  TempPath path("empty");
  auto empty =
      pm::Pool::create(path.str(), pool_size, Instance<S>::layout(), Instance<S>::pool_options());
  EXPECT_THROW(S(open_existing, empty), PoolError);
}

// ---------------------------------------------------------------------------------------------
// Sets and maps.

struct SetStressConfig {
  int threads = 2;
  int ops_per_thread = 50000 / work_scale;
  Key own_keys = 64;     // keys per thread partition
  Key shared_keys = 16;  // keys every thread hits
  int shared_percent = 30;
  std::uint64_t seed = 1;
};

// Thread t's partition: keys 1 + t + threads * i (interleaved, so threads meet in the structure).
inline Key own_key(const SetStressConfig& c, int t, Key i) {
  return 1 + static_cast<Key>(t) + static_cast<Key>(c.threads) * i;
}
inline Key shared_key(const SetStressConfig& c, Key j) {
  return 1 + static_cast<Key>(c.threads) * c.own_keys + j;
}

// Thread t's operations on its own partition, applied to any set (the structure, or a model).
// With `check`, every result is compared with the thread's sequential model.
template <class S>
std::set<Key> run_partition(S& s, const SetStressConfig& c, int t, bool check,
                            std::vector<std::int64_t>* shared_net = nullptr,
                            std::atomic<std::uint64_t>* progress = nullptr) {
  std::mt19937_64 rng(c.seed * 1000003 + static_cast<std::uint64_t>(t));
  std::set<Key> model;
  int mismatches = 0;
  for (int i = 0; i < c.ops_per_thread; ++i) {
    if (progress != nullptr) progress->store(static_cast<std::uint64_t>(i));  // i completed
    const int op = static_cast<int>(rng() % 4);
    const bool shared = shared_net != nullptr && static_cast<int>(rng() % 100) < c.shared_percent;
    if (shared) {
      const Key j = rng() % c.shared_keys;
      const Key k = shared_key(c, j);
      switch (op) {
        case 0:
          if (s.insert(k, value_of(k))) ++(*shared_net)[j];
          break;
        case 1:
          if (s.remove(k)) --(*shared_net)[j];
          break;
        case 2:
          (void)s.contains(k);
          break;
        default:
          if (auto v = s.get(k); v && *v != value_of(k)) ++mismatches;
      }
      continue;
    }
    const Key k = own_key(c, t, rng() % c.own_keys);
    const bool present = model.count(k) != 0;
    switch (op) {
      case 0: {
        const bool r = s.insert(k, value_of(k));
        if (r != !present) ++mismatches;
        model.insert(k);
        break;
      }
      case 1: {
        const bool r = s.remove(k);
        if (r != present) ++mismatches;
        model.erase(k);
        break;
      }
      case 2:
        if (s.contains(k) != present) ++mismatches;
        break;
      default: {
        const std::optional<Value> v = s.get(k);
        if (v.has_value() != present || (v && *v != value_of(k))) ++mismatches;
      }
    }
  }
  if (check) {
    EXPECT_EQ(mismatches, 0) << "thread " << t << ": results differ from its model";
  }
  return model;
}

// A std::map with the set surface, as the sequential model.
struct ModelSet {
  std::map<Key, Value> m;
  bool insert(Key k, Value v) { return m.emplace(k, v).second; }
  bool remove(Key k) { return m.erase(k) != 0; }
  bool contains(Key k) const { return m.count(k) != 0; }
  std::optional<Value> get(Key k) const {
    auto it = m.find(k);
    return it == m.end() ? std::nullopt : std::optional<Value>(it->second);
  }
};

template <class S>
std::map<Key, Value> contents_of(const S& s) {
  std::map<Key, Value> out;
  s.for_each([&](Key k, Value v) { EXPECT_TRUE(out.emplace(k, v).second) << "key twice: " << k; });
  return out;
}

// The expected contents after every thread ran run_partition without shared keys, from empty.
inline std::map<Key, Value> partition_model(const SetStressConfig& c) {
  std::map<Key, Value> out;
  for (int t = 0; t < c.threads; ++t) {
    ModelSet m;
    for (Key k : run_partition(m, c, t, false)) out.emplace(k, value_of(k));
  }
  return out;
}

// The concurrent stress test; the structure starts empty.
template <class S>
void set_stress(S& s, const SetStressConfig& c) {
  std::vector<std::set<Key>> models(c.threads);
  std::vector<std::vector<std::int64_t>> nets(c.threads,
                                              std::vector<std::int64_t>(c.shared_keys, 0));
  std::vector<std::thread> workers;
  for (int t = 0; t < c.threads; ++t)
    workers.emplace_back([&, t] { models[t] = run_partition(s, c, t, true, &nets[t]); });
  for (auto& w : workers) w.join();

  std::map<Key, Value> expected;
  for (const auto& m : models)
    for (Key k : m) expected.emplace(k, value_of(k));
  for (Key j = 0; j < c.shared_keys; ++j) {
    std::int64_t net = 0;
    for (const auto& n : nets) net += n[j];
    ASSERT_TRUE(net == 0 || net == 1)
        << "shared key " << shared_key(c, j) << ": successful inserts - removes = " << net;
    if (net == 1) expected.emplace(shared_key(c, j), value_of(shared_key(c, j)));
  }
  EXPECT_EQ(contents_of(s), expected);
  for (const auto& [k, v] : expected) {
    EXPECT_TRUE(s.contains(k)) << k;
    EXPECT_EQ(s.get(k), std::optional<Value>(v)) << k;
  }
  EXPECT_EQ(s.size(), expected.size());
}

// Sequential sanity: behaves as std::map on random operations over a small range.
template <class S>
void set_sequential(S& s, int ops = 5000) {
  std::map<Key, Value> model;
  ASSERT_NO_FATAL_FAILURE(pmds::test::expect_set_matches_map(s, model, ops, 200));
  EXPECT_EQ(contents_of(s), model);
  // Keys at the ends of the user range are ordinary keys.
  EXPECT_TRUE(s.insert(min_user_key, 1));
  EXPECT_TRUE(s.insert(max_user_key, 2));
  EXPECT_EQ(s.get(min_user_key), std::optional<Value>(1));
  EXPECT_EQ(s.get(max_user_key), std::optional<Value>(2));
  EXPECT_TRUE(s.remove(min_user_key));
  EXPECT_TRUE(s.remove(max_user_key));
  EXPECT_FALSE(s.contains(max_user_key));
}

template <class S>
void set_reserved_keys_throw(S& s) {
  for (Key k : {min_reserved_key, max_reserved_key}) {
    EXPECT_THROW(s.insert(k, 1), ReservedKey);
    EXPECT_THROW(s.remove(k), ReservedKey);
    EXPECT_THROW(s.contains(k), ReservedKey);
    EXPECT_THROW(s.get(k), ReservedKey);
  }
  EXPECT_EQ(s.size(), 0u);
}

// A recovered structure keeps working: remove every recovered key (each must be there), then
// run the stress test on it (its allocations reuse the slots recovery freed).
template <class S>
void use_after_recovery(S& s, const std::map<Key, Value>& recovered, Key own_keys = 64) {
  for (const auto& [k, v] : recovered) EXPECT_TRUE(s.remove(k)) << k;
  EXPECT_EQ(s.size(), 0u);
  SetStressConfig c;
  c.seed = 1234;
  c.own_keys = own_keys;
  c.ops_per_thread = 5000 / work_scale;
  set_stress(s, c);
}

// The recovery test of a durable set: a child creates the structure with `make(pool)`, fills
// it with 2 threads on disjoint partitions and exits (dirty, or after a clean close); this
// process recovers it, compares it with the model, checks that the allocator accounts for
// every slot (live = live_slots(structure, key count)), then keeps using it.
template <class S, class Make, class LiveSlots>
void set_recovery_in_new_process(Make make, LiveSlots live_slots, bool clean_close,
                                 Key own_keys = 200) {
  TempPath path(std::string(S::name) + "-recovery");
  SetStressConfig c;
  c.threads = 2;
  c.ops_per_thread = 4000 / work_scale;
  c.own_keys = own_keys;
  const auto expected = partition_model(c);
  fill_in_child<S>(
      path.str(), make,
      [&](S& s) {
        std::vector<std::thread> workers;
        for (int t = 0; t < c.threads; ++t)
          workers.emplace_back([&, t] { run_partition(s, c, t, false); });
        for (auto& w : workers) w.join();
      },
      clean_close);
  if (::testing::Test::HasFatalFailure()) return;

  auto pool = pm::Pool::open(path.str(), Instance<S>::layout());
  EXPECT_EQ(pool.was_clean_shutdown(), clean_close);
  S s(open_existing, pool);
  EXPECT_EQ(contents_of(s), expected);
  expect_slot_accounting(pool, s.recovery_stats(), live_slots(s, expected.size()));
  use_after_recovery(s, expected, std::min<Key>(own_keys, 64));
}

// Recovery after a real process crash in the middle of operations: a child runs 2 threads of
// partition operations forever, publishing how many each completed (in shared memory); once
// every thread did `min_ops`, this process kills it (SIGKILL), recovers, and checks each
// thread's partition: it must equal the model after the completed operations, or after one
// more (the pending one took effect). The page cache keeps every store, so this tests the
// recovery logic (pending marks, flags, half-linked nodes), not flushes.
template <class S, class Make>
void set_recovery_after_kill(Make make, Key own_keys, std::uint64_t min_ops = 3000) {
  TempPath path(std::string(S::name) + "-kill");
  SetStressConfig c;
  c.threads = 2;
  c.own_keys = own_keys;
  c.ops_per_thread = 1 << 30;  // until killed
  const std::vector<std::uint64_t> done =
      pmds::test::killed_mid_run(c.threads, min_ops, [&](std::atomic<std::uint64_t>* progress) {
        auto pool = pm::Pool::create(path.str(), pool_size, Instance<S>::layout(),
                                     Instance<S>::pool_options());
        auto s = make(pool);
        std::vector<std::thread> workers;
        for (int t = 0; t < c.threads; ++t)
          workers.emplace_back([&, t] { run_partition(*s, c, t, false, nullptr, &progress[t]); });
        for (auto& w : workers) w.join();
      });
  if (::testing::Test::HasFailure()) return;

  auto pool = pm::Pool::open(path.str(), Instance<S>::layout());
  EXPECT_FALSE(pool.was_clean_shutdown());
  S s(open_existing, pool);
  const auto contents = contents_of(s);
  std::map<Key, Value> recovered_keys;
  for (int t = 0; t < c.threads; ++t) {
    std::set<Key> found;
    for (const auto& [k, v] : contents)
      if ((k - 1) % static_cast<Key>(c.threads) == static_cast<Key>(t)) {
        found.insert(k);
        EXPECT_EQ(v, value_of(k));
      }
    SetStressConfig upto = c;
    upto.ops_per_thread = static_cast<int>(done[t]);
    ModelSet before_pending, after_pending;
    const std::set<Key> without = run_partition(before_pending, upto, t, false);
    upto.ops_per_thread += 1;
    const std::set<Key> with = run_partition(after_pending, upto, t, false);
    EXPECT_TRUE(found == without || found == with)
        << "thread " << t << " after " << done[t] << " operations: recovered " << found.size()
        << " keys, the model has " << without.size() << " (or " << with.size()
        << " with the pending operation)";
  }
  std::size_t total = 0;
  pool.allocator().for_each_slot([&](void*, std::size_t) { ++total; });
  const RecoveryStats& stats = s.recovery_stats();
  EXPECT_EQ(pool.allocator().free_slots() + stats.live_slots, total);
  use_after_recovery(s, contents, std::min<Key>(own_keys, 64));
}

// ---------------------------------------------------------------------------------------------
// Queues and stacks.

inline std::uint64_t tagged_value(int producer, std::uint64_t seq) {
  return (static_cast<std::uint64_t>(producer + 1) << 40) | seq;
}

// 5000 random puts and takes (2:1) of random values, each take checked against `model`: a queue
// takes from the model's front (fifo), a stack from its back. `model` keeps what is left.
template <class Put, class Take>
void sequential_against_model(Put put, Take take, std::deque<Value>& model, bool fifo,
                              std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 5000; ++i) {
    if (rng() % 3 != 0) {
      const Value v = rng();
      put(v);
      model.push_back(v);
    } else {
      std::optional<Value> expected;
      if (!model.empty() && fifo) {
        expected = model.front();
        model.pop_front();
      } else if (!model.empty()) {
        expected = model.back();
        model.pop_back();
      }
      ASSERT_EQ(take(), expected);
    }
  }
}

// Every thread puts its own increasing values and takes values out; `put`/`take` are the
// structure's enqueue/dequeue or push/pop. Afterwards the rest is drained. Checks each value
// came out exactly once; with `fifo`, that each taker saw every producer's values in order.
template <class Put, class Take>
void pool_stress(Put put, Take take, int threads, int per_thread, bool fifo) {
  std::vector<std::vector<std::uint64_t>> taken(threads + 1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 17);
      for (int i = 0; i < per_thread; ++i) {
        put(tagged_value(t, static_cast<std::uint64_t>(i)));
        if (rng() % 2 == 0)
          if (auto v = take()) taken[t].push_back(*v);
      }
    });
  }
  for (auto& w : workers) w.join();
  while (auto v = take()) taken[threads].push_back(*v);

  std::vector<std::vector<int>> seen(threads, std::vector<int>(per_thread, 0));
  int bad = 0;
  for (const auto& list : taken) {
    std::vector<std::int64_t> last(threads, -1);
    for (std::uint64_t v : list) {
      const std::uint64_t producer = (v >> 40) - 1, seq = v & ((std::uint64_t{1} << 40) - 1);
      if (producer >= static_cast<std::uint64_t>(threads) ||
          seq >= static_cast<std::uint64_t>(per_thread)) {
        ++bad;
        continue;
      }
      ++seen[producer][seq];
      if (fifo) {
        if (static_cast<std::int64_t>(seq) <= last[producer]) ++bad;
        last[producer] = static_cast<std::int64_t>(seq);
      }
    }
  }
  EXPECT_EQ(bad, 0) << "values out of range" << (fifo ? " or out of per-producer FIFO order" : "");
  int missing = 0, duplicated = 0;
  for (const auto& s : seen)
    for (int n : s) {
      missing += n == 0;
      duplicated += n > 1;
    }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(duplicated, 0);
}

}  // namespace pmds::algo::testing

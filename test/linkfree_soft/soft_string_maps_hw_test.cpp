// labels: concurrent memory
// SoftStringHashMap (hash-bytes/soft, linkfree_soft/soft_string_hash_map.hpp) on the hardware
// backend: keys and values of any bytes and sizes up to the limits; sizes over them and a full
// pool change nothing; a random run against a model across reopens; update() as an atomic
// read-modify-write under threads; concurrent puts and removes that readers only ever see whole;
// a process killed by SIGKILL keeps every completed operation; and recovery's rule for two live
// versions of one key (a replacement a crash interrupted): the higher is kept and the lower is
// durably deleted, so it cannot come back after the key is removed.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pmds/linkfree_soft/soft_string_hash_map.hpp"
#include "pmds/pm/pool.hpp"
#include "pool/pool_test_util.hpp"

namespace {

using namespace pmds;
using Map = linkfree_soft::SoftStringHashMap;
using Model = std::map<std::string, std::string>;
using pool_test::in_child_killed_by_sigkill;
using pool_test::TempPath;

constexpr std::size_t kPoolSize = 64u << 20;

class SoftStringHashMapTest : public ::testing::Test {
 protected:
  // A small table, so that buckets hold several keys.
  Map& create(std::size_t buckets = 64) {
    map_.reset();
    pool_.reset();
    pool_ = std::make_unique<pm::Pool>(pm::Pool::create(path_.str(), kPoolSize, Map::name));
    map_ = std::make_unique<Map>(create_new, *pool_, buckets);
    return *map_;
  }
  // Closes the map and pool (cleanly) and opens them again: recovery runs.
  Map& reopen() {
    map_.reset();
    pool_.reset();
    pool_ = std::make_unique<pm::Pool>(pm::Pool::open(path_.str(), Map::name));
    map_ = std::make_unique<Map>(open_existing, *pool_);
    return *map_;
  }
  Model contents() {
    Model out;
    map_->for_each([&](std::string_view k, std::string_view v) {
      EXPECT_TRUE(out.emplace(k, v).second) << "a key twice: " << k;
    });
    return out;
  }

  TempPath path_{"soft_string_hash_map.pool"};
  std::unique_ptr<pm::Pool> pool_;
  std::unique_ptr<Map> map_;
};

TEST_F(SoftStringHashMapTest, KeysAndValuesOfAnyBytesComeBackWhole) {
  Map& m = create();
  Model model;
  const std::vector<std::string> keys = {
      "",   std::string(1, '\0'), std::string(2, '\0'), "a",
      "ab", "abcdefgh",           "abcdefghi",          std::string(Map::max_key_size, 'k')};
  int i = 0;
  for (const std::string& k : keys) {
    const std::string v = i % 2 == 0 ? std::string(static_cast<std::size_t>(i) * 97, 'v')
                                     : std::string(Map::max_value_size - i, static_cast<char>(i));
    ASSERT_TRUE(m.insert(k, v)) << i;
    model[k] = v;
    ++i;
  }
  EXPECT_EQ(contents(), model);
  EXPECT_EQ(m.size(), keys.size());
  std::string out = "unchanged";
  EXPECT_FALSE(m.get("absent", out));
  EXPECT_EQ(out, "unchanged");
  ASSERT_TRUE(m.get("abcdefgh", out));
  EXPECT_EQ(out, model["abcdefgh"]);
  EXPECT_FALSE(m.insert("a", "other"));  // insert never replaces
  EXPECT_EQ(m.get("a"), model["a"]);
  reopen();
  EXPECT_EQ(contents(), model);
  EXPECT_EQ(map_->size(), keys.size());
  EXPECT_EQ(map_->recovery_stats().live_slots, keys.size());
}

TEST_F(SoftStringHashMapTest, SizesOverTheLimitsAreRejectedAndChangeNothing) {
  Map& m = create();
  ASSERT_TRUE(m.put("k", "v"));
  const std::string long_key(Map::max_key_size + 1, 'k');
  const std::string long_value(Map::max_value_size + 1, 'v');
  EXPECT_THROW(m.insert(long_key, "v"), Error);
  EXPECT_THROW(m.put("k", long_value), Error);
  EXPECT_THROW(m.get(long_key), Error);
  EXPECT_THROW(m.remove(long_key), Error);
  EXPECT_THROW(m.update("k", [&](auto) { return std::optional<std::string>(long_value); }), Error);
  EXPECT_EQ(contents(), (Model{{"k", "v"}}));
}

TEST_F(SoftStringHashMapTest, ARandomRunMatchesAModelAcrossReopens) {
  create(16);
  Model model;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 4; ++round) {
    Map& m = *map_;
    for (int i = 0; i < 3000; ++i) {
      const std::string k = "key" + std::to_string(rng() % 300);
      const std::string v(rng() % 3 == 0 ? rng() % 3000 : rng() % 40,
                          static_cast<char>('a' + i % 26));
      switch (rng() % 5) {
        case 0:
          EXPECT_EQ(m.insert(k, v), model.emplace(k, v).second) << k;
          break;
        case 1: {
          const bool absent = !model.contains(k);
          EXPECT_EQ(m.put(k, v), absent) << k;
          model[k] = v;
          break;
        }
        case 2:
          EXPECT_EQ(m.remove(k), model.erase(k) == 1) << k;
          break;
        case 3: {  // append to the value, or create it
          const bool stored = m.update(k, [&](std::optional<std::string_view> old) {
            return std::optional<std::string>(old ? std::string(*old) + "+" : std::string("new"));
          });
          EXPECT_TRUE(stored);
          model[k] = model.contains(k) ? model[k] + "+" : "new";
          break;
        }
        default: {
          const auto it = model.find(k);
          EXPECT_EQ(m.get(k), it == model.end() ? std::nullopt : std::optional(it->second)) << k;
        }
      }
    }
    EXPECT_EQ(contents(), model);
    EXPECT_EQ(m.size(), model.size());
    reopen();
    EXPECT_EQ(contents(), model) << "after reopen " << round;
    // At most one older version per key: the one its last replacement left live.
    EXPECT_LE(map_->recovery_stats().duplicate_keys, model.size());
  }
  // update's fn may decline: nothing is written.
  EXPECT_FALSE(map_->update("key1", [](auto) { return std::optional<std::string>(); }));
  EXPECT_EQ(contents(), model);
}

TEST_F(SoftStringHashMapTest, UpdateIsAnAtomicReadModifyWriteAcrossThreads) {
  Map& m = create(4);
  constexpr int kThreads = 4, kPerThread = 1500, kKeys = 5;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string k = "counter" + std::to_string((i + t) % kKeys);
        m.update(k, [](std::optional<std::string_view> old) {
          return std::optional<std::string>(
              std::to_string(old ? std::stoll(std::string(*old)) + 1 : 1));
        });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  long long total = 0;
  for (const auto& [k, v] : contents()) total += std::stoll(v);
  EXPECT_EQ(total, kThreads * kPerThread);  // no increment lost, none applied twice
  reopen();
  total = 0;
  for (const auto& [k, v] : contents()) total += std::stoll(v);
  EXPECT_EQ(total, kThreads * kPerThread);
}

// Writers put and remove a few keys with values that carry their own check (a length and a
// repeated byte); readers must only ever see absent or a whole value.
TEST_F(SoftStringHashMapTest, ReadersSeeWholeValuesWhileWritersPutAndRemove) {
  Map& m = create(2);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  const auto value_of = [](int n) {
    return std::string(static_cast<std::size_t>(n) * 37 % 900, static_cast<char>('a' + n % 26));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 6000; ++i) {
        const std::string k = "k" + std::to_string(rng() % 8);
        if (rng() % 3 == 0)
          m.remove(k);
        else
          m.put(k, value_of(static_cast<int>(rng() % 1000)));
      }
    });
  }
  threads.emplace_back([&] {
    std::string v;
    while (!stop.load()) {
      for (int i = 0; i < 8; ++i) {
        if (!m.get("k" + std::to_string(i), v)) continue;
        const bool whole = v.empty() || v.find_first_not_of(v[0]) == std::string::npos;
        if (!whole) bad.fetch_add(1);
      }
    }
  });
  threads[0].join();
  threads[1].join();
  stop = true;
  threads[2].join();
  EXPECT_EQ(bad.load(), 0);
  const Model before = contents();
  EXPECT_EQ(m.size(), before.size());
  reopen();
  EXPECT_EQ(contents(), before);
}

TEST_F(SoftStringHashMapTest, AProcessKilledBySigkillKeepsEveryCompletedOperation) {
  create(32);
  Model model;
  for (int i = 0; i < 400; ++i) model["key" + std::to_string(i)] = std::string(i % 200, 'x');
  for (int i = 0; i < 400; i += 3) model["key" + std::to_string(i)] = "replaced";
  for (int i = 0; i < 400; i += 7) model.erase("key" + std::to_string(i));
  in_child_killed_by_sigkill([&] {
    Map& m = *map_;
    for (int i = 0; i < 400; ++i) m.put("key" + std::to_string(i), std::string(i % 200, 'x'));
    for (int i = 0; i < 400; i += 3) m.put("key" + std::to_string(i), "replaced");
    for (int i = 0; i < 400; i += 7) m.remove("key" + std::to_string(i));
  });
  // The parent's map is stale (the child wrote the pool): drop it without a clean close's help.
  reopen();
  EXPECT_EQ(contents(), model);
}

TEST_F(SoftStringHashMapTest, AFullPoolThrowsAndLosesNothing) {
  // A pool that cannot grow: 1 MiB chunks, a few of them.
  map_.reset();
  pool_.reset();
  pool_ = std::make_unique<pm::Pool>(pm::Pool::create(path_.str(), 8u << 20, Map::name));
  map_ = std::make_unique<Map>(create_new, *pool_, 64);
  Map& m = *map_;
  Model model;
  const std::string big(4000, 'b');
  int i = 0;
  for (;; ++i) {
    const std::string k = "key" + std::to_string(i);
    try {
      m.put(k, big);
    } catch (const PoolFull&) {
      break;
    }
    model[k] = big;
    ASSERT_LT(i, 100000) << "the pool never filled";
  }
  EXPECT_FALSE(m.contains("key" + std::to_string(i)));
  // A replacement needs a block too: on a full pool it throws and keeps the old value.
  EXPECT_THROW(m.put("key0", std::string(4000, 'n')), PoolFull);
  EXPECT_EQ(m.get("key0"), big);
  // A remove needs none.
  EXPECT_TRUE(m.remove("key1"));
  model.erase("key1");
  EXPECT_EQ(contents(), model);
  reopen();
  EXPECT_EQ(contents(), model);
}

// A replacement leaves the replaced version live in the pool until the key's next write (one
// fence per put), so a close right after one leaves two live versions of the key. Recovery keeps
// the higher and deletes the other durably: it must not come back once the key is removed.
TEST_F(SoftStringHashMapTest, OfTwoLiveVersionsRecoveryKeepsTheHigherAndDeletesTheOther) {
  Map& m = create();
  ASSERT_TRUE(m.put("key", "old"));
  ASSERT_FALSE(m.put("key", "new"));
  ASSERT_TRUE(m.put("other", "x"));
  Map& r = reopen();  // a clean close deletes nothing: the same state as a crash
  EXPECT_EQ(r.recovery_stats().duplicate_keys, 1u);
  EXPECT_EQ(contents(), (Model{{"key", "new"}, {"other", "x"}}));
  ASSERT_TRUE(r.remove("key"));
  Map& again = reopen();
  EXPECT_EQ(again.recovery_stats().duplicate_keys, 0u);
  EXPECT_EQ(contents(), (Model{{"other", "x"}}));  // the old version did not come back
}

// Replaced, replaced again, removed: each write deletes what the one before left live.
TEST_F(SoftStringHashMapTest, ARemoveAfterReplacementsLeavesNoVersionBehind) {
  Map& m = create();
  for (int i = 0; i < 5; ++i) m.put("key", "v" + std::to_string(i));
  ASSERT_TRUE(m.remove("key"));
  Map& r = reopen();
  EXPECT_EQ(r.recovery_stats().duplicate_keys, 0u);
  EXPECT_EQ(r.recovery_stats().live_slots, 0u);
  EXPECT_EQ(contents(), Model{});
}

TEST_F(SoftStringHashMapTest, AForeignOrDamagedRootIsRefused) {
  create();
  map_.reset();
  pool_.reset();
  auto pool = pm::Pool::open(path_.str(), Map::name);
  pool.root(1).store(0);  // the bucket count
  EXPECT_THROW(Map(open_existing, pool), PoolError);
  auto other = pm::Pool::create(path_.str() + "2", kPoolSize, Map::name);
  EXPECT_THROW(Map(open_existing, other), PoolError);  // no map in it
  ::unlink((path_.str() + "2").c_str());
}

}  // namespace

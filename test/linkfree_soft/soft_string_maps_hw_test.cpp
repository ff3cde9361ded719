// labels: concurrent memory
// SOFT's byte-string maps on the hardware backend, each test run on both: SoftStringHashMap
// (hash-bytes/soft) and SoftStringSkipList (skiplist-bytes/soft, ordered; its order, scan and
// range have tests of their own below): keys and values of any bytes and sizes up to the limits;
// sizes over them and a full pool change nothing; a random run against a model across reopens;
// update() as an atomic read-modify-write under threads; concurrent puts and removes that readers
// only ever see whole; a process killed by SIGKILL keeps every completed operation; and recovery's
// rule for two live versions of one key (a replacement a crash interrupted): the higher is kept and
// the lower is durably deleted, so it cannot come back after the key is removed, also after
// concurrent replacements of the same keys.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pmds/linkfree_soft/soft_string_hash_map.hpp"
#include "pmds/linkfree_soft/soft_string_skiplist.hpp"
#include "pmds/pm/pool.hpp"
#include "support/child_process.hpp"
#include "support/temp_path.hpp"

namespace {

using namespace pmds;
using Model = std::map<std::string, std::string>;
using pmds::test::in_child_killed_by_sigkill;
using pmds::test::TempPath;

constexpr std::size_t kPoolSize = 64u << 20;

template <class Map>
class SoftStringMapTest : public ::testing::Test {
 protected:
  // The hash map with a small table, so that buckets hold several keys.
  Map& create(std::size_t buckets = 64) { return create_in(kPoolSize, buckets); }
  Map& create_in(std::size_t pool_size, std::size_t buckets) {
    map_.reset();
    pool_.reset();
    pool_ = std::make_unique<pm::Pool>(pm::Pool::create(path_.str(), pool_size, Map::name));
    if constexpr (std::is_constructible_v<Map, CreateTag, pm::Pool&, std::size_t>)
      map_ = std::make_unique<Map>(create_new, *pool_, buckets);
    else
      map_ = std::make_unique<Map>(create_new, *pool_);
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

  TempPath path_{"soft_string_map.pool"};
  std::unique_ptr<pm::Pool> pool_;
  std::unique_ptr<Map> map_;
};

// Runs f(t) for t in [0, n) on n threads at once and waits for them.
template <class F>
void on_threads(int n, F f) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(f, t);
  for (std::thread& t : threads) t.join();
}

// A node's block: whole lines up to 512 bytes, multiples of 128 to 2 KiB, then four sizes per
// doubling (a fourth wasted at most); every node up to the largest fits, in at most 28 slot
// sizes (a pool holds 32).
TEST(SoftStringBlockSize, LinesThen128ByteStepsThenFourSizesPerDoubling) {
  using linkfree_soft::detail::soft_string_block_size;
  std::set<std::size_t> sizes;
  for (std::size_t n = sizeof(linkfree_soft::detail::SoftStringPNode) + 1;
       n <= linkfree_soft::detail::soft_string_max_block_size; ++n) {
    const std::size_t b = soft_string_block_size(n);
    ASSERT_GE(b, n);
    ASSERT_EQ(b % 64, 0u) << n;
    ASSERT_LE(b, linkfree_soft::detail::soft_string_max_block_size);
    if (n <= 512)
      ASSERT_LT(b - n, 64u) << n;
    else if (n <= 2048)
      ASSERT_LT(b - n, 128u) << n;
    else
      ASSERT_LE(b - n, n / 4) << n;
    sizes.insert(b);
  }
  EXPECT_EQ(sizes.size(), 28u);
  EXPECT_LE(sizes.size(), pm::ChunkAllocator::max_slot_sizes);
  EXPECT_EQ(soft_string_block_size(32 + 16 + 1024), 1152u);  // a 1 KiB value, a 16-byte key
}

using Maps = ::testing::Types<linkfree_soft::SoftStringHashMap, linkfree_soft::SoftStringSkipList>;
TYPED_TEST_SUITE(SoftStringMapTest, Maps);

TYPED_TEST(SoftStringMapTest, KeysAndValuesOfAnyBytesComeBackWhole) {
  using Map = TypeParam;
  Map& m = this->create();
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
  EXPECT_EQ(this->contents(), model);
  EXPECT_EQ(m.size(), keys.size());
  std::string out = "unchanged";
  EXPECT_FALSE(m.get("absent", out));
  EXPECT_EQ(out, "unchanged");
  ASSERT_TRUE(m.get("abcdefgh", out));
  EXPECT_EQ(out, model["abcdefgh"]);
  EXPECT_FALSE(m.insert("a", "other"));  // insert never replaces
  EXPECT_EQ(m.get("a"), model["a"]);
  this->reopen();
  EXPECT_EQ(this->contents(), model);
  EXPECT_EQ(this->map_->size(), keys.size());
  EXPECT_EQ(this->map_->recovery_stats().live_slots, keys.size());
}

TYPED_TEST(SoftStringMapTest, SizesOverTheLimitsAreRejectedAndChangeNothing) {
  using Map = TypeParam;
  Map& m = this->create();
  ASSERT_TRUE(m.put("k", "v"));
  const std::string long_key(Map::max_key_size + 1, 'k');
  const std::string long_value(Map::max_value_size + 1, 'v');
  EXPECT_THROW(m.insert(long_key, "v"), Error);
  EXPECT_THROW(m.put("k", long_value), Error);
  EXPECT_THROW(m.get(long_key), Error);
  EXPECT_THROW(m.remove(long_key), Error);
  EXPECT_THROW(m.update("k", [&](auto) { return std::optional<std::string>(long_value); }), Error);
  EXPECT_EQ(this->contents(), (Model{{"k", "v"}}));
}

TYPED_TEST(SoftStringMapTest, ARandomRunMatchesAModelAcrossReopens) {
  using Map = TypeParam;
  this->create(16);
  Model model;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 4; ++round) {
    Map& m = *this->map_;
    for (int i = 0; i < 3000; ++i) {
      // Short keys, and keys past a shared prefix of 14 or 15 bytes (the bytes the ordered
      // map's order words hold: byte_key_order.hpp).
      static const std::string prefixes[] = {"", "session:000000", "session:0000000"};
      const std::string k = prefixes[rng() % 3] + "key" + std::to_string(rng() % 300);
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
    EXPECT_EQ(this->contents(), model);
    EXPECT_EQ(m.size(), model.size());
    this->reopen();
    EXPECT_EQ(this->contents(), model) << "after reopen " << round;
    // At most one older version per key: the one its last replacement left live.
    EXPECT_LE(this->map_->recovery_stats().duplicate_keys, model.size());
  }
  // update's fn may decline: nothing is written.
  EXPECT_FALSE(this->map_->update("key1", [](auto) { return std::optional<std::string>(); }));
  EXPECT_EQ(this->contents(), model);
}

TYPED_TEST(SoftStringMapTest, UpdateIsAnAtomicReadModifyWriteAcrossThreads) {
  using Map = TypeParam;
  Map& m = this->create(4);
  constexpr int kThreads = 4, kPerThread = 1500, kKeys = 5;
  on_threads(kThreads, [&m](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      const std::string k = "counter" + std::to_string((i + t) % kKeys);
      m.update(k, [](std::optional<std::string_view> old) {
        return std::optional<std::string>(
            std::to_string(old ? std::stoll(std::string(*old)) + 1 : 1));
      });
    }
  });
  long long total = 0;
  for (const auto& [k, v] : this->contents()) total += std::stoll(v);
  EXPECT_EQ(total, kThreads * kPerThread);  // no increment lost, none applied twice
  this->reopen();
  total = 0;
  for (const auto& [k, v] : this->contents()) total += std::stoll(v);
  EXPECT_EQ(total, kThreads * kPerThread);
}

// Writers put and remove a few keys with values that carry their own check (a length and a
// repeated byte); readers must only ever see absent or a whole value.
TYPED_TEST(SoftStringMapTest, ReadersSeeWholeValuesWhileWritersPutAndRemove) {
  using Map = TypeParam;
  Map& m = this->create(2);
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
  const Model before = this->contents();
  EXPECT_EQ(m.size(), before.size());
  this->reopen();
  EXPECT_EQ(this->contents(), before);
}

TYPED_TEST(SoftStringMapTest, AProcessKilledBySigkillKeepsEveryCompletedOperation) {
  using Map = TypeParam;
  this->create(32);
  Model model;
  for (int i = 0; i < 400; ++i) model["key" + std::to_string(i)] = std::string(i % 200, 'x');
  for (int i = 0; i < 400; i += 3) model["key" + std::to_string(i)] = "replaced";
  for (int i = 0; i < 400; i += 7) model.erase("key" + std::to_string(i));
  in_child_killed_by_sigkill([&] {
    Map& m = *this->map_;
    for (int i = 0; i < 400; ++i) m.put("key" + std::to_string(i), std::string(i % 200, 'x'));
    for (int i = 0; i < 400; i += 3) m.put("key" + std::to_string(i), "replaced");
    for (int i = 0; i < 400; i += 7) m.remove("key" + std::to_string(i));
  });
  // The parent's map is stale (the child wrote the pool): drop it without a clean close's help.
  this->reopen();
  EXPECT_EQ(this->contents(), model);
}

TYPED_TEST(SoftStringMapTest, AFullPoolThrowsAndLosesNothing) {
  using Map = TypeParam;
  // A pool that cannot grow: 1 MiB chunks, a few of them.
  Map& m = this->create_in(8u << 20, 64);
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
  EXPECT_EQ(this->contents(), model);
  this->reopen();
  EXPECT_EQ(this->contents(), model);
}

// A replacement leaves the replaced version live in the pool until the key's next write (one
// fence per put), so a close right after one leaves two live versions of the key. Recovery keeps
// the higher and deletes the other durably: it must not come back once the key is removed.
TYPED_TEST(SoftStringMapTest, OfTwoLiveVersionsRecoveryKeepsTheHigherAndDeletesTheOther) {
  using Map = TypeParam;
  Map& m = this->create();
  ASSERT_TRUE(m.put("key", "old"));
  ASSERT_FALSE(m.put("key", "new"));
  ASSERT_TRUE(m.put("other", "x"));
  Map& r = this->reopen();  // a clean close deletes nothing: the same state as a crash
  EXPECT_EQ(r.recovery_stats().duplicate_keys, 1u);
  EXPECT_EQ(this->contents(), (Model{{"key", "new"}, {"other", "x"}}));
  ASSERT_TRUE(r.remove("key"));
  Map& again = this->reopen();
  EXPECT_EQ(again.recovery_stats().duplicate_keys, 0u);
  EXPECT_EQ(this->contents(), (Model{{"other", "x"}}));  // the old version did not come back
}

// Replaced, replaced again, removed: each write deletes what the one before left live.
TYPED_TEST(SoftStringMapTest, ARemoveAfterReplacementsLeavesNoVersionBehind) {
  using Map = TypeParam;
  Map& m = this->create();
  for (int i = 0; i < 5; ++i) m.put("key", "v" + std::to_string(i));
  ASSERT_TRUE(m.remove("key"));
  Map& r = this->reopen();
  EXPECT_EQ(r.recovery_stats().duplicate_keys, 0u);
  EXPECT_EQ(r.recovery_stats().live_slots, 0u);
  EXPECT_EQ(this->contents(), Model{});
}

// The same under threads that put the same few keys at once, so that writers help each
// other's replacements and complete them late: every replacement must still hand the version it
// left live to the key's next write (the volatile node's stale word), or a version nobody deletes
// would come back at the next open.
TYPED_TEST(SoftStringMapTest, ConcurrentReplacementsLeaveOneLiveVersionBehindEachKey) {
  using Map = TypeParam;
  Map& m = this->create(4);
  constexpr int kThreads = 4, kPerThread = 3000, kKeys = 3;
  on_threads(kThreads, [&m](int t) {
    for (int i = 0; i < kPerThread; ++i)
      m.put("key" + std::to_string(i % kKeys),
            std::string(1 + (i + t) % 150, static_cast<char>('a' + t)));
  });
  Map& r = this->reopen();
  EXPECT_EQ(r.recovery_stats().live_slots, std::size_t{kKeys});
  EXPECT_EQ(r.recovery_stats().duplicate_keys, std::size_t{kKeys});  // one older version each
  for (int k = 0; k < kKeys; ++k) ASSERT_TRUE(r.remove("key" + std::to_string(k)));
  Map& again = this->reopen();
  EXPECT_EQ(again.recovery_stats().live_slots, 0u);
  EXPECT_EQ(this->contents(), Model{});
}

TYPED_TEST(SoftStringMapTest, AForeignOrDamagedRootIsRefused) {
  using Map = TypeParam;
  this->create();
  this->map_.reset();
  this->pool_.reset();
  auto pool = pm::Pool::open(this->path_.str(), Map::name);
  if constexpr (std::is_same_v<Map, linkfree_soft::SoftStringHashMap>)
    pool.root(1).store(0);  // the bucket count
  else
    pool.root(0).store(0);  // the tag
  EXPECT_THROW(Map(open_existing, pool), PoolError);
  auto other = pm::Pool::create(this->path_.str() + "2", kPoolSize, Map::name);
  EXPECT_THROW(Map(open_existing, other), PoolError);  // no map in it
  ::unlink((this->path_.str() + "2").c_str());
}

// ---- The ordered map: byte order, scan and range --------------------------------------------

class SoftStringSkipListOrderTest : public SoftStringMapTest<linkfree_soft::SoftStringSkipList> {
 protected:
  std::vector<std::string> scanned_keys(std::string_view from, std::size_t max_count) {
    std::vector<std::string> out;
    map_->scan(from, max_count, [&](std::string_view k, std::string_view) { out.emplace_back(k); });
    return out;
  }
};

// Keys that the order words of their first 15 bytes cannot tell apart (shared prefixes, zero
// bytes, lengths around 8 and 15) and bytes over 0x7f, which byte order puts after ASCII: scan,
// range and for_each return them in std::string's order (unsigned bytes), before and after a
// reopen.
TEST_F(SoftStringSkipListOrderTest, KeysComeInByteOrder) {
  auto& m = create();
  Model model;
  std::mt19937_64 rng(3);
  const std::vector<std::string> prefixes = {"",
                                             std::string(1, '\0'),
                                             "abcdefgh",
                                             "abcdefg",
                                             "abcdefghijklmn",
                                             "abcdefghijklmno",
                                             "\xff\xfe",
                                             "zz"};
  for (int i = 0; i < 2000; ++i) {
    std::string k = prefixes[rng() % prefixes.size()];
    const std::size_t extra = rng() % 12;
    for (std::size_t j = 0; j < extra; ++j) k.push_back(static_cast<char>(rng() % 4 * 0x55));
    const std::string v = std::to_string(i);
    if (rng() % 4 == 0) {
      EXPECT_EQ(m.remove(k), model.erase(k) == 1);
    } else {
      m.put(k, v);
      model[k] = v;
    }
  }
  std::vector<std::string> keys;
  for (const auto& [k, v] : model) keys.push_back(k);
  EXPECT_EQ(scanned_keys("", keys.size() + 1), keys);
  Model ranged;
  for (const auto& [k, v] : m.range()) EXPECT_TRUE(ranged.emplace(k, v).second) << k;
  EXPECT_EQ(ranged, model);
  reopen();
  EXPECT_EQ(contents(), model);
  EXPECT_EQ(scanned_keys("", keys.size() + 1), keys);
  // From a key in the middle, absent or present, and a bounded range.
  const std::string& mid = keys[keys.size() / 2];
  EXPECT_EQ(scanned_keys(mid, 10), std::vector<std::string>(keys.begin() + keys.size() / 2,
                                                            keys.begin() + keys.size() / 2 + 10));
  const std::string after_mid = mid + std::string(1, '\0');  // absent: the next key follows
  EXPECT_EQ(scanned_keys(after_mid, 1).front(), keys[keys.size() / 2 + 1]);
  std::vector<std::string> bounded;
  for (const auto& [k, v] : map_->range(keys[10], keys[20])) bounded.push_back(k);
  EXPECT_EQ(bounded, std::vector<std::string>(keys.begin() + 10, keys.begin() + 20));
}

// A range read while writers replace and remove other keys: the keys present throughout come
// once each and in order, each with a whole value.
TEST_F(SoftStringSkipListOrderTest, ARangeWhileOthersWriteSeesTheStableKeysInOrder) {
  auto& m = create();
  for (int i = 0; i < 300; ++i) m.put("stable" + std::to_string(1000 + i), std::string(50, 's'));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 rng(5);
    while (!stop.load()) {
      const std::string k = "stable" + std::to_string(1000 + rng() % 300) + "x";
      if (rng() % 2 == 0)
        m.put(k, std::string(rng() % 200, 'w'));
      else
        m.remove(k);
    }
  });
  for (int round = 0; round < 20; ++round) {
    std::string last;
    int stable = 0;
    for (const auto& [k, v] : m.range()) {
      EXPECT_LT(last, k);
      last = k;
      if (k.back() != 'x') {
        ++stable;
        EXPECT_EQ(v, std::string(50, 's'));
      } else {
        EXPECT_TRUE(v.empty() || v.find_first_not_of('w') == std::string::npos);
      }
    }
    EXPECT_EQ(stable, 300);
  }
  stop = true;
  writer.join();
}

}  // namespace

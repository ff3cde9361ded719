// labels: concurrent memory
// nbMontage's maps, each test run on all four, on the hardware backend: the hash
// table (montage/hash_map.hpp), the skip list (montage/skip_list.hpp), the BST
// (montage/natarajan_mittal_bst.hpp) and the split-ordered hash table
// (montage/split_ordered_hash.hpp). Map semantics; the epoch clock (it moves only after a commit,
// sync moves it twice); a clean close that keeps every completed operation; a killed process
// whose recovery keeps everything before its last sync and a prefix of the rest; a stale
// anti-node that must not cancel its payload at a later crash; concurrent stress with the
// background advancer; contended keys; a full pool; the smallest rebuilt indexes. Then put, on the
// hash table, the skip list and the BST (against a model, its linearizability on contended keys, a
// full pool).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "montage/montage_test_support.hpp"
#include "pmds/montage/hash_map.hpp"
#include "pmds/montage/natarajan_mittal_bst.hpp"
#include "pmds/montage/skip_list.hpp"
#include "pmds/montage/split_ordered_hash.hpp"
#include "support/child_process.hpp"

namespace {

using namespace pmds;

constexpr std::size_t kPoolSize = montage_test::default_pool_size;

using montage_test::check_against_model;
using montage_test::contents;
using montage_test::create_map;
using montage_test::expect_changes_match_presence;
using montage_test::manual_clock;

template <class M>
class MontageMaps : public montage_test::InPool<M> {};
using MontageMapTypes =
    ::testing::Types<montage::HashMap<>, montage::SkipList<>, montage::NatarajanMittalTree<>,
                     montage::SplitOrderedHashMap<>>;
TYPED_TEST_SUITE(MontageMaps, MontageMapTypes);

TYPED_TEST(MontageMaps, MapSemantics) {
  TypeParam& m = this->make();
  EXPECT_FALSE(m.contains(7));
  EXPECT_TRUE(m.insert(7, 70));
  EXPECT_FALSE(m.insert(7, 71)) << "insert does not update";
  EXPECT_EQ(m.get(7), 70u);
  EXPECT_TRUE(m.insert(7 + 64, 1));  // same bucket
  EXPECT_TRUE(m.insert(max_user_key, 2));
  EXPECT_TRUE(m.remove(7));
  EXPECT_FALSE(m.remove(7));
  EXPECT_FALSE(m.contains(7));
  EXPECT_EQ(m.get(7 + 64), 1u);
  EXPECT_EQ(contents(m), (std::map<Key, Value>{{7 + 64, 1}, {max_user_key, 2}}));
  EXPECT_THROW(m.insert(0, 1), ReservedKey);
  EXPECT_THROW(m.remove(~Key{0}), ReservedKey);
  EXPECT_THROW(m.get(0), ReservedKey);
}

TYPED_TEST(MontageMaps, TheClockMovesOnlyAfterACommitAndSyncMovesItTwice) {
  TypeParam& m = this->make();
  const std::uint64_t e0 = m.epoch();
  m.background_step();
  m.sync();
  EXPECT_EQ(m.epoch(), e0) << "no update linearized: the clock stands still (nbMontage App. C)";
  EXPECT_TRUE(m.contains(1) == false);
  EXPECT_EQ(m.epoch(), e0) << "reads do not move it either";
  ASSERT_TRUE(m.insert(1, 10));
  m.sync();
  EXPECT_EQ(m.epoch(), e0 + 2);
  m.background_step();
  EXPECT_EQ(m.epoch(), e0 + 2) << "the last commit is two epochs old: nothing to persist";
  ASSERT_TRUE(m.remove(1));
  m.background_step();
  m.background_step();
  EXPECT_EQ(m.epoch(), e0 + 4) << "a commit in e or e-1 allows an advance";
  m.background_step();
  EXPECT_EQ(m.epoch(), e0 + 4);
}

TYPED_TEST(MontageMaps, ACleanCloseKeepsEveryCompletedOperation) {
  TypeParam& m = this->make();
  std::map<Key, Value> model;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5000; ++i) {
    const Key k = 1 + rng() % 300;
    if (rng() % 3 != 0) {
      const bool inserted = m.insert(k, i);
      EXPECT_EQ(inserted, model.emplace(k, i).second);
    } else {
      EXPECT_EQ(m.remove(k), model.erase(k) == 1);
    }
    if (i % 97 == 0) m.background_step();
  }
  TypeParam& r = this->reopen();
  EXPECT_EQ(contents(r), model);
  // The system area and one payload per key; anti-nodes and deleted payloads were freed.
  EXPECT_EQ(r.recovery_stats().live_slots, model.size() + 1);
  // And it goes on working on the rebuilt index (the tree's is rebuilt balanced), and survives
  // another close.
  ASSERT_NO_FATAL_FAILURE(check_against_model(r, model, 3000, 400, rng));
  EXPECT_EQ(contents(r), model);
  EXPECT_EQ(contents(this->reopen()), model);
}

// The smallest rebuilt indexes, of no key and of one (the tree's keys go under an internal node of
// key infinity, as the first insert into an empty tree puts them): emptied and filled again.
TYPED_TEST(MontageMaps, ARecoveredMapOfNoKeyOrOneKeyEmptiesAndFillsAgain) {
  this->make();
  TypeParam& empty = this->reopen();
  EXPECT_TRUE(contents(empty).empty());
  EXPECT_FALSE(empty.remove(5));
  EXPECT_TRUE(empty.insert(5, 50));
  TypeParam& one = this->reopen();
  EXPECT_EQ(contents(one), (std::map<Key, Value>{{5, 50}}));
  EXPECT_TRUE(one.remove(5));
  EXPECT_FALSE(one.contains(5));
  EXPECT_TRUE(contents(one).empty());
  for (const Key k : {7, 3, 5, 1}) EXPECT_TRUE(one.insert(k, k * 10));
  EXPECT_TRUE(one.remove(1));
  const std::map<Key, Value> model{{3, 30}, {5, 50}, {7, 70}};
  EXPECT_EQ(contents(one), model);
  EXPECT_EQ(contents(this->reopen()), model);
}

// A process killed without closing: recovery keeps every insert before its last sync, and of the
// later ones a prefix in program order (buffered durable linearizability, one thread).
TYPED_TEST(MontageMaps, AKilledProcessKeepsEverythingBeforeItsSyncAndAPrefixAfter) {
  this->pool_.emplace(pm::Pool::create(this->path_, kPoolSize, TypeParam::name));
  this->pool_.reset();
  pmds::test::in_killed_child([&] {
    pm::Pool pool = pm::Pool::open(this->path_, TypeParam::name);
    auto owned = create_map<TypeParam>(pool);  // never destroyed: the child ends by _exit
    TypeParam& m = *owned;
    for (Key k = 1; k <= 100; ++k) m.insert(k, k);
    m.sync();
    for (Key k = 101; k <= 200; ++k) {
      m.insert(k, k);
      if (k % 10 == 0) m.background_step();
    }
    ::_exit(0);
  });
  this->pool_.emplace(pm::Pool::open(this->path_, TypeParam::name));
  this->s_ = std::make_unique<TypeParam>(open_existing, *this->pool_, manual_clock());
  const auto got = contents(*this->s_);
  Key k = 1;
  for (; k <= 200 && got.count(k) == 1; ++k) EXPECT_EQ(got.at(k), k);
  EXPECT_GT(k, 100u) << "an insert before the sync is missing";
  EXPECT_EQ(got.size(), k - 1) << "the recovered keys are not a prefix";
  EXPECT_LT(k, 201u) << "the last epochs' inserts should not be durable yet";
}

// nbMontage §3.4: a stale anti-node (its epoch too recent at a crash) is discarded, and recovery
// must zero its epoch before freeing it: otherwise, left in a free slot, it passes the epoch rule
// at a later crash (the clock has moved on) and cancels the payload it was made for, which the
// first recovery kept — a key present after one crash would vanish after the next.
TYPED_TEST(MontageMaps, AStaleAntiNodeCannotCancelItsPayloadAfterALaterCrash) {
  this->pool_.emplace(pm::Pool::create(this->path_, kPoolSize, TypeParam::name));
  this->pool_.reset();
  pmds::test::in_killed_child([&] {
    pm::Pool pool = pm::Pool::open(this->path_, TypeParam::name);
    auto owned = create_map<TypeParam>(pool);  // never destroyed: the child ends by _exit
    TypeParam& m = *owned;
    m.insert(7, 70);
    m.sync();  // the payload of 7 is durable
    // Blocks of the current epoch, lost at a crash now: recovery frees them with the anti-node
    // below, which comes after them in the pool, so the next allocations take their slots
    // first (lowest address first) and the anti-node's slot stays as recovery left it.
    for (Key k = 100; k < 164; ++k) m.insert(k, k);
    m.remove(7);  // its anti-node is tagged with the current epoch: lost too
    ::_exit(0);
  });
  pmds::test::in_killed_child([&] {
    pm::Pool pool = pm::Pool::open(this->path_, TypeParam::name);
    TypeParam m(open_existing, pool, manual_clock());
    if (!m.contains(7) || m.contains(100)) ::_exit(3);  // the first recovery, as specified
    m.insert(8, 80);
    m.sync();  // the clock moves two epochs past the anti-node's
    ::_exit(0);
  });
  this->pool_.emplace(pm::Pool::open(this->path_, TypeParam::name));
  this->s_ = std::make_unique<TypeParam>(open_existing, *this->pool_, manual_clock());
  EXPECT_EQ(contents(*this->s_), (std::map<Key, Value>{{7, 70}, {8, 80}}));
}

TYPED_TEST(MontageMaps, ConcurrentThreadsWithTheBackgroundAdvancer) {
  montage::Options o;
  o.epoch_length = std::chrono::microseconds(200);
  TypeParam& m = this->make(o);
  constexpr int kThreads = 4;
  std::vector<std::map<Key, Value>> models(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 20000; ++i) {
        const Key k = 1 + static_cast<Key>(t) + kThreads * (rng() % 200);
        switch (rng() % 4) {
          case 0:
          case 1:
            EXPECT_EQ(m.insert(k, i), models[t].emplace(k, i).second);
            break;
          case 2:
            EXPECT_EQ(m.remove(k), models[t].erase(k) == 1);
            break;
          default:
            if (i % 1000 == 0) m.sync();
            EXPECT_EQ(m.get(k).has_value(), models[t].count(k) == 1);
        }
      }
    });
  for (auto& th : threads) th.join();
  std::map<Key, Value> all;
  for (auto& mm : models) all.insert(mm.begin(), mm.end());
  EXPECT_EQ(contents(m), all);
  EXPECT_EQ(contents(this->reopen(o)), all);
}

// nbMontage §3.4's recovery over several threads (Options::recovery_threads): the same map from
// 1, 2 and 3 threads, which then works on; a thread count out of range is refused at open.
TYPED_TEST(MontageMaps, RecoveryOverSeveralThreadsRebuildsTheSameMap) {
  TypeParam& m = this->make();
  std::map<Key, Value> model;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20000; ++i) {
    const Key k = 1 + rng() % 30000;
    if (rng() % 4 != 0)
      model.emplace(k, i), m.insert(k, i);
    else
      model.erase(k), m.remove(k);
  }
  for (std::size_t threads : {1, 2, 3}) {
    montage::Options o = manual_clock();
    o.recovery_threads = threads;
    TypeParam& r = this->reopen(o);
    ASSERT_EQ(contents(r), model) << threads << " recovery threads";
    EXPECT_EQ(r.recovery_stats().live_slots, model.size() + 1);
    ASSERT_NO_FATAL_FAILURE(check_against_model(r, model, 1000, 30000, rng));
  }
  for (std::size_t threads : {std::size_t{0}, montage::Options::max_recovery_threads + 1}) {
    montage::Options o = manual_clock();
    o.recovery_threads = threads;
    try {
      this->reopen(o);
      FAIL() << "opened with " << threads << " recovery threads";
    } catch (const PoolError& e) {
      EXPECT_EQ(e.code(), PoolErrc::bad_argument);
    }
  }
}

// Three threads inserting and removing the same few keys: every successful insert and remove
// changes its key's presence, so their counts differ by exactly the key's final presence; the
// threads meet on the same nodes and edges (the tree's flag, tag and helping cleanup).
TYPED_TEST(MontageMaps, InsertsAndRemovesOfContendedKeysLinearize) {
  montage::Options o;
  o.epoch_length = std::chrono::microseconds(200);
  TypeParam& m = this->make(o);
  expect_changes_match_presence(m, 6, 30000, [&](int, std::mt19937_64& rng, Key k, Value i) {
    if (rng() % 2 == 0) return m.insert(k, i) ? 1 : 0;
    return m.remove(k) ? -1 : 0;
  });
  const auto before = contents(m);
  EXPECT_EQ(contents(this->reopen(o)), before);
}

TYPED_TEST(MontageMaps, AFullPoolThrowsAndLosesNothing) {
  TypeParam& m = this->make(manual_clock(), pm::Pool::min_size() + 4 * (1u << 20));
  // Scattered keys (an odd multiplier is a bijection of 64-bit words): in ascending order the
  // unbalanced tree would be a list of 60,000 nodes.
  auto key = [](Key i) { return i * 0x9e3779b97f4a7c15; };
  Key k = 1;
  try {
    for (;; ++k) ASSERT_TRUE(m.insert(key(k), k));
  } catch (const PoolFull&) {
  }
  ASSERT_GT(k, 1000u);
  EXPECT_FALSE(m.contains(key(k))) << "the insert that found the pool full took no effect";
  EXPECT_EQ(m.get(key(k - 1)), k - 1);
  // A remove needs a block too (its anti-node, nbMontage §3.3): it fails the same way.
  EXPECT_THROW(m.remove(key(1)), PoolFull);
  EXPECT_TRUE(m.contains(key(1)));
  const std::size_t size = contents(m).size();
  EXPECT_EQ(size, k - 1);
  EXPECT_EQ(contents(this->reopen()).size(), size);
}

// Removed payloads and their anti-nodes go back to the allocator while the map runs (pdelete,
// two and three epochs after the remove): 100 rounds of 1,000 inserts and 1,000 removes take
// 200,000 blocks from a pool of about 65,000, which a block never freed would fill by the 33rd.
TYPED_TEST(MontageMaps, RemovedPayloadsAndAntiNodesAreFreedWhileItRuns) {
  TypeParam& m = this->make(manual_clock(), pm::Pool::min_size() + 4 * (1u << 20));
  for (Value round = 0; round < 100; ++round) {
    for (Key k = 1; k <= 1000; ++k) ASSERT_TRUE(m.insert(k, round)) << "round " << round;
    for (Key k = 1; k <= 1000; ++k) ASSERT_TRUE(m.remove(k)) << "round " << round;
    m.drain();  // the DRAM nodes' reclamation calls pdelete
    m.sync();
  }
  EXPECT_TRUE(contents(m).empty());
}

TYPED_TEST(MontageMaps, OpeningAPoolOfAnotherStructureFails) {
  this->pool_.emplace(pm::Pool::create(this->path_, kPoolSize, TypeParam::name));
  this->pool_->root(0).store(42);
  try {
    TypeParam m(open_existing, *this->pool_, manual_clock());
    FAIL() << "opened a pool whose root names another structure";
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::layout_mismatch);
  }
}

// The skip list's ordered scan, against std::map, before and after a crash-free reopen.
class MontageSkipListScan : public montage_test::InPool<montage::SkipList<>> {};

TEST_F(MontageSkipListScan, ScansInKeyOrderFromAnyBound) {
  auto& m = create(kPoolSize, manual_clock());
  std::map<Key, Value> model;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 4000; ++i) {
    const Key k = 1 + rng() % 2000;
    if (rng() % 4 != 0) {
      if (m.insert(k, i)) model.emplace(k, i);
    } else {
      m.remove(k);
      model.erase(k);
    }
  }
  auto check = [&](montage::SkipList<>& s) {
    for (int i = 0; i < 300; ++i) {
      const Key from = rng() % 2100;  // 0 starts at the first user key
      const std::size_t n = rng() % 50;
      std::vector<std::pair<Key, Value>> got, want;
      const std::size_t visited = s.scan(from, n, [&](Key k, Value v) { got.emplace_back(k, v); });
      EXPECT_EQ(visited, got.size());
      for (auto it = model.lower_bound(from); it != model.end() && want.size() < n; ++it)
        want.push_back(*it);
      ASSERT_EQ(got, want) << "scan from " << from << " count " << n;
    }
  };
  check(m);
  check(reopen());
}

// put (insert or update) on the maps that have one: the hash table replaces the key's node in
// one lin_cas on the old node's next word (algo/harris_michael_list.hpp, HmBucket::put), the skip
// list likewise on the old node's level-0 link (montage/skip_list.hpp's header), the BST the key's
// leaf in one lin_cas on the edge to it (montage/natarajan_mittal_bst.hpp's header).
template <class M>
class MontagePut : public MontageMaps<M> {};
using MontagePutTypes =
    ::testing::Types<montage::HashMap<>, montage::SkipList<>, montage::NatarajanMittalTree<>>;
TYPED_TEST_SUITE(MontagePut, MontagePutTypes);

TYPED_TEST(MontagePut, PutsAgainstAModelAndAcrossAReopen) {
  TypeParam& m = this->make();
  std::map<Key, Value> model;
  std::mt19937_64 rng(5);
  for (Value i = 1; i <= 20000; ++i) {
    const Key k = 1 + rng() % 500;
    switch (rng() % 4) {
      case 0:
      case 1:
        ASSERT_EQ(m.put(k, i), model.count(k) == 0) << k;
        model[k] = i;
        break;
      case 2:
        ASSERT_EQ(m.remove(k), model.erase(k) == 1) << k;
        break;
      default:
        ASSERT_EQ(m.get(k), model.count(k) ? std::optional<Value>(model[k]) : std::nullopt) << k;
    }
  }
  EXPECT_EQ(contents(m), model);
  EXPECT_EQ(contents(this->reopen()), model) << "a clean close keeps the last value of every key";
  // The freed old payloads and anti-nodes are gone: one payload per key, and the system area.
  EXPECT_EQ(this->s_->recovery_stats().live_slots, model.size() + 1);
}

// One key, put and removed by different threads: a put that found the key absent and a remove
// that found it present each change the key's presence, so at the end their counts differ by
// exactly its presence. nbMontage Figure 7's update breaks this: a remove that marks the old node
// while the update swings the predecessor to the new one succeeds and leaves the key present.
TYPED_TEST(MontagePut, PutsAndRemovesOfOneKeyLinearize) {
  montage::Options o;
  o.epoch_length = std::chrono::microseconds(200);
  TypeParam& m = this->make(o);
  // Thread 0 mostly puts, the others mostly remove.
  expect_changes_match_presence(m, 4, 30000, [&](int t, std::mt19937_64& rng, Key k, Value i) {
    if (t == 0 ? rng() % 4 != 0 : rng() % 4 == 0) return m.put(k, i) ? 1 : 0;
    return m.remove(k) ? -1 : 0;
  });
  const auto before = contents(m);
  EXPECT_EQ(contents(this->reopen(o)), before);
}

TYPED_TEST(MontagePut, APutOnAFullPoolThrowsAndChangesNothing) {
  TypeParam& m = this->make(manual_clock(), pm::Pool::min_size() + 4 * (1u << 20));
  auto key = [](Key i) { return i * 0x9e3779b97f4a7c15; };  // scattered, as in the insert test
  Key k = 1;
  try {
    for (;; ++k) ASSERT_TRUE(m.put(key(k), k));
  } catch (const PoolFull&) {
  }
  ASSERT_GT(k, 1000u);
  EXPECT_FALSE(m.contains(key(k)));
  // An update needs a new payload (and an anti-node).
  EXPECT_THROW(m.put(key(1), 99), PoolFull);
  EXPECT_EQ(m.get(key(1)), 1u);
  m.sync();
  const auto after = contents(this->reopen());
  EXPECT_EQ(after.size(), k - 1) << "no payload of the failed puts became durable";
  EXPECT_EQ(after.at(key(1)), 1u);
}

}  // namespace

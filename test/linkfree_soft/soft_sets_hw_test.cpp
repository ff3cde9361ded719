// labels: concurrent memory
// SOFT list, hash set and skip list (Zuriel et al. §4) on the hardware backend: set semantics
// against a sequential model, concurrent stress against per-thread models, reopen and recovery, a
// process that exits (or is killed) without closing its pool, reserved keys, a full pool, and
// the PNode validity scheme on the slot states a crash can leave.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "linkfree_soft/soft_test_support.hpp"
#include "support/child_process.hpp"
#include "support/set_model.hpp"

namespace {

using namespace soft_test;
using pmds::Fault;
using pmds::Planted;
using pmds::ReservedKey;

constexpr std::size_t kPoolSize = 32u << 20;

template <class K>
class SoftSetTest : public ::testing::Test {
 protected:
  using Kind = K;
  using Set = typename K::type;

  void SetUp() override { pool_.emplace(pm::Pool::create(path_, kPoolSize, K::layout)); }
  void TearDown() override {
    set_.reset();
    pool_.reset();
  }
  Set& make() {
    set_ = K::create(*pool_);
    return *set_;
  }
  // Closes the set and the pool (a clean shutdown), then opens both again (recovery).
  Set& reopen() {
    set_.reset();
    pool_.reset();
    pool_.emplace(pm::Pool::open(path_, K::layout));
    set_ = K::open(*pool_);
    return *set_;
  }

  pmds::test::TempPath path_{"soft_set"};
  std::optional<pm::Pool> pool_;
  std::unique_ptr<Set> set_;
};

TYPED_TEST_SUITE(SoftSetTest, Kinds, KindNames);

TYPED_TEST(SoftSetTest, SetSemantics) {
  auto& s = this->make();
  EXPECT_FALSE(s.contains(7));
  EXPECT_EQ(s.get(7), std::nullopt);
  EXPECT_TRUE(s.insert(7, 70));
  EXPECT_FALSE(s.insert(7, 71)) << "insert must not update an existing key";
  EXPECT_EQ(s.get(7), 70u);
  EXPECT_TRUE(s.contains(7));
  EXPECT_TRUE(s.insert(3, 30));
  EXPECT_TRUE(s.insert(pmds::max_user_key, 1));
  EXPECT_TRUE(s.insert(pmds::min_user_key, 2));
  EXPECT_EQ(contents(s), (std::map<Key, Value>{{1, 2}, {3, 30}, {7, 70}, {pmds::max_user_key, 1}}));
  EXPECT_TRUE(s.remove(7));
  EXPECT_FALSE(s.remove(7));
  EXPECT_FALSE(s.contains(7));
  EXPECT_TRUE(s.insert(7, 72));
  EXPECT_EQ(s.get(7), 72u);
  EXPECT_EQ(s.size(), 4u);
}

TYPED_TEST(SoftSetTest, RandomOpsMatchSequentialModel) {
  auto& s = this->make();
  std::map<Key, Value> model;
  ASSERT_NO_FATAL_FAILURE(pmds::test::expect_set_matches_map(s, model, 20000, 300));
  EXPECT_EQ(contents(s), model);
}

TYPED_TEST(SoftSetTest, ReopenRecoversExactlyTheContentsAndStaysUsable) {
  auto& s = this->make();
  std::map<Key, Value> model;
  for (Key k = 1; k <= 500; ++k) {
    ASSERT_TRUE(s.insert(k * 7, k));
    model[k * 7] = k;
  }
  for (Key k = 1; k <= 500; k += 3) {
    ASSERT_TRUE(s.remove(k * 7));
    model.erase(k * 7);
  }
  auto& r = this->reopen();
  EXPECT_EQ(contents(r), model);
  EXPECT_EQ(r.recovery_stats().live_slots, model.size());
  EXPECT_EQ(r.recovery_stats().duplicate_keys, 0u);
  EXPECT_EQ(r.recovery_stats().slots_scanned,
            r.recovery_stats().live_slots + r.recovery_stats().freed_slots);
  for (const auto& [k, v] : model) ASSERT_EQ(r.get(k), v);
  // Recovered nodes behave as any other: remove some, insert new ones (into freed slots).
  for (Key k = 2; k <= 500; k += 3) {
    ASSERT_TRUE(r.remove(k * 7));
    model.erase(k * 7);
  }
  for (Key k = 1; k <= 300; ++k) {
    const Key key = k * 7 + 1;
    ASSERT_TRUE(r.insert(key, k + 1000));
    model[key] = k + 1000;
  }
  auto& r2 = this->reopen();
  EXPECT_EQ(contents(r2), model);
}

// Each thread runs random operations on its own keys (its model predicts every result exactly)
// and on keys shared by all threads (per key, successful inserts minus successful removes must
// equal the final presence, and a present key holds a value some successful insert wrote).
template <class Set>
void concurrent_stress(Set& s, unsigned threads, int ops_per_thread) {
  constexpr Key shared_keys = 64;
  constexpr Key private_keys = 64;
  struct ThreadResult {
    std::map<Key, Value> model;                 // its private keys
    std::map<Key, long> net;                    // shared keys: inserts - removes that succeeded
    std::map<Key, std::vector<Value>> written;  // shared keys: values of successful inserts
    std::string failure;
  };
  std::vector<ThreadResult> results(threads);
  std::atomic<unsigned> ready{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ThreadResult& r = results[t];
      std::mt19937_64 rng(1000 + t);
      ready.fetch_add(1);
      while (ready.load() < threads) {
      }
      for (int i = 0; i < ops_per_thread && r.failure.empty(); ++i) {
        const bool mine = rng() % 2 == 0;
        const Key k =
            mine ? 1000 + t * private_keys + rng() % private_keys : 1 + rng() % shared_keys;
        const Value v = (static_cast<Value>(t) << 32) | static_cast<Value>(i);
        const unsigned op = static_cast<unsigned>(rng() % 4);
        if (mine) {
          bool ok = true;
          if (op == 0)
            ok = s.insert(k, v) == r.model.emplace(k, v).second;
          else if (op == 1)
            ok = s.remove(k) == (r.model.erase(k) == 1);
          else if (op == 2)
            ok = s.contains(k) == (r.model.count(k) == 1);
          else {
            const auto it = r.model.find(k);
            ok =
                s.get(k) == (it == r.model.end() ? std::nullopt : std::optional<Value>(it->second));
          }
          if (!ok)
            r.failure = "thread " + std::to_string(t) + " op " + std::to_string(op) +
                        " on its key " + std::to_string(k) + " disagrees with its model";
        } else if (op == 0 || op == 2) {
          if (s.insert(k, v)) {
            ++r.net[k];
            r.written[k].push_back(v);
          }
        } else if (op == 1) {
          if (s.remove(k)) --r.net[k];
        } else {
          s.contains(k);
          s.get(k);
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  const std::map<Key, Value> final_contents = contents(s);
  for (unsigned t = 0; t < threads; ++t) {
    EXPECT_EQ(results[t].failure, "");
    for (const auto& [k, v] : results[t].model) {
      const auto it = final_contents.find(k);
      EXPECT_TRUE(it != final_contents.end() && it->second == v) << "private key " << k;
    }
  }
  for (Key k = 1; k <= shared_keys; ++k) {
    long net = 0;
    std::vector<Value> written;
    for (const ThreadResult& r : results) {
      if (auto it = r.net.find(k); it != r.net.end()) net += it->second;
      if (auto it = r.written.find(k); it != r.written.end())
        written.insert(written.end(), it->second.begin(), it->second.end());
    }
    const auto it = final_contents.find(k);
    EXPECT_EQ(net, it == final_contents.end() ? 0 : 1) << "shared key " << k;
    if (it != final_contents.end()) {
      EXPECT_NE(std::find(written.begin(), written.end(), it->second), written.end())
          << "shared key " << k << " holds a value no successful insert wrote";
    }
  }
  std::size_t private_total = 0;
  for (const ThreadResult& r : results) private_total += r.model.size();
  std::size_t shared_present = 0;
  for (const auto& [k, v] : final_contents)
    if (k <= shared_keys) ++shared_present;
  EXPECT_EQ(final_contents.size(), private_total + shared_present) << "stray keys";
}

TYPED_TEST(SoftSetTest, ConcurrentStressAgainstModels) {
  for (unsigned threads : {2u, 3u, 4u}) {
    SCOPED_TRACE(threads);
    auto& s = this->make();
    concurrent_stress(s, threads, 20000);
    // Whatever the interleaving left, recovery must give back the same contents.
    const auto before = contents(s);
    auto& r = this->reopen();
    EXPECT_EQ(contents(r), before);
    this->set_.reset();
    this->pool_.reset();
    ::unlink(this->path_.str().c_str());
    this->pool_.emplace(pm::Pool::create(this->path_, kPoolSize, TypeParam::layout));
  }
}

// Hot keys: every thread inserts and removes the same few keys, so inserts meet "intention to
// insert" and removes meet "intention to delete" and help them (Zuriel et al. §4.4, §4.5).
TYPED_TEST(SoftSetTest, ContendedKeysKeepNetCounts) {
  auto& s = this->make();
  constexpr unsigned threads = 4;
  constexpr Key keys = 3;
  std::vector<std::array<long, keys + 1>> net(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    net[t].fill(0);
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 30000; ++i) {
        const Key k = 1 + rng() % keys;
        if (rng() % 2) {
          if (s.insert(k, k * 100)) ++net[t][k];
        } else if (s.remove(k)) {
          --net[t][k];
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  const auto c = contents(s);
  for (Key k = 1; k <= keys; ++k) {
    long sum = 0;
    for (unsigned t = 0; t < threads; ++t) sum += net[t][k];
    EXPECT_EQ(sum, c.count(k) ? 1 : 0) << "key " << k;
    if (c.count(k)) {
      EXPECT_EQ(c.at(k), k * 100);
    }
  }
  auto& r = this->reopen();
  EXPECT_EQ(contents(r), c);
}

TYPED_TEST(SoftSetTest, ReservedKeysThrowAndChangeNothing) {
  auto& s = this->make();
  ASSERT_TRUE(s.insert(5, 50));
  for (Key k : {pmds::min_reserved_key, pmds::max_reserved_key}) {
    EXPECT_THROW(s.insert(k, 1), ReservedKey);
    EXPECT_THROW(s.remove(k), ReservedKey);
    EXPECT_THROW(s.contains(k), ReservedKey);
    EXPECT_THROW(s.get(k), ReservedKey);
  }
  EXPECT_EQ(contents(s), (std::map<Key, Value>{{5, 50}}));
  auto& r = this->reopen();
  EXPECT_EQ(contents(r), (std::map<Key, Value>{{5, 50}}));
}

TYPED_TEST(SoftSetTest, FullPoolThrowsPoolFullAndStaysUsable) {
  // The smallest pool: one chunk, i.e. one durable area of chunk_size / soft_slot_size PNodes.
  this->pool_.reset();
  ::unlink(this->path_.str().c_str());
  this->pool_.emplace(pm::Pool::create(this->path_, pm::Pool::min_size(), TypeParam::layout));
  auto& s = this->make();
  const std::size_t capacity =
      this->pool_->allocator().chunk_size() / linkfree_soft::detail::soft_slot_size;
  // Descending keys: each insert lands at the front of its list (quick even for one list).
  const Key top = 1'000'000;
  std::size_t inserted = 0;
  for (;;) {
    try {
      ASSERT_TRUE(s.insert(top - inserted, inserted + 1));
      ++inserted;
    } catch (const pmds::PoolFull&) {
      break;
    }
    ASSERT_LE(inserted, capacity) << "more PNodes than the pool has slots";
  }
  EXPECT_EQ(inserted, capacity);
  const Key failed = top - inserted;
  EXPECT_FALSE(s.contains(failed)) << "the failed insert must leave no trace";
  EXPECT_THROW(s.insert(failed, 1), pmds::PoolFull);
  EXPECT_FALSE(s.insert(top, 5)) << "an existing key needs no slot: plain false";
  EXPECT_EQ(s.size(), inserted);
  // Removes work; once their epochs are safe, their slots serve new inserts.
  for (Key r = 0; r < 100; ++r) ASSERT_TRUE(s.remove(top - r));
  TypeParam::drain(s);
  for (Key n = 0; n < 100; ++n) ASSERT_TRUE(s.insert(failed - n, 7)) << n;
  EXPECT_THROW(s.insert(failed - 100, 1), pmds::PoolFull);
  EXPECT_EQ(s.size(), inserted);
  auto& r = this->reopen();
  EXPECT_EQ(r.size(), inserted);
  EXPECT_EQ(r.get(failed), 7u);
  EXPECT_FALSE(r.contains(top));
  EXPECT_EQ(r.get(top - 100), 101u);
}

TYPED_TEST(SoftSetTest, OpenRejectsAnotherStructure) {
  auto& s = this->make();
  ASSERT_TRUE(s.insert(1, 1));
  this->set_.reset();
  // Same layout name, but the root tag names this structure: the other SOFT kinds refuse it.
  if constexpr (!std::is_same_v<TypeParam, ListKind<>>) {
    EXPECT_THROW(ListKind<>::open(*this->pool_), pmds::PoolError);
  }
  if constexpr (!std::is_same_v<TypeParam, SkipKind<>>) {
    EXPECT_THROW(SkipKind<>::open(*this->pool_), pmds::PoolError);
  }
  if constexpr (!std::is_same_v<TypeParam, HashKind<>>) {
    EXPECT_THROW(HashKind<>::open(*this->pool_), pmds::PoolError);
  }
  EXPECT_THROW(TypeParam::create(*this->pool_), pmds::PoolError) << "the pool holds a set";
  this->set_ = TypeParam::open(*this->pool_);
  EXPECT_TRUE(this->set_->contains(1));
}

// One process inserts (and removes) and exits without closing; another opens the pool and finds
// exactly those contents.
TYPED_TEST(SoftSetTest, ProcessExitWithoutCloseKeepsExactlyItsContents) {
  this->pool_.reset();
  ::unlink(this->path_.str().c_str());
  const std::string path = this->path_;
  const int code = pmds::test::run_in_child([&] {
    auto pool = pm::Pool::create(path, kPoolSize, TypeParam::layout);
    auto s = TypeParam::create(pool);
    for (Key k = 1; k <= 3000; ++k)
      if (!s->insert(k, k * 3)) return 1;
    for (Key k = 1; k <= 3000; k += 2)
      if (!s->remove(k)) return 2;
    std::fflush(nullptr);
    ::_exit(0);  // no destructor, no close: the pool is left "in use"
  });
  ASSERT_EQ(code, 0);
  this->pool_.emplace(pm::Pool::open(path, TypeParam::layout));
  EXPECT_FALSE(this->pool_->was_clean_shutdown());
  this->set_ = TypeParam::open(*this->pool_);
  std::map<Key, Value> expected;
  for (Key k = 2; k <= 3000; k += 2) expected[k] = k * 3;
  EXPECT_EQ(contents(*this->set_), expected);
  EXPECT_EQ(this->set_->recovery_stats().live_slots, expected.size());
}

// A process killed (SIGKILL) in the middle of a run of updates: every update it completed is in
// the recovered set, and the one it had started may or may not be (a process crash keeps every
// store in the page cache, so this checks recovery logic, not flushes: docs/ARCHITECTURE.md §3).
TYPED_TEST(SoftSetTest, KilledProcessKeepsEveryCompletedUpdate) {
  this->pool_.reset();
  ::unlink(this->path_.str().c_str());
  const std::string path = this->path_;
  // The update sequence, known to both: op i inserts or removes key keys[i].
  constexpr std::size_t kOps = 2'000'000;
  auto op_at = [](std::uint64_t i, Key& key, bool& insert) {
    std::uint64_t z = i * 0x9E3779B97F4A7C15ull;
    z ^= z >> 31;
    key = 1 + (z % 400);
    insert = ((z >> 20) & 1) != 0;
  };
  const std::uint64_t completed =
      pmds::test::killed_mid_run(1, 20000, [&](std::atomic<std::uint64_t>* done) {
        auto pool = pm::Pool::create(path, kPoolSize, TypeParam::layout);
        auto s = TypeParam::create(pool);
        for (std::uint64_t i = 0; i < kOps; ++i) {
          Key k;
          bool ins;
          op_at(i, k, ins);
          if (ins)
            s->insert(k, i);
          else
            s->remove(k);
          done->store(i + 1, std::memory_order_release);
        }
      })[0];
  if (::testing::Test::HasFailure()) return;
  // The model after `completed` updates, and with the pending one applied.
  std::map<Key, Value> before, after;
  for (std::uint64_t i = 0; i <= completed; ++i) {
    Key k;
    bool ins;
    op_at(i, k, ins);
    std::map<Key, Value>& m = i < completed ? before : after;
    if (i == completed) after = before;
    if (ins)
      m.emplace(k, i);
    else
      m.erase(k);
  }
  this->pool_.emplace(pm::Pool::open(path, TypeParam::layout));
  this->set_ = TypeParam::open(*this->pool_);
  const auto got = contents(*this->set_);
  EXPECT_TRUE(got == before || got == after)
      << "recovered " << got.size() << " keys after " << completed << " completed updates";
}

// The planted recovery bug is compiled in only when asked for, and does what it says.
TYPED_TEST(SoftSetTest, PlantedRecoveryBugResurrectsDeletedKeys) {
  auto& s = this->make();
  ASSERT_TRUE(s.insert(10, 1));
  ASSERT_TRUE(s.insert(11, 2));
  ASSERT_TRUE(s.remove(10));
  this->set_.reset();
  this->pool_.reset();
  this->pool_.emplace(pm::Pool::open(this->path_, TypeParam::layout));
  {
    using Buggy =
        std::conditional_t<std::is_same_v<TypeParam, ListKind<>>,
                           ListKind<Planted<Fault::recovery_keeps_deleted>>,
                           std::conditional_t<std::is_same_v<TypeParam, HashKind<>>,
                                              HashKind<Planted<Fault::recovery_keeps_deleted>>,
                                              SkipKind<Planted<Fault::recovery_keeps_deleted>>>>;
    auto buggy = Buggy::open(*this->pool_);
    EXPECT_EQ(contents(*buggy), (std::map<Key, Value>{{10, 1}, {11, 2}}));
  }
  this->pool_.reset();
  auto& r = this->reopen();
  // The buggy open wrote nothing: the correct recovery still finds the true contents.
  EXPECT_EQ(contents(r), (std::map<Key, Value>{{11, 2}}));
}

// Two live PNodes with one key cannot come from SOFT; if a pool holds them anyway (here: an old,
// deleted PNode of the key is made to look live again), recovery keeps the first in slot order,
// frees the other, counts it, and the set works on.
TYPED_TEST(SoftSetTest, RecoveryKeepsOneOfDuplicateKeys) {
  auto& s = this->make();
  ASSERT_TRUE(s.insert(5, 50));
  ASSERT_TRUE(s.insert(6, 60));
  ASSERT_TRUE(s.remove(5));
  ASSERT_TRUE(s.insert(5, 51));
  this->set_.reset();
  int revived = 0;
  this->pool_->allocator().for_each_slot([&](void* slot, std::size_t size) {
    if (size != linkfree_soft::detail::soft_slot_size) return;
    auto* p = static_cast<linkfree_soft::detail::SoftPNode*>(slot);
    if (p->key.load() == 5 && p->value.load() == 50 && !p->live()) {
      p->deleted.store(p->valid_start.load() ^ 1);
      ++revived;
    }
  });
  ASSERT_EQ(revived, 1);
  this->pool_.reset();
  this->pool_.emplace(pm::Pool::open(this->path_, TypeParam::layout));
  this->set_ = TypeParam::open(*this->pool_);
  auto& r = *this->set_;
  EXPECT_EQ(r.recovery_stats().duplicate_keys, 1u);
  EXPECT_EQ(contents(r), (std::map<Key, Value>{{5, 50}, {6, 60}}))
      << "the first PNode in slot order (the older one) is kept";
  EXPECT_TRUE(r.remove(5));
  EXPECT_TRUE(r.insert(7, 70));
  EXPECT_EQ(contents(r), (std::map<Key, Value>{{6, 60}, {7, 70}}));
}

// The skip list's scan (YCSB E): up to n keys >= from, ascending, only keys in the set.
TEST(SoftSkipListScan, ScansMatchTheModel) {
  pmds::test::TempPath path("soft_scan");
  auto pool = pm::Pool::create(path, kPoolSize, "skiplist/soft");
  linkfree_soft::SoftSkipList<> s(create_new, pool);
  std::map<Key, Value> model;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3000; ++i) {
    const Key k = 1 + rng() % 2000;
    if (rng() % 3 == 0) {
      s.remove(k);
      model.erase(k);
    } else if (s.insert(k, k + 5)) {
      model.emplace(k, k + 5);
    }
  }
  for (Key from : {Key{0}, Key{1}, Key{500}, Key{1999}, Key{2000}, Key{5000}}) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{10}, std::size_t{100000}}) {
      std::vector<std::pair<Key, Value>> got, want;
      const std::size_t count = s.scan(from, n, [&](Key k, Value v) { got.emplace_back(k, v); });
      for (auto it = model.lower_bound(from); it != model.end() && want.size() < n; ++it)
        want.emplace_back(*it);
      EXPECT_EQ(count, got.size());
      EXPECT_EQ(got, want) << "from " << from << ", n " << n;
    }
  }
}

// ---- The PNode validity scheme on every slot state a run or a crash can leave ------------------

struct alignas(alignof(linkfree_soft::detail::SoftPNode)) PNodeBuffer {
  unsigned char bytes[sizeof(linkfree_soft::detail::SoftPNode)] = {};
  linkfree_soft::detail::SoftPNode& node() {
    return *reinterpret_cast<linkfree_soft::detail::SoftPNode*>(bytes);
  }
};

void set_flags(linkfree_soft::detail::SoftPNode& p, int start, int end, int del) {
  p.valid_start.store(static_cast<std::uint8_t>(start));
  p.valid_end.store(static_cast<std::uint8_t>(end));
  p.deleted.store(static_cast<std::uint8_t>(del));
  p.key.store(99);
  p.value.store(98);
}

TEST(SoftPNode, CreateFromEveryFreeSlotStateMakesItLiveAndDestroyMakesItFree) {
  // Free slot states: never used (all 0), valid-and-removed (all x), half-created by a crash
  // (validStart = !x, validEnd = deleted = x), and a live-looking slot that recovery freed as a
  // duplicate key (x, x, !x).
  const int states[][3] = {{0, 0, 0}, {1, 1, 1}, {1, 0, 0}, {0, 1, 1}, {0, 0, 1}, {1, 1, 0}};
  for (const auto& st : states) {
    SCOPED_TRACE(::testing::Message() << st[0] << st[1] << st[2]);
    PNodeBuffer buf;
    auto& p = buf.node();
    set_flags(p, st[0], st[1], st[2]);
    const bool validity = p.prepare();
    EXPECT_FALSE(p.live()) << "a prepared slot must not look live before create";
    p.create(5, 6, validity);
    EXPECT_TRUE(p.live());
    EXPECT_EQ(p.key.load(), 5u);
    p.destroy(validity);
    EXPECT_FALSE(p.live());
    // ... and is again a free slot that the next create makes live.
    const bool again = p.prepare();
    p.create(7, 8, again);
    EXPECT_TRUE(p.live());
  }
}

// Why pValidity = !deleted: the paper's pValidity = !validStart mis-creates a half-created slot.
TEST(SoftPNode, PaperRuleWouldLoseAnInsertIntoAHalfCreatedSlot) {
  PNodeBuffer buf;
  auto& p = buf.node();
  set_flags(p, 1, 0, 0);  // a crash after validStart, before validEnd
  const bool paper_validity = p.valid_start.load() == 0;
  p.create(5, 6, paper_validity);
  EXPECT_FALSE(p.live()) << "the paper's rule leaves this completed create not live";
  set_flags(p, 1, 0, 0);
  p.create(5, 6, p.prepare());
  EXPECT_TRUE(p.live());
}

}  // namespace

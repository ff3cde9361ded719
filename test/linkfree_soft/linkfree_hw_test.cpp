// labels: concurrent memory
// Link-free list, hash set and skip list (Zuriel et al. §3) on the hardware backend: sequential
// semantics against a model, concurrent stress against per-thread models, reserved keys, a full
// pool, reopening in the same process, and a child process that inserts and exits without
// closing while the parent then opens the pool and finds exactly those contents.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "linkfree_soft/linkfree_test_util.hpp"
#include "support/child_process.hpp"
#include "support/set_model.hpp"

namespace pmds::test {
namespace {

constexpr std::size_t kPoolSize = std::size_t{16} << 20;

template <class Kind>
class LinkFreeSetTest : public ::testing::Test {};

using Kinds = ::testing::Types<ListKind<>, HashKind<>, SkipListKind<>>;
TYPED_TEST_SUITE(LinkFreeSetTest, Kinds);

TYPED_TEST(LinkFreeSetTest, SequentialOperationsMatchAMap) {
  TempPoolPath path("lf_seq");
  auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
  auto set = TypeParam::create(pool);
  std::map<Key, Value> model;
  ASSERT_NO_FATAL_FAILURE(pmds::test::expect_set_matches_map(*set, model, 20000, 300));
  EXPECT_EQ(contents_of(*set), model);
  EXPECT_EQ(set->size(), model.size());
}

TYPED_TEST(LinkFreeSetTest, InsertDoesNotUpdateAnExistingKey) {
  TempPoolPath path("lf_noupd");
  auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
  auto set = TypeParam::create(pool);
  EXPECT_TRUE(set->insert(7, 70));
  EXPECT_FALSE(set->insert(7, 71));
  EXPECT_EQ(set->get(7), std::optional<Value>(70));
  EXPECT_TRUE(set->remove(7));
  EXPECT_FALSE(set->remove(7));
  EXPECT_TRUE(set->insert(7, 72));
  EXPECT_EQ(set->get(7), std::optional<Value>(72));
  // The largest and smallest user keys sit right next to the sentinels.
  EXPECT_TRUE(set->insert(max_user_key, 1));
  EXPECT_TRUE(set->insert(min_user_key, 2));
  EXPECT_TRUE(set->contains(max_user_key));
  EXPECT_TRUE(set->contains(min_user_key));
  EXPECT_EQ(set->size(), 3u);
}

TYPED_TEST(LinkFreeSetTest, ReservedKeysThrow) {
  TempPoolPath path("lf_reserved");
  auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
  auto set = TypeParam::create(pool);
  for (const Key k : {min_reserved_key, max_reserved_key}) {
    EXPECT_THROW(set->insert(k, 1), ReservedKey);
    EXPECT_THROW(set->remove(k), ReservedKey);
    EXPECT_THROW(set->contains(k), ReservedKey);
    EXPECT_THROW(set->get(k), ReservedKey);
  }
  EXPECT_TRUE(set->insert(5, 5));
  EXPECT_EQ(set->size(), 1u);
}

// Threads work on private keys (checked exactly against a per-thread model) and on a few shared
// keys (checked by success counts: for each shared key, successful inserts minus successful
// removes is 0 or 1, and says whether it is present at the end, with a value one of the
// successful inserts used).
template <class Kind>
void concurrent_stress(int threads, int ops_per_thread) {
  TempPoolPath path("lf_stress");
  auto pool = pm::Pool::create(path.str(), std::size_t{32} << 20, "test");
  auto set = Kind::create(pool);
  constexpr Key kShared = 24;       // keys 1..kShared are shared
  constexpr Key kPrivatePer = 400;  // thread t owns kShared + 1 + t + threads * i
  for (Key k = 1; k <= kShared; k += 2) ASSERT_TRUE(set->insert(k, k * 1000));

  std::vector<std::atomic<long>> inserts(kShared + 1), removes(kShared + 1);
  for (Key k = 1; k <= kShared; k += 2) inserts[k] = 1;
  std::vector<std::map<Key, Value>> models(static_cast<std::size_t>(threads));
  std::vector<std::vector<std::pair<Key, Value>>> shared_values(static_cast<std::size_t>(threads));
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + static_cast<unsigned>(t));
      auto& model = models[static_cast<std::size_t>(t)];
      for (int i = 0; i < ops_per_thread; ++i) {
        const bool shared = rng() % 10 < 3;
        const Key k = shared ? 1 + rng() % kShared
                             : kShared + 1 + static_cast<Key>(t) +
                                   static_cast<Key>(threads) * (rng() % kPrivatePer);
        const Value v = (static_cast<Value>(t) << 32) | static_cast<Value>(i);
        const unsigned op = static_cast<unsigned>(rng() % 4);
        if (shared) {
          if (op == 0) {
            if (set->insert(k, v)) {
              ++inserts[k];
              shared_values[static_cast<std::size_t>(t)].emplace_back(k, v);
            }
          } else if (op == 1) {
            if (set->remove(k)) ++removes[k];
          } else if (op == 2) {
            (void)set->contains(k);
          } else {
            (void)set->get(k);
          }
          continue;
        }
        bool ok = true;
        if (op == 0) {
          const bool fresh = !model.contains(k);
          ok = set->insert(k, v) == fresh;
          if (fresh) model[k] = v;
        } else if (op == 1) {
          ok = set->remove(k) == (model.erase(k) == 1);
        } else if (op == 2) {
          ok = set->contains(k) == model.contains(k);
        } else {
          const auto got = set->get(k);
          ok = model.contains(k) ? got == std::optional<Value>(model[k]) : !got.has_value();
        }
        if (!ok) ++failures;
      }
    });
  }
  for (auto& w : workers) w.join();
  ASSERT_EQ(failures.load(), 0);

  auto check = [&](auto& s) {
    std::map<Key, Value> expected;
    for (const auto& m : models) expected.insert(m.begin(), m.end());
    const auto found = contents_of(s);
    ASSERT_EQ(s.size(), found.size()) << "a key appears twice";
    std::map<Key, Value> found_private(found.upper_bound(kShared), found.end());
    EXPECT_EQ(found_private, expected);
    for (Key k = 1; k <= kShared; ++k) {
      const long balance = inserts[k].load() - removes[k].load();
      ASSERT_TRUE(balance == 0 || balance == 1) << "key " << k << " balance " << balance;
      ASSERT_EQ(found.contains(k), balance == 1) << "key " << k;
      if (balance == 1) {
        bool seen = found.at(k) == k * 1000;
        for (const auto& vs : shared_values)
          for (const auto& [kk, vv] : vs) seen = seen || (kk == k && vv == found.at(k));
        EXPECT_TRUE(seen) << "key " << k << " has a value no successful insert used";
      }
    }
  };
  check(*set);
  // And after recovery from the pool (a clean close: the links are rebuilt all the same).
  set.reset();
  pool.close();
  auto reopened = pm::Pool::open(path.str(), "test");
  auto recovered = Kind::open(reopened);
  check(*recovered);
  EXPECT_EQ(recovered->recovery_stats().live_slots, recovered->size());
  EXPECT_EQ(recovered->recovery_stats().duplicate_keys, 0u);
}

TYPED_TEST(LinkFreeSetTest, ConcurrentStressTwoThreads) {
  concurrent_stress<TypeParam>(2, 40000);
}
TYPED_TEST(LinkFreeSetTest, ConcurrentStressFourThreads) {
  concurrent_stress<TypeParam>(4, 20000);
}

// Four threads on four keys: every insert races with removes of the same key (the skip list's
// tower linking against its unlinking and retirement; the sanitizer builds watch the memory).
// Per key, successful inserts minus successful removes must be 0 or 1 and match presence.
TYPED_TEST(LinkFreeSetTest, HotKeysStress) {
  TempPoolPath path("lf_hot");
  auto pool = pm::Pool::create(path.str(), std::size_t{32} << 20, "test");
  auto set = TypeParam::create(pool);
  constexpr Key kKeys = 4;
  std::vector<std::atomic<long>> balance(kKeys + 1);
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(77 + static_cast<unsigned>(t));
      for (int i = 0; i < 30000; ++i) {
        const Key k = 1 + rng() % kKeys;
        switch (rng() % 3) {
          case 0:
            if (set->insert(k, k)) ++balance[k];
            break;
          case 1:
            if (set->remove(k)) --balance[k];
            break;
          default:
            if (const auto v = set->get(k)) {
              EXPECT_EQ(*v, k);
            }
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  const auto found = contents_of(*set);
  EXPECT_EQ(set->size(), found.size());
  for (Key k = 1; k <= kKeys; ++k) {
    ASSERT_TRUE(balance[k] == 0 || balance[k] == 1) << "key " << k << ": " << balance[k];
    EXPECT_EQ(found.contains(k), balance[k] == 1) << "key " << k;
  }
}

TYPED_TEST(LinkFreeSetTest, ReopenRecoversContentsAndFreesTheRest) {
  TempPoolPath path("lf_reopen");
  std::map<Key, Value> model;
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
    auto set = TypeParam::create(pool);
    for (Key k = 1; k <= 3000; ++k) ASSERT_TRUE(set->insert(k * 7, k));
    for (Key k = 1; k <= 3000; k += 3) ASSERT_TRUE(set->remove(k * 7));
    for (Key k = 1; k <= 3000; ++k)
      if (k % 3 != 1) model[k * 7] = k;
  }
  {
    auto pool = pm::Pool::open(path.str(), "test");
    auto set = TypeParam::open(pool);
    EXPECT_EQ(contents_of(*set), model);
    const auto& st = set->recovery_stats();
    EXPECT_EQ(st.live_slots, model.size());
    EXPECT_EQ(st.duplicate_keys, 0u);
    EXPECT_EQ(st.slots_scanned, st.live_slots + st.freed_slots);
    // The set works after recovery, and freed slots are reused before new chunks are claimed.
    const std::size_t chunks = pool.allocator().used_chunks();
    for (Key k = 1; k <= 3000; k += 3) ASSERT_TRUE(set->insert(k * 7, k + 1));
    for (Key k = 1; k <= 3000; k += 3) model[k * 7] = k + 1;
    EXPECT_EQ(pool.allocator().used_chunks(), chunks);
    EXPECT_EQ(contents_of(*set), model);
  }
  {
    auto pool = pm::Pool::open(path.str(), "test");
    auto set = TypeParam::open(pool);
    EXPECT_EQ(contents_of(*set), model);
  }
}

TYPED_TEST(LinkFreeSetTest, OpenRejectsAnotherStructure) {
  TempPoolPath path("lf_wrong");
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
    auto set = TypeParam::create(pool);
    // A second set in the same pool is refused: the root table is taken.
    EXPECT_THROW(TypeParam::create(pool), PoolError);
  }
  auto pool = pm::Pool::open(path.str(), "test");
  if constexpr (std::is_same_v<TypeParam, ListKind<>>) {
    EXPECT_THROW(SkipListKind<>::open(pool), PoolError);
  } else {
    EXPECT_THROW(ListKind<>::open(pool), PoolError);
  }
}

// One process inserts (and removes) and exits without closing anything; another opens the pool.
TYPED_TEST(LinkFreeSetTest, ChildInsertsAndExitsParentRecoversExactly) {
  TempPoolPath path("lf_fork");
  auto expected_after = [](int phase) {
    std::map<Key, Value> m;
    for (Key k = 1; k <= 2000; ++k) m[k * 13] = k;
    if (phase >= 1)
      for (Key k = 1; k <= 2000; k += 2) m.erase(k * 13);
    if (phase >= 2)
      for (Key k = 1; k <= 2000; k += 4) m[k * 13] = k + 5;
    return m;
  };
  for (int phase = 0; phase < 3; ++phase) {
    // The child: do this phase's operations, then exit without destructors (no close, no
    // clean-shutdown flag): what the parent sees is what the child's stores left.
    const int code = pmds::test::run_in_child([&] {
      auto pool = phase == 0 ? pm::Pool::create(path.str(), kPoolSize, "test")
                             : pm::Pool::open(path.str(), "test");
      auto set = phase == 0 ? TypeParam::create(pool) : TypeParam::open(pool);
      int rc = 0;
      if (phase == 0)
        for (Key k = 1; k <= 2000; ++k) rc |= !set->insert(k * 13, k);
      if (phase == 1)
        for (Key k = 1; k <= 2000; k += 2) rc |= !set->remove(k * 13);
      if (phase == 2)
        for (Key k = 1; k <= 2000; k += 4) rc |= !set->insert(k * 13, k + 5);
      ::_exit(rc);  // here: neither the set nor the pool is destroyed or closed
      return rc;
    });
    ASSERT_EQ(code, 0) << "phase " << phase;
    auto pool = pm::Pool::open(path.str(), "test");
    EXPECT_FALSE(pool.was_clean_shutdown());
    auto set = TypeParam::open(pool);
    EXPECT_EQ(contents_of(*set), expected_after(phase)) << "phase " << phase;
    EXPECT_EQ(set->recovery_stats().live_slots, expected_after(phase).size());
  }
}

TYPED_TEST(LinkFreeSetTest, FullPoolThrowsPoolFullAndTheSetStaysUsable) {
  TempPoolPath path("lf_full");
  // The smallest pool: a few 1 MiB chunks of 16384 node slots each.
  auto pool = pm::Pool::create(path.str(), pm::Pool::min_size() + (std::size_t{2} << 20), "test");
  auto set = TypeParam::create(pool);
  // Descending keys: each insert is at the front of a list (keeps the list case linear).
  constexpr Key kTop = 2'000'000;
  Key count = 0;
  bool full = false;
  for (Key k = kTop; k > 0; --k) {
    try {
      ASSERT_TRUE(set->insert(k, k));
      ++count;
    } catch (const PoolFull&) {
      full = true;
      break;
    }
  }
  ASSERT_TRUE(full);
  ASSERT_GT(count, 1000u);
  const Key lowest = kTop - count + 1;
  EXPECT_EQ(set->size(), count);
  EXPECT_FALSE(set->contains(lowest - 1));
  EXPECT_THROW(set->insert(lowest - 1, 0), PoolFull);
  EXPECT_THROW(set->insert(lowest - 2, 0), PoolFull);
  // Existing keys still fail to insert without allocating, and everything else works.
  EXPECT_FALSE(set->insert(kTop, 5));
  EXPECT_EQ(set->get(kTop), std::optional<Value>(kTop));
  for (Key k = lowest; k < lowest + 100; ++k) ASSERT_TRUE(set->remove(k));
  set->drain();
  for (Key k = lowest - 100; k < lowest; ++k) ASSERT_TRUE(set->insert(k, k));
  EXPECT_EQ(set->size(), count);
  EXPECT_TRUE(set->contains(lowest - 100));
  EXPECT_FALSE(set->contains(lowest + 50));
}

// The skip list keeps a node's tower in its slot (64, 128 or 320 bytes by height), and recovery
// keeps each node's height, a byte of volatile meaning that a crash may leave at anything. Every
// node's height byte is overwritten (0 and 255 in turn) before the open: recovery must clamp it
// to [1, what the slot holds], and the set must come back exact and work at every level.
TEST(LinkFreeSkipListTowers, RecoveryClampsHeightsToTheirSlots) {
  using Node = linkfree_soft::detail::linkfree::SkipListNode;
  TempPoolPath path("lf_heights");
  std::map<Key, Value> expected;
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
    auto set = SkipListKind<>::create(pool);
    for (Key k = 1; k <= 20000; ++k) {
      ASSERT_TRUE(set->insert(k * 7, k));
      expected[k * 7] = k;
    }
  }
  {
    auto pool = pm::Pool::open(path.str(), "test");
    std::map<std::size_t, std::size_t> nodes_by_slot_size;
    bool high = false;
    pool.allocator().for_each_slot([&](void* slot, std::size_t size) {
      auto* bytes = static_cast<unsigned char*>(slot);
      if (bytes[0] == 0) return;  // never used: no validity tag
      ++nodes_by_slot_size[size];
      bytes[offsetof(Node, height)] = high ? 255 : 0;
      high = !high;
    });
    // P(height > 5) = 1/32: about 625 of the 20,000 nodes are in 128-byte slots.
    EXPECT_GT(nodes_by_slot_size[64], 0u);
    EXPECT_GT(nodes_by_slot_size[128], 0u);
  }
  auto pool = pm::Pool::open(path.str(), "test");
  auto set = SkipListKind<>::open(pool);
  EXPECT_EQ(set->recovery_stats().live_slots, expected.size());
  EXPECT_EQ(contents_of(*set), expected);
  // A 255 in a 128-byte slot became 13 levels (what the slot holds), not 1 or 5.
  EXPECT_GE(set->levels_in_use(), 13);
  EXPECT_LE(set->levels_in_use(), linkfree_soft::LinkFreeSkipList<>::max_levels);
  for (Key k = 1; k <= 20000; k += 2) {
    ASSERT_TRUE(set->remove(k * 7));
    expected.erase(k * 7);
  }
  for (Key k = 1; k <= 5000; ++k) {
    ASSERT_TRUE(set->insert(k * 7 + 3, k));
    expected[k * 7 + 3] = k;
  }
  EXPECT_EQ(contents_of(*set), expected);
  for (const auto& [k, v] : expected) ASSERT_EQ(set->get(k), std::optional<Value>(v));
}

}  // namespace
}  // namespace pmds::test

// labels: slow memory
// Recovery of 1M keys (Zuriel et al.'s hash-table size) for the link-free list, hash set (2^20
// buckets) and skip list: the recovered contents are exactly the inserted minus the removed
// keys. Prints the recovery time (issue 4's target: at most 0.5 s on one thread); asserts only
// behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "linkfree_soft/linkfree_test_util.hpp"

namespace pmds::test {
namespace {

// 1M keys; 100K under a sanitizer, whose builds check behaviour, not time.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr Key kKeys = 100'000;
#else
constexpr Key kKeys = 1'000'000;
#endif
constexpr std::size_t kPoolSize = std::size_t{160} << 20;

template <class Kind, class Make>
void recover_many(const char* name, bool random_order, Make make) {
  TempPoolPath path("lf_rec1m");
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
    auto set = make(pool);
    // The even keys 2..2M live. Every 8th step also inserts an odd key and removes it at once:
    // recovery meets deleted nodes too (those whose slots were not reused yet) and frees them.
    // Random order scatters the keys over the slots' address order (recovery sorts them); a
    // list is built in descending order instead, so each insert lands at its front and the
    // build stays linear (its recovery then sorts keys that lie in reverse address order).
    std::vector<Key> order;
    for (Key k = 2 * kKeys; k > 0; k -= 2) order.push_back(k);
    if (random_order) std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
    for (const Key k : order) {
      ASSERT_TRUE(set->insert(k, k + 1));
      if (k % 16 == 0) {
        ASSERT_TRUE(set->insert(k - 1, 0));
        ASSERT_TRUE(set->remove(k - 1));
      }
    }
  }
  auto pool = pm::Pool::open(path.str(), "test");
  const auto start = std::chrono::steady_clock::now();
  auto set = Kind::open(pool);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& st = set->recovery_stats();
  std::printf(
      "  %s: recovered %zu live nodes (%zu slots scanned, %zu freed) in %.3f s "
      "(recovery's own clock: %.3f s)\n",
      name, st.live_slots, st.slots_scanned, st.freed_slots, seconds, st.seconds);
  EXPECT_EQ(st.live_slots, kKeys);
  EXPECT_EQ(st.duplicate_keys, 0u);
  // Exact contents.
  std::size_t seen = 0;
  bool exact = true;
  Key expected = 2;
  std::vector<std::pair<Key, Value>> all;
  all.reserve(kKeys);
  set->for_each([&](Key k, Value v) { all.emplace_back(k, v); });
  std::sort(all.begin(), all.end());
  for (const auto& [k, v] : all) {
    exact = exact && k == expected && v == k + 1;
    expected += 2;
    ++seen;
  }
  EXPECT_TRUE(exact);
  EXPECT_EQ(seen, kKeys);
  EXPECT_TRUE(set->contains(2));
  EXPECT_FALSE(set->contains(15));
}

TEST(LinkFreeRecovery, HashSetOfManyKeys) {
  using Kind = SetKind<linkfree_soft::LinkFreeHashSet>;
  recover_many<Kind>("hash/linkfree (2^20 buckets), random insert order", true, [](pm::Pool& pool) {
    return std::make_unique<linkfree_soft::LinkFreeHashSet>(create_new, pool, std::size_t{1} << 20);
  });
}

TEST(LinkFreeRecovery, SkipListOfManyKeys) {
  using Kind = SkipListKind<>;
  recover_many<Kind>("skiplist/linkfree, random insert order", true,
                     [](pm::Pool& pool) { return Kind::create(pool); });
}

TEST(LinkFreeRecovery, ListOfManyKeys) {
  using Kind = ListKind<>;
  recover_many<Kind>("list/linkfree, descending insert order", false,
                     [](pm::Pool& pool) { return Kind::create(pool); });
}

}  // namespace
}  // namespace pmds::test

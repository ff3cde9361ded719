// labels: concurrent
// The lock-free skip list under every policy: sequential and concurrent behaviour against a
// model, reserved keys, and (Izraelevitz) recovery in a new process after a dirty exit and
// after a clean close, with the allocator accounting for every slot.
#include <gtest/gtest.h>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/skip_list.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(Map<SkipList<transient>>);
static_assert(Map<SkipList<izraelevitz>>);

template <class P>
class SkipListTest : public ::testing::Test {};
TYPED_TEST_SUITE(SkipListTest, AllPolicies);

TYPED_TEST(SkipListTest, Sequential) {
  Instance<SkipList<TypeParam>> list;
  set_sequential(*list);
}

TYPED_TEST(SkipListTest, ReservedKeysThrow) {
  Instance<SkipList<TypeParam>> list;
  set_reserved_keys_throw(*list);
}

TYPED_TEST(SkipListTest, ConcurrentStress) {
  for (int threads : {2, 4}) {
    Instance<SkipList<TypeParam>> list;
    SetStressConfig c;
    c.threads = threads;
    c.seed = static_cast<std::uint64_t>(threads);
    if (TypeParam::durable) {  // a flush + fence per shared access, O(keys) accesses per op
      c.ops_per_thread /= 10;
      c.own_keys = 48;
    }
    set_stress(*list, c);
  }
}

using DurableSkipList = SkipList<izraelevitz>;
auto make_skiplist = [](pm::Pool& pool) {
  return std::make_unique<DurableSkipList>(create_new, pool);
};
// Live after recovery: the anchor, the head and one node per key (completed removes unlinked
// theirs at every level).
auto skiplist_live = [](const DurableSkipList&, std::size_t keys) { return 2 + keys; };

TEST(SkipListRecovery, NewProcessAfterDirtyExit) {
  set_recovery_in_new_process<DurableSkipList>(make_skiplist, skiplist_live, false);
}
TEST(SkipListRecovery, NewProcessAfterCleanClose) {
  set_recovery_in_new_process<DurableSkipList>(make_skiplist, skiplist_live, true);
}

TEST(SkipListRecovery, OccupiedOrEmptyPoolIsATypedError) {
  pool_misuse_is_a_typed_error<SkipList<izraelevitz>>();
}

// The planted recovery bug (d) is a real fixture: the recovered list misses one key that the
// correct recovery of the same pool finds.
TEST(SkipListRecovery, PlantedRecoveryBugDropsAKey) {
  TempPath path("skiplist-planted");
  {
    auto pool = pm::Pool::create(path.str(), pool_size, "algo/skiplist");
    DurableSkipList list(create_new, pool);
    for (Key k = 1; k <= 10; ++k) list.insert(k, value_of(k));
  }
  {
    auto pool = pm::Pool::open(path.str(), "algo/skiplist");
    SkipList<IzraelevitzPolicy<PlantedBug::recovery_drops_node>> buggy(open_existing, pool);
    EXPECT_EQ(buggy.size(), 9u);
    EXPECT_FALSE(buggy.contains(1));
  }
}

// A head is never deleted, so a mark on one of its links is damage: recovery must report it.
// It once accepted it, and every later search through that level retried unlinking the head
// forever (found by the damaged-pool soak, PMDS_SOAK=1 RegistryDamagedPool).
TEST(SkipListRecovery, MarkedHeadLinkIsPoolCorrupt) {
  TempPath path("skiplist-marked-head");
  {
    auto pool = pm::Pool::create(path.str(), pool_size, "algo/skiplist");
    DurableSkipList list(create_new, pool);
    for (Key k = 1; k <= 10; ++k) list.insert(k, value_of(k));
  }
  {
    auto pool = pm::Pool::open(path.str(), "algo/skiplist");
    // The anchor is {kind, head}; the head node {key, value, height 20, owners, next(0), ...},
    // 8-byte words under this policy.
    auto* anchor = reinterpret_cast<std::uint64_t*>(pool.root(0).load());
    ASSERT_EQ(anchor[0], DurableSkipList::kind);
    auto* head = reinterpret_cast<std::uint64_t*>(anchor[1]);
    ASSERT_EQ(head[2], 20u);
    ASSERT_TRUE(pool.allocator().owns(reinterpret_cast<void*>(head[4])));
    head[4] |= mark_bit;
  }
  auto pool = pm::Pool::open(path.str(), "algo/skiplist");
  EXPECT_THROW(DurableSkipList(open_existing, pool), PoolCorrupt);
}

TEST(SkipListRecovery, NewProcessAfterKillMidOperation) {
  set_recovery_after_kill<DurableSkipList>(make_skiplist, 200);
}

}  // namespace
}  // namespace pmds::algo

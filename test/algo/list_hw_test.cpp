// labels: concurrent
// The Harris–Michael list under every policy: sequential and concurrent behaviour against a
// model, reserved keys, and (Izraelevitz) recovery in a new process after a dirty exit and
// after a clean close, with the allocator accounting for every slot.
#include <gtest/gtest.h>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/harris_michael_list.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(Map<HarrisMichaelList<transient>>);
static_assert(Map<HarrisMichaelList<izraelevitz>>);

template <class P>
class ListTest : public ::testing::Test {};
TYPED_TEST_SUITE(ListTest, AllPolicies);

TYPED_TEST(ListTest, Sequential) {
  Instance<HarrisMichaelList<TypeParam>> list;
  set_sequential(*list);
}

TYPED_TEST(ListTest, ReservedKeysThrow) {
  Instance<HarrisMichaelList<TypeParam>> list;
  set_reserved_keys_throw(*list);
}

TYPED_TEST(ListTest, ConcurrentStress) {
  for (int threads : {2, 4}) {
    Instance<HarrisMichaelList<TypeParam>> list;
    SetStressConfig c;
    c.threads = threads;
    c.seed = static_cast<std::uint64_t>(threads);
    if (TypeParam::durable) {  // a flush + fence per shared access, O(keys) accesses per op
      c.ops_per_thread /= 10;
      c.own_keys = 24;
    }
    set_stress(*list, c);
  }
}

using DurableList = HarrisMichaelList<izraelevitz>;
auto make_list = [](pm::Pool& pool) { return std::make_unique<DurableList>(create_new, pool); };
// Live after recovery: the anchor and one node per key (completed removes unlinked theirs).
auto list_live = [](const DurableList&, std::size_t keys) { return 1 + keys; };

TEST(ListRecovery, NewProcessAfterDirtyExit) {
  set_recovery_in_new_process<DurableList>(make_list, list_live, false, 40);
}
TEST(ListRecovery, NewProcessAfterCleanClose) {
  set_recovery_in_new_process<DurableList>(make_list, list_live, true, 40);
}

TEST(ListRecovery, OccupiedOrEmptyPoolIsATypedError) {
  pool_misuse_is_a_typed_error<HarrisMichaelList<izraelevitz>>();
}

// The planted recovery bug (d) is a real fixture: the recovered list misses one key that the
// correct recovery of the same pool finds.
TEST(ListRecovery, PlantedRecoveryBugDropsAKey) {
  TempPath path("list-planted");
  {
    auto pool = pm::Pool::create(path.str(), pool_size, "algo/list");
    DurableList list(create_new, pool);
    for (Key k = 1; k <= 10; ++k) list.insert(k, value_of(k));
  }
  {
    auto pool = pm::Pool::open(path.str(), "algo/list");
    HarrisMichaelList<IzraelevitzPolicy<PlantedBug::recovery_drops_node>> buggy(open_existing,
                                                                                pool);
    EXPECT_EQ(buggy.size(), 9u);
    EXPECT_FALSE(buggy.contains(1));
  }
}

// A head is never deleted, so a mark on its link is damage: recovery must report it. It once
// accepted it, and every later search retried its unlinking CAS on the head forever (found by
// the damaged-pool soak, PMDS_SOAK=1 RegistryDamagedPool).
TEST(ListRecovery, MarkedHeadLinkIsPoolCorrupt) {
  TempPath path("list-marked-head");
  {
    auto pool = pm::Pool::create(path.str(), pool_size, "algo/list");
    DurableList list(create_new, pool);
    for (Key k = 1; k <= 10; ++k) list.insert(k, value_of(k));
  }
  {
    auto pool = pm::Pool::open(path.str(), "algo/list");
    // The anchor is {kind, head link}, 8-byte words under this policy.
    auto* anchor = reinterpret_cast<std::uint64_t*>(pool.root(0).load());
    ASSERT_EQ(anchor[0], DurableList::kind);
    ASSERT_TRUE(pool.allocator().owns(reinterpret_cast<void*>(anchor[1])));
    anchor[1] |= mark_bit;
  }
  auto pool = pm::Pool::open(path.str(), "algo/list");
  EXPECT_THROW(DurableList(open_existing, pool), PoolCorrupt);
}

TEST(ListRecovery, NewProcessAfterKillMidOperation) {
  set_recovery_after_kill<DurableList>(make_list, 40);
}

}  // namespace
}  // namespace pmds::algo

// labels: concurrent
// The Natarajan–Mittal tree under every policy: sequential and concurrent behaviour against a
// model, reserved keys, and (Izraelevitz) recovery in a new process after a dirty exit and
// after a clean close, with the allocator accounting for every slot.
#include <gtest/gtest.h>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(Map<NatarajanMittalTree<transient>>);
static_assert(Map<NatarajanMittalTree<izraelevitz>>);

template <class P>
class BstTest : public ::testing::Test {};
TYPED_TEST_SUITE(BstTest, AllPolicies);

TYPED_TEST(BstTest, Sequential) {
  Instance<NatarajanMittalTree<TypeParam>> list;
  set_sequential(*list);
}

TYPED_TEST(BstTest, ReservedKeysThrow) {
  Instance<NatarajanMittalTree<TypeParam>> list;
  set_reserved_keys_throw(*list);
}

TYPED_TEST(BstTest, ConcurrentStress) {
  for (int threads : {2, 4}) {
    Instance<NatarajanMittalTree<TypeParam>> list;
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

using DurableBst = NatarajanMittalTree<izraelevitz>;
auto make_bst = [](pm::Pool& pool) { return std::make_unique<DurableBst>(create_new, pool); };
// Live after recovery: anchor, sentinels R and S and their three leaves, and per key one leaf
// and one internal node (completed removes took both out).
auto bst_live = [](const DurableBst&, std::size_t keys) { return 6 + 2 * keys; };

TEST(BstRecovery, NewProcessAfterDirtyExit) {
  set_recovery_in_new_process<DurableBst>(make_bst, bst_live, false);
}
TEST(BstRecovery, NewProcessAfterCleanClose) {
  set_recovery_in_new_process<DurableBst>(make_bst, bst_live, true);
}

TEST(BstRecovery, OccupiedOrEmptyPoolIsATypedError) {
  pool_misuse_is_a_typed_error<NatarajanMittalTree<izraelevitz>>();
}

// The planted recovery bug (d) is a real fixture: the recovered list misses one key that the
// correct recovery of the same pool finds.
TEST(BstRecovery, PlantedRecoveryBugDropsAKey) {
  TempPath path("bst-planted");
  {
    auto pool = pm::Pool::create(path.str(), pool_size, "algo/bst");
    DurableBst list(create_new, pool);
    for (Key k = 1; k <= 10; ++k) list.insert(k, value_of(k));
  }
  {
    auto pool = pm::Pool::open(path.str(), "algo/bst");
    NatarajanMittalTree<IzraelevitzPolicy<PlantedBug::recovery_drops_node>> buggy(open_existing,
                                                                                  pool);
    EXPECT_EQ(buggy.size(), 9u);
    EXPECT_FALSE(buggy.contains(1));
  }
}

TEST(BstRecovery, NewProcessAfterKillMidOperation) {
  set_recovery_after_kill<DurableBst>(make_bst, 200);
}

}  // namespace
}  // namespace pmds::algo

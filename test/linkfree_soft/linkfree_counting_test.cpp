// Link-free sets under the counting backend: the persistence instructions each operation issues
// (Zuriel et al. §2.2, §6: with the insert/delete flush flags, an update psyncs its node once and a
// read psyncs nothing once the flags are set), and a recovery that issues none (§2.1).
#include <gtest/gtest.h>

#include <random>

#include "linkfree_soft/linkfree_test_util.hpp"

namespace pmds::test {
namespace {

constexpr std::size_t kPoolSize = std::size_t{16} << 20;

template <class Kind>
class LinkFreeCountingTest : public ::testing::Test {};
using Kinds = ::testing::Types<ListKind<>, HashKind<>, SkipListKind<>>;
TYPED_TEST_SUITE(LinkFreeCountingTest, Kinds);

// Runs f and returns the flushes and fences this thread issued meanwhile.
template <class F>
pm::Counters counted(F&& f) {
  const pm::Counters before = pm::thread_counters();
  f();
  return pm::thread_counters() - before;
}

TYPED_TEST(LinkFreeCountingTest, EachOperationPsyncsAtMostItsOwnNodeOnce) {
  TempPoolPath path("lf_count");
  auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
  auto set = TypeParam::create(pool);
  for (Key k = 2; k <= 200; k += 2) ASSERT_TRUE(set->insert(k, k));

  // A successful insert: one flush and one fence (FLUSH_INSERT of the new node).
  auto c = counted([&] { EXPECT_TRUE(set->insert(101, 1)); });
  EXPECT_EQ(c.flushes, 1u);
  EXPECT_EQ(c.fences, 1u);
  // Reads of a node whose insertion was flushed: nothing (the insert-flush flag is set).
  c = counted([&] {
    EXPECT_TRUE(set->contains(101));
    EXPECT_EQ(set->get(101), std::optional<Value>(1));
    EXPECT_FALSE(set->contains(103));
    EXPECT_FALSE(set->get(103).has_value());
  });
  EXPECT_EQ(c.flushes, 0u);
  EXPECT_EQ(c.fences, 0u);
  // A failed insert of a flushed key: nothing to help.
  c = counted([&] { EXPECT_FALSE(set->insert(101, 2)); });
  EXPECT_EQ(c.flushes, 0u);
  EXPECT_EQ(c.fences, 0u);
  // A successful remove: one flush and one fence (trim's FLUSH_DELETE before unlinking).
  c = counted([&] { EXPECT_TRUE(set->remove(101)); });
  EXPECT_EQ(c.flushes, 1u);
  EXPECT_EQ(c.fences, 1u);
  // Removing or reading an absent key: nothing.
  c = counted([&] {
    EXPECT_FALSE(set->remove(101));
    EXPECT_FALSE(set->contains(101));
  });
  EXPECT_EQ(c.flushes, 0u);
  EXPECT_EQ(c.fences, 0u);
}

TYPED_TEST(LinkFreeCountingTest, MixedWorkloadStaysWithinOnePsyncPerUpdate) {
  TempPoolPath path("lf_count_mix");
  auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
  auto set = TypeParam::create(pool);
  std::mt19937_64 rng(3);
  std::uint64_t updates = 0, reads = 0;
  pm::Counters update_cost, read_cost;
  for (int i = 0; i < 20000; ++i) {
    const Key k = 1 + rng() % 512;
    const unsigned dice = static_cast<unsigned>(rng() % 10);
    if (dice < 8) {
      read_cost += counted([&] { (void)set->contains(k); });
      ++reads;
    } else {
      update_cost += counted([&] {
        if (dice == 8)
          (void)set->insert(k, k);
        else
          (void)set->remove(k);
      });
      ++updates;
    }
  }
  // Single-threaded, every flag is set by the operation that wrote the node: reads never psync.
  EXPECT_EQ(read_cost.fences, 0u);
  EXPECT_EQ(read_cost.flushes, 0u);
  EXPECT_LE(update_cost.fences, updates);
  EXPECT_EQ(update_cost.flushes, update_cost.fences);
  std::printf("  %llu updates: %.3f fences/update, %llu reads: %.3f fences/read\n",
              static_cast<unsigned long long>(updates),
              static_cast<double>(update_cost.fences) / static_cast<double>(updates),
              static_cast<unsigned long long>(reads),
              static_cast<double>(read_cost.fences) / static_cast<double>(reads));
}

TYPED_TEST(LinkFreeCountingTest, RecoveryIssuesNoFlushAndNoFence) {
  TempPoolPath path("lf_count_rec");
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
    auto set = TypeParam::create(pool);
    for (Key k = 1; k <= 5000; ++k) ASSERT_TRUE(set->insert(k, k));
    for (Key k = 1; k <= 5000; k += 2) ASSERT_TRUE(set->remove(k));
  }
  auto pool = pm::Pool::open(path.str(), "test");
  std::unique_ptr<typename TypeParam::Set> set;
  const auto c = counted([&] { set = TypeParam::open(pool); });
  EXPECT_EQ(c.flushes, 0u);
  EXPECT_EQ(c.fences, 0u);
  EXPECT_EQ(c.rmws, 0u);
  EXPECT_EQ(set->size(), 2500u);
}

}  // namespace
}  // namespace pmds::test

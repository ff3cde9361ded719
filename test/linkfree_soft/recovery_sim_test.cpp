// labels: memory
// Zuriel et al.'s recovery under the simulated Px86 backend (docs/ARCHITECTURE.md §3): what the
// crash lab cannot say. The lab (test/crashlab/crashlab_sim_test.cpp, `pmds crashtest`) crashes
// every link-free and SOFT structure, judges what recovery finds, and reports each of their planted
// bugs (crashlab/fixtures.hpp). Here: the recovery of a hand-built pool, exactly —
//   link-free: recovery issues no flush, fence or RMW (it rewrites only volatile-meaning fields:
//              links, towers, flags), and every image of a crash at its end recovers the same
//              contents (recovery is restartable);
//   SOFT:      recovery writes nothing persistent at all (no store in the pool), so a crash
//              during it leaves the pool as it found it.
#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "linkfree_soft/linkfree_test_util.hpp"
#include "linkfree_soft/soft_test_support.hpp"
#include "support/crash_image.hpp"

namespace {

namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;
using pmds::Key;
using pmds::Value;

static_assert(pm::backend == pm::Backend::simulated);

constexpr std::size_t kPoolSize = pm::Pool::min_size() + (std::size_t{3} << 20);

// ---- link-free -----------------------------------------------------------------------------

template <class Kind>
class LinkFreeRecovery : public ::testing::Test {};
using LinkFreeKinds =
    ::testing::Types<pmds::test::ListKind<>, pmds::test::HashKind<>, pmds::test::SkipListKind<>>;
TYPED_TEST_SUITE(LinkFreeRecovery, LinkFreeKinds);

TYPED_TEST(LinkFreeRecovery, IsRestartableAndIssuesNoFlushOrFence) {
  pmds::test::TempPoolPath path("lf_sim_rec");
  std::map<Key, Value> model;
  {
    auto pool = pm::Pool::create(path.str(), kPoolSize, "test");
    auto set = TypeParam::create(pool);
    for (Key k = 1; k <= 300; ++k) ASSERT_TRUE(set->insert(k * 3, k));
    for (Key k = 1; k <= 300; k += 4) ASSERT_TRUE(set->remove(k * 3));
    for (Key k = 1; k <= 300; ++k)
      if (k % 4 != 1) model[k * 3] = k;
  }
  std::optional<sim::Snapshot> snap;
  void* base = nullptr;
  {
    auto pool = pm::Pool::open(path.str(), "test");
    base = pool.base();
    sim::mark_all_durable();
    const auto before = sim::stats();
    auto set = TypeParam::open(pool);
    const auto after = sim::stats();
    EXPECT_EQ(after.events, before.events) << "recovery fenced, flushed with clflush or did an RMW";
    EXPECT_EQ(after.pending_flushes, before.pending_flushes) << "recovery flushed";
    EXPECT_GT(after.undetermined_stores, 0u) << "recovery should have relinked nodes";
    EXPECT_EQ(pmds::test::contents_of(*set), model);
    snap = sim::snapshot();
  }
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    ASSERT_NO_FATAL_FAILURE(pmds::test::write_crash_image(
        *snap, base, path.str(), seed == 0 ? sim::ImageKind::minimum : sim::ImageKind::random,
        seed));
    auto pool = pm::Pool::open(path.str(), "test");
    auto set = TypeParam::open(pool);
    EXPECT_EQ(pmds::test::contents_of(*set), model) << "image " << seed;
  }
}

// ---- SOFT ----------------------------------------------------------------------------------

template <class Kind>
class SoftRecovery : public ::testing::Test {};
using SoftKinds =
    ::testing::Types<soft_test::ListKind<>, soft_test::HashKind<>, soft_test::SkipKind<>>;
TYPED_TEST_SUITE(SoftRecovery, SoftKinds);

using pmds::test::ClwbFlushes;

TYPED_TEST(SoftRecovery, WritesNothingPersistent) {
  ClwbFlushes clwb;
  pmds::test::TempPath path("soft_sim_rec");
  std::map<Key, Value> model;
  {
    auto pool = pm::Pool::create(path, kPoolSize, TypeParam::layout);
    auto set = TypeParam::create(pool);
    for (Key k = 1; k <= 200; ++k) ASSERT_TRUE(set->insert(k * 3, k));
    for (Key k = 1; k <= 200; k += 4) ASSERT_TRUE(set->remove(k * 3));
    for (Key k = 1; k <= 200; ++k)
      if (k % 4 != 1) model[k * 3] = k;
  }
  auto pool = pm::Pool::open(path, TypeParam::layout);
  sim::mark_all_durable();
  const auto before = sim::stats();
  auto set = TypeParam::open(pool);
  const auto after = sim::stats();
  EXPECT_EQ(after.events, before.events) << "recovery fenced, did an RMW or a clflush";
  EXPECT_EQ(after.pending_flushes, before.pending_flushes) << "recovery flushed";
  EXPECT_EQ(after.recorded_stores, before.recorded_stores) << "recovery stored to the pool";
  EXPECT_EQ(soft_test::contents(*set), model);
}

}  // namespace

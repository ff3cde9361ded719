// labels: memory
// The Izraelevitz policy under the Px86 crash model (simulated backend): at a quiescent point
// after single-threaded inserts, the MINIMUM crash image (only what is certainly durable) of a
// correct list recovers to every inserted key, while each planted bug (a) link not flushed,
// (b) link not fenced, (c) contents not flushed loses or corrupts the last insert in that
// image. A deterministic check that the policy persists what the transform says and that the
// crash lab's fixtures are real bugs under the model; the crash lab explores the rest.
#include <gtest/gtest.h>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/crashlab/image_file.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

constexpr Key keys = 16;

// Inserts 2..keys, then 1, with policy IzraelevitzPolicy<Planted<F>>, then recovers the minimum (or
// maximum) crash image with the correct recovery and returns its contents.
template <Fault F>
std::map<Key, Value> recovered_image(pm::sim::ImageKind kind) {
  TempPath pool_path("sim-list"), image_path("sim-list-image");
  {
    auto pool = pm::Pool::create(pool_path.str(), 8u << 20, "algo/list");
    HarrisMichaelList<IzraelevitzPolicy<Planted<F>>> list(create_new, pool);
    // 1 last: its node is then linked at the head, away from the nodes the insert reads and
    // flushes (a new node sharing a line with its predecessor is flushed with the link's line,
    // which would hide bug (c)).
    for (Key k = 2; k <= keys; ++k) EXPECT_TRUE(list.insert(k, value_of(k)));
    EXPECT_TRUE(list.insert(1, value_of(1)));
    const pm::sim::Snapshot snap = pm::sim::snapshot(false);
    crashlab::write_crash_image(snap, snap.choice(kind), pool_path.str(), image_path.str());
  }
  auto pool = pm::Pool::open(image_path.str(), "algo/list");
  EXPECT_FALSE(pool.was_clean_shutdown());
  HarrisMichaelList<izraelevitz> list(open_existing, pool);
  return contents_of(list);
}

std::map<Key, Value> all_keys() {
  std::map<Key, Value> m;
  for (Key k = 1; k <= keys; ++k) m.emplace(k, value_of(k));
  return m;
}

TEST(IzraelevitzSim, CorrectListIsDurableInTheMinimumImage) {
  EXPECT_EQ(recovered_image<Fault::none>(pm::sim::ImageKind::minimum), all_keys());
  EXPECT_EQ(recovered_image<Fault::none>(pm::sim::ImageKind::maximum), all_keys());
}

// A link is flushed only when a later traversal reads it (the transform flushes after loads):
// 16's link is never read again (inserting 1 stops at 2), nor is 1's; both are lost.
TEST(IzraelevitzSim, LinkNotFlushedLosesUnreadLinks) {
  auto expected = all_keys();
  expected.erase(1);
  expected.erase(keys);
  EXPECT_EQ(recovered_image<Fault::link_not_flushed>(pm::sim::ImageKind::minimum), expected);
  EXPECT_EQ(recovered_image<Fault::link_not_flushed>(pm::sim::ImageKind::maximum), all_keys());
}

// The link is flushed but the flush only completes at this thread's next fence: the next
// insert's first load fences, so only the last insert (1) is lost.
TEST(IzraelevitzSim, LinkNotFencedLosesTheLastInsert) {
  auto expected = all_keys();
  expected.erase(1);
  EXPECT_EQ(recovered_image<Fault::link_not_fenced>(pm::sim::ImageKind::minimum), expected);
}

TEST(IzraelevitzSim, ContentsNotFlushedCorruptTheLastInsert) {
  const auto recovered = recovered_image<Fault::contents_not_flushed>(pm::sim::ImageKind::minimum);
  EXPECT_NE(recovered, all_keys());
  EXPECT_NE(recovered.count(1) ? recovered.at(1) : 0, value_of(1));
}

}  // namespace
}  // namespace pmds::algo

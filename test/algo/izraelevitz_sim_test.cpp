// labels: memory
// The Izraelevitz policy under the Px86 crash model (simulated backend): at a quiescent point
// after single-threaded inserts, the MINIMUM crash image (only what is certainly durable) of a
// correct list recovers to every inserted key, while each planted bug (a) link not flushed,
// (b) link not fenced, (c) contents not flushed loses or corrupts the last insert in that
// image. A deterministic check that the policy persists what the transform says and that the
// crash lab's fixtures are real bugs under the model; the crash lab explores the rest. And the
// persists of the two unlinking CASes, under Izraelevitz's policy and FliT's, which the crash
// lab's mutation run does not catch at its budget (their window needs a retired node's slot
// reused before any thread reads the predecessor's link again): each, removed, corrupts the
// image deterministically.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "support/crash_image.hpp"

namespace pmds::algo {
namespace {

using namespace testing;
using pmds::test::write_minimum_image;
using pmds::test::write_pool_image;

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
    write_pool_image(pool_path.str(), image_path.str(), kind);
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

// The line of harris_michael_list.hpp that holds `text`: a persistence site is known by its line
// (pm/sim/sites.hpp), found here by its code so that edits above it do not move the test. The
// file is read where the compiler found it (the path its sites were counted under).
std::uint32_t list_line_of(std::string_view text) {
  for (const pm::sim::SiteCount& c : pm::sim::site_counts()) {
    if (!c.file.ends_with("/harris_michael_list.hpp")) continue;
    std::ifstream in(c.file);
    std::uint32_t n = 0;
    for (std::string line; std::getline(in, line);)
      if (++n, line.find(text) != std::string::npos) return n;
    ADD_FAILURE() << "no line of " << c.file << " holds " << text;
    return 0;
  }
  ADD_FAILURE() << "no site of harris_michael_list.hpp was executed";
  return 0;
}

// The two unlinking CASes: remove's own, and find()'s on a marked node it passes.
constexpr std::string_view remove_unlink = "if (pos.prev->compare_exchange(expected, next_word))";
constexpr std::string_view find_unlink = "if (!prev->compare_exchange(expected, successor))";

// While it lives, the persistence site at the line holding `text` is skipped too (none: empty),
// besides the mutants in force (PMDS_SIM_MUTANTS's, which `pmds crashtest --mutate` sets).
struct SkippedSite {
  explicit SkippedSite(std::string_view text) : saved(pm::sim::mutants()) {
    std::vector<pm::sim::Mutant> mutants = saved;
    if (!text.empty())
      mutants.push_back({pm::sim::MutationMode::skip, "pmds/algo/harris_michael_list.hpp",
                         list_line_of(text), 0});
    pm::sim::set_mutants(std::move(mutants));
  }
  ~SkippedSite() { pm::sim::set_mutants(saved); }
  const std::vector<pm::sim::Mutant> saved;
};

// Frees the slots retired so far and inserts 10, which takes the last one freed and links it at
// the head without reading any link past the first node; then writes the minimum crash image.
template <class List>
void reuse_a_slot_and_crash(List& list, const TempPath& pool_path, const TempPath& image_path) {
  list.drain();
  EXPECT_TRUE(list.insert(10, value_of(10)));
  write_minimum_image(pool_path.str(), image_path.str());
}

template <class List>
std::map<Key, Value> recovered(const TempPath& image_path) {
  auto pool = pm::Pool::open(image_path.str(), "algo/list");
  List list(open_existing, pool);
  return contents_of(list);
}

// With no site skipped, the image recovers to the four left and 10; with one, recovery meets
// the cycle.
template <class List>
void expect_recovered(const TempPath& image_path, std::string_view skipped) {
  if (skipped.empty()) {
    EXPECT_EQ(recovered<List>(image_path), keys_of({10, 20, 30, 40, 50}));
  } else {
    EXPECT_THROW(recovered<List>(image_path), pmds::PoolCorrupt)
        << "50's link, not durable, still leads into the slot insert(10) took: a cycle";
  }
}

// 20, 30, 40, 50, 60 inserted and made durable. A line holds two slots, taken in insertion
// order: 50 shares its line with 40, which insert(10) does not read (it stops at 20), and 60's
// slot is a line further, so nothing written to it later writes 50's link back.
template <class List>
void insert_five(List& list) {
  for (Key k : {50, 40, 20, 30, 60}) EXPECT_TRUE(list.insert(k, value_of(k)));
  pm::sim::mark_all_durable();
}

// The five, then remove(60) with the site at `skipped` skipped, then a slot reused.
template <class List>
void remove_sixty(const TempPath& pool_path, const TempPath& image_path, std::string_view skipped) {
  auto pool = pm::Pool::create(pool_path.str(), 8u << 20, "algo/list");
  List list(create_new, pool);
  insert_five(list);
  {
    SkippedSite skip(skipped);
    EXPECT_TRUE(list.remove(60));
  }
  reuse_a_slot_and_crash(list, pool_path, image_path);
}

// The unlinking CASes' persists are the same sites under both policies that persist them.
template <class List>
class UnlinkSim : public ::testing::Test {};
using PersistingPolicies =
    ::testing::Types<HarrisMichaelList<izraelevitz>, HarrisMichaelList<flit>>;
TYPED_TEST_SUITE(UnlinkSim, PersistingPolicies);

// remove's unlinking CAS: the mark is durable, and the node unlinked and retired at once.
TYPED_TEST(UnlinkSim, RemovesUnlinkNotPersistedCorruptsTheImageOnceTheSlotIsReused) {
  for (const std::string_view skipped : {std::string_view{}, remove_unlink}) {
    TempPath pool_path("sim-unlink"), image_path("sim-unlink-image");
    remove_sixty<TypeParam>(pool_path, image_path, skipped);
    expect_recovered<TypeParam>(image_path, skipped);
  }
}

// find()'s unlinking CAS. A marked node left linked: recovered from a crash after remove(60)'s
// mark was durable and before its unlink was (recovery keeps marked nodes). The next find() that
// passes it unlinks and retires it: remove(60) again, which answers false.
TYPED_TEST(UnlinkSim, FindsUnlinkNotPersistedCorruptsTheImageOnceTheSlotIsReused) {
  for (const std::string_view skipped : {std::string_view{}, find_unlink}) {
    TempPath pool_path("sim-unlink"), marked_path("sim-unlink-marked"),
        image_path("sim-unlink-image");
    {
      auto pool = pm::Pool::create(pool_path.str(), 8u << 20, "algo/list");
      TypeParam list(create_new, pool);
      insert_five(list);
      SkippedSite skip(remove_unlink);
      EXPECT_TRUE(list.remove(60));
      write_minimum_image(pool_path.str(), marked_path.str());
    }
    {
      auto pool = pm::Pool::open(marked_path.str(), "algo/list");
      TypeParam list(open_existing, pool);
      pm::sim::mark_all_durable();
      {
        SkippedSite skip(skipped);
        EXPECT_FALSE(list.remove(60)) << "60 is marked: removed already";
      }
      reuse_a_slot_and_crash(list, marked_path, image_path);
    }
    expect_recovered<TypeParam>(image_path, skipped);
  }
}

}  // namespace
}  // namespace pmds::algo

// labels: memory
// pmds tests — Mirror under the Px86 crash model (simulated backend), deterministically: a value
// is durable before any thread can load it (Mirror §5), including a value a helper finishes
// for a stalled writer (Fig. 4 lines 19-25), and a Mirror list recovers every completed insert
// from the minimum crash image. The crash lab explores the interleavings (every durable
// registry entry, and `pmds crashtest --mutate` removes each of patomic's flushes and fences).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <new>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/mirror/policy.hpp"
#include "support/crash_image.hpp"

namespace pmds::mirror {
namespace {

using algo::testing::TempPath;
using Mirror = MirrorPolicy<>;

// The {value, sequence} of the pool word at `pool_address` in the minimum crash image of now.
pm::WordPair durable_words(const pm::Pool& pool, const void* pool_address,
                           const std::string& pool_path, const std::string& image_path) {
  pmds::test::write_minimum_image(pool_path, image_path);
  std::ifstream f(image_path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(static_cast<const char*>(pool_address) -
                                      static_cast<const char*>(pool.base())));
  pm::WordPair w{};
  f.read(reinterpret_cast<char*>(&w), sizeof w);
  EXPECT_TRUE(f.good());
  return w;
}

TEST(MirrorSim, ACompletedCasIsDurableAndAHelperMakesAStalledWriteDurableBeforeItIsSeen) {
  TempPath pool_path("mirror-word"), image_path("mirror-word-image");
  auto pool = pm::Pool::create(pool_path.str(), 8u << 20, "test/mirror", Mirror::pool_options());
  {
    Mirror::Memory memory(pool, 0);
    auto* word = new (memory.allocate(sizeof(patomic<std::uint64_t>))) patomic<std::uint64_t>;
    word->init(1);
    memory.publish(word, sizeof *word);
    auto* persistent = static_cast<pm::atomic_pair*>(pool_of(word));

    std::uint64_t expected = 1;
    ASSERT_TRUE(word->compare_exchange(expected, 2));
    EXPECT_EQ(durable_words(pool, persistent, pool_path.str(), image_path.str()),
              (pm::WordPair{2, 1}));

    // A writer that won the persistent DWCAS and stalled before its flush (Fig. 4 line 40).
    pm::WordPair before{2, 1};
    ASSERT_TRUE(persistent->compare_exchange(before, {3, 2}));
    EXPECT_EQ(word->load(), 2u);  // not linearized yet: loads read the volatile replica
    EXPECT_EQ(durable_words(pool, persistent, pool_path.str(), image_path.str()),
              (pm::WordPair{2, 1}));  // and not durable either

    // Another thread's CAS on the old value helps first (flush, fence, copy), then fails.
    expected = 2;
    EXPECT_FALSE(word->compare_exchange(expected, 5));
    EXPECT_EQ(expected, 3u);
    EXPECT_EQ(word->load(), 3u);
    EXPECT_EQ(durable_words(pool, persistent, pool_path.str(), image_path.str()),
              (pm::WordPair{3, 2}));  // visible now, and durable
  }
  pool.close();
}

TEST(MirrorSim, AListRecoversEveryCompletedInsertFromTheMinimumImage) {
  using List = algo::HarrisMichaelList<Mirror>;
  TempPath pool_path("mirror-list"), image_path("mirror-list-image");
  std::map<Key, Value> inserted;
  {
    auto pool = pm::Pool::create(pool_path.str(), 8u << 20, "algo/list", Mirror::pool_options());
    List list(create_new, pool);
    for (Key k = 16; k >= 1; --k) {
      ASSERT_TRUE(list.insert(k, algo::testing::value_of(k)));
      inserted.emplace(k, algo::testing::value_of(k));
    }
    ASSERT_TRUE(list.remove(7));
    inserted.erase(7);
    pmds::test::write_minimum_image(pool_path.str(), image_path.str());
  }
  auto pool = pm::Pool::open(image_path.str(), "algo/list");
  EXPECT_FALSE(pool.was_clean_shutdown());
  List list(open_existing, pool);
  EXPECT_EQ(algo::testing::contents_of(list), inserted);
  EXPECT_EQ(list.recovery_stats().live_slots, inserted.size() + 1);  // and the anchor
}

}  // namespace
}  // namespace pmds::mirror

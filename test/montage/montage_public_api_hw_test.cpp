// labels: memory
// The nbMontage structures through the public entry point (pmds/pmds.hpp): open_or_create makes
// a new pool, a clean close keeps every completed operation, and the next open_or_create
// recovers it; a pool made for one montage structure is refused by another.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "pmds/pmds.hpp"
#include "support/temp_path.hpp"

namespace {

using namespace pmds;

constexpr std::uint64_t kPoolSize = 64u << 20;

TEST(MontagePublicApi, OpenOrCreateRecoversWhatACleanCloseKept) {
  pmds::test::TempPath path("montage-api");
  {
    auto map = open_or_create<MontageSkipList>(path.str(), kPoolSize);
    EXPECT_FALSE(map.recovered());
    for (Key k = 1; k <= 100; ++k) ASSERT_TRUE(map->insert(k, k * 10));
    ASSERT_TRUE(map->remove(50));
    map->sync();
  }
  auto map = open_or_create<MontageSkipList>(path.str(), kPoolSize);
  EXPECT_TRUE(map.recovered());
  std::vector<Key> keys;
  map->scan(45, 10, [&](Key k, Value v) {
    EXPECT_EQ(v, k * 10);
    keys.push_back(k);
  });
  EXPECT_EQ(keys, (std::vector<Key>{45, 46, 47, 48, 49, 51, 52, 53, 54, 55}));
  EXPECT_FALSE(map->contains(50));
}

TEST(MontagePublicApi, APoolOfAnotherStructureIsRefused) {
  pmds::test::TempPath path("montage-api");
  {
    auto queue = open_or_create<MontageQueue>(path.str(), kPoolSize);
    queue->enqueue(7);
  }
  try {
    auto map = open_or_create<MontageHashMap>(path.str(), kPoolSize);
    FAIL() << "a queue's pool opened as a hash map";
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::layout_mismatch);
  }
  auto queue = open_or_create<MontageQueue>(path.str(), kPoolSize);
  EXPECT_EQ(queue->dequeue(), Value{7});
}

}  // namespace

// labels: concurrent memory
// The split-ordered hash table (montage/split_ordered_hash.hpp) in both its forms: the transient
// twin (hash-so/transient) against a model while it grows, its buckets initialized on demand in
// the split order, concurrent threads on contended keys; and on nbMontage (hash-so/montage), a
// grown table recovered with the bucket count its keys need and working on. The map semantics
// common to every montage/ map are in montage_map_hw_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "montage/montage_test_support.hpp"
#include "pmds/montage/split_ordered_hash.hpp"

namespace {

using namespace pmds;
using montage_test::check_against_model;
using montage_test::contents;
using montage_test::expect_changes_match_presence;
using montage_test::manual_clock;

TEST(TransientSplitOrderedHash, GrowsAndMatchesAModel) {
  montage::TransientSplitOrderedHashMap m;
  EXPECT_EQ(m.bucket_count(), 1u);
  std::map<Key, Value> model;
  std::mt19937_64 rng(1);
  ASSERT_NO_FATAL_FAILURE(check_against_model(m, model, 60000, 20000, rng, true));
  EXPECT_EQ(contents(m), model);
  // load_factor keys per bucket at most, up to one doubling behind.
  EXPECT_GE(m.bucket_count() * montage::TransientSplitOrderedHashMap::load_factor * 2,
            model.size());
  EXPECT_GE(m.bucket_count(), 1024u);
  EXPECT_THROW(m.insert(0, 1), ReservedKey);
  EXPECT_THROW(m.get(~Key{0}), ReservedKey);
}

// Every key inserted, then every key removed, in ascending order: the table grows to many
// buckets, each initialized from its parent, and empties again with its dummies in place.
TEST(TransientSplitOrderedHash, FillsAndEmpties) {
  montage::TransientSplitOrderedHashMap m;
  constexpr Key kKeys = 50000;
  for (Key k = 1; k <= kKeys; ++k) ASSERT_TRUE(m.insert(k, k * 3));
  for (Key k = 1; k <= kKeys; ++k) ASSERT_EQ(m.get(k), k * 3);
  EXPECT_FALSE(m.contains(kKeys + 1));
  for (Key k = 1; k <= kKeys; k += 2) ASSERT_TRUE(m.remove(k));
  for (Key k = 1; k <= kKeys; ++k) ASSERT_EQ(m.contains(k), k % 2 == 0) << k;
  for (Key k = 2; k <= kKeys; k += 2) ASSERT_TRUE(m.remove(k));
  EXPECT_TRUE(contents(m).empty());
}

// Three threads inserting and removing the same keys while the table grows under them: the
// successful inserts and removes of a key differ by exactly its final presence.
TEST(TransientSplitOrderedHash, ConcurrentUpdatesOfContendedKeysLinearize) {
  montage::TransientSplitOrderedHashMap m;
  constexpr Key kKeys = 64;
  expect_changes_match_presence(m, kKeys, 40000, [&](int t, std::mt19937_64& rng, Key k, Value i) {
    // A spread of private keys makes the table grow while the shared ones are contended.
    if (i % 4 == 0) {
      m.insert(1000 + static_cast<Key>(t) * 100000 + i, i);
      return 0;
    }
    if (rng() % 2 == 0) return m.insert(k, i) ? 1 : 0;
    return m.remove(k) ? -1 : 0;
  });
  std::size_t shared_present = 0;
  for (Key k = 1; k <= kKeys; ++k) shared_present += m.contains(k) ? 1 : 0;
  // 10,000 private keys per thread, and the shared keys present.
  EXPECT_EQ(contents(m).size(), 30000 + shared_present);
}

class MontageSplitOrderedHash : public montage_test::InPool<montage::SplitOrderedHashMap<>> {};

// A table grown to many buckets, closed and recovered: recovery sizes the bucket array for the
// keys it finds and initializes every bucket; the map works on, and survives another close.
TEST_F(MontageSplitOrderedHash, RecoversAGrownTableAndWorksOn) {
  auto& m = create(64u << 20, manual_clock());
  std::map<Key, Value> model;
  std::mt19937_64 rng(2);
  ASSERT_NO_FATAL_FAILURE(check_against_model(m, model, 40000, 30000, rng, true));
  const std::size_t grown = m.bucket_count();
  EXPECT_GE(grown, 1024u);
  auto& r = reopen();
  EXPECT_EQ(contents(r), model);
  // The growth rule's own test (integer keys per bucket at most load_factor), applied once.
  EXPECT_LE(model.size() / r.bucket_count(), montage::SplitOrderedHashMap<>::load_factor);
  EXPECT_GT(model.size() / (r.bucket_count() / 2), montage::SplitOrderedHashMap<>::load_factor);
  EXPECT_LE(r.bucket_count(), grown);
  EXPECT_EQ(r.recovery_stats().live_slots, model.size() + 1);
  ASSERT_NO_FATAL_FAILURE(check_against_model(r, model, 20000, 30000, rng, true));
  EXPECT_EQ(contents(r), model);
  EXPECT_EQ(contents(reopen()), model);
}

}  // namespace

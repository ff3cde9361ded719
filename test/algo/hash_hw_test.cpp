// labels: concurrent
// Michael's hash table under every policy: sequential and concurrent behaviour against a model
// (with 1, 7 and 1024 buckets: long chains and short ones), reserved keys, and (Izraelevitz)
// recovery in a new process after a dirty exit and after a clean close.
#include <gtest/gtest.h>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/michael_hash.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(Map<MichaelHashTable<transient>>);
static_assert(Map<MichaelHashTable<izraelevitz>>);

template <class P>
class HashTest : public ::testing::Test {};
TYPED_TEST_SUITE(HashTest, AllPolicies);

TYPED_TEST(HashTest, Sequential) {
  for (std::size_t buckets : {1, 7, 1024}) {
    Instance<MichaelHashTable<TypeParam>> table(buckets);
    EXPECT_EQ(table->bucket_count(), buckets);
    set_sequential(*table);
  }
}

TYPED_TEST(HashTest, ReservedKeysThrow) {
  Instance<MichaelHashTable<TypeParam>> table;
  set_reserved_keys_throw(*table);
}

TYPED_TEST(HashTest, ConcurrentStress) {
  for (std::size_t buckets : {1, 7, 1024}) {
    for (int threads : {2, 4}) {
      Instance<MichaelHashTable<TypeParam>> table(buckets);
      SetStressConfig c;
      c.threads = threads;
      c.seed = buckets + static_cast<std::uint64_t>(threads);
      if (TypeParam::durable) c.ops_per_thread /= 10;  // a flush + fence per shared access
      set_stress(*table, c);
    }
  }
}

TEST(HashTest, BadBucketCountIsAnError) {
  EXPECT_THROW(MichaelHashTable<transient>(0), Error);
}

TEST(HashTest, ManySegments) {
  // More buckets than one segment holds, so bucket indexing crosses segments.
  Instance<MichaelHashTable<izraelevitz>> table(3 * MichaelHashTable<izraelevitz>::segment_buckets +
                                                5);
  set_sequential(*table);
}

using DurableHash = MichaelHashTable<izraelevitz>;
auto make_hash = [](pm::Pool& pool) {
  return std::make_unique<DurableHash>(create_new, pool, 5000);
};
// Live after recovery: anchor, directory, segments, and one node per key.
auto hash_live = [](const DurableHash& h, std::size_t keys) {
  return 2 + (h.bucket_count() + DurableHash::segment_buckets - 1) / DurableHash::segment_buckets +
         keys;
};

TEST(HashRecovery, NewProcessAfterDirtyExit) {
  set_recovery_in_new_process<DurableHash>(make_hash, hash_live, false);
}
TEST(HashRecovery, NewProcessAfterCleanClose) {
  set_recovery_in_new_process<DurableHash>(make_hash, hash_live, true);
}

TEST(HashRecovery, NewProcessAfterKillMidOperation) {
  set_recovery_after_kill<DurableHash>(make_hash, 200);
}

}  // namespace
}  // namespace pmds::algo

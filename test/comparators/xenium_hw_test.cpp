// labels: concurrent memory
// The xenium comparator entries (comparators/xenium.hpp): each adapter keeps pmds's contract
// (a map against std::map, reserved keys refused, a queue FIFO against a model) and stays
// right with threads, so a ratio against it measures the algorithm, not a broken adapter.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "algo/algo_test_support.hpp"
#include "pmds/comparators/xenium.hpp"
#include "support/set_model.hpp"

namespace pmds::comparators {
namespace {

static_assert(Map<XeniumList> && Map<XeniumHash> && Queue<XeniumQueue>);

template <class M>
class XeniumMapTest : public ::testing::Test {};
using Maps = ::testing::Types<XeniumList, XeniumHash>;
TYPED_TEST_SUITE(XeniumMapTest, Maps);

TYPED_TEST(XeniumMapTest, SequentialAgainstStdMap) {
  TypeParam m;
  std::map<Key, Value> model;
  // 3000 keys 4096 apart: 256 of hash/xenium's 2^20 buckets, chains of about 12.
  ASSERT_NO_FATAL_FAILURE(pmds::test::expect_set_matches_map(
      m, model, 20000, 3000, 7, [](std::uint64_t d) { return Key{1 + d * 4096}; }));
  // insert never updates: the first value stays.
  ASSERT_TRUE(m.insert(5000, 1));
  EXPECT_FALSE(m.insert(5000, 2));
  EXPECT_EQ(m.get(5000), std::optional<Value>(1));
}

TYPED_TEST(XeniumMapTest, RefusesTheReservedKeys) {
  TypeParam m;
  for (Key k : {min_reserved_key, max_reserved_key}) {
    EXPECT_THROW(m.insert(k, 1), ReservedKey);
    EXPECT_THROW(m.remove(k), ReservedKey);
    EXPECT_THROW(m.contains(k), ReservedKey);
    EXPECT_THROW(m.get(k), ReservedKey);
  }
}

// Threads insert and remove their own keys and, in between, read every key: at the end each
// thread's last round is there exactly.
TYPED_TEST(XeniumMapTest, ConcurrentOwnKeysEndAsLastWritten) {
  TypeParam m;
  constexpr int threads = 4;
  constexpr Key keys_per_thread = 200;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      const Key first = 1 + static_cast<Key>(t) * keys_per_thread;
      for (int round = 0; round < 20; ++round) {
        for (Key k = first; k < first + keys_per_thread; ++k) {
          if (round % 2 == 0)
            ASSERT_TRUE(m.insert(k, k * 10 + static_cast<Key>(round)));
          else
            ASSERT_TRUE(m.remove(k));
          (void)m.get(1 + (k * 7919) % (threads * keys_per_thread));  // others' keys too
        }
      }
      // Last round (19) removed every key; insert them once more.
      for (Key k = first; k < first + keys_per_thread; ++k) ASSERT_TRUE(m.insert(k, k));
    });
  for (auto& w : workers) w.join();
  for (Key k = 1; k <= threads * keys_per_thread; ++k) ASSERT_EQ(m.get(k), std::optional<Value>(k));
  EXPECT_FALSE(m.contains(threads * keys_per_thread + 1));
}

TEST(XeniumQueue, SequentialFifoAgainstAModel) {
  XeniumQueue q;
  EXPECT_EQ(q.dequeue(), std::nullopt);
  std::deque<Value> model;
  algo::testing::sequential_against_model([&](Value v) { q.enqueue(v); },
                                          [&] { return q.dequeue(); }, model, true, 3);
  if (HasFatalFailure()) return;
  // Every value is a value in a queue: 0 and 2^64-1 too.
  q.enqueue(0);
  q.enqueue(~Value{0});
  for (; !model.empty(); model.pop_front()) ASSERT_EQ(q.dequeue(), model.front());
  EXPECT_EQ(q.dequeue(), std::optional<Value>(0));
  EXPECT_EQ(q.dequeue(), std::optional<Value>(~Value{0}));
  EXPECT_EQ(q.dequeue(), std::nullopt);
}

TEST(XeniumQueue, ConcurrentFifoEveryValueOnce) {
  for (int threads : {2, 4}) {
    XeniumQueue q;
    algo::testing::pool_stress([&](Value v) { q.enqueue(v); }, [&] { return q.dequeue(); }, threads,
                               20000 / algo::testing::work_scale, true);
  }
}

}  // namespace
}  // namespace pmds::comparators

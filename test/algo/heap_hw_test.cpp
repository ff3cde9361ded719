// labels: concurrent
// The lock-protected binary min-heap (transient baseline): against std::priority_queue
// sequentially, reserved keys, and concurrent inserts/delete-mins conserving every key.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/locked_heap.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(PriorityQueue<LockedBinaryHeap<transient>>);

TEST(LockedHeap, SequentialAgainstPriorityQueue) {
  LockedBinaryHeap<transient> heap;
  std::priority_queue<Key, std::vector<Key>, std::greater<>> model;
  std::mt19937_64 rng(9);
  EXPECT_EQ(heap.get_min(), std::nullopt);
  EXPECT_EQ(heap.delete_min(), std::nullopt);
  for (int i = 0; i < 20000; ++i) {
    if (rng() % 5 < 3) {
      const Key k = 1 + rng() % 500;  // repeats on purpose
      heap.insert(k);
      model.push(k);
    } else {
      std::optional<Key> expected;
      if (!model.empty()) {
        expected = model.top();
        model.pop();
      }
      ASSERT_EQ(heap.delete_min(), expected);
    }
    ASSERT_EQ(heap.get_min(), model.empty() ? std::nullopt : std::optional<Key>(model.top()));
  }
  EXPECT_EQ(heap.size(), model.size());
}

TEST(LockedHeap, ReservedKeysThrow) {
  LockedBinaryHeap<transient> heap;
  EXPECT_THROW(heap.insert(min_reserved_key), ReservedKey);
  EXPECT_THROW(heap.insert(max_reserved_key), ReservedKey);
  EXPECT_EQ(heap.size(), 0u);
}

TEST(LockedHeap, ConcurrentKeysConserved) {
  constexpr int threads = 4, per_thread = 20000 / work_scale;
  LockedBinaryHeap<transient> heap;
  std::vector<std::vector<Key>> taken(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        heap.insert(tagged_value(t, static_cast<std::uint64_t>(i)));
        if (i % 2 == 1) {
          auto k = heap.delete_min();
          ASSERT_TRUE(k.has_value());  // this thread inserted more than it took
          taken[t].push_back(*k);
        }
      }
    });
  for (auto& w : workers) w.join();
  std::vector<Key> all;
  Key last = 0;
  while (auto k = heap.delete_min()) {
    EXPECT_GE(*k, last);  // quiescent: ascending
    last = *k;
    all.push_back(*k);
  }
  for (const auto& t : taken) all.insert(all.end(), t.begin(), t.end());
  std::sort(all.begin(), all.end());
  std::vector<Key> expected;
  for (int t = 0; t < threads; ++t)
    for (int i = 0; i < per_thread; ++i)
      expected.push_back(tagged_value(t, static_cast<std::uint64_t>(i)));
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);
}

}  // namespace
}  // namespace pmds::algo

// labels: concurrent
// The mindicator of nbMontage's epoch advance (montage/mindicator.hpp): the root is the minimum of
// the joined leaves, unused leaves do not count, a subtree at or above e is not visited, the
// caller's own leaf comes first, and under concurrent announces and raises the root never shows
// more than a leaf whose writer has returned (the property advance() relies on).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "pmds/montage/mindicator.hpp"

namespace {

using pmds::montage::Mindicator;

std::vector<std::pair<std::size_t, std::uint64_t>> below(Mindicator& m, std::uint64_t e,
                                                         std::size_t start) {
  std::vector<std::pair<std::size_t, std::uint64_t>> seen;
  m.for_each_below(e, start,
                   [&](std::size_t t, std::uint64_t epoch) { seen.emplace_back(t, epoch); });
  return seen;
}

TEST(Mindicator, RootIsTheMinimumOfJoinedLeaves) {
  auto m = std::make_unique<Mindicator>();
  EXPECT_EQ(m->minimum(), Mindicator::none);
  EXPECT_TRUE(below(*m, 1000, 0).empty());  // no thread has joined: nothing lags
  m->announce(5, 7);
  EXPECT_EQ(m->minimum(), 7u);
  m->announce(100, 4);  // a join lowers the minimum
  EXPECT_EQ(m->minimum(), 4u);
  EXPECT_EQ(m->leaf(100), 4u);
  m->announce(100, 9);
  EXPECT_EQ(m->minimum(), 7u);
  m->announce(5, 3);  // an owner never lowers its joined entry
  EXPECT_EQ(m->leaf(5), 7u);
  EXPECT_EQ(m->minimum(), 7u);
  m->raise(5, 7, 12);
  EXPECT_EQ(m->minimum(), 9u);
  m->raise(100, 8, 20);  // a stale raise (the leaf is 9, not 8) changes nothing
  EXPECT_EQ(m->leaf(100), 9u);
  EXPECT_EQ(m->minimum(), 9u);
}

TEST(Mindicator, VisitsExactlyTheLaggingLeavesOwnLeafFirst) {
  auto m = std::make_unique<Mindicator>();
  for (std::size_t t : {0, 1, 2, 3, 64, 127}) m->announce(t, 10 + t % 3);  // 10, 11, 12, 10, 11, 11
  auto lagging = below(*m, 12, 64);
  ASSERT_EQ(lagging.size(), 5u);
  EXPECT_EQ(lagging.front(), (std::pair<std::size_t, std::uint64_t>{64, 11}));
  std::vector<std::size_t> threads;
  for (auto& [t, epoch] : lagging) {
    threads.push_back(t);
    EXPECT_LT(epoch, 12u);
  }
  std::sort(threads.begin(), threads.end());
  EXPECT_EQ(threads, (std::vector<std::size_t>{0, 1, 3, 64, 127}));
  EXPECT_TRUE(below(*m, 10, 0).empty());  // the root is 10: nothing below 10
  // A raised leaf no longer lags.
  for (auto& [t, epoch] : lagging) m->raise(t, epoch, 12);
  EXPECT_EQ(m->minimum(), 12u);
  EXPECT_TRUE(below(*m, 12, 0).empty());
}

// Each thread announces a rising sequence of epochs while an advancer raises whatever lags; as
// soon as an announce returns, the root must be at most that thread's leaf. Once all have stopped,
// the root is exactly the minimum leaf. The race is narrow on two cores, so the scenario runs ten
// times: with a refresh done once instead of twice per level, 2 of 5 such tests failed.
void announce_and_raise_concurrently(std::size_t writers, std::uint64_t rounds) {
  auto m = std::make_unique<Mindicator>();
  const auto leaf_of = [](std::size_t w) { return w * 37 % Mindicator::leaves; };  // spread out
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> violations{0};
  std::vector<std::thread> threads;
  for (std::size_t w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      for (std::uint64_t e = 1; e <= rounds; ++e) {
        m->announce(leaf_of(w), e);
        // The root first: the leaf only grows afterwards (an advancer may raise it meanwhile).
        const std::uint64_t root = m->minimum();
        if (root > m->leaf(leaf_of(w))) violations.fetch_add(1);
      }
    });
  }
  std::thread advancer([&] {
    for (std::uint64_t e = 1; !stop.load(); e += 3)
      m->for_each_below(e, 0, [&](std::size_t t, std::uint64_t seen) { m->raise(t, seen, e); });
  });
  for (auto& t : threads) t.join();
  stop.store(true);
  advancer.join();
  EXPECT_EQ(violations.load(), 0u);
  std::uint64_t smallest = Mindicator::none;
  for (std::size_t w = 0; w < writers; ++w) smallest = std::min(smallest, m->leaf(leaf_of(w)));
  EXPECT_EQ(m->minimum(), smallest);
}

TEST(Mindicator, ConcurrentAnnouncesAreInTheRootWhenTheyReturn) {
  for (int run = 0; run < 10; ++run) announce_and_raise_concurrently(8, 100000);
}

}  // namespace

// labels: concurrent memory
// nbMontage's Michael–Scott queue (montage/queue.hpp) on the hardware backend: FIFO
// order, a clean close that keeps every element in order, a killed process whose recovery keeps
// every enqueue before its last sync and a prefix of the rest, concurrent producers and
// consumers (each value once, each producer's values in order), a full pool, a pool of the
// layout before 0.3.0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <thread>
#include <vector>

#include "montage/montage_test_support.hpp"
#include "pmds/montage/queue.hpp"
#include "support/child_process.hpp"

namespace {

using namespace pmds;
using MontageQueueType = montage::Queue<>;

constexpr std::size_t kPoolSize = montage_test::default_pool_size;
constexpr const char* kLayout = MontageQueueType::name;

using montage_test::manual_clock;

std::vector<Value> drain(MontageQueueType& q) {
  std::vector<Value> out;
  while (auto v = q.dequeue()) out.push_back(*v);
  return out;
}

class MontageQueue : public montage_test::InPool<MontageQueueType> {};

TEST_F(MontageQueue, FirstInFirstOut) {
  MontageQueueType& q = make();
  EXPECT_EQ(q.dequeue(), std::nullopt);
  for (Value v = 1; v <= 5; ++v) q.enqueue(v);
  EXPECT_EQ(q.dequeue(), 1u);
  q.enqueue(6);
  EXPECT_EQ(drain(q), (std::vector<Value>{2, 3, 4, 5, 6}));
  EXPECT_EQ(q.dequeue(), std::nullopt);
}

TEST_F(MontageQueue, ACleanCloseKeepsEveryElementInOrder) {
  MontageQueueType& q = make();
  std::vector<Value> model;
  std::size_t front = 0;
  for (Value v = 1; v <= 3000; ++v) {
    q.enqueue(v);
    model.push_back(v);
    if (v % 3 == 0) {
      EXPECT_EQ(q.dequeue(), model[front]);
      ++front;
    }
    if (v % 101 == 0) q.background_step();
  }
  MontageQueueType& r = reopen();
  EXPECT_EQ(r.recovery_stats().live_slots, model.size() - front + 1);  // + the system area
  r.enqueue(9999);
  model.push_back(9999);
  EXPECT_EQ(drain(reopen()), std::vector<Value>(model.begin() + front, model.end()));
}

TEST_F(MontageQueue, AKilledProcessKeepsEverythingBeforeItsSyncAndAPrefixAfter) {
  pool_.emplace(pm::Pool::create(path_, kPoolSize, kLayout));
  pool_.reset();
  pmds::test::in_killed_child([&] {
    pm::Pool pool = pm::Pool::open(path_, kLayout);
    MontageQueueType q(create_new, pool, manual_clock());
    for (Value v = 1; v <= 100; ++v) q.enqueue(v);
    q.sync();
    for (Value v = 101; v <= 200; ++v) {
      q.enqueue(v);
      if (v % 10 == 0) q.background_step();
    }
    ::_exit(0);  // no destructor, no final sync
  });
  pool_.emplace(pm::Pool::open(path_, kLayout));
  s_ = std::make_unique<MontageQueueType>(open_existing, *pool_, manual_clock());
  const std::vector<Value> got = drain(*s_);
  ASSERT_GE(got.size(), 100u) << "an enqueue before the sync is missing";
  EXPECT_LT(got.size(), 200u) << "the last epochs' enqueues should not be durable yet";
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i + 1) << "not a prefix";
}

TEST_F(MontageQueue, ConcurrentProducersAndConsumers) {
  montage::Options o;
  o.epoch_length = std::chrono::microseconds(200);
  MontageQueueType& q = make(o);
  constexpr int kProducers = 2, kConsumers = 2, kPerProducer = 20000;
  std::vector<std::vector<Value>> taken(kConsumers);
  std::atomic<int> producers_done{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p)
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        q.enqueue(static_cast<Value>(p) << 32 | static_cast<Value>(i));
        if (i % 5000 == 0) q.sync();
      }
      producers_done.fetch_add(1);
    });
  for (int c = 0; c < kConsumers; ++c)
    threads.emplace_back([&, c] {
      for (;;) {
        if (auto v = q.dequeue()) {
          taken[c].push_back(*v);
        } else if (producers_done.load() == kProducers) {
          if (auto w = q.dequeue())
            taken[c].push_back(*w);
          else
            break;
        }
      }
    });
  for (auto& t : threads) t.join();
  std::vector<int> next(kProducers, 0);
  std::size_t total = 0;
  for (const auto& seen : taken) {
    std::vector<int> last(kProducers, -1);
    for (Value v : seen) {
      const int p = static_cast<int>(v >> 32), i = static_cast<int>(v & 0xffffffff);
      EXPECT_GT(i, last[p]) << "a consumer saw producer " << p << "'s values out of order";
      last[p] = i;
    }
    total += seen.size();
  }
  EXPECT_EQ(total, static_cast<std::size_t>(kProducers * kPerProducer));
  EXPECT_EQ(q.dequeue(), std::nullopt);
  EXPECT_EQ(drain(reopen(o)), std::vector<Value>{});
}

TEST_F(MontageQueue, AFullPoolThrowsAndLosesNothing) {
  MontageQueueType& q = make(manual_clock(), pm::Pool::min_size() + 4 * (1u << 20));
  Value v = 1;
  try {
    for (;; ++v) q.enqueue(v);
  } catch (const PoolFull&) {
  }
  ASSERT_GT(v, 1000u);
  // A dequeue needs a block for its anti-node (nbMontage §3.3): on a full pool it fails the same
  // way, and the queue is unchanged (every enqueued payload is still there after a reopen).
  EXPECT_THROW(q.dequeue(), PoolFull);
  EXPECT_EQ(reopen().recovery_stats().live_slots, (v - 1) + 1);  // + the system area
}

// A pool of the layout before 0.3.0 (tag "QUEUMONT", value-first payloads) is refused with a
// typed error that says so, and left as it was.
TEST_F(MontageQueue, APoolOfTheOldLayoutIsATypedErrorNotAMisreadQueue) {
  MontageQueueType& q = make();
  for (Value v = 1; v <= 10; ++v) q.enqueue(v);
  s_.reset();
  pool_->root(pm::StructureRoot::tag_root).store(MontageQueueType::tag_before_0_3);
  pool_.reset();
  pool_.emplace(pm::Pool::open(path_, kLayout));
  try {
    MontageQueueType reopened(open_existing, *pool_, manual_clock());
    FAIL() << "opened a pool of the old layout";
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::layout_mismatch);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("before pmds 0.3.0"));
  }
  EXPECT_EQ(pool_->root(pm::StructureRoot::tag_root).load(), MontageQueueType::tag_before_0_3);
}

}  // namespace

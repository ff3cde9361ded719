// labels: concurrent
// The Michael–Scott queue under every policy: sequential FIFO against std::deque, concurrent
// producers/consumers (every value dequeued exactly once, per-producer FIFO), and
// (Izraelevitz) recovery in a new process after a dirty exit and after a clean close.
#include <gtest/gtest.h>

#include <deque>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/ms_queue.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(Queue<MichaelScottQueue<transient>>);
static_assert(Queue<MichaelScottQueue<izraelevitz>>);

template <class P>
class QueueTest : public ::testing::Test {};
TYPED_TEST_SUITE(QueueTest, AllPolicies);

TYPED_TEST(QueueTest, SequentialFifo) {
  Instance<MichaelScottQueue<TypeParam>> q;
  EXPECT_EQ(q->dequeue(), std::nullopt);
  std::deque<Value> model;
  sequential_against_model([&](Value v) { q->enqueue(v); }, [&] { return q->dequeue(); }, model,
                           true, 3);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<Value> contents;
  q->for_each([&](Value v) { contents.push_back(v); });
  EXPECT_EQ(contents, std::vector<Value>(model.begin(), model.end()));
  // Every value is a value: 0 and 2^64-1 too.
  q->enqueue(0);
  q->enqueue(~Value{0});
  while (model.size() > 0) {
    ASSERT_EQ(q->dequeue(), model.front());
    model.pop_front();
  }
  EXPECT_EQ(q->dequeue(), std::optional<Value>(0));
  EXPECT_EQ(q->dequeue(), std::optional<Value>(~Value{0}));
  EXPECT_EQ(q->dequeue(), std::nullopt);
}

TYPED_TEST(QueueTest, ConcurrentEveryValueOnceInProducerOrder) {
  for (int threads : {2, 4}) {
    Instance<MichaelScottQueue<TypeParam>> q;
    const int per_thread = (TypeParam::durable ? 5000 : 50000) / work_scale;
    pool_stress([&](Value v) { q->enqueue(v); }, [&] { return q->dequeue(); }, threads, per_thread,
                true);
    EXPECT_EQ(q->size(), 0u);
  }
}

// The child enqueues 1..n, dequeues d of them, then two threads enqueue their own values.
// Recovered: d+1..n, then both producers' values, each producer's in order, all of them.
void recover_in_new_process(bool clean_close) {
  using Q = MichaelScottQueue<izraelevitz>;
  TempPath path("queue-recovery");
  constexpr int n = 3000, d = 1000, per_producer = 2000;
  fill_in_child<Q>(
      path.str(), [](pm::Pool& pool) { return std::make_unique<Q>(create_new, pool); },
      [&](Q& q) {
        for (int i = 1; i <= n; ++i) q.enqueue(static_cast<Value>(i));
        for (int i = 1; i <= d; ++i) q.dequeue();
        std::vector<std::thread> producers;
        for (int t = 0; t < 2; ++t)
          producers.emplace_back([&, t] {
            for (int i = 0; i < per_producer; ++i) q.enqueue(tagged_value(t, i));
          });
        for (auto& p : producers) p.join();
      },
      clean_close);
  if (::testing::Test::HasFatalFailure()) return;

  auto pool = pm::Pool::open(path.str(), Instance<Q>::layout());
  EXPECT_EQ(pool.was_clean_shutdown(), clean_close);
  Q q(open_existing, pool);
  std::vector<Value> contents;
  q.for_each([&](Value v) { contents.push_back(v); });
  ASSERT_EQ(contents.size(), static_cast<std::size_t>(n - d + 2 * per_producer));
  for (int i = 0; i < n - d; ++i) ASSERT_EQ(contents[i], static_cast<Value>(d + 1 + i));
  std::vector<std::uint64_t> next(2, 0);
  for (std::size_t i = n - d; i < contents.size(); ++i) {
    const std::uint64_t producer = (contents[i] >> 40) - 1;
    ASSERT_LT(producer, 2u);
    ASSERT_EQ(contents[i], tagged_value(static_cast<int>(producer), next[producer]++));
  }
  // Live: the anchor, the dummy and one node per value.
  expect_slot_accounting(pool, q.memory().recovery_stats(), 2 + contents.size());
  // The recovered queue keeps working, in order.
  for (Value v : contents) ASSERT_EQ(q.dequeue(), std::optional<Value>(v));
  EXPECT_EQ(q.dequeue(), std::nullopt);
  pool_stress([&](Value v) { q.enqueue(v); }, [&] { return q.dequeue(); }, 2, 2000, true);
}

TEST(QueueRecovery, NewProcessAfterDirtyExit) {
  recover_in_new_process(false);
}
TEST(QueueRecovery, NewProcessAfterCleanClose) {
  recover_in_new_process(true);
}

TEST(QueueRecovery, PlantedRecoveryBugDropsTheFront) {
  TempPath path("queue-planted");
  {
    auto pool = pm::Pool::create(path.str(), pool_size, "algo/queue");
    MichaelScottQueue<izraelevitz> q(create_new, pool);
    for (Value v = 1; v <= 3; ++v) q.enqueue(v);
  }
  auto pool = pm::Pool::open(path.str(), "algo/queue");
  MichaelScottQueue<IzraelevitzPolicy<Planted<Fault::recovery_drops_node>>> q(open_existing, pool);
  EXPECT_EQ(q.dequeue(), std::optional<Value>(2));
}

}  // namespace
}  // namespace pmds::algo

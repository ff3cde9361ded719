// labels: concurrent
// The Treiber stack under every policy: sequential LIFO against a model, concurrent
// pushers/poppers (every value popped exactly once), and (Izraelevitz) recovery in a new
// process after a dirty exit and after a clean close.
#include <gtest/gtest.h>

#include <deque>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/treiber_stack.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(Stack<TreiberStack<transient>>);
static_assert(Stack<TreiberStack<izraelevitz>>);

template <class P>
class StackTest : public ::testing::Test {};
TYPED_TEST_SUITE(StackTest, AllPolicies);

TYPED_TEST(StackTest, SequentialLifo) {
  Instance<TreiberStack<TypeParam>> s;
  EXPECT_EQ(s->pop(), std::nullopt);
  std::deque<Value> model;
  sequential_against_model([&](Value v) { s->push(v); }, [&] { return s->pop(); }, model, false, 5);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<Value> contents;
  s->for_each([&](Value v) { contents.push_back(v); });
  EXPECT_EQ(contents, std::vector<Value>(model.rbegin(), model.rend()));
  s->push(0);
  s->push(~Value{0});
  EXPECT_EQ(s->pop(), std::optional<Value>(~Value{0}));
  EXPECT_EQ(s->pop(), std::optional<Value>(0));
}

TYPED_TEST(StackTest, ConcurrentEveryValueOnce) {
  for (int threads : {2, 4}) {
    Instance<TreiberStack<TypeParam>> s;
    const int per_thread = (TypeParam::durable ? 5000 : 50000) / work_scale;
    pool_stress([&](Value v) { s->push(v); }, [&] { return s->pop(); }, threads, per_thread, false);
    EXPECT_EQ(s->size(), 0u);
  }
}

// The child pushes 1..n, pops d of them, then two threads push their own values. Recovered,
// top to bottom: both producers' values, each producer's newest first, all of them; then
// n-d..1.
void recover_in_new_process(bool clean_close) {
  using S = TreiberStack<izraelevitz>;
  TempPath path("stack-recovery");
  constexpr int n = 3000, d = 1000, per_producer = 2000;
  fill_in_child<S>(
      path.str(), [](pm::Pool& pool) { return std::make_unique<S>(create_new, pool); },
      [&](S& s) {
        for (int i = 1; i <= n; ++i) s.push(static_cast<Value>(i));
        for (int i = 1; i <= d; ++i) s.pop();
        std::vector<std::thread> producers;
        for (int t = 0; t < 2; ++t)
          producers.emplace_back([&, t] {
            for (int i = 0; i < per_producer; ++i) s.push(tagged_value(t, i));
          });
        for (auto& p : producers) p.join();
      },
      clean_close);
  if (::testing::Test::HasFatalFailure()) return;

  auto pool = pm::Pool::open(path.str(), Instance<S>::layout());
  EXPECT_EQ(pool.was_clean_shutdown(), clean_close);
  S s(open_existing, pool);
  std::vector<Value> contents;
  s.for_each([&](Value v) { contents.push_back(v); });
  ASSERT_EQ(contents.size(), static_cast<std::size_t>(n - d + 2 * per_producer));
  std::vector<std::int64_t> next(2, per_producer - 1);
  for (int i = 0; i < 2 * per_producer; ++i) {
    const std::uint64_t producer = (contents[i] >> 40) - 1;
    ASSERT_LT(producer, 2u);
    ASSERT_EQ(contents[i], tagged_value(static_cast<int>(producer),
                                        static_cast<std::uint64_t>(next[producer]--)));
  }
  for (int i = 0; i < n - d; ++i)
    ASSERT_EQ(contents[2 * per_producer + i], static_cast<Value>(n - d - i));
  // Live: the anchor and one node per value.
  expect_slot_accounting(pool, s.recovery_stats(), 1 + contents.size());
  for (Value v : contents) ASSERT_EQ(s.pop(), std::optional<Value>(v));
  EXPECT_EQ(s.pop(), std::nullopt);
  pool_stress([&](Value v) { s.push(v); }, [&] { return s.pop(); }, 2, 2000, false);
}

TEST(StackRecovery, NewProcessAfterDirtyExit) {
  recover_in_new_process(false);
}
TEST(StackRecovery, NewProcessAfterCleanClose) {
  recover_in_new_process(true);
}

TEST(StackRecovery, PlantedRecoveryBugDropsTheTop) {
  TempPath path("stack-planted");
  {
    auto pool = pm::Pool::create(path.str(), pool_size, "algo/stack");
    TreiberStack<izraelevitz> s(create_new, pool);
    for (Value v = 1; v <= 3; ++v) s.push(v);
  }
  auto pool = pm::Pool::open(path.str(), "algo/stack");
  TreiberStack<IzraelevitzPolicy<Planted<Fault::recovery_drops_node>>> s(open_existing, pool);
  EXPECT_EQ(s.pop(), std::optional<Value>(2));
}

}  // namespace
}  // namespace pmds::algo

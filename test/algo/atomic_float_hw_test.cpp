// labels: concurrent
// AtomicFloat (Fatourou et al.'s register) under every policy: exact products from one thread,
// no lost update with 2-4 threads multiplying by 2.0 (exact in binary: the final value must be
// 2^(total operations)), and (Izraelevitz) the value surviving a dirty exit of the process that
// wrote it, plus the typed errors of opening a wrong or empty root slot.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/atomic_float.hpp"
#include "pmds/algo/treiber_stack.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

static_assert(Register<AtomicFloat<transient>>);
static_assert(Register<AtomicFloat<izraelevitz>>);

template <class P>
class AtomicFloatTest : public ::testing::Test {};
TYPED_TEST_SUITE(AtomicFloatTest, AllPolicies);

TYPED_TEST(AtomicFloatTest, SingleThreadExactProducts) {
  Instance<AtomicFloat<TypeParam>> r;
  EXPECT_EQ(r->read(), 1.0);
  // Factors whose products are exact in binary: every result is compared bit for bit with the
  // same product computed sequentially.
  const double factors[] = {2.0, 0.5, 4.0, 0.25, 1.5, 3.0, 0.75, 8.0};
  std::mt19937_64 rng(7);
  double model = 1.0;
  for (int i = 0; i < 2000; ++i) {
    const double f = factors[rng() % std::size(factors)];
    ASSERT_EQ(r->fetch_multiply(f), model) << "operation " << i;
    model *= f;
    ASSERT_EQ(r->read(), model) << "operation " << i;
    if (std::abs(std::log2(model)) > 200) {  // stay far from overflow/underflow
      ASSERT_EQ(r->fetch_multiply(1.0 / model), model);
      model = 1.0;
    }
  }
  EXPECT_EQ(r->peek(), model);
  // Zero and negative values are ordinary values.
  EXPECT_EQ(r->fetch_multiply(-2.0), model);
  EXPECT_EQ(r->read(), -2.0 * model);
  EXPECT_EQ(r->fetch_multiply(0.0), -2.0 * model);
  EXPECT_EQ(r->read(), 0.0);
}

TEST(AtomicFloat, InitialValue) {
  AtomicFloat<transient> r(3.5);
  EXPECT_EQ(r.read(), 3.5);
  EXPECT_EQ(r.fetch_multiply(2.0), 3.5);
  EXPECT_EQ(r.read(), 7.0);
}

// Each thread multiplies by 2.0 `per_thread` times; the return values each thread sees must
// be powers of two that increase strictly (its own updates are ordered), and the value after a
// round is exactly 2^(threads * per_thread): one lost update would leave it smaller. The
// threads start together (a spin barrier) and the round repeats, each from 1.0 again, so that
// their CAS loops really overlap on a loaded 2-core machine.
TYPED_TEST(AtomicFloatTest, ConcurrentNoLostUpdate) {
  const int rounds = 40 / work_scale;
  for (int threads : {2, 3, 4}) {
    const int per_thread = 960 / threads;  // 960 in total: 2^960 < DBL_MAX
    const int total = threads * per_thread;
    Instance<AtomicFloat<TypeParam>> r;
    for (int round = 0; round < rounds; ++round) {
      std::vector<int> bad(threads, 0);
      std::atomic<int> ready{0};
      std::vector<std::thread> workers;
      for (int t = 0; t < threads; ++t)
        workers.emplace_back([&, t] {
          ready.fetch_add(1);
          while (ready.load() < threads) std::this_thread::yield();
          double last = 0.0;
          for (int i = 0; i < per_thread; ++i) {
            const double before = r->fetch_multiply(2.0);
            int exponent = 0;
            if (std::frexp(before, &exponent) != 0.5 || !(before > last)) ++bad[t];
            last = before;
          }
        });
      for (auto& w : workers) w.join();
      for (int t = 0; t < threads; ++t) ASSERT_EQ(bad[t], 0) << "thread " << t;
      ASSERT_EQ(r->read(), std::ldexp(1.0, total)) << threads << " threads, round " << round;
      ASSERT_EQ(r->fetch_multiply(std::ldexp(1.0, -total)), std::ldexp(1.0, total));
      ASSERT_EQ(r->read(), 1.0);
    }
  }
}

// A child creates the register, two threads multiply it, then one more thread's product; the
// child exits without closing the pool (dirty) or after a clean close. This process opens the
// pool, recovers, and must read exactly the product; the anchor is the only live slot.
void recover_in_new_process(bool clean_close) {
  using R = AtomicFloat<izraelevitz>;
  TempPath path("register-recovery");
  constexpr int per_thread = 300;
  fill_in_child<R>(
      path.str(), [](pm::Pool& pool) { return std::make_unique<R>(create_new, pool); },
      [&](R& r) {
        std::vector<std::thread> workers;
        for (int t = 0; t < 2; ++t)
          workers.emplace_back([&] {
            for (int i = 0; i < per_thread; ++i) r.fetch_multiply(2.0);
          });
        for (auto& w : workers) w.join();
        r.fetch_multiply(1.5);
      },
      clean_close);
  if (::testing::Test::HasFatalFailure()) return;

  auto pool = pm::Pool::open(path.str(), Instance<R>::layout());
  EXPECT_EQ(pool.was_clean_shutdown(), clean_close);
  R r(open_existing, pool);
  const double expected = 1.5 * std::ldexp(1.0, 2 * per_thread);
  EXPECT_EQ(r.read(), expected);
  expect_slot_accounting(pool, r.memory().recovery_stats(), 1);
  // It keeps working after recovery.
  EXPECT_EQ(r.fetch_multiply(0.5), expected);
  EXPECT_EQ(r.read(), expected / 2);
}

TEST(AtomicFloatRecovery, NewProcessAfterDirtyExit) {
  recover_in_new_process(false);
}
TEST(AtomicFloatRecovery, NewProcessAfterCleanClose) {
  recover_in_new_process(true);
}

TEST(AtomicFloatRecovery, WrongOrEmptyRootSlotIsATypedError) {
  TempPath path("register-errors");
  auto pool = pm::Pool::create(path.str(), pool_size, "algo/register");
  // Nothing created yet: open fails.
  EXPECT_THROW((AtomicFloat<izraelevitz>(open_existing, pool)), PoolError);
  { AtomicFloat<izraelevitz> r(create_new, pool); }
  // Occupied slot: create fails.
  EXPECT_THROW((AtomicFloat<izraelevitz>(create_new, pool)), PoolError);
  // A register opened as a stack is reported, not misread.
  EXPECT_THROW((TreiberStack<izraelevitz>(open_existing, pool)), PoolError);
}

}  // namespace
}  // namespace pmds::algo

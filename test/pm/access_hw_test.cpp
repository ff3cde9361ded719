// labels: concurrent
// Access layer under the hardware backend: the std::atomic surface, layout, 16-byte CAS.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "pmds/pm/access.hpp"

namespace pm = pmds::pm;

namespace {

TEST(AccessLayer, HardwareAtomicHasStdAtomicLayout) {
  static_assert(sizeof(pm::atomic<std::uint64_t>) == sizeof(std::atomic<std::uint64_t>));
  static_assert(alignof(pm::atomic<std::uint64_t>) == alignof(std::atomic<std::uint64_t>));
  static_assert(sizeof(pm::atomic<void*>) == 8);
  static_assert(sizeof(pm::atomic<std::uint8_t>) == 1);
  struct Pair {
    std::uint64_t value, sequence;
  };
  static_assert(sizeof(pm::atomic<Pair>) == 16 && alignof(pm::atomic<Pair>) == 16);
  EXPECT_EQ(pm::backend, pm::Backend::hardware);
}

TEST(AccessLayer, LoadStoreExchangeCasFetchAdd) {
  pm::atomic<std::uint64_t> a{5};
  EXPECT_EQ(a.load(), 5u);
  a.store(7);
  EXPECT_EQ(a.exchange(9), 7u);
  std::uint64_t expected = 1;
  EXPECT_FALSE(a.compare_exchange_strong(expected, 2));
  EXPECT_EQ(expected, 9u);
  EXPECT_TRUE(a.compare_exchange_strong(expected, 2));
  EXPECT_EQ(a.fetch_add(3), 2u);
  EXPECT_EQ(a.fetch_sub(1), 5u);
  EXPECT_EQ(static_cast<std::uint64_t>(a), 4u);

  int arr[4] = {};
  pm::atomic<int*> p{arr};
  EXPECT_EQ(p.fetch_add(2), arr);
  EXPECT_EQ(p.load(), arr + 2);
}

TEST(AccessLayer, SixteenByteCompareExchange) {
  struct Pair {
    std::uint64_t value, sequence;
    bool operator==(const Pair&) const = default;
  };
  pm::atomic<Pair> a{Pair{1, 10}};
  EXPECT_EQ(a.load(), (Pair{1, 10}));
  Pair expected{1, 11};
  EXPECT_FALSE(a.compare_exchange_strong(expected, Pair{2, 12}));
  EXPECT_EQ(expected, (Pair{1, 10}));
  EXPECT_TRUE(a.compare_exchange_strong(expected, Pair{2, 12}));
  EXPECT_EQ(a.exchange(Pair{3, 13}), (Pair{2, 12}));
  a.store(Pair{4, 14});
  EXPECT_EQ(a.load(), (Pair{4, 14}));
}

TEST(AccessLayer, SixteenByteCasIsAtomicUnderContention) {
  struct Pair {
    std::uint64_t a, b;
  };
  pm::atomic<Pair> word{Pair{0, 0}};
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        Pair seen = word.load();
        while (!word.compare_exchange_weak(seen, Pair{seen.a + 1, seen.b + 2})) {
        }
      }
    });
  for (auto& t : threads) t.join();
  const Pair end = word.load();
  EXPECT_EQ(end.a, 2u * kPerThread);
  EXPECT_EQ(end.b, 4u * kPerThread);  // both halves moved together: no torn update
}

TEST(AccessLayer, FlushFencePersistWriteRunOnThisCpu) {
  alignas(64) unsigned char buf[256] = {};
  unsigned char src[200];
  for (int i = 0; i < 200; ++i) src[i] = static_cast<unsigned char>(i);
  pm::write(buf + 3, src, 200);
  pm::persist(buf + 3, 200);
  EXPECT_EQ(std::memcmp(buf + 3, src, 200), 0);
  alignas(64) unsigned char nt[256] = {};
  pm::write_nontemporal(nt, src, 200);
  pm::fence();
  EXPECT_EQ(std::memcmp(nt, src, 200), 0);
  EXPECT_NE(pm::to_string(pm::flush_instruction()), nullptr);
}

TEST(AccessLayer, FenceLatencyKnobDelaysFences) {
  pm::set_fence_latency_ns(200000);  // 0.2 ms, far above timer noise
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) pm::fence();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  pm::set_fence_latency_ns(0);
  EXPECT_GE(elapsed, std::chrono::microseconds(2000));
}

}  // namespace

// labels: concurrent
// The parallel steps of nbMontage's recovery (montage/parallel.hpp): every index of a loop visited
// once over any number of threads, an exception from any range rethrown, and the parallel sort
// equal to std::sort for thread counts that split the input unevenly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "pmds/montage/parallel.hpp"

namespace {

using pmds::montage::in_parallel;
using pmds::montage::parallel_sort;

TEST(MontageParallel, EveryIndexOnceForAnyThreadCount) {
  for (std::size_t threads : {1, 2, 3, 7, 64}) {
    for (std::size_t n : {0, 1, 2, 5, 1000}) {
      std::vector<std::atomic<int>> seen(n);
      in_parallel(threads, n, [&](std::size_t first, std::size_t last) {
        for (std::size_t i = first; i < last; ++i) seen[i].fetch_add(1);
      });
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << threads << " " << n;
    }
  }
}

TEST(MontageParallel, AnExceptionInAnyRangeIsRethrown) {
  EXPECT_THROW(in_parallel(3, 300,
                           [](std::size_t first, std::size_t) {
                             if (first >= 200) throw std::runtime_error("last range");
                           }),
               std::runtime_error);
}

TEST(MontageParallel, SortsAsStdSortDoes) {
  std::mt19937_64 rng(5);
  for (std::size_t threads : {1, 2, 3, 4, 5, 8}) {
    for (std::size_t n : {0, 1, 3, 1000, 100001}) {
      std::vector<std::uint64_t> v(n);
      for (auto& x : v) x = rng() % 5000;  // with repeats
      std::vector<std::uint64_t> want = v;
      std::sort(want.begin(), want.end());
      parallel_sort(v, std::less<>{}, threads);
      ASSERT_EQ(v, want) << threads << " threads, " << n << " elements";
    }
  }
}

}  // namespace

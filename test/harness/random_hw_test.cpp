// Tests of the harness's key distributions (pmds/bench/random.hpp): the zipfian generator has
// the shape of a zipfian with theta 0.99 (top-rank frequency, rank-frequency slope), the
// scrambler is a permutation of the range that spreads the frequent ranks, and the key chooser
// stays in [1, key_range].
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "pmds/bench/random.hpp"

namespace {

using pmds::bench::Distribution;
using pmds::bench::KeyChooser;
using pmds::bench::Rng;
using pmds::bench::Scrambler;
using pmds::bench::Zipfian;

TEST(Rng, BelowStaysInRangeAndCoversIt) {
  Rng rng(7);
  std::vector<int> seen(10, 0);
  for (int i = 0; i < 100000; ++i) {
    const auto v = rng.below(10);
    ASSERT_LT(v, 10u);
    ++seen[v];
  }
  for (const int s : seen) EXPECT_NEAR(s, 10000, 600);  // ~6 standard deviations
}

TEST(Rng, UnitIsInHalfOpenInterval) {
  Rng rng(3);
  double lo = 1, hi = 0, sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_LT(lo, 0.001);
  EXPECT_GT(hi, 0.999);
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
}

TEST(Zipfian, ZetaMatchesDirectSumAndTailEstimate) {
  double direct = 0;
  for (int i = 1; i <= 1000; ++i) direct += 1.0 / std::pow(i, 0.99);
  EXPECT_NEAR(Zipfian::zeta(1000, 0.99), direct, 1e-9);
  // Beyond 10^7 terms the tail is estimated; it must continue the exact sum smoothly.
  const double at_limit = Zipfian::zeta(10'000'000, 0.99);
  double extra = 0;
  for (std::uint64_t i = 10'000'001; i <= 10'001'000; ++i) extra += 1.0 / std::pow(i, 0.99);
  EXPECT_NEAR(Zipfian::zeta(10'001'000, 0.99), at_limit + extra, 1e-9);
}

TEST(Zipfian, ShapeMatchesThetaPoint99) {
  constexpr std::uint64_t n = 1000;
  constexpr int draws = 2'000'000;
  const Zipfian z(n, 0.99);
  Rng rng(12345);
  std::vector<std::uint64_t> freq(n, 0);
  for (int i = 0; i < draws; ++i) {
    const auto r = z(rng);
    ASSERT_LT(r, n);
    ++freq[r];
  }
  // Ranks 0 and 1 are exact in Gray et al.'s method: 1/zeta(n) and 2^-theta/zeta(n).
  EXPECT_NEAR(static_cast<double>(freq[0]) / draws, z.probability(0), 0.02 * z.probability(0));
  EXPECT_NEAR(static_cast<double>(freq[1]) / draws, z.probability(1), 0.03 * z.probability(1));
  // Frequencies fall with rank.
  EXPECT_GT(freq[0], freq[1]);
  EXPECT_GT(freq[1], freq[10]);
  EXPECT_GT(freq[10], freq[100]);
  EXPECT_GT(freq[100], freq[900]);
  // The rank-frequency plot is a line of slope -theta on log-log axes: least squares over
  // ranks 1..200 (well populated), on the frequencies summed in 20 log-spaced bins.
  std::vector<double> xs, ys;
  for (std::uint64_t lo = 2; lo < 200;) {
    const std::uint64_t hi = std::max(lo + 1, static_cast<std::uint64_t>(lo * 1.3));
    double count = 0;
    for (std::uint64_t r = lo; r < hi; ++r) count += static_cast<double>(freq[r - 1]);
    const double mean_rank = std::sqrt(static_cast<double>(lo) * static_cast<double>(hi - 1));
    xs.push_back(std::log(mean_rank));
    ys.push_back(std::log(count / static_cast<double>(hi - lo)));
    lo = hi;
  }
  const double mx = std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
  const double my = std::accumulate(ys.begin(), ys.end(), 0.0) / static_cast<double>(ys.size());
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) * (xs[i] - mx);
  }
  const double slope = sxy / sxx;
  EXPECT_NEAR(slope, -0.99, 0.08) << "rank-frequency slope";
  // Skew: the top 10% of ranks get most of the draws (about 70% for theta 0.99, n = 1000),
  // where a uniform distribution would give them 10%.
  const double top = std::accumulate(freq.begin(), freq.begin() + n / 10, 0.0);
  EXPECT_GT(top / draws, 0.6);
  EXPECT_LT(top / draws, 0.8);
}

TEST(Zipfian, RejectsBadParameters) {
  EXPECT_THROW(Zipfian(1, 0.99), std::invalid_argument);
  EXPECT_THROW(Zipfian(100, 1.0), std::invalid_argument);
  EXPECT_THROW(Zipfian(100, 0.0), std::invalid_argument);
}

TEST(Scrambler, IsAPermutationOfTheRange) {
  for (const std::uint64_t n : {1ull, 2ull, 3ull, 17ull, 64ull, 1000ull, 4096ull, 100'003ull}) {
    const Scrambler s(n, 42);
    std::vector<bool> hit(n, false);
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto v = s(i);
      ASSERT_LT(v, n) << "n=" << n;
      ASSERT_FALSE(hit[v]) << "n=" << n << ": two ranks map to " << v;
      hit[v] = true;
    }
  }
}

TEST(Scrambler, SpreadsNeighbouringRanksOverTheRange) {
  constexpr std::uint64_t n = 1'000'000;
  const Scrambler s(n, 9);
  // The 1000 most frequent zipfian ranks (0..999) must not stay clustered: every tenth of the
  // key range receives some of them, none more than a quarter.
  std::vector<int> deciles(10, 0);
  for (std::uint64_t r = 0; r < 1000; ++r) ++deciles[s(r) * 10 / n];
  for (const int d : deciles) {
    EXPECT_GT(d, 50);
    EXPECT_LT(d, 250);
  }
  // Not the identity, and different seeds give different permutations.
  const Scrambler other(n, 10);
  int same = 0, fixed = 0;
  for (std::uint64_t r = 0; r < 1000; ++r) {
    same += s(r) == other(r) ? 1 : 0;
    fixed += s(r) == r ? 1 : 0;
  }
  EXPECT_LT(same, 5);
  EXPECT_LT(fixed, 5);
}

TEST(KeyChooser, KeysStayInRangeForBothDistributions) {
  for (const auto d : {Distribution::uniform, Distribution::zipfian}) {
    for (const std::uint64_t range : {2ull, 10ull, 1000ull, 1ull << 20}) {
      const KeyChooser keys(d, range, 0.99, 5);
      Rng rng(11);
      std::uint64_t lo = ~0ull, hi = 0;
      for (int i = 0; i < 20000; ++i) {
        const auto k = keys(rng);
        ASSERT_GE(k, 1u);
        ASSERT_LE(k, range);
        lo = std::min(lo, k);
        hi = std::max(hi, k);
      }
      if (range <= 10) {
        EXPECT_EQ(lo, 1u);
        EXPECT_EQ(hi, range);
      }
    }
  }
}

TEST(KeyChooser, ZipfianKeysAreSkewedUniformKeysAreNot) {
  constexpr std::uint64_t range = 10000;
  const auto top_share = [&](Distribution d) {
    const KeyChooser keys(d, range, 0.99, 1);
    Rng rng(2);
    std::vector<int> count(range + 1, 0);
    for (int i = 0; i < 200000; ++i) ++count[keys(rng)];
    std::sort(count.begin(), count.end(), std::greater<>());
    return static_cast<double>(std::accumulate(count.begin(), count.begin() + 100, 0)) / 200000;
  };
  EXPECT_GT(top_share(Distribution::zipfian), 0.35);  // ~52% expected for the top 1% of keys
  EXPECT_LT(top_share(Distribution::uniform), 0.03);  // ~1% expected
}

}  // namespace

// pmds bench — random numbers and key distributions for the benchmark harness
// (docs/ARCHITECTURE.md §6).
//
//   Rng          a small, fast per-thread generator (splitmix64 output function over a Weyl
//                sequence): one add and a few multiplies per number, no shared state;
//   Zipfian      ranks in [0, n) with P(rank i) proportional to 1/(i+1)^theta, generated in O(1)
//                per draw by Gray et al.'s method (SIGMOD 1994), which YCSB also uses; theta 0.99
//                is the YCSB constant that InCLL §6 uses;
//   Scrambler    a bijection of [0, n) (a Feistel network with cycle walking), so that the
//                frequent zipfian ranks land on keys spread over the whole range instead of
//                next to each other (InCLL §6: "keys are scrambled by computing a hash");
//                being a permutation, it keeps every rank's frequency and never merges two ranks;
//   KeyChooser   uniform or scrambled-zipfian keys in [1, key_range] (key 0 is reserved).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace pmds::bench {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0. Multiply-high (Lemire): the bias is below n / 2^64, far under
  // anything a benchmark can see, and it costs no division.
  std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

  // Uniform in [0, 1) with 53 random bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// A seed for thread `index` of a run seeded with `seed`, so that threads draw different streams
// and the same --seed gives the same streams.
inline std::uint64_t thread_seed(std::uint64_t seed, std::uint64_t index) {
  Rng mix(seed ^ (0xD1B54A32D192ED03ull * (index + 1)));
  return mix.next();
}

class Zipfian {
 public:
  // Ranks in [0, n); theta in (0, 1). Computing zeta(n) is O(min(n, 10^7)); construct once per
  // run and share it (draws are const).
  Zipfian(std::uint64_t n, double theta) : n_(n), theta_(theta) {
    if (n < 2) throw std::invalid_argument("pmds: zipfian needs at least 2 items");
    if (!(theta > 0.0 && theta < 1.0))
      throw std::invalid_argument("pmds: zipfian theta must lie in (0, 1)");
    alpha_ = 1.0 / (1.0 - theta);
    zetan_ = zeta(n, theta);
    const double zeta2 = zeta(2, theta);
    eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta2 / zetan_);
    half_pow_theta_ = 1.0 + std::pow(0.5, theta);
  }

  std::uint64_t operator()(Rng& rng) const {
    const double u = rng.unit();
    const double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < half_pow_theta_) return 1;
    const auto r = static_cast<std::uint64_t>(static_cast<double>(n_) *
                                              std::pow(eta_ * u - eta_ + 1.0, alpha_));
    return r < n_ ? r : n_ - 1;
  }

  std::uint64_t items() const { return n_; }
  double theta() const { return theta_; }
  // The exact probability of rank i under the ideal distribution, 1/((i+1)^theta zeta(n)).
  double probability(std::uint64_t rank) const {
    return 1.0 / (std::pow(static_cast<double>(rank + 1), theta_) * zetan_);
  }

  // zeta(n, theta) = sum_{i=1..n} 1/i^theta. Summed exactly up to 10^7 terms; beyond that the
  // tail is the Euler-Maclaurin estimate (integral + end corrections), accurate to ~1e-12
  // relative there, so huge key ranges do not cost seconds of start-up.
  static double zeta(std::uint64_t n, double theta) {
    constexpr std::uint64_t exact_terms = 10'000'000;
    const std::uint64_t m = n < exact_terms ? n : exact_terms;
    double sum = 0;
    for (std::uint64_t i = m; i >= 1; --i)  // smallest terms first: less rounding error
      sum += 1.0 / std::pow(static_cast<double>(i), theta);
    if (n > m) {
      const double a = static_cast<double>(m), b = static_cast<double>(n);
      const auto f = [theta](double x) { return std::pow(x, -theta); };
      const auto df = [theta](double x) { return -theta * std::pow(x, -theta - 1.0); };
      const double integral = (std::pow(b, 1.0 - theta) - std::pow(a, 1.0 - theta)) / (1.0 - theta);
      sum += integral + (f(b) - f(a)) / 2.0 + (df(b) - df(a)) / 12.0;
    }
    return sum;
  }

 private:
  std::uint64_t n_;
  double theta_;
  double alpha_ = 0, zetan_ = 0, eta_ = 0, half_pow_theta_ = 0;
};

// A pseudo-random permutation of [0, n): a 4-round balanced Feistel network on the smallest even
// number of bits covering n, applied repeatedly until the value falls inside [0, n) (cycle
// walking keeps it a bijection of [0, n); fewer than 4 steps are expected since 2^bits < 4n).
class Scrambler {
 public:
  Scrambler(std::uint64_t n, std::uint64_t seed) : n_(n) {
    if (n == 0) throw std::invalid_argument("pmds: cannot scramble an empty range");
    unsigned bits = n <= 1 ? 2u : static_cast<unsigned>(std::bit_width(n - 1));
    if (bits < 2) bits = 2;
    if (bits % 2 != 0) ++bits;
    half_bits_ = bits / 2;
    half_mask_ = half_bits_ >= 64 ? ~0ull : (1ull << half_bits_) - 1;
    Rng rng(seed ^ 0x5CA3B1E5CA3B1E5Cull);
    for (auto& k : round_keys_) k = rng.next();
  }

  std::uint64_t operator()(std::uint64_t x) const {
    do {
      x = permute(x);
    } while (x >= n_);
    return x;
  }

  std::uint64_t size() const { return n_; }

 private:
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 33)) * 0xFF51AFD7ED558CCDull;
    z = (z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53ull;
    return z ^ (z >> 33);
  }
  std::uint64_t permute(std::uint64_t x) const {
    std::uint64_t left = (x >> half_bits_) & half_mask_, right = x & half_mask_;
    for (const std::uint64_t k : round_keys_) {
      const std::uint64_t next = left ^ (mix(right ^ k) & half_mask_);
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }

  std::uint64_t n_;
  unsigned half_bits_ = 1;
  std::uint64_t half_mask_ = 1;
  std::uint64_t round_keys_[4] = {};
};

enum class Distribution { uniform, zipfian };

constexpr const char* to_string(Distribution d) {
  return d == Distribution::uniform ? "uniform" : "zipfian";
}

// Keys in [1, key_range]: uniform, or zipfian ranks mapped through a Scrambler. Shared by all
// threads of a run (const), each thread passing its own Rng.
class KeyChooser {
 public:
  KeyChooser(Distribution d, std::uint64_t key_range, double theta, std::uint64_t seed)
      : distribution_(d),
        key_range_(key_range),
        zipfian_(d == Distribution::zipfian ? Zipfian(key_range, theta) : Zipfian(2, 0.5)),
        scrambler_(key_range, seed) {}

  std::uint64_t operator()(Rng& rng) const {
    if (distribution_ == Distribution::uniform) return 1 + rng.below(key_range_);
    return 1 + scrambler_(zipfian_(rng));
  }

  Distribution distribution() const { return distribution_; }
  std::uint64_t key_range() const { return key_range_; }

 private:
  Distribution distribution_;
  std::uint64_t key_range_;
  Zipfian zipfian_;
  Scrambler scrambler_;
};

}  // namespace pmds::bench

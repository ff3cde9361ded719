// labels: concurrent memory
// map.range(from, to) on every public ordered map (pmds/range.hpp): against a model over random
// bounds (many batches), at the byte-string edges (keys of the maximum length, zero and 0xff
// bytes), and while writers insert and remove around a set of keys they never touch (each of
// those comes exactly once per pass, in order, with its value).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pmds/pmds.hpp"
#include "support/temp_path.hpp"

namespace {

using namespace pmds;

constexpr std::uint64_t kPoolSize = 64u << 20;

// Key i and its value, as each kind of map spells them; key(i) < key(j) exactly when i < j.
template <class S>
struct Spell {
  static constexpr bool strings = ByteStringMap<S>;
  using K = std::conditional_t<strings, std::string, Key>;
  using V = std::conditional_t<strings, std::string, Value>;
  static K key(std::uint64_t i) {
    if constexpr (strings) {
      char buf[24];
      std::snprintf(buf, sizeof buf, "k%08llu", static_cast<unsigned long long>(i));
      return buf;
    } else {
      return i + 1;  // 0 is reserved
    }
  }
  static V value(std::uint64_t i) {
    if constexpr (strings)
      return "v" + std::to_string(i * 7);
    else
      return i * 7 + 3;
  }
};

template <class S>
class RangeTest : public ::testing::Test {
 protected:
  using K = typename Spell<S>::K;
  using V = typename Spell<S>::V;
  using Pairs = std::vector<std::pair<K, V>>;

  pmds::test::TempPath path_{"range"};
  Durable<S> map_ = open_or_create<S>(path_.str(), kPoolSize);

  template <class R>
  static Pairs collect(const R& r) {
    Pairs out;
    for (const auto& [k, v] : r) out.emplace_back(k, v);
    return out;
  }
  static Pairs between(const std::map<K, V>& model, const K& from, const K* to) {
    Pairs out;
    for (auto it = model.lower_bound(from); it != model.end() && (!to || it->first < *to); ++it)
      out.emplace_back(*it);
    return out;
  }
};

using OrderedMaps = ::testing::Types<DurableOrderedMap, BufferedOrderedMap, MontageSkipList,
                                     BufferedStringOrderedMap, MontageByteStringSkipList>;
TYPED_TEST_SUITE(RangeTest, OrderedMaps);

TYPED_TEST(RangeTest, MatchesAModelOverRandomBounds) {
  using Sp = Spell<TypeParam>;
  using K = typename Sp::K;
  std::map<K, typename Sp::V> model;
  std::mt19937_64 rng(7);
  for (int n = 0; n < 600; ++n) {
    const std::uint64_t i = rng() % 2000;
    if (this->map_->insert(Sp::key(i), Sp::value(i))) model.emplace(Sp::key(i), Sp::value(i));
  }
  using R = Range<TypeParam, K, typename Sp::V>;
  ASSERT_GT(model.size(), 5 * R::batch_size);

  EXPECT_EQ(this->collect(this->map_->range()), this->between(model, Sp::key(0), nullptr));
  for (int round = 0; round < 40; ++round) {
    const K from = Sp::key(rng() % 2100), to = Sp::key(rng() % 2100);  // to < from: empty
    EXPECT_EQ(this->collect(this->map_->range(from, to)), this->between(model, from, &to))
        << "round " << round;
    EXPECT_EQ(this->collect(this->map_->range(from)), this->between(model, from, nullptr))
        << "round " << round;
  }
  const K k = model.begin()->first;
  EXPECT_TRUE(this->collect(this->map_->range(k, k)).empty());  // [k, k) is empty
}

TYPED_TEST(RangeTest, AKeyRemovedBetweenBatchesDoesNotStopTheIteration) {
  using Sp = Spell<TypeParam>;
  constexpr std::uint64_t n = 300;
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_TRUE(this->map_->insert(Sp::key(i), Sp::value(i)));
  // The iteration continues from the last key it returned: remove each key just after it came,
  // so that every later batch starts from a key no longer there.
  std::uint64_t i = 0;
  for (const auto& [k, v] : this->map_->range()) {
    ASSERT_EQ(k, Sp::key(i));
    ASSERT_EQ(v, Sp::value(i));
    ASSERT_TRUE(this->map_->remove(k));
    ++i;
  }
  EXPECT_EQ(i, n);
  EXPECT_TRUE(this->collect(this->map_->range()).empty());
}

TYPED_TEST(RangeTest, AnIteratorOutlivesTheRangeThatMadeIt) {
  using Sp = Spell<TypeParam>;
  constexpr std::uint64_t n = 200;  // several batches
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_TRUE(this->map_->insert(Sp::key(i), Sp::value(i)));
  auto it = this->map_->range(Sp::key(10), Sp::key(150)).begin();  // the Range is gone after this
  std::uint64_t i = 10;
  for (; it != std::default_sentinel; ++it, ++i) {
    ASSERT_EQ(it->first, Sp::key(i));
    ASSERT_EQ(it->second, Sp::value(i));
  }
  EXPECT_EQ(i, 150u);
}

TYPED_TEST(RangeTest, ConcurrentWritersNeitherRepeatNorSkipTheKeysTheyLeaveAlone) {
  using Sp = Spell<TypeParam>;
  using K = typename Sp::K;
  // Even i: present throughout. Odd i: inserted and removed by the writers all along.
  constexpr std::uint64_t n = 1000;
  for (std::uint64_t i = 0; i < n; i += 2)
    ASSERT_TRUE(this->map_->insert(Sp::key(i), Sp::value(i)));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> writes{0};
  std::vector<std::thread> writers;
  struct Join {  // also when an assertion below returns early
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Join() {
      stop.store(true);
      for (auto& t : threads) t.join();
    }
  } join{stop, writers};
  for (unsigned t = 0; t < 2; ++t)
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      while (!stop.load(std::memory_order_relaxed)) {
        const std::uint64_t i = (rng() % (n / 2)) * 2 + 1;
        if (rng() % 2)
          this->map_->insert(Sp::key(i), Sp::value(i));
        else
          this->map_->remove(Sp::key(i));
        writes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  const K from = Sp::key(100), to = Sp::key(900);
  // At least 30 passes, and on until the writers have written a while (on a loaded host they
  // may start late).
  for (int pass = 0; pass < 30 || writes.load() < 20000; ++pass) {
    std::uint64_t next_even = 100;
    std::optional<K> previous;
    for (const auto& [k, v] : this->map_->range(from, to)) {
      ASSERT_TRUE(!previous || *previous < k) << "pass " << pass << ": not ascending";
      ASSERT_TRUE(!(k < from) && k < to) << "pass " << pass << ": out of bounds";
      previous = k;
      if (k == Sp::key(next_even)) {
        ASSERT_EQ(v, Sp::value(next_even));
        next_even += 2;
      } else {
        ASSERT_TRUE(k < Sp::key(next_even)) << "pass " << pass << ": skipped " << next_even;
      }
    }
    ASSERT_EQ(next_even, 900u) << "pass " << pass << ": the stable keys did not all come";
  }
}

// Byte-string maps only: keys at the maximum length (the iteration continues from such a key,
// never from its successor, which would be too long) and bytes 0x00 and 0xff, in unsigned byte
// order.
template <class S>
class StringRangeTest : public RangeTest<S> {};
using StringOrderedMaps = ::testing::Types<BufferedStringOrderedMap, MontageByteStringSkipList>;
TYPED_TEST_SUITE(StringRangeTest, StringOrderedMaps);

TYPED_TEST(StringRangeTest, LongestKeysAndZeroAndFFBytesComeInByteOrder) {
  std::map<std::string, std::string> model;
  const std::size_t longest = TypeParam::max_key_size;
  for (int i = 0; i < 200; ++i) {
    std::string k(longest, 'z');
    k[longest - 2] = static_cast<char>(i < 100 ? 0x00 : 0xff);
    k[longest - 1] = static_cast<char>(i % 100);
    model.emplace(k, "long " + std::to_string(i));
  }
  for (const std::string& k :
       {std::string(), std::string(1, '\0'), std::string(2, '\0'), std::string("a"),
        std::string("a\0", 2), std::string("a\xff"), std::string(3, '\xff')})
    model.emplace(k, "short " + std::to_string(k.size()));
  for (const auto& [k, v] : model) ASSERT_TRUE(this->map_->insert(k, v));

  const auto all = this->collect(this->map_->range());
  EXPECT_EQ(all, typename RangeTest<TypeParam>::Pairs(model.begin(), model.end()));
  const std::string from("a\0", 2), to(longest, 'z');
  EXPECT_EQ(this->collect(this->map_->range(from, to)), this->between(model, from, &to));
}

}  // namespace

// labels: concurrent
// Masstree in DRAM (incll/masstree.hpp): the 8-byte and byte-string forms against std::map,
// splits at both ends, layers for keys sharing 8-byte slices, ordered scans from any bound, and
// concurrent writers and readers (each thread owns a key set and knows its state exactly; scans
// must be ordered and see every key nobody removes).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pmds/incll/masstree.hpp"
#include "pmds/interfaces.hpp"

namespace {

using pmds::Key;
using pmds::Value;
using pmds::incll::Masstree;
using pmds::incll::StringMasstree;

static_assert(pmds::UpdatableMap<Masstree>);
static_assert(pmds::Scannable<Masstree>);
static_assert(pmds::Iterable<Masstree>);
static_assert(pmds::ByteStringMap<StringMasstree>);

std::vector<std::pair<Key, Value>> contents(const Masstree& t) {
  std::vector<std::pair<Key, Value>> out;
  t.for_each([&](Key k, Value v) { out.emplace_back(k, v); });
  return out;
}

TEST(MasstreeWords, RandomOperationsMatchStdMap) {
  Masstree tree;
  std::map<Key, Value> model;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const Key k = 1 + rng() % 20000;
    const Value v = rng();
    switch (rng() % 5) {
      case 0:
        ASSERT_EQ(tree.insert(k, v), model.emplace(k, v).second) << k;
        break;
      case 1: {
        const bool absent = !model.contains(k);
        model[k] = v;
        ASSERT_EQ(tree.put(k, v), absent) << k;
        break;
      }
      case 2:
        ASSERT_EQ(tree.remove(k), model.erase(k) == 1) << k;
        break;
      default: {
        const auto it = model.find(k);
        const auto got = tree.get(k);
        ASSERT_EQ(got.has_value(), it != model.end()) << k;
        if (got) {
          ASSERT_EQ(*got, it->second) << k;
        }
      }
    }
  }
  const std::vector<std::pair<Key, Value>> expected(model.begin(), model.end());
  EXPECT_EQ(contents(tree), expected);
  EXPECT_EQ(tree.size(), model.size());
  // Scans from random bounds, of random lengths, give std::map's lower_bound order.
  for (int i = 0; i < 2000; ++i) {
    const Key from = 1 + rng() % 21000;
    const std::size_t n = rng() % 120;
    std::vector<std::pair<Key, Value>> got;
    const std::size_t visited = tree.scan(from, n, [&](Key k, Value v) { got.emplace_back(k, v); });
    EXPECT_EQ(visited, got.size());
    std::vector<std::pair<Key, Value>> want;
    for (auto it = model.lower_bound(from); it != model.end() && want.size() < n; ++it)
      want.push_back(*it);
    ASSERT_EQ(got, want) << "scan from " << from << " count " << n;
  }
}

TEST(MasstreeWords, AscendingAndDescendingRunsSplitAtTheEdges) {
  for (const bool ascending : {true, false}) {
    Masstree tree;
    constexpr Key n = 100000;  // thousands of splits, three interior levels
    for (Key i = 1; i <= n; ++i) {
      const Key k = ascending ? i : n + 1 - i;
      ASSERT_TRUE(tree.insert(k, k * 3));
    }
    for (Key k = 1; k <= n; ++k) ASSERT_EQ(tree.get(k), k * 3);
    Key expected = 1;
    tree.for_each([&](Key k, Value v) {
      EXPECT_EQ(k, expected);
      EXPECT_EQ(v, k * 3);
      ++expected;
    });
    EXPECT_EQ(expected, n + 1);
    for (Key k = 2; k <= n; k += 2) ASSERT_TRUE(tree.remove(k));
    EXPECT_EQ(tree.size(), n / 2);
    EXPECT_FALSE(tree.contains(2));
    EXPECT_TRUE(tree.contains(n - 1));
  }
}

TEST(MasstreeWords, RejectsReservedKeys) {
  Masstree tree;
  EXPECT_THROW(tree.insert(0, 1), pmds::ReservedKey);
  EXPECT_THROW(tree.put(~Key{0}, 1), pmds::ReservedKey);
  EXPECT_THROW(tree.get(0), pmds::ReservedKey);
  EXPECT_EQ(tree.size(), 0u);
  // A scan from 0 starts at the first user key.
  tree.insert(1, 10);
  std::vector<Key> seen;
  tree.scan(0, 5, [&](Key k, Value) { seen.push_back(k); });
  EXPECT_EQ(seen, std::vector<Key>{1});
}

// Keys drawn so that many share 8- and 16-byte prefixes and some are prefixes of others: the
// tree must create layers (and layers in layers) and keep byte-string order.
std::string random_key(std::mt19937_64& rng) {
  static const std::string stems[] = {
      "", "user", "user0000", "user00001234", "user0000123456789", "prefix--shared--", "a"};
  std::string k = stems[rng() % std::size(stems)];
  const std::size_t extra = rng() % 12;
  for (std::size_t i = 0; i < extra; ++i) k.push_back(static_cast<char>("ab\0z"[rng() % 4]));
  return k;
}

TEST(MasstreeStrings, RandomOperationsWithSharedPrefixesMatchStdMap) {
  StringMasstree tree;
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100000; ++i) {
    const std::string k = random_key(rng);
    const std::string v(rng() % 40, static_cast<char>('A' + rng() % 26));
    switch (rng() % 5) {
      case 0:
        ASSERT_EQ(tree.insert(k, v), model.emplace(k, v).second);
        break;
      case 1: {
        const bool absent = !model.contains(k);
        model[k] = v;
        ASSERT_EQ(tree.put(k, v), absent);
        break;
      }
      case 2:
        ASSERT_EQ(tree.remove(k), model.erase(k) == 1);
        break;
      default: {
        const auto it = model.find(k);
        const auto got = tree.get(k);
        ASSERT_EQ(got.has_value(), it != model.end());
        if (got) {
          ASSERT_EQ(*got, it->second);
        }
      }
    }
  }
  std::vector<std::pair<std::string, std::string>> all;
  tree.for_each([&](std::string_view k, std::string_view v) { all.emplace_back(k, v); });
  EXPECT_EQ(all, (std::vector<std::pair<std::string, std::string>>(model.begin(), model.end())));
  for (int i = 0; i < 3000; ++i) {
    const std::string from = random_key(rng);
    const std::size_t n = rng() % 30;
    std::vector<std::pair<std::string, std::string>> got;
    tree.scan(from, n, [&](std::string_view k, std::string_view v) { got.emplace_back(k, v); });
    std::vector<std::pair<std::string, std::string>> want;
    for (auto it = model.lower_bound(from); it != model.end() && want.size() < n; ++it)
      want.push_back(*it);
    ASSERT_EQ(got, want) << "scan from '" << from << "' count " << n;
  }
}

TEST(MasstreeStrings, EmptyKeysPrefixesAndTooLongKeys) {
  StringMasstree tree;
  EXPECT_TRUE(tree.insert("", "empty"));
  EXPECT_TRUE(tree.insert(std::string(1, '\0'), "nul"));
  EXPECT_TRUE(tree.insert("12345678", "eight"));
  EXPECT_TRUE(tree.insert("123456789", "nine"));
  EXPECT_TRUE(tree.insert("1234567812345678x", "seventeen"));
  EXPECT_TRUE(tree.insert("1234567812345678y", "seventeen too"));
  EXPECT_FALSE(tree.insert("123456789", "again"));
  EXPECT_EQ(tree.get(""), "empty");
  EXPECT_EQ(tree.get(std::string(1, '\0')), "nul");
  EXPECT_EQ(tree.get("123456789"), "nine");
  EXPECT_EQ(tree.get("1234567812345678y"), "seventeen too");
  EXPECT_FALSE(tree.get("1234567812345678").has_value());
  EXPECT_FALSE(tree.put("1234567812345678x", "updated"));
  EXPECT_EQ(tree.get("1234567812345678x"), "updated");
  std::size_t length = 0;
  EXPECT_TRUE(tree.visit("12345678", [&](std::string_view v) { length = v.size(); }));
  EXPECT_EQ(length, 5u);
  EXPECT_TRUE(tree.remove("1234567812345678x"));
  EXPECT_FALSE(tree.contains("1234567812345678x"));
  EXPECT_EQ(tree.size(), 5u);
  const std::string too_long(StringMasstree::max_key_size + 1, 'k');
  EXPECT_THROW(tree.put(too_long, "v"), pmds::Error);
  EXPECT_EQ(tree.size(), 5u);
}

// One step of a thread that owns its keys, so `mine` is exactly what the tree holds for them:
// op 0 puts, 1 removes, 2-3 get. False when the tree's answer differs from the model's.
template <class Tree, class K, class V>
bool owner_step(Tree& tree, std::map<K, V>& mine, const K& k, const V& v, std::uint64_t op) {
  switch (op) {
    case 0: {
      const bool absent = !mine.contains(k);
      mine[k] = v;
      return tree.put(k, v) == absent;
    }
    case 1:
      return tree.remove(k) == (mine.erase(k) == 1);
    default: {
      const auto it = mine.find(k);
      const auto got = tree.get(k);
      return got.has_value() == (it != mine.end()) && (!got || *got == it->second);
    }
  }
}

// Each thread owns the keys congruent to its id and knows their state exactly, so every get is
// checked; the owners' keys interleave, so their inserts split the same nodes.
TEST(MasstreeConcurrent, OwnersSeeExactlyTheirOwnWrites) {
  Masstree tree;
  constexpr int threads = 4;
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::map<Key, Value> mine;
      for (int i = 0; i < 60000 && !failed; ++i) {
        const Key k = 1 + threads * (rng() % 8000) + t;
        const Value v = rng();
        if (!owner_step(tree, mine, k, v, rng() % 4)) failed = true;
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_FALSE(failed);
}

// Writers insert and remove odd keys while scanners read: every scan is strictly ascending and
// contains every even key (inserted first, never removed) of the range it covered.
TEST(MasstreeConcurrent, ScansStayOrderedAndSeeStableKeys) {
  Masstree tree;
  constexpr Key range = 40000;
  for (Key k = 2; k <= range; k += 2) tree.insert(k, k);
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < 2; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      while (!stop) {
        const Key k = 1 + 2 * (rng() % (range / 2));
        if (rng() % 2)
          tree.insert(k, k);
        else
          tree.remove(k);
      }
    });
  }
  std::mt19937_64 rng(99);
  for (int i = 0; i < 3000 && !failed; ++i) {
    const Key from = 1 + rng() % range;
    std::vector<Key> seen;
    tree.scan(from, 200, [&](Key k, Value v) {
      if (v != k) failed = true;
      seen.push_back(k);
    });
    for (std::size_t j = 1; j < seen.size(); ++j)
      if (seen[j] <= seen[j - 1]) failed = true;
    if (seen.empty()) continue;
    for (Key k = from + (from % 2); k <= seen.back(); k += 2)
      if (!std::binary_search(seen.begin(), seen.end(), k)) failed = true;
  }
  stop = true;
  for (auto& th : pool) th.join();
  EXPECT_FALSE(failed);
}

// Byte-string keys sharing long prefixes, written concurrently: layers are created while other
// threads descend through the entry being turned into a layer.
TEST(MasstreeConcurrent, LayersCreatedUnderConcurrency) {
  StringMasstree tree;
  constexpr int threads = 3;
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(500 + t);
      std::map<std::string, std::string> mine;
      for (int i = 0; i < 30000 && !failed; ++i) {
        // The owner's mark is the last byte, so owners share every longer prefix.
        std::string k = random_key(rng);
        k.push_back(static_cast<char>('0' + t));
        const std::string v = std::to_string(rng());
        if (!owner_step(tree, mine, k, v, rng() % 4)) failed = true;
      }
      for (const auto& [k, v] : mine)
        if (tree.get(k) != v) failed = true;
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_FALSE(failed);
  std::string previous;
  bool first = true;
  tree.for_each([&](std::string_view k, std::string_view) {
    if (!first) {
      EXPECT_LT(previous, k);
    }
    previous = k;
    first = false;
  });
}

}  // namespace

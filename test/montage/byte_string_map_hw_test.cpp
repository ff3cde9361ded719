// labels: memory
// nbMontage's maps over byte-string keys and values (montage/key_value_payload.hpp's
// ByteStringKeys), on the hardware backend: the hash table (hash-bytes/montage) and the skip list
// (skiplist-bytes/montage), after the order words their DRAM nodes keep (byte_key_order.hpp)
// against std::string's order. Keys that share their first 8 or 15 bytes, differ only in length,
// hold zero bytes or are empty; values from empty to the largest; a random run against a model,
// closed and recovered (over one and two threads); a process killed after a sync; sizes over the
// limits and a full pool, which change nothing; put against a model. Then the skip list's byte
// order (for_each, scan), and the hash table's transient twin. The epoch rules themselves are
// montage_map_hw_test.cpp's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "montage/montage_test_support.hpp"
#include "pmds/byte_key_order.hpp"
#include "pmds/montage/hash_map.hpp"
#include "pmds/montage/skip_list.hpp"
#include "support/child_process.hpp"

namespace {

using namespace pmds;
using montage_test::manual_clock;
using Model = std::map<std::string, std::string>;

constexpr std::size_t kPoolSize = montage_test::default_pool_size;

// Quiescent: the map's contents.
template <class M>
Model contents(M& m) {
  Model out;
  m.for_each([&](std::string_view k, std::string_view v) { out.emplace(k, v); });
  return out;
}

// A key from a small alphabet (0, 'a', 'b') of 0 to 12 bytes, alone or after a shared prefix of
// 14 or 15 bytes (either side of the 15 bytes a node's order words hold: byte_key_order.hpp):
// many share their first 8 or 15 bytes, or are a prefix of another.
std::string random_key(std::mt19937_64& rng) {
  static const std::string prefixes[] = {"", std::string(14, 'a'), std::string(15, 'a')};
  std::string tail(rng() % 13, '\0');
  for (char& c : tail) c = "\0ab"[rng() % 3];
  return prefixes[rng() % 3] + tail;
}
std::string random_value(std::mt19937_64& rng, std::uint64_t i) {
  std::string v(rng() % 3 == 0 ? rng() % 2000 : rng() % 40, '\0');
  for (char& c : v) c = static_cast<char>('A' + (i + (&c - v.data())) % 26);
  return v;
}

// The order words against std::string's order, on pairs that share a random prefix of 0 to 17
// bytes (zero bytes, 0xff and lengths on both sides of 15 included): where the words differ they
// order the keys as their bytes do; where they agree, the keys are equal, or both are at least
// 15 bytes long and share their first 15 (ByteKeyOrder::bytes_decide says which).
TEST(ByteKeyOrder, TheWordsOrderKeysAsTheirBytesDo) {
  std::mt19937_64 rng(11);
  const auto random_bytes = [&](std::size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = "\0\1a\xff"[rng() % 4];
    return s;
  };
  int decided_by_bytes = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::string shared = random_bytes(rng() % 18);
    const std::string a = shared + random_bytes(rng() % 4), b = shared + random_bytes(rng() % 4);
    const ByteKeyOrder oa = ByteKeyOrder::of(a), ob = ByteKeyOrder::of(b);
    const int bytes = a.compare(b);
    if (oa != ob) {
      ASSERT_EQ(oa < ob, bytes < 0)
          << testing::PrintToString(a) << " " << testing::PrintToString(b);
    } else if (ByteKeyOrder::bytes_decide(oa.tail)) {
      ++decided_by_bytes;
      ASSERT_GE(std::min(a.size(), b.size()), ByteKeyOrder::covered);
      ASSERT_EQ(a.substr(0, ByteKeyOrder::covered), b.substr(0, ByteKeyOrder::covered));
    } else {
      ASSERT_EQ(a, b);
    }
  }
  EXPECT_GT(decided_by_bytes, 1000);  // the pairs reach the case the bytes decide
}

template <class M>
class ByteStringMaps : public montage_test::InPool<M> {};
using ByteStringMapTypes =
    ::testing::Types<montage::ByteStringHashMap<>, montage::ByteStringSkipList<>>;
TYPED_TEST_SUITE(ByteStringMaps, ByteStringMapTypes);

TYPED_TEST(ByteStringMaps, KeysAreAnyBytesAndValuesComeBackWhole) {
  TypeParam& m = this->make();
  const std::string zero("\0", 1), two_zeros("\0\0", 2);
  const std::string long_a(32, 'a'), long_b = std::string(31, 'a') + 'b';
  const std::string big(TypeParam::max_value_size, 'v');
  EXPECT_TRUE(m.insert("", "empty key"));
  EXPECT_TRUE(m.insert(zero, ""));
  EXPECT_TRUE(m.insert(two_zeros, "two zeros"));
  EXPECT_TRUE(m.insert(long_a, big));
  EXPECT_TRUE(m.insert(long_b, "b"));
  EXPECT_FALSE(m.insert(long_a, "not an update"));
  EXPECT_EQ(m.get(""), "empty key");
  EXPECT_EQ(m.get(zero), "");
  EXPECT_EQ(m.get(two_zeros), "two zeros");
  EXPECT_EQ(m.get(long_a), big);
  EXPECT_EQ(m.get(long_b), "b");
  EXPECT_FALSE(m.get(std::string(30, 'a')).has_value());
  EXPECT_FALSE(m.contains(std::string(3, '\0')));
  EXPECT_TRUE(m.remove(zero));
  EXPECT_FALSE(m.remove(zero));
  EXPECT_TRUE(m.contains(two_zeros));
  EXPECT_TRUE(m.contains(""));
  const Model before = contents(m);
  EXPECT_EQ(before.size(), 4u);
  EXPECT_EQ(contents(this->reopen()), before);
}

TYPED_TEST(ByteStringMaps, KeysAndValuesOverTheLimitsAreRejectedAndChangeNothing) {
  TypeParam& m = this->make();
  ASSERT_TRUE(m.insert("k", "v"));
  const std::string long_key(TypeParam::max_key_size + 1, 'k');
  const std::string long_value(TypeParam::max_value_size + 1, 'v');
  EXPECT_THROW(m.insert(long_key, "v"), Error);
  EXPECT_THROW(m.contains(long_key), Error);
  EXPECT_THROW(m.remove(long_key), Error);
  EXPECT_THROW(m.insert("k2", long_value), Error);
  EXPECT_THROW(m.insert("k", long_value), Error);  // present, but the value is still checked
  EXPECT_TRUE(m.insert(std::string(TypeParam::max_key_size, 'k'), "longest key"));
  EXPECT_EQ(contents(m),
            (Model{{"k", "v"}, {std::string(TypeParam::max_key_size, 'k'), "longest key"}}));
}

TYPED_TEST(ByteStringMaps, ARandomRunMatchesAModelAcrossReopens) {
  TypeParam& m = this->make();
  Model model;
  std::mt19937_64 rng(3);
  for (std::uint64_t i = 0; i < 6000; ++i) {
    const std::string k = random_key(rng);
    switch (rng() % 3) {
      case 0: {
        const std::string v = random_value(rng, i);
        ASSERT_EQ(m.insert(k, v), model.emplace(k, v).second);
        break;
      }
      case 1:
        ASSERT_EQ(m.remove(k), model.erase(k) == 1);
        break;
      default:
        ASSERT_EQ(m.get(k), model.count(k) ? std::optional<std::string>(model[k]) : std::nullopt);
    }
    if (i % 101 == 0) m.background_step();
  }
  ASSERT_EQ(contents(m), model);
  EXPECT_EQ(contents(this->reopen()), model);
  // The system area and one payload per key.
  EXPECT_EQ(this->s_->recovery_stats().live_slots, model.size() + 1);
  montage::Options two = manual_clock();
  two.recovery_threads = 2;
  TypeParam& r = this->reopen(two);
  EXPECT_EQ(contents(r), model);
  for (const auto& [k, v] : model) ASSERT_EQ(r.get(k), v);
}

// A process killed without closing: every insert before its sync is recovered, whole.
TYPED_TEST(ByteStringMaps, AKilledProcessKeepsEverythingBeforeItsSync) {
  this->pool_.emplace(pm::Pool::create(this->path_, kPoolSize, TypeParam::name));
  this->pool_.reset();
  const auto key = [](int i) { return "key " + std::to_string(i) + std::string(20, '.'); };
  const auto value = [](int i) { return std::string(1000 + i, static_cast<char>('a' + i % 26)); };
  pmds::test::in_killed_child([&] {
    pm::Pool pool = pm::Pool::open(this->path_, TypeParam::name);
    auto owned = montage_test::create_map<TypeParam>(pool);  // never destroyed: the child _exits
    for (int i = 0; i < 100; ++i) owned->insert(key(i), value(i));
    owned->sync();
    for (int i = 100; i < 150; ++i) owned->insert(key(i), value(i));
    ::_exit(0);
  });
  this->pool_.emplace(pm::Pool::open(this->path_, TypeParam::name));
  this->s_ = std::make_unique<TypeParam>(open_existing, *this->pool_, manual_clock());
  const Model got = contents(*this->s_);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(got.count(key(i)), 1u) << i;
  for (const auto& [k, v] : got) {
    const int i = std::stoi(k.substr(4));
    EXPECT_EQ(k, key(i));
    EXPECT_EQ(v, value(i));
  }
}

TYPED_TEST(ByteStringMaps, AFullPoolThrowsAndLosesNothing) {
  TypeParam& m = this->make(manual_clock(), pm::Pool::min_size() + 4 * (1u << 20));
  const std::string value(1000, 'v');
  int i = 0;
  try {
    for (;; ++i) ASSERT_TRUE(m.insert("key " + std::to_string(i), value));
  } catch (const PoolFull&) {
  }
  ASSERT_GT(i, 100);
  EXPECT_FALSE(m.contains("key " + std::to_string(i)));
  EXPECT_EQ(m.get("key 0"), value);
  const Model before = contents(m);
  EXPECT_EQ(before.size(), static_cast<std::size_t>(i));
  EXPECT_EQ(contents(this->reopen()), before);
}

static_assert(ByteStringMap<montage::ByteStringHashMap<>>);
static_assert(ByteStringMap<montage::ByteStringSkipList<>>);

TYPED_TEST(ByteStringMaps, PutsAgainstAModelAndAcrossAReopen) {
  TypeParam& m = this->make();
  Model model;
  std::mt19937_64 rng(4);
  for (std::uint64_t i = 0; i < 6000; ++i) {
    const std::string k = random_key(rng);
    if (rng() % 2 == 0) {
      const std::string v = random_value(rng, i);
      const bool absent = model.count(k) == 0;
      model[k] = v;
      ASSERT_EQ(m.put(k, v), absent);
    } else {
      ASSERT_EQ(m.remove(k), model.erase(k) == 1);
    }
  }
  EXPECT_EQ(contents(m), model);
  EXPECT_EQ(contents(this->reopen()), model);
}

// The transient twins (hash-bytes/transient, skiplist-bytes/transient): the same code with its
// payloads on the heap, against a model with puts; destroyed with keys in it (the sanitizers see
// every payload freed).
template <class M>
class TransientByteStringMaps : public ::testing::Test {
 protected:
  static std::unique_ptr<M> make() {
    if constexpr (requires { M::default_bucket_count; })
      return std::make_unique<M>(64);
    else
      return std::make_unique<M>();
  }
};
using TransientByteStringMapTypes =
    ::testing::Types<montage::TransientByteStringHashMap, montage::TransientByteStringSkipList>;
TYPED_TEST_SUITE(TransientByteStringMaps, TransientByteStringMapTypes);

TYPED_TEST(TransientByteStringMaps, MatchesAModel) {
  static_assert(ByteStringMap<TypeParam>);
  static_assert(TypeParam::criterion == Criterion::none);
  auto made = this->make();
  TypeParam& m = *made;
  Model model;
  std::mt19937_64 rng(5);
  for (std::uint64_t i = 0; i < 6000; ++i) {
    const std::string k = random_key(rng);
    switch (rng() % 4) {
      case 0: {
        const std::string v = random_value(rng, i);
        ASSERT_EQ(m.insert(k, v), model.emplace(k, v).second);
        break;
      }
      case 1: {
        const std::string v = random_value(rng, i);
        const bool absent = model.count(k) == 0;
        model[k] = v;
        ASSERT_EQ(m.put(k, v), absent);
        break;
      }
      case 2:
        ASSERT_EQ(m.remove(k), model.erase(k) == 1);
        break;
      default:
        ASSERT_EQ(m.get(k), model.count(k) ? std::optional<std::string>(model[k]) : std::nullopt);
    }
  }
  EXPECT_EQ(contents(m), model);
  EXPECT_THROW(m.insert(std::string(TypeParam::max_key_size + 1, 'k'), ""), Error);
}

TEST(TransientByteStringHash, ABucketCountOfZeroIsRefused) {
  EXPECT_THROW(montage::TransientByteStringHashMap(0), PoolError);
}

class ByteStringSkipListOrder : public ByteStringMaps<montage::ByteStringSkipList<>> {};

// Byte order: by unsigned bytes, a prefix before the keys it begins; keys on both sides of the
// 15 bytes the order words hold, which compare their bytes past those in the pool.
TEST_F(ByteStringSkipListOrder, ForEachAndScanGoInByteOrder) {
  auto& m = make();
  const std::string p14 = "abcdefghijklmn";
  const std::vector<std::string> sorted = {"",
                                           std::string("\0", 1),
                                           "a",
                                           "a\x01",
                                           "abcdefgh",
                                           "abcdefgh\x01",
                                           p14,
                                           p14 + std::string("\0", 1),
                                           p14 + "o",
                                           p14 + "o" + std::string("\0", 1),
                                           p14 + "o\x01",
                                           p14 + "p",
                                           "abcdefghijklmo",
                                           "abcdefgi",
                                           "\x7f",
                                           "\x80",
                                           "\xff\xff"};
  ASSERT_TRUE(std::is_sorted(sorted.begin(), sorted.end()));
  for (std::size_t i = sorted.size(); i-- > 0;) ASSERT_TRUE(m.insert(sorted[i], sorted[i]));
  std::vector<std::string> seen;
  m.for_each([&](std::string_view k, std::string_view v) {
    EXPECT_EQ(k, v);
    seen.emplace_back(k);
  });
  EXPECT_EQ(seen, sorted);
  seen.clear();
  EXPECT_EQ(
      m.scan("abcdefgh", 3, [&](std::string_view k, std::string_view) { seen.emplace_back(k); }),
      3u);
  EXPECT_EQ(seen, (std::vector<std::string>{"abcdefgh", "abcdefgh\x01", p14}));
  seen.clear();
  m.scan(p14 + "o", 3, [&](std::string_view k, std::string_view) { seen.emplace_back(k); });
  EXPECT_EQ(seen, (std::vector<std::string>(sorted.begin() + 8, sorted.begin() + 11)));
  seen.clear();
  const std::string after_h("abcdefgh\0", 9);  // between "abcdefgh" and "abcdefgh\x01"
  m.scan(after_h, 100, [&](std::string_view k, std::string_view) { seen.emplace_back(k); });
  EXPECT_EQ(seen, (std::vector<std::string>(sorted.begin() + 5, sorted.end())));
  seen.clear();
  auto& r = reopen();
  r.for_each([&](std::string_view k, std::string_view) { seen.emplace_back(k); });
  EXPECT_EQ(seen, sorted);
}

}  // namespace

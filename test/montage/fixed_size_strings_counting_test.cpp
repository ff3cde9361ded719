// The byte-string registry entries (hash-bytes/montage, skiplist-bytes/montage) through
// registry/fixed_size_strings.hpp: 8-byte keys and values written as key_size and value_size
// bytes (nbMontage's 32 and 1024 here) come back through the type-erased operations and across a
// reopen; sizes out of range are refused before anything is created; a key or a value whose
// bytes do not match what was written is reported, not read as a number.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "pmds/montage/hash_map.hpp"
#include "pmds/registry/entries.hpp"
#include "pmds/registry/fixed_size_strings.hpp"
#include "support/temp_path.hpp"

namespace {

using namespace pmds;
using registry::OpCode;

// hash-bytes/montage in `pool` (64 buckets, the advancer off) through the adapter.
auto hash_bytes(pm::Pool& pool, std::size_t key_size, std::size_t value_size) {
  using Map = montage::ByteStringHashMap<>;
  montage::Options manual;
  manual.background_thread = false;
  return std::make_unique<registry::FixedSizeStrings<Map>>(
      std::make_unique<Map>(create_new, pool, 64, manual), key_size, value_size);
}

registry::CreateOptions seed003_sizes() {
  registry::CreateOptions o;
  o.key_range = 1000;
  o.key_size = 32;
  o.value_size = 1024;
  o.background_thread = false;
  return o;
}

// The two entries by name, from the counting backend's table library (tools/registry_table).
const registry::Entry& named(std::string_view name) {
  const registry::Entry* e = registry::find(name);
  if (e == nullptr) throw Error("not registered: " + std::string(name));
  return *e;
}
const registry::Entry& hash_bytes() { return named("hash-bytes/montage"); }
const registry::Entry& skiplist_bytes() { return named("skiplist-bytes/montage"); }

TEST(FixedSizeStrings, KeysAndValuesOfSeed003SizesGoInAndComeBack) {
  for (const registry::Entry* entry : {&hash_bytes(), &skiplist_bytes()}) {
    SCOPED_TRACE(entry->name);
    const registry::Entry& e = *entry;
    pmds::test::TempPath path{"fixed-size-strings"};
    const registry::CreateOptions o = seed003_sizes();
    std::vector<registry::Item> before;
    {
      auto inst = registry::Instance::create(e, o, path.str());
      for (Key k = 1; k <= 500; ++k) ASSERT_TRUE(inst.apply({OpCode::insert, k, k * 7, 1}).ok);
      for (Key k = 1; k <= 500; k += 3) ASSERT_TRUE(inst.apply({OpCode::remove, k, 0, 1}).ok);
      const auto got = inst.apply({OpCode::get, 5, 0, 1});
      EXPECT_TRUE(got.ok);
      EXPECT_EQ(got.value, 35u);
      EXPECT_THROW(inst.apply({OpCode::insert, 0, 0, 1}), ReservedKey);
      before = inst.contents();
      ASSERT_EQ(before.size(), 333u);
      for (const auto& it : before) ASSERT_EQ(it.value, it.key * 7);
    }
    auto reopened = registry::Instance::open(e, path.str(), o);
    EXPECT_EQ(reopened.contents(), before);
  }
}

TEST(FixedSizeStrings, SizesOutOfRangeAreRefused) {
  const registry::Entry& e = hash_bytes();
  for (auto [key_size, value_size] : {std::pair<std::size_t, std::size_t>{7, 8},
                                      {8, 7},
                                      {montage::ByteStringKeys::max_key_size + 1, 8},
                                      {8, montage::ByteStringKeys::max_value_size + 1}}) {
    pmds::test::TempPath path{"fixed-size-strings"};
    registry::CreateOptions o = seed003_sizes();
    o.key_size = key_size;
    o.value_size = value_size;
    try {
      registry::Instance::create(e, o, path.str());
      FAIL() << key_size << " " << value_size;
    } catch (const PoolError& err) {
      EXPECT_EQ(err.code(), PoolErrc::bad_argument);
    }
  }
}

// A value replaced behind the adapter's back by bytes it did not write: get reports it.
TEST(FixedSizeStrings, AValueWithOtherBytesIsReported) {
  pmds::test::TempPath path{"fixed-size-strings"};
  auto pool = pm::Pool::create(path.str(), 64u << 20, "hash-bytes/montage");
  auto made = hash_bytes(pool, 32, 64);
  auto& m = *made;
  ASSERT_TRUE(m.insert(5, 55));
  ASSERT_EQ(m.get(5), 55u);
  std::string key;
  m.map().for_each([&](std::string_view k, std::string_view) { key = k; });
  ASSERT_EQ(key.size(), 32u);
  std::string other(64, '\0');
  other[7] = 55;  // the right number, wrong filler
  m.map().put(key, other);
  EXPECT_THROW(m.get(5), Error);
  m.map().put(key, std::string(63, 'x'));  // the wrong size
  EXPECT_THROW(m.get(5), Error);
}

// The filler is checked eight bytes at a time: one wrong byte anywhere, the last chunk a short one
// included, is reported at its position.
TEST(FixedSizeStrings, OneWrongByteIsReportedWhereItIs) {
  pmds::test::TempPath path{"fixed-size-strings"};
  auto pool = pm::Pool::create(path.str(), 64u << 20, "hash-bytes/montage");
  auto made = hash_bytes(pool, 8, 61);
  auto& m = *made;
  ASSERT_TRUE(m.insert(5, 55));
  std::string key, value;
  m.map().for_each([&](std::string_view k, std::string_view v) {
    key = k;
    value = v;
  });
  ASSERT_EQ(value.size(), 61u);
  for (std::size_t at : {8, 15, 33, 56, 60}) {
    std::string wrong = value;
    wrong[at] = static_cast<char>(wrong[at] ^ 1);
    m.map().put(key, wrong);
    try {
      m.get(5);
      ADD_FAILURE() << "byte " << at << " not reported";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("wrong byte at " + std::to_string(at)),
                std::string::npos)
          << err.what();
    }
  }
  m.map().put(key, value);
  EXPECT_EQ(m.get(5), 55u);
}

// A key read back (for_each and scan, through which the crash lab reads contents) is checked
// whole as well: a wrong filler byte is reported at its position, and with shared prefixes a
// prefix that is not its key's group is reported too.
template <bool SharedPrefixes>
void expect_reported(std::size_t key_size, Key key, std::size_t at, const std::string& what) {
  SCOPED_TRACE(what);
  using Map = montage::ByteStringHashMap<>;
  pmds::test::TempPath path{"fixed-size-strings"};
  auto pool = pm::Pool::create(path.str(), 64u << 20, "hash-bytes/montage");
  montage::Options manual;
  manual.background_thread = false;
  registry::FixedSizeStrings<Map, SharedPrefixes> m(
      std::make_unique<Map>(create_new, pool, 64, manual), key_size, 16);
  ASSERT_TRUE(m.insert(key, 55));
  m.for_each([](Key, Value) {});  // as written: no error
  std::string raw, value;
  m.map().for_each([&](std::string_view k, std::string_view v) {
    raw = k;
    value = v;
  });
  ASSERT_EQ(raw.size(), key_size);
  ASSERT_TRUE(m.map().remove(raw));
  std::string wrong = raw;
  if (at < key_size) {
    wrong[at] = static_cast<char>(wrong[at] ^ 1);
  } else {  // the key of the next group, after this group's prefix
    for (std::size_t i = 0; i < 8; ++i)
      wrong[key_size - 8 + i] = static_cast<char>((key + 8) >> (56 - 8 * i));
  }
  ASSERT_TRUE(m.map().insert(wrong, value));
  try {
    m.for_each([](Key, Value) {});
    ADD_FAILURE() << "not reported";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
  }
}

TEST(FixedSizeStrings, AKeyWithOtherBytesIsReported) {
  expect_reported<false>(32, 5, 20, "key 5 read back with a wrong byte at 20");
  expect_reported<false>(29, 5, 28, "key 5 read back with a wrong byte at 28");  // a short chunk
  expect_reported<true>(24, 13, 9, "key prefix 1 read back with a wrong byte at 9");
  expect_reported<true>(24, 13, 24, "key 21 read back with the prefix of another");
}

}  // namespace

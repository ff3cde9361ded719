// Tests of reference::PsyncBound (pmds/reference/psync_bound.hpp), the benchmark reference
// "transient set + one psync per successful update" (and its two-psync form): it answers exactly as
// the set it wraps, it issues one flush and one fence (two of each) for each successful insert and
// remove and none for anything else (checked with the counting backend), and the registry offers
// it for the list, the hash table and the skip list (the two-psync form for the list and the hash
// table) as a transient map.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/michael_hash.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/reference/psync_bound.hpp"
#include "pmds/registry/entries.hpp"

namespace {

using namespace pmds;
using HashBound = reference::PsyncBound<algo::MichaelHashTable<algo::transient>>;
using HashBound2 = reference::PsyncBound<algo::MichaelHashTable<algo::transient>, 2>;

template <class Bound>
class PsyncBoundOf : public ::testing::Test {};
using Bounds = ::testing::Types<HashBound, HashBound2>;
TYPED_TEST_SUITE(PsyncBoundOf, Bounds);

TYPED_TEST(PsyncBoundOf, AnswersAsTheWrappedSetAndPsyncsPerSuccessfulUpdate) {
  constexpr std::uint64_t psyncs = TypeParam::psyncs;
  TypeParam set(std::make_unique<algo::MichaelHashTable<algo::transient>>(64));
  std::map<Key, Value> model;
  std::mt19937_64 rng(42);
  std::uint64_t successful_updates = 0;
  const pm::Counters before = pm::thread_counters();
  for (int i = 0; i < 20000; ++i) {
    const Key k = 1 + rng() % 200;
    const Value v = rng();
    switch (rng() % 4) {
      case 0: {
        const bool inserted = model.emplace(k, v).second;
        ASSERT_EQ(set.insert(k, v), inserted) << "insert " << k;
        successful_updates += inserted;
        break;
      }
      case 1: {
        const bool removed = model.erase(k) == 1;
        ASSERT_EQ(set.remove(k), removed) << "remove " << k;
        successful_updates += removed;
        break;
      }
      case 2:
        ASSERT_EQ(set.contains(k), model.count(k) == 1) << "contains " << k;
        break;
      default: {
        const auto it = model.find(k);
        ASSERT_EQ(set.get(k), it == model.end() ? std::nullopt : std::optional<Value>(it->second))
            << "get " << k;
      }
    }
  }
  const pm::Counters used = pm::thread_counters() - before;
  ASSERT_GT(successful_updates, 1000u);  // the sequence exercises both outcomes
  EXPECT_EQ(used.flushes, psyncs * successful_updates);
  EXPECT_EQ(used.fences, psyncs * successful_updates);

  std::map<Key, Value> contents;
  set.for_each([&](Key k, Value v) { contents.emplace(k, v); });
  EXPECT_EQ(contents, model);
}

TYPED_TEST(PsyncBoundOf, FailedUpdatesAndReadsIssueNothing) {
  TypeParam set(std::make_unique<algo::MichaelHashTable<algo::transient>>(16));
  ASSERT_TRUE(set.insert(7, 70));
  const pm::Counters before = pm::thread_counters();
  EXPECT_FALSE(set.insert(7, 71));
  EXPECT_FALSE(set.remove(8));
  EXPECT_TRUE(set.contains(7));
  EXPECT_EQ(set.get(7), std::optional<Value>(70));
  const pm::Counters used = pm::thread_counters() - before;
  EXPECT_EQ(used.flushes, 0u);
  EXPECT_EQ(used.fences, 0u);
}

TEST(PsyncBound, RegisteredAsTransientMapsForEachSeed000Structure) {
  // The table is the counting backend's library (tools/registry_table), compiled once.
  for (const char* name : {"list/psync-bound", "hash/psync-bound", "skiplist/psync-bound",
                           "list/psync2-bound", "hash/psync2-bound"}) {
    SCOPED_TRACE(name);
    const registry::Entry* e = registry::find(name);
    ASSERT_NE(e, nullptr);
    EXPECT_FALSE(e->durable);
    EXPECT_EQ(e->kind, registry::Kind::map);
  }
}

}  // namespace

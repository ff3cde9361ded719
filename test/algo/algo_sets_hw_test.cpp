// labels: concurrent
// The algo/ sets and maps (Harris-Michael list, Michael's hash table, the lock-free skip list,
// the Natarajan-Mittal tree), each under every memory policy, through one body per test:
// sequential and concurrent behaviour against a model, reserved keys, the ordered maps' put and
// the skip list's scan; and, durable (Izraelevitz), recovery in a new process after a dirty exit,
// a clean close and a kill mid-operation, with the allocator accounting for every slot, the pool
// misused, and the planted recovery bug caught. What only one structure has (the hash table's
// bucket counts and segments, a head's marked link) is tested beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "algo/algo_test_support.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/michael_hash.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/algo/skip_list.hpp"
#include "support/presence_balance.hpp"

namespace pmds::algo {
namespace {

using namespace testing;

// ---- The subjects: what differs between the structures --------------------------------------

// S<P>: the structure under policy P. shapes: constructor arguments tried by the per-policy
// tests (the hash table's bucket counts, 1 and 7 for long chains). durable_own_keys: each
// thread's keys in a durable stress run (a flush and fence per shared access, O(keys) accesses
// per operation on a list). live(s, keys): the slots a recovered structure holds.
// recovery_keys: each thread's keys in the recovery runs.
struct ListSubject {
  template <class P>
  using S = HarrisMichaelList<P>;
  static std::vector<std::size_t> shapes() { return {0}; }
  static constexpr Key durable_own_keys = 24;
  static constexpr Key recovery_keys = 40;
  // The anchor and one node per key (completed removes unlinked theirs).
  static std::size_t live(const S<izraelevitz>&, std::size_t keys) { return 1 + keys; }
};

struct HashSubject {
  template <class P>
  using S = MichaelHashTable<P>;
  static std::vector<std::size_t> shapes() { return {1, 7, 1024}; }
  static constexpr Key durable_own_keys = 64;
  static constexpr Key recovery_keys = 200;
  // The anchor, the directory, the segments and one node per key.
  static std::size_t live(const S<izraelevitz>& h, std::size_t keys) {
    using H = S<izraelevitz>;
    return 2 + (h.bucket_count() + H::segment_buckets - 1) / H::segment_buckets + keys;
  }
};

struct SkipListSubject {
  template <class P>
  using S = SkipList<P>;
  static std::vector<std::size_t> shapes() { return {0}; }
  static constexpr Key durable_own_keys = 64;
  static constexpr Key recovery_keys = 200;
  // The anchor, the head and one node per key (completed removes unlinked theirs everywhere).
  template <class T>
  static std::size_t live(const T&, std::size_t keys) {
    return 2 + keys;
  }
};

struct BstSubject {
  template <class P>
  using S = NatarajanMittalTree<P>;
  static std::vector<std::size_t> shapes() { return {0}; }
  static constexpr Key durable_own_keys = 48;
  static constexpr Key recovery_keys = 200;
  // The anchor, sentinels R and S and their three leaves, and per key one leaf and one internal
  // node (completed removes took both out).
  template <class T>
  static std::size_t live(const T&, std::size_t keys) {
    return 6 + 2 * keys;
  }
};

// A structure under one policy: the per-policy tests' type parameter.
template <class Subject, class Policy>
struct Case {
  using S = typename Subject::template S<Policy>;
  using P = Policy;
  using Of = Subject;
};

// Every subject under every policy of AllPolicies.
template <class... L>
struct Concat;
template <class... A>
struct Concat<::testing::Types<A...>> {
  using type = ::testing::Types<A...>;
};
template <class... A, class... B, class... Rest>
struct Concat<::testing::Types<A...>, ::testing::Types<B...>, Rest...> {
  using type = typename Concat<::testing::Types<A..., B...>, Rest...>::type;
};
template <class Subject, class Policies>
struct UnderEveryPolicy;
template <class Subject, class... P>
struct UnderEveryPolicy<Subject, ::testing::Types<P...>> {
  using type = ::testing::Types<Case<Subject, P>...>;
};
template <class... Subjects>
using Cases = typename Concat<typename UnderEveryPolicy<Subjects, AllPolicies>::type...>::type;

// The structure of case C in shape `shape` (the hash table's bucket count; the others have one).
template <class C>
Instance<typename C::S> instance(std::size_t shape) {
  if constexpr (std::is_same_v<typename C::Of, HashSubject>)
    return Instance<typename C::S>(shape);
  else
    return Instance<typename C::S>();
}

// ---- Under every policy ------------------------------------------------------------------------

template <class C>
class AlgoSet : public ::testing::Test {};
using AllCases = Cases<ListSubject, HashSubject, SkipListSubject, BstSubject>;
TYPED_TEST_SUITE(AlgoSet, AllCases);

TYPED_TEST(AlgoSet, Sequential) {
  static_assert(Map<typename TypeParam::S>);
  for (const std::size_t shape : TypeParam::Of::shapes()) {
    auto s = instance<TypeParam>(shape);
    set_sequential(*s);
  }
}

TYPED_TEST(AlgoSet, ReservedKeysThrow) {
  auto s = instance<TypeParam>(TypeParam::Of::shapes().back());
  set_reserved_keys_throw(*s);
}

TYPED_TEST(AlgoSet, ConcurrentStress) {
  for (const std::size_t shape : TypeParam::Of::shapes()) {
    for (int threads : {2, 4}) {
      auto s = instance<TypeParam>(shape);
      SetStressConfig c;
      c.threads = threads;
      c.seed = shape + static_cast<std::uint64_t>(threads);
      if (TypeParam::P::durable) {
        c.ops_per_thread /= 10;
        c.own_keys = TypeParam::Of::durable_own_keys;
      }
      set_stress(*s, c);
    }
  }
}

// ---- Durable (Izraelevitz): recovery ----------------------------------------------------------

template <class Subject>
class AlgoSetRecovery : public ::testing::Test {
 protected:
  using Durable = typename Subject::template S<izraelevitz>;
  static std::unique_ptr<Durable> make(pm::Pool& pool) {
    if constexpr (std::is_same_v<Subject, HashSubject>)
      return std::make_unique<Durable>(create_new, pool, 5000);
    else
      return std::make_unique<Durable>(create_new, pool);
  }
  static std::size_t live(const Durable& s, std::size_t keys) { return Subject::live(s, keys); }
};
using Subjects = ::testing::Types<ListSubject, HashSubject, SkipListSubject, BstSubject>;
TYPED_TEST_SUITE(AlgoSetRecovery, Subjects);

TYPED_TEST(AlgoSetRecovery, NewProcessAfterDirtyExit) {
  using D = typename TestFixture::Durable;
  set_recovery_in_new_process<D>(TestFixture::make, TestFixture::live, false,
                                 TypeParam::recovery_keys);
}

TYPED_TEST(AlgoSetRecovery, NewProcessAfterCleanClose) {
  using D = typename TestFixture::Durable;
  set_recovery_in_new_process<D>(TestFixture::make, TestFixture::live, true,
                                 TypeParam::recovery_keys);
}

TYPED_TEST(AlgoSetRecovery, NewProcessAfterKillMidOperation) {
  set_recovery_after_kill<typename TestFixture::Durable>(TestFixture::make,
                                                         TypeParam::recovery_keys);
}

TYPED_TEST(AlgoSetRecovery, OccupiedOrEmptyPoolIsATypedError) {
  pool_misuse_is_a_typed_error<typename TestFixture::Durable>();
}

// The planted recovery bug (d) is a real fixture: the recovered structure misses one key that
// the correct recovery of the same pool finds.
TYPED_TEST(AlgoSetRecovery, PlantedRecoveryBugDropsAKey) {
  using D = typename TestFixture::Durable;
  using Buggy =
      typename TypeParam::template S<IzraelevitzPolicy<Planted<Fault::recovery_drops_node>>>;
  TempPath path("algo-planted");
  {
    auto pool = pm::Pool::create(path.str(), pool_size, Instance<D>::layout());
    auto s = TestFixture::make(pool);
    for (Key k = 1; k <= 10; ++k) s->insert(k, value_of(k));
  }
  auto pool = pm::Pool::open(path.str(), Instance<D>::layout());
  Buggy buggy(open_existing, pool);
  EXPECT_EQ(buggy.size(), 9u);
}

// ---- The ordered maps' put, under every policy -------------------------------------------------

template <class C>
class MapPut : public ::testing::Test {};
using OrderedMapCases = Cases<SkipListSubject, BstSubject>;
TYPED_TEST_SUITE(MapPut, OrderedMapCases);

// Inserts, replacements, removes and gets against a model; durable, across a clean reopen, whose
// trace reaches the structure's nodes for the keys left (the replaced nodes were freed).
TYPED_TEST(MapPut, PutsAgainstAModelAndAcrossAReopen) {
  Instance<typename TypeParam::S> t;
  std::map<Key, Value> model;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 4000; ++i) {
    const Key k = 1 + rng() % 200;
    const Value v = rng() % 1000;
    switch (rng() % 4) {
      case 0:
      case 1:
        ASSERT_EQ(t->put(k, v), !model.contains(k));
        model[k] = v;
        break;
      case 2:
        ASSERT_EQ(t->remove(k), model.erase(k) == 1);
        break;
      default:
        ASSERT_EQ(t->get(k), model.contains(k) ? std::optional<Value>(model.at(k)) : std::nullopt);
    }
  }
  EXPECT_EQ(contents_of(*t), model);
  t.reopen();
  EXPECT_EQ(contents_of(*t), model);
  if constexpr (TypeParam::P::durable) {
    EXPECT_EQ(t->recovery_stats().live_slots, TypeParam::Of::live(*t, model.size()));
  }
}

// Three threads putting and removing four keys: a put that inserts and a remove that succeeds each
// change their key's presence, so per key their counts differ by its final presence (a put that
// replaces and a remove that both took the same node would break it).
TYPED_TEST(MapPut, PutsAndRemovesOfFewKeysLinearize) {
  Instance<typename TypeParam::S> t;
  pmds::test::expect_changes_match_presence(*t, 4, 3000,
                                            [&](int, std::mt19937_64& rng, Key k, Value i) -> int {
                                              if (rng() % 2 == 0) return t->put(k, i) ? 1 : 0;
                                              return t->remove(k) ? -1 : 0;
                                            });
}

// ---- The skip list's scan ----------------------------------------------------------------------

template <class P>
class SkipListScan : public ::testing::Test {};
TYPED_TEST_SUITE(SkipListScan, AllPolicies);

// After inserts, replacements and removes, every scan (from below, at, between and past the keys;
// short and long) visits the model's keys >= from in order with their values; range() the same.
TYPED_TEST(SkipListScan, ScansMatchAModel) {
  Instance<SkipList<TypeParam>> t;
  std::map<Key, Value> model;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 3000; ++i) {
    const Key k = 1 + 3 * (rng() % 300);  // gaps, so that a scan may start between keys
    if (rng() % 3 == 0) {
      t->remove(k);
      model.erase(k);
    } else {
      t->put(k, i);
      model[k] = i;
    }
  }
  for (const Key from :
       {Key{0}, Key{1}, Key{2}, Key{450}, Key{451}, Key{898}, Key{899}, Key{5000}}) {
    for (const std::size_t max_count :
         {std::size_t{0}, std::size_t{1}, std::size_t{17}, model.size() + 1}) {
      std::vector<std::pair<Key, Value>> seen, expected;
      const std::size_t n =
          t->scan(from, max_count, [&](Key k, Value v) { seen.emplace_back(k, v); });
      for (auto it = model.lower_bound(std::max(from, min_user_key));
           it != model.end() && expected.size() < max_count; ++it)
        expected.emplace_back(*it);
      EXPECT_EQ(n, seen.size());
      EXPECT_EQ(seen, expected) << "from " << from << ", at most " << max_count;
    }
  }
  std::vector<std::pair<Key, Value>> ranged;
  for (const auto& kv : t->range(100, 700)) ranged.push_back(kv);
  const std::vector<std::pair<Key, Value>> in_range(model.lower_bound(100), model.lower_bound(700));
  EXPECT_EQ(ranged, in_range);
}

// One thread scans the whole list again and again while another puts and removes the odd keys:
// every scan sees each even key (present throughout) with its value, in ascending order. The
// writer goes on until the scanner has made its scans, so that they overlap however the two
// threads are scheduled.
TYPED_TEST(SkipListScan, ScansWhileOthersWriteSeeTheStableKeysInOrder) {
  Instance<SkipList<TypeParam>> t;
  constexpr Key keys = 200;
  const int min_scans = TypeParam::durable ? 20 : 200;
  const int min_writes = TypeParam::durable ? 3000 : 30000;
  for (Key k = 2; k <= keys; k += 2) t->insert(k, k * 10);
  std::atomic<int> scans{0};
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::mt19937_64 rng(3);
    for (int i = 0; i < min_writes || scans.load() < min_scans; ++i) {
      const Key k = 1 + 2 * (rng() % (keys / 2));
      if (rng() % 2 == 0)
        t->put(k, rng());
      else
        t->remove(k);
    }
    done.store(true);
  });
  while (!done.load()) {
    std::vector<Key> seen;
    t->scan(min_user_key, keys + 1, [&](Key k, Value v) {
      if (k % 2 == 0) {
        EXPECT_EQ(v, k * 10);
      }
      seen.push_back(k);
    });
    ASSERT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    ASSERT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
    ASSERT_EQ(std::count_if(seen.begin(), seen.end(), [](Key k) { return k % 2 == 0; }),
              static_cast<std::ptrdiff_t>(keys / 2));
    scans.fetch_add(1);
  }
  writer.join();
}

// ---- What one structure has --------------------------------------------------------------------

TEST(HashTable, BadBucketCountIsAnError) {
  EXPECT_THROW(MichaelHashTable<transient>(0), Error);
}

TEST(HashTable, ManySegments) {
  // More buckets than one segment holds, so bucket indexing crosses segments.
  Instance<MichaelHashTable<izraelevitz>> table(3 * MichaelHashTable<izraelevitz>::segment_buckets +
                                                5);
  set_sequential(*table);
}

// A head is never deleted, so a mark on its link is damage: recovery must report it. It once
// accepted it, and every later search retried its unlinking CAS on the head forever (found by
// the damaged-pool soak, PMDS_SOAK=1 RegistryDamagedPool). `word_of(anchor)` is the head link's
// word.
template <class D, class WordOf>
void marked_head_link_is_pool_corrupt(WordOf word_of) {
  TempPath path("algo-marked-head");
  const std::string layout = Instance<D>::layout();
  {
    auto pool = pm::Pool::create(path.str(), pool_size, layout);
    D s(create_new, pool);
    for (Key k = 1; k <= 10; ++k) s.insert(k, value_of(k));
  }
  {
    auto pool = pm::Pool::open(path.str(), layout);
    auto* anchor = reinterpret_cast<std::uint64_t*>(pool.root(0).load());
    ASSERT_EQ(anchor[0], D::kind);
    std::uint64_t* word = word_of(anchor);
    ASSERT_TRUE(pool.allocator().owns(reinterpret_cast<void*>(*word)));
    *word |= mark_bit;
  }
  auto pool = pm::Pool::open(path.str(), layout);
  EXPECT_THROW(D(open_existing, pool), PoolCorrupt);
}

TEST(ListRecovery, MarkedHeadLinkIsPoolCorrupt) {
  // The anchor is {kind, head link}, 8-byte words under this policy.
  marked_head_link_is_pool_corrupt<HarrisMichaelList<izraelevitz>>(
      [](std::uint64_t* anchor) { return &anchor[1]; });
}

TEST(SkipListRecovery, MarkedHeadLinkIsPoolCorrupt) {
  // The anchor is {kind, head}; the head node {key, value, height 20, owners, next(0), ...},
  // 8-byte words under this policy.
  marked_head_link_is_pool_corrupt<SkipList<izraelevitz>>([](std::uint64_t* anchor) {
    auto* head = reinterpret_cast<std::uint64_t*>(anchor[1]);
    EXPECT_EQ(head[2], 20u);
    return &head[4];
  });
}

}  // namespace
}  // namespace pmds::algo

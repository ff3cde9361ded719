// Every structure pmds/pmds.hpp names, through its entry point: open_or_create makes a new pool,
// a clean close keeps what was written, a process killed with SIGKILL (after sync() where the
// structure is buffered) loses nothing that returned, and the next open_or_create recovers it
// all. One typed test per public alias, whatever its kind (sets, maps, byte-string maps, queues,
// stacks, priority queues, registers). Release only (no label): it checks the entry point's
// wiring; each structure's recovery runs under the sanitizers in its own tests, and compiling all
// of them once more under AddressSanitizer would add a compilation of every structure there.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "pmds/pmds.hpp"
#include "support/child_process.hpp"
#include "support/temp_path.hpp"

namespace {

using namespace pmds;

constexpr std::uint64_t kPoolSize = 64u << 20;
constexpr int kPerPhase = 10;  // elements written before the clean close, and again before kill

std::string key_text(int i) {
  return "key-" + std::to_string(i);
}
std::string value_text(int i) {
  return std::string(static_cast<std::size_t>(i), 'v') + "!";
}

// Writes elements first..last (each kind its own way).
template <class S>
void write(S& s, int first, int last) {
  for (int i = first; i <= last; ++i) {
    const auto k = static_cast<Key>(i);
    if constexpr (ByteStringMap<S>)
      ASSERT_TRUE(s.put(key_text(i), value_text(i)));
    else if constexpr (Set<S>)
      ASSERT_TRUE(s.insert(k, k * 10));
    else if constexpr (Queue<S>)
      s.enqueue(k);
    else if constexpr (Stack<S>)
      s.push(k);
    else if constexpr (PriorityQueue<S>)
      s.insert(k);
    else if constexpr (Register<S>)
      s.fetch_multiply(2.0);
    else
      static_assert(sizeof(S) == 0, "a public alias of a kind this test does not know");
  }
  if constexpr (Syncable<S>) s.sync();  // buffered: everything so far durable
}

// Checks that elements 1..n, and nothing else, are there (consuming them where reading does).
template <class S>
void expect_all(S& s, int n) {
  for (int i = 1; i <= n; ++i) {
    const auto k = static_cast<Key>(i);
    if constexpr (ByteStringMap<S>) {
      EXPECT_EQ(s.get(key_text(i)), value_text(i)) << i;
    } else if constexpr (Map<S>) {
      EXPECT_EQ(s.get(k), k * 10) << i;
    } else if constexpr (Set<S>) {
      EXPECT_TRUE(s.contains(k)) << i;
    } else if constexpr (Queue<S>) {
      EXPECT_EQ(s.dequeue(), k);  // first in, first out
    } else if constexpr (Stack<S>) {
      EXPECT_EQ(s.pop(), static_cast<Key>(n + 1 - i));  // last in, first out
    } else if constexpr (PriorityQueue<S>) {
      EXPECT_EQ(s.delete_min(), k);
    }
  }
  if constexpr (ByteStringMap<S>) {
    EXPECT_FALSE(s.contains(key_text(n + 1)));
  } else if constexpr (Set<S>) {
    EXPECT_FALSE(s.contains(static_cast<Key>(n + 1)));
  } else if constexpr (Queue<S>) {
    EXPECT_EQ(s.dequeue(), std::nullopt);
  } else if constexpr (Stack<S>) {
    EXPECT_EQ(s.pop(), std::nullopt);
  } else if constexpr (PriorityQueue<S>) {
    EXPECT_EQ(s.delete_min(), std::nullopt);
  } else if constexpr (Register<S>) {
    EXPECT_EQ(s.read(), static_cast<double>(1ull << n));  // 1.0 doubled n times
  }
}

template <class S>
class PublicApi : public ::testing::Test {};

using Aliases = ::testing::Types<
    LinkFreeList, LinkFreeHashSet, LinkFreeSkipList, SoftList, SoftHashSet, SoftSkipList,
    MontageHashMap, MontageSkipList, MontageTree, MontageSplitOrderedHashMap, MontageQueue,
    SoftStringHashMap, SoftStringSkipList, MontageByteStringHashMap, MontageByteStringSkipList,
    InCLLMasstree, LoggingMasstree, InCLLStringMasstree, LoggingStringMasstree, MirrorList,
    MirrorHashSet, MirrorSkipList, MirrorTree, MirrorQueue, MirrorStack, MirrorAtomicFloat,
    IzraelevitzList, IzraelevitzHashSet, IzraelevitzSkipList, IzraelevitzTree, IzraelevitzQueue,
    IzraelevitzStack, IzraelevitzAtomicFloat, PBCombStack, PBCombQueue, PBCombHeap,
    PBCombAtomicFloat, PWFCombStack, PWFCombQueue, PWFCombHeap, PWFCombAtomicFloat>;
TYPED_TEST_SUITE(PublicApi, Aliases);

TYPED_TEST(PublicApi, CreatesClosesSurvivesSigkillAndRecovers) {
  using S = TypeParam;
  pmds::test::TempPath path("public-api");
  {
    auto s = open_or_create<S>(path.str(), kPoolSize);
    EXPECT_FALSE(s.recovered());
    write(*s, 1, kPerPhase);
  }  // a clean close

  // A child reopens it, writes more and dies of SIGKILL with the pool open.
  pmds::test::in_child_killed_by_sigkill([&] {
    auto s = open_or_create<S>(path.str(), kPoolSize);
    ASSERT_TRUE(s.recovered());
    write(*s, kPerPhase + 1, 2 * kPerPhase);
  });

  auto s = open_or_create<S>(path.str(), kPoolSize);
  EXPECT_TRUE(s.recovered());
  expect_all(*s, 2 * kPerPhase);
}

// A file made for one structure is refused by another before anything is read, and left as it
// was.
TEST(PublicApiErrors, APoolOfAnotherStructureIsRefusedAndKept) {
  pmds::test::TempPath path("public-api");
  {
    auto map = open_or_create<InCLLStringMasstree>(path.str(), kPoolSize);
    ASSERT_TRUE(map->put("k", "v"));
    map->sync();
  }
  try {
    auto set = open_or_create<LinkFreeHashSet>(path.str(), kPoolSize);
    FAIL() << "a masstree-bytes/incll pool opened as hash/linkfree";
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::layout_mismatch);
  }
  auto map = open_or_create<InCLLStringMasstree>(path.str(), kPoolSize);
  EXPECT_EQ(map->get("k"), std::string("v"));
}

// A structure's own create arguments pass through: a hash table's bucket count (kept in the
// pool), and nbMontage's options at create and at open (here: no background thread, so the epoch
// stands still unless sync() advances it).
TEST(PublicApiArguments, CreateArgumentsReachTheStructure) {
  pmds::test::TempPath path("public-api");
  montage::Options options;
  options.background_thread = false;
  options.epoch_length = std::chrono::microseconds(1000);
  const auto epoch_stands_still = [](const MontageHashMap& map) {
    const std::uint64_t before = map.epoch();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return map.epoch() == before;
  };
  {
    auto map = open_or_create<MontageHashMap>(path.str(), kPoolSize, std::size_t{64}, options);
    EXPECT_EQ(map->bucket_count(), 64u);
    EXPECT_TRUE(epoch_stands_still(*map));
    ASSERT_TRUE(map->insert(5, 50));
    map->sync();
  }
  auto map = open_or_create<MontageHashMap>(path.str(), kPoolSize, std::size_t{64}, options);
  EXPECT_EQ(map->bucket_count(), 64u);
  EXPECT_TRUE(epoch_stands_still(*map));
  EXPECT_EQ(map->get(5), Value{50});

  pmds::test::TempPath set_path("public-api");
  EXPECT_EQ(open_or_create<LinkFreeHashSet>(set_path.str(), kPoolSize)->bucket_count(),
            LinkFreeHashSet::default_bucket_count);
}

// The names by contract (pmds.hpp) promise a criterion and a key type; each keeps it.
TEST(PublicApiContracts, EachNameKeepsItsPromise) {
  static_assert(DurableHashMap::criterion == Criterion::durable && Map<DurableHashMap>);
  static_assert(DurableOrderedMap::criterion == Criterion::durable && Map<DurableOrderedMap> &&
                Scannable<DurableOrderedMap>);
  static_assert(DurableStringHashMap::criterion == Criterion::durable &&
                ByteStringMap<DurableStringHashMap>);
  static_assert(DurableStringOrderedMap::criterion == Criterion::durable &&
                ByteStringMap<DurableStringOrderedMap>);
  static_assert(BufferedHashMap::criterion == Criterion::buffered && Map<BufferedHashMap> &&
                Syncable<BufferedHashMap>);
  static_assert(BufferedOrderedMap::criterion == Criterion::buffered &&
                Scannable<BufferedOrderedMap> && Syncable<BufferedOrderedMap>);
  static_assert(BufferedStringHashMap::criterion == Criterion::buffered &&
                ByteStringMap<BufferedStringHashMap> && Syncable<BufferedStringHashMap>);
  static_assert(BufferedStringOrderedMap::criterion == Criterion::buffered &&
                ByteStringMap<BufferedStringOrderedMap> && Syncable<BufferedStringOrderedMap>);
  static_assert(DetectableQueue::criterion == Criterion::detectable && Queue<DetectableQueue>);
  static_assert(DetectableStack::criterion == Criterion::detectable && Stack<DetectableStack>);
  static_assert(DetectablePriorityQueue::criterion == Criterion::detectable &&
                PriorityQueue<DetectablePriorityQueue>);
  // A durable string map through the entry point: update() reads and writes one key atomically.
  pmds::test::TempPath path("public-api");
  {
    auto m = open_or_create<DurableStringHashMap>(path.str(), kPoolSize);
    EXPECT_TRUE(m->put("visits", "1"));
    EXPECT_TRUE(m->update("visits", [](std::optional<std::string_view> v) {
      return std::optional<std::string>(std::to_string(std::stoi(std::string(*v)) + 1));
    }));
  }
  auto again = open_or_create<DurableStringHashMap>(path.str(), kPoolSize);
  EXPECT_TRUE(again.recovered());
  EXPECT_EQ(again->get("visits"), "2");
}

// A structure whose recovery fails on demand (the test's own, named for open_or_create).
struct FailingRecovery {
  static inline bool fail = false;
  bool found_clean = false;
  FailingRecovery(CreateTag, pm::Pool&) {}
  FailingRecovery(OpenTag, pm::Pool& pool) : found_clean(pool.was_clean_shutdown()) {
    if (fail) throw PoolError(PoolErrc::corrupt_structure, "test: recovery fails");
  }
};

}  // namespace

template <>
inline constexpr std::string_view pmds::pool_layout<FailingRecovery> = "test/failing-recovery";

namespace {

// A recovery that throws leaves the pool as unclean as it found it: the next open recovers
// again (InCLL, for one, keeps its failed epoch's undo only after an unclean shutdown).
TEST(PublicApiErrors, AFailedRecoveryLeavesThePoolUnclean) {
  pmds::test::TempPath path("public-api");
  open_or_create<FailingRecovery>(path.str(), kPoolSize).close();
  pmds::test::in_child_killed_by_sigkill([&] {
    auto s = open_or_create<FailingRecovery>(path.str(), kPoolSize);  // killed open: unclean
  });

  FailingRecovery::fail = true;
  EXPECT_THROW(open_or_create<FailingRecovery>(path.str(), kPoolSize), PoolError);
  FailingRecovery::fail = false;
  auto s = open_or_create<FailingRecovery>(path.str(), kPoolSize);
  EXPECT_TRUE(s.recovered());
  EXPECT_FALSE(s->found_clean);
}

}  // namespace

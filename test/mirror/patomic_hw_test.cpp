// labels: concurrent
// pmds tests — Mirror's pieces under the hardware backend: the pool's volatile twin, and
// patomic<T> as an atomic word under threads (Mirror §4.1, Lemma 5.2), with both replicas
// equal at rest (Lemmas 5.4-5.5). The structures themselves run every algo/ test under Mirror
// (test/algo: AllPolicies) and the crash lab (crashlab tests, every durable registry entry).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <new>
#include <thread>
#include <vector>

#include "pmds/mirror/policy.hpp"
#include "support/temp_path.hpp"

namespace {

using namespace pmds;
using Mirror = mirror::MirrorPolicy<>;
using mirror::patomic;

constexpr std::size_t pool_size = 16u << 20;

// A Mirror memory over a fresh pool, and a patomic in one of its slots.
struct MirrorWord {
  pmds::test::TempPath path{"mirror_word"};
  pm::Pool pool = pm::Pool::create(path.str(), pool_size, "test/mirror", Mirror::pool_options());
  Mirror::Memory memory{pool, 0};
  patomic<std::uint64_t>* word = nullptr;

  explicit MirrorWord(std::uint64_t initial) {
    word = new (memory.allocate(sizeof *word)) patomic<std::uint64_t>;
    word->init(initial);
    memory.publish(word, sizeof *word);
  }
  // The persistent replica's words {value, sequence}.
  pm::WordPair persistent() const {
    return static_cast<const pm::atomic_pair*>(mirror::pool_of(word))->peek();
  }
  pm::WordPair volatile_replica() const {
    return static_cast<const pm::atomic_pair*>(static_cast<const void*>(word))->peek();
  }
};

TEST(MirrorTwin, LivesAtAFixedOffsetFromThePoolAndIsZeroAtEveryOpen) {
  MirrorWord w(5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w.word) -
                reinterpret_cast<std::uintptr_t>(mirror::pool_of(w.word)),
            pm::twin_offset);
  EXPECT_EQ(w.word->load(), 5u);
  EXPECT_EQ(w.persistent(), (pm::WordPair{5, 0}));  // publish copied the DRAM-built word
}

TEST(MirrorTwin, ASecondTwinOfAnOpenPoolIsATypedError) {
  MirrorWord w(1);
  try {
    Mirror::Memory again(w.pool, 0);
    FAIL() << "a second twin of the same pool was mapped";
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::base_unavailable);
    EXPECT_NE(std::string(e.what()).find("Mirror replica"), std::string::npos) << e.what();
  }
}

TEST(MirrorTwin, AnExplicitBaseWhoseTwinRangeIsTakenIsRefusedAndLeavesNoFile) {
  // A base whose pool and twin ranges are free: one a Mirror pool got, released again.
  std::uintptr_t base = 0;
  {
    pmds::test::TempPath first("mirror_first");
    auto p = pm::Pool::create(first.str(), pool_size, "test/mirror", Mirror::pool_options());
    base = reinterpret_cast<std::uintptr_t>(p.base());
  }
  // Something else takes the twin's range.
  void* squatter = ::mmap(reinterpret_cast<void*>(base + pm::twin_offset), 4096, PROT_READ,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(squatter, reinterpret_cast<void*>(base + pm::twin_offset));
  pm::PoolOptions o = Mirror::pool_options();
  o.base = base;
  pmds::test::TempPath path("mirror_refused");
  try {
    (void)pm::Pool::create(path.str(), pool_size, "test/mirror", o);
    ADD_FAILURE() << "created a Mirror pool whose twin range is taken";
  } catch (const PoolError& e) {
    EXPECT_EQ(e.code(), PoolErrc::base_unavailable) << e.what();
  }
  EXPECT_NE(::access(path.str().c_str(), F_OK), 0) << "a refused create left a file";
  ::munmap(squatter, 4096);
  // Without the twin option the same base is fine: the check is the twin's.
  o.twin = false;
  EXPECT_NO_THROW((void)pm::Pool::create(path.str(), pool_size, "test/mirror", o));
}

// §6.3's variant: the volatile replica in a file beside the pool, unlinked once mapped.
TEST(MirrorTwin, OnThePoolsMediumLeavesNoFileBehind) {
  using BothInPool = mirror::MirrorBothInPoolPolicy;
  pmds::test::TempPath path("mirror_pm");
  auto pool = pm::Pool::create(path.str(), pool_size, "test/mirror", BothInPool::pool_options());
  const auto dir = std::filesystem::path(path.str()).parent_path();
  const auto twin_files = [&] {
    int n = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir))
      n += f.path().filename().string().rfind(
               std::filesystem::path(path.str()).filename().string() + ".twin-", 0) == 0;
    return n;
  };
  {
    BothInPool::Memory memory(pool, 0);
    auto* word = new (memory.allocate(sizeof(patomic<std::uint64_t>))) patomic<std::uint64_t>;
    word->init(7);
    memory.publish(word, sizeof *word);
    std::uint64_t expected = 7;
    EXPECT_TRUE(word->compare_exchange(expected, 8));
    EXPECT_EQ(word->load(), 8u);
    EXPECT_EQ(twin_files(), 0);
  }
  EXPECT_EQ(twin_files(), 0);
}

TEST(Patomic, CompareExchangeFailsWithTheCurrentValueAndSucceedsOnIt) {
  MirrorWord w(10);
  std::uint64_t expected = 3;
  EXPECT_FALSE(w.word->compare_exchange(expected, 4));
  EXPECT_EQ(expected, 10u);
  EXPECT_TRUE(w.word->compare_exchange(expected, 11));
  EXPECT_EQ(w.word->load(), 11u);
  w.word->store(12);
  EXPECT_EQ(w.word->load(), 12u);
  EXPECT_EQ(w.persistent(), (pm::WordPair{12, 2}));  // one sequence number per change
  EXPECT_EQ(w.volatile_replica(), w.persistent());
}

// Lemma 5.2: patomic is a linearizable atomic word. Threads add through CAS loops; no update is
// lost, and at rest the replicas hold the same value and sequence, one per change.
TEST(Patomic, ConcurrentIncrementsLoseNothingAndLeaveTheReplicasEqual) {
  MirrorWord w(0);
  constexpr int threads = 4;
  constexpr int per_thread = 20000;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        std::uint64_t seen = w.word->load();
        while (!w.word->compare_exchange(seen, seen + 1)) {
        }
      }
    });
  for (auto& t : workers) t.join();
  constexpr std::uint64_t total = std::uint64_t{threads} * per_thread;
  EXPECT_EQ(w.word->load(), total);
  EXPECT_EQ(w.persistent(), (pm::WordPair{total, total}));
  EXPECT_EQ(w.volatile_replica(), w.persistent());
}

}  // namespace

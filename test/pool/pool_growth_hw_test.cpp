// labels: memory concurrent
// Pools that grow (issue 53): a pool created small with a max_size grows in place when its
// chunks run out, keeps its base (so every pointer stays valid), records its size durably, and
// fails with PoolFull, losing nothing, at its limit or when the file system refuses the space.
// Open trims a growth a crash interrupted and refuses files changed by someone else.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "pmds/pm/pool.hpp"
#include "support/child_process.hpp"
#include "support/file_state.hpp"
#include "support/temp_path.hpp"

namespace pm = pmds::pm;
namespace format = pmds::pm::format;
using pmds::test::TempPath;

namespace {

constexpr std::size_t kChunk = std::size_t{64} << 10;
constexpr std::size_t kInitial = std::size_t{1} << 20;
constexpr std::size_t kMax = std::size_t{16} << 20;
constexpr std::size_t kSlot = 4096;

pm::PoolOptions growing(std::size_t max_size = kMax) {
  pm::PoolOptions o;
  o.chunk_size = kChunk;
  o.max_size = max_size;
  return o;
}

off_t file_size(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return st.st_size;
}

// The most a pool limited to max_size grows to: its last whole chunk.
void expect_limit_near(std::size_t got, std::size_t max_size) {
  EXPECT_LE(got, max_size);
  EXPECT_GT(got, max_size - kChunk);
}

// Opening the pool at `path` (with `max_size`) fails with PoolError `code`; `what` names the
// case in the failure message.
void expect_open_fails(const std::string& path, pmds::PoolErrc code, const char* what,
                       std::size_t max_size = 0) {
  try {
    pm::Pool::open(path, "test/grow", max_size);
    ADD_FAILURE() << what << " was accepted";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
  }
}

// Allocates kSlot-byte slots until PoolFull, writing each slot's own address into it.
std::vector<void*> fill(pm::Pool& pool) {
  std::vector<void*> slots;
  try {
    for (;;) {
      void* p = pool.allocator().allocate(kSlot);
      std::memcpy(p, &p, sizeof p);
      pm::persist(p, sizeof p);
      slots.push_back(p);
    }
  } catch (const pmds::PoolFull&) {
  }
  return slots;
}

TEST(PoolGrowth, GrowsInPlaceToItsLimitThenReportsFull) {
  TempPath path("grow");
  pm::Pool pool = pm::Pool::create(path, kInitial, "test/grow", growing());
  void* const base = pool.base();
  const std::size_t first_size = pool.size();
  EXPECT_LE(first_size, kInitial);
  expect_limit_near(pool.max_size(), kMax);
  EXPECT_EQ(pool.growths(), 0u);
  EXPECT_EQ(static_cast<std::size_t>(file_size(path)), first_size);

  const std::vector<void*> slots = fill(pool);
  EXPECT_EQ(pool.base(), base);  // in place: no pointer moved
  EXPECT_EQ(pool.size(), pool.max_size());
  EXPECT_EQ(static_cast<std::size_t>(file_size(path)), pool.size());
  // Doubling from ~14 chunks to 255: a logarithmic number of growths, not one per chunk.
  EXPECT_GE(pool.growths(), 4u);
  EXPECT_LE(pool.growths(), 6u);
  EXPECT_EQ(pool.allocator().free_chunks(), 0u);
  // Every slot of every chunk, each once, each still holding what was written to it.
  EXPECT_EQ(slots.size(), pool.allocator().chunk_count() * (kChunk / kSlot));
  std::set<void*> distinct(slots.begin(), slots.end());
  EXPECT_EQ(distinct.size(), slots.size());
  for (void* p : slots) {
    void* q = nullptr;
    std::memcpy(&q, p, sizeof q);
    ASSERT_EQ(q, p);
  }
  // Full at the limit: a clear error; the pool stays open, frees and reuse go on.
  try {
    pool.allocator().allocate(kSlot);
    FAIL() << "no PoolFull at the limit";
  } catch (const pmds::PoolFull& e) {
    EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
  }
  pool.allocator().free(slots.back());
  EXPECT_EQ(pool.allocator().allocate(kSlot), slots.back());
}

// Growth ahead of need (pm/allocator.hpp's header): the claim that leaves an eighth of the
// chunks unclaimed starts the growth on a thread of its own; it completes with no further
// allocation, before any thread finds the pool full.
TEST(PoolGrowth, GrowsAheadOfNeedBeforeAnyClaimFindsThePoolFull) {
  TempPath path("grow-ahead");
  pm::Pool pool = pm::Pool::create(path, kInitial, "test/grow", growing());
  pm::ChunkAllocator& a = pool.allocator();
  const std::size_t count = a.chunk_count();
  const std::size_t headroom = std::max<std::size_t>(1, count / 8);
  ASSERT_GT(count, headroom + 1);
  std::vector<void*> slots;
  while (a.used_chunks() + headroom < count) slots.push_back(a.allocate(kSlot));
  EXPECT_EQ(a.used_chunks(), count - headroom);  // the claim that started it
  EXPECT_GT(a.free_chunks(), 0u);                // no claim has found the pool full
  for (int i = 0; i < 1000 && pool.growths() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(pool.growths(), 1u);
  EXPECT_EQ(a.chunk_count(), 2 * count);  // one step: the pool doubled
  EXPECT_EQ(a.used_chunks(), count - headroom);
  // The rest of the fill to the limit: every growth ahead, doubling, as on demand.
  fill(pool);
  EXPECT_EQ(pool.size(), pool.max_size());
  EXPECT_LE(pool.growths(), 6u);
}

TEST(PoolGrowth, AGrownPoolReopensWithItsSizeContentsAndHistory) {
  TempPath path("grow-reopen");
  void* base = nullptr;
  std::size_t count = 0, growths = 0;
  void* last = nullptr;
  {
    pm::Pool pool = pm::Pool::create(path, kInitial, "test/grow", growing());
    base = pool.base();
    const std::vector<void*> slots = fill(pool);
    last = slots.back();
    // A link from the first chunk into the last one, as a structure's would be.
    pool.root(0).store(reinterpret_cast<std::uint64_t>(last));
    pm::persist(&pool.root(0), 8);
    count = pool.allocator().chunk_count();
    growths = pool.growths();
  }
  const pm::PoolInfo info = pm::inspect_pool(path);
  expect_limit_near(info.size, kMax);
  EXPECT_EQ(info.max_size, info.size);
  EXPECT_LE(info.created_size, kInitial);
  EXPECT_EQ(info.growths, growths);
  EXPECT_EQ(info.chunk_count, count);
  EXPECT_EQ(info.used_chunks, count);

  pm::Pool pool = pm::Pool::open(path, "test/grow");
  EXPECT_EQ(pool.base(), base);
  EXPECT_EQ(pool.size(), info.size);
  EXPECT_EQ(pool.growths(), growths);
  EXPECT_EQ(pool.allocator().chunk_count(), count);
  auto* p = reinterpret_cast<void*>(pool.root(0).load());
  ASSERT_EQ(p, last);
  void* q = nullptr;
  std::memcpy(&q, p, sizeof q);
  EXPECT_EQ(q, last);
  // Recovery sees every slot of every chunk, the grown ones too.
  std::size_t live = 0;
  const auto stats = pool.allocator().recover([&](void* slot, std::size_t) {
    void* v = nullptr;
    std::memcpy(&v, slot, sizeof v);
    live += v == slot;
    return v == slot;
  });
  EXPECT_EQ(stats.used_chunks, count);
  EXPECT_EQ(live, count * (kChunk / kSlot));
}

TEST(PoolGrowth, ThreadsGrowItOnceAtATimeAndNeverHandOutASlotTwice) {
  TempPath path("grow-threads");
  pm::Pool pool = pm::Pool::create(path, kInitial, "test/grow", growing());
  constexpr int kThreads = 4;
  std::vector<std::vector<void*>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (;;) {
          void* p = pool.allocator().allocate(kSlot);
          std::memcpy(p, &p, sizeof p);
          got[t].push_back(p);
        }
      } catch (const pmds::PoolFull&) {
      }
    });
  for (auto& th : threads) th.join();
  std::set<void*> all;
  std::size_t total = 0;
  for (const auto& v : got) {
    total += v.size();
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(all.size(), total);
  EXPECT_EQ(pool.size(), pool.max_size());
  EXPECT_LE(pool.growths(), 6u);  // each growth at least doubles: no thread grew it twice over
  // Each thread ends with at most one partly used chunk; every other chunk is whole.
  EXPECT_GE(total, (pool.allocator().chunk_count() - kThreads) * (kChunk / kSlot));
}

TEST(PoolGrowth, AnInterruptedGrowthIsTrimmedAndAForeignLengthIsRefused) {
  TempPath path("grow-crash");
  std::size_t size = 0;
  {
    pm::Pool pool = pm::Pool::create(path, kInitial, "test/grow", growing());
    size = pool.size();
  }
  // A crash after the growth line said "pending" and the file was extended, before the header
  // said the chunks exist: open trims the file back and forgets the growth.
  const pm::PoolInfo before = pm::inspect_pool(path);
  const std::uint64_t pending = before.chunk_count * 2;
  pmds::test::patch_file(path, format::growth_offset + offsetof(format::GrowthLine, pending),
                         &pending, sizeof pending);
  ASSERT_EQ(::truncate(path.str().c_str(), static_cast<off_t>(size + 3 * kChunk)), 0);
  EXPECT_EQ(pm::inspect_pool(path).growth_pending, pending);  // what `pmds inspect` shows
  {
    pm::Pool pool = pm::Pool::open(path, "test/grow");
    EXPECT_EQ(pool.size(), size);
    EXPECT_EQ(pool.growths(), 0u);
  }
  EXPECT_EQ(static_cast<std::size_t>(file_size(path)), size);
  EXPECT_EQ(pm::inspect_pool(path).size, size);
  EXPECT_EQ(pm::inspect_pool(path).growth_pending, 0u);

  // Longer with no growth under way: someone else changed the file.
  ASSERT_EQ(::truncate(path.str().c_str(), static_cast<off_t>(size + kChunk)), 0);
  expect_open_fails(path, pmds::PoolErrc::size_mismatch, "a foreign extension");
  // Shorter than the header says: truncated.
  ASSERT_EQ(::truncate(path.str().c_str(), static_cast<off_t>(size - kChunk)), 0);
  expect_open_fails(path, pmds::PoolErrc::truncated, "a truncated pool");
}

TEST(PoolGrowth, AGrowthLineThatDoesNotAddUpIsRefused) {
  TempPath path("grow-bad-line");
  pm::Pool::create(path, kInitial, "test/grow", growing()).close();
  // A limit beyond the directory's room.
  const std::uint64_t huge = std::uint64_t{1} << 40;
  pmds::test::patch_file(path, format::growth_offset + offsetof(format::GrowthLine, limit), &huge,
                         sizeof huge);
  expect_open_fails(path, pmds::PoolErrc::corrupted,
                    "a growth line with a limit past the directory");
}

TEST(PoolGrowth, OpenRaisesTheLimitWithinTheDirectoryAndRefusesMore) {
  TempPath path("grow-limit");
  {
    pm::Pool pool = pm::Pool::create(path, kInitial, "test/grow", growing(kMax / 2));
    expect_limit_near(pool.max_size(), kMax / 2);
  }
  {
    pm::Pool pool = pm::Pool::open(path, "test/grow");  // keeps its own limit
    expect_limit_near(pool.max_size(), kMax / 2);
  }
  {
    pm::Pool pool = pm::Pool::open(path, "test/grow", kMax / 4);  // smaller: ignored
    expect_limit_near(pool.max_size(), kMax / 2);
  }
  // The directory of a pool made to grow to 8 MiB in 64 KiB chunks fills one page: room for
  // 512 chunks, a little over 32 MiB.
  {
    pm::Pool pool = pm::Pool::open(path, "test/grow", 3 * kMax / 2);
    expect_limit_near(pool.max_size(), 3 * kMax / 2);
    fill(pool);
    EXPECT_EQ(pool.size(), pool.max_size());
  }
  expect_limit_near(pm::inspect_pool(path).max_size, 3 * kMax / 2);
  try {
    pm::Pool::open(path, "test/grow", std::size_t{1} << 30);
    FAIL() << "a limit past the directory's room was accepted";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), pmds::PoolErrc::bad_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
  }
  // A pool created without a max_size never grows, and says so.
  TempPath fixed("grow-fixed");
  pm::PoolOptions o;
  o.chunk_size = kChunk;
  pm::Pool::create(fixed, kInitial, "test/grow", o).close();
  try {
    pm::Pool::open(fixed, "test/grow", kMax);
    FAIL() << "a fixed pool accepted a limit";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), pmds::PoolErrc::bad_argument) << e.what();
  }
  pm::Pool pool = pm::Pool::open(fixed, "test/grow");
  EXPECT_EQ(pool.max_size(), pool.size());
  fill(pool);
  EXPECT_EQ(pool.growths(), 0u);
  EXPECT_EQ(pool.size(), kInitial);
}

TEST(PoolGrowth, AnInitialSizeWithNoRoomBesideTheDirectoryIsABadArgument) {
  TempPath path("grow-tiny");
  try {
    pm::Pool::create(path, 8192, "test/grow", growing(std::size_t{1} << 30));
    FAIL() << "accepted";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), pmds::PoolErrc::bad_argument) << e.what();
  }
  EXPECT_NE(::access(path.str().c_str(), F_OK), 0);  // no file left behind
}

// The file system refuses the space (here the process's file-size limit, which posix_fallocate
// meets as EFBIG, as it would meet ENOSPC on a full disk): PoolFull, the pool stays open and
// whole, and the next growth succeeds once space returns.
TEST(PoolGrowth, NoSpaceIsPoolFullWithNothingLostAndGrowthResumesWhenSpaceReturns) {
  TempPath path("grow-nospace");
  const int code = pmds::test::run_in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);
    pm::Pool pool = pm::Pool::create(path, kInitial, "test/grow", growing());
    const std::size_t size = pool.size();
    rlimit lim{};
    ::getrlimit(RLIMIT_FSIZE, &lim);
    rlimit tight = lim;
    tight.rlim_cur = size + kChunk;  // less than the next growth (it doubles)
    if (::setrlimit(RLIMIT_FSIZE, &tight) != 0) return 10;
    std::vector<void*> slots = fill(pool);
    if (pool.size() != size || pool.growths() != 0) return 11;
    if (static_cast<std::size_t>(file_size(path)) != size) return 12;  // the attempt undone
    for (void* p : slots) {
      void* q = nullptr;
      std::memcpy(&q, p, sizeof q);
      if (q != p) return 13;
    }
    pool.allocator().free(slots.back());
    if (pool.allocator().allocate(kSlot) != slots.back()) return 14;
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 15;
    pool.allocator().allocate(kSlot);  // grows now
    if (pool.growths() != 1 || pool.size() <= size) return 16;
    pool.close();
    const pm::PoolInfo info = pm::inspect_pool(path);
    if (info.size != static_cast<std::size_t>(file_size(path)) || info.growths != 1) return 17;
    return 0;
  });
  EXPECT_EQ(code, 0);
}

// kill -9 while threads fill a growing pool: the next open finds a pool whose header, file and
// directory agree, whatever growth the kill interrupted.
TEST(PoolGrowth, AKillDuringGrowthLeavesAPoolThatOpens) {
  std::size_t grown = 0;
  for (int round = 0; round < 4; ++round) {
    TempPath path("grow-kill");
    pm::Pool::create(path, kInitial, "test/grow", growing(std::size_t{256} << 20)).close();
    // Killed 20-65 ms after the child has opened the pool (a kill timed from the fork could
    // land before the open on a loaded host, and find the pool as the parent closed it).
    pmds::test::killed_mid_run(
        1, 1,
        [&](std::atomic<std::uint64_t>* opened) {
          pm::Pool pool = pm::Pool::open(path, "test/grow");
          opened->store(1);
          std::thread other([&] { fill(pool); });
          fill(pool);
          other.join();
        },
        std::chrono::microseconds(20000 + 15000 * round));
    if (HasFailure()) return;  // the fill ended before the kill: kill it sooner
    pm::Pool pool = pm::Pool::open(path, "test/grow");
    EXPECT_FALSE(pool.was_clean_shutdown());
    EXPECT_EQ(static_cast<std::size_t>(file_size(path)), pool.size());
    grown += pool.growths();
    const auto stats = pool.allocator().recover([](void* slot, std::size_t) {
      void* v = nullptr;
      std::memcpy(&v, slot, sizeof v);
      return v == slot;
    });
    EXPECT_EQ(stats.used_chunks, pool.allocator().used_chunks());
    fill(pool);  // and it grows on to its limit
    EXPECT_EQ(pool.size(), pool.max_size());
  }
  EXPECT_GT(grown, 0u);  // the kills came while the pools were growing
}

}  // namespace

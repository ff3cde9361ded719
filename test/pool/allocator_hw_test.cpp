// labels: concurrent memory
// The chunk allocator under the hardware backend: slot sizes and alignment, distinct slots,
// reuse, concurrent threads, a full pool, recovery accounting, bad arguments.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include "pmds/pm/pool.hpp"
#include "support/child_process.hpp"
#include "support/temp_path.hpp"

namespace pm = pmds::pm;
using pmds::test::TempPath;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(Allocator, SlotSizesAreRoundedTo16) {
  EXPECT_EQ(pm::ChunkAllocator::slot_size_for(0), 16u);
  EXPECT_EQ(pm::ChunkAllocator::slot_size_for(1), 16u);
  EXPECT_EQ(pm::ChunkAllocator::slot_size_for(16), 16u);
  EXPECT_EQ(pm::ChunkAllocator::slot_size_for(17), 32u);
  EXPECT_EQ(pm::ChunkAllocator::slot_size_for(100), 112u);
  TempPath path("sizes");
  pm::Pool pool = pm::Pool::create(path, 16 * kMiB, "test/alloc");
  auto& a = pool.allocator();
  for (std::size_t n : {1, 16, 24, 64, 100, 128, 192, 4096}) {
    void* p = a.allocate(n);
    const std::size_t size = pm::ChunkAllocator::slot_size_for(n);
    EXPECT_EQ(a.slot_size_of(p), size);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << n;
    if (size % 64 == 0) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << n;
    }
    // Every slot of a chunk, not just the first, keeps the alignment.
    void* q = a.allocate(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % (size % 64 == 0 ? 64 : 16), 0u) << n;
  }
  EXPECT_EQ(a.used_chunks(), 7u);  // one chunk per slot size (1 and 16 share one)
}

// allocated_bytes() counts slots handed out and not freed, to the slot, over every size class.
TEST(Allocator, AllocatedBytesCountsSlotsNotChunks) {
  TempPath path("allocated");
  pm::Pool pool = pm::Pool::create(path, 16 * kMiB, "test/alloc");
  auto& a = pool.allocator();
  EXPECT_EQ(a.allocated_bytes(), 0u);
  std::vector<void*> small, large;
  for (int i = 0; i < 20000; ++i) small.push_back(a.allocate(64));  // two chunks of 64-byte slots
  for (int i = 0; i < 3; ++i) large.push_back(a.allocate(100));     // 112-byte slots
  EXPECT_EQ(a.allocated_bytes(), 20000u * 64 + 3 * 112);
  for (int i = 0; i < 500; ++i) a.free(small[i]);
  a.free(large[0]);
  EXPECT_EQ(a.allocated_bytes(), 19500u * 64 + 2 * 112);
}

TEST(Allocator, DistinctSlotsAndReuse) {
  TempPath path("distinct");
  pm::Pool pool = pm::Pool::create(path, 8 * kMiB, "test/alloc");
  auto& a = pool.allocator();
  std::set<char*> seen;
  std::vector<void*> slots;
  for (int i = 0; i < 20000; ++i) {  // more than one chunk of 64-byte slots (16384)
    auto* p = static_cast<char*>(a.allocate(64));
    EXPECT_TRUE(a.owns(p));
    EXPECT_TRUE(pool.contains(p));
    slots.push_back(p);
    seen.insert(p);
  }
  EXPECT_EQ(seen.size(), slots.size());
  // No two slots overlap: sorted, consecutive ones are at least 64 bytes apart.
  for (auto it = seen.begin(), next = std::next(it); next != seen.end(); ++it, ++next)
    EXPECT_GE(*next - *it, 64);
  EXPECT_EQ(a.used_chunks(), 2u);
  for (void* p : slots) a.free(p);
  const std::size_t used = a.used_chunks();
  std::set<void*> again;
  for (int i = 0; i < 20000; ++i) again.insert(a.allocate(64));
  EXPECT_EQ(again.size(), 20000u);
  // Reused: the freed slots and the rest of the claimed chunk (which comes first: this thread's
  // chunk keeps its addresses consecutive), no new chunk.
  EXPECT_EQ(a.used_chunks(), used);
  for (void* p : again) EXPECT_EQ(a.slot_size_of(p), 64u);
}

TEST(Allocator, ConcurrentThreadsGetDistinctSlots) {
  TempPath path("threads");
  pm::Pool pool = pm::Pool::create(path, 64 * kMiB, "test/alloc");
  auto& a = pool.allocator();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::vector<std::uint64_t*>> got(kThreads);
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      sync.arrive_and_wait();
      auto& mine = got[t];
      for (int i = 0; i < kPerThread; ++i) {
        auto* p = static_cast<std::uint64_t*>(a.allocate(i % 2 ? 64 : 48));
        const std::uint64_t stamp[2] = {std::uint64_t(t), std::uint64_t(i)};
        pm::write(p, stamp, sizeof stamp);
        mine.push_back(p);
        if (i % 3 == 0) {  // free some as we go: exercises the free lists concurrently
          std::uint64_t* victim = mine[mine.size() / 2];
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(mine.size() / 2));
          a.free(victim);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::unordered_set<std::uint64_t*> all;
  for (int t = 0; t < kThreads; ++t)
    for (std::uint64_t* p : got[t]) {
      EXPECT_TRUE(all.insert(p).second) << "slot handed out twice";
      EXPECT_EQ(p[0], std::uint64_t(t)) << "slot written by two threads";
    }
}

// A consumer frees what a producer allocates (a queue): the producer gets the slots back
// through the shared list instead of claiming chunk after chunk. Both threads live throughout
// (distinct thread ids), and the consumer frees in address order, so its frees merge into
// long runs that must still be handed over.
TEST(Allocator, CrossThreadFreesAreReused) {
  TempPath path("crossthread");
  pm::Pool pool = pm::Pool::create(path, 8 * kMiB, "test/alloc");  // 7 chunks
  auto& a = pool.allocator();
  constexpr int kRounds = 50;
  std::vector<void*> batch;
  std::barrier step(2);
  std::size_t producer_id = 0, consumer_id = 0;
  std::thread producer([&] {
    producer_id = pmds::thread_id();
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < 5000; ++i) batch.push_back(a.allocate(256));
      step.arrive_and_wait();  // the consumer frees the batch
      step.arrive_and_wait();
    }
  });
  std::thread consumer([&] {
    consumer_id = pmds::thread_id();
    for (int round = 0; round < kRounds; ++round) {
      step.arrive_and_wait();
      std::sort(batch.begin(), batch.end());
      for (void* p : batch) a.free(p);
      batch.clear();
      step.arrive_and_wait();
    }
  });
  producer.join();
  consumer.join();
  EXPECT_NE(producer_id, consumer_id);
  // 50 x 5000 x 256 bytes = 61 MiB went through a 7 MiB pool.
  EXPECT_LE(a.used_chunks(), 4u);
  EXPECT_EQ(a.free_slots(), a.used_chunks() * a.slots_per_chunk(256));
}

TEST(Allocator, FullPoolThrowsPoolFullAndStaysUsable) {
  TempPath path("full");
  pm::Pool pool = pm::Pool::create(path, pm::Pool::min_size(), "test/alloc");  // one chunk
  auto& a = pool.allocator();
  ASSERT_EQ(a.chunk_count(), 1u);
  const std::size_t per_chunk = a.slots_per_chunk(1024);
  std::vector<void*> slots;
  try {
    for (;;) slots.push_back(a.allocate(1000));
  } catch (const pmds::PoolFull& e) {
    EXPECT_EQ(e.code(), pmds::PoolErrc::full);
    EXPECT_NE(std::string(e.what()).find(path.str()), std::string::npos) << e.what();
  }
  EXPECT_EQ(slots.size(), a.slots_per_chunk(1008));
  EXPECT_EQ(per_chunk, 1024u);
  EXPECT_EQ(a.used_chunks(), 1u);
  EXPECT_THROW(a.allocate(1000), pmds::PoolFull);  // again: still full, still no crash
  EXPECT_THROW(a.allocate(64), pmds::PoolFull);    // no chunk for another size either
  EXPECT_EQ(pm::inspect_pool(path).used_chunks, 1u);
  a.free(slots.back());
  void* p = a.allocate(1000);
  EXPECT_EQ(p, slots.back());
  pool.root(0).store(1);  // the pool itself is fine
  pool.close();
  pm::Pool again = pm::Pool::open(path, "test/alloc");
  EXPECT_EQ(again.root(0).load(), 1u);
}

TEST(Allocator, BadArguments) {
  TempPath path("badargs");
  pm::Pool pool = pm::Pool::create(path, 8 * kMiB, "test/alloc");
  auto& a = pool.allocator();
  auto expect_bad = [](auto&& f) {
    try {
      f();
      ADD_FAILURE() << "no exception";
    } catch (const pmds::PoolError& e) {
      EXPECT_EQ(e.code(), pmds::PoolErrc::bad_argument) << e.what();
    }
  };
  expect_bad([&] { a.allocate(a.chunk_size() + 1); });
  void* p = a.allocate(64);
  int on_stack = 0;
  expect_bad([&] { a.free(&on_stack); });
  expect_bad([&] { a.free(static_cast<char*>(p) + 16); });  // inside a slot
  expect_bad([&] { a.free(pool.base()); });                 // the header
  // A slot of a chunk never claimed.
  expect_bad([&] { a.free(static_cast<char*>(p) + 3 * a.chunk_size()); });
  a.free(p);
  // The largest slot is a whole chunk.
  void* whole = a.allocate(a.chunk_size());
  EXPECT_EQ(a.slot_size_of(whole), a.chunk_size());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(whole) % 4096, 0u);
}

TEST(Allocator, AtMost32SlotSizes) {
  TempPath path("classes");
  pm::Pool pool = pm::Pool::create(path, 40 * kMiB, "test/alloc");
  auto& a = pool.allocator();
  for (std::size_t k = 1; k <= pm::ChunkAllocator::max_slot_sizes; ++k) a.allocate(16 * k);
  try {
    a.allocate(16 * 33);
    ADD_FAILURE() << "a 33rd slot size";
  } catch (const pmds::PoolError& e) {
    EXPECT_EQ(e.code(), pmds::PoolErrc::bad_argument);
  }
  a.allocate(16 * 7);  // known sizes still work
}

// Recovery: every slot of every used chunk is exactly one of live (the structure says so) or
// free; allocation after recovery hands out exactly the free ones.
TEST(Allocator, RecoverAccounting) {
  TempPath path("recover");
  constexpr std::uint64_t kLive = 0x4c495645'4c495645;
  std::set<void*> live;
  std::size_t used_before = 0;
  {
    pm::Pool pool = pm::Pool::create(path, 16 * kMiB, "test/alloc");
    auto& a = pool.allocator();
    std::vector<void*> slots;
    for (int i = 0; i < 30000; ++i) slots.push_back(a.allocate(i % 5 == 0 ? 128 : 64));
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (i % 3 == 0) {
        pm::write(slots[i], &kLive, sizeof kLive);
        pm::persist(slots[i], sizeof kLive);
        live.insert(slots[i]);
      } else if (i % 3 == 1) {
        a.free(slots[i]);
      }  // i % 3 == 2: allocated, never made live: a leak that recovery must reclaim
    }
    used_before = a.used_chunks();
  }
  pm::Pool pool = pm::Pool::open(path, "test/alloc");
  auto& a = pool.allocator();
  EXPECT_EQ(a.used_chunks(), used_before);
  EXPECT_EQ(a.free_slots(), 0u);  // nothing known before recover()
  auto is_live = [](void* slot, std::size_t) {
    std::uint64_t w;
    std::memcpy(&w, slot, sizeof w);
    return w == kLive;
  };
  const pm::AllocatorRecoveryStats stats = a.recover(is_live);
  std::size_t total = 0;
  std::map<std::size_t, std::size_t> chunks_by_size;
  a.for_each_used_chunk([&](std::size_t, void*, std::size_t size, std::size_t owner) {
    total += a.slots_per_chunk(size);
    ++chunks_by_size[size];
    EXPECT_LT(owner, pmds::max_threads);
  });
  std::size_t enumerated = 0;
  a.for_each_slot([&](void*, std::size_t) { ++enumerated; });
  EXPECT_EQ(enumerated, total);
  EXPECT_EQ(stats.used_chunks, used_before);
  EXPECT_EQ(stats.live_slots, live.size());
  EXPECT_EQ(stats.free_slots, total - live.size());
  EXPECT_EQ(a.free_slots(), stats.free_slots);
  // Allocate every free slot: none is live, none twice; then the next needs a new chunk.
  std::set<void*> handed;
  for (const auto& [size, chunks] : chunks_by_size) {
    std::size_t free_of_size = 0;
    a.for_each_slot([&](void* s, std::size_t sz) {
      if (sz == size && !live.count(s)) ++free_of_size;
    });
    for (std::size_t i = 0; i < free_of_size; ++i) {
      void* p = a.allocate(size);
      EXPECT_FALSE(live.count(p)) << "a live slot was handed out";
      EXPECT_TRUE(handed.insert(p).second) << "a slot was handed out twice";
    }
  }
  EXPECT_EQ(handed.size(), stats.free_slots);
  EXPECT_EQ(a.free_slots(), 0u);
  EXPECT_EQ(a.used_chunks(), used_before);
  a.allocate(64);
  EXPECT_EQ(a.used_chunks(), used_before + 1);
}

// recover() learns that a never-used slot is zero from the pool file's holes (SEEK_DATA), without
// reading it: on tmpfs reading a hole through the shared mapping allocates a page for it, so a
// recovery that read every slot of a used chunk of a sparse pool file (the crash lab's images
// are copies of a pool's data only) filled the chunk. The slots that were written are still found
// recycled (handed out in the first batch).
TEST(Allocator, RecoveryReadsNoHoleOfThePoolFile) {
  TempPath path("holes");
  struct statfs fs {};
  ASSERT_EQ(::statfs(pmds::test::scratch_dir().c_str(), &fs), 0);
  if (fs.f_type != TMPFS_MAGIC) GTEST_SKIP() << "reading a hole allocates nothing here: not tmpfs";
  constexpr std::uint64_t kWritten = 0x5752495454454e21;
  std::set<void*> written;
  off_t chunk_offset = 0;
  {
    pm::Pool pool = pm::Pool::create(path, 16 * kMiB, "test/alloc");
    auto& a = pool.allocator();
    for (int i = 0; i < 100; ++i) {  // the first 6,400 bytes of a 1 MiB chunk
      void* p = a.allocate(64);
      if (i == 0) chunk_offset = static_cast<char*>(p) - static_cast<char*>(pool.base());
      if (i % 10 != 0) continue;
      pm::write(p, &kWritten, sizeof kWritten);
      pm::persist(p, sizeof kWritten);
      written.insert(p);
    }
  }
  {  // the rest of the chunk becomes a hole, as in a copy of the file's data
    const int fd = ::open(path.str().c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, chunk_offset + 8192,
                          static_cast<off_t>(kMiB) - 8192),
              0);
    ::close(fd);
  }
  struct stat before {};
  ASSERT_EQ(::stat(path.str().c_str(), &before), 0);
  pm::Pool pool = pm::Pool::open(path, "test/alloc");
  auto& a = pool.allocator();
  const pm::AllocatorRecoveryStats stats = a.recover([](void*, std::size_t) { return false; });
  EXPECT_EQ(stats.live_slots, 0u);
  EXPECT_EQ(stats.free_slots, a.slots_per_chunk(64));
  struct stat after {};
  ASSERT_EQ(::stat(path.str().c_str(), &after), 0);
  EXPECT_EQ(after.st_blocks, before.st_blocks) << "recovery allocated pages of the file's holes";
  std::set<void*> first_batch;
  for (int i = 0; i < 64; ++i) first_batch.insert(a.allocate(64));
  for (void* p : written) EXPECT_TRUE(first_batch.count(p)) << p << " was not found recycled";
}

// recover() in two steps (a lazy recovery): after open, allocate() hands out no slot of the chunks
// used before; recover_chunks() then adds their free slots while two threads allocate and free,
// and they get those slots, never a live one, never one twice.
TEST(Allocator, RecoverChunksWhileThreadsAllocate) {
  TempPath path("recover_chunks");
  constexpr std::uint64_t kLive = 0x4c495645'4c495645;
  std::set<void*> live;
  {
    pm::Pool pool = pm::Pool::create(path, 32 * kMiB, "test/alloc");
    auto& a = pool.allocator();
    for (int i = 0; i < 30000; ++i) {
      void* p = a.allocate(64);
      if (i % 3 == 0) {
        pm::write(p, &kLive, sizeof kLive);
        live.insert(p);
      } else if (i % 3 == 1) {
        a.free(p);
      }
    }
  }
  pm::Pool pool = pm::Pool::open(path, "test/alloc");
  auto& a = pool.allocator();
  const std::vector<std::size_t> withheld = a.used_chunk_indices();
  ASSERT_FALSE(withheld.empty());
  std::vector<const char*> bases;  // of the withheld chunks, ascending
  a.for_each_used_chunk([&](std::size_t, void* chunk, std::size_t, std::size_t) {
    bases.push_back(static_cast<const char*>(chunk));
  });
  ASSERT_EQ(bases.size(), withheld.size());
  const auto in_withheld = [&](const void* p) {
    const auto* c = static_cast<const char*>(p);
    const auto after = std::upper_bound(bases.begin(), bases.end(), c);
    return after != bases.begin() && c < *std::prev(after) + a.chunk_size();
  };
  constexpr int kThreads = 2;
  std::vector<std::vector<void*>> held(kThreads);
  std::vector<std::size_t> from_withheld(kThreads, 0);
  std::barrier sync(kThreads + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto& mine = held[t];
      for (int i = 0; i < 5000; ++i) {  // before recover_chunks: new chunks only
        void* p = a.allocate(64);
        EXPECT_FALSE(in_withheld(p)) << "a withheld slot was handed out before recover_chunks";
        mine.push_back(p);
      }
      sync.arrive_and_wait();
      // While recover_chunks runs, then after it until the thread's own chunk is used up and it
      // takes from the shared lists.
      const auto allocate_and_free = [&](std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
          void* p = a.allocate(64);
          if (in_withheld(p)) ++from_withheld[t];
          mine.push_back(p);
          if (i % 4 == 0) {
            void* victim = mine[mine.size() / 2];
            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(mine.size() / 2));
            a.free(victim);
          }
        }
      };
      allocate_and_free(20000);
      sync.arrive_and_wait();
      allocate_and_free(2 * a.slots_per_chunk(64));
    });
  sync.arrive_and_wait();
  const pm::AllocatorRecoveryStats stats = a.recover_chunks(withheld, [](void* slot, std::size_t) {
    std::uint64_t w;
    std::memcpy(&w, slot, sizeof w);
    return w == kLive;
  });
  sync.arrive_and_wait();
  for (auto& th : threads) th.join();
  const std::size_t withheld_slots = withheld.size() * a.slots_per_chunk(64);
  EXPECT_EQ(stats.used_chunks, withheld.size());
  EXPECT_EQ(stats.live_slots, live.size());
  EXPECT_EQ(stats.free_slots, withheld_slots - live.size());
  EXPECT_GT(from_withheld[0] + from_withheld[1], 0u) << "the recovered slots were not used";
  std::set<void*> all;
  for (const auto& mine : held)
    for (void* p : mine) {
      EXPECT_TRUE(all.insert(p).second) << "a slot was handed out twice";
      EXPECT_FALSE(live.count(p)) << "a live slot was handed out";
    }
}

// Recovery after a crash (process killed without close) while several threads allocate.
TEST(Allocator, RecoverAfterAKilledProcess) {
  TempPath path("killed");
  constexpr std::uint64_t kLive = 0x1111222233334444;
  { pm::Pool pool = pm::Pool::create(path, 32 * kMiB, "test/alloc"); }
  const int code = pmds::test::run_in_child([&] {
    pm::Pool pool = pm::Pool::open(path, "test/alloc");
    auto& a = pool.allocator();
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 20000; ++i) {
          void* p = a.allocate(96);
          if (i % 2 == 0) {
            pm::write(p, &kLive, sizeof kLive);
            pm::persist(p, sizeof kLive);
          } else if (i % 4 == 1) {
            a.free(p);
          }
        }
      });
    for (auto& th : threads) th.join();
    ::_exit(0);  // killed: no close
    return 1;
  });
  ASSERT_EQ(code, 0);
  pm::Pool pool = pm::Pool::open(path, "test/alloc");
  EXPECT_FALSE(pool.was_clean_shutdown());
  auto& a = pool.allocator();
  const pm::AllocatorRecoveryStats stats = a.recover([](void* slot, std::size_t) {
    std::uint64_t w;
    std::memcpy(&w, slot, sizeof w);
    return w == kLive;
  });
  EXPECT_EQ(stats.live_slots, 3u * 10000u);
  EXPECT_EQ(stats.live_slots + stats.free_slots, stats.used_chunks * a.slots_per_chunk(96));
  EXPECT_EQ(a.free_slots(), stats.free_slots);
}

}  // namespace

// labels: memory
// allocate_chunk / free_chunk, HugePageResource and make_chunk_array: alignment, whole pages
// mapped and counted while held and no longer after, small chunks from the heap, an arena on top,
// and arrays value-initialized and given back.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory_resource>

#include <unistd.h>

#include "pmds/huge_pages.hpp"

namespace {

using pmds::allocate_chunk;
using pmds::free_chunk;
using pmds::huge_page_bytes;
using pmds::mapped_chunk_bytes;

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

TEST(HugePages, ALargeChunkIsHugePageAlignedUsableAndCountedInWholePagesUntilFreed) {
  const std::size_t before = mapped_chunk_bytes().load();
  const std::size_t asked = 3 * (huge_page_bytes / 2) + 100;  // 1.5 huge pages and a bit
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* p = allocate_chunk(asked, 64);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, huge_page_bytes));
  EXPECT_EQ(mapped_chunk_bytes().load(), before + (asked + page - 1) / page * page);
  std::memset(p, 0xab, asked);  // every byte asked for is writable
  EXPECT_EQ(static_cast<unsigned char*>(p)[asked - 1], 0xab);
  free_chunk(p, asked);
  EXPECT_EQ(mapped_chunk_bytes().load(), before);
}

TEST(HugePages, ASmallChunkComesFromTheHeapWithItsAlignmentAndIsNotCounted) {
  const std::size_t before = mapped_chunk_bytes().load();
  void* p = allocate_chunk(16 << 10, 512);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, 512));
  EXPECT_EQ(mapped_chunk_bytes().load(), before);
  std::memset(p, 1, 16 << 10);
  free_chunk(p, 16 << 10);
}

TEST(HugePages, AnArenaOnTheResourceGetsItsLargeChunksFromIt) {
  const std::size_t before = mapped_chunk_bytes().load();
  {
    pmds::HugePageResource chunks;
    std::pmr::monotonic_buffer_resource arena(std::size_t{1} << 16, &chunks);
    for (int i = 0; i < 20000; ++i) {  // 10 MB of 512-byte blocks: chunks past 2 MiB
      void* p = arena.allocate(512, 64);
      ASSERT_TRUE(aligned(p, 64));
      std::memset(p, i & 0xff, 512);
    }
    EXPECT_GE(mapped_chunk_bytes().load(), before + 2 * huge_page_bytes);
  }
  EXPECT_EQ(mapped_chunk_bytes().load(), before);  // the arena gave every chunk back
}

TEST(HugePages, AChunkArrayIsValueInitializedAlignedAndGivenBackWithItsChunk) {
  const std::size_t before = mapped_chunk_bytes().load();
  {
    const std::size_t n = std::size_t{1} << 20;  // 8 MiB of buckets: huge pages
    auto buckets = pmds::make_chunk_array<std::atomic<std::uint64_t>>(n);
    EXPECT_TRUE(aligned(buckets.get(), huge_page_bytes));
    EXPECT_GE(mapped_chunk_bytes().load(), before + n * sizeof(std::uint64_t));
    for (std::size_t i = 0; i < n; i += 4097) ASSERT_EQ(buckets[i].load(), 0u);
    buckets[n - 1].store(7);
    EXPECT_EQ(buckets[n - 1].load(), 7u);
    auto small = pmds::make_chunk_array<std::atomic<std::uint64_t>>(3);  // from the heap
    EXPECT_TRUE(aligned(small.get(), 64));
    EXPECT_EQ(small[2].load(), 0u);
  }
  EXPECT_EQ(mapped_chunk_bytes().load(), before);
}

}  // namespace

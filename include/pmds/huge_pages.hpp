// Heap chunks for DRAM nodes, advised for transparent huge pages.
//
// A structure whose nodes live in DRAM and are read in random order (a large tree's descent, a
// large set's buckets) misses the TLB on most node visits when its nodes sit on 4 KiB pages, and
// in a virtual machine each miss is a two-dimensional page walk. Chunks of 2 MiB and more are
// therefore aligned to 2 MiB and advised MADV_HUGEPAGE, which Linux honours where transparent
// huge pages are "always" or "madvise" (/sys/kernel/mm/transparent_hugepage/enabled); elsewhere
// the advice is refused and the chunk works as on small pages. glibc's malloc advises its own
// memory only when the process sets GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which a library
// cannot do for its user.
//
// Measured: results/README.md, "The transient twin against the original Masstree".
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <memory_resource>
#include <new>
#include <type_traits>

#include <sys/mman.h>
#include <unistd.h>

namespace pmds {

inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

// The bytes of huge-page chunks mapped now, by every user of this header: they come from mmap,
// which malloc's statistics do not see, so pmds bench adds them to the DRAM a structure holds.
inline std::atomic<std::size_t>& mapped_chunk_bytes() {
  static std::atomic<std::size_t> bytes{0};
  return bytes;
}

// A chunk's size as mapped: whole pages.
inline std::size_t mapped_size(std::size_t bytes) {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// `bytes` of DRAM aligned to `alignment` (a power of two); nullptr when there is none. From
// bytes >= huge_page_bytes on, a mapping of its own, aligned to a huge page and advised for
// huge pages (the whole huge pages in it: a tail short of one stays on small pages, rather than
// rounding every chunk up to a huge page that an arena would never fill). Not aligned_alloc:
// glibc serves a 2 MiB-aligned block from a mapping 2 MiB larger than asked, and its statistics,
// which pmds bench reports, count that slack (masstree/transient at 1M keys: 109.7 B/elem with
// aligned_alloc against 85.9 on 4 KiB pages).
inline void* allocate_chunk(std::size_t bytes, std::size_t alignment) {
  if (bytes < huge_page_bytes)  // (aligned_alloc wants a multiple of the alignment)
    return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  bytes = mapped_size(bytes);
  // Over-map by one huge page, then unmap the unaligned head and the tail beyond `bytes`.
  const std::size_t mapped = bytes + huge_page_bytes;
  void* m = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(m);
  const std::uintptr_t aligned = (start + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
  if (aligned > start) ::munmap(m, aligned - start);
  const std::uintptr_t tail = start + mapped - (aligned + bytes);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // A hint only: where transparent huge pages are off or refused, the chunk still works.
  ::madvise(p, bytes, MADV_HUGEPAGE);
  mapped_chunk_bytes().fetch_add(bytes, std::memory_order_relaxed);
  return p;
}

// Gives back a chunk of allocate_chunk(bytes, ...).
inline void free_chunk(void* p, std::size_t bytes) {
  if (p == nullptr) return;
  if (bytes < huge_page_bytes) {
    std::free(p);
    return;
  }
  bytes = mapped_size(bytes);
  ::munmap(p, bytes);
  mapped_chunk_bytes().fetch_sub(bytes, std::memory_order_relaxed);
}

// An array in one chunk of allocate_chunk, freed with it (make_chunk_array).
struct ChunkArrayDeleter {
  std::size_t bytes = 0;
  void operator()(void* p) const noexcept { free_chunk(p, bytes); }
};
template <class T>
using ChunkArray = std::unique_ptr<T[], ChunkArrayDeleter>;

// n value-initialized T in one chunk aligned to a cache line, on huge pages from 2 MiB on: a
// table read at random indices, such as a hash table's buckets (8 MiB for 2^20 of them, a TLB
// miss on most operations on small pages). T must be trivially destructible: the elements are
// never destroyed. Throws std::bad_alloc when there is no memory.
template <class T>
ChunkArray<T> make_chunk_array(std::size_t n) {
  static_assert(std::is_trivially_destructible_v<T>, "the array never runs destructors");
  static_assert(alignof(T) <= 64);
  if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_alloc();
  const std::size_t bytes = std::max(n * sizeof(T), std::size_t{1});
  T* a = static_cast<T*>(allocate_chunk(bytes, 64));
  if (a == nullptr) throw std::bad_alloc();
  for (std::size_t i = 0; i < n; ++i) ::new (static_cast<void*>(a + i)) T();
  return ChunkArray<T>(a, ChunkArrayDeleter{bytes});
}

// allocate_chunk as the upstream of a std::pmr resource (an arena's chunks).
class HugePageResource final : public std::pmr::memory_resource {
 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = allocate_chunk(bytes, alignment);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t) override { free_chunk(p, bytes); }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

}  // namespace pmds

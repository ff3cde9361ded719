// pmds::NodeSlab<T> — DRAM blocks of one type for a structure's volatile nodes: SOFT's volatile
// nodes (Zuriel et al. §5 take them, like the durable ones, from ssmem's per-thread areas).
// pmds::TowerSlab<Node, MaxHeight> — the same for skip-list nodes, whose size grows with their
// tower: one slab of blocks per whole number of cache lines (below).
//
// Blocks are sizeof(T) rounded up to a power of two (to whole cache lines above 64 bytes) and
// aligned to that size (to a line above 64 bytes), so a block never straddles a line: a traversal
// that reads a node reads one line. They are carved from chunks that each thread takes for itself
// (consecutive addresses for the nodes one thread allocates in a row), and a freed block goes on
// the freeing thread's stack of free blocks — a vector of pointers in the slab, never a word
// written into the block — as the pool allocator does with durable slots (pm/allocator.hpp): a
// thread whose stack grows past two batches hands a batch to a shared list (a mutex, the slow
// path), and a thread that has no free block and no chunk left takes a batch from there before it
// takes a new chunk. So blocks that one thread frees and another allocates are reused, not leaked.
// Every chunk goes back to the C++ heap when the slab is destroyed; blocks are not returned one
// by one. Chunks start at 16 KiB and double up to 2 MiB; those of 2 MiB are aligned to 2 MiB and
// advised for transparent huge pages (huge_pages.hpp), so a large set's random reads miss the TLB
// less.
//
// Why not malloc: glibc's malloc hands a 32-byte node a 48-byte block with its header in the
// block before it, so one node in four straddles two lines, and malloc and free write into
// blocks whose lines hold other threads' live nodes; and a general allocator has no notion of
// a structure's lifetime. Measured (AMD EPYC, 2 vCPUs, `pmds bench --structure list/soft
// --key-range 1024 --reads 90 --threads 2 --duration 1`, three alternating rounds): list/soft
// 3.19-3.33 Mops/s with glibc malloc, 3.74-4.48 with jemalloc preloaded (32-byte blocks, no
// header, frees recorded outside the block), the behaviour this slab gives every user without
// replacing the process's allocator; 4.47-4.78 with this slab, against 3.22-3.66 for the build
// before it, in four alternating rounds (results/README.md, the link-free and SOFT sets on AMD
// EPYC).
//
// Threads: make() and free() from any number of threads at once (a thread uses the slot of its
// pmds::thread_id(); a thread that exits leaves its stack and the rest of its chunk to the next
// thread given its id); the destructor only when no thread uses the slab. T must be
// trivially destructible: the slab never runs destructors.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmds/huge_pages.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds {

namespace detail {

// The slab itself, for blocks of one size (the comment at the top of this file says how it
// works); NodeSlab and TowerSlab give it types.
class BlockSlab {
 public:
  // block_size a multiple of alignment, alignment a power of two, neither above the first chunk.
  BlockSlab(std::size_t block_size, std::size_t alignment)
      : block_size_(block_size), alignment_(alignment), threads_(new Thread[max_threads]) {}
  BlockSlab(const BlockSlab&) = delete;
  BlockSlab& operator=(const BlockSlab&) = delete;
  ~BlockSlab() = default;  // Chunk's deleter frees every chunk

  // A block of the calling thread. Throws std::bad_alloc when the heap has no chunk to give,
  // TooManyThreads as pmds::thread_id().
  void* allocate() {
    Thread& th = threads_[thread_id()];
    if (th.free.empty() && th.next == th.end) refill(th);  // a batch or a new chunk
    if (!th.free.empty()) {
      void* p = th.free.back();
      th.free.pop_back();
      return p;
    }
    void* p = th.next;
    th.next += block_size_;
    return p;
  }

  // Gives a block back (it must come from this slab, and no thread may read it again).
  void free(void* p) {
    Thread& th = threads_[thread_id()];
    th.free.push_back(p);
    if (th.free.size() > 2 * batch_blocks) donate(th);
  }

  // Bytes taken from the heap so far (every chunk, used or not).
  std::size_t reserved_bytes() const {
    std::lock_guard lock(mutex_);
    return reserved_;
  }

  static constexpr std::size_t first_chunk_bytes = std::size_t{16} << 10;

 private:
  static constexpr std::size_t batch_blocks = 64;

  struct FreeChunk {
    std::size_t bytes;
    void operator()(std::byte* p) const { free_chunk(p, bytes); }
  };
  using Chunk = std::unique_ptr<std::byte, FreeChunk>;

  // One per thread id; only its owner touches it (the destructor aside).
  struct alignas(pm::cache_line_size) Thread {
    std::vector<void*> free;
    std::byte* next = nullptr;  // the rest of the thread's chunk: [next, end)
    std::byte* end = nullptr;
  };

  // The slow path: a batch from the shared list, else a new chunk.
  void refill(Thread& th) {
    std::lock_guard lock(mutex_);
    if (!shared_.empty()) {
      th.free = std::move(shared_.back());
      shared_.pop_back();
      return;
    }
    const std::size_t bytes = next_chunk_bytes_;
    Chunk chunk(static_cast<std::byte*>(allocate_chunk(bytes, alignment_)), FreeChunk{bytes});
    if (chunk == nullptr) throw std::bad_alloc();
    std::byte* p = chunk.get();
    chunks_.push_back(std::move(chunk));  // (were this to throw, chunk frees the block)
    reserved_ += bytes;
    next_chunk_bytes_ = std::min(bytes * 2, huge_page_bytes);
    th.next = p;
    th.end = p + bytes / block_size_ * block_size_;
  }

  // Keeps one batch on the thread's stack (the most recently freed, warm in its cache) and hands
  // the older blocks to the shared list in batches.
  void donate(Thread& th) {
    std::lock_guard lock(mutex_);
    while (th.free.size() > batch_blocks) {
      const auto first = th.free.begin();
      shared_.emplace_back(first, first + batch_blocks);
      th.free.erase(first, first + batch_blocks);
    }
  }

  const std::size_t block_size_;
  const std::size_t alignment_;
  std::unique_ptr<Thread[]> threads_;
  mutable std::mutex mutex_;
  std::vector<std::vector<void*>> shared_;  // batches of free blocks, under mutex_
  std::vector<Chunk> chunks_;               // under mutex_
  std::size_t next_chunk_bytes_ = first_chunk_bytes;
  std::size_t reserved_ = 0;
};

}  // namespace detail

template <class T>
class NodeSlab {
  static_assert(std::is_trivially_destructible_v<T>, "the slab never runs destructors");

 public:
  // The block of one T: a power of two up to a cache line, whole lines above.
  static constexpr std::size_t block_size =
      sizeof(T) <= pm::cache_line_size
          ? std::max(std::bit_ceil(sizeof(T)), alignof(T))
          : (sizeof(T) + pm::cache_line_size - 1) / pm::cache_line_size * pm::cache_line_size;
  static constexpr std::size_t block_alignment = std::min(block_size, pm::cache_line_size);
  static_assert(alignof(T) <= block_alignment);
  static_assert(block_size <= detail::BlockSlab::first_chunk_bytes,
                "a node larger than the first chunk");

  NodeSlab() = default;

  // Constructs a T in a block of the calling thread. Throws std::bad_alloc when the heap has no
  // chunk to give, TooManyThreads as pmds::thread_id().
  template <class... Args>
  T* make(Args&&... args) {
    return ::new (blocks_.allocate()) T{std::forward<Args>(args)...};
  }

  // Gives the block of t back (t must come from this slab, and no thread may read it again).
  void free(T* t) { blocks_.free(t); }

  // Bytes taken from the heap so far (every chunk, used or not).
  std::size_t reserved_bytes() const { return blocks_.reserved_bytes(); }

 private:
  detail::BlockSlab blocks_{block_size, block_alignment};
};

// Blocks for skip-list nodes: a Node header followed by `height` words, 1 <= height <=
// MaxHeight. Each block is a whole number of cache lines, aligned to a line, from the slab of
// that many lines: with a 32-byte header, every node of height 4 or less (15 in 16) is one line
// and a traversal that reads its key and a link reads that line only.
//
// Why not malloc: as above. Measured (Intel Xeon, 2 vCPUs, 6 alternating rounds of `pmds bench
// --structure skiplist/soft,skiplist-bytes/soft --key-range 1000000 --threads 1,2` against the
// build on glibc's malloc, median of per-round ratios): skiplist/soft 1.29x and 1.41x (1 and 2
// threads), skiplist-bytes/soft 1.32x and 1.36x. The price of never straddling a line is about
// 16% more DRAM than glibc's blocks: 68 bytes a node on average against 59 (heights 2^-h).
template <class Node, unsigned MaxHeight>
class TowerSlab {
  static_assert(std::is_trivially_destructible_v<Node>, "the slab never runs destructors");
  static_assert(alignof(Node) <= pm::cache_line_size);

 public:
  static constexpr std::size_t node_bytes(unsigned height) {
    return sizeof(Node) + height * sizeof(std::uintptr_t);
  }
  // The block of a node of this height: its bytes rounded up to whole lines.
  static constexpr std::size_t block_size(unsigned height) {
    return lines(height) * pm::cache_line_size;
  }

  TowerSlab() : classes_(make_classes(std::make_index_sequence<class_count>{})) {}

  // A block for a node of `height` (the caller constructs the node in it). Throws
  // std::bad_alloc when the heap has no chunk to give, TooManyThreads as pmds::thread_id().
  void* allocate(unsigned height) { return classes_[lines(height) - 1].allocate(); }

  // Gives back the block of a node of `height` (from this slab; no thread may read it again).
  void free(void* p, unsigned height) { classes_[lines(height) - 1].free(p); }

  // Bytes taken from the heap so far (every chunk of every size, used or not).
  std::size_t reserved_bytes() const {
    std::size_t bytes = 0;
    for (const detail::BlockSlab& c : classes_) bytes += c.reserved_bytes();
    return bytes;
  }

 private:
  static constexpr std::size_t lines(unsigned height) {
    return (node_bytes(height) + pm::cache_line_size - 1) / pm::cache_line_size;
  }
  static constexpr std::size_t class_count = lines(MaxHeight);
  static_assert(block_size(MaxHeight) <= detail::BlockSlab::first_chunk_bytes);

  template <std::size_t... I>
  static std::array<detail::BlockSlab, class_count> make_classes(std::index_sequence<I...>) {
    return {detail::BlockSlab((I + 1) * pm::cache_line_size, pm::cache_line_size)...};
  }

  std::array<detail::BlockSlab, class_count> classes_;
};

}  // namespace pmds

// pmds::montage::TransientSystem — what a montage/ structure's transient twin uses in place of
// the epoch system (epoch_system.hpp): the same calls, nothing persistent. Payloads are heap
// blocks of the same layout, so the structure reads them the same way; the linearizing CAS is a
// plain CAS and loads are plain loads. Freed blocks are kept per thread for reuse, as the
// pool's allocator keeps them (FreeBlocks below says why). A structure written over its system then
// has a twin whose ratio to it is nbMontage's cost alone (nbMontage §5 compares each structure with
// its transient version): hash_map.hpp's "hash-bytes/transient".
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmds/montage/epoch_system.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::montage {

struct TransientSystem {
  // A heap block of `bytes` bytes (at least sizeof(P)), cache-line aligned as the pool's are.
  // Its size goes in the header's kind_size, as the epoch system's blocks carry theirs.
  template <class P>
  P* pnew(std::size_t bytes = sizeof(P)) {
    static_assert(std::is_base_of_v<Block, P> && std::is_trivially_destructible_v<P>);
    bytes = std::max(bytes, sizeof(P));
    void* m = free_blocks().take(bytes);
    if (m == nullptr) m = ::operator new (bytes, std::align_val_t{pm::cache_line_size});
    P* p = ::new (m) P();
    p->kind_size.store(std::uint64_t{bytes} << 8, std::memory_order_relaxed);
    return p;
  }
  void pdetach(Block*) {}
  void pdelete(Block* b) {
    free_blocks().give(b, static_cast<std::size_t>(b->kind_size.load() >> 8));
  }
  std::uint64_t load(std::atomic<std::uint64_t>& word) {
    return word.load(std::memory_order_acquire);
  }
  bool cas(std::atomic<std::uint64_t>& word, std::uint64_t expected, std::uint64_t desired) {
    return word.compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  }
  bool lin_cas(std::atomic<std::uint64_t>& word, std::uint64_t expected, std::uint64_t desired) {
    return cas(word, expected, desired);
  }

 private:
  // Per thread, per block size, up to `kept` freed blocks for the thread's next pnew of that
  // size: what the pool's allocator does (per-thread free lists, pm/allocator.hpp), so that the
  // twin's blocks cost what the durable map's do. Without it every payload was a malloc and a
  // free of an aligned 1 KB block, slower than the pool's allocator, and the durable map ran
  // faster than its "transient" twin: the ratio measured malloc, not nbMontage. Blocks are plain
  // heap memory, so one cache serves every map of the thread; it frees what it holds when the
  // thread ends.
  class FreeBlocks {
   public:
    static constexpr std::size_t kept = 4096;
    FreeBlocks() = default;
    FreeBlocks(const FreeBlocks&) = delete;
    FreeBlocks& operator=(const FreeBlocks&) = delete;
    ~FreeBlocks() {
      for (auto& [size, blocks] : lists_)
        for (void* b : blocks) ::operator delete (b, std::align_val_t{pm::cache_line_size});
    }
    void* take(std::size_t size) {
      for (auto& [s, blocks] : lists_)
        if (s == size && !blocks.empty()) {
          void* b = blocks.back();
          blocks.pop_back();
          return b;
        }
      return nullptr;
    }
    void give(void* b, std::size_t size) {
      for (auto& [s, blocks] : lists_)
        if (s == size) {
          if (blocks.size() < kept) {
            blocks.push_back(b);
            return;
          }
          ::operator delete (b, std::align_val_t{pm::cache_line_size});
          return;
        }
      lists_.emplace_back(size, std::vector<void*>{b});
    }

   private:
    std::vector<std::pair<std::size_t, std::vector<void*>>> lists_;
  };
  static FreeBlocks& free_blocks() {
    thread_local FreeBlocks blocks;
    return blocks;
  }
};

}  // namespace pmds::montage

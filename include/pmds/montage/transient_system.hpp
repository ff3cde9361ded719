// pmds::montage::TransientSystem — what a montage/ structure's transient twin uses in place of
// the epoch system (epoch_system.hpp): the same calls, nothing persistent. Payloads are heap
// blocks of the same layout, so the structure reads them the same way; the linearizing CAS is a
// plain CAS and loads are plain loads. A structure written over its system then has a twin
// whose ratio to it is nbMontage's cost alone (seed 003 §5 compares each structure with its
// transient version): hash_map.hpp's "hash-bytes/transient".
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "pmds/montage/epoch_system.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::montage {

struct TransientSystem {
  // A heap block of `bytes` bytes (at least sizeof(P)), cache-line aligned as the pool's are.
  template <class P>
  P* pnew(std::size_t bytes = sizeof(P)) {
    static_assert(std::is_base_of_v<Block, P> && std::is_trivially_destructible_v<P>);
    void* m = ::operator new (std::max(bytes, sizeof(P)), std::align_val_t{pm::cache_line_size});
    return ::new (m) P();
  }
  void pdetach(Block*) {}
  void pdelete(Block* b) { ::operator delete (b, std::align_val_t{pm::cache_line_size}); }

  std::uint64_t load(std::atomic<std::uint64_t>& word) {
    return word.load(std::memory_order_acquire);
  }
  bool cas(std::atomic<std::uint64_t>& word, std::uint64_t expected, std::uint64_t desired) {
    return word.compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  }
  bool lin_cas(std::atomic<std::uint64_t>& word, std::uint64_t expected, std::uint64_t desired) {
    return cas(word, expected, desired);
  }
};

}  // namespace pmds::montage

// pmds — the tower height of a new skip-list node: geometric with p = 1/2, in [1, max_height].
//
// One generator for every skip list, so that a durable skip list and its transient twin build
// towers alike. Per thread (xorshift64, no sharing), seeded from the thread's pmds id alone
// (thread_registry.hpp): a seed taken from an address differs from one process to the next
// (ASLR), and the crash lab needs a workload run to replay exactly from its seed, heights
// included (docs/ARCHITECTURE.md §3).
#pragma once

#include <bit>
#include <cstdint>

#include "pmds/thread_registry.hpp"

namespace pmds {

template <unsigned max_height>
unsigned random_height() {
  static_assert(max_height >= 1 && max_height <= 64);
  thread_local std::uint64_t state = [] {
    // splitmix64 of the id: distinct, well-mixed, never zero in practice (xorshift needs that).
    std::uint64_t z = (static_cast<std::uint64_t>(thread_id()) + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) | 1;
  }();
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return 1 +
         static_cast<unsigned>(std::countr_zero(state | (std::uint64_t{1} << (max_height - 1))));
}

}  // namespace pmds

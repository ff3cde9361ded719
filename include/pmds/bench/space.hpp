// pmds bench — the space a structure holds: pool slots (ChunkAllocator::allocated_bytes), the
// DRAM malloc hands out for it, measured around its destruction, and a Mirror structure's DRAM
// replica of its slots.
#pragma once

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <optional>

#include "pmds/huge_pages.hpp"
#include "pmds/registry/descriptor.hpp"

namespace pmds::bench {

// Bytes the process's allocator has handed out (all arenas, plus mmapped blocks) and pmds's
// huge-page chunks (huge_pages.hpp: mapped outside the allocator): the DRAM a
// structure uses is a difference of two readings. nullopt when the statistics do not follow
// allocations (a sanitizer's allocator replaces malloc): checked once with a 4 MiB block.
inline std::optional<std::uint64_t> dram_in_use() {
  const auto reading = [] {
    const struct mallinfo2 m = mallinfo2();
    return static_cast<std::uint64_t>(m.uordblks) + static_cast<std::uint64_t>(m.hblkhd) +
           mapped_chunk_bytes().load(std::memory_order_relaxed);
  };
  static const bool statistics_work = [&] {
    constexpr std::size_t probe = 4u << 20;
    const std::uint64_t before = reading();
    void* volatile block = std::malloc(probe);
    const std::uint64_t during = reading();
    std::free(block);
    return during >= before + probe;
  }();
  if (!statistics_work) return std::nullopt;
  return reading();
}

// The space a quiescent structure holds: the bytes of the pool slots it holds, and the DRAM its
// destruction gives back (a difference taken around the destruction, not the creation, so that
// frees other structures' deferred reclamation makes meanwhile cannot distort it).
struct Space {
  double pool_bytes = 0;
  bool has_dram_bytes = false;  // malloc statistics follow allocations (not under sanitizers)
  double dram_bytes = 0;
};

// Measures inst's space and destroys its structure (its pool stays open).
inline Space space_of(registry::Instance& inst) {
  Space space;
  if (inst.pool() != nullptr)
    space.pool_bytes = static_cast<double>(inst.pool()->allocator().allocated_bytes());
  const auto dram_live = dram_in_use();
  inst.destroy();  // the structure only: the pool's own DRAM is not the structure's
  const auto dram_freed = dram_in_use();
  if (dram_live && dram_freed) {
    space.has_dram_bytes = true;
    space.dram_bytes = static_cast<double>(*dram_live > *dram_freed ? *dram_live - *dram_freed : 0);
    // A structure with a volatile twin (Mirror's DRAM replica, mirror/policy.hpp) holds a copy
    // of each of its pool slots there, mapped with mmap rather than malloc'd: count it too.
    if (inst.entry().pool_options.twin) space.dram_bytes += space.pool_bytes;
  }
  return space;
}

}  // namespace pmds::bench

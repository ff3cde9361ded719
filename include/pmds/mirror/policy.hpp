// pmds — Mirror (Friedman, Petrank, Ramalhete, PLDI 2021) as a memory policy: every
// lock-free algorithm in algo/ made durably linearizable with no change to its code (§3.2:
// "replace std::atomic with patomic and the allocator").
//
//   MirrorPolicy::shared<T>   mirror::patomic<T> (mirror/patomic.hpp): value + sequence number on
//                             two replicas; loads read DRAM, writes persist first.
//   MirrorPolicy::immutable<T>   algo::PublishedWord<T>: a key or value, 8 bytes, no sequence
//                             number (§4.1.1); published with its node, read from DRAM.
//   MirrorPolicy::Memory      the dual-replica allocator (§4.3.2) and the trace recovery (§4.3.3):
//     - The pool is created with a volatile twin (pm::PoolOptions::twin): a mapping of the
//       pool's size at base + pm::twin_offset, anonymous DRAM (or, §6.3's variant, a scratch
//       file on the pool's medium: ReplicaPlacement), mapped by Memory for as long as the
//       structure lives. The persistent replica of every object is its pool slot, the
//       volatile replica the same offset in the twin; a structure holds and links twin
//       addresses only (the pool's root and every link store them), so following a pointer reads
//       DRAM. The twin's range is checked free when the pool is created and mapped with
//       MAP_FIXED_NOREPLACE at every open (base_unavailable when something else holds it).
//     - allocate(): a slot of the pool's ChunkAllocator, returned as its twin address. The
//       allocator's chunk directory stays in the pool (pmds keeps one allocator for every
//       technique); the slots' liveness is recovered by the trace, as §4.3.3 asks, so no
//       allocator metadata is persisted per operation.
//     - publish(node): the node was built in DRAM (init() writes the volatile replica only);
//       its bytes are copied into the pool slot and flushed. No fence: the linking patomic CAS
//       begins with a locked DWCAS on the persistent replica, which orders those flushes on
//       x86 (docs/ARCHITECTURE.md §3), as Izraelevitz's publish relies on too.
//     - retire(): epoch reclamation of the slot (§4.3: ssmem in the paper, pmds's EpochDomain).
//     - Recovery: the trace visits every reachable node BEFORE reading it (the algo/ protocol);
//       visit() checks the pool slot, then copies the whole slot from the pool into the twin,
//       so the structure then reads and links its recovered replica. Unreached slots go back to
//       the allocator. The twin starts zero-filled at every open: nothing volatile survives.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "pmds/algo/policy.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/mirror/patomic.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::mirror {

// A pool address and its twin (DRAM replica) address.
inline void* twin_of(const void* pool_address) noexcept {
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(pool_address) + pm::twin_offset);
}
inline void* pool_of(const void* twin_address) noexcept {
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(twin_address) - pm::twin_offset);
}

// Where the volatile replica lives (Mirror §3.1, §6.3).
enum class ReplicaPlacement : std::uint8_t {
  dram,         // anonymous memory: DRAM, the paper's main configuration (§6.2)
  pool_medium,  // a scratch file beside the pool, so on the pool's medium (§6.3: both replicas
                // on NVMM, for platforms without DRAM beside it); never flushed, and unlinked
                // as soon as it is mapped, so nothing is left behind
};

// The volatile twin of an open pool, mapped at base + twin_offset, zero-filled, unmapped with the
// structure.
class VolatileTwin {
 public:
  // The twin covers the range the pool may grow into (untouched pages cost nothing), so a pool
  // that grows needs no second twin mapping.
  VolatileTwin(pm::Pool& pool, ReplicaPlacement placement) : size_(pool.max_size()) {
    void* want = twin_of(pool.base());
    int fd = -1;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (placement == ReplicaPlacement::pool_medium) {
      std::string name = pool.path() + ".twin-XXXXXX";
      fd = ::mkstemp(name.data());
      if (fd < 0 || ::unlink(name.c_str()) != 0 ||
          ::ftruncate(fd, static_cast<off_t>(size_)) != 0) {
        const int error = errno;
        if (fd >= 0) ::close(fd);
        throw PoolError(PoolErrc::io, "pmds: pool " + pool.path() +
                                          ": cannot make the file of its Mirror replica beside "
                                          "it: " +
                                          std::strerror(error));
      }
      flags = MAP_SHARED;
    }
    void* got = ::mmap(want, size_, PROT_READ | PROT_WRITE, flags | MAP_FIXED_NOREPLACE, fd, 0);
    if (fd >= 0) ::close(fd);  // the mapping keeps the (unlinked) file
    if (got != want) {
      if (got != MAP_FAILED) ::munmap(got, size_);  // a kernel without MAP_FIXED_NOREPLACE
      throw PoolError(PoolErrc::base_unavailable,
                      "pmds: pool " + pool.path() + ": the range of its Mirror replica (" +
                          std::to_string(size_) + " bytes at " +
                          pm::detail::hex(reinterpret_cast<std::uintptr_t>(want)) +
                          ") is taken in this process (is the structure open already?)");
    }
    base_ = got;
  }
  VolatileTwin(const VolatileTwin&) = delete;
  VolatileTwin& operator=(const VolatileTwin&) = delete;
  ~VolatileTwin() { ::munmap(base_, size_); }

 private:
  void* base_ = nullptr;
  std::size_t size_;
};

// Faults other than NoFaults plant one of the crash lab's fixtures (faults.hpp); Placement
// pool_medium is §6.3's variant (registered as */mirror-pm).
template <FaultPolicy Faults = NoFaults, ReplicaPlacement Placement = ReplicaPlacement::dram>
struct MirrorPolicy {
  static constexpr bool durable = true;
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr const char* name = Placement == ReplicaPlacement::dram ? "mirror" : "mirror-pm";
  static constexpr Fault planted = Faults::planted;

  template <class T>
  using shared = patomic<T, Faults>;
  template <class T>
  using immutable = algo::PublishedWord<T>;  // §4.1.1: no sequence number

  // How a Mirror pool is created: with room for its twin.
  static pm::PoolOptions pool_options() {
    pm::PoolOptions o;
    o.twin = true;
    return o;
  }

  // The trace (§4.3.3): a node's slot is its pool replica; a first visit copies the whole slot
  // into the twin, before the structure reads the node.
  struct TwinSlots {
    static const void* slot_of(const void* node) noexcept { return pool_of(node); }
    void first_visit(const void* node, const void* slot,
                     const pm::ChunkAllocator& allocator) noexcept {
      if constexpr (planted == Fault::recovery_skips_node) {
        if (++visits == 3) return;  // planted: the third node reached keeps a zero replica
      }
      std::memcpy(const_cast<void*>(node), slot, allocator.slot_size_of(slot));
    }
    unsigned visits = 0;
  };
  using Recovery = algo::detail::TraceRecovery<TwinSlots>;

  // The twin is a first base: mapped before anything is allocated, unmapped last.
  class Memory : private VolatileTwin, public algo::detail::PoolMemory<Recovery> {
   public:
    Memory(pm::Pool& pool, std::size_t root_slot)
        : VolatileTwin(pool, Placement), algo::detail::PoolMemory<Recovery>(pool, root_slot) {}

    // Recovery copies every live slot into the twin: its pages are made present first, one
    // madvise per used chunk (1 MiB by default) rather than one page fault per 4 KiB
    // (recovering a 1M-element skip list: 430 -> 375 ms, results/README.md's Mirror section). A
    // kernel older than 5.14 refuses the advice; the copy then faults the pages in.
    Recovery begin_recovery(const char* structure = "structure") {
      const std::size_t chunk = this->allocator().chunk_size();
      this->allocator().for_each_used_chunk(
          [chunk](std::size_t, void* begin, std::size_t, std::size_t) {
            ::madvise(twin_of(begin), chunk, MADV_POPULATE_WRITE);
          });
      return algo::detail::PoolMemory<Recovery>::begin_recovery(structure);
    }

    void* allocate(std::size_t n) { return twin_of(this->allocator().allocate(n)); }
    void deallocate(void* p) { this->allocator().free(pool_of(p)); }
    void retire(void* p) {
      this->epochs().retire(
          p, [allocator = &this->allocator()](void* q) { allocator->free(pool_of(q)); });
    }

    // §4.3.2: the node, built in DRAM, is copied to its pool slot and flushed (ordered by the
    // linking CAS's locked DWCAS, see above). The root and every link hold twin addresses.
    void publish(const void* node, std::size_t n, pm::Site site = pm::Site::current()) noexcept {
      void* slot = pool_of(node);
      pm::write(slot, node, n);
      pm::flush_range(slot, n, site);
    }
  };
};

static_assert(algo::DurableMemoryPolicy<MirrorPolicy<>>);

// §6.3: both replicas on the pool's medium.
using MirrorBothInPoolPolicy = MirrorPolicy<NoFaults, ReplicaPlacement::pool_medium>;

}  // namespace pmds::mirror

// pmds::incll::ByteStringBlocks — the byte-string Masstree's keys and values as pool blocks, and
// each thread's free lists of blocks that the epochs checkpoint (InCLL §5), for the epoch
// checkpoints (incll/checkpoints.hpp).
//
// A block is a slot of pm::ChunkAllocator::block_size (64 to 512 bytes by lines, then four
// sizes per doubling up to 8 KiB): its EpochLink (incll/epoch_link.hpp, §5.1), then the Bytes.
// A new block is written in the operation's epoch, like a new node: nothing to log, flushed at
// the boundary.
//
// Invariants. A freed block goes on its thread's list of its size only in an epoch after the
// one that freed it: until that epoch ends a crash rolls the tree back to a state that may name
// the block, with its bytes. The lists (one BlockLists record per thread, named from the anchor)
// are written with no flush or fence: every link and head an epoch writes is recorded for the
// boundary flush, and after a crash each reads as it was at the start of the failed epoch
// (EpochLink's reads), so the lists and the tree roll back together. Blocks freed but not yet
// listed when a crash comes are named by nothing: recovery returns them to the allocator.
//
// Recovery: walk() checks the lists as they read after the crash (each block a slot of its
// list's size, reached once); settle() rewrites every link as it reads, before the eager
// recovery empties the record of failed epochs, so none reads otherwise once the record is gone.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "pmds/faults.hpp"
#include "pmds/incll/epoch_link.hpp"
#include "pmds/incll/failed_epochs.hpp"
#include "pmds/incll/masstree.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::incll {

// A thread's free lists, one per block size; a block starts with its EpochLink, the Bytes follow.
inline constexpr std::size_t block_classes = 24;
struct alignas(64) BlockLists {
  EpochLink heads[block_classes];
  // To a border's 512 bytes: the records share the borders' chunks instead of taking a chunk of
  // a slot size of their own (a small pool has few chunks).
  unsigned char unused[512 - block_classes * sizeof(EpochLink)];
};
static_assert(sizeof(BlockLists) == 512);

// The list of blocks of `size` bytes (a block_size).
inline std::size_t block_class(std::size_t size) {
  if (size <= 512) return size / 64 - 1;
  const std::size_t group_start = std::bit_floor(size - 1);  // 512, 1024, 2048, 4096
  return 8 + 4 * static_cast<std::size_t>(std::countr_zero(group_start) - 9) +
         (size - group_start) / (group_start / 4) - 1;
}

template <FaultPolicy Faults = NoFaults>
class ByteStringBlocks {
  using Bytes = masstree_detail::Bytes;

 public:
  static constexpr std::size_t block_header = sizeof(EpochLink);
  static constexpr std::size_t max_block = 8192;

  // A thread's share (DRAM).
  struct Local {
    BlockLists* lists = nullptr;  // made by its first write operation
    // Byte strings it freed, with the epoch each was freed in (nondecreasing).
    std::vector<std::pair<Bytes*, std::uint64_t>> freed;
    std::atomic<std::uint64_t> reused{0};  // blocks taken from its lists
  };

  // `heads`: each thread's BlockLists, in the anchor.
  ByteStringBlocks(const pm::Pool& pool, std::span<pm::atomic<BlockLists*>> heads,
                   const FailedEpochRecord<Faults>& failed)
      : pool_(pool), heads_(heads), failed_(failed) {}

  // The block a byte string of `length` bytes takes.
  static std::size_t block_size_for(std::size_t length) {
    return pm::ChunkAllocator::block_size(block_header + sizeof(Bytes) + length);
  }
  static Bytes* bytes_in(void* block) {
    return reinterpret_cast<Bytes*>(static_cast<char*>(block) + block_header);
  }

  // Inside a write operation, before it changes anything: the thread's lists, made (and named
  // from the anchor, persisted) the first time with allocate(bytes), which may throw PoolFull.
  template <class Allocate>
  void find_lists(Local& t, Allocate&& allocate) {
    if (t.lists != nullptr) return;
    pm::atomic<BlockLists*>& link = heads_[pmds::thread_id()];
    t.lists = link.load();
    if (t.lists != nullptr) return;
    auto* lists = static_cast<BlockLists*>(allocate(sizeof(BlockLists)));
    for (EpochLink& head : lists->heads) head.init();
    // Empty before the anchor names them: a recycled slot holds old bytes (recovery hands
    // recycled slots out first), which would read as lists of blocks the tree names.
    // Mutant killed by test: durable_masstree_sim_test
    // ByteStringBlockLists.ANewThreadsListsAreEmptyBeforeTheAnchorNamesThem
    pm::persist(lists, sizeof *lists);
    link.store(lists);
    // Mutant survives: a link a crash loses leaves the lists named by nothing, and recovery gives
    // every slot nothing names back to the allocator; the lists hold only blocks that the tree,
    // rolled back to the failed epoch's start, does not name, so losing them loses no data.
    pm::persist(&link, sizeof link);
    t.lists = lists;
  }

  // A byte string holding `s`, made in epoch e: a block from the thread's list of its size, else
  // from allocate(size); recorded in `written`.
  template <class Allocate>
  Bytes* make(Local& t, std::string_view s, std::uint64_t e, EpochWrites& written,
              Allocate&& allocate) {
    const std::size_t size = block_size_for(s.size());
    void* block = pop(t, size, e, written);
    if (block == nullptr) block = allocate(size);
    Bytes* b = bytes_in(block);
    const std::uint64_t length = s.size();
    pm::write(&b->size, &length, sizeof length);
    if (!s.empty()) pm::write(b + 1, s.data(), s.size());
    written.push_back({b, sizeof(Bytes) + s.size()});
    return b;
  }

  // A byte string the tree no longer names (once no reader can hold it), freed in epoch e; its
  // block is listed by a write operation of a later epoch (release_freed).
  static void free(Local& t, Bytes* b, std::uint64_t e) { t.freed.push_back({b, e}); }

  // Inside a write operation of epoch `now`: the blocks freed before `now` go on the thread's
  // lists (their links and heads recorded in `written`).
  void release_freed(Local& t, std::uint64_t now, EpochWrites& written) {
    std::uint64_t limit = now;
    if constexpr (Faults::planted == Fault::bytes_freed_in_their_epoch) ++limit;
    std::size_t n = 0;
    for (; n < t.freed.size() && t.freed[n].second < limit; ++n) {
      Bytes* b = t.freed[n].first;
      EpochLink& head = t.lists->heads[block_class(block_size_for(b->size))];
      record_link(written, *link_of(b), now);
      record_link(written, head, now);
      EpochFreeList(head).push(link_of(b), now, failed_.failed32());
    }
    if (n != 0) t.freed.erase(t.freed.begin(), t.freed.begin() + static_cast<std::ptrdiff_t>(n));
  }

  // ---- recovery -------------------------------------------------------------------------------

  struct Listed {
    std::size_t blocks = 0;
    std::size_t lists = 0;  // the threads' BlockLists records
  };
  // Before anything is written: every thread's lists as they read after the crash, checked —
  // each block a slot of its list's size, reached once (so a block the tree also names, or a
  // cycle, is PoolCorrupt) — and their slots set in `reached`, the records' own included.
  Listed walk(pm::ChunkAllocator::SlotBits& reached) const {
    const pm::ChunkAllocator& a = pool_.allocator();
    const auto failed32 = failed_.failed32();
    Listed listed;
    for (const auto& link : heads_) {
      const BlockLists* lists = link.load();
      if (lists == nullptr) continue;
      a.checked_slot(lists, sizeof(BlockLists), "a thread's block free lists");
      if (a.slot_size_of(lists) != pm::ChunkAllocator::slot_size_for(sizeof(BlockLists)) ||
          !reached.set(lists))
        a.corrupt("a thread's block free lists are not a slot of their own");
      ++listed.lists;
      for (std::size_t c = 0; c < block_classes; ++c) {
        for (auto* p = static_cast<const EpochLink*>(lists->heads[c].read(failed32)); p != nullptr;
             p = static_cast<const EpochLink*>(p->read(failed32))) {
          a.checked_slot(p, sizeof(EpochLink), "a free block's link");
          const std::size_t size = a.slot_size_of(p);
          if (pm::ChunkAllocator::block_size(size) != size || block_class(size) != c)
            a.corrupt("a free list holds a block of another size");
          if (!reached.set(p)) a.corrupt("a free block is on a list twice, or named by the tree");
          ++listed.blocks;
        }
      }
    }
    return listed;
  }

  // Eager recovery, before the record of failed epochs is emptied: every link rewritten as it
  // reads now, in epoch `e` (the execution's first), and flushed (the caller fences).
  void settle(std::uint64_t e) {
    const auto failed32 = failed_.failed32();
    for (auto& link : heads_) {
      BlockLists* lists = link.load();
      if (lists == nullptr) continue;
      for (EpochLink& head : lists->heads) {
        for (EpochLink* p = &head; p != nullptr;) {
          void* next = p->read(failed32);
          p->write(next, e, failed32);
          // Mutant killed by test: durable_masstree_sim_test
          // ByteStringBlockLists.AnEagerRecoveryRewritesTheListsDurablyBeforeItForgetsTheFailedEpoch
          pm::flush_range(p, sizeof *p);
          p = static_cast<EpochLink*>(next);
        }
      }
    }
  }

 private:
  static EpochLink* link_of(Bytes* b) {
    return reinterpret_cast<EpochLink*>(reinterpret_cast<char*>(b) - block_header);
  }

  // A block of `size` bytes from the thread's list (nullptr when it has none); the head is
  // recorded for the boundary flush before the pop writes it.
  void* pop(Local& t, std::size_t size, std::uint64_t e, EpochWrites& written) {
    EpochLink& head = t.lists->heads[block_class(size)];
    const auto failed32 = failed_.failed32();
    if (head.read(failed32) == nullptr) return nullptr;
    record_link(written, head, e);
    EpochLink* block = EpochFreeList(head).pop(e, failed32);
    t.reused.store(t.reused.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return block;
  }

  // A link about to be written in epoch e, recorded for the boundary flush the first time.
  static void record_link(EpochWrites& written, const EpochLink& link, std::uint64_t e) {
    if (!link.written_in(e)) written.push_back({&link, sizeof link});
  }

  const pm::Pool& pool_;
  std::span<pm::atomic<BlockLists*>> heads_;
  const FailedEpochRecord<Faults>& failed_;
};

}  // namespace pmds::incll

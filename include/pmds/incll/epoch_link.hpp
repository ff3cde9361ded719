// pmds::incll::EpochLink — InCLL §5.1's compact InCLL of one link: a pointer that the epochs
// checkpoint, with its log and its epoch in 16 bytes; and EpochFreeList, §5's free list built on
// it, whose links roll back to the start of a failed epoch (the byte-string Masstree's blocks:
// incll/checkpoints.hpp).
//
// Layout. Two words in one cache line (the link is 16-aligned): `next`, the link now, and
// `next_log`, the link as it was at the start of the epoch that last wrote it. A pointer is
// 16-aligned and canonical (user space: below 2^47), so each word keeps bits 4-47 for it and
// has room for the rest (§5.1):
//   bits 48-63  half of the 32-bit epoch of the last write: `next` the high half, `next_log`
//               the low half;
//   bits 0-1    a counter, the same in both words once a write is whole.
//
// Writing in epoch e (write()). The first write in e stores next_log = (e's low half, the link's
// recovered value, counter+1), then next = (e's high half, the new pointer, counter+1); later
// writes in e store next alone. Both words share one line, so they persist in that order and a
// crash leaves one of three states: neither written, next_log alone (the counters differ), or
// both. The saved value is the recovered one (read() below), not next's raw pointer: a link that
// an earlier crash left torn or in a failed epoch is right from its first write on, with no
// repair pass at recovery.
//
// Reading (read()): the counters differ → next_log's pointer (a crash tore the first write of an
// epoch); the epoch the halves spell is a failed one → next_log's pointer (the start of that
// epoch); else next's pointer. So every write a failed epoch made is undone on first read, at no
// cost at open (§4.3's lazy recovery, for links).
//
// Epochs compare on their low 32 bits: a link last written exactly a multiple of 2^32 epochs
// before a write (2^32 epochs of 64 ms are 8.7 years) would be taken as written in that epoch,
// and not logged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "pmds/pm/access.hpp"

namespace pmds::incll {

// What one thread wrote in the current epoch and has not flushed (address, bytes): new objects,
// EpochLinks written for the first time in it. The epoch boundary flushes them all (InCLL §3);
// Checkpoints keeps one per thread and hands it to whatever writes on its behalf.
using EpochWrites = std::vector<std::pair<const void*, std::size_t>>;

struct alignas(16) EpochLink {
  pm::atomic<std::uint64_t> next;
  pm::atomic<std::uint64_t> next_log;

  static constexpr std::uint64_t pointer_mask = 0x0000'ffff'ffff'fff0;
  static constexpr std::uint64_t counter_mask = 3;

  // A link to nothing, written in no epoch (epoch 0 is never a failed one).
  void init(void* p = nullptr) {
    next.store(encode(0, p, 0), std::memory_order_relaxed);
    next_log.store(encode(0, p, 0), std::memory_order_relaxed);
  }

  // Whether p can be stored: 16-aligned and below 2^48 (what the layout keeps of it).
  static bool storable(const void* p) {
    return (reinterpret_cast<std::uint64_t>(p) & ~pointer_mask) == 0;
  }

  // The link's value after recovery; is_failed(epoch32) says whether a 32-bit epoch failed.
  template <class IsFailed>
  void* read(IsFailed&& is_failed) const {
    const std::uint64_t now = next.load(std::memory_order_acquire);
    const std::uint64_t log = next_log.load(std::memory_order_acquire);
    if ((now & counter_mask) != (log & counter_mask) || is_failed(epoch_of(now, log)))
      return pointer_of(log);
    return pointer_of(now);
  }

  // Sets the link to p in epoch e (the caller owns the link: no other writer at once).
  template <class IsFailed>
  void write(void* p, std::uint64_t e, IsFailed&& is_failed) {
    const std::uint32_t e32 = static_cast<std::uint32_t>(e);
    const std::uint64_t now = next.load(std::memory_order_relaxed);
    if (written_in(e)) {  // its log holds the link at e's start already
      next.store(encode(e32 >> 16, p, now & counter_mask), std::memory_order_release);
      return;
    }
    const std::uint64_t counter = ((now & counter_mask) + 1) & counter_mask;
    next_log.store(encode(e32 & 0xffff, read(is_failed), counter), std::memory_order_release);
    next.store(encode(e32 >> 16, p, counter), std::memory_order_release);
  }

  // Whether the link was written in epoch e already (its later writes store next alone: a
  // caller that records written lines for the boundary flush records the link once per epoch).
  bool written_in(std::uint64_t e) const {
    const std::uint64_t now = next.load(std::memory_order_relaxed);
    const std::uint64_t log = next_log.load(std::memory_order_relaxed);
    return (now & counter_mask) == (log & counter_mask) &&
           epoch_of(now, log) == static_cast<std::uint32_t>(e);
  }

  // The 32-bit epoch of the last whole write (meaningful when the counters agree).
  static std::uint32_t epoch_of(std::uint64_t now, std::uint64_t log) {
    return static_cast<std::uint32_t>((now >> 48) << 16 | log >> 48);
  }
  static void* pointer_of(std::uint64_t word) {
    return reinterpret_cast<void*>(word & pointer_mask);
  }
  static std::uint64_t encode(std::uint64_t epoch_half, const void* p, std::uint64_t counter) {
    return epoch_half << 48 | reinterpret_cast<std::uint64_t>(p) | counter;
  }
};

// A free list of blocks (InCLL §5): a stack whose head and whose blocks' links are
// EpochLinks, so after a crash in epoch f it reads as it was at the start of f — every push and
// pop of f undone, a block popped and pushed again in f included (its link changed while it was
// on f's starting list: the case InCLL_n is for). Each block starts with its EpochLink (16 bytes,
// 16-aligned). One thread at a time, inside a write operation of epoch e; the caller records the
// head, and each block it pushes, for the boundary flush: neither push nor pop flushes or fences. A
// block pushed in e must not be handed out in e while a crash in e could roll the structure back to
// naming it: the caller pushes only blocks freed in an epoch before e.
class EpochFreeList {
 public:
  explicit EpochFreeList(EpochLink& head) : head_(head) {}

  template <class IsFailed>
  void push(EpochLink* block, std::uint64_t e, IsFailed&& is_failed) {
    block->write(head_.read(is_failed), e, is_failed);
    head_.write(block, e, is_failed);
  }
  // The top block, or nullptr when the list is empty.
  template <class IsFailed>
  EpochLink* pop(std::uint64_t e, IsFailed&& is_failed) {
    auto* top = static_cast<EpochLink*>(head_.read(is_failed));
    if (top != nullptr) head_.write(top->read(is_failed), e, is_failed);
    return top;
  }

 private:
  EpochLink& head_;
};

}  // namespace pmds::incll

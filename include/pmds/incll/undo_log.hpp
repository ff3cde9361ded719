// pmds::incll::UndoLog — InCLL's external log (§4.2), the undo log of the epoch checkpoints
// (incll/checkpoints.hpp).
//
// Before an object that existed at the start of epoch e is first written in it, its writer
// copies the whole object (at most max_object_bytes) into its thread's log and persists the
// entry (flush and fence: InCLL §3, "log, sfence, write") — then writes. Each thread's log is a
// chain of segments (segment_bytes each) from its head in the checkpoints' anchor; an entry is a
// header alone in its line (the epoch, the object's address and size, a checksum over those and
// the image), then the image. The log is discarded at each boundary: a thread's cursor restarts
// from its first segment in the next epoch.
//
// Invariants. Only the holder of an object's lock logs it, once per epoch (the caller's logging
// word), so an epoch's entries name distinct objects and have no order among them (§4.2). An
// entry is whole when its header names the epoch and its checksum matches; a torn one, and
// every entry after it in its segment, is never applied. A thread has `room` free entries ahead
// of its cursor before an operation starts (make_room), so an operation never fails half-way.
//
// Recovery (§4.3): find the segments (each a slot of the segment size, in one chain only, no
// cycle), check every whole entry of the failed epoch (it names an object of the pool), then copy
// each back, flushed, in parallel for a long log (§4.2), and fence.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <system_error>
#include <thread>
#include <vector>

#include "pmds/faults.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::incll {

namespace undo_log_detail {

inline constexpr std::size_t line = 64;

// A log entry: this header, alone in its line, then the object's image.
struct EntryHeader {
  std::uint64_t epoch;
  std::uint64_t address;
  std::uint64_t size;
  std::uint64_t checksum;  // over the three words above and the image
};

inline std::uint64_t checksum(const EntryHeader& h, const unsigned char* image) {
  std::uint64_t x = 0x9e3779b97f4a7c15 ^ h.epoch;
  auto mix = [&x](std::uint64_t w) {
    x = (x ^ w) * 0xff51afd7ed558ccd;
    x ^= x >> 32;
  };
  mix(h.address);
  mix(h.size);
  for (std::size_t i = 0; i + 8 <= h.size; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, image + i, 8);
    mix(w);
  }
  return x;
}

}  // namespace undo_log_detail

// A log segment: a slot of UndoLog::segment_bytes; its first line holds the link to the next.
struct LogSegment {
  pm::atomic<LogSegment*> next;
};

template <FaultPolicy Faults = NoFaults>
class UndoLog {
  using EntryHeader = undo_log_detail::EntryHeader;
  static constexpr std::size_t line = undo_log_detail::line;

 public:
  static constexpr std::size_t max_object_bytes = 512;  // a Masstree border node
  static constexpr std::size_t entry_bytes = line + max_object_bytes;
  static constexpr std::size_t segment_bytes = std::size_t{256} << 10;
  static constexpr std::size_t entries_per_segment = (segment_bytes - line) / entry_bytes;
  // The entries one operation may log: per tree level a node and the children an interior split
  // moves (8), over at most 14 levels.
  static constexpr std::size_t room = 128;

  // A thread's place in its log (DRAM).
  struct Cursor {
    LogSegment* segment = nullptr;
    std::size_t next_entry = 0;
    std::uint64_t epoch = 0;  // the epoch the cursor's entries belong to
    std::atomic<std::uint64_t> logged{0};
  };

  // `heads`: each thread's first segment, in the anchor.
  UndoLog(const pm::Pool& pool, std::span<pm::atomic<LogSegment*>> heads)
      : pool_(pool), heads_(heads) {}

  // Before an operation of epoch e: room for `room` entries ahead of the calling thread's cursor
  // (a new segment, from allocate(segment_bytes), when not). Changes nothing the log's recovery
  // reads unless a new segment is linked, persisted first.
  template <class Allocate>
  void make_room(Cursor& c, std::uint64_t e, Allocate&& allocate) {
    if (c.segment == nullptr || c.epoch != e) {
      rewind(c, e);
      if (c.segment == nullptr) c.segment = new_segment(heads_[pmds::thread_id()], allocate);
    }
    if (entries_per_segment - c.next_entry < room) {
      LogSegment* next = c.segment->next.load();
      c.segment = next != nullptr ? next : new_segment(c.segment->next, allocate);
      c.next_entry = 0;
    }
  }

  // Logs `object` (`bytes` long) in epoch e, durably, before the caller writes it.
  void write(Cursor& c, std::uint64_t e, const void* object, std::size_t bytes) {
    if (c.epoch != e) rewind(c, e);
    alignas(64) unsigned char buffer[entry_bytes];
    unsigned char* image = buffer + line;
    // The object's first three words are the only ones another thread may write meanwhile (a
    // lock word, `logged`, a node's parent link: incll/masstree.hpp); they are copied atomically.
    const auto* words = static_cast<const pm::atomic<std::uint64_t>*>(object);
    const std::uint64_t first[3] = {words[0].load(std::memory_order_acquire),
                                    words[1].load(std::memory_order_acquire),
                                    words[2].load(std::memory_order_acquire)};
    std::memcpy(image, first, sizeof first);
    std::memcpy(image + sizeof first, static_cast<const char*>(object) + sizeof first,
                bytes - sizeof first);
    EntryHeader h{e, reinterpret_cast<std::uint64_t>(object), bytes, 0};
    h.checksum = undo_log_detail::checksum(h, image);
    std::memset(buffer, 0, line);
    std::memcpy(buffer, &h, sizeof h);
    char* entry = reinterpret_cast<char*>(c.segment) + entry_offset(c.next_entry++);
    pm::write(entry, buffer, line + bytes);
    if constexpr (Faults::planted == Fault::log_entry_not_fenced)
      pm::flush_range(entry, line + bytes);
    else
      pm::persist(entry, line + bytes);  // InCLL §3: log, sfence, write
    c.logged.store(c.logged.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // ---- recovery -------------------------------------------------------------------------------

  // Recovery's first step: every whole entry of the `failed` epoch back to its object. Each
  // entry must name a slot of the pool or `extra` (extra_bytes long: the anchor's root box); all
  // are checked before the first is applied. A damaged log ends in PoolCorrupt.
  void recover(std::uint64_t failed, const void* extra, std::size_t extra_bytes) {
    find_segments();
    const pm::ChunkAllocator& a = pool_.allocator();
    std::vector<const char*> entries;
    for (const void* segment : segments_) {
      for (std::size_t i = 0; i < entries_per_segment; ++i) {
        const char* entry = static_cast<const char*>(segment) + entry_offset(i);
        EntryHeader h;
        std::memcpy(&h, entry, sizeof h);
        if (h.epoch != failed || h.size > max_object_bytes) break;
        const auto* image = reinterpret_cast<const unsigned char*>(entry) + line;
        if (undo_log_detail::checksum(h, image) != h.checksum) break;  // torn: never applied
        const auto* target = reinterpret_cast<const void*>(h.address);
        if (target == extra ? h.size != extra_bytes : !a.is_slot(target, h.size))
          a.corrupt("a log entry names no object of the pool");
        entries.push_back(entry);
        applied_.push_back(target);
      }
    }
    // No two entries name one object: an object is logged once in an epoch, and one made in the
    // epoch is not logged at all.
    std::sort(applied_.begin(), applied_.end());
    if (std::adjacent_find(applied_.begin(), applied_.end()) != applied_.end())
      a.corrupt("two log entries of one epoch name one object");
    apply(entries);
  }

  // The segments found at open, sorted (slots the allocator keeps).
  const std::vector<const void*>& segments() const { return segments_; }
  bool is_segment(const void* slot) const {
    return std::binary_search(segments_.begin(), segments_.end(), slot);
  }
  // The objects recovery restored, in address order.
  const std::vector<const void*>& restored_objects() const { return applied_; }
  bool restored(const void* p) const {
    return std::binary_search(applied_.begin(), applied_.end(), p);
  }

 private:
  // Entry i of a segment: the first line is the segment's header.
  static constexpr std::size_t entry_offset(std::size_t i) { return line + i * entry_bytes; }

  // The cursor back to the thread's first segment (the previous epoch's entries are discarded).
  void rewind(Cursor& c, std::uint64_t e) {
    c.segment = heads_[pmds::thread_id()].load();
    c.next_entry = 0;
    c.epoch = e;
  }

  // A fresh segment linked from `link` (persisted: recovery walks the links).
  template <class Allocate>
  static LogSegment* new_segment(pm::atomic<LogSegment*>& link, Allocate& allocate) {
    auto* s = static_cast<LogSegment*>(allocate(segment_bytes));
    s->next.store(nullptr);
    // Mutant survives: the word is zero in the pool already. A segment is a slot of its own size
    // (no other object shares its chunks); one that was ever linked stays linked, and one freed
    // unlinked held only this null: every such slot reads zero (the pool is zero-filled at
    // create). Kept: a segment must not depend on how its slot was last used.
    pm::persist(s, sizeof(LogSegment));
    link.store(s);
    pm::persist(&link, sizeof(LogSegment*));
    return s;
  }

  // Every thread's chain of segments, checked, sorted in segments_.
  void find_segments() {
    const pm::ChunkAllocator& a = pool_.allocator();
    const std::size_t limit = a.slot_capacity();
    for (auto& first : heads_) {
      for (LogSegment* s = first.load(); s != nullptr; s = s->next.load()) {
        a.checked_slot(s, segment_bytes, "log segment link");
        if (a.slot_size_of(s) != segment_bytes || segments_.size() >= limit)
          a.corrupt("a log segment link names no segment, or the segments form a cycle");
        segments_.push_back(s);
      }
    }
    std::sort(segments_.begin(), segments_.end());
    if (std::adjacent_find(segments_.begin(), segments_.end()) != segments_.end())
      a.corrupt("a log segment belongs to two threads' logs");
  }

  // InCLL §4.2: the entries are applied in parallel, each thread copying its share back and
  // fencing its own flushes. Not under the simulator, whose crash lab schedules every thread that
  // touches a pool, nor for a short log.
  static void apply(std::span<const char* const> all) {
    const auto apply_share = [](std::span<const char* const> share) {
      for (const char* entry : share) {
        EntryHeader h;
        std::memcpy(&h, entry, sizeof h);
        auto* target = reinterpret_cast<void*>(h.address);
        pm::write(target, entry + line, h.size);
        pm::flush_range(target, h.size);
      }
      // Mutant survives: under the simulator the calling thread applies every entry, and its
      // next fence (DurableMasstree's open, before the epoch moves) completes these flushes;
      // until the epoch moves a crash applies this same log again. A helper thread must fence
      // its own flushes (a fence orders only its thread's), which the lab, one thread here,
      // cannot see.
      pm::fence();
    };
    const std::size_t threads =
        pm::backend == pm::Backend::simulated || all.size() < 1024
            ? 1
            : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
    const auto share = [&all, threads](std::size_t t) {
      return all.subspan(all.size() * t / threads,
                         all.size() * (t + 1) / threads - all.size() * t / threads);
    };
    std::vector<std::jthread> helpers;
    for (std::size_t t = 1; t < threads; ++t) try {
        helpers.emplace_back(apply_share, share(t));
      } catch (const std::system_error&) {  // no thread to be had: this one applies the share
        apply_share(share(t));
      }
    apply_share(share(0));
    helpers.clear();  // (joins them)
  }

  const pm::Pool& pool_;
  std::span<pm::atomic<LogSegment*>> heads_;
  std::vector<const void*> segments_;  // recovery: the log segments, sorted
  std::vector<const void*> applied_;   // recovery: the objects the log restored, sorted
};

}  // namespace pmds::incll

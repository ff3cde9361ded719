// pmds — an epoch domain over xenium's generic_epoch_based reclaimer (Debian libxenium-dev).
// Not the default (reclaim/epoch.hpp has the measurement): kept, with the same interface and
// tests, as the library alternative the project rule prefers when it is fast enough.
//
// xenium's reclaimers are global (static per instantiation) and reclaim nodes that derive from
// enable_concurrent_ptr: a vtable pointer and an intrusive link inside the node. Our persistent
// nodes live in a pool file, written only through the access layer, and must not carry a DRAM
// vtable pointer; so each retire() allocates a small DRAM record that xenium reclaims, and the
// record runs our deleter (which returns the persistent slot to its allocator).
//
// Per-domain drain (needed when a pool closes, while xenium still holds records in other
// threads' retire lists): the domain also links each record into its own per-thread list.
// A record's deleter runs exactly once, by whichever comes first — xenium finding its epoch
// safe, or drain()/the destructor — decided by a CAS on the record's state; drain waits for a
// deleter that xenium's thread is running at that moment, so after drain() returns no deleter
// of this domain runs any more. Whoever finishes with a record last frees it: the domain
// recycles the records xenium has finished with into the retiring thread's free list (so a
// retire allocates nothing in steady state); xenium deletes the records the domain abandoned
// at drain.
//
// Pins use xenium's critical region (a guard_ptr on a static token, which is what makes xenium
// read the global epoch and scan), so a thread pinned in any domain holds back every domain —
// a property of xenium's global design.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "pmds/error.hpp"
#include "pmds/pm/backend.hpp"
#include "pmds/reclaim/retired.hpp"
#include "pmds/reclaim/xenium_generic_epoch.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::reclaim {

namespace detail {

// A distinct traits type gives pmds its own instance of xenium's static reclaimer state, apart
// from any other xenium user in the program. Defaults: scan every 100 critical-region entries,
// all threads, never abandon, eager region extension (NEBR).
struct XeniumTraits : xenium::reclamation::generic_epoch_based_traits<> {};
using XeniumReclaimer = xenium::reclamation::generic_epoch_based<XeniumTraits>;

struct XeniumRecord;
struct XeniumRecordDeleter {
  void operator()(XeniumRecord* r) const noexcept;
};

struct XeniumRecord : XeniumReclaimer::enable_concurrent_ptr<XeniumRecord, 0, XeniumRecordDeleter> {
  // pending -> running -> done: xenium ran the deleter; the record is the domain's to free.
  // pending -> abandoned: drain() ran the deleter and forgot the record; xenium frees it.
  enum State : std::uint32_t { pending, running, done, abandoned };

  Retired item;
  std::atomic<std::uint32_t> state{pending};
  XeniumRecord* next_in_domain = nullptr;  // the retiring slot's list or free list (owner only)
};

// xenium found the record's epoch safe. After the final store, xenium never touches the record
// again (its list walk read the link before calling this).
inline void XeniumRecordDeleter::operator()(XeniumRecord* r) const noexcept {
  std::uint32_t expected = XeniumRecord::pending;
  if (r->state.compare_exchange_strong(expected, XeniumRecord::running,
                                       std::memory_order_acquire)) {
    r->item.run();
    r->state.store(XeniumRecord::done, std::memory_order_release);
  } else {  // abandoned: the domain ran the deleter and dropped the record
    delete r;
  }
}

using XeniumGuardPtr = XeniumReclaimer::concurrent_ptr<XeniumRecord>::guard_ptr;
using XeniumMarkedPtr = XeniumReclaimer::concurrent_ptr<XeniumRecord>::marked_ptr;

// Never retired: a non-null pointer for the guard_ptr that a pin holds.
inline XeniumRecord xenium_pin_token;

}  // namespace detail

class XeniumEpochDomain {
  struct Slot;

 public:
  class [[nodiscard]] Guard {
   public:
    Guard() = default;
    Guard(Guard&& o) noexcept
        : slot_(std::exchange(o.slot_, nullptr)), critical_(std::move(o.critical_)) {}
    Guard& operator=(Guard&& o) noexcept {
      if (this != &o) {
        release();
        slot_ = std::exchange(o.slot_, nullptr);
        critical_ = std::move(o.critical_);
      }
      return *this;
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { release(); }

    void release() noexcept {
      if (slot_ == nullptr) return;
      critical_.reset();  // leaves xenium's critical region (when outermost)
      slot_->depth.store(slot_->depth.load(std::memory_order_relaxed) - 1,
                         std::memory_order_relaxed);
      slot_ = nullptr;
    }
    bool active() const noexcept { return slot_ != nullptr; }

   private:
    friend class XeniumEpochDomain;
    explicit Guard(Slot* slot)
        : slot_(slot), critical_(detail::XeniumMarkedPtr(&detail::xenium_pin_token)) {}
    Slot* slot_ = nullptr;
    detail::XeniumGuardPtr critical_;
  };

  XeniumEpochDomain() : slots_(new Slot[max_threads]) {}
  XeniumEpochDomain(const XeniumEpochDomain&) = delete;
  XeniumEpochDomain& operator=(const XeniumEpochDomain&) = delete;
  ~XeniumEpochDomain() {
    run_all();
    for (std::size_t i = 0; i < max_threads; ++i)
      while (detail::XeniumRecord* r = slots_[i].free_records) {
        slots_[i].free_records = r->next_in_domain;
        delete r;
      }
  }

  Guard pin() {
    Slot& slot = own_slot();
    slot.depth.store(slot.depth.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return Guard(&slot);
  }

  template <class T, class D>
  requires DeleterFor<D, T>
  void retire(T* p, D&& deleter) {
    Slot& slot = own_slot();
    detail::XeniumRecord* record = slot.free_records;
    if (record != nullptr) {
      slot.free_records = record->next_in_domain;
      record->state.store(detail::XeniumRecord::pending, std::memory_order_relaxed);
    } else {
      record = new detail::XeniumRecord;
    }
    record->item = Retired(p, std::forward<D>(deleter));
    record->next_in_domain = slot.records;
    slot.records = record;
    if (++slot.record_count >= slot.prune_at) prune(slot);
    // xenium retires through a guard_ptr holding the node.
    detail::XeniumGuardPtr holder(detail::XeniumMarkedPtr{record});
    holder.reclaim();
  }

  // xenium advances and reclaims on pins (every 100th critical-region entry scans); here
  // collect() just drops the records whose deleters have run from this thread's list.
  void collect() { prune(own_slot()); }

  void drain() {
    const std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < used; ++i)
      if (slots_[i].depth.load(std::memory_order_relaxed) != 0)
        throw Error("pmds::reclaim: drain() while thread id " + std::to_string(i) +
                    " is pinned in the domain");
    run_all();
  }

  bool pinned() const { return slots_[thread_id()].depth.load(std::memory_order_relaxed) != 0; }

  // Records whose deleter has not run. Exact only when quiescent.
  std::size_t pending() const {
    std::size_t n = 0;
    const std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < used; ++i)
      for (auto* r = slots_[i].records; r != nullptr; r = r->next_in_domain)
        n += r->state.load(std::memory_order_acquire) != detail::XeniumRecord::done;
    return n;
  }

 private:
  struct alignas(pm::cache_line_size) Slot {
    std::atomic<std::uint32_t> depth{0};
    bool registered = false;
    detail::XeniumRecord* records = nullptr;       // retired here, deleter maybe not run yet
    detail::XeniumRecord* free_records = nullptr;  // finished by xenium, for reuse
    std::size_t record_count = 0;
    std::size_t prune_at = 64;
  };

  Slot& own_slot() {
    const std::size_t id = thread_id();
    Slot& slot = slots_[id];
    if (!slot.registered) [[unlikely]] {
      std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
      while (used < id + 1 &&
             !slots_in_use_.compare_exchange_weak(used, id + 1, std::memory_order_seq_cst)) {
      }
      slot.registered = true;
    }
    return slot;
  }

  // Moves the records whose deleter xenium has run to the free list; keeps the list short
  // (amortised O(1) per retire).
  static void prune(Slot& slot) {
    detail::XeniumRecord** link = &slot.records;
    std::size_t kept = 0;
    while (detail::XeniumRecord* r = *link) {
      if (r->state.load(std::memory_order_acquire) == detail::XeniumRecord::done) {
        *link = r->next_in_domain;
        r->next_in_domain = slot.free_records;
        slot.free_records = r;
      } else {
        link = &r->next_in_domain;
        ++kept;
      }
    }
    slot.record_count = kept;
    slot.prune_at = kept * 2 > 64 ? kept * 2 : 64;
  }

  // Runs the deleter of every record xenium has not run yet; waits for those it is running.
  void run_all() noexcept {
    const std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < used; ++i) {
      Slot& slot = slots_[i];
      while (detail::XeniumRecord* r = slot.records) {
        slot.records = r->next_in_domain;
        Retired item = r->item;  // read first: once abandoned, xenium may free r at any time
        std::uint32_t state = detail::XeniumRecord::pending;
        if (r->state.compare_exchange_strong(state, detail::XeniumRecord::abandoned,
                                             std::memory_order_acq_rel)) {
          item.run();
          continue;
        }
        while (state != detail::XeniumRecord::done) {  // xenium's thread is running it
          __builtin_ia32_pause();
          state = r->state.load(std::memory_order_acquire);
        }
        delete r;
      }
      slot.record_count = 0;
      slot.prune_at = 64;
    }
  }

  alignas(pm::cache_line_size) std::atomic<std::size_t> slots_in_use_{0};
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace pmds::reclaim

// pmds — a minimal epoch-based reclamation domain (Fraser's EBR, the ssmem variant Zuriel et al. §5
// uses), one per structure instance.
//
// Why hand-written when xenium is installed: the project rule is to use xenium unless it is
// more than 10% slower than a minimal scheme on a list benchmark, so this is the yardstick;
// and it gives what xenium's global reclaimer cannot: per-domain state (a thread pinned in one
// structure does not hold back reclamation in another, and drain() empties exactly one
// structure's retire lists when its pool closes) with no per-retire allocation and nothing
// written into the retired object. The comparison and the choice are in reclaim/epoch.hpp.
//
// The scheme:
// - a global epoch e (per domain), starting at 1;
// - per thread id (pmds::thread_id()) a cache-line slot announcing the epoch the thread saw
//   when it pinned, or 0 when idle; pins nest (a depth counter, only the first pin announces);
// - retire(p) tags p with the global epoch g read after p was unlinked, and puts it in the
//   thread's bucket g % 3;
// - the epoch advances from e to e+1 once every pinned thread announces e;
// - p is freed once the global epoch is >= g+2. Why that is safe: a thread R that still holds
//   p pinned before p was unlinked, so it announced some a <= g; the epoch cannot go past a+1
//   while R stays pinned, so reaching g+2 >= a+2 needs R to have unpinned since.
// All cross-thread operations are seq_cst atomics (a pin is one xchg on x86); there are no
// stand-alone fences, which ThreadSanitizer does not model.
//
// A thread that exits with retires pending hands them to the domain's orphan list (a
// thread_local exit hook, holding a weak reference so that a domain destroyed first is
// skipped; or earlier, when it calls detach_this_thread()); other threads' collect() runs them
// once safe, and drain()/the destructor run them in any case, so nothing leaks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/pm/backend.hpp"
#include "pmds/reclaim/retired.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::reclaim {

class MinimalEpochDomain;

namespace detail {

// What an exiting thread's hook reaches: the domain while it lives (null once destroyed).
struct MinimalDomainShared {
  std::mutex mutex;
  MinimalEpochDomain* domain;
};

// Per thread: the domains this thread retired into or pinned in, and its id in each.
struct MinimalExitHook {
  struct Entry {
    std::weak_ptr<MinimalDomainShared> shared;
    std::size_t id;
  };
  std::vector<Entry> entries;
  void detach();  // each domain's pending retires become its orphans; entries empty
  ~MinimalExitHook() { detach(); }
};

inline thread_local MinimalExitHook minimal_exit_hook;

}  // namespace detail

class MinimalEpochDomain {
  struct Slot;

 public:
  // Retires between two attempts to advance the epoch and free this thread's safe buckets, by
  // default.
  static constexpr std::uint32_t default_collect_every = 64;

  // The pin of one operation: while a Guard lives, no pointer retired in this domain after the
  // pin is freed. Move-only; destroying (or release()) unpins.
  class [[nodiscard]] Guard {
   public:
    Guard() = default;
    Guard(Guard&& o) noexcept : slot_(std::exchange(o.slot_, nullptr)) {}
    Guard& operator=(Guard&& o) noexcept {
      if (this != &o) {
        release();
        slot_ = std::exchange(o.slot_, nullptr);
      }
      return *this;
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { release(); }

    // Unpins now (idempotent).
    void release() noexcept {
      if (slot_ == nullptr) return;
      const std::uint32_t depth = slot_->depth.load(std::memory_order_relaxed) - 1;
      slot_->depth.store(depth, std::memory_order_relaxed);
      // release: this thread's reads of retired nodes happen before an advancer sees it idle.
      if (depth == 0) slot_->announced.store(0, std::memory_order_release);
      slot_ = nullptr;
    }
    bool active() const noexcept { return slot_ != nullptr; }

   private:
    friend class MinimalEpochDomain;
    explicit Guard(Slot* slot) noexcept : slot_(slot) {}
    Slot* slot_ = nullptr;
  };

  // `collect_every`: retires between two attempts to advance (fewer: freed sooner, more scans).
  explicit MinimalEpochDomain(std::uint32_t collect_every = default_collect_every)
      : collect_every_(collect_every),
        slots_(new Slot[max_threads]),
        shared_(std::make_shared<detail::MinimalDomainShared>()) {
    shared_->domain = this;
  }
  MinimalEpochDomain(const MinimalEpochDomain&) = delete;
  MinimalEpochDomain& operator=(const MinimalEpochDomain&) = delete;

  // Does now, for every domain, what the calling thread's exit would do later: its pending
  // retires become orphans that other threads' collects run. The thread must not be pinned; it
  // may use a domain again (it registers afresh). The crash lab's scheduled threads call it in
  // their last turn, so that this happens at the same point of every replay, not whenever the
  // operating system ends the thread.
  static void detach_this_thread() { detail::minimal_exit_hook.detach(); }

  // Runs every pending deleter. The structure must be quiescent (no thread pinned or retiring).
  ~MinimalEpochDomain() {
    {
      std::lock_guard lock(shared_->mutex);  // exiting threads no longer hand us anything
      shared_->domain = nullptr;
    }
    run_all();
  }

  // Enters a critical region around one operation; nestable and cheap (one xchg when outermost).
  Guard pin() {
    Slot& slot = own_slot();
    const std::uint32_t depth = slot.depth.load(std::memory_order_relaxed);
    slot.depth.store(depth + 1, std::memory_order_relaxed);
    if (depth == 0) {
      // seq_cst store: ordered before this thread's later loads of shared pointers, so an
      // advancer that does not see this announcement advanced before those loads.
      slot.announced.store(epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
    }
    return Guard(&slot);
  }

  // Hands p to the domain: deleter(p) runs once no thread that was pinned when p was retired is
  // still pinned (p must already be unreachable for threads that pin from now on). May run
  // other pointers' deleters (of this thread's older retires) before returning.
  template <class T, class D>
  requires DeleterFor<D, T>
  void retire(T* p, D&& deleter) {
    Slot& slot = own_slot();
    // seq_cst: read after the caller's unlink (a seq_cst RMW or store), see the proof above.
    const std::uint64_t epoch = epoch_.load(std::memory_order_seq_cst);
    Bucket& bucket = slot.buckets[epoch % bucket_count];
    if (bucket.epoch != epoch) {
      // The bucket holds an epoch <= epoch - 3 (same residue, older): safe now.
      run_bucket(bucket, epoch);
    }
    bucket.items.emplace_back(p, std::forward<D>(deleter));
    if (++slot.retires_since_collect >= collect_every_) collect(slot);
  }

  // Tries to advance the epoch, then runs this thread's deleters whose epoch is safe.
  // Called by retire() every collect_every retires; tests and idle threads may call it.
  void collect() { collect(own_slot()); }

  // Quiescent (no thread pinned or retiring in this domain): runs every pending deleter now.
  // Throws pmds::Error if a thread is pinned (its pointers would be freed under it).
  void drain() {
    const std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < used; ++i)
      if (slots_[i].announced.load(std::memory_order_seq_cst) != 0)
        throw Error("pmds::reclaim: drain() while thread id " + std::to_string(i) +
                    " is pinned in the domain");
    run_all();
  }

  // True when the calling thread is pinned in this domain.
  bool pinned() const { return slots_[thread_id()].depth.load(std::memory_order_relaxed) != 0; }

  // Pointers retired and not yet freed. Exact only when quiescent.
  std::size_t pending() const {
    std::size_t n = 0;
    const std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < used; ++i)
      for (const Bucket& b : slots_[i].buckets) n += b.items.size();
    std::lock_guard lock(shared_->mutex);
    for (const Bucket& b : orphans_) n += b.items.size();
    return n;
  }

  std::uint64_t epoch() const { return epoch_.load(std::memory_order_seq_cst); }

 private:
  static constexpr std::size_t bucket_count = 3;

  struct Bucket {
    std::uint64_t epoch = 0;
    std::vector<Retired> items;
  };

  // One per thread id. announced is read by advancers; everything else only by the owner
  // (or by drain/destructor when quiescent). depth is atomic only so that pinned() and a
  // misuse check may read it.
  struct alignas(pm::cache_line_size) Slot {
    std::atomic<std::uint64_t> announced{0};
    std::atomic<std::uint32_t> depth{0};
    std::uint32_t retires_since_collect = 0;
    bool registered = false;
    Bucket buckets[bucket_count];
  };

  friend struct detail::MinimalExitHook;

  Slot& own_slot() {
    const std::size_t id = thread_id();  // before the exit hook: the id outlives the hook
    Slot& slot = slots_[id];
    if (!slot.registered) [[unlikely]] {
      register_slot(id);
      auto& entries = detail::minimal_exit_hook.entries;
      if (entries.size() >= 16)  // forget destroyed domains
        std::erase_if(entries, [](const auto& e) { return e.shared.expired(); });
      entries.push_back({shared_, id});
      slot.registered = true;
    }
    return slot;
  }

  // Called by the exiting owner of slot id, under shared_->mutex: its pending retires become
  // orphans, and the next thread given this id registers afresh.
  void orphan_slot(std::size_t id) {
    Slot& slot = slots_[id];
    for (Bucket& b : slot.buckets)
      if (!b.items.empty()) orphans_.push_back(Bucket{b.epoch, std::exchange(b.items, {})});
    slot.registered = false;
    slot.retires_since_collect = 0;
    if (!orphans_.empty()) has_orphans_.store(true, std::memory_order_release);
  }

  // Runs the orphaned retires whose epoch is safe (or all of them).
  void adopt_orphans(std::uint64_t epoch, bool all) {
    std::vector<Bucket> ready;
    {
      std::lock_guard lock(shared_->mutex);
      for (std::size_t i = 0; i < orphans_.size();) {
        if (all || orphans_[i].epoch + 2 <= epoch) {
          ready.push_back(std::move(orphans_[i]));
          orphans_[i] = std::move(orphans_.back());
          orphans_.pop_back();
        } else {
          ++i;
        }
      }
      if (orphans_.empty()) has_orphans_.store(false, std::memory_order_relaxed);
    }
    for (Bucket& b : ready)
      for (Retired& r : b.items) r.run();
  }

  // Raises the scan bound so advancers look at this slot from now on (before its first
  // announcement: an advancer that read the old bound treats the thread as idle, which is
  // right, as its pin comes after that advancer's epoch read).
  void register_slot(std::size_t id) {
    std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
    while (used < id + 1 &&
           !slots_in_use_.compare_exchange_weak(used, id + 1, std::memory_order_seq_cst)) {
    }
  }

  // Advances the epoch if every pinned thread has announced the current one.
  void try_advance() {
    std::uint64_t epoch = epoch_.load(std::memory_order_seq_cst);
    const std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < used; ++i) {
      const std::uint64_t a = slots_[i].announced.load(std::memory_order_seq_cst);
      if (a != 0 && a != epoch) return;
    }
    epoch_.compare_exchange_strong(epoch, epoch + 1, std::memory_order_seq_cst);
  }

  void collect(Slot& slot) {
    slot.retires_since_collect = 0;
    try_advance();
    const std::uint64_t epoch = epoch_.load(std::memory_order_seq_cst);
    for (Bucket& b : slot.buckets)
      if (!b.items.empty() && b.epoch + 2 <= epoch) run_bucket(b, b.epoch);
    if (has_orphans_.load(std::memory_order_acquire)) [[unlikely]]
      adopt_orphans(epoch, false);
  }

  // Runs the bucket's deleters and retags it with new_epoch. The items are moved out first, so
  // the bucket is consistent while deleters run; the vector's capacity is kept for reuse.
  static void run_bucket(Bucket& bucket, std::uint64_t new_epoch) {
    std::vector<Retired> batch;
    batch.swap(bucket.items);
    bucket.epoch = new_epoch;
    for (Retired& r : batch) r.run();
    batch.clear();
    if (bucket.items.empty()) bucket.items.swap(batch);
  }

  void run_all() {
    const std::size_t used = slots_in_use_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < used; ++i)
      for (Bucket& b : slots_[i].buckets)
        while (!b.items.empty()) run_bucket(b, b.epoch);
    while (has_orphans_.load(std::memory_order_acquire)) adopt_orphans(0, true);
  }

  alignas(pm::cache_line_size) std::atomic<std::uint64_t> epoch_{1};
  alignas(pm::cache_line_size) std::atomic<std::size_t> slots_in_use_{0};
  const std::uint32_t collect_every_;
  std::unique_ptr<Slot[]> slots_;
  std::shared_ptr<detail::MinimalDomainShared> shared_;
  std::vector<Bucket> orphans_;  // under shared_->mutex
  std::atomic<bool> has_orphans_{false};
};

inline void detail::MinimalExitHook::detach() {
  for (Entry& e : entries)
    if (auto shared = e.shared.lock()) {
      std::lock_guard lock(shared->mutex);
      if (shared->domain != nullptr) shared->domain->orphan_slot(e.id);
    }
  entries.clear();
}

}  // namespace pmds::reclaim

// pmds crash lab — the chunk allocator under the lab (docs/ARCHITECTURE.md §4–5).
//
// AllocatorProbe is a durable set built to exercise pm::ChunkAllocator's slot accounting rather
// than an algorithm: every element is a slot of its own, 1008 bytes for odd keys and 4096 for
// even ones (two slot sizes, 260 and 64 slots per 256 KiB chunk of the lab's pools), so a lab
// workload claims chunks of two sizes in every thread, and allocates, frees and reuses slots across
// crashes. The lab's verdict then checks the allocator (crashlab/verdict.hpp):
//   - a slot that durably holds an element is live after recovery: every completed insert is
//     recovered (the history check), including its slot's chunk (a chunk claimed durably);
//   - every other slot is free: the allocator's live slots equal the slots the probe holds,
//     counted from its own table (the exact leak check) — one slot lost or kept is reported;
//   - no slot is handed out twice or while live: the operations after recovery allocate
//     through it, and the reopened contents must be exactly what they did.
//
// Layout: the anchor (root slot 0) is a table of `capacity` words, key -> element slot (0:
// absent). An element slot starts {stamp, key, value}; stamp = a constant ^ the slot's address,
// so a stale or foreign slot is never mistaken for one. Durability (durable linearizability):
//   insert: the element's stamp, key and value persisted, then the table word CASed 0 -> slot and
//           persisted before returning;
//   remove: the table word CASed slot -> 0 and persisted, then the slot freed. contains() reads
//           only the table, so a slot is never read after it is freed (no reclamation needed).
// Recovery: a slot is live iff its stamp is right and the table names it for its key.
//
// AllocatorProbe<Bug> plants one of the pool layer's bugs (pm/planted_bugs.hpp) in the simulated
// backend: a claimed chunk's directory word never persisted (a crash can free a chunk that holds
// a durable element), or one of the growth's (the lab's growing runs grow its pool several
// times: the header's new size persisted before the extension, chunks handed out before the
// header names them, the extension mapped away from the pool's base).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/planted_bugs.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::crashlab {

template <pm::PlantedPoolBug Bug = pm::PlantedPoolBug::none>
class AllocatorProbe {
 public:
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr std::size_t capacity = 4096;              // keys 0 .. capacity-1
  static constexpr std::uint64_t kind = 0x70726f6265616c63;  // "probealc"

  AllocatorProbe(CreateTag, pm::Pool& pool) : pool_(&pool) {
    plant();
    if (pool.root(0).load() != 0)
      throw PoolError(PoolErrc::bad_argument,
                      "pmds: pool " + pool.path() + " already holds a structure");
    anchor_ = static_cast<Anchor*>(pool.allocator().allocate(sizeof(Anchor)));
    anchor_->kind.store(kind);
    for (auto& w : anchor_->table) w.store(0);
    pm::persist(anchor_, sizeof(Anchor));
    pool.root(0).store(reinterpret_cast<std::uint64_t>(anchor_));
    pm::persist(&pool.root(0), sizeof(std::uint64_t));
  }

  AllocatorProbe(OpenTag, pm::Pool& pool) : pool_(&pool) {
    plant();
    anchor_ = reinterpret_cast<Anchor*>(pool.root(0).load());
    if (anchor_ == nullptr || pool.allocator().slot_size_of(anchor_) < sizeof(Anchor) ||
        anchor_->kind.load() != kind)
      throw PoolError(PoolErrc::bad_argument,
                      "pmds: pool " + pool.path() + " holds no allocator probe");
    const pm::AllocatorRecoveryStats found =
        pool.allocator().recover([this](void* slot, std::size_t) { return is_live(slot); });
    // The slots the probe holds, from its own table: the anchor and one per element.
    recovery_.live_slots = 1;
    for (const auto& w : anchor_->table) recovery_.live_slots += w.load() != 0;
    recovery_.slots_scanned = found.live_slots + found.free_slots;
    recovery_.freed_slots = found.free_slots;
  }

  // A result read from the table is returned only once what was read is durable: the writer
  // may not have persisted it yet (the crash lab's return crash points found this reader-side
  // rule missing here: insert -> false on a key whose insert was not yet durable).
  bool insert(Key k, Value v) {
    auto& word = table_word(k);
    if (word.load() != 0) return observed(word, false);
    auto* e = static_cast<Element*>(pool_->allocator().allocate(k % 2 ? 1008 : 4096));
    e->stamp.store(stamp_of(e));
    e->key.store(k);
    e->value.store(v);
    pm::persist(e, sizeof(Element));  // the element before the table names it
    std::uint64_t expected = 0;
    if (!word.compare_exchange_strong(expected, reinterpret_cast<std::uint64_t>(e))) {
      pool_->allocator().free(e);  // never published: recovery frees it too (the table says so)
      return observed(word, false);
    }
    pm::persist(&word, sizeof(std::uint64_t));
    return true;
  }

  bool remove(Key k) {
    auto& word = table_word(k);
    std::uint64_t e = word.load();
    while (e != 0) {
      if (word.compare_exchange_strong(e, 0)) {
        pm::persist(&word, sizeof(std::uint64_t));  // absent durably before the slot is reused
        pool_->allocator().free(reinterpret_cast<void*>(e));
        return true;
      }
    }
    return observed(word, false);
  }

  bool contains(Key k) {
    auto& word = table_word(k);
    return observed(word, word.load() != 0);
  }

  // Quiescent.
  template <class F>
  void for_each(F&& f) {
    for (std::size_t k = 0; k < capacity; ++k)
      if (const auto e = anchor_->table[k].load())
        f(static_cast<Key>(k), reinterpret_cast<Element*>(e)->value.load());
  }

  const RecoveryStats& recovery_stats() const { return recovery_; }

 private:
  struct Anchor {
    pm::atomic<std::uint64_t> kind;
    pm::atomic<std::uint64_t> table[capacity];
  };
  struct Element {
    pm::atomic<std::uint64_t> stamp, key, value;
  };

  static bool observed(pm::atomic<std::uint64_t>& word, bool result) {
    pm::persist(&word, sizeof(std::uint64_t));
    return result;
  }

  static std::uint64_t stamp_of(const void* slot) {
    return 0x5354414d50000001ull ^ reinterpret_cast<std::uintptr_t>(slot);
  }

  static void plant() { pm::planted_pool_bug = Bug; }

  pm::atomic<std::uint64_t>& table_word(Key k) {
    if (k >= capacity)
      throw Error("pmds: the allocator probe holds keys below " + std::to_string(capacity) +
                  ", not " + std::to_string(k));
    return anchor_->table[k];
  }

  bool is_live(void* slot) const {
    if (slot == anchor_) return true;
    auto* e = static_cast<Element*>(slot);
    const std::uint64_t k = e->key.load();
    return e->stamp.load() == stamp_of(slot) && k < capacity &&
           anchor_->table[k].load() == reinterpret_cast<std::uint64_t>(slot);
  }

  pm::Pool* pool_;
  Anchor* anchor_ = nullptr;
  RecoveryStats recovery_;
};

}  // namespace pmds::crashlab

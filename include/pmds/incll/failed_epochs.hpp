// pmds::incll — the record of failed epochs (InCLL §3: "we also keep track of failed epochs"),
// part of the checkpoints' anchor (incll/checkpoints.hpp).
//
// A crash during epoch f makes f a failed epoch. Lazy recovery (InCLL §4.3) undoes a border's
// InCLLs, and a block list's EpochLinks read as they were (§5.1), when the epoch they carry is a
// failed one, so an epoch stays in the pool's record until every node is known to be free of it:
// the eager recovery empties the record once it has recovered, flushed and fenced every border
// (and it runs whenever the record is full).
//
// Invariants of the durable record: at most failed_epoch_capacity epochs, ascending, each
// before the pool's current epoch; an epoch is written and persisted before the count that
// includes it (record), so a crash leaves the record as it was or with the epoch added.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pmds/faults.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::incll {

inline constexpr std::size_t failed_epoch_capacity = 63;

// The durable record, in the anchor.
struct alignas(64) FailedEpochs {
  pm::atomic<std::uint64_t> count;
  pm::atomic<std::uint64_t> epochs[failed_epoch_capacity];  // ascending
};

// One recovery's view of the record: the failed epochs (the record's and the one this recovery
// found; ascending) and how many of them the record holds.
template <FaultPolicy Faults = NoFaults>
class FailedEpochRecord {
 public:
  // Recovery's first step, before anything is written: reads and checks the record; `current`
  // is the pool's epoch, the one this recovery finds failed unless the pool was shut down
  // cleanly (then nothing ran in it). `corrupt(what)` must throw.
  template <class Corrupt>
  void read(FailedEpochs& durable, std::uint64_t current, bool clean_shutdown, Corrupt&& corrupt) {
    durable_ = &durable;
    stored_ = durable.count.load();
    if (stored_ > failed_epoch_capacity)
      corrupt("the record of failed epochs is longer than it can be");
    for (std::size_t i = 0; i < stored_; ++i) {
      const std::uint64_t e = durable.epochs[i].load();
      if (e == 0 || e > current || (!failed_.empty() && e <= failed_.back()))
        corrupt("the record of failed epochs is out of order");
      failed_.push_back(e);
    }
    if (!clean_shutdown && (failed_.empty() || failed_.back() != current)) {
      if constexpr (Faults::planted == Fault::recovery_drops_last_epoch)
        if (current > 1 && (failed_.empty() || failed_.back() < current - 1))
          failed_.push_back(current - 1);
      failed_.push_back(current);
    }
    for (std::uint64_t e : failed_) failed32_.push_back(static_cast<std::uint32_t>(e));
    std::sort(failed32_.begin(), failed32_.end());
  }

  // Whether the record can take the epoch this recovery found failed (lazy recovery needs it).
  bool has_room() const { return stored_ + (last_stored() ? 0 : 1) <= failed_epoch_capacity; }

  // Lazy recovery, before any border is recovered: the failed epoch joins the record, durably.
  void record() {
    if (last_stored()) return;  // none, or a crash during an earlier recovery stored it
    durable_->epochs[stored_].store(failed_.back());
    // Mutant survives: the first seven epochs share the count's line, whose stores persist in
    // order, and no lab run records seven; from the eighth on, this orders the epoch before the
    // count that includes it.
    pm::persist(&durable_->epochs[stored_], sizeof(std::uint64_t));
    durable_->count.store(++stored_);
    // Mutant killed by test: durable_masstree_sim_test
    // ByteStringBlockLists.ALazyRecoveryRecordsTheFailedEpochDurablyBeforeOperationsRun (the
    // byte-string trees' block lists: the lab's small workloads do not crash right after a lazy
    // open there).
    // Mutant survives (masstree/logging): nothing it reads asks the record. Its borders carry no
    // InCLL (node_epoch is a creation or a recovery mark, and a border made in a failed epoch is
    // unreachable after it) and its 8-byte entries no EpochLink (the byte-string tree's block
    // lists do).
    pm::persist(&durable_->count, sizeof(std::uint64_t));
  }

  // Eager recovery, once every border is recovered, flushed and fenced (and the block lists
  // rewritten): no node carries a failed epoch any more.
  void forget() {
    durable_->count.store(0);
    // Mutant survives: a record a crash brings back names only epochs no border or block-list
    // link carries any more (the eager recovery recovered, flushed and fenced them all before;
    // later epochs are larger): recovery undoes nothing more for them, and the record fills
    // sooner.
    pm::persist(&durable_->count, sizeof(std::uint64_t));
    stored_ = 0;
    failed32_.clear();
  }

  bool is_failed(std::uint64_t e) const {
    return e != 0 && std::binary_search(failed_.begin(), failed_.end(), e);
  }
  // The same question for a 32-bit epoch, as EpochLink asks it.
  auto failed32() const {
    return [this](std::uint32_t e) {
      return !failed32_.empty() && std::binary_search(failed32_.begin(), failed32_.end(), e);
    };
  }
  std::size_t stored() const { return stored_; }

 private:
  // Whether the record already holds the epoch this recovery finds failed (or it found none).
  bool last_stored() const {
    return failed_.empty() ||
           (stored_ > 0 && durable_->epochs[stored_ - 1].load() == failed_.back());
  }

  FailedEpochs* durable_ = nullptr;
  std::vector<std::uint64_t> failed_;
  std::vector<std::uint32_t> failed32_;  // sorted
  std::size_t stored_ = 0;
};

}  // namespace pmds::incll

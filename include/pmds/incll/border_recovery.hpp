// pmds::incll::BorderRecovery — recovery of the durable Masstree's border nodes (InCLL §4.3):
// a border's InCLL_p and value InCLLs put back when they carry a failed epoch, lazily on the
// border's first access or eagerly at open (incll/durable_masstree.hpp), for the epoch
// checkpoints (incll/checkpoints.hpp).
//
// A border is recovered on its first access in an execution (its node_epoch names an epoch
// before this execution's first): under one of a transient array of recovery locks (its own
// lock word may be in any state after a crash), its permutation comes back from InCLL_p when
// node_epoch names a failed epoch, each value from its line's InCLL when that names one, its
// lock and dirty bits are cleared, and node_epoch is set to the execution's first epoch with
// InCLL_p holding the permutation now — true, since nothing changed the border in this
// execution before (InCLL Listing 4 sets nodeEpoch alone: a permutationInCLL left from an
// old epoch would then be taken for this one's).
//
// Invariant: nothing is flushed by lazy recovery; a failed epoch stays in the pool's record
// (incll/failed_epochs.hpp) until every border is known free of it, so a crash before these
// stores persist recovers the border again, and each line persists its stores in order. A border
// is checked before it is written (check), as the eager walk checks every border: a damaged one
// ends in PoolCorrupt, from the operation that reaches it when lazy.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "pmds/faults.hpp"
#include "pmds/incll/failed_epochs.hpp"
#include "pmds/incll/masstree.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::incll {

template <FaultPolicy Faults = NoFaults>
class BorderRecovery {
  using Border = masstree_detail::Border;
  using Permutation = masstree_detail::Permutation;
  static constexpr int width = masstree_detail::width;
  static constexpr int per_line = masstree_detail::ValueLine::values;

 public:
  // `byte_strings`: the tree's entries are byte strings (else 8-byte keys and values).
  BorderRecovery(const pm::Pool& pool, bool byte_strings, const FailedEpochRecord<Faults>& failed)
      : pool_(pool), byte_strings_(byte_strings), failed_(failed) {}

  // This execution's first epoch: the mark of a border recovered in it.
  void set_execution_epoch(std::uint64_t e) { exec_epoch_ = e; }
  std::uint64_t execution_epoch() const { return exec_epoch_; }

  // `check` is called with each border lazy recovery is about to recover, under its recovery
  // lock, before it is written (the byte-string tree's lazy open). Set before operations start.
  void set_before_recovery(std::function<void(Border&)> check) {
    before_recovery_ = std::move(check);
  }

  // Before any read or write of border `b` in this execution: recovers it on its first access.
  void before_access(Border& b) const {
    if ((b.node_epoch.load(std::memory_order_acquire) >> 1) >= exec_epoch_) [[likely]]
      return;
    std::lock_guard<std::mutex> hold(
        locks_[reinterpret_cast<std::uintptr_t>(&b) / 512 % lock_count]);
    if ((b.node_epoch.load(std::memory_order_acquire) >> 1) >= exec_epoch_) return;
    if (before_recovery_) before_recovery_(b);
    recover(b, /*flush=*/false);
  }

  // Checks a border as recover() would find it (PoolCorrupt when damaged), writing nothing, and
  // returns the permutation it will have: the eager recovery checks every border before it
  // writes the first.
  Permutation check(const Border& b) const {
    return check(b, is_failed(b.node_epoch.load(std::memory_order_relaxed) >> 1));
  }

  // The value word `slot` of a border will hold once recover() has run.
  std::uint64_t value_after_recovery(const Border& b, int slot) const {
    const masstree_detail::ValueLine& line = b.value_lines[slot / per_line];
    const std::uint64_t tag = line.log_tag.load(std::memory_order_relaxed);
    if (tag != 0 && is_failed(tag >> 3) && static_cast<int>(tag & 7) == slot % per_line)
      return line.log_value.load(std::memory_order_relaxed);
    return line.value[slot % per_line].load(std::memory_order_relaxed);
  }

  // Recovers one border (above); the eager recovery calls it for every border, with `flush`.
  void recover(Border& b, bool flush) const {
    bool roll_back = is_failed(b.node_epoch.load(std::memory_order_relaxed) >> 1);
    if constexpr (Faults::planted == Fault::lazy_recovery_skips_node)
      if (roll_back && !skipped_.exchange(true)) roll_back = false;
    const Permutation perm = check(b, roll_back);
    std::size_t values = 0;
    for (int l = 0; l * per_line < width; ++l) {
      masstree_detail::ValueLine& line = b.value_lines[l];
      const std::uint64_t tag = line.log_tag.load(std::memory_order_relaxed);
      if (tag == 0 || !is_failed(tag >> 3)) continue;
      const int index = static_cast<int>(tag & 7);
      line.value[index].store(line.log_value.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
      line.log_tag.store(0, std::memory_order_relaxed);
      if (flush) pm::flush_range(&line, sizeof line);
      ++values;
    }
    constexpr std::uint64_t transient_bits =
        masstree_detail::locked_bit | masstree_detail::dirty_bits;
    const std::uint64_t v = b.version.load(std::memory_order_relaxed);
    if (v & transient_bits) b.version.store(v & ~transient_bits, std::memory_order_relaxed);
    // One line: the permutation, then its log, then the epoch that vouches for the log.
    if (roll_back) b.permutation.store(perm.word, std::memory_order_relaxed);
    b.permutation_log.store(perm.word, std::memory_order_relaxed);
    b.node_epoch.store(exec_epoch_ << 1 | 1, std::memory_order_release);
    // Mutant survives (logging): the logging mode's borders carry no InCLL, so these stores are
    // the lock bits cleared, InCLL_p set to the permutation unchanged, and the mark, in one line
    // in that order: a crash keeps a prefix, and a border without the mark is recovered again.
    if (flush) pm::flush_range(&b.permutation, sizeof b.permutation);  // the first line
    permutations_restored_.fetch_add(roll_back ? 1 : 0, std::memory_order_relaxed);
    values_restored_.fetch_add(values, std::memory_order_relaxed);
  }

  // Borders whose InCLL_p, and values whose InCLL, recovery has applied so far.
  std::size_t permutations_restored() const {
    return permutations_restored_.load(std::memory_order_relaxed);
  }
  std::size_t values_restored() const { return values_restored_.load(std::memory_order_relaxed); }

 private:
  bool is_failed(std::uint64_t e) const { return failed_.is_failed(e); }

  // The border's permutation (its logged one when `roll_back`), checked with the entries it
  // lists, the next link (a border of a strictly greater low key, so no walk along next links
  // can cycle) and the value InCLLs of a failed epoch.
  Permutation check(const Border& b, bool roll_back) const {
    const pm::ChunkAllocator& a = pool_.allocator();
    const Permutation perm{roll_back ? b.permutation_log.load(std::memory_order_relaxed)
                                     : b.permutation.load(std::memory_order_relaxed)};
    std::uint32_t slots = 0;
    for (int p = 0; p < width; ++p) slots |= 1u << perm.slot(p);
    if (perm.size() > width || slots != (1u << width) - 1)
      a.corrupt("a border's permutation is not a permutation");
    for (int p = 0; p < perm.size(); ++p) {
      const int s = perm.slot(p);
      const std::uint8_t kind = b.kind[s].load(std::memory_order_relaxed);
      const bool suffix = b.suffix[s].load(std::memory_order_relaxed) != nullptr;
      if (!byte_strings_ && (kind != 8 || suffix))
        a.corrupt("a border entry that is not an 8-byte key");
      if (byte_strings_ &&
          (kind > masstree_detail::has_layer || suffix != (kind == masstree_detail::has_suffix)))
        a.corrupt("a border entry of no kind");
    }
    const Border* next = b.next.load(std::memory_order_relaxed);
    if (next != nullptr) {
      a.checked_slot(next, sizeof(Border), "a border's next link");
      if (a.slot_size_of(next) != pm::ChunkAllocator::slot_size_for(sizeof(Border)) ||
          !masstree_detail::is_border(next->version.load(std::memory_order_relaxed)) ||
          !(b.low() < next->low()))
        a.corrupt("a border's next link does not lead right to a border");
    }
    // The keys, in the permutation's order, ascend within [low, next's low): a split of a
    // border whose keys do not would hand its sibling a low key out of order.
    masstree_detail::LayerKey previous = b.low();
    for (int p = 0; p < perm.size(); ++p) {
      const int s = perm.slot(p);
      const masstree_detail::LayerKey k{
          b.slice[s].load(std::memory_order_relaxed),
          masstree_detail::length_class_of(b.kind[s].load(std::memory_order_relaxed))};
      if (k < previous || (p > 0 && !(previous < k)) || (next != nullptr && !(k < next->low())))
        a.corrupt("a border's keys are out of order or out of its range");
      previous = k;
    }
    for (int l = 0; l * per_line < width; ++l) {
      const std::uint64_t tag = b.value_lines[l].log_tag.load(std::memory_order_relaxed);
      if (tag == 0 || !is_failed(tag >> 3)) continue;
      const int index = static_cast<int>(tag & 7);
      if (index >= per_line || l * per_line + index >= width)
        a.corrupt("a value InCLL names no value of its line");
    }
    return perm;
  }

  const pm::Pool& pool_;
  bool byte_strings_;
  const FailedEpochRecord<Faults>& failed_;
  std::uint64_t exec_epoch_ = 0;
  static constexpr std::size_t lock_count = 1024;
  mutable std::unique_ptr<std::mutex[]> locks_{new std::mutex[lock_count]};
  std::function<void(Border&)> before_recovery_;
  mutable std::atomic<std::size_t> permutations_restored_{0};
  mutable std::atomic<std::size_t> values_restored_{0};
  mutable std::atomic<bool> skipped_{false};  // Fault::lazy_recovery_skips_node
};

}  // namespace pmds::incll

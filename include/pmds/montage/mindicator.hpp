// pmds::montage::Mindicator — the epoch mindicator of nbMontage's advance (§3.6 of its paper, after
// Liu, Luchangco and Spear's mindicators; docs/ARCHITECTURE.md §1, montage/).
//
// A fixed-size balanced binary tree with one leaf per thread id (pmds::max_threads). A leaf holds
// the epoch its thread last announced; an inner node holds the minimum of its subtree. An epoch
// advance from e to e+1 reads the root: when it is at least e, no thread can still have blocks of
// e-1 to write back and the advance looks at no thread at all; otherwise it goes down only into
// subtrees below e, nearest to its caller's own leaf first (§3.6: concurrent sync() callers then
// start in different subtrees and share the work). Wait-free: every loop is bounded by the tree.
//
// Concurrency. A leaf changes by `announce` (its owner, at its first operation in an epoch) and by
// `raise` (an advancer that has written back a lagging thread); afterwards the writer refreshes
// the ancestors: load the node, read its two children, CAS the recomputed node in, once more if
// that CAS failed (Jayanti's f-array refresh). If both CASes of a level fail, another refresh
// succeeded in between whose children were read after this leaf changed, so when a join returns
// the root reflects its leaf (or a later value of it) — the property advance() needs: a thread's
// first announce is in the root before any of its operations can commit. A rise may stop at the
// first ancestor it leaves unchanged: a root below the leaves only makes an advance look at a
// thread that does not lag.
//
// The double refresh needs a CAS that fails whenever the node changed since its load (no ABA).
// Here every node word only grows, in the order (joined leaves below, minimum epoch): a leaf
// starts unused (0 joined, epoch "none"), joins once (1 joined, the epoch its thread read) and
// afterwards only grows — an owner announces max(its leaf, the epoch it read), which is sound
// because an advancer only raises a leaf to e once the clock has reached e, so an operation
// tagged with a smaller epoch cannot commit (its lin_cas decides "failed"); the epoch-system
// header argues the rest. A join lowers the epoch but raises the joined count, so the word still
// grows; a node never takes an old value again, and a CAS from a stale load fails. The joined
// count needs 8 bits (at most 128 leaves), the epoch the other 56.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pmds/thread_registry.hpp"

namespace pmds::montage {

class Mindicator {
 public:
  static constexpr std::size_t leaves = pmds::max_threads;
  static constexpr std::uint64_t none = (std::uint64_t{1} << 56) - 1;  // an unused leaf's epoch
  static_assert((leaves & (leaves - 1)) == 0, "a balanced tree: a power of two leaves");

  // The smallest epoch any joined leaf announced (`none` while no thread has joined).
  std::uint64_t minimum() const { return epoch_of(node(root).load(std::memory_order_acquire)); }

  std::uint64_t leaf(std::size_t thread) const {
    return epoch_of(node(first_leaf + thread).load(std::memory_order_acquire));
  }

  // Owner: its thread now works in epoch e (or a later one an advancer already raised it to).
  void announce(std::size_t thread, std::uint64_t e) {
    std::atomic<std::uint64_t>& word = node(first_leaf + thread);
    std::uint64_t cur = word.load(std::memory_order_acquire);
    bool joins = false;
    for (;;) {
      joins = joined_of(cur) == 0;
      const std::uint64_t want = pack(1, joins ? e : std::max(epoch_of(cur), e));
      if (want == cur) return;  // nothing changes: no refresh needed
      if (word.compare_exchange_weak(cur, want, std::memory_order_acq_rel)) break;
    }
    refresh_ancestors(first_leaf + thread, joins);
  }

  // Advancer: leaf `thread` read `seen` (a joined epoch below e) and its blocks of epochs below e
  // are written back; raise it to e unless its owner changed it meanwhile.
  void raise(std::size_t thread, std::uint64_t seen, std::uint64_t e) {
    std::uint64_t expected = pack(1, seen);
    node(first_leaf + thread)
        .compare_exchange_strong(expected, pack(1, e), std::memory_order_acq_rel);
    refresh_ancestors(first_leaf + thread, false);
  }

  // Calls lagging(thread, epoch) for every joined leaf whose epoch is below e, visiting first the
  // leaf of `start`, then its sibling's subtree, then its parent's sibling's, and so on up to the
  // root (§3.6). A subtree whose node is at least e is skipped whole. lagging() is expected to
  // write the thread back and raise() it.
  template <class Lagging>
  void for_each_below(std::uint64_t e, std::size_t start, Lagging&& lagging) {
    if (minimum() >= e) return;
    std::size_t n = first_leaf + start % leaves;
    visit(n, e, lagging);
    for (; n != root; n /= 2) visit(n ^ 1, e, lagging);
  }

 private:
  // Heap order: node 1 is the root, node i's children are 2i and 2i+1, leaves are the last half.
  static constexpr std::size_t root = 1;
  static constexpr std::size_t first_leaf = leaves;

  static constexpr std::uint64_t pack(std::uint64_t joined, std::uint64_t epoch) {
    return epoch << 8 | joined;
  }
  static constexpr std::uint64_t epoch_of(std::uint64_t word) { return word >> 8; }
  static constexpr std::uint64_t joined_of(std::uint64_t word) { return word & 0xff; }

  std::atomic<std::uint64_t>& node(std::size_t i) { return nodes_[i].word; }
  const std::atomic<std::uint64_t>& node(std::size_t i) const { return nodes_[i].word; }

  // After leaf n changed. `lowered`: its epoch went down (a join), so every ancestor must show it
  // before the writer returns. Otherwise the leaf rose: a root that shows less than the leaves is
  // only imprecise (an advance looks at a thread that does not lag), so the walk stops at the
  // first ancestor the change leaves as it was.
  void refresh_ancestors(std::size_t n, bool lowered) {
    for (n /= 2; n >= root; n /= 2) {
      bool changed = false;
      for (int attempt = 0; attempt < 2; ++attempt) {
        std::uint64_t cur = node(n).load(std::memory_order_acquire);
        const std::uint64_t left = node(2 * n).load(std::memory_order_acquire);
        const std::uint64_t right = node(2 * n + 1).load(std::memory_order_acquire);
        const std::uint64_t want =
            pack(joined_of(left) + joined_of(right), std::min(epoch_of(left), epoch_of(right)));
        if (want == cur) break;  // children read after the change: already installed
        changed = true;
        // A CAS that succeeds installs children read after the change: no second attempt needed.
        if (node(n).compare_exchange_strong(cur, want, std::memory_order_acq_rel)) break;
      }
      if (!changed && !lowered) return;
    }
  }

  template <class Lagging>
  void visit(std::size_t n, std::uint64_t e, Lagging& lagging) {
    const std::uint64_t word = node(n).load(std::memory_order_acquire);
    if (epoch_of(word) >= e) return;
    if (n >= first_leaf) {
      lagging(n - first_leaf, epoch_of(word));
      return;
    }
    visit(2 * n, e, lagging);
    visit(2 * n + 1, e, lagging);
  }

  // One cache line per node: leaves are written by their own threads.
  struct alignas(64) Node {
    std::atomic<std::uint64_t> word{pack(0, none)};
  };
  Node nodes_[2 * leaves];  // nodes_[0] unused
};

}  // namespace pmds::montage

// pmds::montage::NatarajanMittalTree — the Natarajan–Mittal lock-free external BST on nbMontage
// (the binary search tree of its paper's §5): "bst/montage", an ordered map, buffered durable
// linearizability, with sync() and put.
//
// The algorithm is algo/natarajan_mittal_bst.hpp's (Natarajan & Mittal, PPoPP 2014; its header
// explains it and what it does for nbMontage) over MontagePolicy (montage/policy.hpp): the tree
// in DRAM, each leaf pointing to its payload, a KeyValuePayload that never changes once linked
// (§3.2), and keeping copies of its key and value so that reads touch DRAM only. A key is in the
// map when a leaf holds it and the edge to that leaf is not flagged, so the two CASes at which an
// update takes effect are lin_cas (epoch_system.hpp): an insert's swing of its parent's edge
// from the old leaf to the new internal node (a put's, from the old leaf to the new one), and a
// remove's flag of the edge to its leaf, after pdetach of the leaf's payload.
//
// This file is what nbMontage adds around the algorithm (the pool's root, the epoch system and
// sync are montage/structure.hpp's): recovery, the tree rebuilt balanced from the payloads that
// survive (§3.4), and the clean close. It was a copy of the algorithm with those changes until
// the policy seam gained payloads; against the copy this form ran 1.03x and 1.16x at 1 and 2
// threads on `pmds bench`'s default set workload (median of seven interleaved rounds, 0.92-1.28;
// CHANGELOG.md 0.3.0).
//
// Pool layout: StructureRoot (epoch_system.hpp) with tag "BSTMONTG"; payload and anti-node
// blocks from the allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/parallel.hpp"
#include "pmds/montage/policy.hpp"
#include "pmds/montage/structure.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

template <FaultPolicy Faults = NoFaults>
class NatarajanMittalTree
    : public Structure<algo::NatarajanMittalTree<MontagePolicy<Faults>>, Faults> {
  using Base = Structure<algo::NatarajanMittalTree<MontagePolicy<Faults>>, Faults>;
  using Base::mem_;
  using typename Base::Node;

 public:
  static constexpr std::uint64_t tag = 0x47544e4f4d545342;  // "BSTMONTG"
  static constexpr const char* name = "bst/montage";

  // A new, empty map in `pool`, which must hold no structure.
  NatarajanMittalTree(CreateTag, pm::Pool& pool, const Options& options = {}) {
    this->create(pool, options, tag, name);
  }

  // Opens the map a pool holds: the index is rebuilt from the payloads recovery keeps (§3.4).
  NatarajanMittalTree(OpenTag, pm::Pool& pool, const Options& options = {}) {
    rebuild(this->recover(pool, options, tag, name, &WordKeys::damaged));
  }

  // A clean close (montage/structure.hpp): sync, then the algorithm frees the DRAM index.
  ~NatarajanMittalTree() { this->sync(); }

 private:
  // Leaves [first, last) of the sorted keys as a balanced subtree: an internal node's key is the
  // smallest key of its right half, so that key < node.key routes left exactly. With more than
  // one thread, the two halves are built at once.
  Node* build(const std::vector<Node*>& leaves, std::size_t first, std::size_t last,
              std::size_t threads) {
    if (last - first == 1) return leaves[first];
    const std::size_t middle = first + (last - first) / 2;
    Node* halves[2];
    in_parallel(threads > 1 ? 2 : 1, 2, [&](std::size_t from, std::size_t to) {
      for (std::size_t h = from; h < to; ++h)
        halves[h] = h == 0 ? build(leaves, first, middle, threads / 2)
                           : build(leaves, middle, last, threads - threads / 2);
    });
    return this->make_internal(Base::key_of(leaves[middle]), halves[0], halves[1]);
  }

  // The index from the surviving payloads: a balanced tree of their leaves in key order, sorted
  // and built over Options::recovery_threads threads. A key found twice (impossible without a
  // bug) keeps one payload; the others are counted and freed.
  void rebuild(const typename Base::Recovered& r) {
    const std::vector<Node*> leaves = this->nodes_in_key_order(
        r, [this](const KeyValueEntry& e) { return this->make_leaf(e.key, e.value, e.payload); });
    if (!leaves.empty())
      this->adopt_keys(build(leaves, 0, leaves.size(), mem_.system().recovery_threads()));
  }
};

}  // namespace pmds::montage

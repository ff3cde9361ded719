// pmds::incll::LoggingMasstree — seed 002's durable Masstree in its LOGGING mode (§6: the
// external log only, InCLL disabled): `masstree/logging`, buffered durable linearizability, with
// sync(). The tree is incll/masstree.hpp's, unchanged, over the Checkpoints memory mode
// (incll/checkpoints.hpp: epochs, the boundary flush, the external log, recovery of the failed
// epoch); 8-byte keys and values (pmds::Map, UpdatableMap, Scannable).
//
// Pool layout: pm::StructureRoot with tag "MTLOGGIN", its area the checkpoint anchor (the top
// layer's root pointer, the epoch, each thread's log); border nodes (448 bytes), interior nodes
// (320 bytes) and log segments (256 KiB) from the allocator.
//
// Recovery (at open, eager): the failed epoch's log entries are copied back (Checkpoints), then
// one walk of the tree checks every node and collects the live ones (a damaged pool ends in
// PoolCorrupt, never in a wild read or an endless walk), their version words lose the lock and
// dirty bits the crash left (no flush: a later recovery clears them again), every other slot
// returns to the allocator, and the next epoch starts. Seed 002 §4.3's lazy recovery comes with the
// InCLL mode.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/incll/checkpoints.hpp"
#include "pmds/incll/masstree.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/pm/structure_root.hpp"

namespace pmds::incll {

template <PlantedBug Bug = PlantedBug::none>
class LoggingMasstree : public MasstreeMap<Checkpoints<Bug>> {
  using Base = MasstreeMap<Checkpoints<Bug>>;
  using Node = masstree_detail::Node;

 public:
  static constexpr Criterion criterion = Criterion::buffered;
  static constexpr std::uint64_t tag = 0x4e4947474f4c544d;  // "MTLOGGIN"
  static constexpr const char* name = "masstree/logging";

  // A new, empty tree in `pool`, which must hold no structure.
  LoggingMasstree(CreateTag, pm::Pool& pool, const Options& options = {})
      : Base(create_new, pool, name, options, object_sizes()) {
    this->memory_.finish_create(tag);
  }

  // Opens the tree a pool holds, recovering it (above) after a clean or a dirty shutdown.
  LoggingMasstree(OpenTag, pm::Pool& pool, const Options& options = {},
                  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now())
      : Base(open_existing, pool, pm::StructureRoot::read(pool, tag, name).second, name, options,
             object_sizes()) {
    const pm::ChunkAllocator& a = pool.allocator();
    pm::ChunkAllocator::SlotBits reached(a);
    const std::vector<Node*> nodes = checked_nodes(a, reached);
    constexpr std::uint64_t transient_bits =
        masstree_detail::locked_bit | masstree_detail::dirty_bits;
    for (Node* n : nodes) {
      const std::uint64_t v = n->version.load(std::memory_order_relaxed);
      if (v & transient_bits) n->version.store(v & ~transient_bits);
    }
    const auto allocator =
        this->memory_.recover_allocator([&reached](void* slot) { return reached.test(slot); });
    this->memory_.finish_recovery();
    recovery_.slots_scanned = allocator.live_slots + allocator.free_slots;
    recovery_.live_slots = nodes.size() + this->memory_.own_slots();
    recovery_.freed_slots = allocator.free_slots;
    recovery_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // Everything completed before the call is durable when it returns.
  void sync() { this->memory_.sync(); }
  // One epoch boundary attempt (the crash lab's scheduled advancer).
  void background_step() { this->memory_.background_step(); }

  const RecoveryStats& recovery_stats() const { return recovery_; }
  CheckpointStats checkpoint_stats() const { return this->memory_.stats(); }
  std::size_t log_entries_applied() const { return this->memory_.log_entries_applied(); }

 private:
  // Recovery: every node of the tree (after the log was applied), each checked before anything
  // is written — a slot of its kind's size, reached once, a permutation that is one, entry kinds
  // of the 8-byte form, children whose parent link names their parent, `next` links to borders
  // of strictly greater low keys (so no walk along them can cycle) — else PoolCorrupt.
  std::vector<Node*> checked_nodes(const pm::ChunkAllocator& a,
                                   pm::ChunkAllocator::SlotBits& reached) const {
    using masstree_detail::Border;
    using masstree_detail::Interior;
    const auto node_at = [&a](const void* p, const char* what) -> Node* {
      a.checked_slot(p, sizeof(Interior), what);
      auto* n = static_cast<Node*>(const_cast<void*>(p));
      const bool border = masstree_detail::is_border(n->version.load());
      if (a.slot_size_of(p) !=
          pm::ChunkAllocator::slot_size_for(border ? sizeof(Border) : sizeof(Interior)))
        a.corrupt(std::string(what) + " names a node whose kind does not fit its slot");
      return n;
    };
    std::vector<Node*> nodes;
    std::vector<Node*> stack{node_at(
        reinterpret_cast<const void*>(this->memory_.root_word().load()), "the root pointer")};
    if (!masstree_detail::is_root(stack.back()->version.load()))
      a.corrupt("the root pointer names a node that is not a root");
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (!reached.set(n)) a.corrupt("a node is reached twice");
      nodes.push_back(n);
      if (masstree_detail::is_border(n->version.load())) {
        const auto* b = static_cast<const Border*>(n);
        const masstree_detail::Permutation perm{b->permutation.load()};
        std::uint32_t slots = 0;
        for (int p = 0; p < width; ++p) slots |= 1u << perm.slot(p);
        if (perm.size() > width || slots != (1u << width) - 1)
          a.corrupt("a border's permutation is not a permutation");
        for (int p = 0; p < perm.size(); ++p) {
          const int s = perm.slot(p);
          if (b->kind[s].load() != 8 || b->suffix[s].load() != nullptr)
            a.corrupt("a border entry that is not an 8-byte key");
        }
        if (const Border* next = b->next.load()) {
          const Node* m = node_at(next, "a border's next link");
          if (!masstree_detail::is_border(m->version.load()) || !(b->low() < next->low()))
            a.corrupt("a border's next link does not lead right to a border");
        }
        continue;
      }
      const auto* in = static_cast<const Interior*>(n);
      const int keys = in->keys.load();
      if (keys < 1 || keys > width) a.corrupt("an interior node with no or too many keys");
      for (int i = 0; i <= keys; ++i) {
        Node* c = node_at(in->child[i].load(), "an interior node's child link");
        if (c->parent.load() != in || masstree_detail::is_root(c->version.load()))
          a.corrupt("a child whose parent link or root bit disagrees with its parent");
        stack.push_back(c);
      }
    }
    return nodes;
  }

  static constexpr int width = masstree_detail::width;

  static std::vector<std::size_t> object_sizes() {
    return {sizeof(masstree_detail::Border), sizeof(masstree_detail::Interior)};
  }

  RecoveryStats recovery_;
};

}  // namespace pmds::incll

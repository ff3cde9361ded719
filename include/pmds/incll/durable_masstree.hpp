// pmds::incll::DurableMasstree — seed 002's durable Masstree, buffered durable linearizability,
// with sync(); 8-byte keys and values (pmds::Map, UpdatableMap, Scannable). Two modes over the
// same tree (incll/masstree.hpp, unchanged) and the same epochs (incll/checkpoints.hpp: the
// boundary flush, the external log, recovery of the failed epoch):
//   InCLLMasstree    `masstree/incll`: inserts and removes log a border's permutation in its own
//                    cache line (InCLL_p, §4.1), updates the old value in the value's line (the
//                    value InCLLs) — the external log only where §4.1.1 and §4.1.3 need it;
//   LoggingMasstree  `masstree/logging`: the paper's LOGGING mode (§6: the external log only).
//
// Pool layout: pm::StructureRoot with tag "MTINCLL_" or "MTLOGGIN", its area the checkpoint
// anchor (the top layer's root pointer, the epoch, each thread's log); border nodes (512 bytes),
// interior nodes (320 bytes) and log segments (256 KiB) from the allocator.
//
// Recovery (at open, eager): the failed epoch's log entries are copied back (Checkpoints), then
// one walk of the tree checks every node and collects the live ones (a damaged pool ends in
// PoolCorrupt, never in a wild read or an endless walk). Only then does it write: each border
// whose InCLL_p names the failed epoch gets its logged permutation back, and each value whose
// line's InCLL names it its logged value (flushed, one fence; applying them twice is harmless,
// so a crash during recovery recovers again), parent links are rebuilt from the walk (they are
// derived state, not logged: masstree.hpp's split_interior), version words lose the lock and
// dirty bits the crash left (neither is flushed: a later recovery rebuilds them again), every
// other slot returns to the allocator, and the next epoch starts.
// Seed 002 §4.3's lazy recovery is to come (docs/ARCHITECTURE.md §1).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/incll/checkpoints.hpp"
#include "pmds/incll/masstree.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/pm/structure_root.hpp"

namespace pmds::incll {

enum class Mode { incll, logging };

template <Mode M, PlantedBug Bug = PlantedBug::none>
class DurableMasstree
    : public MasstreeMap<
          std::conditional_t<M == Mode::incll, InCLLCheckpoints<Bug>, Checkpoints<Bug>>> {
  using Base =
      MasstreeMap<std::conditional_t<M == Mode::incll, InCLLCheckpoints<Bug>, Checkpoints<Bug>>>;
  using Node = masstree_detail::Node;
  using Border = masstree_detail::Border;
  using Interior = masstree_detail::Interior;
  using Permutation = masstree_detail::Permutation;

 public:
  static constexpr Criterion criterion = Criterion::buffered;
  static constexpr std::uint64_t tag = M == Mode::incll ? 0x5f4c4c434e49544d   // "MTINCLL_"
                                                        : 0x4e4947474f4c544d;  // "MTLOGGIN"
  static constexpr const char* name = M == Mode::incll ? "masstree/incll" : "masstree/logging";

  // A new, empty tree in `pool`, which must hold no structure.
  DurableMasstree(CreateTag, pm::Pool& pool, const Options& options = {})
      : Base(create_new, pool, name, options, object_sizes()) {
    this->memory_.finish_create(tag);
  }

  // Opens the tree a pool holds, recovering it (above) after a clean or a dirty shutdown.
  DurableMasstree(OpenTag, pm::Pool& pool, const Options& options = {},
                  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now())
      : Base(open_existing, pool, pm::StructureRoot::read(pool, tag, name).second, name, options,
             object_sizes()) {
    const pm::ChunkAllocator& a = pool.allocator();
    pm::ChunkAllocator::SlotBits reached(a);
    Walk walk = checked_walk(a, reached);
    // Seed 002 Listing 4: a border changed in the failed epoch gets its logged permutation and
    // values back.
    for (Border* b : walk.rolled_back) {
      b->permutation.store(b->permutation_log.load());
      pm::flush_range(&b->permutation, sizeof(std::uint64_t));
    }
    for (masstree_detail::ValueLine* line : walk.values_back) {
      line->value[line->log_tag.load() & 7].store(line->log_value.load());
      pm::flush_range(line, sizeof *line);
    }
    pm::fence();
    permutations_restored_ = walk.rolled_back.size();
    values_restored_ = walk.values_back.size();
    for (auto [child, parent] : walk.parent_links)
      if (child->parent.load(std::memory_order_relaxed) != parent) child->parent.store(parent);
    constexpr std::uint64_t transient_bits =
        masstree_detail::locked_bit | masstree_detail::dirty_bits;
    for (Node* n : walk.nodes) {
      const std::uint64_t v = n->version.load(std::memory_order_relaxed);
      if (v & transient_bits) n->version.store(v & ~transient_bits);
    }
    const auto allocator =
        this->memory_.recover_allocator([&reached](void* slot) { return reached.test(slot); });
    this->memory_.finish_recovery();
    recovery_.slots_scanned = allocator.live_slots + allocator.free_slots;
    recovery_.live_slots = walk.nodes.size() + this->memory_.own_slots();
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
  // Borders whose InCLL_p, and values whose InCLL, the last recovery applied (always 0 in the
  // logging mode).
  std::size_t permutations_restored() const { return permutations_restored_; }
  std::size_t values_restored() const { return values_restored_; }

 private:
  // What recovery's walk found; nothing is written until it is complete.
  struct Walk {
    std::vector<Node*> nodes;                               // every live node
    std::vector<Border*> rolled_back;                       // InCLL_p names the failed epoch
    std::vector<masstree_detail::ValueLine*> values_back;   // a value InCLL names it
    std::vector<std::pair<Node*, Interior*>> parent_links;  // each child and its parent
  };

  // Recovery: every node of the tree (after the log was applied), each checked before anything
  // is written — a slot of its kind's size, reached once, a permutation that is one (a border's
  // logged permutation when its InCLL_p names the failed epoch), entry kinds of the 8-byte form,
  // children that are no roots, `next` links to borders of strictly greater low keys (so no walk
  // along them can cycle) — else PoolCorrupt.
  Walk checked_walk(const pm::ChunkAllocator& a, pm::ChunkAllocator::SlotBits& reached) const {
    const auto node_at = [&a](const void* p, const char* what) -> Node* {
      a.checked_slot(p, sizeof(Interior), what);
      auto* n = static_cast<Node*>(const_cast<void*>(p));
      const bool border = masstree_detail::is_border(n->version.load());
      if (a.slot_size_of(p) !=
          pm::ChunkAllocator::slot_size_for(border ? sizeof(Border) : sizeof(Interior)))
        a.corrupt(std::string(what) + " names a node whose kind does not fit its slot");
      return n;
    };
    const std::uint64_t failed = this->memory_.epoch();
    Walk walk;
    std::vector<Node*> stack{node_at(
        reinterpret_cast<const void*>(this->memory_.root_word().load()), "the root pointer")};
    if (!masstree_detail::is_root(stack.back()->version.load()))
      a.corrupt("the root pointer names a node that is not a root");
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (!reached.set(n)) a.corrupt("a node is reached twice");
      walk.nodes.push_back(n);
      if (masstree_detail::is_border(n->version.load())) {
        auto* b = static_cast<Border*>(n);
        const bool roll_back = M == Mode::incll && b->node_epoch.load() >> 1 == failed;
        if (roll_back) walk.rolled_back.push_back(b);
        for (int l = 0; M == Mode::incll && l < lines; ++l) {
          masstree_detail::ValueLine& line = b->value_lines[l];
          const std::uint64_t tag = line.log_tag.load();
          if (tag >> 3 != failed) continue;
          if ((tag & 7) >= values_per_line ||
              l * values_per_line + static_cast<int>(tag & 7) >= width)
            a.corrupt("a value InCLL names no value of its line");
          walk.values_back.push_back(&line);
        }
        const Permutation perm{roll_back ? b->permutation_log.load() : b->permutation.load()};
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
        if (masstree_detail::is_root(c->version.load())) a.corrupt("a child with the root bit");
        walk.parent_links.emplace_back(c, const_cast<Interior*>(in));
        stack.push_back(c);
      }
    }
    return walk;
  }

  static constexpr int width = masstree_detail::width;
  static constexpr int values_per_line = masstree_detail::ValueLine::values;
  static constexpr int lines = (width + values_per_line - 1) / values_per_line;

  static std::vector<std::size_t> object_sizes() {
    return {sizeof(masstree_detail::Border), sizeof(masstree_detail::Interior)};
  }

  RecoveryStats recovery_;
  std::size_t permutations_restored_ = 0;
  std::size_t values_restored_ = 0;
};

template <PlantedBug Bug = PlantedBug::none>
using InCLLMasstree = DurableMasstree<Mode::incll, Bug>;
template <PlantedBug Bug = PlantedBug::none>
using LoggingMasstree = DurableMasstree<Mode::logging, Bug>;

}  // namespace pmds::incll

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
// Recovery (seed 002 §4.3). At open: the failed epoch's log entries are copied back
// (Checkpoints); one walk of the interior nodes checks each (a damaged pool ends in PoolCorrupt,
// never in a wild read or an endless walk), clears the lock and dirty bits a crash left, and
// rebuilds the parent links an interior split of the failed epoch moved (derived state, not
// logged: masstree.hpp's split_interior); borders are reached as children, not read (their
// slots have their own size). The failed epoch joins the pool's record of failed epochs; the
// allocator gets back every slot the walk did not reach (the nodes made in the failed epoch);
// operations start two epochs on (Checkpoints::finish_recovery says why). Each border is then
// recovered on its first access (Checkpoints::before_border_access: InCLL_p and the value
// InCLLs of a failed epoch put back, the border checked), so opening a tree of 10M keys reads
// its interior nodes (a tenth of its nodes, in chunks of their own), not its borders. That is
// Options::lazy_recovery; the default is eager: every border is checked, then recovered and
// flushed at open, and the record emptied (so also when the record is full). Nothing is consumed
// before the record and the new epoch are durable, so a crash during recovery, eager or lazy,
// recovers again.
//
// What lazy recovery does not check at open: a border whose version word was damaged to read as
// an interior node's (its slot says border, and the walk does not read borders) would be read as
// one by the first operation that reaches it; the eager option checks every node first.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
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
    auto& memory = this->memory_;
    const pm::ChunkAllocator& a = pool.allocator();
    pm::ChunkAllocator::SlotBits reached(a);
    const bool lazy = memory.recovers_lazily();
    const Walk walk = walk_interiors(a, reached, /*list_borders=*/!lazy);
    if (lazy) {
      memory.record_failed_epoch();
    } else {  // every border checked before the first is written
      for (const Border* b : walk.borders) {
        if (!masstree_detail::is_border(b->version.load()) ||
            masstree_detail::is_root(b->version.load()) !=
                (b == walk.borders.front() && walk.interiors.empty()))
          a.corrupt("a border slot holds no border, or a border has the wrong root bit");
        memory.check_border(*b);  // (a next link it keeps is a border slot: reached.test works)
        if (const Border* next = b->next.load(); next != nullptr && !reached.test(next))
          a.corrupt("a border's next link leads out of the tree");
      }
      for (Border* b : walk.borders) memory.recover_border(*b, /*flush=*/true);
    }
    for (auto [child, parent] : walk.parent_links)
      if (child->parent.load(std::memory_order_relaxed) != parent) child->parent.store(parent);
    constexpr std::uint64_t transient_bits =
        masstree_detail::locked_bit | masstree_detail::dirty_bits;
    for (Interior* in : walk.interiors) {
      const std::uint64_t v = in->version.load(std::memory_order_relaxed);
      if (v & transient_bits) in->version.store(v & ~transient_bits);
    }
    const auto allocator =
        memory.recover_allocator([&reached](void* slot) { return reached.test(slot); });
    if (!lazy) {
      pm::fence();  // every border recovered, before the record goes
      memory.forget_failed_epochs();
    }
    memory.finish_recovery();
    recovery_.slots_scanned = allocator.live_slots + allocator.free_slots;
    recovery_.live_slots = walk.interiors.size() + walk.border_count + memory.own_slots();
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
  // Borders whose InCLL_p, and values whose InCLL, recovery has applied so far (lazily: a
  // border's on its first access; always 0 in the logging mode).
  std::size_t permutations_restored() const { return this->memory_.permutations_restored(); }
  std::size_t values_restored() const { return this->memory_.values_restored(); }
  // The failed epochs the pool's record holds (lazy recovery adds one per crash; an eager
  // recovery, or a lazy one that finds the record full, empties it).
  std::size_t failed_epochs_recorded() const { return this->memory_.failed_epochs_recorded(); }

 private:
  // What recovery's walk of the interior nodes found; nothing is written until it is complete.
  struct Walk {
    std::vector<Interior*> interiors;
    std::size_t border_count = 0;
    std::vector<Border*> borders;  // when asked for (eager recovery)
    // Each interior node's interior children, and its border children when the log restored it
    // (its split in the failed epoch may have moved them) or when the recovery is eager (which
    // rebuilds every link, so a damaged one is mended): their parent links to set. In a lazy
    // recovery other borders' links are right unless the pool was damaged: only split_interior
    // moves children, under a logged parent.
    std::vector<std::pair<Node*, Interior*>> parent_links;
  };

  // Recovery: the interior nodes of the tree (after the log was applied), each checked before
  // anything is written — a slot of its kind's size (borders and interior nodes have slots of
  // different sizes, so a child's kind is known without reading it), reached once, 1 to width
  // keys, children of one kind that are no roots — else PoolCorrupt. Borders are counted, not
  // read: each is checked when recovered (Checkpoints::recover_border).
  Walk walk_interiors(const pm::ChunkAllocator& a, pm::ChunkAllocator::SlotBits& reached,
                      bool list_borders) const {
    const std::size_t border_slot = pm::ChunkAllocator::slot_size_for(sizeof(Border));
    const std::size_t interior_slot = pm::ChunkAllocator::slot_size_for(sizeof(Interior));
    // The node at p, checked: true for a border, false for an interior node.
    const auto kind_at = [&](const void* p, const char* what) {
      a.checked_slot(p, sizeof(Interior), what);
      const std::size_t slot = a.slot_size_of(p);
      if (slot != border_slot && slot != interior_slot)
        a.corrupt(std::string(what) + " names a slot of no node's size");
      if (!reached.set(p)) a.corrupt("a node is reached twice");
      return slot == border_slot;
    };
    Walk walk;
    // Each interior node to visit, with the separators that bound its keys (none at the edges).
    using LayerKey = masstree_detail::LayerKey;
    struct Pending {
      Interior* node;
      std::optional<LayerKey> low, high;
    };
    std::vector<Pending> stack;
    Node* root = reinterpret_cast<Node*>(this->memory_.root_word().load());
    const bool root_border = kind_at(root, "the root pointer");
    const std::uint64_t root_version = root->version.load();
    if (!masstree_detail::is_root(root_version) ||
        masstree_detail::is_border(root_version) != root_border)
      a.corrupt("the root pointer names a node that is not a root of its slot's kind");
    if (root_border) {
      ++walk.border_count;
      if (list_borders) walk.borders.push_back(static_cast<Border*>(root));
    } else {
      stack.push_back({static_cast<Interior*>(root), std::nullopt, std::nullopt});
    }
    while (!stack.empty()) {
      const auto [in, low, high] = stack.back();
      stack.pop_back();
      walk.interiors.push_back(in);
      const bool restored = this->memory_.restored_from_log(in);
      const int keys = in->keys.load();
      if (keys < 1 || keys > width) a.corrupt("an interior node with no or too many keys");
      for (int i = 0; i < keys; ++i) {  // ascending, within the bounds its parent gives
        const LayerKey k = in->separator(i);
        if ((i > 0 && !(in->separator(i - 1) < k)) || (low && k < *low) || (high && !(k < *high)))
          a.corrupt("an interior node's separators are out of order or out of its range");
      }
      bool first_border = false;
      for (int i = 0; i <= keys; ++i) {
        Node* c = in->child[i].load();
        const bool border = kind_at(c, "an interior node's child link");
        if (i == 0) first_border = border;
        if (border != first_border) a.corrupt("an interior node's children are of two kinds");
        const std::optional<LayerKey> child_low =
            i == 0 ? low : std::optional<LayerKey>(in->separator(i - 1));
        const std::optional<LayerKey> child_high =
            i == keys ? high : std::optional<LayerKey>(in->separator(i));
        if (border) {
          // A border's low key is the separator before it (a split hands the parent exactly
          // that key); read only when every border is read anyway (eager recovery).
          if (list_borders && i > 0 && !(static_cast<Border*>(c)->low() == *child_low))
            a.corrupt("a border's low key is not its separator in the parent");
          ++walk.border_count;
          if (list_borders) walk.borders.push_back(static_cast<Border*>(c));
          if (restored || list_borders) walk.parent_links.emplace_back(c, in);
          continue;
        }
        const std::uint64_t v = c->version.load();
        if (masstree_detail::is_border(v) || masstree_detail::is_root(v))
          a.corrupt("an interior node's child is a root or not of its slot's kind");
        walk.parent_links.emplace_back(c, in);
        stack.push_back({static_cast<Interior*>(c), child_low, child_high});
      }
    }
    return walk;
  }

  static constexpr int width = masstree_detail::width;

  static std::vector<std::size_t> object_sizes() {
    return {sizeof(masstree_detail::Border), sizeof(masstree_detail::Interior)};
  }

  RecoveryStats recovery_;
};

template <PlantedBug Bug = PlantedBug::none>
using InCLLMasstree = DurableMasstree<Mode::incll, Bug>;
template <PlantedBug Bug = PlantedBug::none>
using LoggingMasstree = DurableMasstree<Mode::logging, Bug>;

}  // namespace pmds::incll

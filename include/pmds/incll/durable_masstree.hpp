// pmds::incll::DurableMasstree — InCLL's durable Masstree, buffered durable linearizability,
// with sync(). Two modes over the same tree (incll/masstree.hpp, unchanged) and the same epochs
// (incll/checkpoints.hpp: the boundary flush, the external log, recovery of the failed epoch):
//   InCLLMasstree    `masstree/incll`: inserts and removes log a border's permutation in its own
//                    cache line (InCLL_p, §4.1), updates the old value in the value's line (the
//                    value InCLLs) — the external log only where §4.1.1 and §4.1.3 need it;
//   LoggingMasstree  `masstree/logging`: the paper's LOGGING mode (§6: the external log only);
// and two forms: 8-byte keys and values (pmds::Map, UpdatableMap, Scannable: the aliases above)
// or byte-string keys and values (pmds::ByteStringMap: InCLLStringMasstree
// `masstree-bytes/incll`, LoggingStringMasstree `masstree-bytes/logging`; keys up to 1 KiB,
// values up to 8 KiB less 24 bytes). In the byte-string form a value, and a key that ends in a
// suffix, are byte strings in pool blocks (Checkpoints::make_bytes), made in the operation's
// epoch and flushed at its boundary; a value word or a suffix pointer is logged as the 8-byte
// value word is (an update's old value pointer in its line's InCLL); a block the tree frees goes
// on a free list the epochs checkpoint (InCLL §5, incll/checkpoints.hpp) in an epoch after
// the one that freed it.
//
// Pool layout: pm::StructureRoot with tag "MTINCLL_" or "MTLOGGIN" ("MTBYINCL", "MTBYLOGG" for
// byte strings), its area the checkpoint anchor (the top layer's root pointer, the epoch, each
// thread's log); border nodes (512 bytes), interior nodes (320 bytes), log segments (256 KiB)
// and byte-string blocks from the allocator.
//
// Recovery (InCLL §4.3). At open: the failed epoch's log entries are copied back
// (Checkpoints); one walk of the interior nodes checks each (a damaged pool ends in PoolCorrupt,
// never in a wild read or an endless walk), clears the lock and dirty bits a crash left, and
// rebuilds the parent links an interior split of the failed epoch moved (derived state, not
// logged: masstree.hpp's split_interior), flushed before the epoch moves on: no later recovery
// rebuilds them, nor the links splits moved in epochs that ended (flushed at their boundaries;
// test/incll/durable_masstree_sim_test.cpp crashes both). Borders are reached as children, not
// read (their slots have their own size). The failed epoch joins the pool's record of failed
// epochs; the allocator gets back every slot the walk did not reach (the nodes and byte strings
// made in the failed epoch or freed before it); a layer (byte strings) is walked from the node its
// entry names, its root found by climbing parent links along its left edge (a layer's first node
// stays its leftmost, and its ancestors' parent links change only in root splits, which log them);
// operations start three epochs on (Checkpoints::finish_recovery says why). Each border is then
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
//
// The lazy open of byte strings. A byte-string tree's free blocks — those taken in the failed
// epoch, and those freed before it but not yet on a free list when the crash came — are the
// blocks no recovered border names, so only a walk of every border finds them; and the lower
// layers' interior nodes need the walk the open gives the top layer's. So a lazy open returns
// after the top layer's walk, as above, but withholds from the allocator every chunk used
// before it (pm::ChunkAllocator::recover_chunks: operations take new chunks meanwhile, and the
// free lists' blocks, which the open walks), and a sweep has every border recovered in the
// background: a thread of its own, or background_step() without one (the crash lab's scheduled
// steps). Every border lazy recovery is about to recover, whoever reaches it first, is checked
// as the eager walk checks it, under its recovery lock (check_before_recovery): the blocks it
// will name are marked reached, and the layers it names are walked and mended (no operation
// reaches a layer before its border is recovered), their borders joining the sweep. Once every
// border is recovered, the withheld chunks' slots that nothing reached go back to the
// allocator. A pool with no free chunk meanwhile finishes the sweep in the operation that needs
// room before it reports PoolFull; a damaged border stops it (the chunks stay withheld: space
// lost until the next open, nothing handed out twice). A crash before the sweep ends recovers
// as any crash after a lazy open: the record of failed epochs still holds the epochs the
// unrecovered borders may carry.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pmds/backoff.hpp"
#include "pmds/error.hpp"
#include "pmds/incll/checkpoints.hpp"
#include "pmds/incll/masstree.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/pm/structure_root.hpp"

namespace pmds::incll {

enum class Mode { incll, logging };

namespace durable_detail {
template <Mode M, FaultPolicy Faults>
using MemoryOf =
    std::conditional_t<M == Mode::incll, InCLLCheckpoints<Faults>, Checkpoints<Faults>>;
template <Mode M, FaultPolicy Faults, bool ByteStrings>
using TreeOf = std::conditional_t<ByteStrings, StringMasstreeMap<MemoryOf<M, Faults>>,
                                  MasstreeMap<MemoryOf<M, Faults>>>;
}  // namespace durable_detail

/// An ordered map, Masstree, from 8-byte keys to 8-byte values (`InCLLMasstree`) or from byte
/// strings to byte strings (`InCLLStringMasstree`), durable in epochs; scan and range(from, to)
/// read it in key order while other threads write.
///
/// - **Criterion:** buffered durable linearizability: a crash loses the operations of the epoch
///   it hit (64 ms by default, Options::epoch_length) and keeps every operation of the epochs
///   before it: the tree is rolled back to that epoch's start. sync() returns once every operation
///   completed before it is durable (it passes an epoch boundary); the destructor (a clean close)
///   passes one too. scan and range are not snapshots: each node's keys are read as one
///   (pmds::Range says what range promises).
/// - **Cost:** get, contains, scan and range never flush or fence. A write needs no flush or fence
///   where InCLL covers it: an insert or a remove saves the border's permutation in the border's
///   own line, an update the value it replaces in that value's line. The first change in an epoch
///   of a node InCLL does not cover (a split, a new layer, an interior node, an insert after a
///   remove in the same border, a second value of one line) first copies the node to the thread's
///   external log: one flush and fence. Each epoch boundary writes back every object written in
///   the epoch and fences. The logging mode (`LoggingMasstree`) logs every node's first change in
///   an epoch.
/// - **Progress:** blocking for writers: a write locks the border it changes (in a split, its
///   ancestors too) and waits while an epoch boundary is passed, which waits for the writes in
///   flight. Readers take no lock: they check each node's version and retry when a writer changed
///   it (with Options::lazy_recovery, a border's first access after open takes a recovery lock).
/// - **Threads:** up to pmds::max_threads (128) threads at once; more throw TooManyThreads (in
///   the 8-byte form only from a write: its reads take no thread id).
/// - **A full pool:** a write (insert, put, remove) first sets aside its thread's spare node slots
///   and log room and, in the byte-string form, copies the value and a key longer than 8 bytes
///   into pool blocks; when the pool has no room it throws PoolFull there and the tree is
///   unchanged. Reads need none.
/// - **Bad input:** 8-byte form: keys 0 and 2^64-1 throw ReservedKey in insert, put, remove, get
///   and contains (scan reads a `from` of 0 as 1, and throws for 2^64-1); every value is allowed.
///   Byte-string form: a key over max_key_size (1024 bytes) throws pmds::Error in every
///   operation, scan's `from` included, a value over max_value_size (8 KiB less 24 bytes) in
///   insert and put; any other bytes, the empty string included, are a key. Nothing changes.
/// - **A bad pool:** opening a pool that holds another structure throws PoolError
///   (layout_mismatch). A damaged pool (its anchor, log segments, log entries or nodes not what
///   they must be) throws PoolCorrupt at open: the failed epoch's log entries are all checked
///   before the first is copied back and, with the default eager recovery, every node before the
///   first border is recovered; with Options::lazy_recovery a damaged border is reported by the
///   operation that first reaches it.
///
/// InCLL over Masstree (§4; the external log, §4.2). Registered as "masstree/incll"
/// (pmds::BufferedOrderedMap), "masstree-bytes/incll" (pmds::BufferedStringOrderedMap) and, in
/// the logging mode, "masstree/logging" and "masstree-bytes/logging".
template <Mode M, FaultPolicy Faults = NoFaults, bool ByteStrings = false>
class DurableMasstree : public durable_detail::TreeOf<M, Faults, ByteStrings> {
  using Memory = durable_detail::MemoryOf<M, Faults>;
  using Base = durable_detail::TreeOf<M, Faults, ByteStrings>;
  using Node = masstree_detail::Node;
  using Border = masstree_detail::Border;
  using Interior = masstree_detail::Interior;
  using Bytes = masstree_detail::Bytes;

 public:
  static constexpr Criterion criterion = Criterion::buffered;
  static constexpr EpochBound epoch_bound = EpochBound::failed_epoch;
  // The largest block it takes from its pool: a segment of its external log.
  static constexpr std::size_t largest_block = Memory::segment_bytes;
  static constexpr std::uint64_t tag = ByteStrings
                                           ? (M == Mode::incll ? 0x4c434e495942544d    // "MTBYINCL"
                                                               : 0x47474f4c5942544d)   // "MTBYLOGG"
                                           : (M == Mode::incll ? 0x5f4c4c434e49544d    // "MTINCLL_"
                                                               : 0x4e4947474f4c544d);  // "MTLOGGIN"
  static constexpr const char* name =
      ByteStrings ? (M == Mode::incll ? "masstree-bytes/incll" : "masstree-bytes/logging")
                  : (M == Mode::incll ? "masstree/incll" : "masstree/logging");

  // A new, empty tree in `pool`, which must hold no structure.
  DurableMasstree(CreateTag, pm::Pool& pool, const Options& options = {})
      : Base(create_new, pool, name, options, object_sizes(), ByteStrings) {
    this->memory_.finish_create(tag);
  }

  // Opens the tree a pool holds, recovering it (above) after a clean or a dirty shutdown.
  DurableMasstree(OpenTag, pm::Pool& pool, const Options& options = {},
                  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now())
      : Base(open_existing, pool, pm::StructureRoot::read(pool, tag, name).second, name, options,
             object_sizes(), ByteStrings) {
    auto& memory = this->memory_;
    const pm::ChunkAllocator& a = pool.allocator();
    auto reached = std::make_unique<pm::ChunkAllocator::SlotBits>(a);
    const bool lazy = memory.recovers_lazily();
    const bool sweep = lazy && ByteStrings;  // (the header's "lazy open of byte strings")
    // Eager: every border is checked (and every layer and byte string found) before the first
    // is written.
    Walk walk;
    {
      // Lazy: the borders under the interior nodes the log restored are read after the walk
      // (their parent links, below), each the first touch of its page in this process: a page
      // fault, one at a time (15-30 ms of a lazy open of 10M entries, about as long as the walk).
      // A second thread takes those faults while the walk runs. (Reads only; not under the
      // simulator, whose crash lab schedules every thread that touches a pool.)
      std::optional<std::jthread> toucher;
      if (lazy && pm::backend != pm::Backend::simulated) try {
          toucher.emplace([this, &a] {
            // (kept, so that the reads are not optimized out)
            [[maybe_unused]] volatile std::uintptr_t kept = touch_restored_children(a);
          });
        } catch (const std::system_error&) {  // no thread to be had: the walk goes on alone
        }
      walk = walk_tree(a, *reached, /*check_borders=*/!lazy);
    }
    if (lazy) {
      memory.record_failed_epoch();
    } else {
      for (const BorderAt& b : walk.borders) memory.recover_border(*b.node, /*flush=*/true);
      memory.settle_block_lists();
    }
    mend(walk);
    std::vector<std::size_t> withheld;  // the sweep's: the chunks used at open
    pm::AllocatorRecoveryStats allocator;
    if (sweep)
      withheld = a.used_chunk_indices();
    else
      allocator = memory.recover_allocator([&reached](void* slot) { return reached->test(slot); });
    // The mended links (and, eager, every recovered border) before the epoch moves, and before the
    // record of failed epochs empties. The mutation lab's small trees do not reach these windows;
    // test/incll/durable_masstree_sim_test.cpp crashes each event of both recoveries.
    // Mutant killed by test: durable_masstree_sim_test
    // EagerAfterLazyRecovery.*:ParentLinks/*.ThoseALazyRecoveryMendedAreDurableBeforeTheEpochMoves
    pm::fence();
    if (!lazy) memory.forget_failed_epochs();  // (and before the record goes)
    memory.finish_recovery();
    recovery_.slots_scanned = allocator.live_slots + allocator.free_slots;
    recovery_.live_slots = walk.interiors.size() + walk.border_count + walk.byte_strings +
                           walk.listed.blocks + walk.listed.lists + memory.own_slots();
    blocks_on_free_lists_ = walk.listed.blocks;
    recovery_.freed_slots = allocator.free_slots;
    recovery_.crash_epoch = memory.opened_epoch();
    if (sweep) start_sweep(a, std::move(reached), std::move(withheld), options.background_thread);
    recovery_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // Everything completed before the call is durable when it returns.
  void sync() { this->memory_.sync(); }
  // The current epoch (a crash now makes it the failed one: EpochBound::failed_epoch).
  std::uint64_t epoch() const { return this->memory_.epoch(); }
  // One epoch boundary attempt (the crash lab's scheduled advancer), and, while the lazy open of
  // byte strings has borders left to recover and no thread of its own, a few of them.
  void background_step() {
    this->memory_.background_step();
    if (sweep_ && !sweep_thread_) sweep_step(4);
  }

  // The lazy open of byte strings (header): whether it has recovered every border and given
  // the slots no border names back to the allocator (always, after any other open).
  bool recovery_sweep_done() const { return !sweep_ || sweep_->done.load(); }
  // Finishes it in the calling thread (waiting for what other threads have under way).
  void finish_recovery_sweep() {
    for (int spins = 0; sweep_ && !sweep_step(0);) pmds::backoff(spins);
  }
  // (The lazy open of byte strings counts the slots it holds and frees once its sweep is done.)
  RecoveryStats recovery_stats() const {
    RecoveryStats r = recovery_;
    if (sweep_ && sweep_->done.load()) {
      r.live_slots = sweep_->live;
      r.freed_slots = sweep_->freed;
      r.slots_scanned = sweep_->live + sweep_->freed;
    }
    return r;
  }
  CheckpointStats checkpoint_stats() const { return this->memory_.stats(); }
  std::size_t log_entries_applied() const { return this->memory_.log_entries_applied(); }
  // Borders whose InCLL_p, and values whose InCLL, recovery has applied so far (lazily: a
  // border's on its first access; always 0 in the logging mode).
  std::size_t permutations_restored() const { return this->memory_.permutations_restored(); }
  std::size_t values_restored() const { return this->memory_.values_restored(); }
  // The failed epochs the pool's record holds (lazy recovery adds one per crash; an eager
  // recovery, or a lazy one that finds the record full, empties it).
  std::size_t failed_epochs_recorded() const { return this->memory_.failed_epochs_recorded(); }
  // The blocks recovery found on the free lists (InCLL §5; the byte-string form).
  std::size_t blocks_on_free_lists() const { return blocks_on_free_lists_; }
  // The parent links recovery found wrong and set (the lazy open of byte strings: so far).
  std::size_t parent_links_mended() const { return parent_links_mended_.load(); }

 private:
  // A border the walk reached: its layer's first key byte (8 per layer above it) and whether it
  // is its layer's root.
  struct BorderAt {
    Border* node;
    std::size_t offset;
    bool root;
  };
  // What recovery's walk found; nothing is written until it is complete.
  struct Walk {
    std::vector<Interior*> interiors;
    std::size_t border_count = 0;
    std::vector<BorderAt> borders;  // when the borders are checked (eager recovery)
    std::size_t byte_strings = 0;
    typename Memory::ListedBlocks listed;  // on the free lists, and the lists' own slots
    // Each interior node's interior children whose parent link is wrong, and its border
    // children when the log restored it (its split in the failed epoch may have moved them) or
    // when the recovery is eager (which rebuilds every link, so a damaged one is mended): their
    // parent links to set. In a lazy recovery other borders' links are right unless the pool
    // was damaged: only split_interior moves children, under a logged parent, and the moves of
    // epochs that ended were flushed at their boundaries. (The restored parents' borders, 5-50K
    // in a lazy open of 10M entries, are first read by touch_restored_children, beside the walk.)
    std::vector<std::pair<Node*, Interior*>> parent_links;
  };

  // Recovery's walk (after the log was applied): the top layer's interior nodes, and, when
  // `check_borders`, every border, checked as recover_border() will find it, with the layers and
  // byte strings its entries name after recovery (walked and checked in turn) — all before
  // anything is written; a damaged pool ends in PoolCorrupt.
  Walk walk_tree(const pm::ChunkAllocator& a, pm::ChunkAllocator::SlotBits& reached,
                 bool check_borders) const {
    Walk walk;
    walk_layer(a, reached, walk, reinterpret_cast<Node*>(this->memory_.root_word().load()),
               "the root pointer", 0, check_borders);
    for (std::size_t i = 0; check_borders && i < walk.borders.size(); ++i)
      check_border_at(a, reached, walk, walk.borders[i]);   // (a copy: the walk may grow)
    walk.listed = this->memory_.walk_block_lists(reached);  // after the named blocks
    return walk;
  }

  // Reads the parent link of every border under an interior node the log restored, checking
  // each link it follows first (the pool is not checked yet: a damaged link is skipped, and the
  // walk reports it); returns their sum.
  std::uintptr_t touch_restored_children(const pm::ChunkAllocator& a) const {
    const auto is = [&a](const void* p, std::size_t slot) {
      return a.is_slot(p, slot) && a.slot_size_of(p) == slot;
    };
    std::uintptr_t sink = 0;
    for (const void* p : this->memory_.restored_objects()) {
      if (!is(p, interior_slot)) continue;
      const auto* in = static_cast<const Interior*>(p);
      const int keys = std::min(in->keys.load(std::memory_order_relaxed), width);
      for (int i = 0; i <= keys; ++i)
        if (const Node* c = in->child[i].load(std::memory_order_relaxed); is(c, border_slot))
          sink += reinterpret_cast<std::uintptr_t>(c->parent.load(std::memory_order_relaxed));
    }
    return sink;
  }

  // The node at p, checked as a node slot reached once: true for a border, false for an
  // interior node (borders and interior nodes have slots of different sizes, so a child's kind
  // is known without reading it).
  static bool kind_at(const pm::ChunkAllocator& a, pm::ChunkAllocator::SlotBits& reached,
                      const void* p, std::string_view what) {
    const bool border = is_border_slot(a, p, what);
    if (!reached.set(p)) a.corrupt("a node is reached twice");
    return border;
  }
  // Whether the node slot at p is a border's (else an interior node's); PoolCorrupt when p is
  // no slot of either size.
  // `what` is a view, not a std::string: a literal passed as a string was a heap allocation
  // for every child link the walk checks.
  static bool is_border_slot(const pm::ChunkAllocator& a, const void* p, std::string_view what) {
    a.checked_slot(p, sizeof(Interior), what);
    const std::size_t slot = a.slot_size_of(p);
    if (slot != border_slot && slot != interior_slot)
      a.corrupt(std::string(what) + " names a slot of no node's size");
    return slot == border_slot;
  }

  // One layer's interior nodes from its root, each checked — a slot of its kind's size, reached
  // once, 1 to width keys in order within its parent's bounds, children of one kind that are no
  // roots — else PoolCorrupt. Borders are counted (and listed when checked), not read here.
  void walk_layer(const pm::ChunkAllocator& a, pm::ChunkAllocator::SlotBits& reached, Walk& walk,
                  Node* root, const char* what, std::size_t offset, bool list_borders) const {
    // Each interior node to visit, with the separators that bound its keys (none at the edges).
    using LayerKey = masstree_detail::LayerKey;
    struct Pending {
      Interior* node;
      std::optional<LayerKey> low, high;
    };
    std::vector<Pending> stack;
    const bool root_border = kind_at(a, reached, root, what);
    const std::uint64_t root_version = root->version.load();
    if (!masstree_detail::is_root(root_version) ||
        masstree_detail::is_border(root_version) != root_border)
      a.corrupt(std::string(what) + " names a node that is not a root of its slot's kind");
    if (root_border) {
      ++walk.border_count;
      if (list_borders) walk.borders.push_back({static_cast<Border*>(root), offset, true});
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
      // The children's kinds first (from their slots' sizes, nothing read), and the interior
      // ones' lines asked for at once: a lazy open waits for this walk, and one miss at a time
      // per interior node was most of it (a 10M-entry tree's walk took 50 ms, 35 with this).
      std::array<Node*, width + 1> children;
      std::array<bool, width + 1> is_border_child;
      for (int i = 0; i <= keys; ++i) {
        children[i] = in->child[i].load();
        is_border_child[i] = kind_at(a, reached, children[i], "an interior node's child link");
        if (is_border_child[i] != is_border_child[0])
          a.corrupt("an interior node's children are of two kinds");
        if (!is_border_child[i]) masstree_detail::prefetch(children[i]);
      }
      for (int i = 0; i <= keys; ++i) {
        Node* c = children[i];
        const bool border = is_border_child[i];
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
          if (list_borders) walk.borders.push_back({static_cast<Border*>(c), offset, false});
          if (restored || list_borders) walk.parent_links.emplace_back(c, in);
          continue;
        }
        const std::uint64_t v = c->version.load();
        if (masstree_detail::is_border(v) || masstree_detail::is_root(v))
          a.corrupt("an interior node's child is a root or not of its slot's kind");
        // (its version's line holds its parent link: only a wrong one is listed to be set)
        if (c->parent.load() != in) walk.parent_links.emplace_back(c, in);
        stack.push_back({static_cast<Interior*>(c), child_low, child_high});
      }
    }
  }

  // One border as recovery will leave it: its kind and root bit, its permutation, entries and
  // next link (Checkpoints::check_border), and in the byte-string form the layers (walked) and
  // byte strings (checked, reached once) its entries name.
  void check_border_at(const pm::ChunkAllocator& a, pm::ChunkAllocator::SlotBits& reached,
                       Walk& walk, const BorderAt at) const {
    const Border& b = *at.node;
    const std::uint64_t v = b.version.load();
    if (!masstree_detail::is_border(v) || masstree_detail::is_root(v) != at.root)
      a.corrupt("a border slot holds no border, or a border has the wrong root bit");
    const masstree_detail::Permutation perm = this->memory_.check_border(b);
    // (a next link it keeps is a border slot, and its layer is walked whole: reached.test works)
    if (const Border* next = b.next.load(); next != nullptr && !reached.test(next))
      a.corrupt("a border's next link leads out of the tree");
    if constexpr (ByteStrings) {
      for (int p = 0; p < perm.size(); ++p) {
        const int s = perm.slot(p);
        const std::uint64_t value = this->memory_.value_after_recovery(b, s);
        const std::uint8_t kind = b.kind[s].load();
        if (kind == masstree_detail::has_layer) {
          auto* first = reinterpret_cast<Node*>(value);
          walk_layer(a, reached, walk, layer_root(a, first), "a layer link", at.offset + 8, true);
          if (!reached.test(first)) a.corrupt("a layer link names a node its layer does not hold");
          continue;
        }
        check_bytes(a, reached, walk, value, "a value");
        if (kind != masstree_detail::has_suffix) continue;
        const Bytes* key = check_bytes(
            a, reached, walk, reinterpret_cast<std::uint64_t>(b.suffix[s].load()), "a key suffix");
        std::uint64_t big_endian;
        if (key->size <= at.offset + 8) a.corrupt("a key suffix shorter than its entry's key");
        std::memcpy(&big_endian, key->view().data() + at.offset, 8);
        if (__builtin_bswap64(big_endian) != b.slice[s].load())
          a.corrupt("a key suffix that is not its entry's key");
      }
    }
  }

  // The root of the layer whose first node is `first`, by parent links up its left edge: the
  // node a layer link names stays its layer's leftmost (splits move keys right, nothing
  // merges), and a parent link on the left edge changes only when a root splits, which logs the
  // node — so the log restored it where the failed epoch changed it.
  static Node* layer_root(const pm::ChunkAllocator& a, Node* first) {
    Node* n = first;
    for (int level = 0;; ++level) {
      is_border_slot(a, n, "a layer link");
      if (masstree_detail::is_root(n->version.load())) return n;
      Interior* parent = n->parent.load();
      if (level == 64 || !a.is_slot(parent, sizeof(Interior)) ||
          a.slot_size_of(parent) != interior_slot || parent->child[0].load() != n)
        a.corrupt("a layer's left edge does not lead to its root");
      n = parent;
    }
  }

  // The byte string a value word or a suffix link names: a block of its size, named once.
  static const Bytes* check_bytes(const pm::ChunkAllocator& a,
                                  pm::ChunkAllocator::SlotBits& reached, Walk& walk,
                                  std::uint64_t word, const char* what) {
    // A block is its free-list link (InCLL §5), then the Bytes.
    const auto* block = reinterpret_cast<const void*>(word - Memory::block_header);
    a.checked_slot(block, Memory::block_header + sizeof(Bytes), what);
    const auto* p = reinterpret_cast<const Bytes*>(word);
    const std::uint64_t size = p->size;
    if (size > Memory::max_value_size || a.slot_size_of(block) != Memory::block_size_for(size))
      a.corrupt(std::string(what) + " names a block of another size");
    if (!reached.set(block)) a.corrupt(std::string(what) + " names a block named elsewhere");
    ++walk.byte_strings;
    return p;
  }

  // After a walk: each parent link it found wrong set and flushed (fenced by the caller: once
  // the new epoch is durable no recovery rebuilds it again, the log that restored its parent is
  // gone), and the lock and dirty bits a crash left on its interior nodes cleared.
  void mend(const Walk& walk) {
    for (auto [child, parent] : walk.parent_links) {
      if (child->parent.load(std::memory_order_relaxed) == parent) continue;
      child->parent.store(parent);
      pm::flush_range(&child->parent, sizeof child->parent);
      parent_links_mended_.fetch_add(1, std::memory_order_relaxed);
    }
    constexpr std::uint64_t transient_bits =
        masstree_detail::locked_bit | masstree_detail::dirty_bits;
    for (Interior* in : walk.interiors) {
      const std::uint64_t v = in->version.load(std::memory_order_relaxed);
      if (v & transient_bits) in->version.store(v & ~transient_bits);
    }
  }

  // ---- the lazy open of byte strings (header) ---------------------------------------------------

  struct Sweep {
    const pm::ChunkAllocator* allocator;
    const Node* top_root;
    std::mutex mutex;                                       // guards everything below but `done`
    std::unique_ptr<pm::ChunkAllocator::SlotBits> reached;  // chunks used at open only
    std::vector<std::size_t> withheld;                      // those chunks
    // The borders it has still to have recovered: the top layer's by its chain of next links
    // (nothing merges: every border the open found stays on it), from the leftmost; the lower
    // layers' as their walks list them.
    Border* top_next = nullptr;
    bool top_busy = false;  // top_next is being worked out (the border before it is recovered)
    std::vector<BorderAt> pending;
    std::unordered_map<const Border*, BorderAt> lower;  // lower layers' borders not recovered
    Walk layers;                                        // the layers one border names (scratch)
    std::size_t in_flight = 0;                          // borders the sweep is recovering now
    bool failed = false;              // a damaged border: the chunks stay withheld
    std::size_t live = 0, freed = 0;  // slots kept and given back (once done)
    std::atomic<bool> done{false};
  };

  void start_sweep(const pm::ChunkAllocator& a,
                   std::unique_ptr<pm::ChunkAllocator::SlotBits> reached,
                   std::vector<std::size_t> withheld, bool own_thread) {
    sweep_ = std::make_unique<Sweep>();
    Sweep& s = *sweep_;
    s.allocator = &a;
    s.top_root = reinterpret_cast<const Node*>(this->memory_.root_word().load());
    Node* leftmost = reinterpret_cast<Node*>(this->memory_.root_word().load());
    while (a.slot_size_of(leftmost) != border_slot)  // (the walk checked these links)
      leftmost = static_cast<Interior*>(leftmost)->child[0].load();
    s.top_next = static_cast<Border*>(leftmost);
    s.reached = std::move(reached);
    s.withheld = std::move(withheld);
    // A full pool finishes the sweep and tries again if it gave slots back, even when it was
    // done already: the failed try may have come before another thread's sweep gave them back.
    this->memory_.set_lazy_open_hooks([this](Border& b) { check_before_recovery(b); },
                                      [this] {
                                        finish_recovery_sweep();
                                        return sweep_->freed > 0;
                                      });
    if (own_thread && pm::backend != pm::Backend::simulated) try {
        sweep_thread_.emplace([this](std::stop_token stop) {
          while (!stop.stop_requested() && !sweep_step(64)) {
          }
        });
      } catch (const std::system_error&) {  // no thread to be had: background_step() does it
      }
  }

  // Has up to `budget` borders of the sweep recovered (0: every one left); returns whether the
  // sweep is done. The last to find nothing left and none under way gives the slots back.
  bool sweep_step(std::size_t budget) {
    Sweep& s = *sweep_;
    for (std::size_t n = 0; budget == 0 || n < budget; ++n) {
      Border* b;
      bool top = false;
      {
        std::lock_guard hold(s.mutex);
        if (s.done.load(std::memory_order_relaxed)) return true;
        if ((s.top_next == nullptr && !s.top_busy && s.pending.empty()) || s.failed) {
          if (s.in_flight != 0) return false;
          if (!s.failed) {
            const pm::AllocatorRecoveryStats stats = this->memory_.recover_allocator_chunks(
                s.withheld, [&s](void* slot) { return s.reached->test(slot); });
            s.live = stats.live_slots;
            s.freed = stats.free_slots;
          }
          s.pending.clear();
          s.lower.clear();
          s.done.store(true);
          return true;
        }
        if (s.top_next != nullptr && !s.top_busy) {
          b = s.top_next;
          s.top_busy = top = true;
        } else if (!s.pending.empty()) {
          b = s.pending.back().node;
          s.pending.pop_back();
        } else {
          return false;  // (another sweeper works out the top layer's next border)
        }
        ++s.in_flight;
      }
      bool damaged = false;
      try {
        this->memory_.before_border_access(*b);  // (the operation that reaches a damaged one
      } catch (const Error&) {                   // reports it again)
        damaged = true;
      }
      std::lock_guard hold(s.mutex);
      --s.in_flight;
      s.failed = s.failed || damaged;
      if (top) {  // b is recovered: its link is the next border's, or a newer border's (a
                  // split since), which needs no recovery and leads on to it
        s.top_next = s.failed ? nullptr : b->next.load(std::memory_order_acquire);
        s.top_busy = false;
      }
    }
    return false;
  }

  // Lazy recovery is about to recover border b (under its recovery lock): the blocks and layers
  // it will name are checked as the eager walk checks them, and reached; the layers it names
  // are walked and mended as the open walked the top layer (no operation reaches them before),
  // and their borders join the sweep.
  void check_before_recovery(Border& b) {
    Sweep& s = *sweep_;
    std::lock_guard hold(s.mutex);
    if (s.done.load(std::memory_order_relaxed) || s.failed) return;  // (failed: nothing is freed)
    BorderAt at{&b, 0, &b == s.top_root};
    if (const auto it = s.lower.find(&b); it != s.lower.end()) {
      at = it->second;
      s.lower.erase(it);
    }
    try {
      check_border_at(*s.allocator, *s.reached, s.layers, at);
    } catch (...) {
      s.failed = true;
      throw;
    }
    mend(s.layers);
    // The mended links before an operation can reach the layer, and before this thread goes on:
    // a reader writes nothing else and may never fence again, and another thread's fence at the
    // boundary does not complete this thread's write-backs.
    // Mutant killed by test: durable_masstree_sim_test
    // ByteStringParentLinks/*.ThoseALazyLayerRecoveryMendedAreDurableBeforeItsThreadGoesOn
    pm::fence();
    for (const BorderAt& l : s.layers.borders) {
      s.lower.emplace(l.node, l);
      if constexpr (Faults::planted != Fault::sweep_skips_lower_layers) s.pending.push_back(l);
    }
    s.layers.borders.clear();
    s.layers.interiors.clear();
    s.layers.parent_links.clear();
  }

  static constexpr std::size_t border_slot = pm::ChunkAllocator::slot_size_for(sizeof(Border));
  static constexpr std::size_t interior_slot = pm::ChunkAllocator::slot_size_for(sizeof(Interior));
  static constexpr int width = masstree_detail::width;

  static std::vector<std::size_t> object_sizes() {
    return {sizeof(masstree_detail::Border), sizeof(masstree_detail::Interior)};
  }

  RecoveryStats recovery_;
  std::size_t blocks_on_free_lists_ = 0;
  std::atomic<std::size_t> parent_links_mended_{0};
  std::unique_ptr<Sweep> sweep_;              // the lazy open of byte strings, while it learns
  std::optional<std::jthread> sweep_thread_;  // (after sweep_: stopped and joined first)
};

template <FaultPolicy Faults = NoFaults>
using InCLLMasstree = DurableMasstree<Mode::incll, Faults>;
template <FaultPolicy Faults = NoFaults>
using LoggingMasstree = DurableMasstree<Mode::logging, Faults>;
template <FaultPolicy Faults = NoFaults>
using InCLLStringMasstree = DurableMasstree<Mode::incll, Faults, true>;
template <FaultPolicy Faults = NoFaults>
using LoggingStringMasstree = DurableMasstree<Mode::logging, Faults, true>;

}  // namespace pmds::incll

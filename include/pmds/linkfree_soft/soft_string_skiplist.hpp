// pmds::linkfree_soft::SoftStringSkipList — "skiplist-bytes/soft": a durable-linearizable ordered
// map from byte strings to byte strings, on SOFT's technique (Zuriel et al. §4: persistent nodes
// apart from the volatile ones, no link persisted, one psync per insert, replacement and remove).
//
// It is the two SOFT string and skip-list pieces put together, each written once:
//   - a key's versions (detail/soft_string_versions.hpp, shared with hash-bytes/soft): the
//     persistent node of each version with its checksum, the volatile node's `current` word,
//     replacement in one fence, the remove's freeze, recovery keeping a key's highest live
//     version;
//   - the skip-list index (detail/soft_skip_index.hpp, shared with skiplist/soft): level 0 is the
//     SOFT list, whose states decide membership; towers in DRAM only, rebuilt at open.
// What is new here is the order: keys in byte order (std::string_view's, unsigned bytes). A
// volatile node keeps its key's ByteKeyOrder (the first 15 bytes and the length in two words:
// byte_key_order.hpp), so that most comparisons are two integer comparisons; keys that share
// their first 15 bytes compare the rest, read from the persistent node (a key's bytes are the
// same in each of its versions).
//
// The linearization points are the hash map's: insert at the CAS to "inserted" (its node
// durable first), remove at the CAS to "deleted" (the deletion durable first), a replacement at
// the CAS of `current` to stable (after its fence). Reads never write or fence.
//
// Memory: a persistent node is a pool block of detail::soft_string_block_size(32 + key + value)
// bytes; per key in DRAM, one volatile node of 32 bytes, 8 per tower level (two levels on
// average) and 8 for its stale word, in a block of whole cache lines (pmds::TowerSlab: one line
// up to height 3).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/byte_key_order.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/linkfree_soft/detail/soft_pnode.hpp"
#include "pmds/linkfree_soft/detail/soft_skip_index.hpp"
#include "pmds/linkfree_soft/detail/soft_string_versions.hpp"
#include "pmds/node_slab.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/random_height.hpp"
#include "pmds/range.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::linkfree_soft {

namespace detail {

struct SoftStringSkipNode;
// The map's DRAM blocks for its nodes: `height` links, then the stale word (one line for a node
// of height 3 or less).
using SoftStringSkipSlab = TowerSlab<SoftStringSkipNode, soft_skip_max_height + 1>;

// A volatile node: the key's order words, its current word (SoftStringVersions::Key), the parties
// still linking or marking it (SoftSkipIndex), its height, then `height` next words (link(0)
// carries the SOFT state, link(i > 0) a mark bit), then the key's stale word
// (SoftStringVersions::Key). order and height never change once it is published. The stale word
// comes after the links so that a traversal reads the lines it would read without it (the links
// of a node of height 4 stay in its first line). A version word too would make one node in four
// two lines instead of one in eight: fillrandom ran 0.90x [0.85-0.97] of the build before with
// both (6 alternating rounds, 1M keys, 100-byte values, 1 thread, AMD EPYC), so a replacement
// reads the current version from its persistent node's header instead.
struct SoftStringSkipNode {
  ByteKeyOrder order;
  std::atomic<std::uintptr_t> current;
  std::atomic<std::uint32_t> pending;
  std::uint32_t height;

  std::atomic<std::uintptr_t>& link(unsigned level) {
    return std::launder(reinterpret_cast<std::atomic<std::uintptr_t>*>(this + 1))[level];
  }
  const std::atomic<std::uintptr_t>& link(unsigned level) const {
    return std::launder(reinterpret_cast<const std::atomic<std::uintptr_t>*>(this + 1))[level];
  }
  std::atomic<std::uintptr_t>& stale() { return link(height); }

  // A node with every link and the stale word null (unpublished): the caller fills the links
  // before publishing.
  static SoftStringSkipNode* make(SoftStringSkipSlab& slab, ByteKeyOrder order,
                                  std::uintptr_t current, std::uint32_t pending, unsigned height) {
    auto* n =
        new (slab.allocate(height + 1)) SoftStringSkipNode{order, {current}, {pending}, height};
    for (unsigned i = 0; i <= height; ++i) new (&n->link(i)) std::atomic<std::uintptr_t>(0);
    return n;
  }
  static void free(SoftStringSkipSlab& slab, SoftStringSkipNode* n) {
    slab.free(n, n->height + 1);  // trivially destructible, links included
  }
};
static_assert(sizeof(SoftStringSkipNode) == 32);

// A key looked for: its order words and its bytes.
struct SoftStringProbe {
  ByteKeyOrder order;
  std::string_view key;
};

struct SoftStringSkipOrder {
  static constexpr bool tail_has_a_key = false;  // any byte string is a key
  static int compare(const SoftStringSkipNode* n, const SoftStringProbe& q) {
    if (const auto c = n->order <=> q.order; c != 0) return c < 0 ? -1 : 1;
    if (!ByteKeyOrder::bytes_decide(q.order.tail)) return 0;
    return SoftStringVersions::compare_key(n->current.load(std::memory_order_acquire), q.key,
                                           ByteKeyOrder::covered);
  }
};

}  // namespace detail

/// An ordered map from byte strings to byte strings, durable when each operation returns; scan
/// and range(from, to) read it in byte order while other threads write.
///
/// - **Criterion:** durable linearizability: after a crash, every operation that returned is in
///   the recovered map, and an operation in flight is either wholly there or absent. scan and
///   range are not snapshots: each key they visit was in the map when its state was read, with
///   a value it held (pmds::Range says what range promises).
/// - **Cost:** one fence per insert, replacement and remove (two for a remove of a key replaced
///   since its insert), plus one persist when the pool allocator claims a new chunk; get,
///   contains, scan and range never write or fence. The towers and links are in DRAM only,
///   rebuilt at open.
/// - **Progress:** lock-free (writers of one key help each other's replacement to completion);
///   the pool allocator's slow paths take a mutex (pm/allocator.hpp).
/// - **Threads:** up to pmds::max_threads (128) threads at once; more throw TooManyThreads.
/// - **A full pool:** an insert, put or update that needs a block throws PoolFull and changes
///   nothing (remove needs none and always works).
/// - **Bad input:** a key over max_key_size (1,024 bytes) or a value over max_value_size (7,136)
///   throws pmds::Error and changes nothing; any other bytes, the empty string included, are a
///   key.
/// - **A bad pool:** opening a pool that holds another structure, or a damaged root, throws
///   PoolError.
///
/// Zuriel et al. §4 (SOFT) with the string map's additions (docs/ARCHITECTURE.md §9) and the skip
/// list's index. Registered as "skiplist-bytes/soft"; pmds::DurableStringOrderedMap.
class SoftStringSkipList {
  using Node = detail::SoftStringSkipNode;
  using Probe = detail::SoftStringProbe;
  using V = detail::SoftStringVersions;
  static constexpr unsigned max_height = detail::soft_skip_max_height;
  using Index = detail::SoftSkipIndex<Node, detail::SoftStringSkipOrder, max_height>;
  using Search = Index::Search;

 public:
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr const char* name = "skiplist-bytes/soft";
  static constexpr std::uint64_t tag = detail::make_tag("SKBYSOF1");
  static constexpr std::size_t max_block_size = detail::soft_string_max_block_size;
  static constexpr std::size_t max_key_size = detail::soft_string_max_key_size;
  static constexpr std::size_t max_value_size = detail::soft_string_max_value_size;

  /// A new, empty map in `pool`, which must hold no structure and must outlive it.
  SoftStringSkipList(CreateTag, pm::Pool& pool) : pool_(pool), allocator_(pool.allocator()) {
    detail::write_set_root(pool, tag, 1, name);
  }

  /// Opens the map a pool holds and recovers it, after a crash or a clean close alike: the live
  /// persistent nodes in key order, each in a fresh volatile node with a fresh tower.
  SoftStringSkipList(OpenTag, pm::Pool& pool) : pool_(pool), allocator_(pool.allocator()) {
    detail::read_set_root(pool, tag, name);
    recover();
  }

  SoftStringSkipList(const SoftStringSkipList&) = delete;
  SoftStringSkipList& operator=(const SoftStringSkipList&) = delete;

  /// Quiescent: runs the pending reclamations (their deleters free into versions_, which goes
  /// before domain_); the volatile nodes and records go with their slabs, and the persistent
  /// nodes hold the map for the next open.
  ~SoftStringSkipList() { domain_.drain(); }

  /// Adds the key if it is absent; false (nothing written) if present. Durable on return.
  bool insert(std::string_view k, std::string_view v) {
    const Probe q = probe(k, v);
    auto guard = domain_.pin();
    Search s;
    V::Block b(versions_);
    for (;;) {
      index_.find(q, s);
      if (s.equal) {
        if (s.state0 == detail::intend_to_insert) complete_insert(s.curr0);
        return false;
      }
      if (try_link(s, q, v, b)) return true;
    }
  }

  /// Inserts or replaces; true if the key was absent. Durable on return (one fence).
  bool put(std::string_view k, std::string_view v) {
    const Probe q = probe(k, v);
    auto guard = domain_.pin();
    Search s;
    V::Block b(versions_);
    b.reserve(k, v);  // a put writes a node whatever it finds: its block's misses overlap find's
    for (;;) {
      index_.find(q, s);
      if (!s.equal) {
        if (try_link(s, q, v, b)) return true;
        continue;
      }
      Node* n = s.curr0;
      if (s.state0 == detail::intend_to_insert) complete_insert(n);
      const std::uintptr_t c = versions_.settled(key_of(n));
      if (!V::is_frozen(c) && versions_.try_replace(key_of(n), c, V::hash_of(k), k, v, b))
        return false;
      // A remove won the key (or changed it under us): help it, then look again.
      if (V::is_frozen(versions_.settled(key_of(n)))) help_remove(n);
    }
  }

  /// An atomic read-modify-write of one key: `fn(std::optional<std::string_view> current)` returns
  /// `std::optional<std::string>`, the value to store, or nullopt to leave the map as it is. fn may
  /// run more than once (when another thread changed the key in between: compare-and-put) and
  /// must have no other effect. Returns whether a value was stored (durable on return).
  template <class F>
  bool update(std::string_view k, F&& fn) {
    const Probe q = probe(k);
    auto guard = domain_.pin();
    Search s;
    V::Block b(versions_);
    for (;;) {
      index_.find(q, s);
      if (!s.equal) {
        const std::optional<std::string> v = fn(std::optional<std::string_view>{});
        if (!v) return false;
        versions_.check_value(*v);
        if (try_link(s, q, *v, b)) return true;
        continue;
      }
      Node* n = s.curr0;
      if (s.state0 == detail::intend_to_insert) complete_insert(n);
      const std::uintptr_t c = versions_.settled(key_of(n));
      if (V::is_frozen(c)) {
        help_remove(n);
        continue;
      }
      std::string old;
      V::read_value(V::pnode_word_of(c), old);
      const std::optional<std::string> v = fn(std::optional<std::string_view>(old));
      if (!v) return false;
      versions_.check_value(*v);
      if (versions_.try_replace(key_of(n), c, V::hash_of(k), k, *v, b)) return true;
    }
  }

  /// False if the key was absent. Durable on return (one fence; two for a key replaced since its
  /// insert: the replaced version is deleted first).
  bool remove(std::string_view k) {
    const Probe q = probe(k);
    auto guard = domain_.pin();
    Search s;
    index_.find(q, s);
    // Absent, or "intention to insert": not in the map (its node may not be durable), fail.
    if (!s.equal || s.state0 == detail::intend_to_insert) return false;
    Node* n = s.curr0;
    const bool won = versions_.freeze(key_of(n));
    help_remove(n);
    if (won) {
      Index::mark_tower(n);
      count_.add(-1);
      release(n, q);
    }
    return won;
  }

  bool contains(std::string_view k) {
    const Probe q = probe(k);
    auto guard = domain_.pin();
    return present(index_.seek(q), q);
  }

  std::optional<std::string> get(std::string_view k) {
    std::string out;
    if (!get(k, out)) return std::nullopt;
    return out;
  }
  /// The value into `out` (its capacity reused); false, `out` unchanged, if the key is absent.
  bool get(std::string_view k, std::string& out) {
    const Probe q = probe(k);
    auto guard = domain_.pin();
    const Node* n = index_.seek(q);
    if (!present(n, q)) return false;
    V::read_value(V::pnode_word_of(n->current.load(std::memory_order_acquire)), out);
    return true;
  }

  /// Up to max_count keys >= from in byte order, visit(key, value) each (string_views valid
  /// during the call); returns how many. Each key visited was in the map at the moment its state
  /// was read (not an atomic snapshot).
  template <class F>
  std::size_t scan(std::string_view from, std::size_t max_count, F&& visit) {
    const Probe q = probe(from);
    auto guard = domain_.pin();
    std::size_t count = 0;
    std::string key, value;
    for (const Node* n = index_.seek(q); n != index_.tail() && count < max_count;
         n = Index::ptr(n->link(0).load(std::memory_order_acquire))) {
      if (!Index::in_set(n)) continue;
      const std::uintptr_t p = V::pnode_word_of(n->current.load(std::memory_order_acquire));
      V::read_key(V::pnode_of(p), key);
      V::read_value(p, value);
      visit(std::string_view(key), std::string_view(value));
      ++count;
    }
    return count;
  }

  /// The keys in [from, to) in byte order, for a range-for, while other threads write (weakly
  /// consistent: pmds::Range says what that promises).
  Range<SoftStringSkipList, std::string, std::string> range(std::string_view from,
                                                            std::string_view to) {
    return {*this, std::string(from), std::string(to)};
  }
  /// The keys from `from` (every key, by default) to the end.
  Range<SoftStringSkipList, std::string, std::string> range(std::string_view from = {}) {
    return {*this, std::string(from)};
  }

  /// The number of keys: exact when no thread writes, otherwise approximate (a sum of per-thread
  /// counts read one after the other).
  std::size_t size() const { return count_.sum(); }

  /// Quiescent: f(key, value) for every key, in byte order.
  template <class F>
  void for_each(F&& f) {
    scan({}, static_cast<std::size_t>(-1), f);
  }

  /// Quiescent: runs every pending reclamation now.
  void drain() { domain_.drain(); }

  const RecoveryStats& recovery_stats() const { return recovery_; }
  pm::Pool& pool() const { return pool_; }

 private:
  Probe probe(std::string_view k) const {
    versions_.check_key(k);
    return {ByteKeyOrder::of(k), k};
  }
  Probe probe(std::string_view k, std::string_view v) const {
    const Probe q = probe(k);
    versions_.check_value(v);
    return q;
  }
  // Whether seek's node holds q's key, in the map.
  bool present(const Node* n, const Probe& q) const {
    return n != index_.tail() && Index::in_set(n) &&
           detail::SoftStringSkipOrder::compare(n, q) == 0;
  }

  // Listing 11's insert, one attempt at search s: links a new node in "intention to insert",
  // completes it, builds its tower. False when the link changed (the caller finds again; b
  // keeps the block). PoolFull: nothing changed.
  bool try_link(Search& s, const Probe& q, std::string_view v, V::Block& b) {
    const std::uintptr_t word = b.write(q.key, v, V::hash_of(q.key), 0);
    // pending: the inserter (tower) and the winning remover (marks).
    Node* fresh = Node::make(slab_, q.order, word, 2, random_height<max_height>());
    for (unsigned lvl = 1; lvl < fresh->height; ++lvl)
      fresh->link(lvl).store(reinterpret_cast<std::uintptr_t>(s.succs[lvl]),
                             std::memory_order_relaxed);
    fresh->link(0).store(detail::make_word(s.curr0, detail::intend_to_insert),
                         std::memory_order_relaxed);
    std::uintptr_t expected = s.prev_word0;
    if (!s.prev0->compare_exchange_strong(expected,
                                          detail::make_word(fresh, detail::state_of(s.prev_word0)),
                                          std::memory_order_acq_rel, std::memory_order_relaxed)) {
      Node::free(slab_, fresh);  // never published
      return false;
    }
    b.published();
    complete_insert(fresh);  // durable and "inserted": the insert has taken effect
    count_.add(1);
    index_.build_tower(fresh, q, s);
    release(fresh, q);
    return true;
  }

  static V::Key key_of(Node* n) { return {n->current, n->stale(), nullptr}; }
  static void complete_insert(Node* n) { V::complete_insert(n->link(0), n->current); }
  static void help_remove(Node* n) { V::help_remove(n->link(0), key_of(n)); }

  // Drops one party's share of n (q is its key); the last one unlinks n everywhere and retires
  // it: its blocks and the node are freed once no pinned thread can read them.
  void release(Node* n, const Probe& q) {
    index_.release(n, q, [this](Node* dead) {
      V* versions = &versions_;
      detail::SoftStringSkipSlab* slab = &slab_;
      domain_.retire(dead, [versions, slab](Node* d) noexcept {
        versions->free_blocks(d->current.load(std::memory_order_relaxed),
                              d->stale().load(std::memory_order_relaxed));
        Node::free(*slab, d);
      });
    });
  }

  // Quiescent, single-threaded, at open: the live persistent nodes, one per key
  // (SoftStringVersions::recover_live), sorted by order words then bytes, each in a fresh
  // "inserted" node with a fresh random tower, linked at every level by one pass; no flush.
  void recover() {
    const detail::Stopwatch clock;
    std::string ka, kb;
    const auto found = versions_.recover_live(
        recovery_, [](std::uint64_t, std::string_view key) { return ByteKeyOrder::of(key); },
        [&](const auto& a, const auto& b) {  // equal order words: the bytes decide
          V::read_key(V::pnode_of(a.word), ka);
          V::read_key(V::pnode_of(b.word), kb);
          return ka < kb;
        });
    // pending: only a remover's share (no inserter builds these towers).
    index_.link_sorted(found.size(), [&](std::size_t i) {
      return Node::make(slab_, found[i].order, found[i].word, 1, random_height<max_height>());
    });
    count_.reset(found.size());
    recovery_.seconds = clock.seconds();
  }

  // The sentinels, linked to each other. Every volatile node (these, the linked ones, and the
  // retired ones the destructor's drain frees) goes with slab_, every version record with
  // versions_; the persistent nodes stay as they are.
  struct Nodes {
    explicit Nodes(detail::SoftStringSkipSlab& slab)
        : head(Node::make(slab, {}, 0, 1, max_height)),
          tail(Node::make(slab, {~std::uint64_t{0}, ~std::uint64_t{0}}, 0, 1, max_height)) {
      for (unsigned lvl = 0; lvl < max_height; ++lvl)
        head->link(lvl).store(reinterpret_cast<std::uintptr_t>(tail), std::memory_order_relaxed);
    }
    Node* head;
    Node* tail;
  };

  pm::Pool& pool_;
  pm::ChunkAllocator& allocator_;
  detail::SoftStringSkipSlab slab_;  // outlives domain_, whose pending deleters free into it
  reclaim::EpochDomain domain_;      // drained by the destructor, before versions_ goes
  V versions_{name, allocator_, domain_};
  Nodes nodes_{slab_};
  Index index_{nodes_.head, nodes_.tail};
  detail::KeyCount count_;
  RecoveryStats recovery_;
};

}  // namespace pmds::linkfree_soft

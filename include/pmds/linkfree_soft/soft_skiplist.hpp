// pmds::linkfree_soft — "skiplist/soft": a SOFT durable lock-free skip list (Zuriel et al. §2.3,
// §4; §3 says the extension to skip lists is straightforward: this is how it is done here).
//
// What is persistent is exactly what the SOFT list persists: one PNode per key (validStart,
// validEnd, deleted, key, value) in a 32-byte slot of the pool allocator, created and destroyed
// as in detail/soft_pnode.hpp. Everything else is volatile and rebuilt at recovery: the nodes,
// their towers (heights are drawn afresh) and every link.
//
// Level 0 is the SOFT list, unchanged: the four states live in the low bits of a node's level-0
// next word, the linearization points and the helping are those of soft_list.hpp, so the
// invariants and the bound carry over — an insert fences once (create), a remove fences once
// (destroy), contains and get never flush or fence; towers are DRAM-only and cost no persistence
// instruction. Levels 1.. are the index of detail/soft_skip_index.hpp (which says how towers are
// linked, marked and reclaimed), shared with the byte-string skip list; retirement frees the
// PNode slot and the node.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/linkfree_soft/detail/soft_pnode.hpp"
#include "pmds/linkfree_soft/detail/soft_skip_index.hpp"
#include "pmds/node_slab.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/random_height.hpp"
#include "pmds/range.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::linkfree_soft {

namespace detail {

struct SoftSkipNode;
// The list's DRAM blocks for its nodes (one line for a node of height 4 or less).
using SoftSkipSlab = TowerSlab<SoftSkipNode, soft_skip_max_height>;

// A volatile skip-list node: a 32-byte header followed by `height` next words (link(0) carries
// the SOFT state, link(i > 0) a mark bit), in a block of the list's SoftSkipSlab. key, value,
// pnode and height never change once the node is published.
struct SoftSkipNode {
  Key key;
  Value value;
  std::uintptr_t pnode;  // pack_pnode(PNode*, pValidity)
  std::atomic<std::uint32_t> pending;
  std::uint32_t height;

  std::atomic<std::uintptr_t>& link(unsigned level) {
    return std::launder(reinterpret_cast<std::atomic<std::uintptr_t>*>(this + 1))[level];
  }
  const std::atomic<std::uintptr_t>& link(unsigned level) const {
    return std::launder(reinterpret_cast<const std::atomic<std::uintptr_t>*>(this + 1))[level];
  }

  // A node with every link null (unpublished): the caller fills the links before publishing.
  static SoftSkipNode* make(SoftSkipSlab& slab, Key k, Value v, std::uintptr_t pnode,
                            std::uint32_t pending, unsigned height) {
    auto* n = new (slab.allocate(height)) SoftSkipNode{k, v, pnode, {pending}, height};
    for (unsigned i = 0; i < height; ++i) new (&n->link(i)) std::atomic<std::uintptr_t>(0);
    return n;
  }
  static void free(SoftSkipSlab& slab, SoftSkipNode* n) {
    slab.free(n, n->height);  // trivially destructible, links included
  }
};
static_assert(sizeof(SoftSkipNode) == 32);

// The tail's key is max_reserved_key, after every key a search looks for.
struct SoftSkipOrder {
  static constexpr bool tail_has_a_key = true;
  static int compare(const SoftSkipNode* n, Key k) { return (n->key > k) - (n->key < k); }
};

}  // namespace detail

/// An ordered set of 8-byte keys, each with an 8-byte value, durable when each operation returns;
/// scan and range(from, to) read it in key order while other threads write.
///
/// - **Criterion:** durable linearizability: after a crash, every operation that returned is in
///   the recovered set, and an operation in flight is either wholly there or absent. scan and
///   range are not snapshots: each key they visit was in the set when its state was read
///   (pmds::Range says what range promises).
/// - **Cost:** at most one fence per insert and per remove (its persistent node's create or
///   destroy, or the one it helps to completion), plus one persist when the pool allocator claims
///   a new chunk; contains, get, scan and range never flush or fence. The towers and links are in
///   DRAM only, rebuilt at open.
/// - **Progress:** lock-free; contains, get, scan and range take no lock and write nothing to the
///   list (the pool allocator's slow paths, sharing free slots between threads and growing the
///   pool, take a mutex: pm/allocator.hpp).
/// - **Threads:** up to pmds::max_threads (128) threads at once; more throw TooManyThreads.
/// - **A full pool:** an insert that needs a new node throws PoolFull and changes nothing;
///   remove and the reads need none.
/// - **Bad input:** keys 0 and 2^64-1 (reserved for sentinels) throw ReservedKey in insert, remove,
///   contains and get, changing nothing; every value is allowed. scan(from, max_count, visit) and
///   range take any bound (a `from` of 0 reads as 1).
/// - **A bad pool:** opening a pool that holds another structure throws PoolError
///   (layout_mismatch); creating one in a pool that holds a structure throws PoolError
///   (bad_argument).
///
/// Zuriel et al. §4 (SOFT), extended to a skip list (this header says how). Registered as
/// "skiplist/soft"; pmds::DurableOrderedMap.
template <FaultPolicy Faults = NoFaults>
class SoftSkipList {
  using Node = detail::SoftSkipNode;
  static constexpr unsigned max_height = detail::soft_skip_max_height;
  using Index = detail::SoftSkipIndex<Node, detail::SoftSkipOrder, max_height>;
  using Search = typename Index::Search;

 public:
  // Durable linearizability (Zuriel et al. §1); the registry reads it (registry::criterion_of).
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr std::uint64_t tag = detail::make_tag("SKIPSOF2");
  static constexpr const char* name = "skiplist/soft";

  // Creates an empty skip list in `pool`, which must hold no structure and must outlive it.
  SoftSkipList(CreateTag, pm::Pool& pool) : pool_(pool), allocator_(pool.allocator()) {
    detail::write_set_root(pool, tag, 1, name);
  }

  // Opens the skip list a pool holds and recovers it (§4.6): after a crash or a clean close.
  SoftSkipList(OpenTag, pm::Pool& pool) : pool_(pool), allocator_(pool.allocator()) {
    detail::read_set_root(pool, tag, name);
    recover();
  }

  SoftSkipList(const SoftSkipList&) = delete;
  SoftSkipList& operator=(const SoftSkipList&) = delete;

  // Throws PoolFull when no slot is left for a PNode; the set is then unchanged.
  bool insert(Key key, Value value) {
    check_key(key);
    auto guard = domain_.pin();
    Search s;
    Node* fresh = nullptr;  // allocated once, reused by retries
    for (;;) {
      index_.find(key, s);
      if (s.equal) {
        if (fresh != nullptr) discard(fresh);
        if (s.state0 == detail::intend_to_insert) complete_insert(s.curr0);  // help, then fail
        return false;
      }
      if (fresh == nullptr) fresh = make_node(key, value);
      for (unsigned lvl = 1; lvl < fresh->height; ++lvl)
        fresh->link(lvl).store(reinterpret_cast<std::uintptr_t>(s.succs[lvl]),
                               std::memory_order_relaxed);
      fresh->link(0).store(detail::make_word(s.curr0, detail::intend_to_insert),
                           std::memory_order_relaxed);
      std::uintptr_t expected = s.prev_word0;
      if (s.prev0->compare_exchange_strong(expected,
                                           detail::make_word(fresh, detail::state_of(s.prev_word0)),
                                           std::memory_order_acq_rel, std::memory_order_relaxed)) {
        complete_insert(fresh);  // durable and "inserted": the insert has taken effect
        index_.build_tower(fresh, key, s);
        release(fresh);
        return true;
      }
    }
  }

  bool remove(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    Search s;
    index_.find(key, s);
    Node* n = s.curr0;
    if (!s.equal || s.state0 == detail::intend_to_insert) return false;
    bool won = false;
    std::uintptr_t word = n->link(0).load(std::memory_order_acquire);
    while (detail::state_of(word) == detail::inserted) {
      const std::uintptr_t intent = detail::make_word(ptr(word), detail::intend_to_delete);
      if (n->link(0).compare_exchange_weak(word, intent, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
        won = true;
        word = intent;
        break;
      }
    }
    if (detail::state_of(word) == detail::intend_to_delete) complete_remove(n, word);
    if (won) {
      Index::mark_tower(n);
      release(n);
    }
    return won;
  }

  // No flush, no fence: the state read at level 0 is already durable.
  bool contains(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    const Node* n = index_.seek(key);
    return n->key == key && Index::in_set(n);
  }

  std::optional<Value> get(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    const Node* n = index_.seek(key);
    if (n->key == key && Index::in_set(n)) return n->value;
    return std::nullopt;
  }

  // Up to max_count keys >= from in ascending order, visit(key, value) each; returns how many.
  // Each key visited was in the set at the moment its state was read (not an atomic snapshot).
  template <class F>
  std::size_t scan(Key from, std::size_t max_count, F&& visit) {
    if (from == min_reserved_key) from = min_user_key;
    auto guard = domain_.pin();
    std::size_t count = 0;
    for (const Node* n = index_.seek(from); n != tail_ && count < max_count;
         n = ptr(n->link(0).load(std::memory_order_acquire))) {
      if (Index::in_set(n)) {
        visit(n->key, n->value);
        ++count;
      }
    }
    return count;
  }

  /// The keys in [from, to) in ascending order, for a range-for, while other threads write
  /// (weakly consistent: pmds::Range says what that promises).
  Range<SoftSkipList, Key, Value> range(Key from, Key to) { return {*this, from, to}; }
  /// The keys from `from` to the end.
  Range<SoftSkipList, Key, Value> range(Key from = min_user_key) { return {*this, from}; }

  // Quiescent: f(key, value) for every key, in key order.
  template <class F>
  void for_each(F&& f) {
    for (const Node* n = ptr(head_->link(0).load(std::memory_order_acquire)); n != tail_;
         n = ptr(n->link(0).load(std::memory_order_acquire)))
      if (Index::in_set(n)) f(n->key, n->value);
  }

  // Quiescent: the number of keys.
  std::size_t size() {
    std::size_t n = 0;
    for_each([&n](Key, Value) { ++n; });
    return n;
  }

  // What the recovery at open found (all zero for a created list).
  const RecoveryStats& recovery_stats() const { return recovery_; }
  pm::Pool& pool() const { return pool_; }
  reclaim::EpochDomain& domain() { return domain_; }

 private:
  static Node* ptr(std::uintptr_t word) { return Index::ptr(word); }

  // Drops one party's share of n; the last one unlinks n everywhere and retires it, and the epoch
  // domain's deleter frees its PNode slot and the node.
  void release(Node* n) {
    index_.release(n, n->key, [this](Node* dead) {
      pm::ChunkAllocator* allocator = &allocator_;
      detail::SoftSkipSlab* slab = &slab_;
      domain_.retire(dead, [allocator, slab](Node* d) noexcept {
        allocator->free(detail::pnode_of(d->pnode));
        Node::free(*slab, d);
      });
    });
  }

  void complete_insert(Node* n) {
    detail::pnode_of(n->pnode)->template create<Faults>(n->key, n->value,
                                                        detail::validity_of(n->pnode));
    std::uintptr_t word = n->link(0).load(std::memory_order_acquire);
    while (detail::state_of(word) == detail::intend_to_insert) {
      if (n->link(0).compare_exchange_weak(word, detail::make_word(ptr(word), detail::inserted),
                                           std::memory_order_acq_rel, std::memory_order_acquire))
        break;
    }
  }

  static void complete_remove(Node* n, std::uintptr_t word) {
    detail::pnode_of(n->pnode)->destroy(detail::validity_of(n->pnode));
    while (detail::state_of(word) == detail::intend_to_delete) {
      if (n->link(0).compare_exchange_weak(word, detail::make_word(ptr(word), detail::deleted),
                                           std::memory_order_acq_rel, std::memory_order_acquire))
        break;
    }
  }

  Node* make_node(Key key, Value value) {
    void* slot = allocator_.allocate(detail::soft_slot_size);  // PoolFull: nothing changed
    auto* p = static_cast<detail::SoftPNode*>(slot);
    const bool validity = p->template prepare<Faults>();
    try {
      // pending: the inserter (tower) and the winning remover (marks).
      return Node::make(slab_, key, value, detail::pack_pnode(p, validity), 2,
                        random_height<max_height>());
    } catch (...) {
      allocator_.free(slot);
      throw;
    }
  }

  void discard(Node* n) {
    allocator_.free(detail::pnode_of(n->pnode));
    Node::free(slab_, n);
  }

  // The sentinels and, at destruction (quiescent), every node still linked at level 0. Retired
  // nodes are the epoch domain's, destroyed after this. PNodes stay as they are.
  struct Nodes {
    detail::SoftSkipSlab& slab;
    Node* head = Node::make(slab, min_reserved_key, 0, 0, 1, max_height);
    Node* tail = make_tail();
    explicit Nodes(detail::SoftSkipSlab& s) : slab(s) {
      for (unsigned lvl = 0; lvl < max_height; ++lvl)
        head->link(lvl).store(reinterpret_cast<std::uintptr_t>(tail), std::memory_order_relaxed);
    }
    Nodes(const Nodes&) = delete;
    Nodes& operator=(const Nodes&) = delete;
    ~Nodes() {
      // A recovery cut short by an exception leaves a chain ending in null, not in the tail.
      Node* n = ptr(head->link(0).load(std::memory_order_acquire));
      while (n != tail && n != nullptr) {
        Node* next = ptr(n->link(0).load(std::memory_order_relaxed));
        Node::free(slab, n);
        n = next;
      }
      Node::free(slab, head);
      Node::free(slab, tail);
    }
    Node* make_tail() {
      try {
        return Node::make(slab, max_reserved_key, 0, 0, 1, max_height);
      } catch (...) {
        Node::free(slab, head);
        throw;
      }
    }
  };

  // §4.6 for the skip list: the live PNodes in key order, each in a fresh node ("inserted") with
  // a fresh random tower, linked at every level by one pass; no flush.
  void recover() {
    const detail::Stopwatch clock;
    const detail::RecoveredPNodes live =
        detail::recover_soft_pnodes<Faults>(allocator_, recovery_, 1, [](Key) { return 0; });
    // pending: only a remover's share (no inserter builds these towers).
    index_.link_sorted(live.nodes.size(), [&](std::size_t i) {
      const detail::LivePNode& lp = live.nodes[i];
      return Node::make(slab_, lp.key, lp.value, lp.pnode, 1, random_height<max_height>());
    });
    recovery_.seconds = clock.seconds();
  }

  pm::Pool& pool_;
  pm::ChunkAllocator& allocator_;
  detail::SoftSkipSlab slab_;    // outlives domain_, whose pending deleters free into it
  reclaim::EpochDomain domain_;  // destroyed after nodes_: retired nodes are freed last
  Nodes nodes_{slab_};
  Node* const head_ = nodes_.head;
  Node* const tail_ = nodes_.tail;
  Index index_{head_, tail_};
  RecoveryStats recovery_;
};

}  // namespace pmds::linkfree_soft

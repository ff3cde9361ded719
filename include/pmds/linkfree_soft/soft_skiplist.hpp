// pmds::linkfree_soft — "skiplist/soft": a SOFT durable lock-free skip list (seed 000 §2.3, §4; §3
// says the extension to skip lists is straightforward: this is how it is done here).
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
// instruction. Levels 1.. are an index over level 0, maintained as in Fraser's / Herlihy and
// Shavit's lock-free skip lists: a node's upper next words carry a mark (bit 0), set only after
// the node is "deleted" at level 0, and a marked node is unlinked from a level by a CAS on its
// predecessor's unmarked link. So:
//   - membership is decided at level 0 alone ("inserted" or "intention to delete");
//   - the inserter links the tower after the node is "inserted" (the PNode is durable first, as
//     in the list), bottom-up, and stops as soon as the node is deleted or marked;
//   - the remove that wins "intention to delete" marks the tower after "deleted"; any thread that
//     meets a deleted node with an unmarked tower marks it too (helping: idempotent);
//   - a search only takes as predecessor a node it saw not "deleted" at level 0, i.e. one linked
//     at level 0 at that moment, so its level-0 walk is the list's (Harris's argument applies).
// Reclamation: a node may be freed only when it is linked at no level. Level-0 trims unlink but
// do not retire. Each node carries `pending` = the parties that may still link or must mark it:
// the inserter (until its tower is built or abandoned) and the winning remover (until the tower
// is marked); recovered nodes start with the remover's share only. Whoever drops it to zero no
// longer races with any linking, unlinks the node from every level (one top-down descent, a
// Harris traversal at each level that also passes equal keys: O(log n), not a walk from the head
// per level, which was O(n) per remove), and retires it to the epoch domain, whose deleter frees
// the PNode slot and the node.
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
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/random_height.hpp"
#include "pmds/range.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::linkfree_soft {

namespace detail {

// Towers of height h >= 1 with P(h) = 2^-h, at most 24 levels (2^24 = 16M keys, 4x seed 000's
// largest hash range).
inline constexpr unsigned soft_skip_max_height = 24;

// A volatile skip-list node: a 32-byte header followed by `height` next words (link(0) carries
// the SOFT state, link(i > 0) a mark bit). key, value, pnode and height never change once the
// node is published.
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
  static SoftSkipNode* make(Key k, Value v, std::uintptr_t pnode, std::uint32_t pending,
                            unsigned height) {
    void* raw = ::operator new(sizeof(SoftSkipNode) + height * sizeof(std::atomic<std::uintptr_t>));
    auto* n = new (raw) SoftSkipNode{k, v, pnode, {pending}, height};
    for (unsigned i = 0; i < height; ++i) new (&n->link(i)) std::atomic<std::uintptr_t>(0);
    return n;
  }
  static void free(SoftSkipNode* n) {
    n->~SoftSkipNode();  // the links are trivially destructible
    ::operator delete(static_cast<void*>(n));
  }
};
static_assert(sizeof(SoftSkipNode) == 32);

inline constexpr std::uintptr_t skip_mark = 1;

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
/// Seed 000 §4 (SOFT), extended to a skip list (this header says how). Registered as
/// "skiplist/soft"; pmds::DurableOrderedMap.
template <SoftBug Bug = SoftBug::none>
class SoftSkipList {
  using Node = detail::SoftSkipNode;
  static constexpr unsigned max_height = detail::soft_skip_max_height;

 public:
  // Durable linearizability (seed 000 §1); the registry reads it (registry::criterion_of).
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr std::uint64_t tag = detail::make_tag("SKIPSOF2");
  static constexpr const char* name = "skiplist/soft";
  static constexpr SoftBug planted_bug = Bug;

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
      find(key, s);
      if (s.curr0->key == key) {
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
        build_tower(fresh, s);
        release(fresh);
        return true;
      }
    }
  }

  bool remove(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    Search s;
    find(key, s);
    Node* n = s.curr0;
    if (n->key != key || s.state0 == detail::intend_to_insert) return false;
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
      mark_tower(n);
      release(n);
    }
    return won;
  }

  // No flush, no fence: the state read at level 0 is already durable.
  bool contains(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    const Node* n = seek(key);
    return n->key == key && in_set(n);
  }

  std::optional<Value> get(Key key) {
    check_key(key);
    auto guard = domain_.pin();
    const Node* n = seek(key);
    if (n->key == key && in_set(n)) return n->value;
    return std::nullopt;
  }

  // Up to max_count keys >= from in ascending order, visit(key, value) each; returns how many.
  // Each key visited was in the set at the moment its state was read (not an atomic snapshot).
  template <class F>
  std::size_t scan(Key from, std::size_t max_count, F&& visit) {
    if (from == min_reserved_key) from = min_user_key;
    auto guard = domain_.pin();
    std::size_t count = 0;
    for (const Node* n = seek(from); n != tail_ && count < max_count;
         n = ptr(n->link(0).load(std::memory_order_acquire))) {
      if (in_set(n)) {
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
      if (in_set(n)) f(n->key, n->value);
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
  // What find returns. Levels >= 1: preds[l] -> succs[l] (succs[l] the first unmarked node with
  // key >= the key, preds[l] a node seen not deleted). Level 0, as the list's find: curr0 is the
  // first node not "deleted" with key >= the key, *prev0 the link to it, prev_word0 its value.
  struct Search {
    Node* preds[max_height];
    Node* succs[max_height];
    std::atomic<std::uintptr_t>* prev0;
    std::uintptr_t prev_word0;
    Node* curr0;
    detail::SoftState state0;
  };

  static Node* ptr(std::uintptr_t word) { return detail::node_of<Node>(word); }

  static bool is_deleted(const Node* n) {
    return detail::state_of(n->link(0).load(std::memory_order_acquire)) == detail::deleted;
  }

  static bool in_set(const Node* n) {
    const detail::SoftState s = detail::state_of(n->link(0).load(std::memory_order_acquire));
    return s == detail::inserted || s == detail::intend_to_delete;
  }

  void find(Key key, Search& s) {
  restart:
    Node* pred = head_;
    for (unsigned lvl = max_height - 1; lvl >= 1; --lvl) {
      Node* curr = ptr(pred->link(lvl).load(std::memory_order_acquire));
      for (;;) {
        std::uintptr_t succ = curr->link(lvl).load(std::memory_order_acquire);
        if ((succ & detail::skip_mark) == 0 && is_deleted(curr)) {
          mark_tower(curr);  // help a deleted node leave the index
          succ = curr->link(lvl).load(std::memory_order_acquire);
        }
        if ((succ & detail::skip_mark) != 0) {
          std::uintptr_t expected = reinterpret_cast<std::uintptr_t>(curr);
          if (!pred->link(lvl).compare_exchange_strong(expected, succ & ~detail::skip_mark,
                                                       std::memory_order_acq_rel,
                                                       std::memory_order_relaxed))
            goto restart;  // pred changed or is marked itself
          curr = ptr(succ);
          continue;
        }
        if (curr->key < key) {
          pred = curr;
          curr = ptr(succ);
          continue;
        }
        break;
      }
      s.preds[lvl] = pred;
      s.succs[lvl] = curr;
    }
    // Level 0: Listing 9's find from pred, which must not be "deleted" (its link is frozen).
    std::atomic<std::uintptr_t>* prev = &pred->link(0);
    std::uintptr_t prev_word = prev->load(std::memory_order_acquire);
    if (detail::state_of(prev_word) == detail::deleted) goto restart;
    for (;;) {
      Node* curr = ptr(prev_word);
      const std::uintptr_t succ_word = curr->link(0).load(std::memory_order_acquire);
      const detail::SoftState st = detail::state_of(succ_word);
      if (st != detail::deleted) {
        if (curr->key >= key) {
          s.prev0 = prev;
          s.prev_word0 = prev_word;
          s.curr0 = curr;
          s.state0 = st;
          return;
        }
        prev = &curr->link(0);
        prev_word = succ_word;
        continue;
      }
      // trim at level 0, without a flush (§4.4); retirement waits for the whole tower.
      const std::uintptr_t unlinked =
          detail::make_word(ptr(succ_word), detail::state_of(prev_word));
      if (prev->compare_exchange_strong(prev_word, unlinked, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        prev_word = unlinked;
      } else if (detail::state_of(prev_word) == detail::deleted) {
        goto restart;
      }
    }
  }

  // contains/get: read-only descent. A predecessor is taken only if seen not "deleted" at level
  // 0 (so it was linked at level 0 then); marked or deleted nodes are walked through.
  const Node* seek(Key key) const {
    const Node* pred = head_;
    for (unsigned lvl = max_height - 1; lvl >= 1; --lvl) {
      const Node* curr = ptr(pred->link(lvl).load(std::memory_order_acquire));
      while (curr->key < key) {
        if (!is_deleted(curr)) pred = curr;
        curr = ptr(curr->link(lvl).load(std::memory_order_acquire));
      }
    }
    const Node* curr = ptr(pred->link(0).load(std::memory_order_acquire));
    while (curr->key < key) curr = ptr(curr->link(0).load(std::memory_order_acquire));
    return curr;
  }

  // Links n at levels 1.. bottom-up. Stops when n is deleted or marked; a link made just as the
  // remover marks is undone by whoever drops n's pending count to zero.
  void build_tower(Node* n, Search& s) {
    for (unsigned lvl = 1; lvl < n->height; ++lvl) {
      for (;;) {
        std::uintptr_t own = n->link(lvl).load(std::memory_order_acquire);
        if ((own & detail::skip_mark) != 0 || is_deleted(n)) return;
        const auto succ = reinterpret_cast<std::uintptr_t>(s.succs[lvl]);
        if (own != succ && !n->link(lvl).compare_exchange_strong(
                               own, succ, std::memory_order_acq_rel, std::memory_order_acquire))
          continue;  // marked meanwhile: checked at the top
        std::uintptr_t expected = succ;
        if (s.preds[lvl]->link(lvl).compare_exchange_strong(
                expected, reinterpret_cast<std::uintptr_t>(n), std::memory_order_acq_rel,
                std::memory_order_relaxed))
          break;
        find(n->key, s);
        if (s.curr0 != n) return;  // n left level 0: it was deleted
      }
    }
  }

  // Marks n at every level >= 1 (n is "deleted"). Idempotent; any thread may do it.
  static void mark_tower(Node* n) {
    for (unsigned lvl = n->height; lvl-- > 1;) {
      std::uintptr_t w = n->link(lvl).load(std::memory_order_acquire);
      while ((w & detail::skip_mark) == 0 &&
             !n->link(lvl).compare_exchange_weak(
                 w, w | detail::skip_mark, std::memory_order_acq_rel, std::memory_order_acquire)) {
      }
    }
  }

  // Drops one party's share of n; the last one unlinks n everywhere and retires it.
  void release(Node* n) {
    if (n->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    unlink_everywhere(n);
    pm::ChunkAllocator* allocator = &allocator_;
    domain_.retire(n, [allocator](Node* dead) noexcept {
      allocator->free(detail::pnode_of(dead->pnode));
      Node::free(dead);
    });
  }

  // Returns once n (deleted, and marked at levels >= 1) is linked at no level. One descent from
  // the top, as find's: at each level it walks from the last node with a key below n's, unlinks
  // every removable node it meets and passes nodes with n's key (a newer node with that key may
  // sit before n at an upper level) until it meets n or a greater key, then goes down a level.
  //
  // Why a descent and not a walk of each level from the head: that walk is O(n) at level 0 (and
  // O(n / 2^l) at level l) for every remove; at 2^16 keys it made the remove ~30000 steps and the
  // structure 40x slower than skiplist/linkfree (perf: ~75% of the time in remove).
  //
  // Why starting a level at the node we came down from is sound: that node was linked at the
  // level above, and towers are linked bottom-up (build_tower, recover), so it was linked at this
  // level once; nodes leave a level only once marked there (level 0: once "deleted"), so if its
  // link here is unmarked (not "deleted") it is still linked and the walk from it sees the level
  // as a walk from the head would from that point. Otherwise we start again from the head.
  void unlink_everywhere(Node* n) {
  restart:
    Node* below_key = head_;  // last node met with key < n->key, unmarked when we left it
    for (unsigned lvl = max_height; lvl-- > 0;) {
      Node* pred = below_key;
      std::uintptr_t pred_word = pred->link(lvl).load(std::memory_order_acquire);
      if (lvl == 0 ? detail::state_of(pred_word) == detail::deleted
                   : (pred_word & detail::skip_mark) != 0)
        goto restart;  // the start node is leaving this level: its link is no longer the level's
      for (;;) {
        Node* curr = ptr(pred_word);
        if (curr->key > n->key) break;  // passed n's place: n is not linked at this level
        const std::uintptr_t curr_word = curr->link(lvl).load(std::memory_order_acquire);
        const bool removable = lvl == 0 ? detail::state_of(curr_word) == detail::deleted
                                        : (curr_word & detail::skip_mark) != 0;
        if (removable) {
          const std::uintptr_t unlinked =
              lvl == 0 ? detail::make_word(ptr(curr_word), detail::state_of(pred_word))
                       : curr_word & ~detail::skip_mark;
          if (!pred->link(lvl).compare_exchange_strong(
                  pred_word, unlinked, std::memory_order_acq_rel, std::memory_order_acquire))
            goto restart;
          if (curr == n) break;
          pred_word = unlinked;
          continue;
        }
        pred = curr;
        pred_word = curr_word;
        if (curr->key < n->key) below_key = curr;
      }
    }
  }

  void complete_insert(Node* n) {
    detail::pnode_of(n->pnode)->template create<Bug>(n->key, n->value,
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
    const bool validity = p->template prepare<Bug>();
    try {
      // pending: the inserter (tower) and the winning remover (marks).
      return Node::make(key, value, detail::pack_pnode(p, validity), 2,
                        random_height<max_height>());
    } catch (...) {
      allocator_.free(slot);
      throw;
    }
  }

  void discard(Node* n) {
    allocator_.free(detail::pnode_of(n->pnode));
    Node::free(n);
  }

  // The sentinels and, at destruction (quiescent), every node still linked at level 0. Retired
  // nodes are the epoch domain's, destroyed after this. PNodes stay as they are.
  struct Nodes {
    Node* head = Node::make(min_reserved_key, 0, 0, 1, max_height);
    Node* tail = make_tail(head);
    Nodes() {
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
        Node::free(n);
        n = next;
      }
      Node::free(head);
      Node::free(tail);
    }
    static Node* make_tail(Node* head) {
      try {
        return Node::make(max_reserved_key, 0, 0, 1, max_height);
      } catch (...) {
        Node::free(head);
        throw;
      }
    }
  };

  // §4.6 for the skip list: the live PNodes in key order, each in a fresh node ("inserted") with
  // a fresh random tower, linked at every level by one pass; no flush.
  void recover() {
    const detail::Stopwatch clock;
    const detail::RecoveredPNodes live =
        detail::recover_soft_pnodes<Bug>(allocator_, recovery_, 1, [](Key) { return 0; });
    Node* last[max_height];
    for (unsigned lvl = 0; lvl < max_height; ++lvl) last[lvl] = head_;
    for (const detail::LivePNode& lp : live.nodes) {
      // pending: only a remover's share (no inserter builds this tower).
      Node* n = Node::make(lp.key, lp.value, lp.pnode, 1, random_height<max_height>());
      for (unsigned lvl = 0; lvl < n->height; ++lvl) {
        last[lvl]->link(lvl).store(reinterpret_cast<std::uintptr_t>(n), std::memory_order_relaxed);
        last[lvl] = n;
      }
    }
    for (unsigned lvl = 0; lvl < max_height; ++lvl)
      last[lvl]->link(lvl).store(reinterpret_cast<std::uintptr_t>(tail_),
                                 std::memory_order_relaxed);
    recovery_.seconds = clock.seconds();
  }

  pm::Pool& pool_;
  pm::ChunkAllocator& allocator_;
  reclaim::EpochDomain domain_;  // destroyed after nodes_: retired nodes are freed last
  Nodes nodes_;
  Node* const head_ = nodes_.head;
  Node* const tail_ = nodes_.tail;
  RecoveryStats recovery_;
};

}  // namespace pmds::linkfree_soft

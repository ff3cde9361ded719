// pmds::linkfree_soft — SOFT, "Sets with an Optimal Flushing Technique" (Zuriel et al. §2.3, §4): a
// durable lock-free sorted list, and the bucket list of the SOFT hash set.
//
//   SoftList<>           "list/soft": ListSet<SoftBucketList<>>, one list in a pool
//                        (linkfree_soft/list_set.hpp)
//   SoftBucketList<>     the bucket-list interface of linkfree_soft/hash_set.hpp, so that
//   SoftHashSet<>        = HashSet<SoftBucketList<>> is "hash/soft"
// (their template parameter: the crash lab's planted bugs, faults.hpp; NoFaults when shipped)
//
// Each key has two representations: a persistent node (detail::SoftPNode: validStart, validEnd,
// deleted, key, value) in a durable area, i.e. a 32-byte slot of the pool's chunk allocator, and
// a volatile node in DRAM (key, value, its PNode, pValidity, next) linked into the list. No link
// is ever persisted. The volatile node's state — intention to insert, inserted, intention to
// delete, deleted — is in the low bits of its next word. Both updates first persist the PNode
// (create / destroy: stores to one line, one flush, one fence) and only then take effect in the
// volatile list, so the state a thread reads is already durable: contains and get never flush
// or fence, insert and remove fence at most once (the lower bound of Cohen et al. 2018), and
// trim unlinks without flushing (§4.4: a node is "deleted" only after its PNode is durably
// deleted). Threads help both intentions to completion (§4.4, §4.5).
//
// Memory (§5): PNode slots come from the calling thread's chunks of the pool allocator (the
// durable areas); volatile nodes from the set's DRAM slab (pmds::NodeSlab), as ssmem's in §5. A
// node unlinked by trim is retired to the set's epoch domain, whose deleter returns the PNode slot
// to the allocator and frees the volatile node once no thread can still hold it. Recovery scans
// every durable area, links each valid and undeleted PNode back in key order, frees every other
// slot, and issues no flush.
//
// Refinements of the paper's pseudocode, each argued where it is made:
//   - pValidity = !deleted rather than !validStart (detail/soft_pnode.hpp: a crash can leave a
//     half-created slot that recovery frees, and the paper's rule mis-creates from it);
//   - find continues from the predecessor's current successor after a failed trim CAS, and
//     restarts from the head only when the predecessor itself is deleted (the paper goes on
//     with an expected value that may never have been in the link, which only makes the
//     caller's CAS fail and retry; both are correct);
//   - remove skips destroy when it finds the node already "deleted": that state is set only
//     after the PNode is durably deleted, so the destroy would only repeat a durable store;
//   - an insert that retries reuses the PNode and volatile node it allocated (never published,
//     so never seen by anyone), and frees them if it ends up not inserting.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <string>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/linkfree_soft/detail/soft_pnode.hpp"
#include "pmds/linkfree_soft/hash_set.hpp"
#include "pmds/linkfree_soft/list_set.hpp"
#include "pmds/node_slab.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::linkfree_soft {

namespace detail {

// The volatile node (Listing 8), 32 bytes: key, value and pnode are written before the node is
// published and never change; next holds the successor and this node's state. key and next come
// first because a traversal (find, seek, contains) reads only those two. The set's NodeSlab
// gives each node a 32-byte block of its own (node_slab.hpp: two to a line, never across one),
// whose alignment leaves next's two low bits for the state.
struct SoftListNode {
  Key key;
  std::atomic<std::uintptr_t> next;
  Value value;
  std::uintptr_t pnode;  // pack_pnode(PNode*, pValidity)
};
static_assert(sizeof(SoftListNode) == 32);

// The tail sentinel every SOFT list ends with (key 2^64-1, above every user key). Shared by all
// lists: nothing ever writes it (no key is greater, so it is never a predecessor, and it is
// never deleted), so it is constant-initialised and read-only.
inline SoftListNode soft_list_tail{max_reserved_key, {0}, 0, 0};

}  // namespace detail

template <FaultPolicy Faults = NoFaults>
class SoftBucketList {
 public:
  using Node = detail::SoftListNode;

  static constexpr std::uint64_t hash_tag = detail::make_tag("HASHSOF2");
  static constexpr const char* hash_name = "hash/soft";
  static constexpr std::uint64_t list_tag = detail::make_tag("LISTSOF2");
  static constexpr const char* list_name = "list/soft";

  // What every list of one set shares: the pool allocator (durable areas) and the epoch domain.
  class Shared {
   public:
    explicit Shared(pm::Pool& pool) : allocator_(pool.allocator()) {}
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;

    pm::ChunkAllocator& allocator() { return allocator_; }
    NodeSlab<Node>& nodes() { return nodes_; }
    reclaim::EpochDomain& domain() { return domain_; }

   private:
    pm::ChunkAllocator& allocator_;
    NodeSlab<Node> nodes_;  // outlives domain_, whose pending deleters free into it
    reclaim::EpochDomain domain_;
  };

  // One list: its head link (the head sentinel's next word, with the head's state "inserted").
  class Bucket {
   public:
    Bucket() : head_(detail::make_word(&detail::soft_list_tail, detail::inserted)) {}
    Bucket(const Bucket&) = delete;
    Bucket& operator=(const Bucket&) = delete;
    // The volatile nodes belong to Shared's slab, which frees them all at once; the PNodes stay
    // as they are: live ones hold the set's contents for the next open.

   private:
    friend class SoftBucketList;
    std::atomic<std::uintptr_t> head_;
  };

  // Listing 11. Returns false (and helps a pending insert of the key finish) if the key is there.
  // Throws PoolFull when no slot is left for a PNode; the set is then unchanged.
  static bool insert(Shared& sh, Bucket& b, Key key, Value value) {
    auto guard = sh.domain().pin();
    Node* fresh = nullptr;  // allocated at the first attempt that needs it, reused by retries
    for (;;) {
      const Window w = find(sh, b, key);
      if (w.curr->key == key) {
        if (fresh != nullptr) discard(sh, fresh);
        // "inserted" or "intention to delete": its PNode is durable already, fail at once.
        // "intention to insert": not yet in the set; complete it before failing (§2.3).
        if (w.curr_state == detail::intend_to_insert) complete_insert(w.curr);
        return false;
      }
      if (fresh == nullptr) fresh = make_node(sh, key, value);
      fresh->next.store(detail::make_word(w.curr, detail::intend_to_insert),
                        std::memory_order_relaxed);
      std::uintptr_t expected = w.prev_word;
      // Keeps the predecessor's state: the CAS fails if that state changed (e.g. it is deleted).
      if (w.prev->compare_exchange_strong(expected,
                                          detail::make_word(fresh, detail::state_of(w.prev_word)),
                                          std::memory_order_acq_rel, std::memory_order_relaxed)) {
        complete_insert(fresh);
        return true;
      }
    }
  }

  // Listing 12. Exactly one of the removers competing for a node returns true; the others help
  // its removal become durable before they return false.
  static bool remove(Shared& sh, Bucket& b, Key key) {
    auto guard = sh.domain().pin();
    const Window w = find(sh, b, key);
    // Absent, or "intention to insert": not in the set (its PNode may not be durable), fail.
    if (w.curr->key != key || w.curr_state == detail::intend_to_insert) return false;
    Node* n = w.curr;
    bool won = false;
    std::uintptr_t word = n->next.load(std::memory_order_acquire);
    while (detail::state_of(word) == detail::inserted) {
      const std::uintptr_t intent =
          detail::make_word(detail::node_of<Node>(word), detail::intend_to_delete);
      if (n->next.compare_exchange_weak(word, intent, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        won = true;
        word = intent;
        break;
      }
    }
    // "deleted" already: the destroy that preceded that state is durable; nothing to help.
    if (detail::state_of(word) == detail::intend_to_delete) complete_remove(n, word);
    if (won) {
      // Only the winner trims, once (Listing 12 line 20); finds unlink it otherwise.
      std::uintptr_t expected = w.prev_word;
      const std::uintptr_t succ = n->next.load(std::memory_order_acquire);
      if (w.prev->compare_exchange_strong(
              expected,
              detail::make_word(detail::node_of<Node>(succ), detail::state_of(w.prev_word)),
              std::memory_order_acq_rel, std::memory_order_relaxed)) {
        retire(sh, n);
      }
    }
    return won;
  }

  // Listing 10: wait-free, no flush, no fence. "inserted" and "intention to delete" are in the
  // set, the other two states are not.
  static bool contains(Shared& sh, Bucket& b, Key key) {
    auto guard = sh.domain().pin();
    const Node* n = seek(b, key);
    return n->key == key && in_set(n);
  }

  static std::optional<Value> get(Shared& sh, Bucket& b, Key key) {
    auto guard = sh.domain().pin();
    const Node* n = seek(b, key);
    if (n->key == key && in_set(n)) return n->value;
    return std::nullopt;
  }

  // §4.6. Quiescent, single-threaded, on fresh Shared and empty buckets: links every live PNode
  // into buckets[index_of(key)] in key order ("inserted"), frees every other slot, no flush.
  template <class IndexOf>
  static RecoveryStats recover(Shared& sh, std::span<Bucket> buckets, IndexOf index_of) {
    const detail::Stopwatch clock;
    RecoveryStats stats;
    const detail::RecoveredPNodes live =
        detail::recover_soft_pnodes<Faults>(sh.allocator(), stats, buckets.size(), index_of);
    // Each bucket gets its group, linked back to front so that it ends up ascending.
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      Bucket& bucket = buckets[b];
      for (std::size_t i = live.begin[b + 1]; i-- > live.begin[b];) {
        const detail::LivePNode& lp = live.nodes[i];
        Node* n = sh.nodes().make(lp.key, bucket.head_.load(std::memory_order_relaxed), lp.value,
                                  lp.pnode);
        bucket.head_.store(detail::make_word(n, detail::inserted), std::memory_order_relaxed);
      }
    }
    stats.seconds = clock.seconds();
    return stats;
  }

  // Quiescent: runs every pending reclamation now.
  static void drain(Shared& sh) { sh.domain().drain(); }

  // Quiescent: f(key, value) for every key in the set, in key order.
  template <class F>
  static void for_each(Shared&, const Bucket& b, F&& f) {
    const Node* n = detail::node_of<Node>(b.head_.load(std::memory_order_acquire));
    for (; n != &detail::soft_list_tail;
         n = detail::node_of<Node>(n->next.load(std::memory_order_acquire)))
      if (in_set(n)) f(n->key, n->value);
  }

 private:
  // What find returns: curr is the first node not "deleted" with key >= the key searched;
  // *prev is the link that pointed to it, and prev_word its value then (curr, plus the state of
  // the node owning prev, which is never "deleted").
  struct Window {
    std::atomic<std::uintptr_t>* prev;
    std::uintptr_t prev_word;
    Node* curr;
    detail::SoftState curr_state;
  };

  // Listing 9's find, unlinking "deleted" nodes on the way without any flush (§4.4).
  static Window find(Shared& sh, Bucket& b, Key key) {
  restart:
    std::atomic<std::uintptr_t>* prev = &b.head_;
    std::uintptr_t prev_word = prev->load(std::memory_order_acquire);
    for (;;) {
      Node* curr = detail::node_of<Node>(prev_word);
      const std::uintptr_t succ_word = curr->next.load(std::memory_order_acquire);
      const detail::SoftState s = detail::state_of(succ_word);
      if (s != detail::deleted) {
        if (curr->key >= key) return {prev, prev_word, curr, s};
        prev = &curr->next;
        prev_word = succ_word;
        continue;
      }
      // trim (Listing 9): the successor replaces curr, the predecessor's state is kept.
      const std::uintptr_t unlinked =
          detail::make_word(detail::node_of<Node>(succ_word), detail::state_of(prev_word));
      if (prev->compare_exchange_strong(prev_word, unlinked, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        retire(sh, curr);
        prev_word = unlinked;
      } else if (detail::state_of(prev_word) == detail::deleted) {
        goto restart;  // the predecessor itself is deleted: its link is frozen
      }
      // else: prev_word now holds the predecessor's current successor; go on from there.
    }
  }

  // The wait-free traversal of contains (Listing 10): follows links regardless of states.
  static const Node* seek(Bucket& b, Key key) {
    const Node* n = detail::node_of<Node>(b.head_.load(std::memory_order_acquire));
    while (n->key < key) n = detail::node_of<Node>(n->next.load(std::memory_order_acquire));
    return n;
  }

  static bool in_set(const Node* n) {
    const detail::SoftState s = detail::state_of(n->next.load(std::memory_order_acquire));
    return s == detail::inserted || s == detail::intend_to_delete;
  }

  // Listing 11 lines 30-33, run by the inserter and by helpers: persist the PNode (one fence),
  // then "intention to insert" -> "inserted".
  static void complete_insert(Node* n) {
    detail::pnode_of(n->pnode)->template create<Faults>(n->key, n->value,
                                                        detail::validity_of(n->pnode));
    std::uintptr_t word = n->next.load(std::memory_order_acquire);
    while (detail::state_of(word) == detail::intend_to_insert) {
      if (n->next.compare_exchange_weak(
              word, detail::make_word(detail::node_of<Node>(word), detail::inserted),
              std::memory_order_acq_rel, std::memory_order_acquire))
        break;
    }
  }

  // Listing 12 lines 15-17, run by the winner and by helpers: persist the deletion (one fence),
  // then "intention to delete" -> "deleted".
  static void complete_remove(Node* n, std::uintptr_t word) {
    detail::pnode_of(n->pnode)->destroy(detail::validity_of(n->pnode));
    while (detail::state_of(word) == detail::intend_to_delete) {
      if (n->next.compare_exchange_weak(
              word, detail::make_word(detail::node_of<Node>(word), detail::deleted),
              std::memory_order_acq_rel, std::memory_order_acquire))
        break;
    }
  }

  // A PNode slot from this thread's durable area, prepared (pValidity chosen), and its volatile
  // node in "intention to insert" (set by the caller before publishing it).
  static Node* make_node(Shared& sh, Key key, Value value) {
    void* slot = sh.allocator().allocate(detail::soft_slot_size);  // PoolFull: nothing changed
    auto* p = static_cast<detail::SoftPNode*>(slot);
    const bool validity = p->template prepare<Faults>();
    try {
      return sh.nodes().make(key, std::uintptr_t{0}, value, detail::pack_pnode(p, validity));
    } catch (...) {
      sh.allocator().free(slot);
      throw;
    }
  }

  // A node that was never published: nobody else can hold it, free it at once.
  static void discard(Shared& sh, Node* n) {
    sh.allocator().free(detail::pnode_of(n->pnode));
    sh.nodes().free(n);
  }

  // A node unlinked by the one successful trim: its PNode is durably deleted; the slot goes back
  // to the allocator once no thread pinned now can still read the node or help on its PNode.
  static void retire(Shared& sh, Node* n) {
    sh.domain().retire(n, [&sh](Node* dead) noexcept {
      sh.allocator().free(detail::pnode_of(dead->pnode));
      sh.nodes().free(dead);
    });
  }
};

// "list/soft": one SOFT list in a pool, linkfree_soft/list_set.hpp.
template <FaultPolicy Faults = NoFaults>
using SoftList = ListSet<SoftBucketList<Faults>>;

// "hash/soft": Zuriel et al. §3's table of buckets with a SOFT list per bucket
// (linkfree_soft/hash_set.hpp).
template <FaultPolicy Faults = NoFaults>
using SoftHashSet = HashSet<SoftBucketList<Faults>>;

}  // namespace pmds::linkfree_soft

// pmds::linkfree_soft::detail::SoftSkipIndex — the volatile skip-list index over a SOFT list
// (Zuriel et al. §4; §3 says the extension to skip lists is straightforward, this is how it is done
// here), written once for every SOFT skip list: the 8-byte one (soft_skiplist.hpp) and the
// byte-string one (soft_string_skiplist.hpp). What a key is, what a node holds beside its links
// and what a persistent node is are the structure's; the index only orders and links nodes.
//
// Level 0 is the SOFT list: a node's level-0 next word carries its SoftState in the low bits,
// and membership is decided there alone ("inserted" or "intention to delete"). Levels 1.. are an
// index over level 0, as in Fraser's / Herlihy and Shavit's lock-free skip lists: a node's upper
// next words carry a mark (bit 0), set only after the node is "deleted" at level 0, and a marked
// node is unlinked from a level by a CAS on its predecessor's unmarked link. So:
//   - the inserter links the tower after the node is "inserted" (its persistent node is durable
//     first, as in the list), bottom-up, and stops as soon as the node is deleted or marked;
//   - the remove that wins marks the tower after "deleted"; any thread that meets a deleted node
//     with an unmarked tower marks it too (helping: idempotent);
//   - a search only takes as predecessor a node it saw not "deleted" at level 0, i.e. one linked
//     at level 0 at that moment, so its level-0 walk is the list's (Harris's argument applies).
// Reclamation: a node may be freed only when it is linked at no level. Level-0 trims unlink but
// do not retire. Each node carries `pending` = the parties that may still link or must mark it:
// the inserter (until its tower is built or abandoned) and the winning remover (until the tower
// is marked); recovered nodes start with the remover's share only. Whoever drops it to zero
// (release) no longer races with any linking, unlinks the node from every level and retires it.
//
// What a Node provides: `link(level)` (std::atomic<std::uintptr_t>&), `height` and
// `std::atomic<std::uint32_t> pending`. Order::compare(node, probe) is the sign of the node's key
// minus the probe's; the head is never compared, and the tail only when Order::tail_has_a_key
// (its key, a reserved one, is after every probe): otherwise the index puts it after every key
// by its address, one more comparison per step (skiplist/soft ran 5% slower with it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pmds/linkfree_soft/detail/soft_pnode.hpp"

namespace pmds::linkfree_soft::detail {

// The mark of a node's upper-level next words (levels >= 1).
inline constexpr std::uintptr_t skip_mark = 1;

// Both SOFT skip lists' towers: height h >= 1 with P(h) = 2^-h, at most 24 levels (2^24 = 16M
// keys, 4x Zuriel et al.'s largest hash range).
inline constexpr unsigned soft_skip_max_height = 24;

template <class Node, class Order, unsigned MaxHeight>
class SoftSkipIndex {
 public:
  static constexpr unsigned max_height = MaxHeight;

  // What find returns. Levels >= 1: preds[l] -> succs[l] (succs[l] the first unmarked node with
  // key >= the probe, preds[l] a node seen not deleted). Level 0, as the list's find: curr0 is
  // the first node not "deleted" with key >= the probe, *prev0 the link to it, prev_word0 its
  // value, state0 curr0's state, equal whether curr0 holds the probe's key.
  struct Search {
    Node* preds[MaxHeight];
    Node* succs[MaxHeight];
    std::atomic<std::uintptr_t>* prev0;
    std::uintptr_t prev_word0;
    Node* curr0;
    SoftState state0;
    bool equal;
  };

  // head and tail are the structure's sentinels, linked to each other at every level.
  SoftSkipIndex(Node* head, Node* tail) : head_(head), tail_(tail) {}

  Node* head() const { return head_; }
  Node* tail() const { return tail_; }

  static Node* ptr(std::uintptr_t word) { return node_of<Node>(word); }

  static bool is_deleted(const Node* n) {
    return state_of(n->link(0).load(std::memory_order_acquire)) == deleted;
  }
  static bool in_set(const Node* n) {
    const SoftState s = state_of(n->link(0).load(std::memory_order_acquire));
    return s == inserted || s == intend_to_delete;
  }

  template <class Probe>
  void find(const Probe& q, Search& s) {
  restart:
    Node* pred = head_;
    for (unsigned lvl = MaxHeight - 1; lvl >= 1; --lvl) {
      Node* curr = ptr(pred->link(lvl).load(std::memory_order_acquire));
      for (;;) {
        std::uintptr_t succ = curr->link(lvl).load(std::memory_order_acquire);
        if ((succ & skip_mark) == 0 && is_deleted(curr)) {
          mark_tower(curr);  // help a deleted node leave the index
          succ = curr->link(lvl).load(std::memory_order_acquire);
        }
        if ((succ & skip_mark) != 0) {
          std::uintptr_t expected = reinterpret_cast<std::uintptr_t>(curr);
          if (!pred->link(lvl).compare_exchange_strong(expected, succ & ~skip_mark,
                                                       std::memory_order_acq_rel,
                                                       std::memory_order_relaxed))
            goto restart;  // pred changed or is marked itself
          curr = ptr(succ);
          continue;
        }
        if (order(curr, q) < 0) {
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
    if (state_of(prev_word) == deleted) goto restart;
    for (;;) {
      Node* curr = ptr(prev_word);
      const std::uintptr_t succ_word = curr->link(0).load(std::memory_order_acquire);
      const SoftState st = state_of(succ_word);
      if (st != deleted) {
        const int c = order(curr, q);
        if (c >= 0) {
          s.prev0 = prev;
          s.prev_word0 = prev_word;
          s.curr0 = curr;
          s.state0 = st;
          s.equal = c == 0;
          return;
        }
        prev = &curr->link(0);
        prev_word = succ_word;
        continue;
      }
      // trim at level 0, without a flush (§4.4); retirement waits for the whole tower.
      const std::uintptr_t unlinked = make_word(ptr(succ_word), state_of(prev_word));
      if (prev->compare_exchange_strong(prev_word, unlinked, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        prev_word = unlinked;
      } else if (state_of(prev_word) == deleted) {
        goto restart;
      }
    }
  }

  // The read-only descent of contains, get and scan: the first node with key >= the probe, in
  // any state (the tail if none). A predecessor is taken only if seen not "deleted" at level 0
  // (so it was linked at level 0 then); marked or deleted nodes are walked through.
  template <class Probe>
  const Node* seek(const Probe& q) const {
    const Node* pred = head_;
    for (unsigned lvl = MaxHeight - 1; lvl >= 1; --lvl) {
      const Node* curr = ptr(pred->link(lvl).load(std::memory_order_acquire));
      while (order(curr, q) < 0) {
        if (!is_deleted(curr)) pred = curr;
        curr = ptr(curr->link(lvl).load(std::memory_order_acquire));
      }
    }
    const Node* curr = ptr(pred->link(0).load(std::memory_order_acquire));
    while (order(curr, q) < 0) curr = ptr(curr->link(0).load(std::memory_order_acquire));
    return curr;
  }

  // Links n (q is its key) at levels 1.. bottom-up, s being the search that linked it at level
  // 0. Stops when n is deleted or marked; a link made just as the remover marks is undone by
  // whoever drops n's pending count to zero.
  template <class Probe>
  void build_tower(Node* n, const Probe& q, Search& s) {
    for (unsigned lvl = 1; lvl < n->height; ++lvl) {
      for (;;) {
        std::uintptr_t own = n->link(lvl).load(std::memory_order_acquire);
        if ((own & skip_mark) != 0 || is_deleted(n)) return;
        const auto succ = reinterpret_cast<std::uintptr_t>(s.succs[lvl]);
        if (own != succ && !n->link(lvl).compare_exchange_strong(
                               own, succ, std::memory_order_acq_rel, std::memory_order_acquire))
          continue;  // marked meanwhile: checked at the top
        std::uintptr_t expected = succ;
        if (s.preds[lvl]->link(lvl).compare_exchange_strong(
                expected, reinterpret_cast<std::uintptr_t>(n), std::memory_order_acq_rel,
                std::memory_order_relaxed))
          break;
        find(q, s);
        if (s.curr0 != n) return;  // n left level 0: it was deleted
      }
    }
  }

  // Marks n at every level >= 1 (n is "deleted"). Idempotent; any thread may do it.
  static void mark_tower(Node* n) {
    for (unsigned lvl = n->height; lvl-- > 1;) {
      std::uintptr_t w = n->link(lvl).load(std::memory_order_acquire);
      while ((w & skip_mark) == 0 &&
             !n->link(lvl).compare_exchange_weak(w, w | skip_mark, std::memory_order_acq_rel,
                                                 std::memory_order_acquire)) {
      }
    }
  }

  // Drops one party's share of n (q is its key); the last one unlinks n everywhere and hands it
  // to retire (which gives it to the epoch domain).
  template <class Probe, class Retire>
  void release(Node* n, const Probe& q, Retire&& retire) {
    if (n->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    unlink_everywhere(n, q);
    retire(n);
  }

  // Recovery (quiescent): links count nodes, node_at(i) in ascending key order, at every level
  // of their towers, then closes every level with the tail. No flush: the index is volatile.
  // Should node_at throw, level 0 ends in the last node linked (its link still null).
  template <class F>
  void link_sorted(std::size_t count, F&& node_at) {
    Node* last[MaxHeight];
    for (unsigned lvl = 0; lvl < MaxHeight; ++lvl) last[lvl] = head_;
    for (std::size_t i = 0; i < count; ++i) {
      Node* n = node_at(i);
      for (unsigned lvl = 0; lvl < n->height; ++lvl) {
        last[lvl]->link(lvl).store(reinterpret_cast<std::uintptr_t>(n), std::memory_order_relaxed);
        last[lvl] = n;
      }
    }
    for (unsigned lvl = 0; lvl < MaxHeight; ++lvl)
      last[lvl]->link(lvl).store(reinterpret_cast<std::uintptr_t>(tail_),
                                 std::memory_order_relaxed);
  }

 private:
  template <class Probe>
  int order(const Node* n, const Probe& q) const {
    if constexpr (Order::tail_has_a_key)
      return Order::compare(n, q);
    else
      return n == tail_ ? 1 : Order::compare(n, q);
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
  // level above, and towers are linked bottom-up (build_tower, link_sorted), so it was linked at
  // this level once; nodes leave a level only once marked there (level 0: once "deleted"), so if
  // its link here is unmarked (not "deleted") it is still linked and the walk from it sees the
  // level as a walk from the head would from that point. Otherwise we start again from the head.
  template <class Probe>
  void unlink_everywhere(Node* n, const Probe& q) {
  restart:
    Node* below_key = head_;  // last node met with key < n's, unmarked when we left it
    for (unsigned lvl = MaxHeight; lvl-- > 0;) {
      Node* pred = below_key;
      std::uintptr_t pred_word = pred->link(lvl).load(std::memory_order_acquire);
      if (lvl == 0 ? state_of(pred_word) == deleted : (pred_word & skip_mark) != 0)
        goto restart;  // the start node is leaving this level: its link is no longer the level's
      for (;;) {
        Node* curr = ptr(pred_word);
        const int c = curr == n ? 0 : order(curr, q);
        if (c > 0) break;  // passed n's place: n is not linked at this level
        const std::uintptr_t curr_word = curr->link(lvl).load(std::memory_order_acquire);
        const bool removable =
            lvl == 0 ? state_of(curr_word) == deleted : (curr_word & skip_mark) != 0;
        if (removable) {
          const std::uintptr_t unlinked =
              lvl == 0 ? make_word(ptr(curr_word), state_of(pred_word)) : curr_word & ~skip_mark;
          if (!pred->link(lvl).compare_exchange_strong(
                  pred_word, unlinked, std::memory_order_acq_rel, std::memory_order_acquire))
            goto restart;
          if (curr == n) break;
          pred_word = unlinked;
          continue;
        }
        pred = curr;
        pred_word = curr_word;
        if (c < 0) below_key = curr;
      }
    }
  }

  Node* const head_;
  Node* const tail_;
};

}  // namespace pmds::linkfree_soft::detail

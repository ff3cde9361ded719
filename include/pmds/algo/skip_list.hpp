// pmds — a lock-free skip list (Herlihy & Shavit, "The Art of Multiprocessor Programming"
// §14.4, after Fraser), written once over a memory policy (algo/policy.hpp): a set and an
// ordered map with put and scan.
//
// Each level is a Harris list with its own mark bit in the node's link for that level. A key
// is present when its node is linked at level 0 and that link is unmarked; remove() marks the
// node's links top-down and level 0 last (the winner of the level-0 mark is the remover, its
// linearization point); find() unlinks every marked node it passes, at every level.
//
// put() of a present key replaces its node: the old node's upper links are marked as a remove
// marks them, then one CAS on its level-0 link, from its successor s to (new node | mark), the
// new node's level-0 link being s, takes the old node out and puts the new one in at once (its
// linearization point); the new node's upper levels are then linked as an insert links them. A
// remove that meets a marked level-0 link tells the two marks apart by where the link points
// (a put's at a node of the same key) and looks again after a put's. A replaced node is
// recovered as a removed one: its marked level-0 link leads to its replacement.
//
// Reclamation. A node may still be linked at an upper level after it left level 0 (an inserter
// that is still linking upper levels races with its remover), so it can be retired only once
// nobody can link it again and a find() has run since: each node carries `owners` = 2, the
// inserter and the remover. The inserter releases after it stops linking (running one more
// find() if the node got marked meanwhile); the remover releases after its own find(). The
// release that brings `owners` to 0 retires the node: by then a find() has run after the
// node's last link and after its last mark, and such a find() unlinks it at every level. That
// holds only if no node of the same key stands in front of it at some level, since a find stops
// at the first node of its key: an inserter never links its node in front of a node of its own
// key (a removed one, not yet unlinked there), but finds again, which unlinks that one first.
// Without that rule a removed node was freed while still linked at an upper level (two threads,
// half inserts and removes on 1,024 keys, hung within 100 s: a cycle through the reused memory).
// (The book's add() also leaves a new node's upper links pointing at stale successors after a
// retry; here the link is updated by CAS before each attempt, which fails once it is marked.)
//
// Durable policies: the anchor {kind, head} is the root. Recovery visits every node linked at
// any level, unlinks the nodes a crashed remover had marked (persisted stores), resets
// `owners` to 1 (only a future remover) where a crashed inserter left it at 2, and retires
// the nodes that were deleted (marked at level 0, or reached only above it) once the allocator
// knows the live slots.
//
// Keys (algo/keys.hpp): 8-byte keys and values in the node (WordKeys, every policy), or, under a
// payload policy, byte strings in the node's payload (montage/key_value_payload.hpp's
// ByteStringKeys): a node is ordered by its key word, then, for equal words, by Keys::tie, which
// reads the payload. The algorithm does not change with them: "the node of key k" is the node
// that compares equal to k's probe.
//
// nbMontage (montage/policy.hpp, montage/skip_list.hpp: the skip list of its paper's §5) keeps
// the list in DRAM and each key's state in a payload its node points to (algo/policy.hpp,
// "Payloads"). The CASes at which an update takes effect are the level-0 ones: an insert's link
// and a put's replacing CAS (Access::link, a put's old payload detached first) and a remove's mark
// (Access::remove, the payload detached first); upper levels and unlinking change no payload. A
// failed lin_cas drops its detach, so the detach is made again before each attempt. Its nodes are
// DRAM only and no recovery reads them, so their height and `owners` are plain 4-byte fields
// (detail::DramField), not policy words: a node takes 32 + 8h bytes, as it would without the
// payload pointer. nbMontage recovers no shape: it rebuilds the list from the sorted payloads
// (adopt_in_order).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmds/algo/anchored_structure.hpp"
#include "pmds/algo/keys.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/pool_format.hpp"
#include "pmds/random_height.hpp"
#include "pmds/range.hpp"

namespace pmds::algo {

namespace detail {
// A 4-byte field of a node only DRAM holds, with the calls the list makes of a policy word.
class DramField {
 public:
  std::uint64_t load() const noexcept { return v_.load(std::memory_order_acquire); }
  std::uint64_t peek() const noexcept { return v_.load(std::memory_order_relaxed); }
  void init(std::uint64_t v) noexcept {
    v_.store(static_cast<std::uint32_t>(v), std::memory_order_relaxed);
  }
  bool compare_exchange(std::uint64_t& expected, std::uint64_t desired) noexcept {
    auto e = static_cast<std::uint32_t>(expected);
    const bool done = v_.compare_exchange_strong(e, static_cast<std::uint32_t>(desired),
                                                 std::memory_order_acq_rel);
    expected = e;
    return done;
  }

 private:
  std::atomic<std::uint32_t> v_{0};
};
}  // namespace detail

template <class P, class Keys = WordKeys>
requires MemoryPolicy<P> && KeysUnder<Keys, P>
class SkipList : public AnchoredStructure<P> {
 public:
  static constexpr const char* name = "skiplist";
  static constexpr std::uint64_t kind = 0x706d64732e736b70;  // "pmds.skp"
  // Levels 0..max_height-1; with p = 1/2, enough for about 2^max_height keys.
  static constexpr int max_height = 20;
  static constexpr std::size_t max_key_size = Keys::max_key_size;
  static constexpr std::size_t max_value_size = Keys::max_value_size;

  using KeyArg = typename Keys::KeyArg;
  using ValueArg = typename Keys::ValueArg;
  using KeyOut = typename Keys::KeyOut;
  using ValueOut = typename Keys::ValueOut;

  SkipList() requires(!P::durable) { create(); }
  SkipList(CreateTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(create_new, pool) {
    create();
  }
  SkipList(OpenTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(open_existing, pool) {
    open_and_recover();
  }

  ~SkipList() {
    if constexpr (!P::durable) {
      for (Node* n = pointer_of<Node>(head_->next(0).peek()); n != nullptr;) {
        Node* next = pointer_of<Node>(n->next(0).peek());
        mem_.deallocate(n);
        n = next;
      }
      mem_.deallocate(head_);
      mem_.deallocate(anchor_);
    }
  }

  // False if the key was present. Throws PoolFull (the set unchanged) when no slot is left.
  bool insert(KeyArg key, ValueArg value) { return upsert(key, value, false); }

  // Insert or replace: true if the key was absent. A replacement swaps the key's node for a new
  // one (see the header). Throws PoolFull as insert.
  bool put(KeyArg key, ValueArg value) { return upsert(key, value, true); }

  // False if the key was absent. Linearizes at the level-0 mark.
  bool remove(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = mem_.pin();
    Window w;
    for (;;) {
      if (!find(key, w)) return false;
      Node* node = w.succs[0];
      mark_upper_levels(node);
      // Mutant killed by test: reader_windows_sim_test
      // SkipListWindows/*.ARemoveThatMeetsAMarkAfterItsSearchMakesItDurable (two preemptions: a
      // mark made after this remove's search is answered with false, no CAS after it).
      std::uintptr_t link = node->next(0).load();
      for (;;) {
        if (is_marked(link)) break;
        if constexpr (HasPayloads<P>) mem_.detach_payload(node->payload);  // PoolFull: key stays
        // Mutant killed by test: reader_windows_sim_test
        // SkipListWindows/*.ARemoveThatMeetsAMarkAfterItsSearchMakesItDurable
        if (node->next(0).compare_exchange(link, link | mark_bit, Access::remove)) {
          find(key, w);  // unlinks it at every level
          release(node);
          return true;
        }
      }
      // Marked by another remover, who won: the key left before us. Or by a put, whose new node
      // (the marked link's target, holding the same key) took the key over: find it again.
      if (!replaced_by_put(key, link)) return false;
    }
  }

  bool contains(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = mem_.pin();
    return search(key) != nullptr;
  }
  std::optional<ValueOut> get(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = mem_.pin();
    const Node* n = search(key);
    if (n == nullptr) return std::nullopt;
    return node_value<Keys>(n);
  }

  // Up to max_count keys >= from in ascending order, visit(key, value) each; returns how many.
  // Each key visited was in the map when its level-0 link was read (not an atomic snapshot).
  template <class F>
  std::size_t scan(KeyArg from, std::size_t max_count, F&& visit) {
    Probe key;
    if constexpr (Keys::byte_strings) {
      key = Keys::probe(from);
    } else {
      if (from == min_reserved_key) from = min_user_key;
      key = {from};
    }
    auto guard = mem_.pin();
    std::size_t count = 0;
    for (Node* n = lower_bound(key); n != nullptr && count < max_count;) {
      const std::uintptr_t link = n->next(0).load();
      if (!is_marked(link)) {
        visit_node<Keys>(n, visit);
        ++count;
      }
      n = pointer_of<Node>(link);
    }
    return count;
  }

  /// The keys in [from, to) in ascending order, for a range-for, while other threads write
  /// (weakly consistent: pmds::Range says what that promises).
  Range<SkipList, KeyOut, ValueOut> range(KeyArg from, KeyArg to) {
    return {*this, KeyOut(from), KeyOut(to)};
  }
  /// The keys from `from` to the end.
  Range<SkipList, KeyOut, ValueOut> range(KeyArg from) { return {*this, KeyOut(from)}; }
  /// Every key.
  Range<SkipList, KeyOut, ValueOut> range() { return range(first_key()); }

  // Quiescent: f(key, value) for every key, in key order.
  template <class F>
  void for_each(F&& f) const {
    for (Node* n = pointer_of<Node>(head_->next(0).peek()); n != nullptr;) {
      const std::uintptr_t link = n->next(0).peek();
      if (!is_marked(link)) visit_node<Keys>(n, f);
      n = pointer_of<Node>(link);
    }
  }
  std::size_t size() const {
    std::size_t n = 0;
    for_each([&](const auto&, const auto&) { ++n; });
    return n;
  }

 protected:
  using AnchoredStructure<P>::mem_;
  using Link = typename P::template shared<std::uintptr_t>;

  // `owners` counts one per owner. As a policy word it would need units that keep the policy's
  // reserved bits clear; only the payload policy reserves any, and its `owners` is DRAM.
  static_assert(HasPayloads<P> || reserved_value_bits<P> == 0);

  using Probe = typename Keys::Probe;
  using Cached = typename Keys::Cached;
  using PayloadField = node_payload_t<P, Keys>;
  // A remove here does not check a handle's detach (algo/keys.hpp): the list keeps pointers.
  static_assert(std::is_same_v<PayloadField, node_payload_pointer_t<P, Keys>>);
  // Policy words where the node may be in a pool; DRAM fields under payloads (the header).
  using Height = std::conditional_t<HasPayloads<P>, detail::DramField,
                                    typename P::template immutable<std::uint64_t>>;
  using Owners = std::conditional_t<HasPayloads<P>, detail::DramField,
                                    typename P::template shared<std::uint64_t>>;

  struct Node {
    typename P::template immutable<Key> key;       // byte strings: the key's order word (Keys)
    typename P::template immutable<Cached> value;  // byte strings: Keys::Cached (not the value)
    Height height;
    Owners owners;                                 // releases left before retire
    [[no_unique_address]] PayloadField payload{};  // over a payload policy
    // followed by `height` links; level i's link is next(i)

    Link& next(int i) { return reinterpret_cast<Link*>(this + 1)[i]; }
    const Link& next(int i) const { return reinterpret_cast<const Link*>(this + 1)[i]; }
    // Rounded to a cache line: few slot sizes for the allocator, and a short node never
    // shares a line with another node. Not over payloads, whose nodes are DRAM only and take
    // malloc's chunks (skiplist/montage, 50,000 of 100,000 keys, pool and DRAM: 156 bytes per
    // element rounded, 137 not, with the 40-byte header it had before its DRAM fields; 127 now).
    static constexpr std::size_t bytes(int height) {
      const std::size_t n = sizeof(Node) + static_cast<std::size_t>(height) * sizeof(Link);
      return HasPayloads<P> ? n : pm::format::round_up(n, 64);
    }
  };
  // The payload field takes no bytes under the other policies: their pool layout is as it was.
  struct NodeWithoutPayload {
    decltype(Node::key) key;
    decltype(Node::value) value;
    decltype(Node::height) height;
    decltype(Node::owners) owners;
  };
  static_assert(HasPayloads<P> || sizeof(Node) == sizeof(NodeWithoutPayload));
  static_assert(!HasPayloads<P> || sizeof(Node) == 32);  // the header's 32 + 8h

  // For a structure that rebuilds the list from its payloads at open (nbMontage §3.4): a node for
  // a payload that survived, of a fresh random height and owned only by a future remover, and
  // adopt_in_order(nodes), which links nodes of ascending keys at every level of their heights.
  // Quiescent, on a list just created.
  Node* make_recovered_node(Key key, Cached cached, PayloadField payload) {
    return make_node(key, cached, payload, static_cast<int>(random_height<max_height>()), 1);
  }
  void adopt_in_order(const std::vector<Node*>& nodes) {
    std::array<Node*, max_height> last;
    last.fill(head_);
    int levels = 1;
    for (Node* n : nodes) {
      const int height = static_cast<int>(n->height.peek());
      for (int level = 0; level < height; ++level) {
        last[level]->next(level).init(word_of(n));
        last[level] = n;
      }
      levels = std::max(levels, height);
    }
    levels_.store(levels);
  }

  // The head: a tower of max_height links, below every key (a test walks every level from it).
  Node* head_ = nullptr;

 private:
  struct Anchor {
    typename P::template immutable<std::uint64_t> kind;
    typename P::template shared<std::uintptr_t> head;
  };

  struct Window {
    std::array<Node*, max_height> preds;
    std::array<Node*, max_height> succs;
  };

  // levels_ (DRAM) is the number of levels any node has used: searches start there rather
  // than at max_height. Monotonic; raised before a node of that height is linked, so a find()
  // always starts at or above every level the node it looks for can be linked at.
  void raise_levels(int height) {
    int seen = levels_.load(std::memory_order_relaxed);
    while (seen < height && !levels_.compare_exchange_weak(seen, height)) {
    }
  }

  // insert (update false) and put. Absent key: a new node linked at level 0 by a CAS on its
  // predecessor's link. Present key (put): the old node's upper levels are marked as a remove
  // marks them, then one CAS on its level-0 link, from its successor s to (new node | mark), the
  // new node's level-0 link being s: the old node is removed and the new one in, at once. Either
  // way the new node's upper levels are then linked.
  bool upsert(KeyArg k, ValueArg value, bool update) {
    const Probe key = Keys::probe(k);
    Keys::check_value(value);
    auto guard = mem_.pin();
    const int height = static_cast<int>(random_height<max_height>());
    raise_levels(height);
    Window w;
    Node* node = nullptr;  // made at the first attempt that needs it, reused by retries
    Node* replaced = nullptr;
    for (;;) {
      const bool present = find(key, w);
      if (present && !update) {
        if (node != nullptr) discard(node);
        return false;
      }
      if (node == nullptr) node = make_node(key, k, value, height);
      Link* target;             // the level-0 word whose CAS puts the node in
      std::uintptr_t expected;  // its value, which becomes the node's level-0 link
      std::uintptr_t desired = word_of(node);
      if (present) {
        Node* old = w.succs[0];
        mark_upper_levels(old);
        target = &old->next(0);
        expected = target->load();
        if (is_marked(expected)) continue;  // removed or replaced meanwhile: find again
        desired |= mark_bit;
      } else {
        target = &w.preds[0]->next(0);
        expected = word_of(w.succs[0]);
      }
      node->next(0).init(expected);
      for (int i = 1; i < height; ++i) node->next(i).init(word_of(w.succs[i]));
      mem_.publish(node, Node::bytes(height));  // contents durable before the link
      if constexpr (HasPayloads<P>) {
        if (present) {
          try {
            mem_.detach_payload(w.succs[0]->payload);  // PoolFull: nothing changed
          } catch (...) {
            discard(node);  // its payload must not stay pending for the thread's next CAS
            throw;
          }
        }
      }
      if (!target->compare_exchange(expected, desired, Access::link)) continue;
      if (!present) break;
      replaced = w.succs[0];
      find(key, w);                         // unlinks the old node at every level
      if (w.succs[0] != node) goto linked;  // removed meanwhile
      break;
    }
    // The key is in (level 0). Link the upper levels, stopping if the node gets marked.
    for (int level = 1; level < height; ++level) {
      for (;;) {
        Node* succ = w.succs[level];
        // A node of this key ahead at this level was removed (ours holds the key at level 0), so
        // it is marked here, but not yet unlinked. Linked in front of it, ours would hide it from
        // the finds that must unlink it before it is freed (they stop at the first node of the
        // key): it would be freed while still linked. Find again, which unlinks it.
        // Test: reader_windows_sim_test
        // SkipListWindows/*.AnInsertNeverLinksInFrontOfARemovedNodeOfItsKey
        if (succ != nullptr && compare(succ, key) == 0) {
          find(key, w);
          if (w.succs[0] != node) goto linked;  // removed meanwhile
          continue;
        }
        // Mutant survives: the node's own link, written by its initialization (durable since
        // Memory::publish) or by this insert's CAS below (persisted), or marked by a remover;
        // a mark seen before its remover's persist only ends this insert's linking early, and a
        // crash that loses it leaves the node a shorter tower, which recovery accepts.
        std::uintptr_t link = node->next(level).load();
        if (is_marked(link)) goto linked;
        if (pointer_of<Node>(link) != succ) {
          // Mutant killed by test: reader_windows_sim_test
          // SkipListWindows/*.AnInsertsReaimedUpperLinkIsDurableBeforeTheOldSlotIsReused
          if (!node->next(level).compare_exchange(link, word_of(succ)))
            continue;  // marked meanwhile: seen at the top of the loop
        }
        std::uintptr_t expected = word_of(succ);
        if (w.preds[level]->next(level).compare_exchange(expected, word_of(node))) break;
        find(key, w);
        if (w.succs[0] != node) goto linked;  // removed meanwhile
      }
    }
  linked:
    // If a remover marked the node, its find() may have run before one of our links above.
    // Mutant survives: the value read only decides whether find() runs again, whose unlinking
    // CASes persist what they change; insert's answer does not depend on it.
    if (is_marked(node->next(0).load())) find(key, w);
    release(node);
    if (replaced != nullptr) release(replaced);  // its remover's release
    return replaced == nullptr;
  }

  // The inserter and the remover own a new node (see the header comment).
  Node* make_node(const Probe& key, KeyArg k, ValueArg value, int height) {
    const auto e = new_element<P, Keys>(mem_, key, k, value);  // PoolFull
    return make_node(key.order, e.cached, e.payload, height, 2);
  }
  Node* make_node(Key key, Cached cached, PayloadField payload, int height, int owners) {
    Node* node = new (mem_.allocate(Node::bytes(height))) Node;  // PoolFull: nothing changed
    node->key.init(key);
    node->value.init(cached);
    node->height.init(static_cast<std::uint64_t>(height));
    node->owners.init(static_cast<std::uint64_t>(owners));
    node->payload = payload;
    for (int i = 0; i < height; ++i) new (&node->next(i)) Link;
    return node;
  }

  // A node never linked: nobody else saw it or its payload.
  void discard(Node* node) {
    if constexpr (HasPayloads<P>) mem_.discard_payload(node->payload);
    mem_.deallocate(node);
  }

  // Marks a node's upper levels, top-down (a remove's and a put's first step; level 0 last).
  static void mark_upper_levels(Node* node) {
    const int height = static_cast<int>(node->height.load());
    for (int level = height - 1; level >= 1; --level) {
      // Mutant killed by test: reader_windows_sim_test
      // SkipListWindows/*.ARemoveThatFindsAnUpperLevelMarkedMakesItDurable (three preemptions:
      // another remove's mark seen here, not persisted, is skipped; the marks below it persist).
      std::uintptr_t link = node->next(level).load();
      // Until it is marked, by this CAS or another's: a failed CAS reloads `link`, a successful
      // one ends the loop (looping on `link` alone would CAS, and persist, a second time).
      // Mutant killed by test: reader_windows_sim_test
      // SkipListWindows/*.AnUpperLevelsMarkIsDurableBeforeTheMarkBelowIt
      while (!is_marked(link) && !node->next(level).compare_exchange(link, link | mark_bit)) {
      }
    }
  }

  // A marked level-0 link whose target holds the same key was marked by a put (a remover's mark
  // keeps the successor it had, whose key is larger: an insert of the key after the remove links
  // a node of its own, never behind the removed one).
  static bool replaced_by_put(const Probe& key, std::uintptr_t marked_link) {
    const Node* next = pointer_of<Node>(marked_link);
    return next != nullptr && compare(next, key) == 0;
  }

  [[gnu::always_inline]] static int compare(const Node* n, const Probe& key) {
    return compare_node<Keys>(n, key);  // algo/keys.hpp
  }

  // The smallest key a user may pass: range()'s start.
  static KeyArg first_key() {
    if constexpr (Keys::byte_strings)
      return KeyArg{};
    else
      return min_user_key;
  }

  // The first level-0 node with key >= key (marked or not), writing nothing.
  Node* lower_bound(const Probe& key) {
    Node* pred = head_;
    Node* curr = nullptr;
    for (int level = levels_.load(std::memory_order_acquire) - 1; level >= 0; --level) {
      curr = pointer_of<Node>(pred->next(level).load());
      while (curr != nullptr && compare(curr, key) < 0) {
        pred = curr;
        curr = pointer_of<Node>(curr->next(level).load());
      }
    }
    return curr;
  }

  // Herlihy–Shavit find: preds/succs around key at every level below levels_, unlinking
  // marked nodes on the way. True when succs[0] holds key. Caller is pinned.
  bool find(const Probe& key, Window& w) {
  retry:
    Node* pred = head_;
    int c = 1;  // the sign of (succs[level]'s key - key), at the level last walked
    for (int level = levels_.load(std::memory_order_acquire) - 1; level >= 0; --level) {
      // Mutant killed by test: reader_windows_sim_test
      // ReaderWindows/*.AnInsertLinkedAfterANewHeadInFlightMakesItDurable
      Node* curr = pointer_of<Node>(pred->next(level).load());
      while (curr != nullptr) {
        // Mutant killed by test: reader_windows_sim_test
        // ReaderWindows/*.AnInsertLinkedAfterAnInsertInFlightBehindAShortTowerMakesItDurable
        // Mutant survives (izraelevitz): a marked link leads only to the unlinking CAS below,
        // which persists the node's removal at this level; an unmarked one at levels 0-3 shares
        // the node's first line with its key, which the key load below persists; one above only
        // routes this search down to those levels, which decide what it finds and writes.
        const std::uintptr_t succ_link = curr->next(level).load();
        if (is_marked(succ_link)) {
          std::uintptr_t expected = word_of(curr);
          const std::uintptr_t succ = succ_link & ~mark_bit;
          // Mutant killed by test: reader_windows_sim_test
          // SlotReuse/*.AnUnlinkIsDurableBeforeItsSlotsAreReused
          if (!pred->next(level).compare_exchange(expected, succ)) goto retry;
          curr = pointer_of<Node>(succ);
          continue;
        }
        c = compare(curr, key);
        if (c >= 0) break;
        pred = curr;
        curr = pointer_of<Node>(succ_link);
      }
      w.preds[level] = pred;
      w.succs[level] = curr;
    }
    return w.succs[0] != nullptr && c == 0;
  }

  // Wait-free search, writes nothing: the node holding key, unmarked at some level when read
  // (marks go top-down, level 0 last, so it was present then), or nullptr.
  Node* search(const Probe& key) {
    Node* pred = head_;
    for (int level = levels_.load(std::memory_order_acquire) - 1; level >= 0; --level) {
      // Mutant killed by test: reader_windows_sim_test
      // ReaderWindows/*.AGetThatFindsTheFirstInsertInFlightMakesItDurable
      Node* curr = pointer_of<Node>(pred->next(level).load());
      while (curr != nullptr) {
        // Mutant killed by test: reader_windows_sim_test
        // ReaderWindows/*.AGetThatSeesARemoveInFlightMakesItDurable
        const std::uintptr_t succ_link = curr->next(level).load();
        if (is_marked(succ_link)) {
          curr = pointer_of<Node>(succ_link);
          continue;
        }
        const int c = compare(curr, key);
        if (c == 0) return curr;
        if (c > 0) break;
        pred = curr;
        curr = pointer_of<Node>(succ_link);
      }
    }
    return nullptr;
  }

  // `owners` is never needed durable: recovery sets it from the node's state (1 for every node it
  // keeps; it retires the marked ones).
  void release(Node* node) {
    // Mutant survives: recovery sets `owners` again from the node's state.
    std::uint64_t owners = node->owners.load();
    // Mutant survives: recovery sets `owners` again from the node's state.
    while (!node->owners.compare_exchange(owners, owners - 1)) {
    }
    if (owners == 1) mem_.retire(node);
  }

  void create() {
    head_ = new (mem_.allocate(Node::bytes(max_height))) Node;
    head_->key.init(min_reserved_key);
    head_->value.init(Cached{});
    head_->height.init(max_height);
    head_->owners.init(0);
    for (int i = 0; i < max_height; ++i) {
      new (&head_->next(i)) Link;
      head_->next(i).init(0);
    }
    mem_.publish(head_, Node::bytes(max_height));
    anchor_ = this->template create_anchor<Anchor>(
        kind, [this](Anchor& a) { a.head.init(word_of(head_)); });
  }

  void open_and_recover() requires(P::durable) {
    auto trace = this->open_anchor(anchor_, kind, "skip list");
    head_ = pointer_of<Node>(anchor_->head.peek());
    trace.visit_once(head_, Node::bytes(max_height));
    if (head_->height.peek() != max_height) trace.corrupt("the head node's height is not 20");
    if constexpr (P::planted == Fault::recovery_drops_node) drop_first_node();
    // A damaged pool (docs/ARCHITECTURE.md §5): every node is checked before it is read (a
    // slot of the pool, a height in range whose links fit its slot, linked only at levels
    // below its height), each level's walk is bounded, a node unmarked at a level is met at
    // every level below (inserters link bottom-up, removers mark top-down), so a search that
    // descends from it follows only checked links, and the repairs are written only once the
    // whole walk is checked, so a PoolCorrupt leaves the pool as it was.
    std::vector<Node*> deleted;                             // marked: their removers crashed
    std::vector<std::pair<Link*, std::uintptr_t>> unlinks;  // repairs, written after the walk
    std::vector<Node*> owned;                               // level-0 nodes whose owners != 1
    // The levels are walked bottom-up. `below` holds the nodes unmarked at the level below, in
    // its list's order, with their heights. Each level is sorted by key, so this level's
    // unmarked nodes must appear among them in the same order: a merge checks that in one
    // pass. And since they must, the next ones of `below` tall enough for this level are
    // where the walk will go: they are prefetched, so the walk of an upper level does not wait
    // for one miss per node (recovering 1M elements took 1.3 s with a hash set for the check
    // and each level's walk a chain of misses; see the Mirror section of results/README.md).
    struct Met {
      const Node* node;
      std::uint64_t height;
    };
    std::vector<Met> below, here;
    constexpr std::size_t prefetch_window = 16;  // entries of `below` ahead of the walk
    int levels = 1;
    for (int level = 0; level < max_height; ++level) {
      Node* pred = head_;
      std::size_t met = 0;    // below[0, met) were passed by this level's walk
      std::size_t ahead = 0;  // below[0, ahead) were considered for prefetching
      auto prefetch_ahead = [&] {
        for (ahead = std::max(ahead, met); ahead < below.size() && ahead < met + prefetch_window;
             ++ahead)
          if (below[ahead].height > static_cast<std::uint64_t>(level)) {
            __builtin_prefetch(below[ahead].node);
            __builtin_prefetch(&below[ahead].node->next(level));
          }
      };
      pm::BoundedWalk walk(trace.allocator(), "skip list: a level's links");
      // The head is never removed: a mark on its link would send every search into helping
      // unlink it, forever.
      if (is_marked(head_->next(level).peek()))
        trace.corrupt("the head node is marked at level " + std::to_string(level));
      for (Node* n = pointer_of<Node>(head_->next(level).peek()); n != nullptr;) {
        prefetch_ahead();
        walk.step();
        // A node first reached above level 0 left level 0's list: its remover crashed.
        const bool unlinked_below = trace.visit(n, sizeof(Node)) && level > 0;
        const std::uint64_t height = n->height.peek();
        if (height < 1 || height > max_height || static_cast<int>(height) <= level)
          trace.corrupt("a node of height " + std::to_string(height) + " is linked at level " +
                        std::to_string(level));
        trace.visit(n, Node::bytes(static_cast<int>(height)));
        const std::uintptr_t link = n->next(level).peek();
        if (is_marked(link)) {  // finish the crashed remover's unlinking at this level
          unlinks.emplace_back(&pred->next(level), link & ~mark_bit);
          if (level == 0 || unlinked_below) deleted.push_back(n);
        } else {
          if (level > 0) {  // unmarked here, so unmarked below, after the last one met
            while (met < below.size() && below[met].node != n) ++met;
            if (met == below.size())
              trace.corrupt("a node linked at level " + std::to_string(level) +
                            " is missing, marked or out of order at level " +
                            std::to_string(level - 1));
            ++met;
          }
          levels = std::max(levels, level + 1);
          here.push_back({n, height});
          if (level == 0 && n->owners.peek() != 1) owned.push_back(n);  // inserter crashed
          pred = n;
        }
        n = pointer_of<Node>(link);
      }
      std::swap(below, here);
      here.clear();
    }
    // Mutant killed by test: reader_windows_sim_test
    // SkipListWindows/*.ARecoveredUnlinkIsDurableBeforeItsSlotIsReused
    for (const auto& [link, word] : unlinks) link->store(word);
    // Mutant survives: a crash that loses these stores leaves `owners` at 2, which the next
    // recovery resets again.
    for (Node* n : owned) n->owners.store(1);
    levels_.store(levels);
    trace.finish();
    for (Node* n : deleted) mem_.retire(n);
  }

  // Planted bug (d): unlinks the first present node at every level.
  void drop_first_node() {
    Node* victim = nullptr;
    for (Node* n = pointer_of<Node>(head_->next(0).peek()); n != nullptr && victim == nullptr;) {
      const std::uintptr_t link = n->next(0).peek();
      if (!is_marked(link)) victim = n;
      n = pointer_of<Node>(link);
    }
    if (victim == nullptr) return;
    for (int level = 0; level < max_height; ++level) {
      Link* prev = &head_->next(level);
      for (Node* n = pointer_of<Node>(prev->peek()); n != nullptr;
           prev = &n->next(level), n = pointer_of<Node>(prev->peek())) {
        if (n == victim) {
          prev->store(n->next(level).peek() & ~mark_bit);
          break;
        }
      }
    }
  }

  Anchor* anchor_ = nullptr;
  std::atomic<int> levels_{1};
};

}  // namespace pmds::algo

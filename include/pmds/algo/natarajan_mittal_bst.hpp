// pmds — the Natarajan–Mittal lock-free external binary search tree (PPoPP 2014), written once
// over a memory policy (algo/policy.hpp): a set and a map.
//
// Keys live in leaves; internal nodes route (key < node.key: left, else right). Deletion marks
// edges, not nodes: the edge to the victim leaf is FLAGGED (the delete's linearization point),
// then the edge to its sibling is TAGGED (frozen), then one CAS on the ancestor swings the edge
// that led to the `successor` over to the sibling, removing the leaf, its parent and any chain
// of tagged nodes in between (other deletes' parents) with their flagged leaves. Flagged and
// tagged edges never change again.
//
// A key is present when a leaf holds it and the edge to that leaf is not flagged. (The paper's
// search returns the leaf's key alone; a flagged leaf is deleted from the linearization point
// on, so search and insert treat it as absent — insert helps finish the removal first. This
// matters after a crash: a recovered flagged leaf belongs to a delete that took effect.)
//
// Sentinels: the paper needs three keys above every user key (inf0 < inf1 < inf2). User keys
// are at most 2^64-2, and every routing decision a user key makes at a sentinel is "left",
// which holds with all three equal to 2^64-1 (reserved): R(inf).left = S(inf),
// R.right = leaf(inf), S.left = leaf(inf), S.right = leaf(inf). Sentinels are never removed.
//
// Reclamation: the thread whose swing CAS succeeds retires what it removed: every internal
// node on the path successor .. parent (the path follows the key and its edges are tagged, so
// it cannot change) and, at each, the child that is not on the path (a flagged leaf), and at
// the parent the child that was not moved up. Exactly one CAS removes a given node.
//
// Durable policies: the anchor {kind, R} is the root; recovery visits every node reachable
// from R. Pending deletes (flagged or tagged edges) are left as they are: the next operation
// that meets them completes them, as it would before a crash.
//
// nbMontage (montage/policy.hpp, montage/natarajan_mittal_bst.hpp: the tree of its paper's §5)
// keeps the tree in DRAM and each key's state in a payload its leaf points to (algo/policy.hpp,
// "Payloads"). The two CASes at which an update takes effect are marked for it: an insert's swing
// of its parent's edge to the new internal node (Access::link) and a remove's flag
// (Access::remove, the leaf's payload detached first). Tagging and the ancestor's swing change no
// payload. Two choices serve it and cost the other policies nothing:
//   - a remove that finds its leaf's edge already flagged returns false at once (the key was
//     absent when that edge was read) rather than helping and seeking again: under nbMontage
//     each flag attempt costs an anti-node, so it is made only on a clean edge;
//   - the tag bit is 4 where the policy reserves bit 1 (nbMontage's descriptor mark).
// nbMontage recovers no shape: it rebuilds the tree balanced from the sorted payloads, in the
// paper's shape (adopt_keys: S.left an internal node of key infinity over the keys' subtree and
// an infinity leaf), so seek's first step below S still goes left.
//
// put (insert or replace) replaces the key's leaf by a new one with one CAS on the edge to it,
// from the old leaf to the new (Access::link: it links a new node; over payloads, the old payload
// is detached first). A remove's flag, an insert beside the old leaf and another put all CAS that
// edge expecting it clean and holding the old leaf, and fail; a flagged or tagged edge is helped
// and the put retried. The old leaf is retired by the put whose CAS unlinked it. A durable tree
// needs nothing more: the new leaf is published before the CAS, and recovery's trace reaches
// whichever leaf the edge holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <vector>

#include "pmds/algo/anchored_structure.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::algo {

template <class P>
requires MemoryPolicy<P>
class NatarajanMittalTree : public AnchoredStructure<P> {
 public:
  static constexpr const char* name = "bst";
  static constexpr std::uint64_t kind = 0x706d64732e627374;  // "pmds.bst"
  static constexpr Key infinity = max_reserved_key;          // all three sentinels
  // Slots other than one leaf + one internal node per key: anchor, R, S and three leaves.
  static constexpr std::size_t overhead_slots = 6;

  NatarajanMittalTree() requires(!P::durable) { create(); }
  NatarajanMittalTree(CreateTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(create_new, pool) {
    create();
  }
  NatarajanMittalTree(OpenTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(open_existing, pool) {
    open_and_recover();
  }

  ~NatarajanMittalTree() {
    if constexpr (!P::durable) {
      std::vector<Node*> stack{root_};
      while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        if (Node* l = address(n->left.peek())) stack.push_back(l);
        if (Node* r = address(n->right.peek())) stack.push_back(r);
        mem_.deallocate(n);
      }
      mem_.deallocate(anchor_);
    }
  }

  // False if the key was present. A durable tree throws PoolFull (the tree unchanged) when its
  // pool has no room.
  bool insert(Key key, Value value) { return upsert(key, value, false); }

  // Insert or replace: true if the key was absent (see the header). Throws PoolFull as insert.
  bool put(Key key, Value value) { return upsert(key, value, true); }

  bool remove(Key key) {
    check_key(key);
    auto guard = mem_.pin();
    Node* victim = nullptr;  // set once our flag CAS succeeded (cleanup mode)
    for (;;) {
      const SeekRecord s = seek(key);
      if (victim == nullptr) {  // injection mode
        // A flagged edge: the key was absent when it was read (see the header).
        if (s.leaf->key.load() != key || flagged(s.leaf_edge)) return false;
        Link& child = child_toward(s.parent, key);
        std::uintptr_t expected = word_of(s.leaf);
        if constexpr (HasPayloads<P>) mem_.detach_payload(s.leaf->payload);  // PoolFull: unchanged
        // Mutant survives (izraelevitz): a reader that meets the flag persists it itself, as every
        // shared load does, and remove returns only after a swing, whose CAS persists the leaf's
        // removal.
        if (child.compare_exchange(expected, word_of(s.leaf) | flag_bit, Access::remove)) {
          victim = s.leaf;  // linearized: the key is deleted
          if (cleanup(key, s)) return true;
        } else if (address(expected) == s.leaf && (flagged(expected) || tagged(expected))) {
          cleanup(key, s);  // help whoever holds the edge, then retry
        }
      } else {                              // cleanup mode
        if (s.leaf != victim) return true;  // someone else removed it
        if (cleanup(key, s)) return true;
      }
    }
  }

  bool contains(Key key) {
    check_key(key);
    auto guard = mem_.pin();
    const SeekRecord s = seek(key);
    return s.leaf->key.load() == key && !flagged(s.leaf_edge);
  }
  std::optional<Value> get(Key key) {
    check_key(key);
    auto guard = mem_.pin();
    const SeekRecord s = seek(key);
    if (s.leaf->key.load() != key || flagged(s.leaf_edge)) return std::nullopt;
    return s.leaf->value.load();
  }

  // Quiescent: f(key, value) for every key, in key order.
  template <class F>
  void for_each(F&& f) const {
    std::vector<std::uintptr_t> stack{word_of(root_)};
    while (!stack.empty()) {
      const std::uintptr_t edge = stack.back();
      stack.pop_back();
      const Node* n = address(edge);
      const std::uintptr_t left = n->left.peek(), right = n->right.peek();
      if (address(left) == nullptr) {  // a leaf
        if (!flagged(edge) && n->key.peek() != infinity) f(n->key.peek(), n->value.peek());
        continue;
      }
      stack.push_back(right);
      stack.push_back(left);
    }
  }
  std::size_t size() const {
    std::size_t n = 0;
    for_each([&](Key, Value) { ++n; });
    return n;
  }

 protected:
  using AnchoredStructure<P>::mem_;

  struct Node {
    typename P::template immutable<Key> key;
    typename P::template immutable<Value> value;         // leaves only
    typename P::template shared<std::uintptr_t> left;    // nullptr in a leaf
    typename P::template shared<std::uintptr_t> right;   // nullptr in a leaf
    [[no_unique_address]] payload_field_t<P> payload{};  // leaves, over a payload policy
  };

  // For a structure that rebuilds the tree from its payloads at open (nbMontage §3.4): a leaf for
  // a payload that survived, an internal node that routes key < node.key to `left`, and
  // adopt_keys(keys), which puts the subtree of every user key under S as an insert into the
  // empty tree would have: S.left = an internal node of key infinity over `keys` and the empty
  // tree's infinity leaf. Quiescent, on a tree just created.
  Node* make_leaf(Key key, Value value, payload_field_t<P> payload) {
    Node* n = make_node(key, 0, 0, value);
    n->payload = payload;
    return n;
  }
  Node* make_internal(Key key, Node* left, Node* right) {
    return make_node(key, word_of(left), word_of(right));
  }
  static Key key_of(const Node* n) { return n->key.peek(); }
  void adopt_keys(Node* keys) {
    sentinel_s_->left.init(
        word_of(make_internal(infinity, keys, address(sentinel_s_->left.peek()))));
  }

 private:
  using Link = typename P::template shared<std::uintptr_t>;
  // Edge bits (nodes are 16-byte aligned): the tag moves to bit 2 where the policy reserves bit 1.
  static constexpr std::uintptr_t flag_bit = 1;  // the leaf below is being deleted
  static constexpr std::uintptr_t tag_bit =      // the node above is being removed: frozen
      (reserved_value_bits<P> & 2) != 0 ? 4 : 2;
  static_assert((reserved_value_bits<P> & (flag_bit | tag_bit)) == 0);

  struct Anchor {
    typename P::template immutable<std::uint64_t> kind;
    typename P::template shared<std::uintptr_t> root;
  };

  struct SeekRecord {
    Node* ancestor;
    Node* successor;
    Node* parent;
    Node* leaf;
    std::uintptr_t leaf_edge;  // parent's edge to leaf, as read
  };

  static Node* address(std::uintptr_t edge) {
    return reinterpret_cast<Node*>(edge & ~(flag_bit | tag_bit));
  }
  static bool flagged(std::uintptr_t edge) { return (edge & flag_bit) != 0; }
  static bool tagged(std::uintptr_t edge) { return (edge & tag_bit) != 0; }

  static Link& child_toward(Node* n, Key key) { return key < n->key.load() ? n->left : n->right; }

  // insert (update false) and put (update true).
  bool upsert(Key key, Value value, bool update) {
    check_key(key);
    auto guard = mem_.pin();
    Node* new_leaf = nullptr;  // built at the first attempt that needs them, reused by retries
    Node* new_internal = nullptr;
    const auto discard_new = [&] {  // never linked: nobody saw them or the payload
      if (new_leaf != nullptr) {
        if constexpr (HasPayloads<P>) mem_.discard_payload(new_leaf->payload);
        mem_.deallocate(new_leaf);
      }
      if (new_internal != nullptr) mem_.deallocate(new_internal);
    };
    for (;;) {
      const SeekRecord s = seek(key);
      const Key leaf_key = s.leaf->key.load();
      const bool present = leaf_key == key;
      if (present && flagged(s.leaf_edge)) {
        cleanup(key, s);  // deleted but not yet removed: help, then retry
        continue;
      }
      if (present && !update) {
        discard_new();
        return false;
      }
      if (new_leaf == nullptr) {
        payload_field_t<P> payload{};
        if constexpr (HasPayloads<P>) payload = mem_.new_payload(key, value);  // PoolFull
        new_leaf = make_leaf(key, value, payload);
      }
      Link& child = child_toward(s.parent, key);
      std::uintptr_t expected = word_of(s.leaf);  // clean: neither flagged nor tagged
      if (present) {                              // put: the new leaf takes the old one's place
        if constexpr (HasPayloads<P>) {
          try {
            mem_.detach_payload(s.leaf->payload);  // PoolFull: nothing changed
          } catch (...) {
            discard_new();  // its payload must not stay pending for the thread's next CAS
            throw;
          }
        }
        if (child.compare_exchange(expected, word_of(new_leaf), Access::link)) {
          if (new_internal != nullptr) mem_.deallocate(new_internal);
          mem_.retire(s.leaf);  // only this CAS unlinked it
          return false;
        }
      } else {
        if (new_internal == nullptr) new_internal = new (mem_.allocate(sizeof(Node))) Node;
        // The new internal node routes between the new leaf and the leaf it replaces.
        new_internal->key.init(key > leaf_key ? key : leaf_key);
        new_internal->value.init(0);
        new_internal->left.init(word_of(key < leaf_key ? new_leaf : s.leaf));
        new_internal->right.init(word_of(key < leaf_key ? s.leaf : new_leaf));
        mem_.publish(new_internal, sizeof(Node));
        if (child.compare_exchange(expected, word_of(new_internal), Access::link)) return true;
      }
      if (address(expected) == s.leaf && (flagged(expected) || tagged(expected)))
        cleanup(key, s);  // a delete holds this edge: help it
    }
  }

  // The paper's seek: the access path to key's leaf, with the last untagged edge on it
  // (ancestor -> successor). Caller is pinned.
  SeekRecord seek(Key key) {
    SeekRecord s;
    s.ancestor = root_;
    s.successor = sentinel_s_;
    s.parent = sentinel_s_;
    // Mutant killed by test: reader_windows_sim_test
    // ReaderWindows/*.AGetThatFindsTheFirstInsertInFlightMakesItDurable
    std::uintptr_t parent_edge = sentinel_s_->left.load();
    s.leaf = address(parent_edge);
    // Mutant killed by test: reader_windows_sim_test
    // ReaderWindows/*.AnInsertLinkedAfterANewHeadInFlightMakesItDurable
    std::uintptr_t current_edge = s.leaf->left.load();
    Node* current = address(current_edge);
    while (current != nullptr) {
      if (!tagged(parent_edge)) {
        s.ancestor = s.parent;
        s.successor = s.leaf;
      }
      s.parent = s.leaf;
      s.leaf = current;
      parent_edge = current_edge;
      // Mutant killed by test: reader_windows_sim_test
      // ReaderWindows/*.AGetThatFindsAnInsertInFlightMakesItDurable
      // Mutant survives (izraelevitz): child_toward's load of the node's key persisted the node's
      // line, which holds this edge (a node is half a line).
      current_edge = child_toward(current, key).load();
      current = address(current_edge);
    }
    s.leaf_edge = parent_edge;
    return s;
  }

  // The paper's cleanup: tag the edge that stays, then swing ancestor's edge from successor to
  // it. True when this call's swing removed the leaf (and it retired what it removed).
  bool cleanup(Key key, const SeekRecord& s) {
    Link& successor_edge = child_toward(s.ancestor, key);
    const bool go_left = key < s.parent->key.load();
    Link* child = go_left ? &s.parent->left : &s.parent->right;
    Link* sibling = go_left ? &s.parent->right : &s.parent->left;
    // Mutant survives: the value read only picks the edge that moves up, and the swing below,
    // whose CAS persists it, moves it: the image that holds the swing holds the removal.
    if (!flagged(child->load())) sibling = child;  // the flagged leaf is on the other side
    // Freeze the edge that moves up (an atomic bit-set, written as a CAS loop).
    // Mutant survives: the value read feeds the tagging CAS on the same word, which persists it
    // either way, or, already tagged, the swing, whose CAS persists a link to that very node.
    std::uintptr_t kept = sibling->load();
    // Mutant survives: the tag only freezes the edge until the swing; an image that lost it
    // holds the swing (the tagged parent is then unreachable) or not (the durable flag alone
    // marks the pending delete, and the next cleanup tags again).
    while (!tagged(kept) && !sibling->compare_exchange(kept, kept | tag_bit)) {
    }
    kept |= tag_bit;
    std::uintptr_t expected = word_of(s.successor);
    // The moved edge keeps its flag (a leaf being deleted stays flagged), loses the tag.
    // Mutant killed by test: reader_windows_sim_test
    // SlotReuse/*.AnUnlinkIsDurableBeforeItsSlotsAreReused
    if (!successor_edge.compare_exchange(expected, (kept & ~tag_bit))) return false;
    retire_removed(key, s.successor, s.parent, address(kept));
    return true;
  }

  void retire_removed(Key key, Node* successor, Node* parent, Node* kept) {
    Node* n = successor;
    while (n != parent) {
      const bool go_left = key < n->key.load();
      const std::uintptr_t on_path = (go_left ? n->left : n->right).load();
      const std::uintptr_t off_path = (go_left ? n->right : n->left).load();
      mem_.retire(address(off_path));  // a flagged leaf: its parent n is being removed
      mem_.retire(n);
      n = address(on_path);
    }
    // Mutant survives: the parent's edges are frozen (flagged or tagged) and the parent is
    // unreachable after the swing; the values read only choose what to retire, which no image
    // records.
    const Node* left = address(parent->left.load());
    // Mutant survives: a frozen edge of an unreachable parent, read only to choose what to retire.
    mem_.retire(left == kept ? address(parent->right.load()) : address(parent->left.load()));
    mem_.retire(parent);
  }

  Node* make_node(Key key, std::uintptr_t left, std::uintptr_t right, Value value = 0) {
    Node* n = new (mem_.allocate(sizeof(Node))) Node;
    n->key.init(key);
    n->value.init(value);
    n->left.init(left);
    n->right.init(right);
    mem_.publish(n, sizeof(Node));
    return n;
  }

  void create() {
    Node* s =
        make_node(infinity, word_of(make_node(infinity, 0, 0)), word_of(make_node(infinity, 0, 0)));
    root_ = make_node(infinity, word_of(s), word_of(make_node(infinity, 0, 0)));
    sentinel_s_ = s;
    anchor_ = this->template create_anchor<Anchor>(
        kind, [this](Anchor& a) { a.root.init(word_of(root_)); });
  }

  void open_and_recover() requires(P::durable) {
    auto trace = this->open_anchor(anchor_, kind, "Natarajan-Mittal tree");
    root_ = address(anchor_->root.peek());
    trace.visit_once(root_);
    sentinel_s_ = address(root_->left.peek());
    // The operations assume the sentinels' shape: R and S internal, with key infinity, and the
    // edges R -> S and S -> S.left never flagged or tagged (no leaf under them is ever deleted;
    // seek starts below them, and cleanup's CAS on them expects them bare: a mark there would
    // make every later update retry for ever).
    if (root_->key.peek() != infinity || sentinel_s_ == nullptr ||
        word_of(sentinel_s_) != root_->left.peek())
      trace.corrupt("the root sentinel R is damaged");
    trace.visit(sentinel_s_);
    const std::uintptr_t s_left = sentinel_s_->left.peek();
    if (sentinel_s_->key.peek() != infinity || address(s_left) == nullptr ||
        (s_left & (flag_bit | tag_bit)) != 0)
      trace.corrupt("the sentinel S is damaged");
    if constexpr (P::planted == Fault::recovery_drops_node) drop_first_leaf();
    // A damaged pool (docs/ARCHITECTURE.md §5): a tree node has one parent, so a second visit
    // is a cycle or a shared subtree (visit_once throws; it also bounds the walk); a node has
    // two children or none (seek and cleanup read both of an internal node); only an edge to
    // a leaf may be flagged (cleanup retires the flagged child as a leaf), and an edge is
    // tagged only beside a flagged one. Nothing is written.
    std::vector<Node*> stack{root_};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      const std::uintptr_t edges[2] = {n->left.peek(), n->right.peek()};
      if ((address(edges[0]) == nullptr) != (address(edges[1]) == nullptr))
        trace.corrupt("a node has one child");
      // Cleanup tags the edge that is not flagged, after the other one was flagged.
      for (int side = 0; side < 2; ++side)
        if (tagged(edges[side]) && !flagged(edges[1 - side]))
          trace.corrupt("a tagged edge whose sibling edge is not flagged");
      for (const std::uintptr_t e : edges) {
        Node* c = address(e);
        if (c == nullptr) continue;
        if (c == sentinel_s_ && n == root_) {
          // S was visited above.
        } else {
          trace.visit_once(c);
        }
        if (flagged(e) && address(c->left.peek()) != nullptr)
          trace.corrupt("an edge to an internal node is flagged");
        stack.push_back(c);
      }
    }
    trace.finish();
  }

  // Planted bug (d): removes the leftmost user leaf (and its parent) as a lost delete would.
  void drop_first_leaf() {
    Node* grandparent = sentinel_s_;
    Node* parent = address(sentinel_s_->left.peek());
    if (address(parent->left.peek()) == nullptr) return;  // only the sentinel leaf: empty
    for (;;) {
      Node* next = address(parent->left.peek());
      if (address(next->left.peek()) == nullptr) break;  // next is the leftmost leaf
      grandparent = parent;
      parent = next;
    }
    grandparent->left.store(parent->right.peek() & ~(flag_bit | tag_bit));
  }

  Anchor* anchor_ = nullptr;
  Node* root_ = nullptr;        // R
  Node* sentinel_s_ = nullptr;  // S = R.left, never removed
};

}  // namespace pmds::algo

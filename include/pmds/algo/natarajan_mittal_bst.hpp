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
  using AnchoredStructure<P>::mem_;

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

  bool insert(Key key, Value value) {
    check_key(key);
    auto guard = mem_.pin();
    Node* new_leaf = nullptr;
    Node* new_internal = nullptr;
    for (;;) {
      const SeekRecord s = seek(key);
      const Key leaf_key = s.leaf->key.load();
      if (leaf_key == key) {
        if (!flagged(s.leaf_edge)) {  // present
          if (new_leaf != nullptr) {  // built but never linked
            mem_.deallocate(new_leaf);
            mem_.deallocate(new_internal);
          }
          return false;
        }
        cleanup(key, s);  // deleted but not yet removed: help, then retry
        continue;
      }
      if (new_leaf == nullptr) {
        new_leaf = new (mem_.allocate(sizeof(Node))) Node;
        new_leaf->key.init(key);
        new_leaf->value.init(value);
        new_leaf->left.init(0);
        new_leaf->right.init(0);
        mem_.publish(new_leaf, sizeof(Node));
        new_internal = new (mem_.allocate(sizeof(Node))) Node;
        new_internal->value.init(0);
      }
      // The new internal node routes between the new leaf and the leaf it replaces.
      new_internal->key.init(key > leaf_key ? key : leaf_key);
      new_internal->left.init(word_of(key < leaf_key ? new_leaf : s.leaf));
      new_internal->right.init(word_of(key < leaf_key ? s.leaf : new_leaf));
      mem_.publish(new_internal, sizeof(Node));
      Link& child = child_toward(s.parent, key);
      std::uintptr_t expected = word_of(s.leaf);  // clean: neither flagged nor tagged
      if (child.compare_exchange(expected, word_of(new_internal), Access::link)) return true;
      if (address(expected) == s.leaf && (flagged(expected) || tagged(expected)))
        cleanup(key, s);  // a delete holds this edge: help it
    }
  }

  bool remove(Key key) {
    check_key(key);
    auto guard = mem_.pin();
    Node* victim = nullptr;  // set once our flag CAS succeeded (cleanup mode)
    for (;;) {
      const SeekRecord s = seek(key);
      if (victim == nullptr) {  // injection mode
        if (s.leaf->key.load() != key) return false;
        Link& child = child_toward(s.parent, key);
        std::uintptr_t expected = word_of(s.leaf);
        // Mutant survives (izraelevitz): a reader that meets the flag persists it itself, as every
        // shared load does, and remove returns only after a swing, whose CAS persists the leaf's
        // removal.
        if (child.compare_exchange(expected, word_of(s.leaf) | flag_bit)) {
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

 private:
  using Link = typename P::template shared<std::uintptr_t>;
  // Edge bits (nodes are 16-byte aligned).
  static constexpr std::uintptr_t flag_bit = 1;  // the leaf below is being deleted
  static constexpr std::uintptr_t tag_bit = 2;   // the node above is being removed: frozen

  struct Node {
    typename P::template immutable<Key> key;
    typename P::template immutable<Value> value;        // leaves only
    typename P::template shared<std::uintptr_t> left;   // nullptr in a leaf
    typename P::template shared<std::uintptr_t> right;  // nullptr in a leaf
  };

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

  Node* make_node(Key key, std::uintptr_t left, std::uintptr_t right) {
    Node* n = new (mem_.allocate(sizeof(Node))) Node;
    n->key.init(key);
    n->value.init(0);
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

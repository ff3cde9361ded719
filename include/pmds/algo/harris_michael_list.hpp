// pmds — the Harris–Michael lock-free sorted linked list (Harris, DISC 2001; Michael, SPAA 2002),
// written once over a memory policy (algo/policy.hpp): a set and a map of Key -> Value.
//
// A key is in the list when a node holding it is reachable from the head and its next link is
// not marked. remove() marks the victim's next link (the linearization point: logical deletion)
// and then unlinks it with a CAS on its predecessor; any find() that meets a marked node
// unlinks it too, and the thread whose unlinking CAS succeeds retires the node (exactly one).
// contains()/get() traverse without writing (Harris's wait-free search); nodes they pass stay
// readable because every operation is pinned in the structure's epoch domain.
//
// The list core (detail::HmBucket) works on a head link, so Michael's hash table
// (algo/michael_hash.hpp) reuses it with one head link per bucket; it takes a Keys
// (algo/keys.hpp), and over a payload policy (nbMontage) a put by replacement, for the table's
// byte-string and nbMontage forms.
//
// Durable policies: the anchor {kind, head} is the structure's root; recovery traces the list
// from it (marked nodes included: they are reachable until some find() unlinks them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "pmds/algo/anchored_structure.hpp"
#include "pmds/algo/keys.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::algo {

namespace detail {

// A list node. Its key word and Cached are a Keys's (algo/keys.hpp: 8-byte keys and values by
// default). Without payloads the node is {key, value, next}, as in the pools.
template <class P, class Keys = WordKeys>
struct HmNode {
  typename P::template immutable<Key> key;
  typename P::template immutable<Value> value;
  typename P::template shared<std::uintptr_t> next;  // successor | mark_bit (logically deleted)
  [[no_unique_address]] NoPayload payload;
};
// Under a payload policy (nbMontage) the node is DRAM and `payload` holds the element. Key and
// next first: a traversal of 8-byte keys reads only those two, in one 16-byte block (malloc's
// alignment), never across two cache lines.
template <class P, class Keys>
requires HasPayloads<P>
struct HmNode<P, Keys> {
  typename P::template immutable<Key> key;              // byte strings: the key's order word
  typename P::template shared<std::uintptr_t> next;     // successor | mark_bit (logically deleted)
  [[no_unique_address]] cached_field_t<P, Keys> value;  // byte strings: Keys::Cached
  node_payload_t<P, Keys> payload{};
};

// The list algorithm on one head link (a list, or one bucket of a hash table).
template <class P, class Keys = WordKeys>
requires KeysUnder<Keys, P>
class HmBucket {
 public:
  using Node = HmNode<P, Keys>;
  using Link = typename P::template shared<std::uintptr_t>;
  using Memory = typename P::Memory;
  using Probe = typename Keys::Probe;
  using KeyArg = typename Keys::KeyArg;
  using ValueArg = typename Keys::ValueArg;

  // The payload field takes no bytes under the other policies: their pool layout is as it was.
  struct NodeWithoutPayload {
    decltype(Node::key) key;
    decltype(Node::value) value;
    decltype(Node::next) next;
  };
  static_assert(HasPayloads<P> || sizeof(Node) == sizeof(NodeWithoutPayload));

  struct Position {
    Link* prev;  // the link that points to curr
    Node* curr;  // the first unmarked node with key >= the key sought, or nullptr
    bool found;  // curr holds the key
  };

  // Michael's find: unlinks (and retires) every marked node it passes. Caller is pinned.
  static Position find(Memory& mem, Link& head, const Probe& key) {
  retry:
    Link* prev = &head;
    // Mutant killed by test: reader_windows_sim_test
    // ReaderWindows/*.AnInsertLinkedAfterANewHeadInFlightMakesItDurable (FliT: the head's writer
    // may not have persisted it yet).
    std::uintptr_t curr_word = prev->load();
    for (;;) {
      Node* curr = pointer_of<Node>(curr_word);
      if (curr == nullptr) return {prev, nullptr, false};
      // Mutant killed by test: reader_windows_sim_test
      // ReaderWindows/*.AnInsertLinkedAfterAnInsertInFlightMakesItDurable (FliT persists after
      // this load only, not after the key's, which is immutable).
      // Mutant survives (izraelevitz): a node is one slot within one cache line, and the key
      // load below persists that line again, holding this word or a later one; a marked word
      // leads only to the unlinking CAS, whose persist makes the node unreachable, or a retry.
      const std::uintptr_t next_word = curr->next.load();
      if (is_marked(next_word)) {
        // curr is logically deleted: unlink it. prev's link is unmarked in `expected`, so the
        // CAS fails if prev's node was itself marked meanwhile (then start again).
        std::uintptr_t expected = curr_word;
        const std::uintptr_t successor = next_word & ~mark_bit;
        // Mutant killed by test: izraelevitz_sim_test
        // UnlinkSim/*.FindsUnlinkNotPersistedCorruptsTheImageOnceTheSlotIsReused
        if (!prev->compare_exchange(expected, successor)) goto retry;
        mem.retire(curr);
        curr_word = successor;
        continue;
      }
      // Mutant survives (izraelevitz): the key is durable since Memory::publish flushed the node
      // before its linking CAS, and never written after; the next-link load above persisted the
      // rest of the line.
      const int c = compare_node<Keys>(curr, key);
      if (c >= 0) return {prev, curr, c == 0};
      prev = &curr->next;
      curr_word = next_word;
    }
  }

  // Caller is pinned. Throws PoolFull (nothing changed) when no slot or payload is left.
  static bool insert(Memory& mem, Link& head, const Probe& key, KeyArg k, ValueArg v) {
    Node* node = nullptr;
    for (;;) {
      const Position pos = find(mem, head, key);
      if (pos.found) {
        if (node != nullptr) discard(mem, node);  // built but never linked
        return false;
      }
      if (node == nullptr) node = make_node(mem, key, k, v);
      node->next.init(word_of(pos.curr));
      mem.publish(node, sizeof(Node));  // contents durable before the link (Izraelevitz)
      std::uintptr_t expected = word_of(pos.curr);
      if (pos.prev->compare_exchange(expected, word_of(node), Access::link)) return true;
    }
  }

  // Insert or replace, over a payload policy: true if the key was absent. A replacement is one
  // CAS on the OLD node's next word, from its successor s to (new node | mark), the new node's
  // next being s: the old node is marked (removed) and the new one linked after it in the same
  // instant (Access::link, the old payload detached first). Every other operation that could
  // change the old node (a remove's mark, an insert after it, another put) CASes that same word
  // and fails; a search that meets the marked old node goes on to the new one (search()), and
  // the old node is unlinked as any marked node is. Not nbMontage Figure 7's update, which
  // replaces the node by a CAS on its predecessor while a concurrent remove can still mark the
  // old node, so that both would take effect and the remove would report a key that stays.
  // Caller is pinned. Throws PoolFull (nothing changed) when no payload is left.
  static bool put(Memory& mem, Link& head, const Probe& key, KeyArg k,
                  ValueArg v) requires HasPayloads<P> {
    Node* node = nullptr;  // made at the first attempt, reused by retries
    for (;;) {
      const Position pos = find(mem, head, key);
      if (node == nullptr) node = make_node(mem, key, k, v);
      if (!pos.found) {
        node->next.init(word_of(pos.curr));
        std::uintptr_t expected = word_of(pos.curr);
        if (pos.prev->compare_exchange(expected, word_of(node), Access::link)) return true;
        continue;
      }
      std::uintptr_t next_word = pos.curr->next.load();
      if (is_marked(next_word)) continue;  // removed or replaced meanwhile; find() unlinks it
      node->next.init(next_word);
      bool detached;
      try {
        detached = mem.detach_payload(pos.curr->payload);  // PoolFull: nothing changed
      } catch (...) {
        discard(mem, node);  // its payload must not stay pending for the thread's next CAS
        throw;
      }
      if (!detached) continue;  // removed or replaced meanwhile (a handle tells): find() again
      if (!pos.curr->next.compare_exchange(next_word, word_of(node) | mark_bit, Access::link))
        continue;
      mem.payload_removed(pos.curr->payload);
      std::uintptr_t expected = word_of(pos.curr);
      if (pos.prev->compare_exchange(expected, word_of(node)))
        mem.retire(pos.curr);
      else
        find(mem, head, key);  // unlinks it
      return false;
    }
  }

  // Caller is pinned.
  static bool remove(Memory& mem, Link& head, const Probe& key) {
    for (;;) {
      const Position pos = find(mem, head, key);
      if (!pos.found) return false;
      // Mutant survives: the word read only feeds the marking CAS on the same word below, which
      // persists it whether it succeeds or fails, or a retry when it is marked.
      std::uintptr_t next_word = pos.curr->next.load();
      if (is_marked(next_word)) continue;  // another remover or a put won; find() unlinks it
      if constexpr (HasPayloads<P>)        // PoolFull: nothing changed; false: removed meanwhile
        if (!mem.detach_payload(pos.curr->payload)) continue;
      // Mutant killed by test: reader_windows_sim_test
      // ReaderWindows/*.AGetThatSeesARemoveInFlightMakesItDurable
      // (FliT: a reader that meets the mark after the counter is lowered does not persist it).
      // Mutant survives (izraelevitz): before remove returns, the unlinking CAS below (or, when
      // it fails, the find() that unlinks the node or reads its predecessor's new link) persists
      // a link that leaves the node unreachable in every later image; a reader that meets the
      // mark first persists it itself, as every shared load does.
      if (!pos.curr->next.compare_exchange(next_word, next_word | mark_bit, Access::remove))
        continue;
      if constexpr (HasPayloads<P>) mem.payload_removed(pos.curr->payload);
      // Logically deleted. Unlink it here, or let a find() do it (and retire it).
      std::uintptr_t expected = word_of(pos.curr);
      // Mutant killed by test: izraelevitz_sim_test
      // UnlinkSim/*.RemovesUnlinkNotPersistedCorruptsTheImageOnceTheSlotIsReused
      if (pos.prev->compare_exchange(expected, next_word)) {
        mem.retire(pos.curr);
      } else {
        find(mem, head, key);
      }
      return true;
    }
  }

  // The node holding key, unmarked when read, or nullptr. Writes nothing. A marked node of the
  // key is passed: a put may have linked its replacement right after it. Caller is pinned.
  static Node* search(Link& head, const Probe& key) {
    // Mutant killed by test: reader_windows_sim_test
    // ReaderWindows/*.AGetThatFindsTheFirstInsertInFlightMakesItDurable
    Node* curr = pointer_of<Node>(head.load());
    while (curr != nullptr) {
      const int c = compare_node<Keys>(curr, key);
      if (c >= 0) {
        if (c > 0) return nullptr;
        // Mutant killed by test: reader_windows_sim_test
        // ReaderWindows/*.AGetThatSeesARemoveInFlightMakesItDurable
        // Mutant survives (izraelevitz): the key load above persisted this node's line, which
        // holds this word (a node is one slot within one line).
        const std::uintptr_t next_word = curr->next.load();
        if (!is_marked(next_word)) return curr;
        curr = pointer_of<Node>(next_word);  // removed, or replaced: its successor may hold key
        continue;
      }
      // Mutant killed by test: reader_windows_sim_test
      // ReaderWindows/*.AGetThatFindsAnInsertInFlightMakesItDurable
      curr = pointer_of<Node>(curr->next.load());
    }
    return nullptr;
  }

  // ---- quiescent helpers (no other thread runs) ------------------------------------------

  // f(key, value) for every key present, in key order.
  template <class F>
  static void for_each(const Link& head, F&& f) {
    for (Node* n = pointer_of<Node>(head.peek()); n != nullptr;) {
      const std::uintptr_t next_word = n->next.peek();
      if (!is_marked(next_word)) {
        if constexpr (Keys::byte_strings)
          Keys::visit(n->key.peek(), n->value.peek(), n->payload, f);
        else
          f(n->key.peek(), n->value.peek());
      }
      n = pointer_of<Node>(next_word);
    }
  }

  // Frees every node (a destructor; a payload policy's payloads stay).
  static void free_all(Memory& mem, Link& head) {
    for (Node* n = pointer_of<Node>(head.peek()); n != nullptr;) {
      Node* next = pointer_of<Node>(n->next.peek());
      mem.deallocate(n);
      n = next;
    }
  }

  // Recovery: visit every reachable node (before reading it). Each node has one predecessor,
  // so a second visit is a damaged pool (a cycle, or a link into another bucket's chain):
  // visit_once throws PoolCorrupt, which also bounds the walk.
  template <class Trace>
  static void trace(Trace& trace, const Link& head) {
    // A mark belongs on a node's link (the node is deleted), never on the head's: a search
    // would retry its unlinking CAS on the head forever.
    if (is_marked(head.peek())) trace.corrupt("a list's head link is marked");
    for (Node* n = pointer_of<Node>(head.peek()); n != nullptr;) {
      trace.visit_once(n);
      n = pointer_of<Node>(n->next.peek());
    }
  }

  // Planted bug (d): unlinks the first present node, as a recovery that lost it would.
  // Returns whether there was one.
  static bool drop_first_node(Link& head) {
    Link* prev = &head;
    for (Node* n = pointer_of<Node>(head.peek()); n != nullptr;) {
      const std::uintptr_t next_word = n->next.peek();
      if (!is_marked(next_word)) {
        prev->store(next_word);
        return true;
      }
      prev = &n->next;
      n = pointer_of<Node>(next_word);
    }
    return false;
  }

 private:
  static Node* make_node(Memory& mem, const Probe& key, KeyArg k, ValueArg v) {
    Node* node = new (mem.allocate(sizeof(Node))) Node;  // PoolFull: nothing changed
    NewElement<P, Keys> e;
    try {
      e = new_element<P, Keys>(mem, key, k, v);  // PoolFull: nothing changed
    } catch (...) {
      mem.deallocate(node);
      throw;
    }
    node->key.init(key.order);
    node->value.init(e.cached);
    node->payload = e.payload;
    return node;
  }
  // A node never linked: nobody else saw it or its payload.
  static void discard(Memory& mem, Node* node) {
    if constexpr (HasPayloads<P>) mem.discard_payload(node->payload);
    mem.deallocate(node);
  }
};

}  // namespace detail

template <class P>
requires MemoryPolicy<P>
class HarrisMichaelList : public AnchoredStructure<P> {
  using Bucket = detail::HmBucket<P>;
  using Node = typename Bucket::Node;
  using AnchoredStructure<P>::mem_;

 public:
  static constexpr const char* name = "list";
  static constexpr std::uint64_t kind = 0x706d64732e6c7374;  // "pmds.lst"

  HarrisMichaelList() requires(!P::durable) { create(); }
  HarrisMichaelList(CreateTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(create_new, pool) {
    create();
  }
  HarrisMichaelList(OpenTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(open_existing, pool) {
    open_and_recover();
  }

  ~HarrisMichaelList() {
    if constexpr (!P::durable) {
      Bucket::free_all(mem_, anchor_->head);
      mem_.deallocate(anchor_);
    }
  }

  bool insert(Key key, Value value) {
    const auto probe = WordKeys::probe(key);  // ReservedKey
    auto guard = mem_.pin();
    return Bucket::insert(mem_, anchor_->head, probe, key, value);
  }
  bool remove(Key key) {
    const auto probe = WordKeys::probe(key);
    auto guard = mem_.pin();
    return Bucket::remove(mem_, anchor_->head, probe);
  }
  bool contains(Key key) {
    const auto probe = WordKeys::probe(key);
    auto guard = mem_.pin();
    return Bucket::search(anchor_->head, probe) != nullptr;
  }
  std::optional<Value> get(Key key) {
    const auto probe = WordKeys::probe(key);
    auto guard = mem_.pin();
    const Node* n = Bucket::search(anchor_->head, probe);
    if (n == nullptr) return std::nullopt;
    return n->value.load();
  }

  // Quiescent: f(key, value) for every key, in key order.
  template <class F>
  void for_each(F&& f) const {
    Bucket::for_each(anchor_->head, f);
  }
  // Quiescent: the number of keys.
  std::size_t size() const {
    std::size_t n = 0;
    for_each([&](Key, Value) { ++n; });
    return n;
  }

 private:
  struct Anchor {
    typename P::template immutable<std::uint64_t> kind;
    typename P::template shared<std::uintptr_t> head;
  };

  void create() {
    anchor_ = this->template create_anchor<Anchor>(kind, [](Anchor& a) { a.head.init(0); });
  }

  void open_and_recover() requires(P::durable) {
    auto trace = this->open_anchor(anchor_, kind, "Harris-Michael list");
    if constexpr (P::planted == Fault::recovery_drops_node) Bucket::drop_first_node(anchor_->head);
    Bucket::trace(trace, anchor_->head);
    trace.finish();
  }

  Anchor* anchor_ = nullptr;
};

}  // namespace pmds::algo

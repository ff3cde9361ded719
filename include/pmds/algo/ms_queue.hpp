// pmds — the Michael–Scott lock-free queue (PODC 1996), written once over a memory policy
// (algo/policy.hpp).
//
// A singly linked list from `head` (a dummy node: the last one dequeued, or the initial one)
// to `tail` (the last node, or one behind it: a lagging tail is helped forward by whoever sees
// it). enqueue links a node after the last one with a CAS (its linearization point), then
// swings the tail; dequeue reads the value of head's successor and swings head to it (its
// linearization point), retiring the old dummy. Epoch reclamation keeps a node readable while
// a pinned thread may still hold it, so no counted pointers are needed against ABA.
//
// Durable policies: the anchor {kind, head, tail} is the root (head and tail on their own
// cache lines). Recovery visits the nodes from head along next; if the recovered tail is not
// among them (it cannot be in a state the Izraelevitz transform persists, but a dangling
// tail would be fatal) it is set to the last node.
//
// nbMontage (montage/policy.hpp, montage/queue.hpp: the queue of its paper's §5) keeps the list
// in DRAM and each value in a payload its node points to (algo/policy.hpp, "Payloads"). The two
// CASes at which an operation takes effect are marked for it: an enqueue's link (Access::link)
// and a dequeue's swing of head to head's successor (Access::remove, the successor's payload,
// whose value it returns, detached first). The payloads also carry the queue's order, which
// nbMontage recovers by sorting them: §5's serial number from a counter, taken right before each
// link attempt (the payload is private until the link). A link on a node is the first its next
// word ever takes, and a later link is made on a node reachable only after it, by an enqueuer
// that saw it as the tail afterwards, so serial order is queue order. The old dummy's payload
// is freed with it when it is retired.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <type_traits>

#include "pmds/algo/anchored_structure.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::algo {

template <class P>
requires MemoryPolicy<P>
class MichaelScottQueue : public AnchoredStructure<P> {
 public:
  static constexpr const char* name = "queue";
  static constexpr std::uint64_t kind = 0x706d64732e717565;  // "pmds.que"

  MichaelScottQueue() requires(!P::durable) { create(); }
  MichaelScottQueue(CreateTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(create_new, pool) {
    create();
  }
  MichaelScottQueue(OpenTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(open_existing, pool) {
    open_and_recover();
  }

  ~MichaelScottQueue() {
    if constexpr (!P::durable) {
      for (Node* n = pointer_of<Node>(anchor_->head.peek()); n != nullptr;) {
        Node* next = pointer_of<Node>(n->next.peek());
        mem_.deallocate(n);
        n = next;
      }
      mem_.deallocate(anchor_);
    }
  }

  // Throws PoolFull (the queue unchanged) when no slot is left.
  void enqueue(Value value) {
    auto guard = mem_.pin();
    payload_field_t<P> payload{};
    if constexpr (HasPayloads<P>) payload = mem_.new_payload(0, value);  // PoolFull: unchanged
    Node* node = make_node(value, payload);
    for (;;) {
      // Mutant survives: the tail is a hint. It names a node whose link CAS persisted before the
      // tail moved to it, operations help a lagging tail, and recovery keeps a tail only where its
      // walk from the head reaches it (the last node otherwise).
      std::uintptr_t tail = anchor_->tail.load();
      Node* last = pointer_of<Node>(tail);
      std::uintptr_t next = last->next.load();
      if (next == 0) {
        // The queue's order (see the header). relaxed: `last` was reached through an acquire
        // load of the link that made it reachable, made after last's own serial was taken, so
        // the two increments are ordered (coherence of one atomic) without a fence of their own.
        if constexpr (HasPayloads<P>)
          mem_.set_payload_key(payload, serials_.next.fetch_add(1, std::memory_order_relaxed));
        if (last->next.compare_exchange(next, word_of(node), Access::link)) {
          // Mutant survives: the tail is a hint, which recovery resets when its walk misses it.
          anchor_->tail.compare_exchange(tail, word_of(node));  // may fail: someone helped
          return;
        }
      } else {
        // Mutant survives: the tail is a hint, which recovery resets when its walk misses it.
        anchor_->tail.compare_exchange(tail, next);  // help a lagging tail
      }
    }
  }

  std::optional<Value> dequeue() {
    auto guard = mem_.pin();
    for (;;) {
      std::uintptr_t head = anchor_->head.load();
      // Mutant survives: the tail is a hint (recovery resets it when its walk misses it); no
      // answer depends on it.
      std::uintptr_t tail = anchor_->tail.load();
      Node* first = pointer_of<Node>(head);
      // Mutant survives: a link only goes from 0 (durable since publish) to a node, and a node
      // read here is returned only after the head CAS, which persists a link to that very node
      // (its contents durable since publish): it is then the dummy, whatever became of this link.
      const std::uintptr_t next = first->next.load();
      if (next == 0) return std::nullopt;
      if (head == tail) {  // tail lags behind a node being enqueued: help it first
        // Mutant survives: the tail is a hint, which recovery resets when its walk misses it.
        anchor_->tail.compare_exchange(tail, next);
        continue;
      }
      Node* successor = pointer_of<Node>(next);
      const Value value = successor->value.load();
      if constexpr (HasPayloads<P>) mem_.detach_payload(successor->payload);  // PoolFull: unchanged
      if (anchor_->head.compare_exchange(head, next, Access::remove)) {
        mem_.retire(first);
        return value;
      }
    }
  }

  // Quiescent: f(value) from front to back.
  template <class F>
  void for_each(F&& f) const {
    const Node* dummy = pointer_of<Node>(anchor_->head.peek());
    for (const Node* n = pointer_of<Node>(dummy->next.peek()); n != nullptr;
         n = pointer_of<Node>(n->next.peek()))
      f(n->value.peek());
  }
  std::size_t size() const {
    std::size_t n = 0;
    for_each([&](Value) { ++n; });
    return n;
  }

 protected:
  using AnchoredStructure<P>::mem_;

  struct Node {
    typename P::template immutable<Value> value;
    typename P::template shared<std::uintptr_t> next;
    [[no_unique_address]] payload_field_t<P> payload{};  // over a payload policy
  };

  // A node holding `value` (and its payload), not linked, its contents durable.
  Node* make_node(Value value, payload_field_t<P> payload) {
    Node* node = new (mem_.allocate(sizeof(Node))) Node;
    node->value.init(value);
    node->next.init(0);
    node->payload = payload;
    mem_.publish(node, sizeof(Node));  // contents durable before the link
    return node;
  }

  // Quiescent, over a payload policy: the queue as recovered, a node per payload appended in
  // queue order (the serial numbers' order); then set_next_serial, one past the last serial.
  void adopt_back(Value value, payload_field_t<P> payload) requires(HasPayloads<P>) {
    Node* node = make_node(value, payload);
    pointer_of<Node>(anchor_->tail.peek())->next.store(word_of(node));
    anchor_->tail.store(word_of(node));
  }
  void set_next_serial(std::uint64_t serial) requires(HasPayloads<P>) {
    serials_.next.store(serial);
  }

 private:
  // The serial number counter of a payload policy (see the header), on a line of its own; no
  // bytes for the others.
  struct alignas(64) Serials {
    std::atomic<std::uint64_t> next{0};
  };
  struct NoSerials {};

  // head and tail are the two contended words: 64 bytes apart, so never on one cache line.
  struct Anchor {
    typename P::template immutable<std::uint64_t> kind;
    unsigned char pad0[64];
    typename P::template shared<std::uintptr_t> head;
    unsigned char pad1[64];
    typename P::template shared<std::uintptr_t> tail;
  };

  void create() {
    Node* dummy = make_node(0, {});
    anchor_ = this->template create_anchor<Anchor>(kind, [dummy](Anchor& a) {
      a.head.init(word_of(dummy));
      a.tail.init(word_of(dummy));
    });
  }

  void open_and_recover() requires(P::durable) {
    auto trace = this->open_anchor(anchor_, kind, "Michael-Scott queue");
    if constexpr (P::planted == Fault::recovery_drops_node) {
      // Loses the front value: its node becomes the dummy.
      const Node* dummy = pointer_of<Node>(anchor_->head.peek());
      if (const std::uintptr_t first = dummy->next.peek(); first != 0) {
        if (anchor_->tail.peek() == anchor_->head.peek()) anchor_->tail.store(first);
        anchor_->head.store(first);
      }
    }
    const std::uintptr_t tail = anchor_->tail.peek();
    bool tail_reached = false;
    Node* last = nullptr;
    // The dummy node always exists: a null head is a damaged anchor (dequeue would read it).
    if (anchor_->head.peek() == 0) trace.corrupt("the head link is null (no dummy node)");
    for (Node* n = pointer_of<Node>(anchor_->head.peek()); n != nullptr;
         n = pointer_of<Node>(n->next.peek())) {
      trace.visit_once(n);  // a node has one predecessor: a second visit is a cycle
      tail_reached = tail_reached || word_of(n) == tail;
      last = n;
    }
    if (!tail_reached) anchor_->tail.store(word_of(last));
    trace.finish();
  }

  Anchor* anchor_ = nullptr;
  [[no_unique_address]] std::conditional_t<HasPayloads<P>, Serials, NoSerials> serials_;
};

}  // namespace pmds::algo

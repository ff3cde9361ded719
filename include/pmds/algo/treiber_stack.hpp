// pmds — the Treiber lock-free stack (IBM RJ 5118, 1986), written once over a memory policy
// (algo/policy.hpp).
//
// `top` points to a singly linked list; push links a node in front with one CAS (its
// linearization point), pop swings top to the next node with one CAS and retires the old top.
// Epoch reclamation keeps a popped node from being reused while a pinned thread may still
// compare against it, which is what makes the plain-pointer CAS safe from ABA.
//
// Durable policies: the anchor {kind, top} is the root; recovery visits the nodes from top.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>

#include "pmds/algo/anchored_structure.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::algo {

template <class P>
requires MemoryPolicy<P>
class TreiberStack : public AnchoredStructure<P> {
  using AnchoredStructure<P>::mem_;

 public:
  static constexpr const char* name = "stack";
  static constexpr std::uint64_t kind = 0x706d64732e73746b;  // "pmds.stk"

  TreiberStack() requires(!P::durable) { create(); }
  TreiberStack(CreateTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(create_new, pool) {
    create();
  }
  TreiberStack(OpenTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(open_existing, pool) {
    open_and_recover();
  }

  ~TreiberStack() {
    if constexpr (!P::durable) {
      for (Node* n = pointer_of<Node>(anchor_->top.peek()); n != nullptr;) {
        Node* next = pointer_of<Node>(n->next.peek());
        mem_.deallocate(n);
        n = next;
      }
      mem_.deallocate(anchor_);
    }
  }

  void push(Value value) {
    auto guard = mem_.pin();
    Node* node = new (mem_.allocate(sizeof(Node))) Node;
    node->value.init(value);
    // Mutant survives: the value read only feeds the CAS on the top below, which persists the
    // top whether it succeeds or fails.
    std::uintptr_t top = anchor_->top.load();
    for (;;) {
      node->next.init(top);              // still private: the node is not linked yet
      mem_.publish(node, sizeof(Node));  // contents durable before the link
      if (anchor_->top.compare_exchange(top, word_of(node), Access::link)) return;
    }
  }

  std::optional<Value> pop() {
    auto guard = mem_.pin();
    // Mutant killed by test: reader_windows_sim_test
    // StackWindows/*.APopThatFindsTheStackEmptiedByAPopInFlightMakesItDurable (an empty top
    // is returned with no CAS after it).
    std::uintptr_t top = anchor_->top.load();
    for (;;) {
      Node* node = pointer_of<Node>(top);
      if (node == nullptr) return std::nullopt;
      // Mutant survives (izraelevitz): written before the node was published (Memory::publish
      // flushed it) and never after.
      const std::uintptr_t next = node->next.load();
      if (anchor_->top.compare_exchange(top, next)) {
        const Value value = node->value.load();
        mem_.retire(node);
        return value;
      }
    }
  }

  // Quiescent: f(value) from top to bottom.
  template <class F>
  void for_each(F&& f) const {
    for (const Node* n = pointer_of<Node>(anchor_->top.peek()); n != nullptr;
         n = pointer_of<Node>(n->next.peek()))
      f(n->value.peek());
  }
  std::size_t size() const {
    std::size_t n = 0;
    for_each([&](Value) { ++n; });
    return n;
  }

 private:
  struct Node {
    typename P::template immutable<Value> value;
    typename P::template shared<std::uintptr_t> next;
  };

  struct Anchor {
    typename P::template immutable<std::uint64_t> kind;
    typename P::template shared<std::uintptr_t> top;
  };

  void create() {
    anchor_ = this->template create_anchor<Anchor>(kind, [](Anchor& a) { a.top.init(0); });
  }

  void open_and_recover() requires(P::durable) {
    auto trace = this->open_anchor(anchor_, kind, "Treiber stack");
    if constexpr (P::planted == Fault::recovery_drops_node) {
      if (const Node* top = pointer_of<Node>(anchor_->top.peek())) {
        anchor_->top.store(top->next.peek());  // loses the top value
      }
    }
    for (Node* n = pointer_of<Node>(anchor_->top.peek()); n != nullptr;
         n = pointer_of<Node>(n->next.peek()))
      trace.visit_once(n);  // a node has one predecessor: a second visit is a cycle
    trace.finish();
  }

  Anchor* anchor_ = nullptr;
};

}  // namespace pmds::algo

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

#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::algo {

template <class P>
requires MemoryPolicy<P>
class TreiberStack {
 public:
  using Policy = P;
  static constexpr const char* name = "stack";
  static constexpr std::uint64_t kind = 0x706d64732e73746b;  // "pmds.stk"

  // Transient.
  TreiberStack() requires(!P::durable) { create(); }
  // Durable: creates the stack in `pool`, its anchor in root slot `root_slot`.
  TreiberStack(pm::Pool& pool, std::size_t root_slot) requires(P::durable) : mem_(pool, root_slot) {
    check_root_for_create<P>(mem_);
    create();
  }
  // Durable: opens the stack in root slot `root_slot` of `pool` and recovers it.
  TreiberStack(pm::Pool& pool, std::size_t root_slot, Recover) requires(P::durable)
      : mem_(pool, root_slot) {
    open_and_recover();
  }

  TreiberStack(const TreiberStack&) = delete;
  TreiberStack& operator=(const TreiberStack&) = delete;

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
    std::uintptr_t top = anchor_->top.load();
    for (;;) {
      node->next.init(top);              // still private: the node is not linked yet
      mem_.publish(node, sizeof(Node));  // contents durable before the link
      if (anchor_->top.compare_exchange(top, word_of(node), Access::link)) return;
    }
  }

  std::optional<Value> pop() {
    auto guard = mem_.pin();
    std::uintptr_t top = anchor_->top.load();
    for (;;) {
      Node* node = pointer_of<Node>(top);
      if (node == nullptr) return std::nullopt;
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
  void drain() { mem_.drain(); }
  typename P::Memory& memory() { return mem_; }

 private:
  struct Node {
    typename P::template shared<Value> value;
    typename P::template shared<std::uintptr_t> next;
  };

  struct Anchor {
    typename P::template shared<std::uint64_t> kind;
    typename P::template shared<std::uintptr_t> top;
  };

  void create() {
    anchor_ = new (mem_.allocate(sizeof(Anchor))) Anchor;
    anchor_->kind.init(kind);
    anchor_->top.init(0);
    mem_.publish(anchor_, sizeof(Anchor));
    mem_.set_root(anchor_);
  }

  void open_and_recover() requires(P::durable) {
    check_root_for_open<P>(mem_);
    anchor_ = static_cast<Anchor*>(mem_.root());
    auto trace = mem_.begin_recovery();
    trace.visit(anchor_);
    check_anchor_kind<P>(mem_, anchor_->kind.peek(), kind, "Treiber stack");
    if constexpr (P::planted_bug == PlantedBug::recovery_drops_node) {
      if (const Node* top = pointer_of<Node>(anchor_->top.peek())) {
        anchor_->top.store(top->next.peek());  // loses the top value
      }
    }
    for (Node* n = pointer_of<Node>(anchor_->top.peek()); n != nullptr;
         n = pointer_of<Node>(n->next.peek()))
      trace.visit(n);
    trace.finish();
  }

  typename P::Memory mem_;
  Anchor* anchor_ = nullptr;
};

}  // namespace pmds::algo

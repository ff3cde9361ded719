// pmds — seed 004's PBstack (§5): a linked stack whose state is its top pointer, served by one
// PBcomb instance, with the paper's elimination and recycling stack.
//
// A combiner serving a push takes a node, writes its value and, without elimination, links it on
// top at once. With elimination (§5, Figure 7a) a round keeps its pushes pending, above the top:
// a pop in the same round takes the last pending push (the push and the pop are linearized one
// after the other, in the round's order), and only the pushes left at the end of the round are
// linked on top and persisted, so an eliminated pair writes nothing durable. Before the record is
// persisted, the round's linked nodes are flushed, each line once (their pwbs precede the
// record's, and the record's pfence orders them all before the index switch); after the round's
// psync the nodes it popped are released. Only combiners touch nodes, one at a time under the
// lock, so nothing else can hold a released node.
//
// Recycling (§5, "Memory Management"): released nodes go on one recycling stack that every
// combiner takes nodes from first, so they are reused in the order they were first reserved
// (principle 3); without it they return to the pool's allocator (Figure 7a's PBSTACK-NO-REC).
// The recycling stack is volatile: after a crash every node not reachable from the top is
// returned to the allocator by recovery.
//
// Recovery: the nodes reachable from the current record's top are live; every other slot is
// freed (a round that linked nodes but never switched the index left them unreachable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/structure.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::combining {

// Figure 7a's variants: the paper's PBSTACK has both; PBSTACK-NO-ELIM and PBSTACK-NO-REC drop one.
struct StackOptions {
  bool elimination = true;
  bool recycling = true;
};

template <Persistence Mode, StackOptions Options = StackOptions{},
          PlantedBug Bug = PlantedBug::none>
class CombiningStack : public CombiningStructure<Mode> {
  using Base = CombiningStructure<Mode>;
  using Word = typename Base::Word;

 public:
  static constexpr const char* name = "stack";
  static constexpr std::uint64_t kind = 0x706d64732e736366;  // "pmds.scf"

  struct Node {
    Word value;
    Word next;
  };

  enum class Op : std::uint64_t { push = 1, pop = 2 };
  // A pop's response: the value, if the stack was not empty.
  using Response = MaybeValue;

  class Sequential {
   public:
    struct Request {
      Op op;
      std::uint64_t value;
    };
    using Response = CombiningStack::Response;

    explicit Sequential(CombiningStack& owner) : owner_(&owner) {}
    std::size_t state_words() const { return 1; }  // the top: Node*, 0 when empty

    Response apply(std::uint64_t* state, const Request& r) {
      if (r.op == Op::push) {
        Node* node = owner_->take_node();  // may throw PoolFull, having changed nothing
        node->value.store(r.value, std::memory_order_relaxed);
        if constexpr (Options.elimination) {
          pending_.push_back(node);
        } else {
          link(state, node);
        }
        return {0, 0};
      }
      if constexpr (Options.elimination) {
        if (!pending_.empty()) {  // eliminated: the node never became reachable or durable
          Node* node = pending_.back();
          pending_.pop_back();
          const std::uint64_t value = node->value.load(std::memory_order_relaxed);
          owner_->release_node(node);
          return {value, 1};
        }
      }
      if (state[0] == 0) return {0, 0};
      auto* node = reinterpret_cast<Node*>(state[0]);
      state[0] = node->next.load(std::memory_order_relaxed);
      popped_.push_back(node);
      return {node->value.load(std::memory_order_relaxed), 1};
    }
    // The round's remaining pushes go on top; its new nodes are flushed, each line once, before
    // the record (whose pfence orders them too).
    void before_persist(std::uint64_t* state) {
      for (Node* node : pending_) link(state, node);
      pending_.clear();
      if constexpr (Base::persistent) flush_lines_once(linked_, lines_);
      linked_.clear();
    }
    // The round is durable: what it popped is unreachable for good.
    void after_persist(const std::uint64_t*) {
      for (Node* n : popped_) owner_->release_node(n);
      popped_.clear();
    }

   private:
    void link(std::uint64_t* state, Node* node) {
      node->next.store(state[0], std::memory_order_relaxed);
      state[0] = reinterpret_cast<std::uint64_t>(node);
      linked_.push_back(node);
    }

    CombiningStack* owner_;
    std::vector<Node*> pending_;         // this round's pushes not yet linked (elimination)
    std::vector<const Node*> linked_;    // this round's linked nodes, to flush
    std::vector<Node*> popped_;          // this round's popped nodes, released when durable
    std::vector<std::uintptr_t> lines_;  // lines flushed this round
  };
  using Comb = PBComb<Sequential, Mode, Bug>;

  explicit CombiningStack(std::size_t slots = default_slots) requires(Mode == Persistence::none)
      : Base(slots) {
    create();
  }
  CombiningStack(CreateTag, pm::Pool& pool,
                 std::size_t slots = default_slots) requires(Mode != Persistence::none)
      : Base(pool, slots, create_new) {
    create();
  }
  CombiningStack(OpenTag, pm::Pool& pool) requires(Mode != Persistence::none)
      : Base(pool, open_existing) {
    auto trace = this->open_anchor(kind, &anchor_bytes, 1, 0, "combining stack");
    comb_.emplace(object_, area(), this->slots(), open_existing, trace);
    for (auto top = comb_->state_word(0); top != 0;) {
      trace.visit_once(reinterpret_cast<const Node*>(top));
      top = reinterpret_cast<const Node*>(top)->next.load(std::memory_order_relaxed);
    }
    trace.finish();
  }
  ~CombiningStack() {
    for (Node* n : recycled_) this->free_node(n);
    if constexpr (Mode == Persistence::none)
      for (auto top = comb_->state_word(0); top != 0;) {
        auto* node = reinterpret_cast<Node*>(top);
        top = node->next.load(std::memory_order_relaxed);
        this->free_node(node);
      }
  }

  void push(Value v) { comb_->perform({Op::push, v}); }
  std::optional<Value> pop() { return comb_->perform({Op::pop, 0}).get(); }
  void push(Value v, Ticket t) { comb_->perform(t, {Op::push, v}); }
  std::optional<Value> pop(Ticket t) { return comb_->perform(t, {Op::pop, 0}).get(); }

  Ticket next_ticket(std::size_t slot) const { return comb_->next_ticket(slot); }
  // took_effect, and for a pop the value it returned (nullopt: empty, or a push).
  Outcome<std::optional<Value>> recover_pending(Ticket t) const
      requires(Mode == Persistence::detectable) {
    const auto o = comb_->recover_pending(t);
    return {o.took_effect, o.response.get()};
  }

 private:
  static std::size_t anchor_bytes(std::size_t slots, std::uint64_t) {
    return Base::header_bytes + Comb::area_bytes(slots, 1);
  }
  void* area() const { return this->anchor() + Base::header_bytes; }
  void create() {
    this->create_anchor(kind, anchor_bytes(this->slots(), 0), 1);
    const std::uint64_t empty = 0;
    comb_.emplace(object_, area(), this->slots(), &empty, create_new);
    this->publish_anchor();
  }

  // Node memory, touched by the lock holder only.
  Node* take_node() {
    if constexpr (Options.recycling) {
      if (!recycled_.empty()) {
        Node* n = recycled_.back();
        recycled_.pop_back();
        return n;
      }
    }
    return static_cast<Node*>(this->allocate_node(sizeof(Node)));
  }
  void release_node(Node* n) {
    if constexpr (Options.recycling)
      recycled_.push_back(n);
    else
      this->free_node(n);
  }

  friend class Sequential;
  Sequential object_{*this};
  std::optional<Comb> comb_;
  std::vector<Node*> recycled_;  // the recycling stack (volatile; lock holder only)
};

}  // namespace pmds::combining

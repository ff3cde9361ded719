// pmds — seed 004's PBstack (§5): a linked stack whose state is its top pointer, served by one
// PBcomb instance.
//
// A combiner serving a push takes a node (the pool's allocator hands a combiner consecutive
// slots, and the slots it freed last first: the paper's recycling stack keeps recycled nodes in
// the order they were reserved, principle 3), writes {value, next = top} and makes it the top; a
// pop reads the top node's value and moves the top to its next. Before the record is persisted,
// the round's new nodes are flushed (their pwbs precede the record's, and the record's pfence
// orders them all before the index switch); after the round's psync the nodes it popped are
// freed. Only combiners touch nodes, one at a time under the lock, so nothing else can hold a
// freed node.
//
// Not yet: the paper's elimination (pairing a push with a pop inside one round), Figure 7a's
// "PBSTACK" against "PBSTACK-NO-ELIM".
//
// Recovery: the nodes reachable from the current record's top are live; every other slot is
// freed (a round that pushed but never switched the index left its nodes unreachable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/structure.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::combining {

template <Persistence Mode, PlantedBug Bug = PlantedBug::none>
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
    struct State {
      std::uint64_t top;  // Node*, 0 when empty
    };
    struct Request {
      Op op;
      std::uint64_t value;
    };
    using Response = CombiningStack::Response;

    explicit Sequential(CombiningStack& owner) : owner_(&owner) {}

    Response apply(State& s, const Request& r) {
      if (r.op == Op::push) {
        auto* node = static_cast<Node*>(owner_->allocate_node(sizeof(Node)));
        node->value.store(r.value, std::memory_order_relaxed);
        node->next.store(s.top, std::memory_order_relaxed);
        fresh_.push_back(node);
        s.top = reinterpret_cast<std::uint64_t>(node);
        return {0, 0};
      }
      if (s.top == 0) return {0, 0};
      auto* node = reinterpret_cast<Node*>(s.top);
      const std::uint64_t value = node->value.load(std::memory_order_relaxed);
      s.top = node->next.load(std::memory_order_relaxed);
      popped_.push_back(node);
      return {value, 1};
    }
    // The round's new nodes, flushed before the record (whose pfence orders them too).
    void before_persist(const State&) {
      if constexpr (Base::persistent)
        for (const Node* n : fresh_) pm::flush_range(n, sizeof(Node));
      fresh_.clear();
    }
    // The round is durable: what it popped is unreachable for good.
    void after_persist(const State&) {
      for (Node* n : popped_) owner_->free_node(n);
      popped_.clear();
    }

   private:
    CombiningStack* owner_;
    std::vector<const Node*> fresh_;
    std::vector<Node*> popped_;
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
    auto trace = this->open_anchor(kind, &anchor_bytes, 1, "combining stack");
    comb_.emplace(object_, area(), this->slots(), open_existing);
    for (auto top = comb_->peek_state().top; top != 0;) {
      trace.visit_once(reinterpret_cast<const Node*>(top));
      top = reinterpret_cast<const Node*>(top)->next.load(std::memory_order_relaxed);
    }
    trace.finish();
  }
  ~CombiningStack() {
    if constexpr (Mode == Persistence::none)
      for (auto top = comb_->peek_state().top; top != 0;) {
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
  static std::size_t anchor_bytes(std::size_t slots) {
    return Base::header_bytes + Comb::area_bytes(slots);
  }
  void* area() const { return this->anchor() + Base::header_bytes; }
  void create() {
    this->create_anchor(kind, anchor_bytes(this->slots()), 1);
    comb_.emplace(object_, area(), this->slots(), typename Sequential::State{0}, create_new);
    this->publish_anchor();
  }

  friend class Sequential;
  Sequential object_{*this};
  std::optional<Comb> comb_;
};

}  // namespace pmds::combining

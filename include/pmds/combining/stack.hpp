// pmds — Fatourou et al.'s PBstack and PWFstack (§5): a linked stack whose state is its top
// pointer, served by one PBcomb or PWFcomb instance, with the paper's elimination, written once
// over the protocol:
//
//   CombiningStack<PBComb, Persistence::detectable>   stack/pbcomb (-durable, -transient,
//                                                      -no-elim, -no-rec)
//   CombiningStack<PWFComb, Persistence::detectable>  stack/pwfcomb (-durable, -transient,
//                                                      -no-elim)
//
// A combiner serving a push takes a node, writes its value and, without elimination, links it on
// top at once. With elimination (§5, Figure 7a) a round keeps its pushes pending, above the top:
// a pop in the same round takes the last pending push (the push and the pop are linearized one
// after the other, in the round's order), and only the pushes left at the end of the round are
// linked on top and persisted, so an eliminated pair writes nothing durable. Before the record is
// persisted, the round's linked nodes are flushed, each line once (their pwbs precede the
// record's, and the record's pfence orders them all before the switch); once the round is
// durable the nodes it popped are released. A round's scratch (its pending, linked and popped
// nodes) is kept per combiner slot, since PWFcomb runs rounds of several slots at once.
//
// Node memory differs with the protocol, as the paper's does:
//   PBcomb   only the lock holder touches nodes, so a popped node is released as soon as its
//            round is durable, onto the recycling stack (§5, "Memory Management"): every combiner
//            takes nodes from it first, so they are reused in the order they were first reserved
//            (principle 3); without it (Figure 7a's PBSTACK-NO-REC) they return to the pool's
//            allocator. A push may fail with PoolFull inside the round (pbcomb.hpp withdraws it).
//   PWFcomb  rounds of other slots may be reading a node (popping from an older copy) when a
//            round that popped it switches, so popped nodes are retired to an epoch domain
//            (reclaim/epoch.hpp; the paper uses the validation scheme of its reference [11] to the
//            same end) and return to the allocator once no operation that could see them is
//            running: the recycling option does not apply. Each round allocates the nodes of the
//            pushes it applies, and a round whose SC fails must not fail before (apply must not
//            throw): so an operation first tops its slot's spare nodes up to one per slot (the
//            most pushes one round can apply) — PoolFull is thrown there, before anything is
//            announced — and its rounds take nodes from those spares and give back what a
//            discarded round took.
// The recycling stack and the spares are volatile: after a crash every node not reachable from
// the top is returned to the allocator by recovery.
//
// Recovery: the nodes reachable from the current record's top are live; every other slot is
// freed (a round that linked nodes but never switched left them unreachable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <variant>
#include <vector>

#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/pwfcomb.hpp"
#include "pmds/combining/structure.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::combining {

// Figure 7a's variants: the paper's PBSTACK has both; PBSTACK-NO-ELIM and PBSTACK-NO-REC drop one
// (PWFcomb: elimination only; recycling is PBcomb's).
struct StackOptions {
  bool elimination = true;
  bool recycling = true;
};

/// A LIFO stack of 8-byte values served by persistent software combining, with detectable
/// recoverability: on PBcomb (pmds::PBCombStack) or on PWFcomb (pmds::PWFCombStack).
///
/// - **Criterion:** detectable recoverability: an operation is durable when it returns, and it
///   may carry a Ticket (its slot and sequence number); after a crash and reopen,
///   recover_pending(ticket) says whether the operation took effect and, for a pop, what it
///   returned, and invoking it again with the same ticket returns that response without applying
///   it twice, or applies it if it had not taken effect.
/// - **Cost:** requests are applied in combining rounds; a push and a pop of the same round
///   eliminate each other and write nothing durable. A round writes back the nodes it linked and
///   the lines of its state record that changed, and fences before the switch to the new record.
///   PBcomb then writes the record index back and fences again: two fences a round, however many
///   requests it served, and none for a thread that another's round served. In PWFcomb every
///   thread runs rounds of its own (pwfcomb.hpp).
/// - **Progress:** PBcomb: blocking: a round holds the lock, and the other threads wait until a
///   round that served them is durable (a combiner stalled mid-round stalls them). PWFcomb:
///   wait-free, an operation taking at most two attempts (the pool allocator's slow paths,
///   sharing free slots between threads and growing the pool, take a mutex: pm/allocator.hpp).
/// - **Threads:** `slots` announcement slots, fixed at creation (default 16,
///   combining::default_slots; 1 to pmds::max_threads, else pmds::Error). A plain operation uses
///   the slot pmds::thread_id() and throws TooManyThreads when that id is not below `slots`; a
///   ticket names its slot, and a slot out of range throws pmds::Error.
/// - **A full pool:** PBcomb: a push whose round finds no slot for its node throws PoolFull to
///   the pushing thread: it did not take effect and the stack is unchanged. PWFcomb: a push first
///   tops its slot's spare nodes up to `slots` (the most pushes one round applies) and throws
///   PoolFull there, before it is announced. A pop needs none.
/// - **Bad input:** none: every 8-byte value, 0 and 2^64-1 included, can be pushed (pop returns
///   std::nullopt for an empty stack).
/// - **A bad pool:** opening a pool that holds no structure throws PoolError (bad_argument), one
///   that holds another structure or another record layout PoolError (layout_mismatch); a damaged
///   anchor, record index or chain of nodes throws PoolCorrupt at open.
///
/// Fatourou et al. §5 (PBstack, with elimination and recycling; PWFstack). Registered as
/// "stack/pbcomb" (pmds::DetectableStack) and "stack/pwfcomb".
template <template <class, Persistence, FaultPolicy> class Protocol, Persistence Mode,
          StackOptions Options = StackOptions{}, FaultPolicy Faults = NoFaults>
class CombiningStack : public CombiningStructure<Mode> {
  using Base = CombiningStructure<Mode>;
  using Word = typename Base::Word;

 public:
  static constexpr const char* name = "stack";
  static constexpr bool wait_free = concurrent_rounds<Protocol>;

  struct Node {
    Word value;
    Word next;
  };

 private:
  // One combiner slot's round scratch (PBcomb: used by the lock holder; PWFcomb: by the slot's
  // own thread only).
  struct Round {
    std::vector<Node*> pending;         // pushes not yet linked (elimination)
    std::vector<Node*> linked;          // nodes linked on top, to flush
    std::vector<Node*> popped;          // released once the round is durable
    std::vector<std::uintptr_t> lines;  // lines flushed this round
    std::vector<Node*> spare;           // PWFcomb: nodes reserved for the slot's rounds
    bool short_of_nodes = false;        // PWFcomb: a push found no spare (a full pool)
  };

 public:
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

    // Throws PoolFull (having changed nothing) on PBcomb only: PWFcomb's nodes are reserved.
    Response apply(std::uint64_t* state, const Request& r,
                   std::size_t combiner) noexcept(wait_free) {
      Round& round = owner_->rounds_[combiner];
      if (r.op == Op::push) {
        Node* node = owner_->take_node(round);
        if (node == nullptr) {  // PWFcomb, a full pool: the round is given up (complete())
          round.short_of_nodes = true;
          return {0, 0};
        }
        node->value.store(r.value, std::memory_order_relaxed);
        if constexpr (Options.elimination) {
          round.pending.push_back(node);
        } else {
          link(state, round, node);
        }
        return {0, 0};
      }
      if constexpr (Options.elimination) {
        if (!round.pending.empty()) {  // eliminated: the node never became reachable or durable
          Node* node = round.pending.back();
          round.pending.pop_back();
          const std::uint64_t value = node->value.load(std::memory_order_relaxed);
          owner_->give_back(round, node);
          return {value, 1};
        }
      }
      if (state[0] == 0) return {0, 0};
      auto* node = reinterpret_cast<Node*>(state[0]);
      state[0] = node->next.load(std::memory_order_relaxed);
      round.popped.push_back(node);
      return {node->value.load(std::memory_order_relaxed), 1};
    }
    // The round's remaining pushes go on top; its new nodes are flushed, each line once, before
    // the record (whose pfence orders them too).
    void before_persist(std::uint64_t* state, std::size_t combiner) {
      Round& round = owner_->rounds_[combiner];
      for (Node* node : round.pending) link(state, round, node);
      round.pending.clear();
      if constexpr (Base::persistent) flush_lines_once(round.linked, round.lines);
    }
    // The round switched and is durable: what it popped is unreachable for good.
    void after_persist(const std::uint64_t*, std::size_t combiner) {
      Round& round = owner_->rounds_[combiner];
      for (Node* n : round.popped) owner_->release_node(n);
      round.popped.clear();
      round.linked.clear();
    }
    bool complete(std::size_t combiner) const { return !owner_->rounds_[combiner].short_of_nodes; }
    // PWFcomb: the round did not switch; its nodes were seen by no one, and it popped nothing.
    void discard(std::size_t combiner) {
      Round& round = owner_->rounds_[combiner];
      for (Node* n : round.pending) owner_->give_back(round, n);
      for (Node* n : round.linked) owner_->give_back(round, n);
      round.pending.clear();
      round.linked.clear();
      round.popped.clear();
      round.short_of_nodes = false;
    }

   private:
    void link(std::uint64_t* state, Round& round, Node* node) {
      node->next.store(state[0], std::memory_order_relaxed);
      state[0] = reinterpret_cast<std::uint64_t>(node);
      round.linked.push_back(node);
    }

    CombiningStack* owner_;
  };
  using Comb = Protocol<Sequential, Mode, Faults>;
  static constexpr std::uint64_t kind = kind_word('s', Comb::kind_letter);  // "pmds.s2f/w"
  static_assert(!wait_free || Options.recycling,
                "the recycling stack is PBcomb's: a PWFcomb stack retires popped nodes to an "
                "epoch domain");

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
    rounds_.reset(new Round[this->slots()]);
    comb_.emplace(object_, area(), this->slots(), open_existing, trace);
    for (auto top = comb_->state_word(0); top != 0;) {
      trace.visit_once(reinterpret_cast<const Node*>(top));
      top = reinterpret_cast<const Node*>(top)->next.load(std::memory_order_relaxed);
    }
    trace.finish();
  }
  ~CombiningStack() {
    if constexpr (wait_free) epochs_.drain();
    for (Node* n : recycled_) this->free_node(n);
    for (std::size_t p = 0; p < this->slots(); ++p)
      for (Node* n : rounds_[p].spare) this->free_node(n);
    if constexpr (Mode == Persistence::none)
      for (auto top = comb_->state_word(0); top != 0;) {
        auto* node = reinterpret_cast<Node*>(top);
        top = node->next.load(std::memory_order_relaxed);
        this->free_node(node);
      }
  }

  // A plain operation is the ticketed one with its slot's next ticket (as in the protocols).
  void push(Value v) { push(v, next_ticket(detail::own_slot(this->slots()))); }
  std::optional<Value> pop() { return pop(next_ticket(detail::own_slot(this->slots()))); }
  void push(Value v, Ticket t) {
    run(t.slot, true, [&] { comb_->perform(t, {Op::push, v}); });
  }
  std::optional<Value> pop(Ticket t) {
    return run(t.slot, false, [&] { return comb_->perform(t, {Op::pop, 0}).get(); });
  }

  Ticket next_ticket(std::size_t slot) const { return comb_->next_ticket(slot); }
  // took_effect, and for a pop the value it returned (nullopt: empty, or a push).
  Outcome<std::optional<Value>> recover_pending(Ticket t) const
      requires(Mode == Persistence::detectable) {
    const auto o = comb_->recover_pending(t);
    return {o.took_effect, o.response.get()};
  }

  // Quiescent: the retired nodes of a PWFcomb stack go back to the allocator now.
  void drain() {
    if constexpr (wait_free) epochs_.drain();
  }

 private:
  static std::size_t anchor_bytes(std::size_t slots, std::uint64_t) {
    return Base::header_bytes + Comb::area_bytes(slots, 1);
  }
  void* area() const { return this->anchor() + Base::header_bytes; }
  void create() {
    this->create_anchor(kind, anchor_bytes(this->slots(), 0), 1);
    rounds_.reset(new Round[this->slots()]);
    const std::uint64_t empty = 0;
    comb_.emplace(object_, area(), this->slots(), &empty, create_new);
    this->publish_anchor();
  }

  // An operation of `slot`. PWFcomb: pinned (its rounds read nodes other rounds may pop), with the
  // slot's spares topped up to one per slot first. A push that cannot have them throws PoolFull
  // there, before anything is announced; a pop goes on with what it has (a round of its that
  // runs short is given up, and the push's own thread, which holds its spares, serves both).
  template <class F>
  auto run(std::size_t slot, bool push, F&& operation) {
    if constexpr (wait_free) {
      detail::check_slot(slot, this->slots());
      auto guard = epochs_.pin();
      std::vector<Node*>& spare = rounds_[slot].spare;
      try {
        while (spare.size() < this->slots())
          spare.push_back(static_cast<Node*>(this->allocate_node(sizeof(Node))));
      } catch (const PoolFull&) {
        if (push) throw;
      }
      return operation();
    } else {
      return operation();
    }
  }

  // A node for a push of `round`; back to where it came from if no one ever saw it.
  Node* take_node(Round& round) noexcept(wait_free) {
    if constexpr (wait_free) {
      // run() reserved one per slot (a round applies at most one push per slot), unless the
      // pool was full.
      if (round.spare.empty()) return nullptr;
      Node* n = round.spare.back();
      round.spare.pop_back();
      return n;
    } else {
      if constexpr (Options.recycling) {
        if (!recycled_.empty()) {
          Node* n = recycled_.back();
          recycled_.pop_back();
          return n;
        }
      }
      return static_cast<Node*>(this->allocate_node(sizeof(Node)));
    }
  }
  void give_back(Round& round, Node* n) {
    if constexpr (wait_free)
      round.spare.push_back(n);
    else
      release_node(n);
  }
  // A node unreachable in a durable state.
  void release_node(Node* n) {
    if constexpr (wait_free)
      epochs_.retire(n, [this](Node* node) { this->free_node(node); });
    else if constexpr (Options.recycling)
      recycled_.push_back(n);
    else
      this->free_node(n);
  }

  friend class Sequential;
  Sequential object_{*this};
  std::unique_ptr<Round[]> rounds_;
  std::optional<Comb> comb_;
  std::vector<Node*> recycled_;  // PBcomb's recycling stack (volatile; lock holder only)
  // PWFcomb's popped nodes wait here until no operation can be reading them.
  [[no_unique_address]] std::conditional_t<wait_free, reclaim::EpochDomain, std::monostate> epochs_;
};

}  // namespace pmds::combining

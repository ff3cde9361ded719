// pmds — Fatourou et al.'s PWFqueue (Appendix B, Algorithms 8–10): a linked queue with a dummy
// first node, served by two PWFcomb instances, one for enqueuers and one for dequeuers, each
// wait-free.
//
// Why not CombiningQueue<PWFComb> (queue.hpp): PBqueue's enqueue combiner links its nodes after
// the tail in place, which only the lock holder may do. PWFcomb runs rounds of several threads at
// once on copies of the state, and only the round whose SC succeeds may change the list. So a
// round builds its enqueues as a private local list, and the enqueuers' state holds three words
// (Figure 10's EStateRec):
//   tail        the last node of the queue (the local list's last, once a round served any)
//   old_tail    the tail before the round that built the local list, whose next must become...
//   local_head  ...the local list's first node; 0, 0 when there is nothing to connect
// The queue is the list from the dequeuers' head, with old_tail→local_head counted as a link
// whether or not it has been written yet. Every round connects the link its copy names before
// it serves anything (ENQUEUECONNECT / DEQUEUECONNECT: a CAS of old_tail's next from null), so at
// most one link is ever missing: the one the current state names.
//
// Persistence (Appendix B):
//   - an enqueue round flushes the nodes it created (their values and the links between them)
//     and the link it connected, before its record: so when the round's state is durable, every
//     link but its own old_tail→local_head is durable, and that one is in the record;
//   - before any thread writes the link old_tail→local_head (enqueuer or dequeuer), it makes the
//     enqueuers' S durable (PWFComb::make_durable; one load when the enqueue round's combiner has
//     persisted S, as it does right after its SC). Otherwise a dequeuer could follow the link and
//     return a value whose enqueue a crash then undoes, the window PBqueue's oldTail closes (the
//     paper's pseudocode leaves it to the order of the combiner's SC and pwb). The planted bug
//     dequeue_past_old_tail leaves the dequeuers' make_durable out, and the crash lab reports it;
//   - the dequeuers persist only their head (a link they wrote need not be durable: §B).
//
// Memory. Each enqueue round takes its nodes from its slot's spares, which an enqueue tops up to
// one per slot before it announces (apply must not throw: PoolFull is thrown there, before
// anything is announced; as in stack.hpp), and gives them back if its SC fails. A dequeued old
// head is retired to an epoch domain once the dequeue round is durable (rounds of other slots may
// be reading it; the paper leaves PWFqueue's reclamation as future work) — unless the enqueuers'
// current state still names it as old_tail: a round that copied that state would connect it, so
// it is retired only once the state has moved on (every later state names newer nodes). Every
// operation is pinned in the domain while it runs.
//
// Recovery: the nodes from the head to the tail are live, the walk taking old_tail→local_head
// where that link was not written; nothing is written (the first round after the crash connects
// it). If the head is past old_tail (dequeuers wrote the link and dequeued it), old_tail is kept
// too, deferred as above: that first round will still write its next. Every other slot is freed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "pmds/combining/pwfcomb.hpp"
#include "pmds/combining/queue_base.hpp"
#include "pmds/combining/structure.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::combining {

template <Persistence Mode, FaultPolicy Faults = NoFaults>
class WaitFreeCombiningQueue : public QueueBase<WaitFreeCombiningQueue<Mode, Faults>, Mode> {
  using Base = QueueBase<WaitFreeCombiningQueue, Mode>;
  friend Base;
  using typename Base::Word;

 public:
  using typename Base::Node, typename Base::Request, typename Base::Response;

 private:
  // The enqueuers' state words (Figure 10's EStateRec: Tail, oldTail, lHead).
  static constexpr std::size_t tail = 0, old_tail = 1, local_head = 2;

  // One enqueuer slot's round scratch (used by the slot's own thread only).
  struct EnqueueRound {
    std::vector<Node*> spare;           // nodes reserved for the slot's rounds
    std::vector<Node*> fresh;           // the nodes this round created (newItems)
    std::vector<std::uintptr_t> lines;  // lines flushed this round
    bool started = false;               // the round has connected its copy's link
    bool short_of_nodes = false;        // an enqueue found no spare (a full pool)
  };
  // One dequeuer slot's round scratch.
  struct DequeueRound {
    std::vector<Node*> dequeued;  // old heads, released once the round is durable
    std::vector<Node*> deferred;  // old heads the enqueuers' state still names as old_tail
  };

 public:
  class Enqueuers {
   public:
    using Request = WaitFreeCombiningQueue::Request;
    using Response = WaitFreeCombiningQueue::Response;
    explicit Enqueuers(WaitFreeCombiningQueue& q) : queue_(&q) {}
    std::size_t state_words() const { return 3; }

    // ENQUEUE (lines 60-68): the first enqueue of a round starts its local list.
    Response apply(std::uint64_t* state, const Request& r, std::size_t combiner) noexcept {
      EnqueueRound& round = queue_->enqueue_rounds_[combiner];
      if (!round.started) {  // line 32: connect the copy's link before serving anything
        round.started = true;
        queue_->connect(state[old_tail], state[local_head], true);
        state[old_tail] = 0;
        state[local_head] = 0;
      }
      if (round.spare.empty()) {  // a full pool: the round is given up (complete())
        round.short_of_nodes = true;
        return {0, 0};
      }
      Node* node = round.spare.back();
      round.spare.pop_back();
      node->value.store(r.value, std::memory_order_relaxed);
      node->next.store(0, std::memory_order_relaxed);
      if (state[old_tail] == 0) {
        state[old_tail] = state[tail];
        state[local_head] = reinterpret_cast<std::uint64_t>(node);
      } else {  // the previous node is this round's own
        reinterpret_cast<Node*>(state[tail])
            ->next.store(reinterpret_cast<std::uint64_t>(node), std::memory_order_relaxed);
      }
      state[tail] = reinterpret_cast<std::uint64_t>(node);
      round.fresh.push_back(node);
      return {0, 0};
    }
    // Line 43: the new nodes, each line once, before the record (whose pfence orders them).
    void before_persist(std::uint64_t*, std::size_t combiner) {
      EnqueueRound& round = queue_->enqueue_rounds_[combiner];
      if constexpr (Base::persistent) flush_lines_once(round.fresh, round.lines);
    }
    void after_persist(const std::uint64_t*, std::size_t combiner) {
      EnqueueRound& round = queue_->enqueue_rounds_[combiner];
      round.fresh.clear();
      round.started = false;
    }
    bool complete(std::size_t combiner) const {
      return !queue_->enqueue_rounds_[combiner].short_of_nodes;
    }
    // The round's SC failed: nobody saw its nodes (the link it connected stays: it is the
    // queue's own).
    void discard(std::size_t combiner) {
      EnqueueRound& round = queue_->enqueue_rounds_[combiner];
      round.spare.insert(round.spare.end(), round.fresh.begin(), round.fresh.end());
      round.fresh.clear();
      round.started = false;
      round.short_of_nodes = false;
    }

   private:
    WaitFreeCombiningQueue* queue_;
  };

  class Dequeuers {
   public:
    using Request = WaitFreeCombiningQueue::Request;
    using Response = WaitFreeCombiningQueue::Response;
    explicit Dequeuers(WaitFreeCombiningQueue& q) : queue_(&q) {}
    std::size_t state_words() const { return 1; }  // the head: Node*, the dummy

    // DEQUEUE (lines 88-92, 112-116).
    Response apply(std::uint64_t* state, const Request&, std::size_t combiner) noexcept {
      auto* head = reinterpret_cast<Node*>(state[0]);
      std::uint64_t next = head->next.load(std::memory_order_acquire);
      if (next == 0) next = queue_->connect_after(head);
      if (next == 0) return {0, 0};
      const std::uint64_t value =
          reinterpret_cast<Node*>(next)->value.load(std::memory_order_relaxed);
      state[0] = next;
      queue_->dequeue_rounds_[combiner].dequeued.push_back(head);
      return {value, 1};
    }
    // The round is durable: its old heads are unreachable for good.
    void after_persist(const std::uint64_t*, std::size_t combiner) {
      queue_->release(queue_->dequeue_rounds_[combiner]);
    }
    void discard(std::size_t combiner) { queue_->dequeue_rounds_[combiner].dequeued.clear(); }

   private:
    WaitFreeCombiningQueue* queue_;
  };

  using EnqueueComb = PWFComb<Enqueuers, Mode, Faults>;
  using DequeueComb = PWFComb<Dequeuers, Mode, Faults>;
  static constexpr std::size_t enqueue_state_words = 3;                            // EStateRec
  static constexpr std::uint64_t kind = kind_word('q', EnqueueComb::kind_letter);  // "pmds.q2w"

  explicit WaitFreeCombiningQueue(std::size_t slots = default_slots) requires(Mode ==
                                                                              Persistence::none)
      : Base(slots) {
    create();
  }
  WaitFreeCombiningQueue(CreateTag, pm::Pool& pool,
                         std::size_t slots = default_slots) requires(Mode != Persistence::none)
      : Base(pool, slots, create_new) {
    create();
  }
  WaitFreeCombiningQueue(OpenTag, pm::Pool& pool) requires(Mode != Persistence::none)
      : Base(pool, open_existing) {
    auto trace = this->open_anchor(kind, &anchor_bytes, 2, 0, "wait-free combining queue");
    make_rounds();
    enq_.emplace(enqueuers_, enqueue_area(), this->slots(), open_existing, trace);
    deq_.emplace(dequeuers_, dequeue_area(), this->slots(), open_existing, trace);
    std::uint64_t es[3];
    enq_->read_state(es);
    // old_tail and local_head are both set (a round's local list local_head..tail, to be linked
    // after old_tail) or both 0.
    if ((es[old_tail] == 0) != (es[local_head] == 0))
      trace.corrupt("the enqueuers' state names only one of old tail and local head");
    bool passed_old_tail = false, passed_local_head = false;
    for (std::uint64_t node = deq_->state_word(0);;) {
      trace.visit_once(reinterpret_cast<const Node*>(node));
      passed_old_tail = passed_old_tail || node == es[old_tail];
      passed_local_head = passed_local_head || (passed_old_tail && node == es[local_head]);
      if (node == es[tail]) break;
      node = successor(node, es);
      if (node == 0) trace.corrupt("the list from the head ends before it reaches the tail");
    }
    // The tail links nowhere: a round links past it only after its own state is durable, and
    // then the state names that round's tail. A dequeue would follow a link it holds.
    if (reinterpret_cast<const Node*>(es[tail])->next.load() != 0)
      trace.corrupt("the tail links to another node");
    // The tail is in the local list, which is entered from old_tail only through local_head.
    if (passed_old_tail && !passed_local_head)
      trace.corrupt("the list reaches the tail from the old tail without the local head");
    if (es[old_tail] != 0 && !passed_old_tail) {
      // Dequeued already, but the state names it: the first enqueue round will connect it. It
      // stays allocated until that round has switched the state (see release()).
      trace.visit_once(reinterpret_cast<const Node*>(es[old_tail]));
      // Its link is unwritten or already the connection that round would write.
      const std::uint64_t link = reinterpret_cast<const Node*>(es[old_tail])->next.load();
      if (link != 0 && link != es[local_head])
        trace.corrupt("the old tail links elsewhere than to the enqueuers' local head");
      dequeue_rounds_[0].deferred.push_back(reinterpret_cast<Node*>(es[old_tail]));
    }
    trace.finish();
  }
  ~WaitFreeCombiningQueue() {
    epochs_.drain();
    for (std::size_t p = 0; p < this->slots(); ++p)
      for (Node* n : enqueue_rounds_[p].spare) this->free_node(n);
    if constexpr (Mode == Persistence::none) {
      // (In a pool, a deferred old head stays: the durable state names it, and open keeps it.)
      for (std::size_t p = 0; p < this->slots(); ++p)
        for (Node* n : dequeue_rounds_[p].deferred) this->free_node(n);
      std::uint64_t es[3];
      enq_->read_state(es);
      for (std::uint64_t node = deq_->state_word(0); node != 0;) {
        const std::uint64_t next = node == es[tail] ? 0 : successor(node, es);
        this->free_node(reinterpret_cast<Node*>(node));
        node = next;
      }
    }
  }

  using Base::next_ticket;

  // A plain operation is the ticketed one with its slot's next ticket (as in the protocols).
  void enqueue(Value v) { enqueue(v, next_ticket(detail::own_slot(this->slots()), true)); }
  std::optional<Value> dequeue() {
    return dequeue(next_ticket(detail::own_slot(this->slots()), false));
  }
  void enqueue(Value v, Ticket t) {
    detail::check_slot(t.slot, this->slots());
    auto guard = epochs_.pin();
    // The spares of the slot's rounds: one per slot, the most enqueues one round applies.
    std::vector<Node*>& spare = enqueue_rounds_[t.slot].spare;
    while (spare.size() < this->slots())
      spare.push_back(static_cast<Node*>(this->allocate_node(sizeof(Node))));  // PoolFull
    enq_->perform(t, Request{v});
  }
  std::optional<Value> dequeue(Ticket t) {
    detail::check_slot(t.slot, this->slots());
    auto guard = epochs_.pin();
    return deq_->perform(t, Request{0}).get();
  }

  // Quiescent: the retired nodes go back to the allocator now.
  void drain() { epochs_.drain(); }

 private:
  using Base::anchor_bytes, Base::enqueue_area, Base::dequeue_area;
  void make_rounds() {
    enqueue_rounds_.reset(new EnqueueRound[this->slots()]);
    dequeue_rounds_.reset(new DequeueRound[this->slots()]);
  }
  void create() {
    this->create_anchor(kind, anchor_bytes(this->slots(), 0), 2);
    make_rounds();
    const std::uint64_t d = this->new_dummy();
    const std::uint64_t es[3] = {d, 0, 0};
    enq_.emplace(enqueuers_, enqueue_area(), this->slots(), es, create_new);
    deq_.emplace(dequeuers_, dequeue_area(), this->slots(), &d, create_new);
    this->publish_anchor();
  }

  // The node after `node` in the queue whose enqueuers' state is `es`, the unwritten link
  // included (0 after the tail).
  static std::uint64_t successor(std::uint64_t node, const std::uint64_t* es) {
    const std::uint64_t next =
        reinterpret_cast<const Node*>(node)->next.load(std::memory_order_acquire);
    return next == 0 && node == es[old_tail] ? es[local_head] : next;
  }

  // Writes the link last→first that an enqueuers' state named (nothing if last is 0), once the
  // enqueuers' S is durable; an enqueuer also flushes it (its round's pfence orders the flush
  // before its SC; a dequeuer's link is made durable by the next enqueue round).
  void connect(std::uint64_t last, std::uint64_t first, bool enqueuer) {
    if (last == 0) return;
    if (enqueuer || Faults::planted != Fault::dequeue_past_old_tail) enq_->make_durable();
    Word& next = reinterpret_cast<Node*>(last)->next;
    std::uint64_t expected = 0;
    next.compare_exchange_strong(expected, first, std::memory_order_acq_rel);
    if constexpr (Base::persistent)
      if (enqueuer) pm::flush(&next);
  }
  // A dequeue round found head's next null (DEQUEUECONNECT, lines 117-124): head is the tail, or
  // the enqueuers' state names it as old_tail and the link is not written yet. Returns head's
  // next (0: the queue was empty when the state was read).
  std::uint64_t connect_after(Node* head) {
    std::uint64_t es[3];
    enq_->read_state(es);
    // Read after the state: null at both reads, head was the tail when the state was read.
    if (const std::uint64_t next = head->next.load(std::memory_order_acquire)) return next;
    if (es[old_tail] != reinterpret_cast<std::uint64_t>(head)) return 0;
    connect(es[old_tail], es[local_head], false);
    return head->next.load(std::memory_order_acquire);
  }

  // A dequeue round is durable: its old heads (and those deferred before) go to the epoch
  // domain, except one the enqueuers' current state names as old_tail (see the header).
  void release(DequeueRound& round) {
    if (round.dequeued.empty() && round.deferred.empty()) return;
    std::uint64_t es[3];
    enq_->read_state(es);
    round.deferred.insert(round.deferred.end(), round.dequeued.begin(), round.dequeued.end());
    round.dequeued.clear();
    std::erase_if(round.deferred, [&](Node* n) {
      if (reinterpret_cast<std::uint64_t>(n) == es[old_tail]) return false;
      epochs_.retire(n, [this](Node* node) { this->free_node(node); });
      return true;
    });
  }

  Enqueuers enqueuers_{*this};
  Dequeuers dequeuers_{*this};
  std::unique_ptr<EnqueueRound[]> enqueue_rounds_;
  std::unique_ptr<DequeueRound[]> dequeue_rounds_;
  reclaim::EpochDomain epochs_;
  std::optional<EnqueueComb> enq_;
  std::optional<DequeueComb> deq_;
};

}  // namespace pmds::combining

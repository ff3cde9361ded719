// pmds — Fatourou et al.'s PBqueue (Appendix A, Algorithms 5–7): a linked queue with a dummy first
// node, served by two PBcomb instances, one for enqueuers (state: the tail) and one for dequeuers
// (state: the head), so enqueues run concurrently with dequeues.
//
// An enqueue combiner links new nodes after the tail and flushes every node it created or
// changed (toPersist, line 24) before its record; after its psync it publishes the tail in the
// volatile oldTail (line 31). A dequeue combiner never moves the head past oldTail (lines 57–59):
// the nodes after it may not be durable yet, and a dequeue that returned one of their values
// before the enqueue was durable would break detectability (the enqueue would be "not taken"
// after a crash while its value had been dequeued). A dequeued old head is freed after the
// dequeue round's psync; only combiners touch nodes, so nothing else can hold it.
//
// Recovery: the nodes from the head to the tail of the current records are live (the walk stops
// at the tail: a round that linked past it and never switched its index left nodes that are
// freed); oldTail starts at the tail (Algorithm 7, lines 73–74).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/queue_base.hpp"
#include "pmds/combining/structure.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::combining {

/// A FIFO queue of 8-byte values served by persistent software combining (PBcomb), with
/// detectable recoverability.
///
/// - **Criterion:** detectable recoverability: an operation is durable when it returns, and it
///   may carry a Ticket (its slot and sequence number); after a crash and reopen,
///   recover_pending(ticket, enqueue) says whether the operation took effect and, for a dequeue,
///   what it returned, and invoking it again with the same ticket returns that response without
///   applying it twice, or applies it if it had not taken effect. Enqueues and dequeues count
///   their tickets apart (next_ticket(slot, enqueue)).
/// - **Cost:** a combiner applies the announced requests in rounds. Enqueues and dequeues have a
///   PBcomb instance each, so an enqueue round and a dequeue round run at once. A round writes
///   back the lines of its state record that changed (and, enqueuing, the nodes it linked),
///   fences, switches the record index, writes it back and fences again: two fences a round,
///   however many requests it served; a thread that another's round served issues none.
/// - **Progress:** blocking: a round holds its instance's lock, and the other threads of that
///   side wait until a round that served them is durable (a combiner stalled mid-round stalls
///   them). pmds::PWFCombQueue is the wait-free protocol's queue.
/// - **Threads:** `slots` announcement slots, fixed at creation (default 16,
///   combining::default_slots; 1 to pmds::max_threads, else pmds::Error). A plain operation uses
///   the slot pmds::thread_id() and throws TooManyThreads when that id is not below `slots`; a
///   ticket names its slot, and a slot out of range throws pmds::Error.
/// - **A full pool:** an enqueue whose round finds no slot for its node throws PoolFull to the
///   enqueuing thread: it did not take effect and the queue is unchanged. A dequeue needs none.
/// - **Bad input:** none: every 8-byte value, 0 and 2^64-1 included, can be enqueued (dequeue
///   returns std::nullopt for an empty queue).
/// - **A bad pool:** opening a pool that holds no structure throws PoolError (bad_argument), one
///   that holds another structure or another record layout PoolError (layout_mismatch); a damaged
///   anchor, record index or list of nodes throws PoolCorrupt at open.
///
/// Fatourou et al. (PBqueue, Appendix A). Registered as "queue/pbcomb"; pmds::DetectableQueue.
template <Persistence Mode, FaultPolicy Faults = NoFaults>
class CombiningQueue : public QueueBase<CombiningQueue<Mode, Faults>, Mode> {
  using Base = QueueBase<CombiningQueue, Mode>;
  friend Base;
  using typename Base::Word;

 public:
  using typename Base::Node, typename Base::Request, typename Base::Response;

  class Enqueuers {
   public:
    using Request = CombiningQueue::Request;
    using Response = CombiningQueue::Response;
    explicit Enqueuers(CombiningQueue& q) : queue_(&q) {}
    std::size_t state_words() const { return 1; }  // the tail: Node*

    Response apply(std::uint64_t* state, const Request& r) {
      auto* node = static_cast<Node*>(queue_->allocate_node(sizeof(Node)));
      node->value.store(r.value, std::memory_order_relaxed);
      node->next.store(0, std::memory_order_relaxed);
      auto* tail = reinterpret_cast<Node*>(state[0]);
      tail->next.store(reinterpret_cast<std::uint64_t>(node), std::memory_order_relaxed);
      to_persist_.push_back(tail);  // lines 19, 23: every node changed or created
      state[0] = reinterpret_cast<std::uint64_t>(node);
      return {0, 0};
    }
    void before_persist(std::uint64_t* state, std::size_t) {
      if (to_persist_.empty()) return;
      to_persist_.push_back(reinterpret_cast<const Node*>(state[0]));  // line 23
      if constexpr (Base::persistent) flush_lines_once(to_persist_, lines_);
      to_persist_.clear();
    }
    // Line 31: the nodes up to the tail are durable; dequeuers may take them.
    void after_persist(const std::uint64_t* state, std::size_t) {
      queue_->old_tail_.store(state[0], std::memory_order_release);
    }

   private:
    CombiningQueue* queue_;
    std::vector<const Node*> to_persist_;
    std::vector<std::uintptr_t> lines_;  // lines flushed this round
  };

  class Dequeuers {
   public:
    using Request = CombiningQueue::Request;
    using Response = CombiningQueue::Response;
    explicit Dequeuers(CombiningQueue& q) : queue_(&q) {}
    std::size_t state_words() const { return 1; }  // the head: Node*, the dummy

    Response apply(std::uint64_t* state, const Request&) {
      auto* head = reinterpret_cast<Node*>(state[0]);
      if constexpr (Faults::planted == Fault::dequeue_past_old_tail) {
        if (head->next.load(std::memory_order_acquire) == 0) return {0, 0};
      } else {
        if (queue_->old_tail_.load(std::memory_order_acquire) == state[0]) return {0, 0};
      }
      auto* next = reinterpret_cast<Node*>(head->next.load(std::memory_order_relaxed));
      const std::uint64_t value = next->value.load(std::memory_order_relaxed);
      state[0] = reinterpret_cast<std::uint64_t>(next);
      dequeued_.push_back(head);
      return {value, 1};
    }
    // The round is durable: the old heads are unreachable for good.
    void after_persist(const std::uint64_t*, std::size_t) {
      for (Node* n : dequeued_) queue_->free_node(n);
      dequeued_.clear();
    }

   private:
    CombiningQueue* queue_;
    std::vector<Node*> dequeued_;
  };

  using EnqueueComb = PBComb<Enqueuers, Mode, Faults>;
  using DequeueComb = PBComb<Dequeuers, Mode, Faults>;
  static constexpr std::size_t enqueue_state_words = 1;                            // the tail
  static constexpr std::uint64_t kind = kind_word('q', EnqueueComb::kind_letter);  // "pmds.q2f"

  explicit CombiningQueue(std::size_t slots = default_slots) requires(Mode == Persistence::none)
      : Base(slots) {
    create();
  }
  CombiningQueue(CreateTag, pm::Pool& pool,
                 std::size_t slots = default_slots) requires(Mode != Persistence::none)
      : Base(pool, slots, create_new) {
    create();
  }
  CombiningQueue(OpenTag, pm::Pool& pool) requires(Mode != Persistence::none)
      : Base(pool, open_existing) {
    auto trace = this->open_anchor(kind, &anchor_bytes, 2, 0, "combining queue");
    enq_.emplace(enqueuers_, enqueue_area(), this->slots(), open_existing, trace);
    deq_.emplace(dequeuers_, dequeue_area(), this->slots(), open_existing, trace);
    const std::uint64_t tail = enq_->state_word(0);
    std::uint64_t node = deq_->state_word(0);
    for (;;) {
      trace.visit_once(reinterpret_cast<const Node*>(node));
      if (node == tail) break;
      node = reinterpret_cast<const Node*>(node)->next.load(std::memory_order_relaxed);
      if (node == 0) trace.corrupt("the list from the head ends before it reaches the tail");
    }
    trace.finish();
    old_tail_.store(tail, std::memory_order_relaxed);
  }
  ~CombiningQueue() {
    if constexpr (Mode == Persistence::none) {
      const std::uint64_t tail = enq_->state_word(0);
      for (std::uint64_t node = deq_->state_word(0);;) {
        auto* n = reinterpret_cast<Node*>(node);
        node = n->next.load(std::memory_order_relaxed);
        const bool last = reinterpret_cast<std::uint64_t>(n) == tail;
        this->free_node(n);
        if (last) break;
      }
    }
  }

  void enqueue(Value v) { enq_->perform(Request{v}); }
  std::optional<Value> dequeue() { return deq_->perform(Request{0}).get(); }
  void enqueue(Value v, Ticket t) { enq_->perform(t, Request{v}); }
  std::optional<Value> dequeue(Ticket t) { return deq_->perform(t, Request{0}).get(); }

 private:
  using Base::anchor_bytes, Base::enqueue_area, Base::dequeue_area;
  void create() {
    this->create_anchor(kind, anchor_bytes(this->slots(), 0), 2);
    const std::uint64_t d = this->new_dummy();
    enq_.emplace(enqueuers_, enqueue_area(), this->slots(), &d, create_new);
    deq_.emplace(dequeuers_, dequeue_area(), this->slots(), &d, create_new);
    old_tail_.store(d, std::memory_order_relaxed);
    this->publish_anchor();
  }

  friend class Enqueuers;
  friend class Dequeuers;
  Enqueuers enqueuers_{*this};
  Dequeuers dequeuers_{*this};
  // oldTail: the last node the enqueuers made durable (volatile; line 31 and Algorithm 7).
  alignas(64) detail::SpinWord<std::uint64_t> old_tail_{0};
  std::optional<EnqueueComb> enq_;
  std::optional<DequeueComb> deq_;
};

}  // namespace pmds::combining

// pmds — what Fatourou et al.'s two combining queues share: PBqueue (queue.hpp, two PBcomb
// instances) and PWFqueue (wait_free_queue.hpp, two PWFcomb instances). Both are a linked list with
// a dummy first node, served by one instance for the enqueuers (its state names the tail) and
// one for the dequeuers (its state is the head), whose areas lie in the anchor one after the
// other, the enqueuers' first. They differ in how an enqueue round links its nodes (in place under
// the lock, or as a local list that the next round connects) and so in the enqueuers' state.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "pmds/combining/structure.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::combining {

// `Queue` (CRTP) has the two instances as `enq_` and `deq_` (std::optional), their types as
// EnqueueComb and DequeueComb, and the size of the enqueuers' state as enqueue_state_words.
template <class Queue, Persistence Mode>
class QueueBase : public CombiningStructure<Mode> {
  using Base = CombiningStructure<Mode>;

 public:
  static constexpr const char* name = "queue";
  using Word = typename Base::Word;

  struct Node {
    Word value;
    Word next;
  };
  // A request's response: a dequeue's value, if the queue was not empty.
  using Response = MaybeValue;
  struct Request {
    std::uint64_t value;  // enqueue: the value; dequeue: unused
  };

  // Enqueues and dequeues are served by two instances, each with its own Deactivate bits, so a
  // slot's tickets count its enqueues and its dequeues separately (Algorithm 7 passes the same
  // seq to both; here each kind has its own sequence).
  Ticket next_ticket(std::size_t slot, bool enqueue) const {
    return enqueue ? queue().enq_->next_ticket(slot) : queue().deq_->next_ticket(slot);
  }
  // The pending enqueue (enqueue = true) or dequeue of the ticket's slot: took effect, and a
  // dequeue's value.
  Outcome<std::optional<Value>> recover_pending(Ticket t, bool enqueue) const
      requires(Mode == Persistence::detectable) {
    const auto o = enqueue ? queue().enq_->recover_pending(t) : queue().deq_->recover_pending(t);
    return {o.took_effect, o.response.get()};
  }

 protected:
  using Base::Base;

  // The anchor: the header, the enqueuers' area, the dequeuers' area (one word of state: the
  // head).
  static std::size_t anchor_bytes(std::size_t slots, std::uint64_t) {
    return Base::header_bytes + Queue::EnqueueComb::area_bytes(slots, Queue::enqueue_state_words) +
           Queue::DequeueComb::area_bytes(slots, 1);
  }
  void* enqueue_area() const { return this->anchor() + Base::header_bytes; }
  void* dequeue_area() const {
    return this->anchor() + Base::header_bytes +
           Queue::EnqueueComb::area_bytes(this->slots(), Queue::enqueue_state_words);
  }

  // The list's first dummy node (value 0, no next), written back: the persist of the records
  // that name it, which follows, fences it.
  std::uint64_t new_dummy() {
    auto* dummy = static_cast<Node*>(this->allocate_node(sizeof(Node)));
    dummy->value.store(0, std::memory_order_relaxed);
    dummy->next.store(0, std::memory_order_relaxed);
    if constexpr (Base::persistent) pm::flush_range(dummy, sizeof(Node));
    return reinterpret_cast<std::uint64_t>(dummy);
  }

 private:
  const Queue& queue() const { return static_cast<const Queue&>(*this); }
};

}  // namespace pmds::combining

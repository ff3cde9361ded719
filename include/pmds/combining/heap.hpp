// pmds — Fatourou et al.'s PBheap (§5): a bounded binary min-heap whose whole array is the
// combining state, so a round copies it, applies its requests with a sequential sift, and persists
// the lines that changed (the paper builds it on PBcomb and names a PWFcomb heap "a relatively easy
// task", §8: it is the same code on the other protocol here, since the state is self-contained).
//
//   CombiningHeap<PBComb, Persistence::detectable>   heap/pbcomb (-durable, -transient)
//   CombiningHeap<PWFComb, Persistence::detectable>  heap/pwfcomb (-durable, -transient)
//
// The state is [count][key 0 .. key capacity-1], capacity fixed at creation (kept in the anchor):
// a round copies capacity + 1 words, which is why the paper's Figure 7b falls as the heap grows.
// The anchor holds every record, so capacity × records × 8 bytes must fit in one pool chunk
// (PBcomb: 2 records; PWFcomb: 2·slots + 1); a larger heap's creation fails with PoolError.
// An insert into a full heap changes nothing and throws CapacityExceeded to its caller (as a
// ticketed operation it took effect, with that answer). Keys may repeat; reserved keys are
// rejected before anything is announced.
//
// Recovery: nothing to trace (no nodes); the anchor is the structure's only slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pmds/combining/protocol.hpp"
#include "pmds/combining/structure.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::combining {

/// A bounded min-priority queue of 8-byte keys, a binary heap of fixed capacity, served by
/// persistent software combining, with detectable recoverability: on PBcomb (pmds::PBCombHeap)
/// or on PWFcomb (pmds::PWFCombHeap).
///
/// - **Criterion:** detectable recoverability: an operation is durable when it returns, and it
///   may carry a Ticket (its slot and sequence number); after a crash and reopen,
///   recover_pending(ticket) says whether the operation took effect and what it returned (for
///   delete_min and get_min the key, std::nullopt when the heap was empty; for an insert, 0 if it
///   inserted, std::nullopt if the heap was full), and invoking it again with the same ticket
///   returns that response without applying it twice, or applies it if it had not taken effect.
/// - **Cost:** requests, get_min included, are applied in combining rounds; a round copies the
///   whole heap (capacity + 1 words), applies its requests, writes back the lines that changed
///   and fences before the switch to the new record. PBcomb then writes the record index back and
///   fences again: two fences a round, however many requests it served, and none for a thread
///   that another's round served. In PWFcomb every thread runs rounds of its own (pwfcomb.hpp).
/// - **Progress:** PBcomb: blocking: a round holds the lock, and the other threads wait until a
///   round that served them is durable (a combiner stalled mid-round stalls them). PWFcomb:
///   wait-free, an operation taking at most two attempts.
/// - **Threads:** `slots` announcement slots, fixed at creation (default 16,
///   combining::default_slots; 1 to pmds::max_threads, else pmds::Error). A plain operation uses
///   the slot pmds::thread_id() and throws TooManyThreads when that id is not below `slots`; a
///   ticket names its slot, and a slot out of range throws pmds::Error.
/// - **A full pool:** operations take nothing from the pool (the heap is its anchor, allocated at
///   creation), so a full pool does not stop them; creating a heap whose anchor does not fit in
///   one pool chunk throws PoolError. A full heap does: an insert into it throws CapacityExceeded
///   and inserts nothing (as a ticketed operation it took effect, with that answer). The capacity
///   is fixed at creation: 1 to max_capacity (2^16) keys, 1024 by default, else pmds::Error.
/// - **Bad input:** keys 0 and 2^64-1 throw ReservedKey before anything is announced; keys may
///   repeat.
/// - **A bad pool:** opening a pool that holds no structure throws PoolError (bad_argument), one
///   that holds another structure or another record layout PoolError (layout_mismatch); a damaged
///   anchor or record index, or a count of keys above the capacity, throws PoolCorrupt at open.
///
/// Fatourou et al. §5 (PBheap; the PWFcomb heap that §8 suggests). Registered as "heap/pbcomb"
/// (pmds::DetectablePriorityQueue) and "heap/pwfcomb".
template <template <class, Persistence, FaultPolicy> class Protocol, Persistence Mode,
          FaultPolicy Faults = NoFaults>
class CombiningHeap : public CombiningStructure<Mode> {
  using Base = CombiningStructure<Mode>;

 public:
  static constexpr const char* name = "heap";
  static constexpr std::size_t default_capacity = 1024;
  static constexpr std::size_t max_capacity = std::size_t{1} << 16;

  enum class Op : std::uint64_t { insert = 1, delete_min = 2, get_min = 3 };
  // delete_min and get_min: the key, if the heap was not empty; insert: present = 0 when full.
  using Response = MaybeValue;

  class Sequential {
   public:
    struct Request {
      Op op;
      Key key;
    };
    using Response = CombiningHeap::Response;

    explicit Sequential(std::size_t capacity) : capacity_(capacity) {}
    std::size_t state_words() const { return 1 + capacity_; }

    Response apply(std::uint64_t* state, const Request& r) noexcept {
      std::uint64_t& count = state[0];
      Key* keys = state + 1;
      switch (r.op) {
        case Op::insert:
          if (count == capacity_) return {0, 0};
          keys[count] = r.key;
          sift_up(keys, count++);
          return {0, 1};
        case Op::delete_min: {
          if (count == 0) return {0, 0};
          const Key min = keys[0];
          keys[0] = keys[--count];
          sift_down(keys, count, 0);
          return {min, 1};
        }
        case Op::get_min:
          return count == 0 ? Response{0, 0} : Response{keys[0], 1};
      }
      return {0, 0};
    }

   private:
    static void sift_up(Key* keys, std::size_t i) {
      while (i > 0) {
        const std::size_t parent = (i - 1) / 2;
        if (keys[parent] <= keys[i]) return;
        std::swap(keys[parent], keys[i]);
        i = parent;
      }
    }
    static void sift_down(Key* keys, std::size_t n, std::size_t i) {
      for (;;) {
        const std::size_t left = 2 * i + 1, right = left + 1;
        std::size_t smallest = i;
        if (left < n && keys[left] < keys[smallest]) smallest = left;
        if (right < n && keys[right] < keys[smallest]) smallest = right;
        if (smallest == i) return;
        std::swap(keys[i], keys[smallest]);
        i = smallest;
      }
    }

    std::size_t capacity_;
  };
  using Comb = Protocol<Sequential, Mode, Faults>;
  static constexpr std::uint64_t kind = kind_word('h', Comb::kind_letter);  // "pmds.h2f/w"

  explicit CombiningHeap(std::size_t capacity = default_capacity,
                         std::size_t slots = default_slots) requires(Mode == Persistence::none)
      : Base(slots), object_(checked_capacity(capacity)) {
    create();
  }
  CombiningHeap(CreateTag, pm::Pool& pool, std::size_t capacity = default_capacity,
                std::size_t slots = default_slots) requires(Mode != Persistence::none)
      : Base(pool, slots, create_new), object_(checked_capacity(capacity)) {
    create();
  }
  CombiningHeap(OpenTag, pm::Pool& pool) requires(Mode != Persistence::none)
      : Base(pool, open_existing), object_(0) {
    auto trace = this->open_anchor(kind, &anchor_bytes, 1, max_capacity, "combining heap");
    object_ = Sequential(this->parameter());
    comb_.emplace(object_, area(), this->slots(), open_existing, trace);
    if (comb_->state_word(0) > this->parameter())
      trace.corrupt("the heap holds " + std::to_string(comb_->state_word(0)) +
                    " keys, more than its capacity " + std::to_string(this->parameter()));
    trace.finish();
  }

  void insert(Key k) { check_insert(comb_->perform(insert_request(k))); }
  std::optional<Key> delete_min() { return comb_->perform({Op::delete_min, 0}).get(); }
  std::optional<Key> get_min() { return comb_->perform({Op::get_min, 0}).get(); }
  void insert(Key k, Ticket t) { check_insert(comb_->perform(t, insert_request(k))); }
  std::optional<Key> delete_min(Ticket t) { return comb_->perform(t, {Op::delete_min, 0}).get(); }
  std::optional<Key> get_min(Ticket t) { return comb_->perform(t, {Op::get_min, 0}).get(); }

  Ticket next_ticket(std::size_t slot) const { return comb_->next_ticket(slot); }
  // took_effect, and the response: for delete_min and get_min the key (nullopt: the heap was
  // empty); for an insert a value (0) if it inserted, nullopt if the heap was full.
  Outcome<std::optional<Key>> recover_pending(Ticket t) const
      requires(Mode == Persistence::detectable) {
    const auto o = comb_->recover_pending(t);
    return {o.took_effect, o.response.get()};
  }

  std::size_t capacity() const { return this->parameter(); }
  // The block the heap takes from its pool (its anchor, which holds every record): capacity ×
  // records words, which must fit in one chunk.
  static std::size_t largest_block_for(std::size_t capacity, std::size_t slots = default_slots) {
    return anchor_bytes(slots, capacity);
  }
  // Quiescent: f(key) for every key, in heap-array order.
  template <class F>
  void for_each(F&& f) const {
    const std::uint64_t count = comb_->state_word(0);
    for (std::uint64_t i = 0; i < count; ++i) f(comb_->state_word(1 + i));
  }

 private:
  static std::size_t checked_capacity(std::size_t capacity) {
    if (capacity == 0 || capacity > max_capacity)
      throw Error("pmds: a combining heap holds 1 to " + std::to_string(max_capacity) +
                  " keys, not " + std::to_string(capacity));
    return capacity;
  }
  static std::size_t anchor_bytes(std::size_t slots, std::uint64_t capacity) {
    return Base::header_bytes + Comb::area_bytes(slots, 1 + capacity);
  }
  static typename Sequential::Request insert_request(Key k) {
    check_key(k);
    return {Op::insert, k};
  }
  void check_insert(const Response& r) const {
    if (!r.present)
      throw CapacityExceeded("pmds: the combining heap is full (capacity " +
                             std::to_string(capacity()) + " keys); nothing was inserted");
  }
  void* area() const { return this->anchor() + Base::header_bytes; }
  void create() {
    const std::size_t capacity = object_.state_words() - 1;
    this->create_anchor(kind, anchor_bytes(this->slots(), capacity), 1, capacity);
    const std::vector<std::uint64_t> empty(1 + capacity, 0);
    comb_.emplace(object_, area(), this->slots(), empty.data(), create_new);
    this->publish_anchor();
  }

  Sequential object_;
  std::optional<Comb> comb_;
};

}  // namespace pmds::combining

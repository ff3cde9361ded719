// pmds — PBcomb, seed 004's blocking persistent software combining (Algorithms 1–2), written once
// over the sequential object it serves and the persistence it gives.
//
// A thread announces its request in a volatile array (one cache line per slot) and tries to take
// the odd/even lock. The holder, the combiner, copies the current state record, applies every
// active request to the copy, persists the copy, switches the persistent index to it and
// persists the index (one psync), then releases the lock. A thread that did not get the lock waits
// for the holder it saw to release it and, if its request was served, returns its response
// without ever taking the lock (§3, "the LockVal trick": if a later combiner served it, it waits
// for that one to release too, so it never returns before the psync that made its request
// durable).
//
// Persistence (the `Persistence` parameter):
//   none        the paper's volatile PBcomb (Figure 8): the same code, records in DRAM, no
//               persistence instruction — the transient twin of every ratio;
//   durable     only the state part of the record is persisted (§3: "the only field of StateRec
//               that needs to be persisted is st"): durable linearizability, nothing to recover;
//   detectable  the whole record — state, ReturnVal[n], Deactivate[n] — is persisted in one run of
//               lines (principle 3), so after a crash a thread learns from its Deactivate bit and
//               the parity of its ticket whether its pending operation took effect, and its
//               response (Algorithm 1's RECOVER).
//
// The sequential object (a class with these members; see combining/atomic_float.hpp):
//   using State, Request, Response    trivially copyable; State and Response multiples of 8 bytes
//   Response apply(State&, const Request&)   one request applied to the combiner's copy; if it
//                             throws (PoolFull), it must have changed nothing: the request is
//                             then not applied and its own thread gets the exception
//   void before_persist(const State&)  optional: persist what the round wrote outside the record
//   (new
//                             nodes), before the record's own flushes
//   void after_persist(const State&)   optional: after the psync, before the lock is released
//                             (free what the round unlinked, publish the queue's oldTail)
//
// Layout: the persistent part is one 64-byte line with the index (MIndex) followed by two records;
// a record is [state][response of slot 0 .. n-1][deactivate bits], rounded up to whole lines.
// It lives wherever the owner puts it (a pool slot for durable objects, DRAM otherwise); its
// words are pm::atomic (DRAM std::atomic for `none`) and the combiner's working copy is a DRAM
// buffer written back word by word before the flushes.
//
// Slots: a combining object serves `slots` threads (chosen at creation, persistent). Plain
// operations use slot pmds::thread_id() and throw TooManyThreads beyond it; ticketed operations
// name their slot (interfaces.hpp, Ticket). The combiner scans and copies all `slots` entries per
// round, so the default is small (combining::default_slots).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::combining {

enum class Persistence : std::uint8_t { none, durable, detectable };

constexpr Criterion criterion_of(Persistence p) {
  return p == Persistence::none      ? Criterion::none
         : p == Persistence::durable ? Criterion::durable
                                     : Criterion::detectable;
}

// Threads a combining object serves unless created with another count: the paper's experiments
// run one slot per thread, and every round scans and copies them all.
inline constexpr std::size_t default_slots = 16;
inline constexpr std::size_t max_slots = pmds::max_threads;

// The planted bugs of the crash lab's combining fixtures (docs/ARCHITECTURE.md §4); none compiles
// them away.
enum class PlantedBug : std::uint8_t {
  none,
  no_fence_before_switch,      // no pfence between the record's pwbs and the MIndex switch (§3)
  no_psync_before_release,     // no psync after the MIndex pwb: the lock is released (and served
                               // threads return) with the switch left to the next round's pfence
  dequeue_past_old_tail,       // PBqueue: the dequeue combiner ignores oldTail (Appendix A)
  recovery_reports_not_taken,  // recover_pending says "not taken" for a request that took effect
};

namespace detail {

// Volatile words a waiting thread spins on. Under the simulated backend they go through the
// access layer, so every read is a preemption point of the crash lab's scheduler (a spin on a
// plain std::atomic would keep the turn forever); elsewhere they are plain std::atomic.
#if defined(PMDS_BACKEND_SIMULATED)
template <class T>
using SpinWord = pm::atomic<T>;
#else
template <class T>
using SpinWord = std::atomic<T>;
#endif

inline void spin_pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

constexpr std::size_t words_per_line = 8;
constexpr std::size_t round_to_line(std::size_t words) {
  return (words + words_per_line - 1) / words_per_line * words_per_line;
}

}  // namespace detail

// One PBcomb instance: the announce array, the lock and the persistent records of one sequential
// object. The owner (the data structure) holds the object and the persistent area.
template <class Object, Persistence Mode, PlantedBug Bug = PlantedBug::none>
class PBComb {
 public:
  using State = typename Object::State;
  using Request = typename Object::Request;
  using Response = typename Object::Response;
  static constexpr bool persistent = Mode != Persistence::none;
  using Word =
      std::conditional_t<persistent, pm::atomic<std::uint64_t>, std::atomic<std::uint64_t>>;

  static_assert(std::is_trivially_copyable_v<State> && sizeof(State) % 8 == 0);
  static_assert(std::is_trivially_copyable_v<Request>);
  static_assert(std::is_trivially_copyable_v<Response> && sizeof(Response) % 8 == 0);

  static constexpr std::size_t state_words = sizeof(State) / 8;
  static constexpr std::size_t response_words = sizeof(Response) / 8;

  // Words of one record for `slots` threads, whole lines.
  static constexpr std::size_t record_words(std::size_t slots) {
    return detail::round_to_line(state_words + slots * response_words + (slots + 63) / 64);
  }
  // Bytes of the persistent area: the index line and two records.
  static constexpr std::size_t area_bytes(std::size_t slots) {
    return (detail::words_per_line + 2 * record_words(slots)) * 8;
  }

  // Builds the initial records (index 0, `initial` state, no request served) in `area` (64-byte
  // aligned, area_bytes(slots), private to the caller) and persists them; the caller publishes
  // the area afterwards.
  PBComb(Object& object, void* area, std::size_t slots, const State& initial, CreateTag)
      : PBComb(object, area, slots) {
    std::vector<std::uint64_t> record(record_words_, 0);
    std::memcpy(record.data(), &initial, sizeof(State));
    index_word().store(0, std::memory_order_relaxed);
    for (int r = 0; r < 2; ++r) write_record(r, record);
    if constexpr (persistent) pm::persist(area_, area_bytes(slots_));
  }

  // The instance an opened pool holds: checks the index, and starts every slot with no request
  // pending (its activate bit equal to its Deactivate bit: the paper's RECOVER, line 3, for all).
  PBComb(Object& object, void* area, std::size_t slots, OpenTag) : PBComb(object, area, slots) {
    const std::uint64_t index = index_word().load(std::memory_order_relaxed);
    if (index > 1)
      throw PoolCorrupt("pmds: combining record index is " + std::to_string(index) +
                        " (0 or 1 expected): not a combining object, or a damaged one");
    for (std::size_t q = 0; q < slots_; ++q) {
      const std::uint64_t bit = deactivate_of(index, q);
      seq_[q].value = bit;
      requests_[q].word.store(bit, std::memory_order_relaxed);
    }
  }

  PBComb(const PBComb&) = delete;
  PBComb& operator=(const PBComb&) = delete;

  std::size_t slots() const { return slots_; }

  // A plain operation of the calling thread (slot pmds::thread_id()).
  Response perform(const Request& request) {
    const std::size_t slot = pmds::thread_id();
    if (slot >= slots_)
      throw TooManyThreads("pmds: thread id " + std::to_string(slot) +
                           " exceeds the combining object's " + std::to_string(slots_) +
                           " slots (create it with more slots)");
    return perform(Ticket{slot, seq_[slot].value + 1}, request);
  }

  // A ticketed operation (the paper's PBCOMB and RECOVER in one): if the slot's last served
  // request has this ticket's parity, the ticket names an operation that already took effect and
  // its response is returned without applying it again; otherwise the request is applied.
  Response perform(Ticket ticket, const Request& request) {
    check_slot(ticket.slot);
    const std::size_t p = ticket.slot;
    const std::uint64_t activate = ticket.seq & 1;
    seq_[p].value = ticket.seq;
    // Served before (a ticket invoked again after a crash or a retry): its response, durable
    // since the operation returned or since the crash. Checked before announcing, so no combiner
    // can be serving this slot now (it has no active request).
    if (deactivate_of(current_index(), p) == activate) return response_of(current_index(), p);
    Announcement& a = requests_[p];
    a.failed.store(false, std::memory_order_relaxed);  // published by the release below
    a.request = request;
    a.word.store(activate | valid_bit, std::memory_order_release);

    std::uint64_t lock_value;
    for (;;) {
      lock_value = lock_.load(std::memory_order_acquire);
      if (lock_value % 2 == 0) {
        // `expected` is a copy: a failed CAS overwrites it with the current value, and the
        // paper's lval + 1 (line 8) is the value of the thread that took the lock from lval.
        std::uint64_t expected = lock_value;
        ++lock_value;  // the odd value the lock holder has: this thread, or the one that won
        if (lock_.compare_exchange_strong(expected, lock_value, std::memory_order_acq_rel)) break;
      }
      while (lock_.load(std::memory_order_acquire) == lock_value) detail::spin_pause();
      if (deactivate_of(current_index(), p) == activate) {
        // Served. If by a later combiner than the one waited for, wait until it is done too:
        // its psync makes the response durable (Algorithm 2, line 11).
        if (lock_val_.load(std::memory_order_acquire) != lock_value)
          while (lock_.load(std::memory_order_acquire) == lock_value + 2) detail::spin_pause();
        return response_of(current_index(), p);
      }
      if (a.failed.load(std::memory_order_acquire)) withdraw_and_throw(ticket);
    }
    const Response mine = combine(lock_value, p);
    if (a.failed.load(std::memory_order_relaxed)) withdraw_and_throw(ticket);
    return mine;
  }

  // The slot's next ticket: what a plain operation of that slot would use.
  Ticket next_ticket(std::size_t slot) const {
    check_slot(slot);
    return Ticket{slot, seq_[slot].value + 1};
  }

  // After open, before the slot runs another operation: did the operation with this ticket take
  // effect, and with what response (Algorithm 1, lines 4–6).
  Outcome<Response> recover_pending(Ticket ticket) const requires(Mode == Persistence::detectable) {
    check_slot(ticket.slot);
    const std::uint64_t index = current_index();
    bool took = deactivate_of(index, ticket.slot) == (ticket.seq & 1);
    if constexpr (Bug == PlantedBug::recovery_reports_not_taken) took = false;
    return {took, took ? response_of(index, ticket.slot) : Response{}};
  }

  // The current state (quiescent: recovery, tests, destructors).
  State peek_state() const {
    State s;
    std::uint64_t words[state_words];
    const std::size_t base = record_base(current_index());
    for (std::size_t i = 0; i < state_words; ++i)
      words[i] = area_[base + i].load(std::memory_order_relaxed);
    std::memcpy(&s, words, sizeof(State));
    return s;
  }

 private:
  static constexpr std::uint64_t valid_bit = 2;

  // One slot's announcement, alone on its line: written by its thread, read by combiners.
  // `failed`: a combiner's apply threw for this request (PoolFull: no node for a push); the
  // request is not applied, later combiners skip it, and its thread withdraws it and throws.
  struct alignas(64) Announcement {
    detail::SpinWord<std::uint64_t> word{0};  // activate bit | valid bit
    Request request{};
    std::atomic<bool> failed{false};
    std::exception_ptr failure;  // written by the combiner that set `failed`
  };
  // The slot's sequence number, written only by the slot's own thread (or by open).
  struct alignas(64) Sequence {
    std::uint64_t value = 0;
  };

  PBComb(Object& object, void* area, std::size_t slots)
      : object_(&object),
        area_(static_cast<Word*>(area)),
        slots_(slots),
        record_words_(record_words(slots)),
        requests_(new Announcement[slots]),
        seq_(new Sequence[slots]),
        scratch_(record_words_, 0) {
    if (slots == 0 || slots > max_slots)
      throw Error("pmds: a combining object serves 1 to " + std::to_string(max_slots) +
                  " slots, not " + std::to_string(slots));
  }

  // A request that failed is withdrawn (its activate bit set back to its Deactivate bit, so no
  // combiner sees it active) and its slot's sequence rolled back: it never took effect, and
  // the slot's next operation takes its ticket's parity. The failure is rethrown.
  [[noreturn]] void withdraw_and_throw(Ticket ticket) {
    Announcement& a = requests_[ticket.slot];
    a.word.store(((ticket.seq & 1) ^ 1) | valid_bit, std::memory_order_release);
    seq_[ticket.slot].value = ticket.seq - 1;
    std::rethrow_exception(a.failure);
  }

  void check_slot(std::size_t slot) const {
    if (slot >= slots_)
      throw Error("pmds: ticket slot " + std::to_string(slot) +
                  " is out of range (the object has " + std::to_string(slots_) + " slots)");
  }

  Word& index_word() const { return area_[0]; }
  std::size_t record_base(std::uint64_t index) const {
    return detail::words_per_line + index * record_words_;
  }
  std::size_t response_offset(std::size_t slot) const {
    return state_words + slot * response_words;
  }
  std::size_t deactivate_offset(std::size_t slot) const {
    return state_words + slots_ * response_words + slot / 64;
  }

  std::uint64_t current_index() const { return index_word().load(std::memory_order_acquire); }
  std::uint64_t deactivate_of(std::uint64_t index, std::size_t slot) const {
    return (area_[record_base(index) + deactivate_offset(slot)].load(std::memory_order_acquire) >>
            (slot % 64)) &
           1;
  }
  Response response_of(std::uint64_t index, std::size_t slot) const {
    std::uint64_t words[response_words];
    const std::size_t base = record_base(index) + response_offset(slot);
    for (std::size_t i = 0; i < response_words; ++i)
      words[i] = area_[base + i].load(std::memory_order_acquire);
    Response r;
    std::memcpy(&r, words, sizeof(Response));
    return r;
  }

  void write_record(std::uint64_t index, const std::vector<std::uint64_t>& record) {
    const std::size_t base = record_base(index);
    for (std::size_t i = 0; i < record_words_; ++i)
      area_[base + i].store(record[i], std::memory_order_relaxed);
  }

  // The combiner's round (Algorithm 2, lines 14–30), `lock_value` the odd value it locked with.
  Response combine(std::uint64_t lock_value, std::size_t self) {
    const std::uint64_t current = index_word().load(std::memory_order_relaxed);
    const std::uint64_t next = 1 - current;
    std::uint64_t* work = scratch_.data();
    const std::size_t base = record_base(current);
    for (std::size_t i = 0; i < record_words_; ++i)
      work[i] = area_[base + i].load(std::memory_order_relaxed);  // copy the current record

    State state;
    std::memcpy(&state, work, sizeof(State));
    for (std::size_t q = 0; q < slots_; ++q) {
      const std::uint64_t w = requests_[q].word.load(std::memory_order_acquire);
      std::uint64_t& deactivate = work[deactivate_offset(q)];
      const std::uint64_t activate = w & 1;
      if ((w & valid_bit) == 0 || activate == ((deactivate >> (q % 64)) & 1)) continue;
      Announcement& a = requests_[q];
      if (a.failed.load(std::memory_order_relaxed)) continue;  // its thread withdraws it
      Response r;
      try {
        r = object_->apply(state, a.request);  // changes nothing when it throws
      } catch (...) {
        a.failure = std::current_exception();
        a.failed.store(true, std::memory_order_release);
        continue;
      }
      std::memcpy(work + response_offset(q), &r, sizeof(Response));
      deactivate ^= std::uint64_t{1} << (q % 64);  // now equal to the activate bit
    }
    std::memcpy(work, &state, sizeof(State));
    if constexpr (requires { object_->before_persist(state); }) object_->before_persist(state);

    // MemState[ind] := the new record, and pwb(&MemState[ind]) (line 23) — only for the lines
    // that differ from what the record already holds. That record was written two rounds ago,
    // flushed and fenced before its index switch (or read back by recovery), so an unchanged
    // line is durable as it is: a round writes and flushes the state's line and the lines of the
    // slots it served, not all `slots` responses (principle 1; the paper persists the whole
    // record). The durable-only mode persists the state's lines only (§3).
    const std::size_t target = record_base(next);
    const std::size_t persisted_words =
        Mode == Persistence::detectable ? record_words_ : detail::round_to_line(state_words);
    for (std::size_t line = 0; line < record_words_; line += detail::words_per_line) {
      bool changed = false;
      for (std::size_t i = line; i < line + detail::words_per_line; ++i)
        if (area_[target + i].load(std::memory_order_relaxed) != work[i]) {
          area_[target + i].store(work[i], std::memory_order_relaxed);
          changed = true;
        }
      if constexpr (persistent)
        if (changed && line < persisted_words) pm::flush(&area_[target + line]);
    }
    // pfence (line 24): the record is durable before the index that names it, or a crash could
    // leave the index naming a half-written record.
    if constexpr (persistent && Bug != PlantedBug::no_fence_before_switch) pm::fence();
    lock_val_.store(lock_value, std::memory_order_release);
    index_word().store(next, std::memory_order_release);
    if constexpr (persistent) {
      // pwb(&MIndex); psync (lines 27–28): no served thread returns before its request is durable.
      pm::flush(&index_word());
      if constexpr (Bug != PlantedBug::no_psync_before_release) pm::fence();
    }
    if constexpr (requires { object_->after_persist(state); }) object_->after_persist(state);
    lock_.store(lock_value + 1, std::memory_order_release);
    Response mine;
    std::memcpy(&mine, work + response_offset(self), sizeof(Response));
    return mine;
  }

  Object* object_;
  Word* area_;
  std::size_t slots_;
  std::size_t record_words_;
  std::unique_ptr<Announcement[]> requests_;
  std::unique_ptr<Sequence[]> seq_;
  std::vector<std::uint64_t> scratch_;  // the combiner's working copy (lock holder only)
  alignas(64) detail::SpinWord<std::uint64_t> lock_{0};      // odd: held
  alignas(64) detail::SpinWord<std::uint64_t> lock_val_{0};  // the lock value of the last switch
};

}  // namespace pmds::combining

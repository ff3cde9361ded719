// pmds — PBcomb, Fatourou et al.'s blocking persistent software combining (Algorithms 1–2), written
// once over the sequential object it serves and the persistence it gives.
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
// The sequential object: combining/protocol.hpp. Its apply may throw (PoolFull) only if it changed
// nothing: the request is then not applied and its own thread gets the exception.
//
// Layout: the persistent part is one 64-byte line with the index (MIndex) followed by two records
// (combining/protocol.hpp). It lives wherever the owner puts it (a pool slot for durable objects,
// DRAM otherwise); the combiner builds the new record in a DRAM working copy and writes back only
// the lines that changed.
//
// Slots: a combining object serves `slots` threads (chosen at creation, persistent). Plain
// operations use slot pmds::thread_id() and throw TooManyThreads beyond it; ticketed operations
// name their slot (interfaces.hpp, Ticket). The combiner scans and copies all `slots` entries per
// round, so the default is small (combining::default_slots).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pmds/combining/protocol.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::combining {

// One PBcomb instance: the announce array, the lock and the persistent records of one sequential
// object. The owner (the data structure) holds the object and the persistent area.
template <class Object, Persistence Mode, FaultPolicy Faults = NoFaults>
class PBComb : public detail::ProtocolBase<PBComb<Object, Mode, Faults>, Object, Mode, Faults> {
  using Base = detail::ProtocolBase<PBComb, Object, Mode, Faults>;
  friend Base;
  using Base::area_, Base::layout_, Base::object_, Base::requests_, Base::slots_;

 public:
  static constexpr const char* name = "pbcomb";
  // The last byte of the kind word of a structure built on PBcomb (combining/structure.hpp).
  static constexpr std::uint64_t kind_letter = 'f';
  using Base::persistent;
  using typename Base::Request, typename Base::Response, typename Base::Word;

  static constexpr detail::RecordLayout layout(std::size_t slots, std::size_t state_words) {
    return {state_words, sizeof(Response) / 8, slots, false};
  }
  // Bytes of the persistent area: the index line and two records.
  static constexpr std::size_t area_bytes(std::size_t slots, std::size_t state_words) {
    return (detail::words_per_line + 2 * layout(slots, state_words).words()) * 8;
  }

  // Builds the initial records (index 0, the state `initial` of object.state_words() words, no
  // request served) in `area` (64-byte aligned, area_bytes(...), private to the caller) and
  // persists them; the caller publishes the area afterwards.
  PBComb(Object& object, void* area, std::size_t slots, const std::uint64_t* initial, CreateTag)
      : PBComb(object, area, slots) {
    std::memcpy(scratch_.data(), initial, layout_.state_words * 8);
    index_word().store(0, std::memory_order_relaxed);
    for (std::uint64_t r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < layout_.words(); ++i) {
        area_[record_base(r) + i].store(scratch_[i], std::memory_order_relaxed);
        mirror_[mirror_base(r) + i].store(scratch_[i], std::memory_order_relaxed);
      }
    if constexpr (persistent) pm::persist(area_, area_bytes(slots, layout_.state_words));
    index_.store(0, std::memory_order_release);
  }

  // The instance an opened pool holds: checks the index (a bad one is reported through
  // trace.corrupt, combining/structure.hpp), and starts every slot with no request pending.
  // Writes nothing to the pool.
  template <class Trace>
  PBComb(Object& object, void* area, std::size_t slots, OpenTag, const Trace& trace)
      : PBComb(object, area, slots) {
    const std::uint64_t index = index_word().load(std::memory_order_relaxed);
    if (index > 1)
      trace.corrupt("the PBcomb record index is " + std::to_string(index) + " (0 or 1 expected)");
    for (std::uint64_t r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < layout_.words(); ++i)
        mirror_[mirror_base(r) + i].store(area_[record_base(r) + i].load(std::memory_order_relaxed),
                                          std::memory_order_relaxed);
    index_.store(index, std::memory_order_release);
    this->start_slots([&](std::size_t q) { return deactivate_of(index, q); });
  }

  using Base::perform;  // a plain operation: the ticketed one with the slot's next ticket

  // A ticketed operation (the paper's PBCOMB and RECOVER in one): if the slot's last served
  // request has this ticket's parity, the ticket names an operation that already took effect and
  // its response is returned without applying it again; otherwise the request is applied.
  Response perform(Ticket ticket, const Request& request) {
    if (const auto served = this->start(ticket)) return *served;
    const std::size_t p = ticket.slot;
    const std::uint64_t activate = ticket.seq & 1;
    // The announcement, the lock's read and its CAS are seq_cst (the paper assumes sequentially
    // consistent memory): every round whose CAS follows this thread's read of the lock then
    // sees the request. With a release store and an acquire read (x86: the announcement still in
    // the store buffer while the lock is read) a round after the one waited for could miss the
    // request, and the check below could then read this slot's Deactivate bit from the record a
    // still later round is writing — served, but before that round switched — and return the
    // slot's previous response (a popped value lost). On x86 only the announcement costs
    // anything (an xchg).
    requests_.announce(p, request, activate);

    std::uint64_t lock_value;
    for (;;) {
      lock_value = lock_.load(std::memory_order_seq_cst);
      if (lock_value % 2 == 0) {
        // `expected` is a copy: a failed CAS overwrites it with the current value, and the
        // paper's lval + 1 (line 8) is the value of the thread that took the lock from lval.
        std::uint64_t expected = lock_value;
        ++lock_value;  // the odd value the lock holder has: this thread, or the one that won
        if (lock_.compare_exchange_strong(expected, lock_value, std::memory_order_seq_cst)) break;
      }
      while (lock_.load(std::memory_order_acquire) == lock_value) detail::spin_pause();
      if (deactivate_of(current_index(), p) == activate) {
        // Served. If by a later combiner than the one waited for, wait until it is done too:
        // its psync makes the response durable (Algorithm 2, line 11).
        if (lock_val_.load(std::memory_order_acquire) != lock_value)
          while (lock_.load(std::memory_order_acquire) == lock_value + 2) detail::spin_pause();
        return response_of(current_index(), p);
      }
      if (requests_.failed(p)) withdraw_and_throw(ticket);
    }
    const Response mine = combine(lock_value, p);
    if (requests_.failed(p)) withdraw_and_throw(ticket);
    return mine;
  }

  // Word i of the current state (quiescent: recovery, tests, destructors).
  std::uint64_t state_word(std::size_t i) const {
    return mirror_[mirror_base(current_index()) + i].load(std::memory_order_relaxed);
  }

 private:
  PBComb(Object& object, void* area, std::size_t slots)
      : Base(object, area, slots, layout(slots, object.state_words())),
        scratch_(layout_.words(), 0) {
    if constexpr (persistent) {
      mirror_storage_.reset(new std::atomic<std::uint64_t>[2 * layout_.words()]);
      mirror_ = mirror_storage_.get();
    } else {
      mirror_ = area_ + detail::words_per_line;  // the records are in DRAM already
    }
  }

  // A request that failed is withdrawn (its activate bit set back to its Deactivate bit, so no
  // combiner sees it active) and its slot's sequence rolled back: it never took effect, and
  // the slot's next operation takes its ticket's parity. The failure is rethrown.
  [[noreturn]] void withdraw_and_throw(Ticket ticket) {
    requests_.reset(ticket.slot, (ticket.seq & 1) ^ 1, true);
    requests_.seq(ticket.slot) = ticket.seq - 1;
    std::rethrow_exception(requests_.failure(ticket.slot));
  }

  Word& index_word() const { return area_[0]; }  // MIndex
  std::size_t record_base(std::uint64_t index) const {
    return detail::words_per_line + index * layout_.words();
  }
  // Reads go to the DRAM mirror of the records and of MIndex (see the constructor).
  std::size_t mirror_base(std::uint64_t index) const { return index * layout_.words(); }
  std::uint64_t current_index() const { return index_.load(std::memory_order_acquire); }
  std::uint64_t deactivate_of(std::uint64_t index, std::size_t slot) const {
    const std::size_t word = mirror_base(index) + layout_.deactivate_word(slot);
    return (mirror_[word].load(std::memory_order_acquire) >> (slot % 64)) & 1;
  }
  Response response_of(std::uint64_t index, std::size_t slot) const {
    std::uint64_t words[sizeof(Response) / 8];
    const std::size_t base = mirror_base(index) + layout_.response_offset(slot);
    for (std::size_t i = 0; i < sizeof(Response) / 8; ++i)
      words[i] = mirror_[base + i].load(std::memory_order_acquire);
    return detail::from_words<Response>(words);
  }
  // The current record's response of the slot, if it has served the slot's request with this
  // activate bit (ProtocolBase).
  [[gnu::always_inline]] std::optional<Response> served_response(std::size_t slot,
                                                                 std::uint64_t activate) const {
    const std::uint64_t index = current_index();
    if (deactivate_of(index, slot) != activate) return std::nullopt;
    return response_of(index, slot);
  }

  // The combiner's round (Algorithm 2, lines 14–30), `lock_value` the odd value it locked with.
  Response combine(std::uint64_t lock_value, std::size_t self) {
    const std::uint64_t current = index_.load(std::memory_order_relaxed);
    const std::uint64_t next = 1 - current;
    std::uint64_t* work = scratch_.data();
    const std::size_t base = mirror_base(current);
    for (std::size_t i = 0; i < layout_.words(); ++i)
      work[i] = mirror_[base + i].load(std::memory_order_relaxed);  // copy the current record

    for (std::size_t q = 0, used = requests_.in_use(); q < used; ++q) {
      std::uint64_t& deactivate = work[layout_.deactivate_word(q)];
      if (!requests_.active(q, (deactivate >> (q % 64)) & 1)) continue;
      if (requests_.failed(q)) continue;  // its thread withdraws it
      Response r;
      try {
        r = detail::apply(*object_, work, requests_.request(q), self);  // no change if it throws
      } catch (...) {
        requests_.fail(q, std::current_exception());
        continue;
      }
      std::memcpy(work + layout_.response_offset(q), &r, sizeof(Response));
      deactivate ^= std::uint64_t{1} << (q % 64);  // now equal to the activate bit
    }
    detail::before_persist(*object_, work, self);

    // MemState[ind] := the new record, and pwb(&MemState[ind]) (line 23) — only for the lines
    // that differ from what the record already holds (write_changed_lines): a round writes and
    // flushes the state's lines and the lines of the slots it served, not all `slots` responses
    // (principle 1; the paper persists the whole record).
    detail::write_changed_lines(area_ + record_base(next), mirror_ + mirror_base(next), work,
                                layout_.words(), layout_.persisted_words(Mode));
    // pfence (line 24): the record is durable before the index that names it, or a crash could
    // leave the index naming a half-written record.
    if constexpr (persistent && Faults::planted != Fault::no_fence_before_switch) pm::fence();
    lock_val_.store(lock_value, std::memory_order_release);
    index_word().store(next, std::memory_order_release);
    if constexpr (persistent) {
      // pwb(&MIndex); psync (lines 27–28): no served thread returns before its request is durable.
      pm::flush(&index_word());
      if constexpr (Faults::planted != Fault::no_psync_before_release) pm::fence();
    }
    index_.store(next, std::memory_order_release);  // readers see the round once it is durable
    if constexpr (persistent) {
      // The next round writes MIndex and this record's first line (the state and the first
      // slots' responses), both flushed by a round and so evicted on a machine whose clwb evicts
      // (this one): fetched for writing now, off the critical path, so that round's stores do
      // not wait for memory before its pwbs (measured at 1 thread: +4-8%; level at 2).
      __builtin_prefetch(&index_word(), 1);
      __builtin_prefetch(&area_[record_base(current)], 1);
    }
    detail::after_persist(*object_, work, self);
    // The combiner's own response, read before the release: the next combiner reuses scratch_.
    const Response mine = detail::from_words<Response>(work + layout_.response_offset(self));
    lock_.store(lock_value + 1, std::memory_order_release);
    return mine;
  }

  std::vector<std::uint64_t> scratch_;  // the combiner's working copy (lock holder only)
  // The records as the pool holds them, in DRAM: every read of a round (the copy, the comparison
  // of write_changed_lines) and of a waiting thread (its Deactivate bit, its response) goes here,
  // never to the pool, whose lines the last round's pwbs may have evicted (clwb does on this
  // machine: a load of a flushed line is a miss). The pool is written, flushed, and read at open
  // only (principle 1). For the volatile twin the records are in DRAM and this is them.
  std::unique_ptr<std::atomic<std::uint64_t>[]> mirror_storage_;
  std::atomic<std::uint64_t>* mirror_ = nullptr;
  // One line for the words a round's end writes and every waiter then reads: a waiter that sees
  // the lock released finds the index and the switch's lock value in the same line (the
  // volatile twin at 2 threads: register +19%, stack +31% against a line each).
  alignas(64) detail::SpinWord<std::uint64_t> lock_{0};  // odd: held
  detail::SpinWord<std::uint64_t> lock_val_{0};          // the lock value of the last switch
  std::atomic<std::uint64_t> index_{0};  // MIndex's DRAM copy, switched once the round is durable
};

}  // namespace pmds::combining

// pmds — PWFcomb, Fatourou et al.'s wait-free persistent software combining (Algorithms 3–4),
// written once over the sequential object it serves and the persistence it gives (the modes of
// PBcomb, combining/pbcomb.hpp).
//
// Every thread acts as a combiner: it announces its request, copies the record S names, applies
// every active request it sees to its copy, writes the copy into one of its own two records,
// persists it, and tries to switch S to it with an SC (a CAS on S, whose word carries a sequence
// number against ABA). A thread whose SC fails twice has had its request applied by someone else's
// round (§4, after PSim): so an operation takes at most two attempts. A thread never works on the
// record S names: the record's Index bit of the thread says which of its two records is free, and
// the bit is persisted with the record (§4: after a crash the thread must not reuse the current
// record; in the durable mode, where only the state is persisted, a thread checks instead that
// the record it takes is not the one S names).
//
// The persistence of S. Before a served thread returns, S must be durable at a value that includes
// its request. The paper's Flush[n] and CombRound[n][n] arrays let only the thread whose round
// served q persist S for q; but a thread q served by combiner r, whose S was then overtaken by
// combiner p before r or p persisted it, finds Flush[p] odd and CombRound[p][q] not matching (p
// did not serve q) and returns with S not durable: a crash then loses an operation that returned.
// pmds keeps instead one volatile word, the highest sequence number of S known durable
// (durable_seq_): a combiner raises it after its SC's pwb and psync; a served thread persists S
// only if S's sequence number is above it, and raises it too. Same principle (only a thread that
// must persist S does), no window. The planted bug paper_flush_rule runs the paper's rule instead
// (as the artifact writes it), and the crash lab reports the window; served_returns_unpersisted
// leaves the served thread's persist out altogether.
//
// Objects: apply runs on many threads' copies at once and a copy may be discarded, so it must not
// throw, and what it does outside its State must be private to the round's slot and undone by the
// object's discard hook (combining/protocol.hpp): the register and the heap have nothing outside
// their state; the stack (stack.hpp) and the queue (wait_free_queue.hpp) take nodes from the
// slot's spares and give them back.
//
// Layout of the persistent area: S's line, then 2·slots + 1 records (slot p's two are 2p and
// 2p + 1; the last is the initial one), each [state][Deactivate bits][Index bits][responses],
// whole lines (combining/protocol.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

template <class Object, Persistence Mode, FaultPolicy Faults = NoFaults>
class PWFComb : public detail::ProtocolBase<PWFComb<Object, Mode, Faults>, Object, Mode, Faults> {
  using Base = detail::ProtocolBase<PWFComb, Object, Mode, Faults>;
  friend Base;
  using Base::area_, Base::layout_, Base::object_, Base::requests_, Base::slots_;

 public:
  static constexpr const char* name = "pwfcomb";
  // The last byte of the kind word of a structure built on PWFcomb (combining/structure.hpp).
  static constexpr std::uint64_t kind_letter = 'w';
  using Base::persistent;
  using typename Base::Request, typename Base::Response, typename Base::Word;

  static_assert(detail::apply_is_noexcept<Object, Request>(),
                "PWFcomb applies requests on copies that may be discarded: apply must not throw");

  static constexpr detail::RecordLayout layout(std::size_t slots, std::size_t state_words) {
    return {state_words, sizeof(Response) / 8, slots, true};
  }
  static constexpr std::size_t record_count(std::size_t slots) { return 2 * slots + 1; }
  // Bytes of the persistent area: S's line and the records.
  static constexpr std::size_t area_bytes(std::size_t slots, std::size_t state_words) {
    return (detail::words_per_line + record_count(slots) * layout(slots, state_words).words()) * 8;
  }

  // Builds the records (S names the initial one, holding `initial`; no request served; every
  // Index bit 0) in `area` (64-byte aligned, area_bytes(slots), private to the caller) and
  // persists them; the caller publishes the area afterwards.
  PWFComb(Object& object, void* area, std::size_t slots, const std::uint64_t* initial, CreateTag)
      : PWFComb(object, area, slots) {
    for (std::size_t r = 0; r < record_count(slots_); ++r)
      for (std::size_t i = 0; i < layout_.words(); ++i)
        area_[record_base(r) + i].store(0, std::memory_order_relaxed);
    for (std::size_t i = 0; i < layout_.state_words; ++i)
      area_[record_base(initial_record()) + i].store(initial[i], std::memory_order_relaxed);
    s_word().store(pointer(initial_record(), 0), std::memory_order_relaxed);
    if constexpr (persistent) pm::persist(area_, area_bytes(slots_, layout_.state_words));
  }

  // The instance an opened pool holds: checks S (a bad one is reported through trace.corrupt,
  // combining/structure.hpp) and starts every slot with no request pending. Writes nothing to
  // the pool.
  template <class Trace>
  PWFComb(Object& object, void* area, std::size_t slots, OpenTag, const Trace& trace)
      : PWFComb(object, area, slots) {
    const std::uint64_t s = s_word().load(std::memory_order_relaxed);
    if (record_of(s) >= record_count(slots_))
      trace.corrupt("PWFcomb's S names record " + std::to_string(record_of(s)) + " of " +
                    std::to_string(record_count(slots_)));
    durable_seq_.store(sequence_of(s), std::memory_order_relaxed);
    const std::size_t base = record_base(record_of(s));
    this->start_slots([&](std::size_t q) { return bit_at(base + layout_.deactivate_word(q), q); });
  }

  using Base::perform;  // a plain operation: the ticketed one with the slot's next ticket

  // A ticketed operation (PWFCOMB and RECOVER in one, as PBComb::perform).
  Response perform(Ticket ticket, const Request& request) {
    if (const auto served = this->start(ticket)) return *served;
    const std::size_t p = ticket.slot;
    const std::uint64_t activate = ticket.seq & 1;
    // The announcement, S's reads and CAS, and a round's reads of announcements are seq_cst: a
    // round whose read of S follows this thread's first read of S then sees the request (the
    // two-attempt bound rests on this; the artifact's Fetch&Add on its activate vector is its
    // full fence). On x86 only the announcement's store costs anything (an xchg).
    requests_.announce(p, request, activate);
    PerThread& mine = per_thread_[p];
    for (std::uint64_t i = 0; i < mine.backoff; ++i) detail::spin_pause();  // Backoff (line 3)

    // Two attempts (lines 4-32); a thread whose two attempts both failed has been served. The
    // loop goes on only if it was not, which the argument above excludes: it keeps the operation
    // correct even so.
    for (int attempt = 0;; ++attempt) {
      bool seen_served = false;
      if (const auto applied = attempt_round(p, activate, seen_served)) return *applied;
      if (attempt < 1 && !seen_served) continue;
      if (const auto served = served_response(p, activate)) {
        // Served by another thread's round (lines 33-39): S names a record that includes the
        // request; make S durable unless a value at least as recent is known durable.
        if constexpr (Faults::planted == Fault::paper_flush_rule) {
          // Lines 33-38 as written: persist S only if the round S names served this thread and
          // its combiner has not marked it persisted.
          const std::uint64_t s = s_word().load(std::memory_order_acquire);
          std::uint64_t lval = paper_.flush[owner_of(s)].load(std::memory_order_acquire);
          if (lval % 2 == 1 &&
              lval == paper_.comb_round[owner_of(s) * slots_ + p].load(std::memory_order_relaxed)) {
            pm::flush(&s_word());
            pm::fence();
            paper_.flush[owner_of(s)].compare_exchange_strong(lval, lval + 1);
          }
        } else if constexpr (Faults::planted != Fault::served_returns_unpersisted) {
          make_durable();
        }
        return *served;
      }
    }
  }

  // Makes S durable at its current value or a later one, unless a value at least as recent is
  // known durable already (one load then): every request S has served so far is then durable.
  // Served threads call it before they return; PWFqueue's threads before they follow a link
  // the enqueuers' S named (wait_free_queue.hpp).
  void make_durable() {
    if constexpr (persistent) {
      const std::uint64_t s = s_word().load(std::memory_order_acquire);
      if (durable_seq_.load(std::memory_order_acquire) < sequence_of(s)) {
        pm::flush(&s_word());
        pm::fence();
        raise_durable(sequence_of(s));
      }
    }
  }

  // The current state's words, read while S names their record (as served_response reads;
  // any thread, any time).
  void read_state(std::uint64_t* out) const {
    for (;;) {
      const std::uint64_t s = s_word().load(std::memory_order_acquire);
      const std::size_t base = record_base(record_of(s));
      for (std::size_t i = 0; i < layout_.state_words; ++i)
        out[i] = area_[base + i].load(std::memory_order_acquire);
      if (s_word().load(std::memory_order_acquire) == s) return;
    }
  }

  // Word i of the current state (quiescent: recovery, tests, destructors).
  std::uint64_t state_word(std::size_t i) const {
    const std::size_t base = record_base(record_of(s_word().load(std::memory_order_acquire)));
    return area_[base + i].load(std::memory_order_relaxed);
  }

 private:
  // The paper's artifact caps its backoff at a few hundred iterations of its loop.
  static constexpr std::uint64_t max_backoff = 256;

  // A slot's private state: its working copy and its backoff (written only by the slot's thread).
  struct alignas(64) PerThread {
    std::vector<std::uint64_t> work;
    std::uint64_t backoff = 1;
  };

  PWFComb(Object& object, void* area, std::size_t slots)
      : Base(object, area, slots, layout(slots, object.state_words())),
        per_thread_(new PerThread[slots]) {
    for (std::size_t p = 0; p < slots_; ++p) per_thread_[p].work.assign(layout_.words(), 0);
  }

  // S: a record number (low 16 bits) and a sequence number (the rest), one CAS-able word.
  static std::uint64_t pointer(std::size_t record, std::uint64_t seq) { return seq << 16 | record; }
  static std::size_t record_of(std::uint64_t s) { return s & 0xffff; }
  static std::uint64_t sequence_of(std::uint64_t s) { return s >> 16; }
  std::size_t initial_record() const { return record_count(slots_) - 1; }
  // The slot whose record S names (slots_ for the initial record): the paper's lsPtr->pid.
  std::size_t owner_of(std::uint64_t s) const { return record_of(s) / 2; }

  Word& s_word() const { return area_[0]; }
  std::size_t record_base(std::size_t record) const {
    return detail::words_per_line + record * layout_.words();
  }
  std::uint64_t bit_at(std::size_t word, std::size_t slot) const {
    return (area_[word].load(std::memory_order_acquire) >> (slot % 64)) & 1;
  }
  Response response_at(std::size_t base, std::size_t slot) const {
    std::uint64_t words[sizeof(Response) / 8];
    for (std::size_t i = 0; i < sizeof(Response) / 8; ++i)
      words[i] = area_[base + layout_.response_offset(slot) + i].load(std::memory_order_acquire);
    return detail::from_words<Response>(words);
  }

  // One attempt of slot p (LL, copy, VL, simulate, persist, SC): the response if this thread's SC
  // switched S; nothing if S moved (the request is then served by another round or by the next
  // attempt) or if the copy showed the request served already (`seen_served`).
  std::optional<Response> attempt_round(std::size_t p, std::uint64_t activate, bool& seen_served) {
    PerThread& mine = per_thread_[p];
    std::uint64_t* work = mine.work.data();
    std::uint64_t s = s_word().load(std::memory_order_seq_cst);  // LL(S) (line 5)
    const std::size_t base = record_base(record_of(s));
    for (std::size_t i = 0; i < layout_.words(); ++i)
      work[i] = area_[base + i].load(std::memory_order_relaxed);             // copy (line 7)
    if (s_word().load(std::memory_order_acquire) != s) return std::nullopt;  // VL (line 12)
    if (detail::bit_of(work, layout_.deactivate_word(p), p) == activate) {
      seen_served = true;
      return std::nullopt;
    }

    std::uint64_t lval = 0;  // the planted paper rule's Flush value for this round (lines 9-11)
    if constexpr (Faults::planted == Fault::paper_flush_rule) {
      lval = paper_.flush[owner_of(s)].load(std::memory_order_acquire);
      lval += lval % 2 == 0 ? 1 : 2;
    }
    for (std::size_t q = 0, used = requests_.in_use(); q < used; ++q) {  // lines 13-20
      std::uint64_t& deactivate = work[layout_.deactivate_word(q)];
      if (!requests_.active(q, (deactivate >> (q % 64)) & 1)) continue;
      const Response r = detail::apply(*object_, work, requests_.request(q), p);
      std::memcpy(work + layout_.response_offset(q), &r, sizeof(Response));
      deactivate ^= std::uint64_t{1} << (q % 64);
      if constexpr (Faults::planted == Fault::paper_flush_rule)
        paper_.comb_round[p * slots_ + q].store(lval, std::memory_order_relaxed);
    }
    if (!detail::complete(*object_, p)) {  // a request it could not apply: give the round up
      detail::discard(*object_, p);
      return std::nullopt;
    }
    // The record to work on: the one Index[p] names, which is never the one S names — except in
    // the durable mode after a crash, where Index bits are not persisted and may name it.
    std::uint64_t ind = detail::bit_of(work, layout_.index_word(p), p);
    if (2 * p + ind == record_of(s)) ind ^= 1;
    const std::size_t target = 2 * p + ind;
    std::uint64_t& index = work[layout_.index_word(p)];  // line 22: next time, the other one
    index = (index & ~(std::uint64_t{1} << (p % 64))) | ((ind ^ 1) << (p % 64));

    if (s_word().load(std::memory_order_acquire) == s) {  // VL (line 21)
      // pwb(&MemState[p][ind]) (line 23), the lines that changed; pfence (line 24): the record is
      // durable before S can name it. On x86 the SC's locked CAS orders the flushes as a fence
      // does, so the crash lab cannot see this fence missing (no fixture plants it); it stays
      // for the paper's model, where pwbs are ordered by pfence only.
      detail::before_persist(*object_, work, p);
      detail::write_changed_lines(area_ + record_base(target), area_ + record_base(target), work,
                                  layout_.words(), layout_.persisted_words(Mode));
      // Mutant survives: the SC's locked CAS below orders these flushes on x86 (see above).
      if constexpr (persistent && Faults::planted != Fault::no_fence_before_switch) pm::fence();
      if constexpr (Faults::planted == Fault::paper_flush_rule)
        paper_.flush[p].store(lval, std::memory_order_release);  // line 25
      const std::uint64_t next = pointer(target, sequence_of(s) + 1);
      if (s_word().compare_exchange_strong(s, next, std::memory_order_seq_cst)) {  // SC (line 27)
        if constexpr (persistent) {
          pm::flush(&s_word());  // pwb(&S); psync (lines 28-29)
          if constexpr (Faults::planted != Fault::no_psync_before_release) pm::fence();
          raise_durable(sequence_of(next));
          if constexpr (Faults::planted == Fault::paper_flush_rule)  // line 30
            paper_.flush[p].compare_exchange_strong(lval, lval + 1, std::memory_order_acq_rel);
        }
        detail::after_persist(*object_, work, p);
        mine.backoff = std::max<std::uint64_t>(1, mine.backoff / 2);
        return detail::from_words<Response>(work + layout_.response_offset(p));
      }
    }
    detail::discard(*object_, p);  // what this round took, nobody else has seen
    mine.backoff = std::min(max_backoff, mine.backoff * 2);  // BackoffCalculate (line 32)
    return std::nullopt;
  }

  // If the record S names has served the slot's request with this activate bit, its response.
  // The record is read while S names it and S is read again after: a record S names is never
  // written, and one S no longer names may be reused by its owner at any time, so a read that
  // saw S move is repeated (each repetition means another round completed).
  [[gnu::always_inline]] std::optional<Response> served_response(std::size_t slot,
                                                                 std::uint64_t activate) const {
    for (;;) {
      const std::uint64_t s = s_word().load(std::memory_order_acquire);
      const std::size_t base = record_base(record_of(s));
      const bool served = bit_at(base + layout_.deactivate_word(slot), slot) == activate;
      const Response r = served ? response_at(base, slot) : Response{};
      if (s_word().load(std::memory_order_acquire) == s)
        return served ? std::optional<Response>(r) : std::nullopt;
    }
  }

  void raise_durable(std::uint64_t seq) {
    std::uint64_t known = durable_seq_.load(std::memory_order_relaxed);
    while (known < seq &&
           !durable_seq_.compare_exchange_weak(known, seq, std::memory_order_release)) {
    }
  }

  std::unique_ptr<PerThread[]> per_thread_;
  // The highest sequence number of S known durable (volatile; see the header comment).
  alignas(64) std::atomic<std::uint64_t> durable_seq_{0};
  // The paper's Flush[n + 1] and CombRound[n][n], volatile; used by the planted bug only.
  struct PaperFlushRule {
    explicit PaperFlushRule(std::size_t slots)
        : flush(Faults::planted == Fault::paper_flush_rule ? slots + 1 : 0),
          comb_round(Faults::planted == Fault::paper_flush_rule ? slots * slots : 0) {}
    std::vector<std::atomic<std::uint64_t>> flush;
    std::vector<std::atomic<std::uint64_t>> comb_round;
  } paper_{slots_};
};

template <>
inline constexpr bool concurrent_rounds<PWFComb> = true;

}  // namespace pmds::combining

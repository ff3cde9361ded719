// pmds — what Fatourou et al.'s two combining protocols share: PBcomb (blocking, pbcomb.hpp) and
// PWFcomb (wait-free, pwfcomb.hpp) serve the same sequential objects with the same persistence
// modes, the same request announcements, the same state records and the same tickets (ProtocolBase,
// the base of both, at the end); they differ in who applies the requests and how the current
// record is switched (a lock and an index, or an SC on a pointer).
//
// A state record is a run of 64-bit words, whole cache lines (principle 3: what is persisted
// together lies together):
//   [state][Deactivate bits][Index bits (PWFcomb only)][response of slot 0 .. n-1]
// The bits come right after the state: a round changes the state and flips the Deactivate bit of
// every slot it serves, so with them beside the state a round that serves the first slots changes
// one line, not two (at 2 threads, with the bits after the responses: PBqueue 3.9 pwbs per
// operation, now 2.9; PWFcomb's register 2.1, now 1.65).
// Its words are pm::atomic in a pool (DRAM std::atomic for the volatile twin); a round builds the
// new record in a DRAM working copy and writes back only the lines that differ from what the
// target record holds, flushing exactly those (write_changed_lines).
//
// The sequential object a protocol serves (see combining/atomic_float.hpp, stack.hpp, heap.hpp):
//   using Request, Response           trivially copyable; Response a multiple of 8 bytes
//   std::size_t state_words() const   the state's size in words, fixed for the object's life
//   Response apply(std::uint64_t* state, const Request&)
//                                     one request applied, in place, to the round's copy of the
//                                     state (a DRAM buffer of state_words() words)
// and, for an object whose rounds touch memory outside the record (the stack's and the queue's
// nodes), optionally, each called with the slot of the combiner whose round it is (PWFcomb runs
// rounds of different slots at once, so such an object keeps its round's scratch per slot):
//   Response apply(std::uint64_t* state, const Request&, std::size_t combiner)
//                                     instead of the form above
//   void before_persist(std::uint64_t* state, std::size_t combiner)
//                                     persist what the round wrote outside the record (before
//                                     the record's pwbs and pfence)
//   void after_persist(const std::uint64_t* state, std::size_t combiner)
//                                     the round switched and is durable: release what it unlinked
//   bool complete(std::size_t combiner)
//                                     PWFcomb, after the round's applies: false if one of them
//                                     could not be done (the stack's round out of spare nodes);
//                                     the round is then given up as if its SC had failed
//   void discard(std::size_t combiner)
//                                     PWFcomb: the round's SC failed (or it was not tried); undo
//                                     what the round took, which nobody else has seen
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

#include "pmds/error.hpp"
#include "pmds/faults.hpp"
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

// The kind word of a combining structure (its anchor's first word, combining/structure.hpp):
// "pmds.", the structure's letter, the record layout's version, the protocol's letter
// (PBComb::kind_letter, PWFComb::kind_letter). A pool written with another record layout is
// refused (layout_mismatch), never misread. Version '2': the bits before the responses (above);
// 'c' had them after.
inline constexpr std::uint64_t record_layout_version = '2';
constexpr std::uint64_t kind_word(char structure, std::uint64_t protocol_letter) {
  return 0x706d64732e000000 | std::uint64_t(static_cast<unsigned char>(structure)) << 16 |
         record_layout_version << 8 | protocol_letter;
}

// Whether a protocol runs several combiners' rounds at once (PWFcomb: pwfcomb.hpp specializes
// it) or one at a time under a lock (PBcomb).
template <template <class, Persistence, FaultPolicy> class Protocol>
inline constexpr bool concurrent_rounds = false;

namespace detail {

// The sequential object's calls, in whichever of their optional forms it has (above).
template <class Object, class Request>
auto apply(Object& object, std::uint64_t* state, const Request& request, std::size_t combiner) {
  if constexpr (requires { object.apply(state, request, combiner); })
    return object.apply(state, request, combiner);
  else
    return object.apply(state, request);
}
template <class Object>
void before_persist(Object& object, std::uint64_t* state, std::size_t combiner) {
  if constexpr (requires { object.before_persist(state, combiner); })
    object.before_persist(state, combiner);
}
template <class Object>
void after_persist(Object& object, const std::uint64_t* state, std::size_t combiner) {
  if constexpr (requires { object.after_persist(state, combiner); })
    object.after_persist(state, combiner);
}
template <class Object>
bool complete(Object& object, std::size_t combiner) {
  if constexpr (requires { object.complete(combiner); })
    return object.complete(combiner);
  else
    return true;
}
template <class Object>
void discard(Object& object, std::size_t combiner) {
  if constexpr (requires { object.discard(combiner); }) object.discard(combiner);
}
template <class Object, class Request>
constexpr bool apply_is_noexcept() {
  if constexpr (requires(Object & o, std::uint64_t * s, const Request& r) { o.apply(s, r, 0); })
    return noexcept(std::declval<Object&>().apply(std::declval<std::uint64_t*>(),
                                                  std::declval<const Request&>(), std::size_t{}));
  else
    return noexcept(std::declval<Object&>().apply(std::declval<std::uint64_t*>(),
                                                  std::declval<const Request&>()));
}

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
constexpr std::size_t bit_words(std::size_t slots) {
  return (slots + 63) / 64;
}

template <class T>
T from_words(const std::uint64_t* words) {
  T value;
  std::memcpy(&value, words, sizeof(T));
  return value;
}

// Where each part of a state record lies, in words from the record's start.
struct RecordLayout {
  std::size_t state_words;
  std::size_t response_words;
  std::size_t slots;
  bool with_index;  // PWFcomb's Index bits

  std::size_t deactivate_word(std::size_t slot) const { return state_words + slot / 64; }
  std::size_t index_word(std::size_t slot) const {
    return deactivate_word(0) + bit_words(slots) + slot / 64;
  }
  std::size_t response_offset(std::size_t slot) const {
    return deactivate_word(0) + (with_index ? 2 : 1) * bit_words(slots) + slot * response_words;
  }
  std::size_t words() const { return round_to_line(response_offset(slots)); }
  // The words a round must make durable: the whole record when responses and Deactivate bits
  // are persisted (detectable), the state's lines only otherwise (durable: §3, "the only field
  // of StateRec that needs to be persisted is st").
  std::size_t persisted_words(Persistence mode) const {
    return mode == Persistence::detectable ? words() : round_to_line(state_words);
  }
};

inline std::uint64_t bit_of(const std::uint64_t* record, std::size_t word, std::size_t slot) {
  return (record[word] >> (slot % 64)) & 1;
}

// Writes `work` (a record built in DRAM) over a record, line by line, storing only the lines that
// differ from `known` (what the record holds: the record itself, or a DRAM mirror of it), into
// `known` and into `record`, and flushes each stored line of `record` below `flushed_words`. A line
// left alone already holds what the round wants durably: every line of a record was flushed and
// fenced when it was last written (before its round's switch), or read back by recovery.
template <class Word, class Known>
void write_changed_lines(Word* record, Known* known, const std::uint64_t* work, std::size_t words,
                         std::size_t flushed_words, pm::Site site = pm::Site::current()) {
  constexpr bool mirrored = !std::is_same_v<Word, Known>;
  for (std::size_t line = 0; line < words; line += words_per_line) {
    bool changed = false;
    for (std::size_t i = line; i < line + words_per_line; ++i)
      if (known[i].load(std::memory_order_relaxed) != work[i]) {
        known[i].store(work[i], std::memory_order_relaxed);
        if constexpr (mirrored) record[i].store(work[i], std::memory_order_relaxed);
        changed = true;
      }
    if constexpr (std::is_same_v<Word, pm::atomic<std::uint64_t>>)
      if (changed && line < flushed_words) pm::flush(&record[line], site);
  }
}

// The announce array (volatile; one cache line per slot) and each slot's sequence number.
// A slot's announcement is written only by its thread; combiners read it. The request is kept as
// words read with relaxed atomic loads: in PWFcomb a thread simulating on a stale copy may read
// a slot's request while its owner announces the next one (the simulation is then discarded,
// its SC fails), which must not be a data race.
template <class Request>
class Announcements {
 public:
  static constexpr std::uint64_t valid_bit = 2;
  static constexpr std::size_t request_words = (sizeof(Request) + 7) / 8;
  static_assert(std::is_trivially_copyable_v<Request>);

  explicit Announcements(std::size_t slots) : slots_(new Slot[slots]) {}

  // The slot's next request: its words, then its activate bit with the valid bit, stored
  // seq_cst (both protocols need a round that starts after the announcing thread's next read of
  // the lock or of S to see the request: pbcomb.hpp, pwfcomb.hpp). The slot first joins the
  // scanned range (in_use()), before its announcement can be seen.
  void announce(std::size_t slot, const Request& request, std::uint64_t activate) {
    for (std::size_t used = in_use_.load(std::memory_order_relaxed); used <= slot;)
      if (in_use_.compare_exchange_weak(used, slot + 1, std::memory_order_seq_cst)) break;
    Slot& s = slots_[slot];
    std::uint64_t words[request_words] = {};
    std::memcpy(words, &request, sizeof(Request));
    for (std::size_t i = 0; i < request_words; ++i)
      s.request[i].store(words[i], std::memory_order_relaxed);
    s.failed.store(false, std::memory_order_relaxed);
    s.word.store(activate | valid_bit, std::memory_order_seq_cst);
  }
  // Sets the slot's activate bit without a valid request: nothing pending (open, withdrawal).
  void reset(std::size_t slot, std::uint64_t activate, bool valid) {
    slots_[slot].word.store(activate | (valid ? valid_bit : 0), std::memory_order_release);
  }
  // Whether the slot has a valid request that a record with Deactivate bit `deactivate` has
  // not served (a seq_cst load: a plain load on x86, and PWFcomb's argument needs it).
  bool active(std::size_t slot, std::uint64_t deactivate) const {
    const std::uint64_t w = slots_[slot].word.load(std::memory_order_seq_cst);
    return (w & valid_bit) != 0 && (w & 1) != deactivate;
  }
  Request request(std::size_t slot) const {
    std::uint64_t words[request_words];
    for (std::size_t i = 0; i < request_words; ++i)
      words[i] = slots_[slot].request[i].load(std::memory_order_relaxed);
    return from_words<Request>(words);
  }

  // PBcomb's failed requests: a combiner's apply threw (PoolFull: no node for a push). The
  // request is not applied, later combiners skip it, and its thread withdraws it and rethrows.
  bool failed(std::size_t slot) const {
    return slots_[slot].failed.load(std::memory_order_acquire);
  }
  void fail(std::size_t slot, std::exception_ptr e) {
    slots_[slot].failure = std::move(e);
    slots_[slot].failed.store(true, std::memory_order_release);
  }
  std::exception_ptr failure(std::size_t slot) const { return slots_[slot].failure; }

  // The slots a round scans: [0, in_use()), every slot that has announced since the object was
  // opened (monotonic). Rounds skip the announcement lines of slots no thread ever used: with
  // the default 16 slots and 2 threads, a round reads 2 lines, not 16. Loaded seq_cst (a plain
  // load on x86) for PWFcomb's argument, as active().
  std::size_t in_use() const { return in_use_.load(std::memory_order_seq_cst); }

  // The slot's sequence number, written only by the slot's own thread (or by open).
  std::uint64_t& seq(std::size_t slot) { return slots_[slot].seq; }
  std::uint64_t seq(std::size_t slot) const { return slots_[slot].seq; }

 private:
  struct alignas(64) Slot {
    SpinWord<std::uint64_t> word{0};  // activate bit | valid bit
    std::atomic<std::uint64_t> request[request_words] = {};
    std::atomic<bool> failed{false};
    std::exception_ptr failure;  // written by the combiner that set `failed`
    std::uint64_t seq = 0;
  };
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<std::size_t> in_use_{0};
};

inline void check_slot_count(std::size_t slots) {
  if (slots == 0 || slots > max_slots)
    throw Error("pmds: a combining object serves 1 to " + std::to_string(max_slots) +
                " slots, not " + std::to_string(slots));
}
inline void check_slot(std::size_t slot, std::size_t slots) {
  if (slot >= slots)
    throw Error("pmds: ticket slot " + std::to_string(slot) + " is out of range (the object has " +
                std::to_string(slots) + " slots)");
}
// The calling thread's slot for a plain (unticketed) operation.
inline std::size_t own_slot(std::size_t slots) {
  const std::size_t slot = pmds::thread_id();
  if (slot >= slots)
    throw TooManyThreads("pmds: thread id " + std::to_string(slot) +
                         " exceeds the combining object's " + std::to_string(slots) +
                         " slots (create it with more slots)");
  return slot;
}

// What a PBComb and a PWFComb instance are alike, whichever way they switch records: the object
// they serve, the persistent area, the record layout, the slots with their announcements and
// tickets, and the paper's RECOVER (Algorithms 1 and 3: an operation took effect if the current
// record's Deactivate bit of its slot has its ticket's parity). `Protocol` (CRTP) provides
// perform(Ticket, const Request&) and served_response(slot, activate): the current record's
// response of the slot if that record has served the slot's request with this activate bit.
template <class Protocol, class Object, Persistence Mode, FaultPolicy Faults>
class ProtocolBase {
 public:
  using Request = typename Object::Request;
  using Response = typename Object::Response;
  static constexpr bool persistent = Mode != Persistence::none;
  using Word =
      std::conditional_t<persistent, pm::atomic<std::uint64_t>, std::atomic<std::uint64_t>>;

  static_assert(std::is_trivially_copyable_v<Response> && sizeof(Response) % 8 == 0);

  ProtocolBase(const ProtocolBase&) = delete;
  ProtocolBase& operator=(const ProtocolBase&) = delete;

  std::size_t slots() const { return slots_; }

  // A plain operation of the calling thread: the ticketed one, with slot pmds::thread_id()'s
  // next ticket. (always_inline here, on start() and on each protocol's served_response: when this
  // base was factored out of PBComb and PWFComb, GCC 12 inlined the hot path otherwise, and
  // queue/pbcomb ran 0.90x and stack/pbcomb-transient 0.86x of before at 1 thread; with it,
  // level.)
  [[gnu::always_inline]] Response perform(const Request& request) {
    const std::size_t slot = own_slot(slots_);
    return protocol().perform(Ticket{slot, requests_.seq(slot) + 1}, request);
  }

  // The slot's next ticket: what a plain operation of that slot would use.
  Ticket next_ticket(std::size_t slot) const {
    check_slot(slot, slots_);
    return Ticket{slot, requests_.seq(slot) + 1};
  }

  // After open, before the slot runs another operation: did the operation with this ticket take
  // effect, and with what response (Algorithm 1, lines 4-6; Algorithm 3, lines 6-9).
  Outcome<Response> recover_pending(Ticket ticket) const requires(Mode == Persistence::detectable) {
    check_slot(ticket.slot, slots_);
    std::optional<Response> served = protocol().served_response(ticket.slot, ticket.seq & 1);
    if constexpr (Faults::planted == Fault::recovery_reports_not_taken) served.reset();
    return {served.has_value(), served.value_or(Response{})};
  }

 protected:
  ProtocolBase(Object& object, void* area, std::size_t slots, RecordLayout layout)
      : object_(&object),
        area_(static_cast<Word*>(area)),
        slots_(slots),
        layout_(layout),
        requests_((check_slot_count(slots), slots)) {}

  // The start of a ticketed operation: the slot's sequence moves to the ticket's, and if the
  // current record has served a request of the ticket's parity, the ticket names an operation
  // that already took effect (invoked again after a crash or a retry): its response, durable
  // since the operation returned or since the crash. Checked before announcing, so no round can
  // be serving this slot now (it has no active request).
  [[gnu::always_inline]] std::optional<Response> start(Ticket ticket) {
    check_slot(ticket.slot, slots_);
    requests_.seq(ticket.slot) = ticket.seq;
    return protocol().served_response(ticket.slot, ticket.seq & 1);
  }

  // At open: every slot starts with no request pending, its activate bit and its sequence equal
  // to its Deactivate bit in the current record (the paper's RECOVER, line 3, for all).
  template <class DeactivateBit>
  void start_slots(DeactivateBit deactivate_bit) {
    for (std::size_t q = 0; q < slots_; ++q) {
      const std::uint64_t bit = deactivate_bit(q);
      requests_.seq(q) = bit;
      requests_.reset(q, bit, false);
    }
  }

  Object* object_;
  Word* area_;
  std::size_t slots_;
  RecordLayout layout_;
  Announcements<Request> requests_;

 private:
  const Protocol& protocol() const { return static_cast<const Protocol&>(*this); }
  Protocol& protocol() { return static_cast<Protocol&>(*this); }
};

}  // namespace detail
}  // namespace pmds::combining

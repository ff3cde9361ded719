// pmds — the container interfaces every structure × technique implements.
//
// Structures are concrete class templates with these member functions (no virtual calls on the
// hot path); the concepts below state the surface, and registry.hpp type-erases them for the
// tools. Keys and values are 8 bytes. Two keys are reserved for sentinels and rejected with
// pmds::ReservedKey by every structure: 0 and 2^64-1. Byte-string maps: ByteStringMap below.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pmds/error.hpp"

namespace pmds {

using Key = std::uint64_t;
using Value = std::uint64_t;

inline constexpr Key min_reserved_key = 0;
inline constexpr Key max_reserved_key = ~Key{0};
inline constexpr Key min_user_key = 1;
inline constexpr Key max_user_key = max_reserved_key - 1;

inline bool is_reserved_key(Key k) {
  return k == min_reserved_key || k == max_reserved_key;
}

// Throws ReservedKey for 0 and 2^64-1, which structures use as sentinels.
inline void check_key(Key k) {
  if (is_reserved_key(k)) [[unlikely]]
    throw ReservedKey("pmds: key " + std::to_string(k) +
                      " is reserved for sentinels; keys must lie in [1, 2^64-2]");
}

// What a durable structure guarantees after a crash (docs/ARCHITECTURE.md §4); the crash lab
// checks it.
enum class Criterion {
  none,        // transient: nothing survives
  durable,     // durable linearizability (Zuriel et al., Mirror; Izraelevitz)
  buffered,    // buffered durable linearizability, with sync() (InCLL, nbMontage)
  detectable,  // detectable recoverability (Fatourou et al.)
};

constexpr const char* to_string(Criterion c) {
  switch (c) {
    case Criterion::none:
      return "none";
    case Criterion::durable:
      return "durable";
    case Criterion::buffered:
      return "buffered";
    case Criterion::detectable:
      return "detectable";
  }
  return "?";
}

// What a buffered structure promises about the operations a crash can lose, by its epochs
// (s.epoch() is its current one; the crash lab checks the promise, crashlab/sim_lab.hpp):
enum class EpochBound {
  none,
  // nbMontage (Theorem 2): a crash in epoch e keeps every operation that linearized
  // in an epoch <= e-2.
  two_epochs,
  // InCLL (§3): a crash in epoch f (the failed epoch) brings back the state at the
  // start of f: every operation of an earlier epoch is kept, none of f.
  failed_epoch,
};

// Constructor tags of every durable structure, the one convention they all follow:
//   S s(create_new, pool, args...);   a new, empty structure in an unused pool
//   S s(open_existing, pool);         the structure the pool holds, recovered
// (transient structures are built without a pool: S s(args...)).
struct CreateTag {
  explicit CreateTag() = default;
};
struct OpenTag {
  explicit OpenTag() = default;
};
inline constexpr CreateTag create_new{};
inline constexpr OpenTag open_existing{};

// What the recovery that opened a durable structure found: s.recovery_stats() of every durable
// structure (zeros for one created new).
struct RecoveryStats {
  std::size_t slots_scanned = 0;   // pool slots recovery examined
  std::size_t live_slots = 0;      // slots the structure holds after recovery: its nodes (and,
                                   // for algo/ structures, its anchor and bucket directories)
  std::size_t freed_slots = 0;     // slots recovery returned to the free lists
  std::size_t duplicate_keys = 0;  // sets: live nodes whose key another live node has (0 unless
                                   // a planted bug made them; the extras are freed)
  // Structures with an EpochBound: the epoch the crash happened in, as recovery found it in the
  // pool (0: none, as after a clean shutdown).
  std::uint64_t crash_epoch = 0;
  double seconds = 0;              // wall time of the whole recovery
};

// Epoch boundaries an epoch-checkpointed structure (InCLL's) passed, and objects it logged
// whole to its external log, since it was opened (the benchmark's logged nodes per epoch).
struct CheckpointCounts {
  std::uint64_t epochs = 0;
  std::uint64_t logged_objects = 0;

  CheckpointCounts& operator+=(const CheckpointCounts& o) {
    epochs += o.epochs;
    logged_objects += o.logged_objects;
    return *this;
  }
  friend CheckpointCounts operator-(CheckpointCounts a, const CheckpointCounts& b) {
    return {a.epochs - b.epochs, a.logged_objects - b.logged_objects};
  }
};

// A set with an 8-byte value per key. insert does not update an existing key (Zuriel et al.).
template <class S>
concept Set = requires(S s, Key k, Value v) {
  { s.insert(k, v) } -> std::same_as<bool>;
  { s.remove(k) } -> std::same_as<bool>;
  { s.contains(k) } -> std::same_as<bool>;
};

// A map: a set plus get. put (insert or update) where the technique supports update.
template <class M>
concept Map = Set<M> && requires(M m, Key k) {
  { m.get(k) } -> std::same_as<std::optional<Value>>;
};
template <class M>
concept UpdatableMap = Map<M> && requires(M m, Key k, Value v) {
  { m.put(k, v) } -> std::same_as<bool>;  // true when the key was absent
};

// A map whose keys and values are byte strings (InCLL and nbMontage store 32-byte keys and 1 KB
// values). Keys and values go in as std::string_view and are copied into the structure; get
// returns an owned copy (a structure may also offer visit(key, f), which runs f on its stored
// value without copying). Any byte string is a key, the empty one included, up to the
// structure's max_key_size (longer ones are rejected with pmds::Error). Decided here, by the
// first structure that needed it (incll/masstree.hpp), for every byte-string map to follow.
template <class M>
concept ByteStringMap = requires(M m, std::string_view k, std::string_view v) {
  { m.insert(k, v) } -> std::same_as<bool>;  // true when the key was absent; never updates
  { m.put(k, v) } -> std::same_as<bool>;     // insert or update; true when the key was absent
  { m.remove(k) } -> std::same_as<bool>;
  { m.contains(k) } -> std::same_as<bool>;
  { m.get(k) } -> std::same_as<std::optional<std::string>>;
};

template <class Q>
concept Queue = requires(Q q, Value v) {
  { q.enqueue(v) } -> std::same_as<void>;
  { q.dequeue() } -> std::same_as<std::optional<Value>>;
};

template <class S>
concept Stack = requires(S s, Value v) {
  { s.push(v) } -> std::same_as<void>;
  { s.pop() } -> std::same_as<std::optional<Value>>;
};

template <class H>
concept PriorityQueue = requires(H h, Key k) {
  { h.insert(k) } -> std::same_as<void>;
  { h.delete_min() } -> std::same_as<std::optional<Key>>;
  { h.get_min() } -> std::same_as<std::optional<Key>>;
};

// Fatourou et al.'s AtomicFloat: a shared word updated by a read-modify-write the object applies.
template <class R>
concept Register = requires(R r, double x) {
  { r.read() } -> std::same_as<double>;
  { r.fetch_multiply(x) } -> std::same_as<double>;  // returns the value before
};

// Detectable recoverability (Fatourou et al. §2). The paper assumes system support: every thread
// has a persistent sequence number that it increments per operation and passes to it, and after a
// crash the system tells the thread's recovery that number again. In pmds a thread names an
// operation by a Ticket: its slot (a small dense id, stable across the crash: the caller's, not
// pmds::thread_id()) and its sequence number, which must go up by one per operation of that slot
// (only its parity is used, as in the paper). After the structure is opened again,
// s.recover_pending(ticket) says whether the operation took effect before the crash, and with
// which response; invoking the operation again with the same ticket returns that response
// without applying it twice, or applies it if it had not taken effect (the paper's RECOVER).
// A slot's operations carry tickets always or never: a plain operation (slot pmds::thread_id())
// advances its slot's parity too, so a caller counting its own tickets would lose step.
struct Ticket {
  std::size_t slot = 0;
  std::uint64_t seq = 0;
};
template <class Response>
struct Outcome {
  bool took_effect = false;
  Response response{};  // meaningful when took_effect
};
// Optional capabilities the benchmark harness and crash lab detect:
//   s.scan(from, max_count, visit)   visit(Key, Value) for up to max_count keys >= from in
//                                    ascending order; returns the number visited (YCSB E)
//   s.for_each(visit)                visit(Key, Value) for every element, quiescent only
//                                    (otherwise contents are read by probing [1, key_range])
//   s.sync()                         buffered techniques: make everything so far durable
template <class S>
concept Scannable = requires(S& s, Key k, std::size_t n) {
  {
    s.scan(k, n, [](Key, Value) {})
    } -> std::convertible_to<std::size_t>;
};
template <class S>
concept Iterable = requires(S& s) {
  s.for_each([](Key, Value) {});
};
template <class S>
concept Syncable = requires(S& s) {
  s.sync();
};
// A structure with background work (an epoch advancer, as nbMontage and InCLL have):
// background_step() does one round of it. Normally the structure runs it in a thread of its
// own; created or opened with CreateOptions::background_thread = false (registry.hpp) it starts
// none, and the caller calls background_step() — the crash lab does, from a thread its
// scheduler runs like the workload's, so that a replay interleaves it exactly as before.
template <class S>
concept HasBackgroundWork = requires(S& s) {
  s.background_step();
};

}  // namespace pmds

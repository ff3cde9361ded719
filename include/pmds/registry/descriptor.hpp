// pmds — the registry's mechanism: descriptors, type-erased entries, instances. The list of
// registered structures is pmds/registry.hpp, which includes this header (never the reverse:
// the mechanism knows no structure).
//
// A registered structure is a *descriptor* type, usually written with Describe<...>:
//
//   Describe<"hash/izraelevitz", Kind::map,
//            factories::Hash<algo::MichaelHashTable<algo::izraelevitz>>,
//            "Michael hash table, Izraelevitz transform: flush+fence after every shared access">
//
// where the factory says how to build the concrete type (see Factory below) and the criterion
// is the type's own (T::criterion, or its memory policy's P::criterion). From the descriptors
// the registry makes two things:
//
//   1. A runtime table, entries(): name, kind, criterion, description, and type-erased
//      function pointers to create one (in DRAM, or in a new pool file), open and recover one
//      from a pool file, apply each operation it has (one table keyed by OpCode), and read the
//      contents; what only some techniques have is a table of its own that the entry points to
//      (BufferedOps, DetectableOps). Instance owns what those create (the structure and its
//      pool). One indirect call per operation: good for the crash lab and the tools, not for a
//      throughput loop.
//   2. Hot-path instantiation: instantiate<Fn, Driver>() returns one function pointer per
//      entry, Driver<Descriptor>::run, each compiled against the concrete type, so a benchmark
//      or crash-lab workload loop calls the structure's member functions directly (inlined,
//      no virtual call per operation). for_each_descriptor() visits the descriptor types.
//      The benchmark harness (pmds/bench/runner.hpp) is the reference client.
//
// Durable structures live in a pmds::pm::Pool whose layout name is the entry name, so opening a
// pool with the wrong structure fails with PoolErrc::layout_mismatch before anything is read.
// A factory keeps its root in pool.root(0) (or as it documents); one structure per pool.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::registry {

// ---------------------------------------------------------------------------------------------
// What an entry is.

enum class Kind : std::uint8_t { set, map, queue, stack, priority_queue, register_object };

constexpr const char* to_string(Kind k) {
  switch (k) {
    case Kind::set:
      return "set";
    case Kind::map:
      return "map";
    case Kind::queue:
      return "queue";
    case Kind::stack:
      return "stack";
    case Kind::priority_queue:
      return "priority-queue";
    case Kind::register_object:
      return "register";
  }
  return "?";
}

// How to size a new structure (and, for open, how far to probe its keys when reading contents).
struct CreateOptions {
  std::uint64_t key_range = 1024;   // keys in use lie in [1, key_range]
  std::uint64_t buckets = 0;        // hash tables: 0 = bucket_count_for(key_range)
  std::uint64_t pool_size = 0;      // durable: pool file bytes; 0 = default_pool_size(key_range)
  std::uint64_t max_pool_size = 0;  // durable: the most the pool may grow to; 0 = it never grows
  std::size_t chunk_size = 0;       // durable: the pool's chunk size; 0 = the entry's (1 MiB)
  std::uint64_t capacity = 0;       // bounded structures (the combining heaps): 0 = capacity_for
  // Structures with background work (HasBackgroundWork): false starts no thread for it; the
  // caller calls background_step() (the crash lab's scheduler does).
  bool background_thread = true;
  // nbMontage structures (montage/): threads that rebuild the index when a pool is opened.
  std::size_t recovery_threads = 1;
  // Byte-string maps (the "-bytes" entries, registry/fixed_size_strings.hpp): the bytes each
  // key and each value is written as. Other entries ignore them.
  std::size_t key_size = 8, value_size = 8;
  // The InCLL Masstrees (masstree/incll, masstree/logging): at open, recover each border on its
  // first access (InCLL §4.3's lazy recovery) rather than every border before open returns.
  // The byte-string form recovers eagerly only and refuses it; other entries ignore it.
  bool lazy_recovery = false;
};

// Zuriel et al. §6 runs 1M keys over 2^20 buckets: one bucket per key of the range, a power of two.
inline std::uint64_t bucket_count_for(const CreateOptions& o) {
  if (o.buckets != 0) return o.buckets;
  return std::bit_ceil(std::max<std::uint64_t>(o.key_range, 16));
}

// A bounded structure's capacity: the key range (a heap of R keys, Fatourou et al.'s Figure 7b),
// but at least 256, room for every element the crash lab's workloads can hold at once.
inline std::uint64_t capacity_for(const CreateOptions& o) {
  if (o.capacity != 0) return o.capacity;
  return std::max<std::uint64_t>(o.key_range, 256);
}

// Room for the whole key range in nodes of up to 192 bytes (more by the key and value bytes
// past 8 each, with a quarter for a byte-string payload's rounding) and buckets of up to 16
// (Mirror's words are a value and a sequence number), plus slack for per-thread chunks and nodes
// awaiting reclamation, at least 64 MiB.
inline std::uint64_t default_pool_size(const CreateOptions& o) {
  if (o.pool_size != 0) return o.pool_size;
  const std::uint64_t mib = 1ull << 20;
  const std::uint64_t extra_bytes =
      (std::max<std::uint64_t>(o.key_size, 8) - 8 + std::max<std::uint64_t>(o.value_size, 8) - 8) *
      5 / 4;
  const std::uint64_t want =
      64 * mib + (192 + extra_bytes) * o.key_range + 16 * bucket_count_for(o);
  return (want + mib - 1) / mib * mib;
}

// A factory says how to build T (a class with static members):
//   using type = T;
//   static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions&);
//       transient: pool is nullptr, build in DRAM; durable: build in the fresh pool
//   static std::unique_ptr<T> open(pm::Pool& pool, const CreateOptions&);   (durable only)
//       recover the structure the pool holds (after a clean or a dirty shutdown)
template <class F>
concept Factory = requires(pm::Pool* pool, const CreateOptions& o) {
  typename F::type;
  { F::create(pool, o) } -> std::same_as<std::unique_ptr<typename F::type>>;
};
template <class F>
concept DurableFactory = Factory<F> && requires(pm::Pool& pool, const CreateOptions& o) {
  { F::open(pool, o) } -> std::same_as<std::unique_ptr<typename F::type>>;
};

// A compile-time string, so names can be template arguments.
template <std::size_t N>
struct Text {
  char chars[N] = {};
  constexpr Text(const char (&s)[N]) { std::copy_n(s, N, chars); }  // NOLINT: implicit on purpose
  constexpr std::string_view view() const { return {chars, N - 1}; }
  // "structure/technique": exactly one '/', neither first nor last. A plain loop over the
  // array: GCC 12 with -fsanitize=undefined cannot evaluate string_view::find on a template
  // parameter object in a constant expression.
  constexpr bool is_structure_slash_technique() const {
    std::size_t slashes = 0;
    for (std::size_t i = 0; i + 1 < N; ++i) slashes += chars[i] == '/' ? 1 : 0;
    return N >= 4 && slashes == 1 && chars[0] != '/' && chars[N - 2] != '/';
  }
};

template <Kind K, class T>
constexpr bool satisfies_kind() {
  if constexpr (K == Kind::set) return Set<T>;
  if constexpr (K == Kind::map) return Map<T>;
  if constexpr (K == Kind::queue) return Queue<T>;
  if constexpr (K == Kind::stack) return Stack<T>;
  if constexpr (K == Kind::priority_queue) return PriorityQueue<T>;
  if constexpr (K == Kind::register_object) return Register<T>;
  return false;
}

// What a structure type guarantees after a crash, stated once by the type: its own
// T::criterion (the bespoke techniques), or its memory policy's T::Policy::criterion (every
// algo/ structure), so the registry never restates it.
template <class T>
concept HasCriterion = requires {
  { T::criterion } -> std::convertible_to<Criterion>;
};
template <class T>
concept HasPolicyCriterion = requires {
  { T::Policy::criterion } -> std::convertible_to<Criterion>;
};
template <class T>
requires HasCriterion<T> || HasPolicyCriterion<T>
constexpr Criterion criterion_of() {
  if constexpr (HasCriterion<T>)
    return T::criterion;
  else
    return T::Policy::criterion;
}

// One registry line. Name is "structure/technique"; a structure with Criterion::none is transient
// (DRAM), any other criterion lives in a pool.
template <Text Name, Kind K, Factory F, Text Description>
struct Describe {
  using factory = F;
  using type = typename F::type;
  static constexpr std::string_view name = Name.view();
  static constexpr std::string_view description = Description.view();
  static constexpr Kind kind = K;
  static constexpr Criterion criterion = criterion_of<type>();
  static constexpr bool durable = criterion != Criterion::none;

  static_assert(Name.is_structure_slash_technique(), "registry names are \"structure/technique\"");
  static_assert(satisfies_kind<K, type>(), "the type does not implement its kind's interface");
  static_assert(!durable || DurableFactory<F>, "a durable entry needs F::open to recover");
};

template <class... Ds>
struct TypeList {
  static constexpr std::size_t size = sizeof...(Ds);
};

// ---------------------------------------------------------------------------------------------
// Type-erased single operations (crash lab, tests, tools; not the benchmark hot path).

enum class OpCode : std::uint8_t {
  insert,          // set/map: insert(key, value) -> ok = inserted
  remove,          // set/map: remove(key) -> ok = removed
  contains,        // set/map: contains(key) -> ok = present
  get,             // map: get(key) -> ok = present, value
  put,             // updatable map: put(key, value) -> ok = key was absent
  enqueue,         // queue: enqueue(value) -> ok
  dequeue,         // queue: dequeue() -> ok = not empty, value
  push,            // stack: push(value) -> ok
  pop,             // stack: pop() -> ok = not empty, value
  pq_insert,       // priority queue: insert(key) -> ok
  delete_min,      // priority queue: delete_min() -> ok = not empty, value = key
  get_min,         // priority queue: get_min() -> ok = not empty, value = key
  read,            // register: read() -> ok, number
  fetch_multiply,  // register: fetch_multiply(factor) -> ok, number = value before
  sync,            // buffered techniques: sync() -> ok
};

constexpr const char* to_string(OpCode c) {
  constexpr const char* names[] = {
      "insert", "remove",    "contains",   "get",     "put",  "enqueue",        "dequeue", "push",
      "pop",    "pq_insert", "delete_min", "get_min", "read", "fetch_multiply", "sync"};
  const auto i = static_cast<std::size_t>(c);
  return i < std::size(names) ? names[i] : "?";
}

struct Operation {
  OpCode code = OpCode::contains;
  Key key = 1;
  Value value = 0;
  double factor = 1.0;
};

struct OpResult {
  bool ok = false;
  std::uint64_t value = 0;  // valid for get/dequeue/pop/delete_min/get_min when ok
  double number = 0;        // register operations
};

// The elements a structure holds, read when it is quiescent. Sets and maps: (key, value) in
// ascending key order (value 0 for sets without get). Queues, stacks, priority queues: the values
// in the order they come out (reading drains the structure). Registers: one item whose key is
// the bit pattern of the double.
struct Item {
  std::uint64_t key = 0;
  std::uint64_t value = 0;
  friend bool operator==(const Item&, const Item&) = default;
};

class UnsupportedOperation : public Error {
 public:
  using Error::Error;
};

class UnknownStructure : public Error {
 public:
  using Error::Error;
};

// An operation applied to a type-erased structure; an entry has one per OpCode it supports.
using ApplyFn = OpResult (*)(void* object, const Operation&);
using TicketedFn = OpResult (*)(void* object, const Operation&, Ticket);
inline constexpr std::size_t op_code_count = static_cast<std::size_t>(OpCode::sync) + 1;

// The capabilities an entry may have beyond its core, each a table the entry points to (null
// when it lacks it), so a new technique's hooks go in its table and not into every Entry.

// Buffered techniques (nbMontage, InCLL): durable at epoch boundaries.
struct BufferedOps {
  EpochBound epoch_bound = EpochBound::none;  // what a crash may lose, by epochs (T::epoch_bound)
  std::uint64_t (*epoch)(const void* object) = nullptr;  // the current epoch (s.epoch())
  // Epoch-checkpointed structures (InCLL's, s.checkpoint_stats(); null otherwise): epoch
  // boundaries passed and objects logged whole to the external log since it was opened.
  CheckpointCounts (*checkpoint_counts)(const void* object) = nullptr;
  // Finishes what its recovery still does while the structure runs (null when it does nothing
  // then): the lazy open of the byte-string Masstrees, whose recovery_stats() count every slot
  // only after it (incll/durable_masstree.hpp).
  void (*finish_recovery)(void* object) = nullptr;
};

// Detectable structures (criterion detectable), interfaces.hpp's Ticket: the ticket the next
// operation `code` of `slot` takes; the operations applied under a ticket, by OpCode (null where
// there is no ticketed form); and, after open, what became of the operation `code` a ticket
// named (nullopt: it did not take effect; otherwise its response).
struct DetectableOps {
  Ticket (*next_ticket)(const void* object, std::size_t slot, OpCode code) = nullptr;
  std::array<TicketedFn, op_code_count> ops{};
  std::optional<OpResult> (*recover_pending)(const void* object, Ticket, OpCode code) = nullptr;

  // The ticketed form of the operation `code` names (null where there is none).
  TicketedFn op(OpCode code) const {
    const auto i = static_cast<std::size_t>(code);
    return i < op_code_count ? ops[i] : nullptr;
  }
};

struct Entry {
  std::size_t index = 0;       // position in entries() and in instantiate<>()'s table
  std::string_view name;       // "hash/izraelevitz"
  std::string_view structure;  // "hash"
  std::string_view technique;  // "izraelevitz"
  std::string_view description;
  Kind kind = Kind::set;
  Criterion criterion = Criterion::none;
  bool durable = false;      // lives in a pool (criterion != none)
  bool can_scan = false;     // scan (YCSB E; the benchmark's hot path only)
  bool can_iterate = false;  // for_each
  // A byte-string map seen as an 8-byte one (registry/fixed_size_strings.hpp): its keys and
  // values are CreateOptions::key_size and value_size bytes. The entries named <structure>-bytes.
  bool byte_strings = false;
  // How its pool is created (durable): the policy's pool_options() if it has one (Mirror's
  // volatile twin), else the defaults.
  pm::PoolOptions pool_options{};
  // The largest block the structure takes from its pool when created with these options, where
  // it states one (T::largest_block, or T::largest_block_for(capacity) for a bounded structure;
  // null: none above a few KiB): the crash lab's chunks must hold it.
  std::size_t (*largest_block)(const CreateOptions&) = nullptr;

  void* (*create)(pm::Pool* pool, const CreateOptions&) = nullptr;
  void* (*open)(pm::Pool& pool, const CreateOptions&) = nullptr;  // null when !durable
  void (*destroy)(void* object) = nullptr;
  // The operations, one table keyed by OpCode: null where the structure has no such operation.
  std::array<ApplyFn, op_code_count> ops{};
  std::vector<Item> (*contents)(void* object, const CreateOptions&) = nullptr;
  // What the recovery that opened the object found (null when the structure does not say):
  // its live_slots is the crash lab's exact leak limit.
  RecoveryStats (*recovery_stats)(const void* object) = nullptr;
  // One round of the structure's background work (null when it has none): HasBackgroundWork,
  // the epoch advancers of the buffered techniques (and a crash-lab fixture's reader).
  void (*background_step)(void* object) = nullptr;

  const BufferedOps* buffered = nullptr;      // nbMontage, InCLL
  const DetectableOps* detectable = nullptr;  // Fatourou et al.'s combining structures

  bool supports(OpCode code) const { return op(code) != nullptr; }
  // put (YCSB A/B updates) and sync (the buffered techniques), as the tools ask.
  bool can_update() const { return supports(OpCode::put); }
  bool can_sync() const { return supports(OpCode::sync); }
  EpochBound epoch_bound() const { return buffered ? buffered->epoch_bound : EpochBound::none; }
  bool has_background_work() const { return background_step != nullptr; }

  // The operation `code` names (null where the structure has none, or `code` is no OpCode).
  ApplyFn op(OpCode code) const {
    const auto i = static_cast<std::size_t>(code);
    return i < op_code_count ? ops[i] : nullptr;
  }
  // One operation on an object of this entry; UnsupportedOperation if it has none such.
  OpResult apply(void* object, const Operation& operation) const {
    if (const ApplyFn f = op(operation.code)) return f(object, operation);
    throw UnsupportedOperation("pmds: " + std::string(name) + " does not support operation " +
                               to_string(operation.code));
  }
};

namespace detail {

// Whether T has the operation C names: by its kind's interface (interfaces.hpp), and, for a
// ticketed form, only the operations of the detectable kinds (queue, stack, priority queue,
// register).
template <OpCode C, class T>
constexpr bool has_operation() {
  switch (C) {
    case OpCode::insert:
    case OpCode::remove:
    case OpCode::contains:
      return Set<T>;
    case OpCode::get:
      return Map<T>;
    case OpCode::put:
      return UpdatableMap<T>;
    case OpCode::enqueue:
    case OpCode::dequeue:
      return Queue<T>;
    case OpCode::push:
    case OpCode::pop:
      return Stack<T>;
    case OpCode::pq_insert:
    case OpCode::delete_min:
    case OpCode::get_min:
      return PriorityQueue<T>;
    case OpCode::read:
    case OpCode::fetch_multiply:
      return Register<T>;
    case OpCode::sync:
      return Syncable<T>;
  }
  return false;
}
template <OpCode C, class T>
constexpr bool has_ticketed_operation() {
  return has_operation<C, T>() && !Set<T> && C != OpCode::sync;
}

// The one place an OpCode meets a structure's member function: operation C applied to s, in its
// ticketed form when a ticket is passed (the detectable structures: Fatourou et al.).
template <OpCode C, class T, class... TicketArg>
OpResult call(T& s, const Operation& op, TicketArg... t) {
  static_assert(sizeof...(TicketArg) == 0 ? has_operation<C, T>() : has_ticketed_operation<C, T>());
  // The value an optional-returning operation produced, as an OpResult.
  const auto from_optional = [](const std::optional<std::uint64_t>& v) {
    return OpResult{v.has_value(), v.value_or(0), 0};
  };
  const auto done = [](bool ok) { return OpResult{ok, 0, 0}; };
  if constexpr (C == OpCode::insert) {
    return done(s.insert(op.key, op.value));
  } else if constexpr (C == OpCode::remove) {
    return done(s.remove(op.key));
  } else if constexpr (C == OpCode::contains) {
    return done(s.contains(op.key));
  } else if constexpr (C == OpCode::get) {
    return from_optional(s.get(op.key));
  } else if constexpr (C == OpCode::put) {
    return done(s.put(op.key, op.value));
  } else if constexpr (C == OpCode::enqueue) {
    s.enqueue(op.value, t...);
    return done(true);
  } else if constexpr (C == OpCode::dequeue) {
    return from_optional(s.dequeue(t...));
  } else if constexpr (C == OpCode::push) {
    s.push(op.value, t...);
    return done(true);
  } else if constexpr (C == OpCode::pop) {
    return from_optional(s.pop(t...));
  } else if constexpr (C == OpCode::pq_insert) {
    s.insert(op.key, t...);
    return done(true);
  } else if constexpr (C == OpCode::delete_min) {
    return from_optional(s.delete_min(t...));
  } else if constexpr (C == OpCode::get_min) {
    return from_optional(s.get_min(t...));
  } else if constexpr (C == OpCode::read) {
    return OpResult{true, 0, s.read(t...)};
  } else if constexpr (C == OpCode::fetch_multiply) {
    return OpResult{true, 0, s.fetch_multiply(op.factor, t...)};
  } else {
    static_assert(C == OpCode::sync);
    s.sync();
    return done(true);
  }
}

template <class T, OpCode C>
constexpr ApplyFn apply_fn() {
  if constexpr (has_operation<C, T>())
    return [](void* p, const Operation& op) { return call<C>(*static_cast<T*>(p), op); };
  else
    return nullptr;
}
template <class T, OpCode C>
constexpr TicketedFn ticketed_fn() {
  if constexpr (has_ticketed_operation<C, T>())
    return
        [](void* p, const Operation& op, Ticket t) { return call<C>(*static_cast<T*>(p), op, t); };
  else
    return nullptr;
}
template <class T, std::size_t... I>
constexpr std::array<ApplyFn, op_code_count> apply_table(std::index_sequence<I...>) {
  return {apply_fn<T, static_cast<OpCode>(I)>()...};
}
template <class T, std::size_t... I>
constexpr std::array<TicketedFn, op_code_count> ticketed_table(std::index_sequence<I...>) {
  return {ticketed_fn<T, static_cast<OpCode>(I)>()...};
}

template <class T>
constexpr bool is_detectable = criterion_of<T>() == Criterion::detectable;
template <class T>
constexpr bool is_buffered = requires(const T& t) {
  T::epoch_bound;
  t.epoch();
};

// A queue keeps one sequence per operation kind (its enqueuers and dequeuers are separate
// combining instances), so its tickets are asked for per kind.
template <class T>
Ticket next_ticket_of(const T& s, std::size_t slot, OpCode code) {
  if constexpr (Queue<T>)
    return s.next_ticket(slot, code == OpCode::enqueue);
  else
    return s.next_ticket(slot);
}

template <class T>
std::optional<OpResult> recover_pending_of(const T& s, Ticket t, OpCode code) {
  if constexpr (Register<T>) {
    const auto o = s.recover_pending(t);
    if (!o.took_effect) return std::nullopt;
    return OpResult{true, 0, o.response};
  } else {
    Outcome<std::optional<Value>> o;
    if constexpr (Queue<T>)
      o = s.recover_pending(t, code == OpCode::enqueue);
    else
      o = s.recover_pending(t);
    if (!o.took_effect) return std::nullopt;
    const bool takes = code == OpCode::dequeue || code == OpCode::pop ||
                       code == OpCode::delete_min || code == OpCode::get_min;
    return takes ? OpResult{o.response.has_value(), o.response.value_or(0), 0}
                 : OpResult{true, 0, 0};
  }
}

template <class T>
inline constexpr DetectableOps detectable_ops{
    [](const void* p, std::size_t slot, OpCode code) {
      return next_ticket_of(*static_cast<const T*>(p), slot, code);
    },
    ticketed_table<T>(std::make_index_sequence<op_code_count>{}),
    [](const void* p, Ticket t, OpCode code) {
      return recover_pending_of(*static_cast<const T*>(p), t, code);
    }};

template <class T>
constexpr BufferedOps make_buffered_ops() {
  BufferedOps b;
  b.epoch_bound = T::epoch_bound;
  b.epoch = [](const void* p) -> std::uint64_t { return static_cast<const T*>(p)->epoch(); };
  if constexpr (requires(const T& t) { t.checkpoint_stats(); })
    b.checkpoint_counts = [](const void* p) {
      const auto s = static_cast<const T*>(p)->checkpoint_stats();
      return CheckpointCounts{s.epochs, s.logged_objects};
    };
  if constexpr (requires(T & t) { t.finish_recovery_sweep(); })
    b.finish_recovery = [](void* p) { static_cast<T*>(p)->finish_recovery_sweep(); };
  return b;
}
template <class T>
inline constexpr BufferedOps buffered_ops = make_buffered_ops<T>();

template <class T>
std::vector<Item> contents_of(T& s, const CreateOptions& o) {
  std::vector<Item> items;
  if constexpr (Set<T>) {
    if constexpr (Iterable<T>) {
      s.for_each([&](Key k, Value v) { items.push_back({k, v}); });
      std::sort(items.begin(), items.end(),
                [](const Item& a, const Item& b) { return a.key < b.key; });
    } else {
      const Key last = std::min<std::uint64_t>(o.key_range, max_user_key);
      for (Key k = min_user_key; k <= last; ++k) {
        if constexpr (Map<T>) {
          if (const auto v = s.get(k)) items.push_back({k, *v});
        } else if (s.contains(k)) {
          items.push_back({k, 0});
        }
      }
    }
  } else if constexpr (Queue<T>) {
    while (const auto v = s.dequeue()) items.push_back({*v, 0});
  } else if constexpr (Stack<T>) {
    while (const auto v = s.pop()) items.push_back({*v, 0});
  } else if constexpr (PriorityQueue<T>) {
    while (const auto v = s.delete_min()) items.push_back({*v, 0});
  } else if constexpr (Register<T>) {
    items.push_back({std::bit_cast<std::uint64_t>(s.read()), 0});
  }
  return items;
}

template <class D>
Entry make_entry(std::size_t index) {
  using T = typename D::type;
  using F = typename D::factory;
  Entry e;
  e.index = index;
  e.name = D::name;
  e.structure = D::name.substr(0, D::name.find('/'));
  e.technique = D::name.substr(D::name.find('/') + 1);
  e.byte_strings = e.structure.ends_with("-bytes");
  e.description = D::description;
  e.kind = D::kind;
  e.criterion = D::criterion;
  e.durable = D::durable;
  e.can_scan = Scannable<T>;
  e.can_iterate = Iterable<T>;
  e.create = [](pm::Pool* pool, const CreateOptions& o) -> void* {
    return F::create(pool, o).release();
  };
  if constexpr (D::durable) {
    e.open = [](pm::Pool& pool, const CreateOptions& o) -> void* {
      return F::open(pool, o).release();
    };
    if constexpr (requires(const T& t) { t.recovery_stats(); })
      e.recovery_stats = [](const void* p) -> RecoveryStats {
        return static_cast<const T*>(p)->recovery_stats();
      };
  }
  if constexpr (requires { T::Policy::pool_options(); }) e.pool_options = T::Policy::pool_options();
  if constexpr (requires { T::largest_block; })
    e.largest_block = [](const CreateOptions&) -> std::size_t { return T::largest_block; };
  else if constexpr (requires(std::size_t c) { T::largest_block_for(c); })
    e.largest_block = [](const CreateOptions& o) -> std::size_t {
      return T::largest_block_for(static_cast<std::size_t>(capacity_for(o)));
    };
  if constexpr (HasBackgroundWork<T>)
    e.background_step = [](void* p) { static_cast<T*>(p)->background_step(); };
  if constexpr (is_buffered<T>) e.buffered = &buffered_ops<T>;
  if constexpr (is_detectable<T>) e.detectable = &detectable_ops<T>;
  e.destroy = [](void* p) { std::default_delete<T>()(static_cast<T*>(p)); };
  e.ops = apply_table<T>(std::make_index_sequence<op_code_count>{});
  e.contents = [](void* p, const CreateOptions& o) { return contents_of(*static_cast<T*>(p), o); };
  return e;
}

template <class List>
struct Table;
template <class... Ds>
struct Table<TypeList<Ds...>> {
  // Defined below the class, not inline, so that a program may compile it in one source file
  // only (registry.hpp's PMDS_REGISTRY_TABLE_IN_ONE_FILE).
  static std::vector<Entry> build();
  template <class Fn, template <class> class Driver>
  static constexpr std::array<Fn, sizeof...(Ds)> functions() {
    return {static_cast<Fn>(&Driver<Ds>::run)...};
  }
  template <class F>
  static void visit(F&& f) {
    (f.template operator()<Ds>(), ...);
  }
  // The entry of the first descriptor D for which Match{}.template operator()<D>() is true,
  // with D's index in the list. Only that descriptor's entry is instantiated: the others'
  // factories are not compiled.
  template <class Match>
  static Entry first_entry() {
    static_assert((Match{}.template operator()<Ds>() || ...),
                  "no registered descriptor matches (see `pmds list`)");
    Entry e;
    bool found = false;
    std::size_t i = 0;
    (
        [&] {
          if constexpr (Match{}.template operator()<Ds>()) {
            if (!found) e = make_entry<Ds>(i);
            found = true;
          }
          ++i;
        }(),
        ...);
    return e;
  }
};

template <class... Ds>
std::vector<Entry> Table<TypeList<Ds...>>::build() {
  std::vector<Entry> v;
  [[maybe_unused]] std::size_t i = 0;
  (v.push_back(make_entry<Ds>(i++)), ...);
  return v;
}

}  // namespace detail

// An Entry for a descriptor that is not in the registry (tests, experiments). Its index is 0.
template <class D>
Entry entry_of() {
  return detail::make_entry<D>(0);
}

// The entries of a TypeList of descriptors, built once on first use; indices count from 0 within
// the list. The body of registry::entries() and of the crash lab's fixture_entries() (a list kept
// apart from the registry), inline or in the one file that compiles them (registry.hpp,
// PMDS_REGISTRY_TABLE_HERE; crashlab/fixtures.hpp, PMDS_FIXTURE_TABLE_HERE).
template <class List>
std::span<const Entry> table_of() {
  static const std::vector<Entry> table = detail::Table<List>::build();
  return table;
}

// ---------------------------------------------------------------------------------------------
// Instance: a live structure, with the pool it lives in (durable) — destroyed before the pool is
// closed. Moving transfers ownership.

class Instance {
 public:
  // A new structure. Durable entries create a new pool file at pool_path (which must not exist)
  // of default_pool_size(options) bytes with layout = entry name; transient ones ignore the path.
  static Instance create(const Entry& entry, const CreateOptions& options,
                         const std::string& pool_path = {}) {
    Instance inst(entry, options);
    if (entry.durable) {
      if (pool_path.empty())
        throw Error("pmds: " + std::string(entry.name) + " is durable and needs a pool file path");
      pm::PoolOptions pool_options = entry.pool_options;
      if (options.chunk_size != 0) pool_options.chunk_size = options.chunk_size;
      pool_options.max_size = options.max_pool_size;
      inst.pool_ = std::make_unique<pm::Pool>(
          pm::Pool::create(pool_path, default_pool_size(options), entry.name, pool_options));
    }
    inst.object_ = entry.create(inst.pool_.get(), options);
    return inst;
  }

  // Opens the pool file at pool_path (layout must be the entry's name) and recovers the
  // structure it holds. Only for durable entries.
  static Instance open(const Entry& entry, const std::string& pool_path,
                       const CreateOptions& options = {}) {
    if (!entry.durable)
      throw Error("pmds: " + std::string(entry.name) +
                  " is transient: there is nothing to open in a pool");
    Instance inst(entry, options);
    inst.pool_ = std::make_unique<pm::Pool>(pm::Pool::open(pool_path, entry.name));
    try {
      inst.object_ = entry.open(*inst.pool_, options);
    } catch (...) {
      inst.pool_->abandon();  // a failed recovery leaves the pool as unclean as it found it
      throw;
    }
    inst.opened_ = true;
    return inst;
  }

  Instance(Instance&& o) noexcept
      : entry_(o.entry_),
        options_(o.options_),
        pool_(std::move(o.pool_)),
        object_(std::exchange(o.object_, nullptr)),
        opened_(o.opened_) {}
  Instance& operator=(Instance&& o) noexcept {
    if (this != &o) {
      close();
      entry_ = o.entry_;
      options_ = o.options_;
      pool_ = std::move(o.pool_);
      object_ = std::exchange(o.object_, nullptr);
      opened_ = o.opened_;
    }
    return *this;
  }
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  ~Instance() { close(); }

  // Destroys the structure and keeps its pool open (to measure or inspect the pool after).
  // Idempotent.
  void destroy() {
    if (object_ != nullptr) entry_->destroy(std::exchange(object_, nullptr));
  }

  // Destroys the structure, then closes its pool (a clean shutdown). Idempotent.
  void close() {
    destroy();
    if (pool_) {
      pool_->close();
      pool_.reset();
    }
  }

  const Entry& entry() const { return *entry_; }
  const CreateOptions& options() const { return options_; }
  void* object() const { return object_; }
  pm::Pool* pool() const { return pool_.get(); }

  // The concrete structure; D must be the descriptor this instance was made from.
  template <class D>
  typename D::type& as() const {
    if (D::name != entry_->name)
      throw Error("pmds: instance of " + std::string(entry_->name) + " used as " +
                  std::string(D::name));
    return *static_cast<typename D::type*>(object_);
  }

  OpResult apply(const Operation& op) const { return entry_->apply(object_, op); }
  std::vector<Item> contents() const { return entry_->contents(object_, options_); }
  // Detectable entries only (Entry::detectable).
  Ticket next_ticket(std::size_t slot, OpCode code) const {
    return detectable().next_ticket(object_, slot, code);
  }
  OpResult apply(const Operation& op, Ticket t) const {
    if (const TicketedFn f = detectable().op(op.code)) return f(object_, op, t);
    throw UnsupportedOperation("pmds: " + std::string(entry_->name) +
                               " has no ticketed operation " + to_string(op.code));
  }
  std::optional<OpResult> recover_pending(Ticket t, OpCode code) const {
    return detectable().recover_pending(object_, t, code);
  }
  bool has_background_work() const { return entry_->has_background_work(); }
  void background_step() const {
    if (has_background_work()) entry_->background_step(object_);
  }
  // Buffered entries' hooks (Entry::buffered), each doing nothing (or nullopt) where the
  // structure lacks it.
  void finish_recovery() const {
    if (entry_->buffered && entry_->buffered->finish_recovery)
      entry_->buffered->finish_recovery(object_);
  }
  std::optional<std::uint64_t> epoch() const {
    if (!entry_->buffered) return std::nullopt;
    return entry_->buffered->epoch(object_);
  }
  std::optional<CheckpointCounts> checkpoint_counts() const {
    if (!entry_->buffered || !entry_->buffered->checkpoint_counts) return std::nullopt;
    return entry_->buffered->checkpoint_counts(object_);
  }
  // What the recovery that opened this instance found; nullopt for a created instance or a
  // structure that does not say.
  std::optional<RecoveryStats> recovery_stats() const {
    if (!opened_ || entry_->recovery_stats == nullptr) return std::nullopt;
    return entry_->recovery_stats(object_);
  }

 private:
  Instance(const Entry& entry, const CreateOptions& options) : entry_(&entry), options_(options) {}
  const DetectableOps& detectable() const {
    if (entry_->detectable == nullptr)
      throw UnsupportedOperation("pmds: " + std::string(entry_->name) +
                                 " is not detectable: it takes no tickets");
    return *entry_->detectable;
  }

  const Entry* entry_;
  CreateOptions options_;
  std::unique_ptr<pm::Pool> pool_;
  void* object_ = nullptr;
  bool opened_ = false;  // recovered from a pool file (not created)
};

}  // namespace pmds::registry

// pmds — memory policies: the seam between a lock-free algorithm and where its words live.
//
// Every lock-free algorithm in include/pmds/algo/ is written once, as a class template over a
// memory policy P (docs/ARCHITECTURE.md §1: "the same lock-free algorithm is not copied per
// technique where a policy can carry the difference" — Mirror's own claim, §3.2 of its paper:
// replace std::atomic with patomic and the allocator). A policy supplies three things:
//
//   1. P::shared<T>   the type of every word other threads can read (a node's key, value and
//                     links; a structure's head, tail, top). T is trivially copyable, <= 8 bytes.
//                     Surface (concept SharedWord):
//        T    load() const                                  a shared read
//        void store(T v, Access a = Access::plain)          a shared write
//        bool compare_exchange(T& expected, T desired, Access a = Access::plain)
//                                                           strong CAS; on failure `expected`
//                                                           receives the current value
//        void init(T v)        a write to a word no other thread can reach yet (a node being
//                              built); durable only after P::Memory::publish of its node
//        T    peek() const     a read while no other thread runs (recovery, destructor, tests)
//      Access::link marks the CAS that makes a new node reachable; the planted bugs act there.
//      P::immutable<T>   a field written only while its node is private and never after (a
//                     key, a value, a height, an anchor's kind): init(), load(), peek() only
//                     (concept ImmutableWord). A policy may store it more cheaply: Mirror keeps
//                     it without a sequence number (Mirror §4.1.1), FliT without a flush
//                     counter; the transient policy makes it a shared<T>, Izraelevitz's a word
//                     whose load persists as a shared load does.
//      A durable policy may add a trailing pm::Site parameter, defaulted to the caller, to the
//      accesses that persist (pm/site.hpp): the crash lab's mutants are then per algorithm line.
//      An immutable<T> load's persist, where a policy has one, is one site for all callers.
//   2. P::Memory      one per structure instance: node allocation, epoch reclamation, the
//                     structure's root (its anchor node), publication and recovery tracing
//                     (concept PolicyMemory, below).
//   3. P::durable, P::criterion, P::name: what the policy promises; P::planted: the crash
//      lab's planted bug (faults.hpp), Fault::none in every shipped policy.
//
// How an algorithm uses it (the protocol every file in algo/ follows):
//   auto guard = mem.pin();                   // every operation, around all shared accesses
//   void* raw = mem.allocate(sizeof(Node));   // a slot; construct the node in it,
//   node->key.init(k); ...                    //   every field initialised with init()
//   mem.publish(node, sizeof(Node));          // contents durable before it is linked
//   link.compare_exchange(expected, node, Access::link);
//   mem.retire(node);                         // after it is unlinked; freed after the epoch
//   mem.deallocate(node);                     // a node that was never published
//   creation: build the anchor, publish it, mem.set_root(anchor);
//   recovery: auto r = mem.begin_recovery(); for every node reachable from mem.root():
//             r.visit(node) BEFORE reading its fields (returns false if already visited);
//             r.finish(). Recovery rebuilds nothing volatile; it writes (through store(),
//             persisted) only to finish what a crash interrupted where the algorithm needs it
//             (the skip list unlinks nodes a crashed remover had marked).
//
// Why this shape fits Mirror (§3–§4 of its paper) without copying the algorithms:
//   - shared<T> = patomic<T>: value + sequence number, 16 bytes, updated by a double-word CAS
//     on the persistent replica, flushed, fenced, then on the DRAM replica; load() reads the
//     DRAM replica only (Fig. 4, 5). Nothing here assumes sizeof(shared<T>) == sizeof(T) or
//     looks inside a shared word: mark bits live in the T value (std::uintptr_t), not in the
//     word's storage, so a value+sequence word carries them unchanged.
//   - init() writes both replicas; publish() flushes the node's persistent replica (Mirror's
//     alloc wrapper, §4.3.2); allocate() returns the DRAM-replica address of a slot whose
//     persistent twin is at a fixed delta (§4.3.1); retire() goes through the same epochs.
//   - the structure's root is written once at creation (set_root), never by an operation.
//   - recovery is a trace (§4.3.3) that calls visit(node) before it reads the node, so Mirror's
//     visit() can copy the slot's persistent replica into the DRAM replica first; finish()
//     hands the live set to its allocator. Izraelevitz's visit() only records the slot.
//
// Every structure S<P> in algo/ (one file each) derives from AnchoredStructure<P>
// (algo/anchored_structure.hpp), which holds its Memory, creates and opens its anchor, and gives
// it the constructors of every durable structure in pmds:
//   S<transient> s;                                  transient (also S(bucket_count) for hash)
//   S<izraelevitz> s(create_new, pool);              create in an unused pool
//   S<izraelevitz> s(open_existing, pool);           open: trace from the root, tell the
//                                                    allocator which slots are live
// A durable structure must be destroyed before its pool (pending frees go to its allocator).
// The allocator's recovery is pool-wide, so a pool holds one algo/ structure.
//
// Policies here:
//   TransientPolicy<Words>   DRAM; Words = StdWords (std::atomic) or PmWords (pm::atomic under
//                            the hardware backend, no flushes: shows pm::atomic costs nothing).
//   IzraelevitzPolicy<>      the general durable transformation of Izraelevitz et al. (DISC
//                            2016; Mirror §7, nbMontage §2): every shared word in the pool
//                            through pm::atomic, a flush + fence after every shared load, store
//                            and CAS; nodes from the pool's ChunkAllocator; Criterion::durable.
//                            IzraelevitzPolicy<Planted<x>> is a crash-lab fixture (faults.hpp).
// Elsewhere: FlitPolicy (algo/flit_policy.hpp: Izraelevitz's memory, but a load persists only
// while a flush counter says a store to its word is in flight); mirror::MirrorPolicy
// (mirror/policy.hpp): patomic words with a DRAM replica in the pool's volatile twin.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "pmds/error.hpp"
#include "pmds/faults.hpp"
#include "pmds/follow_link.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/pm/pool_format.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::algo {

// Which shared write an access is: the planted bugs (a) and (b) act on the linking CAS only, and
// nbMontage's policy makes the link and remove CASes its lin_cas (the "Payloads" section below).
enum class Access : std::uint8_t {
  plain,   // any other shared write
  link,    // the CAS that makes a new node reachable (list/skip-list/BST insert, enqueue, push)
  remove,  // the CAS at which a remove takes effect (a BST's flag): plain but for nbMontage
};

// ---------------------------------------------------------------------------------------------
// The interface, as concepts.

template <class W, class T>
concept SharedWord = requires(W& w, const W& cw, T v, T& expected, Access a) {
  { cw.load() } -> std::same_as<T>;
  { cw.peek() } -> std::same_as<T>;
  { w.store(v) } -> std::same_as<void>;
  { w.store(v, a) } -> std::same_as<void>;
  { w.compare_exchange(expected, v) } -> std::same_as<bool>;
  { w.compare_exchange(expected, v, a) } -> std::same_as<bool>;
  { w.init(v) } -> std::same_as<void>;
};

// visit(node, bytes) checks that node is a slot of the pool holding at least `bytes` (else
// throws PoolCorrupt: the pool's body is damaged) and records it; false if already visited.
// visit_once(node, bytes) is visit() for a node that only one link may reach (a list, a tree):
// a second visit is a cycle or a shared node, PoolCorrupt. Both also take a typed pointer
// (bytes = sizeof the node). corrupt(what) throws PoolCorrupt for a field out of range.
template <class W, class T>
concept ImmutableWord = requires(W& w, const W& cw, T v) {
  { cw.load() } -> std::same_as<T>;
  { cw.peek() } -> std::same_as<T>;
  { w.init(v) } -> std::same_as<void>;
};

template <class R>
concept RecoveryTrace = requires(R& r, const void* node, std::size_t n, const char* what) {
  { r.visit(node, n) } -> std::same_as<bool>;
  { r.visit_once(node, n) } -> std::same_as<void>;
  { r.finish() } -> std::same_as<void>;
  {r.corrupt(what)};
};

template <class M>
concept PolicyMemory = requires(M& m, const M& cm, void* p, const void* cp, std::size_t n) {
  {m.pin()};                                   // RAII epoch guard
  { m.allocate(n) } -> std::same_as<void*>;    // a slot of >= n bytes, 16-byte aligned
  { m.deallocate(p) } -> std::same_as<void>;   // a slot never published
  { m.retire(p) } -> std::same_as<void>;       // freed once no pinned thread can hold it
  { m.publish(cp, n) } -> std::same_as<void>;  // durable by this thread's next fence/RMW
  { cm.root() } -> std::same_as<void*>;        // the anchor, or nullptr
  { m.set_root(cp) } -> std::same_as<void>;    // durable when it returns
  { m.drain() } -> std::same_as<void>;         // quiescent: run pending frees now
};

template <class P>
concept MemoryPolicy = requires {
  { P::durable } -> std::convertible_to<bool>;
  { P::criterion } -> std::convertible_to<Criterion>;
  { P::name } -> std::convertible_to<const char*>;
  { P::planted } -> std::convertible_to<Fault>;
}
&&SharedWord<typename P::template shared<std::uint64_t>, std::uint64_t>&&
    SharedWord<typename P::template shared<std::uintptr_t>, std::uintptr_t>&&
        ImmutableWord<typename P::template immutable<std::uint64_t>, std::uint64_t>&&
            PolicyMemory<typename P::Memory>;

// Durable policies also open a pool and trace it.
template <class P>
concept DurableMemoryPolicy = MemoryPolicy<P> && P::durable &&
    std::constructible_from<typename P::Memory, pm::Pool&, std::size_t> &&
    requires(typename P::Memory& m) {
  { m.begin_recovery() } -> RecoveryTrace;
};

// An immutable<T> with no extra state (Mirror's and FliT's): written by init() while its node is
// private, made durable with the node by Memory::publish before any link reaches it, never
// written after. relaxed: the linking CAS (seq_cst) published the node, and the reader's load of
// that link synchronises with it.
template <class T>
class PublishedWord {
 public:
  PublishedWord() noexcept = default;
  PublishedWord(const PublishedWord&) = delete;
  PublishedWord& operator=(const PublishedWord&) = delete;

  T load() const noexcept { return word_.load(std::memory_order_relaxed); }
  T peek() const noexcept { return word_.load(std::memory_order_relaxed); }
  void init(T v) noexcept { word_.store(v, std::memory_order_relaxed); }

 private:
  pm::atomic<T> word_;
};

namespace detail {

inline constexpr std::size_t node_alignment = 16;  // the pool's slot alignment (cmpxchg16b)

// A durable policy's recovery trace (concept RecoveryTrace). It records the slots the trace
// reaches; finish() hands them to the allocator, which puts every other slot of every used chunk
// on its free lists (no flush needed). Every node is checked before it is read
// (pm::ChunkAllocator::checked_slot): a link of a damaged pool may lead anywhere, and the trace
// must end in PoolCorrupt rather than read outside the pool or loop (docs/ARCHITECTURE.md §5).
// visit_once bounds a walk by the set of visited slots, which cannot outgrow the pool's slots.
// Slots says where a node's slot is and what a first visit does: NodesInPlace (the node is its
// slot) here, Mirror's twin copy in mirror/policy.hpp.
template <class Slots>
class TraceRecovery {
 public:
  TraceRecovery(pm::ChunkAllocator& allocator, RecoveryStats& stats, const char* structure)
      : allocator_(&allocator),
        stats_(&stats),
        structure_(structure),
        a_link_(std::string(structure) + ": a link to a node"),
        live_(allocator) {}
  bool visit(const void* node, std::size_t bytes) {
    const void* slot = Slots::slot_of(node);
    allocator_->checked_slot(slot, bytes, a_link_);
    if (!live_.set(slot)) return false;
    slots_.first_visit(node, slot, *allocator_);
    return true;
  }
  template <class N>
  requires(!std::is_void_v<N>) bool visit(const N* node) { return visit(node, sizeof(N)); }
  void visit_once(const void* node, std::size_t bytes) {
    if (!visit(node, bytes))
      corrupt("a node is reached twice (a cycle, or a node shared by two links)");
  }
  template <class N>
  requires(!std::is_void_v<N>) void visit_once(const N* node) { visit_once(node, sizeof(N)); }
  [[noreturn]] void corrupt(const std::string& what) const {
    allocator_->corrupt(std::string(structure_) + ": " + what);
  }
  const pm::ChunkAllocator& allocator() const { return *allocator_; }
  void finish() {
    const pm::AllocatorRecoveryStats found =
        allocator_->recover([this](void* slot, std::size_t) { return live_.test(slot); });
    *stats_ = RecoveryStats{
        .slots_scanned = found.live_slots + found.free_slots,
        .live_slots = found.live_slots,
        .freed_slots = found.free_slots,
        .duplicate_keys = 0,
        .seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()};
  }

 private:
  pm::ChunkAllocator* allocator_;
  RecoveryStats* stats_;
  const char* structure_;
  std::string a_link_;  // checked_slot's message, made once: visit runs once per link
  pm::ChunkAllocator::SlotBits live_;  // reached slots
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  Slots slots_;
};

struct NodesInPlace {
  static const void* slot_of(const void* node) noexcept { return node; }
  void first_visit(const void*, const void*, const pm::ChunkAllocator&) noexcept {}
};

// A durable structure's root: the address of its anchor in pool.root(slot), written once at
// creation and durable when set_root returns.
class PoolRoot {
 public:
  PoolRoot(pm::Pool& pool, std::size_t slot) : pool_(&pool), slot_(slot) {
    if (slot >= pm::Pool::root_count)
      throw PoolError(PoolErrc::bad_argument,
                      "pmds: root slot " + std::to_string(slot) + " of pool " + pool.path() +
                          " is out of range (the pool has " + std::to_string(pm::Pool::root_count) +
                          " root slots)");
  }
  void* get() const noexcept {
    return reinterpret_cast<void*>(pool_->root(slot_).load(std::memory_order_seq_cst));
  }
  // The fence first: the anchor's flushes (publish) must be complete before the root that
  // makes it reachable can reach memory; the root itself is durable when this returns.
  void set(const void* anchor) noexcept {
    pm::fence();
    auto& word = pool_->root(slot_);
    word.store(reinterpret_cast<std::uintptr_t>(anchor), std::memory_order_seq_cst);
    pm::persist(&word, sizeof word);
  }
  pm::Pool& pool() const noexcept { return *pool_; }
  std::size_t slot() const noexcept { return slot_; }

 private:
  pm::Pool* pool_;
  std::size_t slot_;
};

// What every durable policy's Memory shares: the root, epoch reclamation, the recovery trace
// and what it found. A policy's Memory derives from it and adds allocation and publication.
template <class Recovery>
class PoolMemory {
 public:
  // The structure lives in `pool`; its anchor's address is kept in pool.root(root_slot).
  PoolMemory(pm::Pool& pool, std::size_t root_slot) : root_(pool, root_slot) {}
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;

  auto pin() { return epochs_.pin(); }
  void* root() const noexcept { return root_.get(); }
  void set_root(const void* anchor) noexcept { root_.set(anchor); }
  void drain() { epochs_.drain(); }

  // `structure` names it in the messages of PoolCorrupt.
  Recovery begin_recovery(const char* structure = "structure") {
    return Recovery(allocator(), recovery_stats_, structure);
  }
  // What the last recovery found (live slots = slots the trace reached).
  const RecoveryStats& recovery_stats() const noexcept { return recovery_stats_; }

  pm::Pool& pool() const noexcept { return root_.pool(); }
  std::size_t root_slot() const noexcept { return root_.slot(); }

 protected:
  ~PoolMemory() = default;
  pm::ChunkAllocator& allocator() const noexcept { return root_.pool().allocator(); }
  reclaim::EpochDomain& epochs() noexcept { return epochs_; }

 private:
  PoolRoot root_;
  RecoveryStats recovery_stats_;
  reclaim::EpochDomain epochs_;
};

}  // namespace detail

// How a pool for a durable policy's structures is created: P::pool_options() when the policy
// says (Mirror: room for its volatile twin), else the defaults.
template <class P>
pm::PoolOptions pool_options_for() {
  if constexpr (requires { P::pool_options(); })
    return P::pool_options();
  else
    return {};
}

// ---------------------------------------------------------------------------------------------
// Transient policies: DRAM, no persistence, epoch reclamation. The "DRAM (T)" baselines.

// Which atomic the transient policy's words use.
struct StdWords {
  template <class T>
  using atomic = std::atomic<T>;
  static constexpr const char* name = "std::atomic";
};
// pm::atomic under the hardware backend is std::atomic with the same layout and code; a
// benchmark (bench/atomic_cost_bench.cpp) runs the same list with both to show it.
struct PmWords {
  template <class T>
  using atomic = pm::atomic<T>;
  static constexpr const char* name = "pm::atomic";
};

template <class Words = StdWords>
struct TransientPolicy {
  static constexpr bool durable = false;
  static constexpr Criterion criterion = Criterion::none;
  static constexpr const char* name =
      std::is_same_v<Words, StdWords> ? "transient" : "transient-pm-atomic";
  static constexpr Fault planted = Fault::none;

  // seq_cst, and not the acquire/release the algorithms alone would need (xenium's Harris-Michael
  // and Michael-Scott code has those): the epoch reclamation's argument (reclaim/minimal_epoch.hpp,
  // pin and retire) orders a pin's announcement before the link loads that follow it, and an
  // unlinking CAS before the retire's epoch read; with acquire loads C++ lets a load move above
  // the announcement (ARM would do it), and a node could be freed under a reader. On x86 it costs
  // nothing: loads are MOV and CASes LOCK CMPXCHG under either order, and stores go through
  // store() only in recovery. Measured: the six algo/ structures' transient instantiations built
  // both ways (g++ 12 -O2) have the same 7,944 instructions, in a different order in places; the
  // only XCHG that acquire/release removes is in the planted-bug recovery code (drop_first_*).
  template <class T>
  class shared {
   public:
    T load() const noexcept { return word_.load(std::memory_order_seq_cst); }
    T peek() const noexcept { return word_.load(std::memory_order_relaxed); }
    void store(T v, Access = Access::plain) noexcept { word_.store(v, std::memory_order_seq_cst); }
    bool compare_exchange(T& expected, T desired, Access = Access::plain) noexcept {
      return word_.compare_exchange_strong(expected, desired, std::memory_order_seq_cst);
    }
    // relaxed: the node is private until the linking CAS (seq_cst) publishes it.
    void init(T v) noexcept { word_.store(v, std::memory_order_relaxed); }

   private:
    typename Words::template atomic<T> word_;
  };
  template <class T>
  using immutable = shared<T>;

  class Memory {
   public:
    Memory() = default;
    Memory(const Memory&) = delete;
    Memory& operator=(const Memory&) = delete;

    auto pin() { return epochs_.pin(); }
    void* allocate(std::size_t n) {
      return ::operator new (pm::format::round_up(n, detail::node_alignment),
                             std::align_val_t{detail::node_alignment});
    }
    void deallocate(void* p) noexcept { free_slot(p); }
    void retire(void* p) {
      epochs_.retire(p, [](void* q) { free_slot(q); });
    }
    void publish(const void*, std::size_t) noexcept {}
    void* root() const noexcept { return root_; }
    void set_root(const void* anchor) noexcept { root_ = const_cast<void*>(anchor); }
    void drain() { epochs_.drain(); }

   private:
    static void free_slot(void* p) noexcept {
      ::operator delete (p, std::align_val_t{detail::node_alignment});
    }
    reclaim::EpochDomain epochs_;
    void* root_ = nullptr;
  };
};

using transient = TransientPolicy<StdWords>;
using transient_pm_atomic = TransientPolicy<PmWords>;
static_assert(MemoryPolicy<transient>);
static_assert(MemoryPolicy<transient_pm_atomic>);

// ---------------------------------------------------------------------------------------------
// The Izraelevitz transformation (Izraelevitz, Mendes, Scott, DISC 2016).
//
// Every fact is persisted more than once: by the writer after its write and by every reader
// after its load, and a node's fields share one line, so a load of one field persists the
// others. The crash lab's mutation run (docs/ARCHITECTURE.md §3) shows it: most such persists
// removed alone go unseen (another covers them), and removing a covering pair is caught (the
// mark and unlink persists of a remove; the key and next loads of find; for list, hash, skip
// list and BST, all their survivors removed together are caught within 4 crash points). Those
// redundant even together: a load whose value only feeds a CAS of the same word, which
// persists it (stack push's and AtomicFloat's first loads); loads of fields written before the
// node was published and never after (a stack node's next and value, a dequeued node's value);
// the queue's tail, which recovery recomputes; a dequeue's load of first->next, whose effect
// the persisted head CAS covers (the dequeued node becomes the durable dummy). The transform keeps
// them all on purpose: it is the mechanical, algorithm-blind baseline the techniques are
// measured against, and pruning it per algorithm would make it a technique of its own.

template <FaultPolicy Faults = NoFaults>
struct IzraelevitzPolicy {
  static constexpr bool durable = true;
  static constexpr Criterion criterion = Criterion::durable;
  static constexpr const char* name = "izraelevitz";
  static constexpr Fault planted = Faults::planted;

  template <class T>
  class shared {
   public:
    // A shared load is followed by a flush and a fence of the loaded word: the value may have
    // been written by a thread that has not persisted it yet, and this thread must not act on
    // (and so publish the effect of) a value that a crash could still take back.
    // Each access takes its caller's site (pm/site.hpp): every shared access of the algorithm
    // is its own persistence site in the crash lab's mutation run.
    T load(pm::Site site = pm::Site::current()) const noexcept {
      const T v = word_.load(std::memory_order_seq_cst);
      persist_word(site);
      return v;
    }
    // Recovery and destructors run alone: nothing to order against, and the image they read
    // is by definition what survived.
    T peek() const noexcept { return word_.load(std::memory_order_relaxed); }

    void store(T v, Access a = Access::plain, pm::Site site = pm::Site::current()) noexcept {
      word_.store(v, std::memory_order_seq_cst);
      after_write(a, true, site);
    }

    // A CAS is a read as well as a write: the value it sees (on failure) is persisted too.
    bool compare_exchange(T& expected, T desired, Access a = Access::plain,
                          pm::Site site = pm::Site::current()) noexcept {
      const bool ok = word_.compare_exchange_strong(expected, desired, std::memory_order_seq_cst);
      after_write(a, ok, site);
      return ok;
    }

    // The node is private: a plain store through the access layer (so the simulator records
    // it); Memory::publish flushes the whole node once before it is linked.
    void init(T v) noexcept { word_.store(v, std::memory_order_relaxed); }

   private:
    void persist_word(pm::Site site) const noexcept { pm::persist(&word_, sizeof word_, site); }
    void after_write([[maybe_unused]] Access a, [[maybe_unused]] bool wrote,
                     pm::Site site) noexcept {
      if constexpr (planted == Fault::link_not_flushed) {
        if (a == Access::link && wrote) return;  // planted bug (a)
      } else if constexpr (planted == Fault::link_not_fenced) {
        if (a == Access::link && wrote) {  // planted bug (b)
          pm::flush(&word_, site);
          return;
        }
      }
      persist_word(site);
    }

    pm::atomic<T> word_;
  };
  // Mechanical: an immutable field's load is flushed and fenced like any shared load (the
  // transform does not know which loads are redundant). Unlike shared<T>, it is one persistence
  // site for every immutable field of every algorithm, not its caller's line: why that flush is
  // redundant is a property of the type, so the crash lab's mutation run asks it once, here.
  template <class T>
  class immutable : private shared<T> {
   public:
    using shared<T>::init;
    using shared<T>::peek;
    T load() const noexcept {
      // Mutant survives: an immutable field is written by init() while its node is private and
      // made durable by Memory::publish before the CAS that links the node (or, for an anchor,
      // before set_root names it), so no load can see a value a crash could take back.
      return shared<T>::load(pm::Site::current());
    }
  };

  // The recovery trace: the slots themselves are the nodes (detail::TraceRecovery).
  using Recovery = detail::TraceRecovery<detail::NodesInPlace>;

  class Memory : public detail::PoolMemory<Recovery> {
   public:
    using detail::PoolMemory<Recovery>::PoolMemory;

    void* allocate(std::size_t n) { return this->allocator().allocate(n); }
    void deallocate(void* p) { this->allocator().free(p); }
    void retire(void* p) {
      this->epochs().retire(p, [allocator = &this->allocator()](void* q) { allocator->free(q); });
    }

    // Flushes the node's lines without a fence: the linking CAS that follows is a locked
    // instruction, which on x86 orders the earlier flushes as an sfence would
    // (docs/ARCHITECTURE.md §3).
    void publish(const void* node, std::size_t n, pm::Site site = pm::Site::current()) noexcept {
      if constexpr (planted == Fault::contents_not_flushed) return;  // planted bug (c)
      pm::flush_range(node, n, site);
    }
  };
};

using izraelevitz = IzraelevitzPolicy<>;

static_assert(DurableMemoryPolicy<izraelevitz>);

// ---------------------------------------------------------------------------------------------
// Payloads (nbMontage §3.2; montage/policy.hpp). A policy may keep the abstract state in a
// payload block per element rather than in the nodes: its nodes are then DRAM, and it names
// P::Payload, the field a node holds, and its Memory offers
//   new_payload(key, value)   a payload for a node being built (PoolFull: nothing changed);
//   detach_payload(payload)   the thread's next Access::link or Access::remove CAS removes it
//                             (true; false only for a Keys's handle, algo/keys.hpp, whose
//                             removal committed already: that CAS would fail, so retry);
//   payload_removed(payload)  that CAS took effect (a handle keeps what the removal made);
//   discard_payload(payload)  the payload of a node that was never linked;
//   set_payload_key(payload, k)  a payload not yet linked takes key k instead (the queue's serial
//                             number, its order at recovery, retaken before each link attempt:
//                             nbMontage §5);
// and its retire(node) frees the node's payload with the node. An algorithm that supports such a
// policy keeps a `payload` field in each node that holds an element, makes the payload when it
// builds the node, and detaches it before the CAS that removes or replaces the element: the CASes
// marked Access::link and Access::remove are where an operation takes effect, which nbMontage's
// lin_cas tags its payloads with. Every other policy has none of this (NoPayload: no bytes).
template <class P>
concept HasPayloads = requires {
  typename P::Payload;
};

struct NoPayload {};

template <class P>
struct payload_field {
  using type = NoPayload;
};
template <HasPayloads P>
struct payload_field<P> {
  using type = typename P::Payload;
};
template <class P>
using payload_field_t = typename payload_field<P>::type;

// Value bits a policy's words reserve for themselves (nbMontage: bit 1 marks a descriptor); an
// algorithm's mark bits avoid them.
template <class P>
inline constexpr std::uintptr_t reserved_value_bits = 0;
template <class P>
requires requires {
  P::reserved_value_bits;
}
inline constexpr std::uintptr_t reserved_value_bits<P> = P::reserved_value_bits;

// ---------------------------------------------------------------------------------------------
// Helpers shared by the algorithms.

// A pointer and a mark bit in one word (Harris's logically-deleted mark, a skip-list level
// mark); nodes are 16-byte aligned, so bits 0..3 are free. Natarajan–Mittal uses bits 0 and 1.
inline constexpr std::uintptr_t mark_bit = 1;

// A branch, not a mask, when the bits are clear (nearly always in a search): one cycle less per
// node of a pointer chase, pmds/follow_link.hpp.
template <class N>
N* pointer_of(std::uintptr_t w) noexcept {
  return follow_link<N>(w, std::uintptr_t{3});
}
inline bool is_marked(std::uintptr_t w) noexcept {
  return (w & mark_bit) != 0;
}
template <class N>
std::uintptr_t word_of(const N* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p);
}

}  // namespace pmds::algo

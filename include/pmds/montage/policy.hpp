// pmds — nbMontage (Cai et al., DISC 2021) as a memory policy over algo/: the lock-free algorithm
// of algo/ keeps its index in DRAM and its abstract state in payloads (nbMontage §3.2), so that
// one file holds the algorithm for every technique (algo/policy.hpp, "Payloads").
//
//   MontagePolicy::shared<T>   a DRAM word a lin_cas may hold a descriptor in (epoch_system.hpp):
//                              a load that meets a descriptor helps it and reads again, and a
//                              compare_exchange is the epoch system's: lin_cas for the CASes at
//                              which an update takes effect (Access::link, Access::remove), the
//                              helping cas for every other one. Values keep bit 1 clear (it
//                              marks a descriptor): algo::reserved_value_bits.
//   MontagePolicy::immutable<T>  a plain DRAM field (a key, a value kept beside the payload so
//                              that reads touch DRAM only), written before the node is linked.
//   MontagePolicy::Memory      DRAM nodes with epoch reclamation, and the structure's
//                              EpochSystem: new_payload / detach_payload / discard_payload
//                              (nbMontage Figure 1's pnew, pdetach, pdelete), and retire(node),
//                              whose deleter pdeletes the node's payload once no reader holds it.
//
// The epoch system a word helps in is the one of the operation the calling thread runs: pin()
// names it for the thread (OperationScope), since a word holds no pointer back to its structure
// and a descriptor names only a thread and a serial number. A load reads it only when it meets
// a descriptor (the common path of a search reads no thread-local), a CAS once.
//
// The structure that owns a Memory (montage/natarajan_mittal_bst.hpp) opens the system
// (open_system) and rebuilds the index from the payloads its recovery returns: nothing of the
// index is in the pool, so P::durable is false (no trace recovery) while P::criterion is
// buffered.
//
// MontagePolicy<NoFaults, TransientSystem> (transient_system.hpp) is a structure's transient twin:
// the same algorithm, its payloads on the heap, lin_cas a plain CAS (open_transient_system), so
// that its ratio to the durable structure is nbMontage's cost alone (nbMontage §5).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "pmds/algo/policy.hpp"
#include "pmds/faults.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/transient_system.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::montage {

template <FaultPolicy Faults = NoFaults, class SystemType = EpochSystem<Faults>>
struct MontagePolicy {
  using System = SystemType;
  static constexpr bool transient = std::is_same_v<System, TransientSystem>;
  static_assert(transient || std::is_same_v<System, EpochSystem<Faults>>);
  static constexpr bool durable = false;  // the index is DRAM, rebuilt from the payloads
  static constexpr Criterion criterion = transient ? Criterion::none : Criterion::buffered;
  static constexpr const char* name = "montage";
  static constexpr Fault planted = Faults::planted;
  // Bit 1 of a word marks an installed lin_cas descriptor (epoch_system.hpp).
  static constexpr std::uintptr_t reserved_value_bits = 2;

  using Payload = KeyValuePayload*;  // what a node holds: its payload block (nullptr: none)

  template <class T>
  class shared {
    static_assert(sizeof(T) == sizeof(std::uint64_t) && std::is_integral_v<T>);

   public:
    // acquire: a node linked by a lin_cas (acq_rel) is read complete.
    [[gnu::always_inline]] T load() const noexcept {
      const std::uint64_t v = word_.load(std::memory_order_acquire);
      if constexpr (transient) return v;  // the twin installs no descriptor
      if (is_descriptor(v)) [[unlikely]]
        return help_and_load();
      return v;
    }
    T peek() const noexcept { return word_.load(std::memory_order_relaxed); }
    void store(T v, algo::Access = algo::Access::plain) noexcept {
      word_.store(v, std::memory_order_release);
    }
    // On failure `expected` receives the word's value, any descriptor in it completed first.
    bool compare_exchange(T& expected, T desired, algo::Access a = algo::Access::plain) {
      if constexpr (transient)  // TransientSystem's cas and lin_cas: a plain CAS
        return word_.compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
      System& system = current();
      const bool done = a == algo::Access::plain ? system.cas(word_, expected, desired)
                                                 : system.lin_cas(word_, expected, desired);
      if (!done) expected = system.load(word_);
      return done;
    }
    // relaxed: the node is private until a lin_cas (acq_rel) links it.
    void init(T v) noexcept { word_.store(v, std::memory_order_relaxed); }

   private:
    // Out of line, so that load(), inlined into every traversal, stays four instructions. GCC's
    // limits left load() a call in large callers (the benchmark's inlined loops): skiplist/montage
    // at 1,024 keys ran 0.87-0.90x of the list before algo/ took it.
    [[gnu::noinline]] T help_and_load() const noexcept { return current().load(word_); }

    mutable std::atomic<std::uint64_t> word_{0};  // the epoch system's helping writes it
  };

  template <class T>
  class immutable {
   public:
    T load() const noexcept { return value_; }
    T peek() const noexcept { return value_; }
    void init(T v) noexcept { value_ = v; }

   private:
    T value_{};
  };

  // Makes `system` the calling thread's current one for as long as it lives (nestable).
  class OperationScope {
   public:
    explicit OperationScope(System* system) noexcept : previous_(std::exchange(current_, system)) {}
    OperationScope(const OperationScope&) = delete;
    OperationScope& operator=(const OperationScope&) = delete;
    ~OperationScope() { current_ = previous_; }

   private:
    System* previous_;
  };

  class Memory {
   public:
    Memory() = default;
    Memory(const Memory&) = delete;
    Memory& operator=(const Memory&) = delete;

    // The structure's epoch system, created in or opened from `pool` (EpochSystem's constructors).
    template <class Tag, class... Args>
    System& open_system(Tag tag, pm::Pool& pool, Args&&... args) requires(!transient) {
      system_.emplace(tag, pool, std::forward<Args>(args)...);
      return *system_;
    }
    // The transient twin's system: nothing in a pool.
    System& open_transient_system() requires(transient) {
      system_.emplace();
      return *system_;
    }
    System& system() noexcept { return *system_; }
    const System& system() const noexcept { return *system_; }

    struct Pinned {
      reclaim::EpochDomain::Guard guard;
      OperationScope scope;
    };
    // The twin's words never call current() (shared above), so it names no system.
    auto pin() {
      if constexpr (transient)
        return epochs_.pin();
      else
        return Pinned{epochs_.pin(), OperationScope(&*system_)};
    }

    // malloc's own alignment (16 on x86-64) leaves the edge bits free. Not the transient
    // policy's rounding and aligned new: a 40-byte tree node takes a 48-byte chunk of glibc's
    // malloc this way and a 64-byte one that way (malloc_usable_size and the distance between
    // consecutive nodes, g++ 12 / glibc 2.36).
    void* allocate(std::size_t n) {
      static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= algo::detail::node_alignment);
      return ::operator new(n);
    }
    // A node never linked, or the index freed at a clean close: its payload is not touched.
    void deallocate(void* p) noexcept { free_slot(p); }
    // A node an operation unlinked: freed once no pinned thread can read it, and its payload
    // pdelete-d then (freed two epochs after its anti-node, §3.5).
    template <class N>
    void retire(N* node) {
      System* system = &*system_;
      epochs_.retire(node, [system](N* dead) noexcept {
        if constexpr (requires { dead->payload; }) free_payload(*system, dead->payload);
        free_slot(dead);
      });
    }
    void publish(const void*, std::size_t) noexcept {}  // DRAM: the payload is what persists
    void* root() const noexcept { return root_; }
    void set_root(const void* anchor) noexcept { root_ = const_cast<void*>(anchor); }
    void drain() { epochs_.drain(); }

    // nbMontage Figure 1. new_payload: a payload for a node being built (PoolFull: nothing
    // changed), tagged by this thread's next lin_cas; make_payload<Keys>, the same in the form
    // of an algorithm's Keys (algo/keys.hpp). set_payload_key: the payload is still private (not
    // linked), so its key may change. detach_payload: that lin_cas removes it (true; false only
    // for a handle whose removal committed already: the lin_cas would fail, so retry);
    // payload_removed: it did. discard_payload: a payload whose node was never linked.
    Payload new_payload(Key key, Value value) { return make_payload<WordKeys>(key, value); }
    template <class Keys>
    typename Keys::Payload* make_payload(typename Keys::KeyArg k, typename Keys::ValueArg v) {
      return Keys::make_payload(*system_, k, v);
    }
    void set_payload_key(Payload p, Key key) { p->key.store(key, std::memory_order_relaxed); }
    bool detach_payload(Block* p) {
      if constexpr (planted != Fault::payload_not_detached) system_->pdetach(p);
      return true;
    }
    void payload_removed(Block*) noexcept {}
    void discard_payload(Block* p) { system_->pdelete(p); }

    // The same for a PayloadByUid (key_value_payload.hpp): the payload's line is not touched.
    bool detach_payload(PayloadByUid& h) requires(!transient) {
      const std::uint64_t uid = h.uid_or_anti.load(std::memory_order_relaxed);
      if ((uid & PayloadByUid::anti_tag) != 0) return false;
      detached_anti_ = nullptr;
      if constexpr (planted != Fault::payload_not_detached)
        detached_anti_ = system_->pdetach_by_uid(uid);
      return true;
    }
    void payload_removed(PayloadByUid& h) noexcept {
      h.uid_or_anti.store(PayloadByUid::anti_tag | reinterpret_cast<std::uint64_t>(detached_anti_),
                          std::memory_order_relaxed);
    }
    void discard_payload(PayloadByUid& h) { system_->pdelete(h.block); }

   private:
    static void free_payload(System& system, Block* p) noexcept {
      if (p != nullptr) system.pdelete(p);
    }
    static void free_payload(System& system, const PayloadByUid& h) noexcept {
      if (h.block != nullptr) system.pdelete(h.block, h.committed_anti());
    }
    static void free_slot(void* p) noexcept { ::operator delete(p); }
    // The anti-node of the thread's last detach of a PayloadByUid, for its payload_removed.
    static inline thread_local Block* detached_anti_ = nullptr;
    std::optional<System> system_;  // before epochs_, whose deleters call pdelete
    reclaim::EpochDomain epochs_;
    void* root_ = nullptr;
  };

 private:
  // The epoch system of the operation the calling thread runs (set by Memory::pin).
  static System& current() noexcept { return *current_; }
  static inline thread_local System* current_ = nullptr;
};

static_assert(algo::MemoryPolicy<MontagePolicy<>>);
static_assert(algo::MemoryPolicy<MontagePolicy<NoFaults, TransientSystem>>);

}  // namespace pmds::montage

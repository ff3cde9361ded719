/// \file
/// pmds — the public entry point for the common case: one durable structure in one pool file.
///
/// ```cpp
/// #include <pmds/pmds.hpp>
/// auto counts = pmds::open_or_create<pmds::LinkFreeHashSet>("kv.pool", 256 << 20);
/// counts->insert(42, 1);              // durable when it returns
/// if (counts.recovered()) ...         // the file existed: its contents were recovered
/// ```
///
/// `open_or_create<S>` works for every structure named below. It builds S with S's own
/// constructors and arguments (S(create_new, pool, args...), S(open_existing, pool)); the pool's
/// layout name is `pool_layout<S>`, the structure's name in `pmds list`, so a file made for another
/// structure is refused with PoolError (layout_mismatch) before anything is read, and `pmds check`
/// and `pmds dump` read a file made here. Errors are typed (error.hpp): PoolError for a bad or
/// mismatched file (its code() says which), PoolFull when the pool has no room left (the pool is
/// unchanged), ReservedKey for keys 0 and 2^64-1, TooManyThreads. The structure is destroyed and
/// the pool closed cleanly when the handle goes out of scope; after a crash or kill -9 the next
/// open_or_create recovers it (docs/ARCHITECTURE.md §5).
///
/// The pool grows: the size given is where a new pool starts, and it grows on demand (doubling,
/// at most 1 GiB a step) up to PoolGrowth::max_size, default_max_pool_size unless given:
/// ```cpp
/// auto big = pmds::open_or_create<pmds::MontageHashMap>("m.pool", 16 << 20,
///                                                       {.max_size = 1ull << 40});
/// ```
/// PoolFull comes at that limit, or when the file system has no room for the next step; nothing
/// is lost, and the next growth is tried when space returns. An existing pool keeps the limit it
/// was created with unless a larger one is passed (up to what its directory, sized at create for
/// its max_size, has room for).
///
/// A file whose creation itself crashed (before the structure's root was written) holds no
/// structure: open_or_create reports it as PoolError bad_argument rather than guessing; remove
/// the file to start afresh.
///
/// This header includes the structures and the pool, nothing of the benchmark registry, the
/// harness or the crash lab (the registry is built on it, registry.hpp): a one-structure program
/// compiles in a few seconds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "pmds/algo/atomic_float.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/michael_hash.hpp"
#include "pmds/algo/ms_queue.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/algo/skip_list.hpp"
#include "pmds/algo/treiber_stack.hpp"
#include "pmds/combining/atomic_float.hpp"
#include "pmds/combining/heap.hpp"
#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/pwfcomb.hpp"
#include "pmds/combining/queue.hpp"
#include "pmds/combining/stack.hpp"
#include "pmds/combining/wait_free_queue.hpp"
#include "pmds/error.hpp"
#include "pmds/incll/durable_masstree.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/hash_set.hpp"
#include "pmds/linkfree_soft/linkfree_list.hpp"
#include "pmds/linkfree_soft/linkfree_skiplist.hpp"
#include "pmds/linkfree_soft/soft_list.hpp"
#include "pmds/linkfree_soft/soft_skiplist.hpp"
#include "pmds/linkfree_soft/soft_string_hash_map.hpp"
#include "pmds/mirror/policy.hpp"
#include "pmds/montage/hash_map.hpp"
#include "pmds/montage/natarajan_mittal_bst.hpp"
#include "pmds/montage/queue.hpp"
#include "pmds/montage/skip_list.hpp"
#include "pmds/montage/split_ordered_hash.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/range.hpp"

namespace pmds {

// The durable structures by name, with their names in `pmds list` (pool_layout below).
// Link-free and SOFT (Zuriel et al., OOPSLA 2019): durable linearizability with one psync per
// successful update; no links persisted (validity bits), recovery scans the durable areas.
using LinkFreeList = linkfree_soft::LinkFreeList<>;          // list/linkfree
using LinkFreeHashSet = linkfree_soft::LinkFreeHashSet;      // hash/linkfree
using LinkFreeSkipList = linkfree_soft::LinkFreeSkipList<>;  // skiplist/linkfree
using SoftList = linkfree_soft::SoftList<>;                  // list/soft
using SoftHashSet = linkfree_soft::SoftHashSet<>;            // hash/soft
using SoftSkipList = linkfree_soft::SoftSkipList<>;          // skiplist/soft
// Byte-string keys and values (pmds::ByteStringMap) on SOFT's technique: one psync per insert and
// replacement and remove; update(key, fn) is an atomic read-modify-write.
using SoftStringHashMap = linkfree_soft::SoftStringHashMap;  // hash-bytes/soft
// nbMontage (Cai et al., DISC 2021): buffered durable linearizability. No flush or fence on an
// operation's critical path; a crash loses at most the operations of the last two epochs (10 ms
// each by default), and sync() returns once everything before it is durable.
using MontageHashMap = montage::HashMap<>;           // hash/montage
using MontageSkipList = montage::SkipList<>;         // skiplist/montage (ordered, scan)
using MontageTree = montage::NatarajanMittalTree<>;  // bst/montage
using MontageSplitOrderedHashMap = montage::SplitOrderedHashMap<>;  // hash-so/montage (grows)
using MontageQueue = montage::Queue<>;                              // queue/montage
// Byte-string keys and values (pmds::ByteStringMap).
using MontageByteStringHashMap = montage::ByteStringHashMap<>;    // hash-bytes/montage
using MontageByteStringSkipList = montage::ByteStringSkipList<>;  // skiplist-bytes/montage
// InCLL (Cohen et al., ASPLOS 2019): Masstree, an ordered map with put and scan, checkpointed in
// epochs (64 ms by default); a crash loses the operations of the epoch it hit, sync() ends the
// epoch at once.
using InCLLMasstree = incll::InCLLMasstree<>;      // masstree/incll
using LoggingMasstree = incll::LoggingMasstree<>;  // masstree/logging (external log only)
// Byte-string keys and values (pmds::ByteStringMap), in pool blocks; recovered eagerly.
using InCLLStringMasstree = incll::InCLLStringMasstree<>;      // masstree-bytes/incll
using LoggingStringMasstree = incll::LoggingStringMasstree<>;  // masstree-bytes/logging
// Mirror (Friedman et al., PLDI 2021): durable linearizability for the lock-free algorithms of
// algo/, each shared word a patomic pair (one replica in the pool, one in DRAM that reads go
// to); updates pay one write-back and fence, reads none.
using MirrorList = algo::HarrisMichaelList<mirror::MirrorPolicy<>>;    // list/mirror
using MirrorHashSet = algo::MichaelHashTable<mirror::MirrorPolicy<>>;  // hash/mirror
using MirrorSkipList = algo::SkipList<mirror::MirrorPolicy<>>;         // skiplist/mirror
using MirrorTree = algo::NatarajanMittalTree<mirror::MirrorPolicy<>>;  // bst/mirror
using MirrorQueue = algo::MichaelScottQueue<mirror::MirrorPolicy<>>;   // queue/mirror
using MirrorStack = algo::TreiberStack<mirror::MirrorPolicy<>>;        // stack/mirror
using MirrorAtomicFloat = algo::AtomicFloat<mirror::MirrorPolicy<>>;   // register/mirror
// The general Izraelevitz transformation of the lock-free algorithms (every shared access
// flushed and fenced): durable, but one to two orders of magnitude slower than the above.
using IzraelevitzList = algo::HarrisMichaelList<algo::izraelevitz>;    // list/izraelevitz
using IzraelevitzHashSet = algo::MichaelHashTable<algo::izraelevitz>;  // hash/izraelevitz
using IzraelevitzSkipList = algo::SkipList<algo::izraelevitz>;         // skiplist/izraelevitz
using IzraelevitzTree = algo::NatarajanMittalTree<algo::izraelevitz>;  // bst/izraelevitz
using IzraelevitzQueue = algo::MichaelScottQueue<algo::izraelevitz>;   // queue/izraelevitz
using IzraelevitzStack = algo::TreiberStack<algo::izraelevitz>;        // stack/izraelevitz
using IzraelevitzAtomicFloat = algo::AtomicFloat<algo::izraelevitz>;   // register/izraelevitz
// Persistent software combining (Fatourou et al.): detectable recoverability. Each operation may
// carry a Ticket {slot, seq}; after a crash, recover_pending(ticket) says whether it took effect
// and its response, and invoking it again with the same ticket completes it exactly once.
using PBCombStack = combining::CombiningStack<combining::PBComb,
                                              combining::Persistence::detectable>;  // stack/pbcomb
using PBCombQueue = combining::CombiningQueue<combining::Persistence::detectable>;  // queue/pbcomb
using PBCombHeap =
    combining::CombiningHeap<combining::PBComb, combining::Persistence::detectable>;  // heap/pbcomb
using PBCombAtomicFloat =
    combining::CombiningAtomicFloat<combining::PBComb,
                                    combining::Persistence::detectable>;  // register/pbcomb
// The wait-free protocol.
using PWFCombStack =
    combining::CombiningStack<combining::PWFComb,
                              combining::Persistence::detectable>;  // stack/pwfcomb
using PWFCombQueue =
    combining::WaitFreeCombiningQueue<combining::Persistence::detectable>;  // queue/pwfcomb
using PWFCombHeap = combining::CombiningHeap<combining::PWFComb,
                                             combining::Persistence::detectable>;  // heap/pwfcomb
using PWFCombAtomicFloat =
    combining::CombiningAtomicFloat<combining::PWFComb,
                                    combining::Persistence::detectable>;  // register/pwfcomb

// ---- Choose by contract ------------------------------------------------------------------------
// The same structures named by what a user gets: when an operation is durable, what the keys are,
// hashed or ordered. Each is the technique that measured best for that contract here (README,
// "Which map should I use", gives the figures and the papers); the names above stay available.
//
// Durable on return (durable linearizability): a crash loses no operation that returned.
// Buffered (buffered durable linearizability): a crash loses at most the last epochs' operations
// (tens of milliseconds), never reorders them; sync() returns once everything before it is
// durable; no flush or fence on an operation's path.
// Detectable (detectable recoverability): after a crash, recover_pending(ticket) says whether an
// operation took effect and what it returned.

/// Durable on return; 8-byte keys and values, hashed; link-free (seed 000 §3).
using DurableHashMap = LinkFreeHashSet;
/// Durable on return; 8-byte keys and values, ordered, range and scan; SOFT (seed 000 §4).
using DurableOrderedMap = SoftSkipList;
/// Durable on return; byte strings, hashed, update(); SOFT (seed 000 §4).
using DurableStringHashMap = SoftStringHashMap;
/// Buffered (durable after sync()); 8-byte keys and values, hashed; nbMontage (seed 003).
using BufferedHashMap = MontageHashMap;
/// Buffered (durable after sync()); 8-byte keys and values, ordered, range and scan; InCLL
/// (seed 002).
using BufferedOrderedMap = InCLLMasstree;
/// Buffered (durable after sync()); byte strings, hashed; nbMontage (seed 003).
using BufferedStringHashMap = MontageByteStringHashMap;
/// Buffered (durable after sync()); byte strings, ordered, range and scan; InCLL (seed 002).
using BufferedStringOrderedMap = InCLLStringMasstree;
/// Detectable; a FIFO queue of 8-byte values; PBComb (seed 004).
using DetectableQueue = PBCombQueue;
/// Detectable; a LIFO stack of 8-byte values; PBComb (seed 004).
using DetectableStack = PBCombStack;
/// Detectable; a min-priority queue of 8-byte keys; PBComb (seed 004).
using DetectablePriorityQueue = PBCombHeap;

// The layout name a pool made by open_or_create<S> carries: S's name in `pmds list` (the
// registry checks that its entries agree, registry.hpp). Empty for a type not named here.
template <class S>
inline constexpr std::string_view pool_layout{};
template <>
inline constexpr std::string_view pool_layout<LinkFreeList> = "list/linkfree";
template <>
inline constexpr std::string_view pool_layout<LinkFreeHashSet> = "hash/linkfree";
template <>
inline constexpr std::string_view pool_layout<LinkFreeSkipList> = "skiplist/linkfree";
template <>
inline constexpr std::string_view pool_layout<SoftList> = "list/soft";
template <>
inline constexpr std::string_view pool_layout<SoftHashSet> = "hash/soft";
template <>
inline constexpr std::string_view pool_layout<SoftSkipList> = "skiplist/soft";
template <>
inline constexpr std::string_view pool_layout<SoftStringHashMap> = "hash-bytes/soft";
template <>
inline constexpr std::string_view pool_layout<MontageHashMap> = "hash/montage";
template <>
inline constexpr std::string_view pool_layout<MontageSkipList> = "skiplist/montage";
template <>
inline constexpr std::string_view pool_layout<MontageTree> = "bst/montage";
template <>
inline constexpr std::string_view pool_layout<MontageSplitOrderedHashMap> = "hash-so/montage";
template <>
inline constexpr std::string_view pool_layout<MontageQueue> = "queue/montage";
template <>
inline constexpr std::string_view pool_layout<MontageByteStringHashMap> = "hash-bytes/montage";
template <>
inline constexpr std::string_view pool_layout<MontageByteStringSkipList> = "skiplist-bytes/montage";
template <>
inline constexpr std::string_view pool_layout<InCLLMasstree> = "masstree/incll";
template <>
inline constexpr std::string_view pool_layout<LoggingMasstree> = "masstree/logging";
template <>
inline constexpr std::string_view pool_layout<InCLLStringMasstree> = "masstree-bytes/incll";
template <>
inline constexpr std::string_view pool_layout<LoggingStringMasstree> = "masstree-bytes/logging";
template <>
inline constexpr std::string_view pool_layout<MirrorList> = "list/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorHashSet> = "hash/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorSkipList> = "skiplist/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorTree> = "bst/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorQueue> = "queue/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorStack> = "stack/mirror";
template <>
inline constexpr std::string_view pool_layout<MirrorAtomicFloat> = "register/mirror";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzList> = "list/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzHashSet> = "hash/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzSkipList> = "skiplist/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzTree> = "bst/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzQueue> = "queue/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzStack> = "stack/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<IzraelevitzAtomicFloat> = "register/izraelevitz";
template <>
inline constexpr std::string_view pool_layout<PBCombStack> = "stack/pbcomb";
template <>
inline constexpr std::string_view pool_layout<PBCombQueue> = "queue/pbcomb";
template <>
inline constexpr std::string_view pool_layout<PBCombHeap> = "heap/pbcomb";
template <>
inline constexpr std::string_view pool_layout<PBCombAtomicFloat> = "register/pbcomb";
template <>
inline constexpr std::string_view pool_layout<PWFCombStack> = "stack/pwfcomb";
template <>
inline constexpr std::string_view pool_layout<PWFCombQueue> = "queue/pwfcomb";
template <>
inline constexpr std::string_view pool_layout<PWFCombHeap> = "heap/pwfcomb";
template <>
inline constexpr std::string_view pool_layout<PWFCombAtomicFloat> = "register/pwfcomb";

// How far a pool made by open_or_create may grow (the top of this header). The default limit is
// a number rather than a share of the file system's free space, which changes while the pool
// lives: 64 GiB (8 GiB under ThreadSanitizer, whose address range holds only a few such
// reservations). A pool reserves the address range of its limit when it opens (address space
// only, not memory) and its chunk directory has a word per 1 MiB chunk of it (512 KiB for
// 64 GiB), so a far larger default would cost small pools.
#if defined(__SANITIZE_THREAD__)
inline constexpr std::uint64_t default_max_pool_size = std::uint64_t{8} << 30;
#else
inline constexpr std::uint64_t default_max_pool_size = std::uint64_t{64} << 30;
#endif
/// How far a pool made or opened by open_or_create may grow.
struct PoolGrowth {
  std::uint64_t max_size = default_max_pool_size;  ///< bytes; PoolFull beyond it
};

template <class S>
class Durable;
namespace detail {
template <class S, class... CreateArgs>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t pool_size,
                          std::uint64_t max_size, std::uint64_t open_max_size,
                          const CreateArgs&... create_args);
}  // namespace detail

/// A durable structure and the pool it lives in, owned together; movable, not copyable. The
/// destructor (or close()) destroys the structure and closes the pool cleanly; after a crash or
/// kill -9 the next open_or_create recovers it.
template <class S>
class Durable {
 public:
  Durable(Durable&&) noexcept = default;
  Durable& operator=(Durable&& o) noexcept {
    if (this != &o) {
      close();
      pool_ = std::move(o.pool_);
      structure_ = std::move(o.structure_);
      recovered_ = o.recovered_;
    }
    return *this;
  }
  ~Durable() { close(); }

  S& operator*() const { return *structure_; }
  S* operator->() const { return structure_.get(); }
  pm::Pool& pool() const { return *pool_; }
  /// True when the file existed and its structure was recovered (after a clean close or a crash).
  bool recovered() const { return recovered_; }
  /// Destroys the structure, then closes the pool cleanly, now (the destructor does it
  /// otherwise). Idempotent.
  void close() {
    structure_.reset();
    if (pool_) {
      pool_->close();
      pool_.reset();
    }
  }

 private:
  template <class T, class... A>
  friend Durable<T> detail::open_or_create(const std::filesystem::path&, std::uint64_t,
                                           std::uint64_t, std::uint64_t, const A&...);
  Durable(std::unique_ptr<pm::Pool> pool, std::unique_ptr<S> structure, bool recovered)
      : pool_(std::move(pool)), structure_(std::move(structure)), recovered_(recovered) {}

  std::unique_ptr<pm::Pool> pool_;
  std::unique_ptr<S> structure_;  // destroyed before the pool closes (close())
  bool recovered_;
};

namespace detail {

template <class First, class... Rest>
const auto& last_of(const First& first, const Rest&... rest) {
  if constexpr (sizeof...(Rest) == 0)
    return first;
  else
    return last_of(rest...);
}

// S(open_existing, pool, options) when S's recovery takes the last create argument (the options
// of a running nbMontage or InCLL structure: its epoch length, its background thread), else
// S(open_existing, pool): what S was created with (bucket counts, capacities) is in the pool.
template <class S, class... A>
std::unique_ptr<S> open_structure(pm::Pool& pool, const A&... create_args) {
  if constexpr (sizeof...(A) > 0) {
    using Last = std::remove_cvref_t<decltype(last_of(create_args...))>;
    if constexpr (std::is_constructible_v<S, OpenTag, pm::Pool&, const Last&>)
      return std::make_unique<S>(open_existing, pool, last_of(create_args...));
  }
  return std::make_unique<S>(open_existing, pool);
}

}  // namespace detail

namespace detail {

// max_size: the limit of a new pool; open_max_size: the limit passed to an existing pool's open
// (0: its own).
template <class S, class... CreateArgs>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t pool_size,
                          std::uint64_t max_size, std::uint64_t open_max_size,
                          const CreateArgs&... create_args) {
  static_assert(!pool_layout<S>.empty(),
                "open_or_create<S> takes the durable structures named in pmds/pmds.hpp; build "
                "any other with S(create_new, pool, ...) on a pm::Pool");
  pm::PoolOptions pool_options;
  if constexpr (requires { S::Policy::pool_options(); })
    pool_options = S::Policy::pool_options();  // Mirror: room for the DRAM twin
  pool_options.max_size = std::max<std::uint64_t>(max_size, pool_size);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    try {
      auto pool = std::make_unique<pm::Pool>(
          pm::Pool::create(path.string(), pool_size, pool_layout<S>, pool_options));
      auto structure = std::make_unique<S>(create_new, *pool, create_args...);
      return Durable<S>(std::move(pool), std::move(structure), false);
    } catch (const PoolError& e) {
      // Another process created the file between the check and the create: open it.
      if (e.code() != PoolErrc::already_exists) {
        std::filesystem::remove(path, ec);  // a pool whose structure could not be built
        throw;
      }
    } catch (...) {
      std::filesystem::remove(path, ec);
      throw;
    }
  }
  auto pool =
      std::make_unique<pm::Pool>(pm::Pool::open(path.string(), pool_layout<S>, open_max_size));
  std::unique_ptr<S> structure;
  try {
    structure = open_structure<S>(*pool, create_args...);
  } catch (...) {
    // Not close(): that would mark the pool clean, and the next open would trust it (InCLL
    // keeps its failed epoch only after an unclean shutdown).
    pool->abandon();
    throw;
  }
  return Durable<S>(std::move(pool), std::move(structure), true);
}

}  // namespace detail

/// Opens the pool file at `path` and recovers the S it holds, or, when there is no such file,
/// creates one starting at `initial_size` bytes (a multiple of 4096) holding a new, empty
/// S(create_new, pool, create_args...): S's own arguments and defaults (a hash set's bucket
/// count, nbMontage's montage::Options, InCLL's incll::Options, a heap's capacity). An existing
/// structure keeps what it was created with; an options object passed last also governs a
/// recovered nbMontage or InCLL structure.
/// `growth` says how far the pool may grow (see the top of this header); the overload without it
/// uses default_max_pool_size for a new pool and keeps an existing pool's own limit.
template <class S, class... CreateArgs>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t initial_size,
                          const PoolGrowth& growth, const CreateArgs&... create_args) {
  return detail::open_or_create<S>(path, initial_size, growth.max_size, growth.max_size,
                                   create_args...);
}
template <class S, class... CreateArgs>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t initial_size,
                          const CreateArgs&... create_args) {
  return detail::open_or_create<S>(path, initial_size, default_max_pool_size, 0, create_args...);
}

}  // namespace pmds

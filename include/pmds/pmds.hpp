// pmds — the public entry point for the common case: one durable structure in one pool file.
//
//   #include <pmds/pmds.hpp>
//   auto counts = pmds::open_or_create<pmds::LinkFreeHashSet>("kv.pool", 256 << 20);
//   counts->insert(42, 1);              // durable when it returns
//   if (counts.recovered()) ...         // the file existed: its contents were recovered
//
// open_or_create<S> works for every durable structure the registry lists (`pmds list`): the
// pool's layout name is the registry name of S, so a file made for another structure is refused
// with PoolError (layout_mismatch) before anything is read. Errors are typed (error.hpp):
// PoolError for a bad or mismatched file (its code() says which), PoolFull when the pool has no
// room left (the pool is unchanged), ReservedKey for keys 0 and 2^64-1, TooManyThreads. The
// structure is destroyed and the pool closed cleanly when the handle goes out of scope; after a
// crash or kill -9 the next open_or_create recovers it (docs/ARCHITECTURE.md §5).
//
// A file whose creation itself crashed (before the structure's root was written) holds no
// structure: open_or_create reports it as PoolError bad_argument rather than guessing; remove
// the file to start afresh.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/registry.hpp"

namespace pmds {

// The durable structures by name (registry names in brackets).
using LinkFreeList = linkfree_soft::LinkFreeList<>;          // list/linkfree
using LinkFreeHashSet = linkfree_soft::LinkFreeHashSet;      // hash/linkfree
using LinkFreeSkipList = linkfree_soft::LinkFreeSkipList<>;  // skiplist/linkfree
using SoftList = linkfree_soft::SoftList<>;                  // list/soft
using SoftHashSet = linkfree_soft::SoftHashSet<>;            // hash/soft
using SoftSkipList = linkfree_soft::SoftSkipList<>;          // skiplist/soft
// nbMontage (seed 003): buffered durable linearizability. No flush or fence on an operation's
// critical path; a crash loses at most the operations of the last two epochs (10 ms each by
// default), and sync() returns once everything before it is durable.
using MontageHashMap = montage::HashMap<>;           // hash/montage
using MontageSkipList = montage::SkipList<>;         // skiplist/montage (ordered, scan)
using MontageTree = montage::NatarajanMittalTree<>;  // bst/montage
using MontageSplitOrderedHashMap = montage::SplitOrderedHashMap<>;  // hash-so/montage (grows)
using MontageQueue = montage::Queue<>;                              // queue/montage
// Byte-string keys and values (pmds::ByteStringMap).
using MontageByteStringHashMap = montage::ByteStringHashMap<>;    // hash-bytes/montage
using MontageByteStringSkipList = montage::ByteStringSkipList<>;  // skiplist-bytes/montage
// InCLL (seed 002): Masstree, an ordered map with put and scan, checkpointed in epochs (64 ms by
// default); a crash loses the operations of the epoch it hit, sync() ends the epoch at once.
using InCLLMasstree = incll::InCLLMasstree<>;      // masstree/incll
using LoggingMasstree = incll::LoggingMasstree<>;  // masstree/logging (external log only)
// Byte-string keys and values (pmds::ByteStringMap), in pool blocks; recovered eagerly.
using InCLLStringMasstree = incll::InCLLStringMasstree<>;      // masstree-bytes/incll
using LoggingStringMasstree = incll::LoggingStringMasstree<>;  // masstree-bytes/logging
// The general Izraelevitz transformation of the lock-free algorithms (every shared access
// flushed and fenced): durable, but one to two orders of magnitude slower than the above.
using IzraelevitzList = algo::HarrisMichaelList<algo::izraelevitz>;    // list/izraelevitz
using IzraelevitzHashSet = algo::MichaelHashTable<algo::izraelevitz>;  // hash/izraelevitz
using IzraelevitzSkipList = algo::SkipList<algo::izraelevitz>;         // skiplist/izraelevitz
using IzraelevitzTree = algo::NatarajanMittalTree<algo::izraelevitz>;  // bst/izraelevitz
using IzraelevitzQueue = algo::MichaelScottQueue<algo::izraelevitz>;   // queue/izraelevitz
using IzraelevitzStack = algo::TreiberStack<algo::izraelevitz>;        // stack/izraelevitz
using IzraelevitzAtomicFloat = algo::AtomicFloat<algo::izraelevitz>;   // register/izraelevitz
// Persistent software combining (seed 004): detectable recoverability. Each operation may carry
// a Ticket {slot, seq}; after a crash, recover_pending(ticket) says whether it took effect and
// its response, and invoking it again with the same ticket completes it exactly once.
using PBCombStack = combining::CombiningStack<combining::PBComb,
                                              combining::Persistence::detectable>;  // stack/pbcomb
using PBCombQueue = combining::CombiningQueue<combining::Persistence::detectable>;  // queue/pbcomb
using PBCombHeap =
    combining::CombiningHeap<combining::PBComb, combining::Persistence::detectable>;  // heap/pbcomb
using PBCombAtomicFloat =
    combining::CombiningAtomicFloat<combining::PBComb, combining::Persistence::detectable>;
// The wait-free protocol.
using PWFCombStack =
    combining::CombiningStack<combining::PWFComb,
                              combining::Persistence::detectable>;  // stack/pwfcomb
using PWFCombQueue =
    combining::WaitFreeCombiningQueue<combining::Persistence::detectable>;  // queue/pwfcomb
using PWFCombHeap = combining::CombiningHeap<combining::PWFComb,
                                             combining::Persistence::detectable>;  // heap/pwfcomb
using PWFCombAtomicFloat =
    combining::CombiningAtomicFloat<combining::PWFComb, combining::Persistence::detectable>;

// A durable structure and the pool it lives in, owned together; movable, not copyable.
template <class S>
class Durable {
 public:
  S& operator*() const { return *static_cast<S*>(instance_.object()); }
  S* operator->() const { return static_cast<S*>(instance_.object()); }
  pm::Pool& pool() const { return *instance_.pool(); }
  // True when the file existed and its structure was recovered (after a clean close or a crash).
  bool recovered() const { return recovered_; }
  // Destroys the structure and closes the pool cleanly now (the destructor does it otherwise).
  void close() { instance_.close(); }

 private:
  template <class T>
  friend Durable<T> open_or_create(const std::filesystem::path&, std::uint64_t,
                                   registry::CreateOptions);
  Durable(registry::Instance instance, bool recovered)
      : instance_(std::move(instance)), recovered_(recovered) {}

  registry::Instance instance_;
  bool recovered_;
};

// Opens the pool file at `path` and recovers the S it holds, or, when there is no such file,
// creates one of `pool_size` bytes (a multiple of 4096) holding a new, empty S. `options`
// carries what a new structure is built with (hash tables: buckets; 0 = one per key of
// options.key_range, a power of two); an existing structure keeps its own.
template <class S>
Durable<S> open_or_create(const std::filesystem::path& path, std::uint64_t pool_size,
                          registry::CreateOptions options = {}) {
  static_assert(registry::criterion_of<S>() != Criterion::none,
                "open_or_create needs a durable structure; a transient one is built directly");
  const registry::Entry& entry = registry::entry_of_type<S>();
  options.pool_size = pool_size;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    try {
      return Durable<S>(registry::Instance::create(entry, options, path.string()), false);
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
  return Durable<S>(registry::Instance::open(entry, path.string(), options), true);
}

}  // namespace pmds

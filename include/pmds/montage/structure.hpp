// pmds::montage::Structure — what nbMontage adds around an algorithm of algo/ over MontagePolicy
// (montage/policy.hpp): the pool's root and epoch system, sync and the counts of the last
// recovery. The BST, the skip list, the hash tables and the queue
// (montage/natarajan_mittal_bst.hpp, skip_list.hpp, hash_map.hpp, queue.hpp) derive from it and add
// their pool tag, their rebuild of the DRAM index from the payloads that recovery keeps (nbMontage
// §3.4) and their clean close.
//
// The clean close is the derived class's destructor, `~S() { this->sync(); }`: everything completed
// is made durable, then the algorithm's destructor frees the DRAM index (the payloads stay). Not
// this class's: its destructor also runs when the derived constructor throws (a pool of another
// structure, a damaged one), and a refused pool must be left unwritten.
//
// The index lives in DRAM and is rebuilt at every open, so the pool holds only the StructureRoot
// (epoch_system.hpp: the tag, a parameter of 0, the epoch system's area) and the payload and
// anti-node blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/parallel.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

// Algorithm: an algo/ structure over MontagePolicy<Faults>.
template <class Algorithm, FaultPolicy Faults>
class Structure : public Algorithm {
 public:
  static constexpr Criterion criterion = Criterion::buffered;
  static constexpr EpochBound epoch_bound = EpochBound::two_epochs;

  Structure(const Structure&) = delete;
  Structure& operator=(const Structure&) = delete;

  // Everything completed before the call is durable when it returns (two epoch advances).
  void sync() { mem_.system().sync(); }
  // One epoch advance: what the background thread does every epoch (Options::epoch_length).
  void background_step() { mem_.system().background_step(); }
  std::uint64_t epoch() const { return mem_.system().epoch(); }

  const RecoveryStats& recovery_stats() const { return recovery_; }

 protected:
  using Algorithm::mem_;
  using Recovered = typename EpochSystem<Faults>::Recovered;

  // The algorithm's constructor arguments (none, or the hash table's bucket count).
  template <class... Args>
  explicit Structure(Args&&... args) : Algorithm(std::forward<Args>(args)...) {}

  // A new, empty structure in `pool`, which must hold none: its epoch system, and the root with
  // the structure's `tag` and `parameter` (the hash table's bucket count).
  void create(pm::Pool& pool, const Options& options, std::uint64_t tag, const char* name,
              std::uint64_t parameter = 0) {
    StructureRoot::check_unused(pool, name);
    auto& system = mem_.open_system(create_new, pool, options);
    StructureRoot::write(pool, tag, parameter, system.area());
  }

  // Opens the structure of `tag` that `pool` holds: the payloads its epoch system's recovery
  // keeps, `damaged` being the structure's check of a payload's fields (EpochSystem::recover).
  template <class Damaged>
  Recovered recover(pm::Pool& pool, const Options& options, std::uint64_t tag, const char* name,
                    Damaged damaged) {
    const auto [parameter, area] = StructureRoot::read(pool, tag, name);
    (void)parameter;
    Recovered r = mem_.open_system(open_existing, pool, area, options).recover(damaged);
    recovery_ = r.stats;
    return r;
  }

  // The index nodes of the payloads recovery kept (in the form of `Keys`,
  // key_value_payload.hpp), in key order, one per key: make(entry) for each, over
  // Options::recovery_threads threads. A key found twice (impossible without a bug) keeps one
  // payload; the others are freed, and the recovery counts say so.
  template <class Keys = WordKeys, class Make>
  std::vector<typename Algorithm::Node*> nodes_in_key_order(const Recovered& r, Make make) {
    return nodes_in_order<Keys>(r, &Keys::less, make);
  }
  // The same, in the order of `less`, which keeps the entries of a key adjacent (the hash
  // table's: by bucket, then key).
  template <class Keys, class Less, class Make>
  std::vector<typename Algorithm::Node*> nodes_in_order(const Recovered& r, Less less, Make make) {
    using Node = typename Algorithm::Node;
    const std::size_t threads = mem_.system().recovery_threads();
    const std::vector<typename Keys::Entry> entries =
        sorted_entries<Keys>(r.payloads, threads, less);
    std::vector<Node*> nodes(entries.size(), nullptr);  // nullptr: a duplicate
    in_parallel(threads, entries.size(), [&](std::size_t first, std::size_t last) {
      for (std::size_t i = first; i < last; ++i)
        if (i == 0 || !Keys::same_key(entries[i - 1], entries[i])) nodes[i] = make(entries[i]);
    });
    std::vector<Block*> duplicates;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i] == nullptr) duplicates.push_back(entries[i].payload);
    mem_.system().free_duplicates(duplicates, recovery_);
    std::erase(nodes, nullptr);
    return nodes;
  }

  RecoveryStats recovery_;
};

}  // namespace pmds::montage

// pmds::montage::Queue — the Michael–Scott queue on nbMontage (§5 of its paper): "queue/montage",
// buffered durable linearizability, with sync().
//
// The algorithm is algo/ms_queue.hpp's (Michael & Scott, PODC 1996; its header explains it and
// what it does for nbMontage) over MontagePolicy (montage/policy.hpp): the list of nodes, head
// and tail in DRAM, each enqueued value in a payload (a KeyValuePayload whose key is the value's
// serial number, §5: "the queue uses payloads to hold values and their order") that never
// changes once linked (§3.2). The two CASes at which an operation takes effect are lin_cas
// (epoch_system.hpp): an enqueue's link of its node after the last one, and a dequeue's swing of
// head to head's successor, whose payload (the value returned; the successor becomes the dummy)
// it detaches first. A dummy's payload is deleted when the dummy itself is retired.
//
// This file is what nbMontage adds around the algorithm: the pool's root and epoch system,
// recovery (the queue rebuilt from the surviving payloads sorted by serial number, §3.4), sync
// and the clean close.
//
// Pool layout: StructureRoot (epoch_system.hpp) with tag "QUEUMON2" and parameter 0. (Until
// 0.3.0 the tag was "QUEUMONT" and a payload held the value before the serial; a KeyValuePayload
// holds the serial first, so a pool of the old layout is refused, PoolError layout_mismatch,
// rather than misread.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pmds/algo/ms_queue.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/policy.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

template <FaultPolicy Faults = NoFaults>
class Queue : public algo::MichaelScottQueue<MontagePolicy<Faults>> {
  using Algorithm = algo::MichaelScottQueue<MontagePolicy<Faults>>;
  using Algorithm::mem_;

 public:
  static constexpr Criterion criterion = Criterion::buffered;
  static constexpr EpochBound epoch_bound = EpochBound::two_epochs;
  static constexpr std::uint64_t tag = 0x324e4f4d55455551;  // "QUEUMON2"
  static constexpr const char* name = "queue/montage";
  static constexpr std::uint64_t tag_before_0_3 = 0x544e4f4d55455551;  // "QUEUMONT"

  // A new, empty queue in `pool`, which must hold no structure.
  Queue(CreateTag, pm::Pool& pool, const Options& options = {}) {
    StructureRoot::check_unused(pool, name);
    auto& system = mem_.open_system(create_new, pool, options);
    StructureRoot::write(pool, tag, 0, system.area());
  }

  // Opens the queue a pool holds: the list is rebuilt from the payloads recovery keeps (§3.4).
  Queue(OpenTag, pm::Pool& pool, const Options& options = {}) {
    if (pool.root(StructureRoot::tag_root).load() == tag_before_0_3)
      throw PoolError(PoolErrc::layout_mismatch,
                      std::string("pmds: pool '") + pool.path() + "' holds a " + name +
                          " of the layout before pmds 0.3.0 (value-first payloads), which this "
                          "version does not read");
    const auto [parameter, area] = StructureRoot::read(pool, tag, name);
    (void)parameter;
    rebuild(mem_.open_system(open_existing, pool, area, options).recover([](const Block* b) {
      return b->kind_size.load() >> 8 < sizeof(KeyValuePayload)
                 ? "montage queue: a payload too small"
                 : nullptr;
    }));
  }

  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // A clean close: everything completed is made durable (sync); the algorithm's destructor then
  // frees the DRAM list (the payloads stay).
  ~Queue() { sync(); }

  // Everything completed before the call is durable when it returns (two epoch advances).
  void sync() { mem_.system().sync(); }
  // One epoch advance: what the background thread does every epoch (Options::epoch_length).
  void background_step() { mem_.system().background_step(); }
  std::uint64_t epoch() const { return mem_.system().epoch(); }
  // Quiescent: runs every pending reclamation of DRAM nodes now.
  void drain() { mem_.drain(); }
  const RecoveryStats& recovery_stats() const { return recovery_; }

 private:
  // The list from the surviving payloads, in serial-number order (sorted over
  // Options::recovery_threads threads); the next serial is the one after the last.
  void rebuild(typename EpochSystem<Faults>::Recovered r) {
    recovery_ = r.stats;
    const std::vector<KeyValueEntry> entries =
        sorted_entries(r.payloads, mem_.system().recovery_threads(), key_less);
    for (const KeyValueEntry& e : entries) this->adopt_back(e.value, e.payload);
    this->set_next_serial(entries.empty() ? 0 : entries.back().key + 1);
  }

  RecoveryStats recovery_;
};

}  // namespace pmds::montage

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
// This file is what nbMontage adds around the algorithm (the pool's root, the epoch system and
// sync are montage/structure.hpp's): recovery, the queue rebuilt from the surviving payloads
// sorted by serial number (§3.4), and the clean close.
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
#include "pmds/montage/structure.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

template <FaultPolicy Faults = NoFaults>
class Queue : public Structure<algo::MichaelScottQueue<MontagePolicy<Faults>>, Faults> {
  using Base = Structure<algo::MichaelScottQueue<MontagePolicy<Faults>>, Faults>;
  using Base::mem_;

 public:
  static constexpr std::uint64_t tag = 0x324e4f4d55455551;  // "QUEUMON2"
  static constexpr const char* name = "queue/montage";
  static constexpr std::uint64_t tag_before_0_3 = 0x544e4f4d55455551;  // "QUEUMONT"

  // A new, empty queue in `pool`, which must hold no structure.
  Queue(CreateTag, pm::Pool& pool, const Options& options = {}) {
    this->create(pool, options, tag, name);
  }

  // Opens the queue a pool holds: the list is rebuilt from the payloads recovery keeps (§3.4).
  Queue(OpenTag, pm::Pool& pool, const Options& options = {}) {
    if (pool.root(StructureRoot::tag_root).load() == tag_before_0_3)
      throw PoolError(PoolErrc::layout_mismatch,
                      std::string("pmds: pool '") + pool.path() + "' holds a " + name +
                          " of the layout before pmds 0.3.0 (value-first payloads), which this "
                          "version does not read");
    rebuild(this->recover(pool, options, tag, name, [](const Block* b) {
      return b->kind_size.load() >> 8 < sizeof(KeyValuePayload)
                 ? "montage queue: a payload too small"
                 : nullptr;
    }));
  }

  // A clean close (montage/structure.hpp): sync, then the algorithm frees the DRAM index.
  ~Queue() { this->sync(); }

 private:
  // The list from the surviving payloads, in serial-number order (sorted over
  // Options::recovery_threads threads); the next serial is the one after the last.
  void rebuild(const typename Base::Recovered& r) {
    const std::vector<KeyValueEntry> entries =
        sorted_entries(r.payloads, mem_.system().recovery_threads(), key_less);
    for (const KeyValueEntry& e : entries) this->adopt_back(e.value, e.payload);
    this->set_next_serial(entries.empty() ? 0 : entries.back().key + 1);
  }
};

}  // namespace pmds::montage

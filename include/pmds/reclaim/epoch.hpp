// pmds — safe memory reclamation for the lock-free structures: the epoch domain.
//
// One EpochDomain per structure instance:
//   auto guard = domain.pin();         // around one operation; nestable, cheap
//   domain.retire(node, [alloc](Node* n) { alloc->free(n); });
//                                      // runs once no thread pinned at retire time still is
//   domain.drain();                    // quiescent: run every pending deleter now
//   ~EpochDomain()                     // runs every pending deleter (structure quiescent)
// A freed persistent slot returns to its allocator only after its epoch is safe: that is what
// the deleter does. Thread ids come from pmds::thread_id() (at most pmds::max_threads).
//
// Two implementations with the same interface:
//   MinimalEpochDomain  (reclaim/minimal_epoch.hpp) — hand-written, per-domain EBR;
//   XeniumEpochDomain   (reclaim/xenium_epoch.hpp)  — an adapter over xenium's
//                                                     generic_epoch_based.
// The project rule: use xenium unless it measures more than 10% slower than a minimal epoch
// scheme on a list benchmark at 1 and 2 threads (bench/reclaim_bench.cpp).
//
// Measurement and decision: PENDING (the default below is provisional).
#pragma once

#include "pmds/reclaim/minimal_epoch.hpp"
#include "pmds/reclaim/retired.hpp"
#include "pmds/reclaim/xenium_epoch.hpp"

namespace pmds::reclaim {

using EpochDomain = XeniumEpochDomain;

}  // namespace pmds::reclaim

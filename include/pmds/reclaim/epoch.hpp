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
// Measured (build/reclaim/bench/reclaim_bench --duration-ms 300 --reps 21; AMD EPYC, 2 vCPUs
// under KVM, shared with other builds at the time: load average ~11, so the CPU-time column,
// ops per second of the workers' own CPU time, is the steadier one). Harris-Michael list,
// 1024 keys, half full; ratios are medians over 21 repetitions of xenium/minimal measured
// within one repetition (interleaved runs):
//
//   threads reads   minimal Mops/s (cpu)  xenium Mops/s (cpu)  xenium/minimal wall   cpu
//   1       50%     2.131                 2.077                0.937                0.974
//   1       90%     2.346                 2.050                0.946                0.910
//   2       50%     3.501                 3.112                0.900                0.856
//   2       90%     3.849                 3.579                1.009                0.949
//
// Primitives, one thread: pin+unpin 12.6 ns (minimal) vs 37.0 ns (xenium: its guard_ptr entry
// into the critical region costs ~33 ns even without the adapter); retire 19.8 vs 95.6 ns.
// Earlier runs (7-15 repetitions, same load) gave xenium/minimal 0.82-0.88 (cpu) and
// 0.79-0.86 (wall) at 2 threads / 50% reads; a first 3-repetition run gave 0.98.
//
// Decision: xenium is more than 10% slower at 2 threads / 50% reads, so the default
// EpochDomain is the hand-written MinimalEpochDomain. It has further merits for this project:
// per-domain epochs (a thread pinned in one structure does not hold back reclamation in
// another; xenium's reclaimer is global), drain() without a side list, no per-retire DRAM
// record, and nothing written into retired nodes. XeniumEpochDomain stays available with the
// same interface (and the same tests, test/reclaim/epoch_hw_test.cpp).
//
// Usage rules common to both: a Guard is released by the thread that pinned; deleters must not
// throw, pin, or retire into their own domain; drain() and the destructor need the structure
// quiescent (drain() throws pmds::Error if a thread is pinned).
#pragma once

#include "pmds/reclaim/minimal_epoch.hpp"
#include "pmds/reclaim/retired.hpp"
#include "pmds/reclaim/xenium_epoch.hpp"

namespace pmds::reclaim {

using EpochDomain = MinimalEpochDomain;

}  // namespace pmds::reclaim

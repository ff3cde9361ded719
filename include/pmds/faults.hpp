// pmds — the fault seam: how the crash lab plants a bug in a structure (docs/ARCHITECTURE.md §4).
//
// A structure the crash lab tests with planted bugs takes a `Faults` type parameter, NoFaults by
// default, and asks `Faults::planted == Fault::x` in an `if constexpr` where bug x would be.
// With NoFaults every such branch compiles away: a shipped type carries no bug and names none.
// Only the lab's fixtures (crashlab/fixtures.hpp) and a few tests instantiate Planted<Fault::x>,
// and the lab must report each of them. The pool layer's bugs are a run-time switch instead,
// read only by the simulated backend (pm/planted_bugs.hpp): Pool is not a template.
#pragma once

#include <concepts>
#include <cstdint>

namespace pmds {

enum class Fault : std::uint8_t {
  none,

  // Izraelevitz's construction (algo/policy.hpp) and the algorithms over it (algo/).
  // Where each is a real bug: (a), (c), (d) in every structure; (b) only where the linking CAS
  // is the last locked instruction of the operation (on x86 a locked RMW orders earlier flushes
  // as a fence does) — list, hash, BST insert, stack push, skip-list inserts of height 1. The
  // queue's enqueue swings the tail with a CAS after the link, which makes (b) harmless there.
  link_not_flushed,      // (a) the linking CAS is neither flushed nor fenced
  link_not_fenced,       // (b) the link is flushed, but no fence (and no later locked
                         //     instruction of the operation) before the operation returns
  contents_not_flushed,  // (c) a node is linked without its contents ever being flushed
  recovery_drops_node,   // (d) recovery unlinks one valid node

  // Link-free sets (Zuriel et al. §3; linkfree_soft/).
  valid_before_link,   // makes a new node valid before linking it (the two-inserts scenario of
                       // §3.3: a losing insert's node can survive a crash next to the winner's)
  trim_without_flush,  // unlinks a marked node without flushing the mark first (§3.1 trim)
  recover_deleted,     // recovery keeps valid but marked (deleted) nodes

  // SOFT sets (Zuriel et al. §4; linkfree_soft/).
  create_without_flush,    // PNode::create stores but never flushes (it still fences)
  recovery_keeps_deleted,  // recovery links every valid PNode back, deleted ones too
  alloc_by_valid_start,    // the paper's literal pValidity = !validStart (Listing 7's alloc):
                           // loses a completed insert into a slot a crash left half-created

  // Mirror (mirror/).
  volatile_first,       // a CAS writes the volatile replica before the persistent one
  no_flush_after_cas,   // no flush (nor fence) after the persistent DWCAS (Fig. 4 l. 41-42)
  helper_skips_flush,   // a helper copies persistent -> volatile without flushing (l. 20-21)
  recovery_skips_node,  // recovery leaves one node's volatile replica unbuilt

  // Persistent software combining (combining/). "The switch" is PBcomb's MIndex write and
  // PWFcomb's SC on S.
  no_fence_before_switch,      // no pfence between the record's pwbs and the switch (§3, §4;
                               // in PWFcomb not a bug on x86: see pwfcomb.hpp)
  no_psync_before_release,     // no psync after the switch's pwb: PBcomb releases the lock (and
                               // served threads return), PWFcomb's combiner returns, with the
                               // switch left to a later fence
  dequeue_past_old_tail,       // PBqueue: the dequeue combiner ignores oldTail (Appendix A);
                               // PWFqueue: dequeuers follow the enqueuers' unwritten link before
                               // the enqueuers' S is durable
  recovery_reports_not_taken,  // recover_pending says "not taken" for a request that took effect
  served_returns_unpersisted,  // PWFcomb: a thread served by another's round returns without
                               // making S durable (Algorithm 4, lines 33-38, left out)
  paper_flush_rule,            // PWFcomb: the paper's Flush/CombRound rule decides who persists
                               // S (Algorithm 4), instead of pmds' durable sequence number

  // InCLL Masstree (incll/).
  log_entry_not_fenced,
  boundary_flush_skips_node,
  creation_epoch_not_ended,
  node_epoch_before_permutation_log,  // InCLL mode only
  value_tag_before_saved_value,       // InCLL mode only
  lazy_recovery_skips_node,           // InCLL mode only
  bytes_freed_in_their_epoch,         // byte-string form only
  sweep_skips_lower_layers,           // byte-string form only (durable_masstree.hpp)

  // nbMontage (montage/). Buffered durable linearizability.
  payload_tagged_after_lin_cas,  // payloads are tagged only after their lin_cas succeeded
  descriptor_not_written_back,   // advance() does not write back lagging threads' descriptors
  recovery_ignores_anti_nodes,   // recovery keeps every in-use payload, canceled or not
  sync_advances_once,            // sync() returns after one epoch advance
  close_without_sync,            // the hash table's clean close does not sync (hash_map.hpp)
  clock_not_persisted,           // advance() moves the clock without persisting it (sync() does)
  payload_not_detached,          // MontagePolicy's detach_payload does nothing: the structures
                                 // over algo/ take a payload out (a remove, a put's replaced
                                 // payload, a dequeue) with no pdetach (montage/policy.hpp)

  // InCLL and nbMontage: recovery falls back one epoch further than the paper's bound (InCLL:
  // it finds the epoch before the failed one failed too, §3; nbMontage: it keeps epochs <= e-3,
  // a consistent prefix one epoch short of Theorem 2).
  recovery_drops_last_epoch,
};

// A structure's faults: NoFaults (what every shipped type uses) or Planted<x>.
template <class F>
concept FaultPolicy = requires {
  { F::planted } -> std::convertible_to<Fault>;
};

struct NoFaults {
  static constexpr Fault planted = Fault::none;
};

// The crash lab's fixtures only.
template <Fault F>
struct Planted {
  static constexpr Fault planted = F;
};

}  // namespace pmds

// pmds crash lab — planted-bug fixtures: structures that are wrong on purpose, registered for the
// lab only (not in `pmds list`), so that every run can show the lab is able to fail
// (docs/ARCHITECTURE.md §4: "a checker that accepts everything proves nothing").
//
// Every bug is planted through the fault seam (faults.hpp: Planted<Fault::x>).
//
// The Izraelevitz list with each planted bug of algo/policy.hpp:
//   (a) link_not_flushed      the linking CAS is neither flushed nor fenced
//   (b) link_not_fenced       the link is flushed, but no fence before the operation returns
//   (c) contents_not_flushed  a node is linked without its contents ever being flushed
//   (d) recovery_drops_node   recovery unlinks one valid node
//   (leak) recovery_keeps_every_slot  after the list's recovery, every slot of every used chunk
//                             is declared live (as a recovery that never rebuilds the free
//                             lists, or that marks garbage live, would): the leak check's fixture
// and controls: the same list without a bug, under a fixture name, and with background work. Every
// bug must be reported as a violation within the default budget, the control never. (A missing
// fence right before a linking CAS is not a bug on x86 — the locked CAS orders earlier flushes —
// and is not planted.)
//
// Zuriel et al.'s sets with their planted bugs (linkfree_soft/); their
// controls are the registered list/linkfree and list/soft themselves:
//   link-free  valid_before_link      a new node made valid before it is linked (§3.3)
//              trim_without_flush     a marked node unlinked before its mark is flushed (§3.1)
//              recover_deleted        recovery keeps valid but deleted nodes
//   SOFT       create_without_flush   a PNode's contents stored but never flushed
//              recovery_keeps_deleted recovery links deleted PNodes back
//              alloc_by_valid_start   the paper's literal pValidity = !validStart (Listing 7's
//                                     alloc): a completed insert into a slot a crash left
//                                     half-created reads as deleted. Only the operations after
//                                     recovery show it (crashlab/verdict.hpp), and only because
//                                     the allocator hands out recycled slots first.
//
// Mirror with each planted bug of mirror/patomic.hpp and mirror/policy.hpp, on the Harris-Michael
// list; its control is the registered list/mirror:
//   volatile_first        a CAS writes the volatile replica before the persistent one
//   no_flush_after_cas    the persistent DWCAS is neither flushed nor fenced
//   helper_skips_flush    a helper copies persistent -> volatile without flushing first
//   recovery_skips_node   recovery leaves one node's volatile replica unbuilt
//
// PBcomb and PWFcomb (Fatourou et al., combining/) with their planted bugs;
// their controls are the registered register/pbcomb, register/pwfcomb, queue/pbcomb and
// queue/pwfcomb:
//   no_fence_before_switch     PBcomb: no pfence between the record's pwbs and the MIndex
//                              switch (§3). Not planted in PWFcomb: its switch is a CAS, which
//                              orders earlier flushes as a fence does on x86 (pwfcomb.hpp)
//   no_psync_before_release    PBcomb releases the lock, PWFcomb's combiner returns, before the
//                              switch's pwb completes
//   served_returns_unpersisted PWFcomb: a thread served by another's round returns without
//                              making S durable
//   paper_flush_rule           PWFcomb deciding who persists S by the paper's Flush/CombRound
//                              arrays, which leave a window (combining/pwfcomb.hpp). It needs
//                              two stalled combiners at once: the lab finds it in hundreds of
//                              crashes with --threads 4 --switch-persist 0.5, in thousands at
//                              the defaults (its test, crashlab_sim_test.cpp, uses the former)
//   dequeue_past_old_tail      PBqueue's dequeue combiner ignores oldTail (Appendix A);
//                              PWFqueue's dequeuers connect the enqueuers' last link, and
//                              dequeue past it, without making the enqueuers' S durable first
//                              (combining/wait_free_queue.hpp)
//   recovery_reports_not_taken recovery says a request that took effect did not
// and, on the register's adapter (not in the protocol: ReinvokedTwiceRegister below),
//   reinvoked-ticket-applied-again  an operation invoked again with its ticket takes the next
//                              one, so one that took effect is applied again
//
// nbMontage (montage/) with each of its planted bugs, on its hash table;
// the control is the registered hash/montage:
//   payload_tagged_after_lin_cas  payloads get their epoch tag only after the lin_cas succeeded
//   descriptor_not_written_back   an epoch advance does not write back lagging descriptors
//   recovery_ignores_anti_nodes   recovery keeps every in-use payload, canceled or not
//   sync_advances_once            sync() returns after one epoch advance instead of two
//   close_without_sync            a clean close does not sync: the operations of the last
//                                 epochs are lost although the pool says it closed cleanly
//                                 (only the check after recovery sees it: crashlab/verdict.hpp)
//   recovery_drops_last_epoch     recovery keeps the epochs up to e-3: a prefix (the buffered
//                                 criterion accepts it), not Theorem 2's e-2 (the epoch bound
//                                 does not)
//   clock_not_persisted           an epoch advance moves the clock without persisting it, so a
//                                 crash finds an older epoch than the operations saw and the
//                                 bound is measured from it (the check of the clock sees it:
//                                 crashlab/verdict.hpp, clock_behind)
// and, on each structure over algo/ (montage/policy.hpp; controls: the registered hash/,
// hash-bytes/, skiplist/, skiplist-bytes/, bst/ and queue/montage):
//   payload_not_detached          the policy's detach_payload does nothing: a remove, a put's
//                                 replacement or a dequeue takes effect in the DRAM index, and
//                                 its payload survives a crash (a wiring of the payload hooks
//                                 that misses one: algo/policy.hpp, "Payloads")
//
// InCLL (incll/) with each of its planted bugs, on masstree/logging or
// masstree/incll (the controls):
//   log_entry_not_fenced       an external log entry is flushed but not fenced before the node
//                              it saves is written (InCLL §3: log, sfence, then write)
//   boundary_flush_skips_node  each epoch boundary leaves one modified node unflushed
//   creation_epoch_not_ended   the first operations run in the epoch of the tree's creation,
//                              so they change the nodes made at creation unlogged (found by
//                              the runs on a structure as created: sim_lab.hpp)
//   node_epoch_before_permutation_log  (masstree/incll) InCLL_p's epoch is stored before the
//                              permutation it logs (InCLL §4.1.2's persistence ordering)
//   value_tag_before_saved_value  (masstree/incll) a value InCLL's epoch and index are stored
//                              before the value it saves (the same ordering, §4.1.3)
//   lazy_recovery_skips_node   (masstree/incll) lazy recovery marks the first border it should
//                              roll back as recovered without putting its permutation back
//                              (InCLL §4.3, Listing 4)
//   bytes_freed_in_their_epoch (masstree-bytes/incll) a freed byte string's block goes on its
//                              free list in the epoch that freed it, so it can be reused and
//                              overwritten while a crash would still roll the tree back to
//                              naming it (InCLL §5)
//   sweep_skips_lower_layers   (masstree-bytes/incll, lazy open) the sweep that finds the free
//                              blocks visits the top layer's borders only, so it gives back
//                              blocks that only lower layers name, and they are overwritten
//   recovery_drops_last_epoch  (masstree/incll) recovery finds the epoch before the failed
//                              one failed too and rolls back what it changed in the nodes'
//                              InCLLs: the operations completed in it are lost (InCLL §3
//                              promises the state at the start of the failed epoch; the epoch
//                              bound checks it, crashlab/verdict.hpp)
//
// The allocator (pm/allocator.hpp), through AllocatorProbe (crashlab/allocator_probe.hpp), a set
// of one slot per element, and its planted bug:
//   alloc/probe-control                      must pass
//   alloc/probe-bug-directory-not-persisted  a claimed chunk's directory word never persisted
// and the pool's growth (pm/pool.hpp, Pool::grow; the lab's growing runs):
//   alloc/probe-bug-growth-size-before-extension  the header's new size persisted before the
//                                                 file is extended
//   alloc/probe-bug-growth-chunks-before-header   new chunks handed out before the header's
//                                                 write-back
//   alloc/probe-bug-growth-maps-elsewhere         the extension mapped away from the pool's
//                                                 base (the workload dies at its first node
//                                                 there: an error the lab reports, not a verdict)
//
// A later technique adds its own planted bugs by appending Describe lines to Fixtures.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/combining/atomic_float.hpp"
#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/pwfcomb.hpp"
#include "pmds/combining/queue.hpp"
#include "pmds/combining/wait_free_queue.hpp"
#include "pmds/crashlab/allocator_probe.hpp"
#include "pmds/faults.hpp"
#include "pmds/linkfree_soft/linkfree_list.hpp"
#include "pmds/linkfree_soft/soft_list.hpp"
#include "pmds/mirror/policy.hpp"
#include "pmds/registry.hpp"

namespace pmds::crashlab {

// The fixtures are built like the registered structures (one constructor convention).
template <class T>
using FixtureFactory = registry::factories::Plain<T>;

template <FaultPolicy Faults>
using IzraelevitzList = algo::HarrisMichaelList<algo::IzraelevitzPolicy<Faults>>;

template <FaultPolicy Faults>
using MirrorList = algo::HarrisMichaelList<mirror::MirrorPolicy<Faults>>;

// (One alias per protocol: GCC 12 refuses to pass a template template parameter whose own
// parameter is constrained on to another.)
template <FaultPolicy Faults>
using PBCombRegister =
    combining::CombiningAtomicFloat<combining::PBComb, combining::Persistence::detectable, Faults>;
template <FaultPolicy Faults>
using PWFCombRegister =
    combining::CombiningAtomicFloat<combining::PWFComb, combining::Persistence::detectable, Faults>;

// A detectable register whose ticketed operations run under the slot's next ticket instead of
// the one they are given: an operation invoked again after it took effect is applied again.
// (Not a bug PBcomb itself can carry: a request invoked again with a served ticket's parity is
// inactive by construction, so the protocol serves it at most once.) The lab's recovery
// re-invokes each thread's last operation with its ticket (crashlab/child.hpp, "reexecute").
class ReinvokedTwiceRegister
    : public combining::CombiningAtomicFloat<combining::PBComb,
                                             combining::Persistence::detectable> {
  using Base =
      combining::CombiningAtomicFloat<combining::PBComb, combining::Persistence::detectable>;

 public:
  using Base::Base;
  using Base::fetch_multiply;
  using Base::read;
  double read(Ticket t) { return Base::read(next_ticket(t.slot)); }
  double fetch_multiply(double factor, Ticket t) {
    return Base::fetch_multiply(factor, next_ticket(t.slot));
  }
};

// The leak fixture: the correct list, then every slot declared live again after its recovery.
struct LeakyRecoveryFactory {
  using type = IzraelevitzList<NoFaults>;
  static std::unique_ptr<type> create(pm::Pool* pool, const registry::CreateOptions& o) {
    return FixtureFactory<type>::create(pool, o);
  }
  static std::unique_ptr<type> open(pm::Pool& pool, const registry::CreateOptions& o) {
    auto list = FixtureFactory<type>::open(pool, o);
    pool.allocator().recover([](void*, std::size_t) { return true; });  // planted leak
    return list;
  }
};

// A control with background work (HasBackgroundWork): the bug-free list whose
// background_step() looks up the next key, so the lab's scheduled background thread
// (crashlab/scheduler.hpp) is exercised before the techniques that need one arrive
// (nbMontage's and InCLL's epoch advancers).
class ListWithBackgroundReader : public IzraelevitzList<NoFaults> {
 public:
  using IzraelevitzList<NoFaults>::IzraelevitzList;
  void background_step() { contains(1 + next_key_++ % 16); }

 private:
  Key next_key_ = 0;
};

using Fixtures = registry::TypeList<
    registry::Describe<"list/izraelevitz-control", registry::Kind::map,
                       FixtureFactory<IzraelevitzList<NoFaults>>,
                       "fixture: the Izraelevitz list with no planted bug (must pass)">,
    registry::Describe<"alloc/probe-control", registry::Kind::set, FixtureFactory<AllocatorProbe<>>,
                       "fixture: the allocator under the lab, through a set of one slot per "
                       "element (must pass)">,
    registry::Describe<"alloc/probe-bug-directory-not-persisted", registry::Kind::set,
                       FixtureFactory<AllocatorProbe<pm::PlantedPoolBug::directory_not_persisted>>,
                       "fixture: the allocator never persists a claimed chunk's directory word">,
    registry::Describe<
        "alloc/probe-bug-growth-size-before-extension", registry::Kind::set,
        FixtureFactory<AllocatorProbe<pm::PlantedPoolBug::growth_size_before_extension>>,
        "fixture: a growth persists the header's new size before the file is extended">,
    registry::Describe<
        "alloc/probe-bug-growth-chunks-before-header", registry::Kind::set,
        FixtureFactory<AllocatorProbe<pm::PlantedPoolBug::growth_chunks_before_header>>,
        "fixture: a growth hands out the new chunks before the header's write-back">,
    registry::Describe<"alloc/probe-bug-growth-maps-elsewhere", registry::Kind::set,
                       FixtureFactory<AllocatorProbe<pm::PlantedPoolBug::growth_maps_elsewhere>>,
                       "fixture: a growth maps the extension away from the pool's base">,
    registry::Describe<"list/izraelevitz-background-control", registry::Kind::map,
                       FixtureFactory<ListWithBackgroundReader>,
                       "fixture: the same list with a background reader the scheduler runs "
                       "(must pass)">,
    registry::Describe<"list/izraelevitz-bug-a-link-not-flushed", registry::Kind::map,
                       FixtureFactory<IzraelevitzList<Planted<Fault::link_not_flushed>>>,
                       "fixture (a): the linking CAS is neither flushed nor fenced">,
    registry::Describe<"list/izraelevitz-bug-b-link-not-fenced", registry::Kind::map,
                       FixtureFactory<IzraelevitzList<Planted<Fault::link_not_fenced>>>,
                       "fixture (b): the link is flushed but not fenced before returning">,
    registry::Describe<"list/izraelevitz-bug-c-contents-not-flushed", registry::Kind::map,
                       FixtureFactory<IzraelevitzList<Planted<Fault::contents_not_flushed>>>,
                       "fixture (c): a node is linked without its contents being flushed">,
    registry::Describe<"list/izraelevitz-bug-d-recovery-drops-node", registry::Kind::map,
                       FixtureFactory<IzraelevitzList<Planted<Fault::recovery_drops_node>>>,
                       "fixture (d): recovery unlinks one valid node">,
    registry::Describe<"list/izraelevitz-bug-leak-recovery-keeps-every-slot", registry::Kind::map,
                       LeakyRecoveryFactory,
                       "fixture (leak): every slot stays allocated after recovery">,
    registry::Describe<
        "list/linkfree-bug-valid-before-link", registry::Kind::map,
        FixtureFactory<linkfree_soft::LinkFreeList<Planted<Fault::valid_before_link>>>,
        "fixture: a link-free node is made valid before it is linked">,
    registry::Describe<
        "list/linkfree-bug-trim-without-flush", registry::Kind::map,
        FixtureFactory<linkfree_soft::LinkFreeList<Planted<Fault::trim_without_flush>>>,
        "fixture: a marked link-free node is unlinked before its mark is flushed">,
    registry::Describe<"list/linkfree-bug-recover-deleted", registry::Kind::map,
                       FixtureFactory<linkfree_soft::LinkFreeList<Planted<Fault::recover_deleted>>>,
                       "fixture: link-free recovery keeps valid but deleted nodes">,
    registry::Describe<
        "list/soft-bug-create-without-flush", registry::Kind::map,
        FixtureFactory<linkfree_soft::SoftList<Planted<Fault::create_without_flush>>>,
        "fixture: a SOFT PNode's contents are never flushed">,
    registry::Describe<
        "list/soft-bug-recovery-keeps-deleted", registry::Kind::map,
        FixtureFactory<linkfree_soft::SoftList<Planted<Fault::recovery_keeps_deleted>>>,
        "fixture: SOFT recovery links deleted PNodes back">,
    registry::Describe<
        "list/soft-bug-alloc-by-valid-start", registry::Kind::map,
        FixtureFactory<linkfree_soft::SoftList<Planted<Fault::alloc_by_valid_start>>>,
        "fixture: a SOFT PNode's validity taken as !validStart (Listing 7's alloc)">,
    registry::Describe<"list/mirror-bug-volatile-first", registry::Kind::map,
                       FixtureFactory<MirrorList<Planted<Fault::volatile_first>>>,
                       "fixture: Mirror writes the volatile replica before the persistent one">,
    registry::Describe<"list/mirror-bug-no-flush-after-cas", registry::Kind::map,
                       FixtureFactory<MirrorList<Planted<Fault::no_flush_after_cas>>>,
                       "fixture: Mirror's persistent DWCAS is neither flushed nor fenced">,
    registry::Describe<"list/mirror-bug-helper-skips-flush", registry::Kind::map,
                       FixtureFactory<MirrorList<Planted<Fault::helper_skips_flush>>>,
                       "fixture: a Mirror helper copies the persistent replica unflushed">,
    registry::Describe<"list/mirror-bug-recovery-skips-node", registry::Kind::map,
                       FixtureFactory<MirrorList<Planted<Fault::recovery_skips_node>>>,
                       "fixture: Mirror recovery leaves one node's volatile replica unbuilt">,
    registry::Describe<"register/pbcomb-bug-no-fence-before-switch",
                       registry::Kind::register_object,
                       FixtureFactory<PBCombRegister<Planted<Fault::no_fence_before_switch>>>,
                       "fixture: PBcomb switches MIndex with no pfence after the record's pwbs">,
    registry::Describe<"register/pbcomb-bug-no-psync-before-release",
                       registry::Kind::register_object,
                       FixtureFactory<PBCombRegister<Planted<Fault::no_psync_before_release>>>,
                       "fixture: PBcomb releases the lock before the MIndex pwb completes">,
    registry::Describe<"register/pbcomb-bug-recovery-reports-not-taken",
                       registry::Kind::register_object,
                       FixtureFactory<PBCombRegister<Planted<Fault::recovery_reports_not_taken>>>,
                       "fixture: PBcomb recovery reports every pending request as not taken">,
    registry::Describe<"register/pbcomb-bug-reinvoked-ticket-applied-again",
                       registry::Kind::register_object, FixtureFactory<ReinvokedTwiceRegister>,
                       "fixture: an operation invoked again with its ticket is applied again">,
    registry::Describe<"register/pwfcomb-bug-no-psync-before-release",
                       registry::Kind::register_object,
                       FixtureFactory<PWFCombRegister<Planted<Fault::no_psync_before_release>>>,
                       "fixture: PWFcomb's combiner returns before the pwb of S completes">,
    registry::Describe<
        "register/pwfcomb-bug-served-returns-unpersisted", registry::Kind::register_object,
        FixtureFactory<PWFCombRegister<Planted<Fault::served_returns_unpersisted>>>,
        "fixture: a PWFcomb thread served by another's round returns with S not durable">,
    registry::Describe<"register/pwfcomb-bug-paper-flush-rule", registry::Kind::register_object,
                       FixtureFactory<PWFCombRegister<Planted<Fault::paper_flush_rule>>>,
                       "fixture: PWFcomb decides who persists S by the paper's Flush and "
                       "CombRound arrays">,
    registry::Describe<
        "queue/pbcomb-bug-dequeue-past-old-tail", registry::Kind::queue,
        FixtureFactory<combining::CombiningQueue<combining::Persistence::detectable,
                                                 Planted<Fault::dequeue_past_old_tail>>>,
        "fixture: PBqueue's dequeuers take nodes the enqueuers have not persisted">,
    registry::Describe<
        "queue/pwfcomb-bug-dequeue-past-old-tail", registry::Kind::queue,
        FixtureFactory<combining::WaitFreeCombiningQueue<combining::Persistence::detectable,
                                                         Planted<Fault::dequeue_past_old_tail>>>,
        "fixture: PWFqueue's dequeuers follow a link the enqueuers' S named "
        "before S is durable">,
    registry::Describe<"hash/montage-bug-payload-tagged-after-lin-cas", registry::Kind::map,
                       registry::factories::Montage<
                           montage::HashMap<Planted<Fault::payload_tagged_after_lin_cas>>>,
                       "fixture: nbMontage tags a payload with its epoch only after its lin_cas">,
    registry::Describe<
        "hash/montage-bug-descriptor-not-written-back", registry::Kind::map,
        registry::factories::Montage<montage::HashMap<Planted<Fault::descriptor_not_written_back>>>,
        "fixture: nbMontage's epoch advance skips the lagging threads' descriptors">,
    registry::Describe<
        "hash/montage-bug-recovery-ignores-anti-nodes", registry::Kind::map,
        registry::factories::Montage<montage::HashMap<Planted<Fault::recovery_ignores_anti_nodes>>>,
        "fixture: nbMontage recovery keeps payloads their anti-nodes cancel">,
    registry::Describe<
        "hash/montage-bug-sync-advances-once", registry::Kind::map,
        registry::factories::Montage<montage::HashMap<Planted<Fault::sync_advances_once>>>,
        "fixture: nbMontage's sync() returns after one epoch advance">,
    registry::Describe<
        "hash/montage-bug-close-without-sync", registry::Kind::map,
        registry::factories::Montage<montage::HashMap<Planted<Fault::close_without_sync>>>,
        "fixture: nbMontage's hash table closes cleanly without a sync">,
    registry::Describe<
        "hash/montage-bug-recovery-drops-last-epoch", registry::Kind::map,
        registry::factories::Montage<montage::HashMap<Planted<Fault::recovery_drops_last_epoch>>>,
        "fixture: nbMontage's recovery keeps epochs <= e-3 only">,
    registry::Describe<
        "hash/montage-bug-clock-not-persisted", registry::Kind::map,
        registry::factories::Montage<montage::HashMap<Planted<Fault::clock_not_persisted>>>,
        "fixture: nbMontage's epoch advance does not persist the clock">,
    registry::Describe<
        "skiplist/montage-bug-payload-not-detached", registry::Kind::map,
        registry::factories::Montage<montage::SkipList<Planted<Fault::payload_not_detached>>>,
        "fixture: the nbMontage skip list removes and replaces without pdetach">,
    registry::Describe<"skiplist-bytes/montage-bug-payload-not-detached", registry::Kind::map,
                       registry::factories::FixedSizeStringsOf<registry::factories::Montage<
                           montage::ByteStringSkipList<Planted<Fault::payload_not_detached>>>>,
                       "fixture: the byte-string nbMontage skip list removes and replaces "
                       "without pdetach">,
    registry::Describe<
        "hash/montage-bug-payload-not-detached", registry::Kind::map,
        registry::factories::Montage<montage::HashMap<Planted<Fault::payload_not_detached>>>,
        "fixture: the nbMontage hash table removes and replaces without pdetach">,
    registry::Describe<"hash-bytes/montage-bug-payload-not-detached", registry::Kind::map,
                       registry::factories::FixedSizeStringsOf<registry::factories::Montage<
                           montage::ByteStringHashMap<Planted<Fault::payload_not_detached>>>>,
                       "fixture: the byte-string nbMontage hash table removes and replaces "
                       "without pdetach">,
    registry::Describe<"bst/montage-bug-payload-not-detached", registry::Kind::map,
                       registry::factories::Montage<
                           montage::NatarajanMittalTree<Planted<Fault::payload_not_detached>>>,
                       "fixture: the nbMontage BST removes and replaces without pdetach">,
    registry::Describe<
        "queue/montage-bug-payload-not-detached", registry::Kind::queue,
        registry::factories::Montage<montage::Queue<Planted<Fault::payload_not_detached>>>,
        "fixture: the nbMontage queue dequeues without pdetach">,
    registry::Describe<
        "masstree/logging-bug-log-entry-not-fenced", registry::Kind::map,
        registry::factories::Incll<incll::LoggingMasstree<Planted<Fault::log_entry_not_fenced>>>,
        "fixture: InCLL's external log entry is not fenced before the node is written">,
    registry::Describe<"masstree/logging-bug-boundary-flush-skips-node", registry::Kind::map,
                       registry::factories::Incll<
                           incll::LoggingMasstree<Planted<Fault::boundary_flush_skips_node>>>,
                       "fixture: InCLL's epoch boundary leaves one modified node unflushed">,
    registry::Describe<"masstree/logging-bug-creation-epoch-not-ended", registry::Kind::map,
                       registry::factories::Incll<
                           incll::LoggingMasstree<Planted<Fault::creation_epoch_not_ended>>>,
                       "fixture: the first operations run in the epoch of the tree's creation">,
    registry::Describe<"masstree/incll-bug-node-epoch-before-permutation-log", registry::Kind::map,
                       registry::factories::Incll<
                           incll::InCLLMasstree<Planted<Fault::node_epoch_before_permutation_log>>>,
                       "fixture: InCLL_p's nodeEpoch is stored before permutationInCLL">,
    registry::Describe<"masstree/incll-bug-value-tag-before-saved-value", registry::Kind::map,
                       registry::factories::Incll<
                           incll::InCLLMasstree<Planted<Fault::value_tag_before_saved_value>>>,
                       "fixture: a value InCLL's tag is stored before the value it saves">,
    registry::Describe<
        "masstree/incll-bug-lazy-recovery-skips-node", registry::Kind::map,
        registry::factories::Incll<incll::InCLLMasstree<Planted<Fault::lazy_recovery_skips_node>>>,
        "fixture: lazy recovery leaves one border of the failed epoch undone">,
    registry::Describe<
        "masstree/incll-bug-recovery-drops-last-epoch", registry::Kind::map,
        registry::factories::Incll<incll::InCLLMasstree<Planted<Fault::recovery_drops_last_epoch>>>,
        "fixture: recovery rolls back the epoch before the failed one too">,
    registry::Describe<"masstree-bytes/incll-bug-bytes-freed-in-their-epoch", registry::Kind::map,
                       registry::factories::FixedSizeStringsOf<
                           registry::factories::Incll<incll::InCLLStringMasstree<
                               Planted<Fault::bytes_freed_in_their_epoch>>>,
                           true>,
                       "fixture: a freed byte string's block is reused in the epoch that freed it">,
    registry::Describe<"masstree-bytes/incll-bug-sweep-skips-lower-layers", registry::Kind::map,
                       registry::factories::FixedSizeStringsOf<
                           registry::factories::Incll<incll::InCLLStringMasstree<
                               Planted<Fault::sweep_skips_lower_layers>>>,
                           true>,
                       "fixture: the lazy open's sweep frees blocks only lower layers name">>;

// Compiling the fixtures' table compiles every fixture; as with the registry's table
// (registry/entries.hpp, PMDS_REGISTRY_TABLE_IN_ONE_FILE), a program may compile it in one source
// file: define PMDS_FIXTURE_TABLE_IN_ONE_FILE for all of its files (crashlab/entries.hpp then
// declares fixture_entries() without defining it) and write PMDS_FIXTURE_TABLE_HERE() at
// namespace scope in one (tools/registry_table does).
#if !defined(PMDS_FIXTURE_TABLE_IN_ONE_FILE)
// The fixtures as registry entries (their own table: registry::entries() does not list them).
inline std::span<const registry::Entry> fixture_entries() {
  return registry::table_of<Fixtures>();
}
#endif

}  // namespace pmds::crashlab

#define PMDS_FIXTURE_TABLE_HERE()                                            \
  std::span<const pmds::registry::Entry> pmds::crashlab::fixture_entries() { \
    return pmds::registry::table_of<pmds::crashlab::Fixtures>();             \
  }                                                                          \
  static_assert(true, "a semicolon follows PMDS_FIXTURE_TABLE_HERE()")

// The look-ups over the fixtures and the registry (find_entry, planted_bugs, ...).
#include "pmds/crashlab/entries.hpp"

// pmds — THE list of registered structures × techniques (the look-ups over it are
// registry/entries.hpp, which a file that only looks structures up by name includes alone).
//
// `pmds list`, `pmds bench`, `pmds crashtest`, the default suite and the tests all read it. To
// register a new structure or technique: include its header in registry/factories.hpp (or write
// a factory there for a new shape of constructor) and add ONE line to Registered below, a
// Describe<name, kind, factory, description>. The criterion is not restated: it is the type's
// own (registry::criterion_of). The mechanism is registry/descriptor.hpp.
//
// Names are "structure/technique". Kinds: a structure with get is a map (the harness reads with
// get), without get a set. Every durable entry keeps its structure alone in its pool.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pmds/pmds.hpp"
#include "pmds/registry/descriptor.hpp"
#include "pmds/registry/factories.hpp"

namespace pmds::registry {

using Registered = TypeList<
    // Harris-Michael linked list (algo/harris_michael_list.hpp)
    Describe<"list/transient", Kind::map,
             factories::Plain<algo::HarrisMichaelList<algo::transient>>,
             "Harris-Michael lock-free list in DRAM (the transient baseline)">,
    Describe<"list/xenium", Kind::map, factories::Plain<comparators::XeniumList>,
             "comparator, not pmds's code: xenium's harris_michael_list_based_set in DRAM, the "
             "independent check of list/transient">,
    Describe<"list/izraelevitz", Kind::map,
             factories::Plain<algo::HarrisMichaelList<algo::izraelevitz>>,
             "Harris-Michael list, Izraelevitz transform: flush+fence after every shared access">,
    Describe<"list/flit", Kind::map, factories::Plain<algo::HarrisMichaelList<algo::flit>>,
             "Harris-Michael list, FliT transform: loads persist only while a store is in flight">,
    Describe<"list/mirror", Kind::map,
             factories::Plain<algo::HarrisMichaelList<mirror::MirrorPolicy<>>>,
             "Harris-Michael list, Mirror: patomic words, reads from a DRAM replica">,
    Describe<"list/mirror-pm", Kind::map,
             factories::Plain<algo::HarrisMichaelList<mirror::MirrorBothInPoolPolicy>>,
             "Harris-Michael list, Mirror with both replicas on the pool's medium (§6.3)">,
    Describe<"list/linkfree", Kind::map, factories::Plain<linkfree_soft::LinkFreeList<>>,
             "link-free durable list (Zuriel et al. §3): no persisted links, validity bits">,
    Describe<"list/soft", Kind::map, factories::Plain<linkfree_soft::SoftList<>>,
             "SOFT durable list (Zuriel et al. §4): persistent nodes separate from volatile ones">,
    Describe<"list/psync-bound", Kind::map,
             factories::PsyncBoundOf<factories::Plain<algo::HarrisMichaelList<algo::transient>>>,
             "reference, not durable: list/transient + one psync per successful update (the "
             "ceiling of any durable list here)">,
    Describe<"list/psync2-bound", Kind::map,
             factories::PsyncBoundOf<factories::Plain<algo::HarrisMichaelList<algo::transient>>, 2>,
             "reference, not durable: list/transient + two psyncs, one after the other, per "
             "successful update (the ceiling of list/mirror here)">,
    // Michael's hash table: a fixed array of buckets, one list each (algo/michael_hash.hpp)
    Describe<"hash/transient", Kind::map, factories::Hash<algo::MichaelHashTable<algo::transient>>,
             "Michael lock-free hash table in DRAM (the transient baseline)">,
    Describe<"hash/xenium", Kind::map, factories::Plain<comparators::XeniumHash>,
             "comparator, not pmds's code: xenium's harris_michael_hash_map in DRAM, 2^20 "
             "buckets (hash/transient's at --key-range 1048576, the default suite's)">,
    Describe<"hash/izraelevitz", Kind::map,
             factories::Hash<algo::MichaelHashTable<algo::izraelevitz>>,
             "Michael hash table, Izraelevitz transform: flush+fence after every shared access">,
    Describe<"hash/flit", Kind::map, factories::Hash<algo::MichaelHashTable<algo::flit>>,
             "Michael hash table, FliT transform: loads persist only while a store is in flight">,
    Describe<"hash/mirror", Kind::map,
             factories::Hash<algo::MichaelHashTable<mirror::MirrorPolicy<>>>,
             "Michael hash table, Mirror: patomic words, reads from a DRAM replica">,
    Describe<"hash/mirror-pm", Kind::map,
             factories::Hash<algo::MichaelHashTable<mirror::MirrorBothInPoolPolicy>>,
             "Michael hash table, Mirror with both replicas on the pool's medium (§6.3)">,
    Describe<"hash/linkfree", Kind::map, factories::Hash<linkfree_soft::LinkFreeHashSet>,
             "link-free durable hash table (Zuriel et al. §3), buckets in DRAM">,
    Describe<"hash/soft", Kind::map, factories::Hash<linkfree_soft::SoftHashSet<>>,
             "SOFT durable hash table (Zuriel et al. §4), buckets in DRAM">,
    Describe<"hash/montage", Kind::map, factories::Montage<montage::HashMap<>>,
             "Michael hash table on nbMontage: DRAM index, epoch-tagged payloads in "
             "the pool, buffered durable linearizability with sync">,
    Describe<"hash-bytes/transient", Kind::map,
             factories::FixedSizeStringsOf<factories::Hash<montage::TransientByteStringHashMap>>,
             "hash-bytes/montage's transient twin: the same table in DRAM, payloads on the heap, "
             "plain CASes (--key-size and --value-size bytes, default 8)">,
    Describe<"hash-bytes/montage", Kind::map,
             factories::FixedSizeStringsOf<factories::Montage<montage::ByteStringHashMap<>>>,
             "hash/montage over byte-string keys and values (nbMontage §5), each key and value "
             "written as --key-size and --value-size bytes (default 8)">,
    Describe<"hash-bytes/soft", Kind::map,
             factories::FixedSizeStringsOf<factories::Hash<linkfree_soft::SoftStringHashMap>>,
             "hash/soft over byte-string keys and values: durable on return, one psync per "
             "insert, replacement and remove (--key-size and --value-size bytes)">,
    Describe<"hash/psync-bound", Kind::map,
             factories::PsyncBoundOf<factories::Hash<algo::MichaelHashTable<algo::transient>>>,
             "reference, not durable: hash/transient + one psync per successful update (the "
             "ceiling of any durable hash table here)">,
    Describe<"hash/psync2-bound", Kind::map,
             factories::PsyncBoundOf<factories::Hash<algo::MichaelHashTable<algo::transient>>, 2>,
             "reference, not durable: hash/transient + two psyncs, one after the other, per "
             "successful update (the ceiling of hash/mirror here)">,
    // Shalev-Shavit split-ordered hash table (montage/split_ordered_hash.hpp)
    Describe<"hash-so/transient", Kind::map,
             factories::Plain<montage::TransientSplitOrderedHashMap>,
             "Shalev-Shavit split-ordered (extensible) lock-free hash table in DRAM (the "
             "transient baseline of hash-so/montage)">,
    Describe<"hash-so/montage", Kind::map, factories::Montage<montage::SplitOrderedHashMap<>>,
             "split-ordered hash table on nbMontage: DRAM list and growing bucket "
             "array, persistent payloads, buffered, sync">,
    // Skip lists
    Describe<"skiplist/transient", Kind::map, factories::Plain<algo::SkipList<algo::transient>>,
             "lock-free skip list (Herlihy-Shavit) in DRAM (the transient baseline)">,
    Describe<"skiplist/izraelevitz", Kind::map, factories::Plain<algo::SkipList<algo::izraelevitz>>,
             "lock-free skip list, Izraelevitz transform">,
    Describe<"skiplist/flit", Kind::map, factories::Plain<algo::SkipList<algo::flit>>,
             "lock-free skip list, FliT transform">,
    Describe<"skiplist/mirror", Kind::map, factories::Plain<algo::SkipList<mirror::MirrorPolicy<>>>,
             "lock-free skip list, Mirror">,
    Describe<"skiplist/mirror-pm", Kind::map,
             factories::Plain<algo::SkipList<mirror::MirrorBothInPoolPolicy>>,
             "lock-free skip list, Mirror with both replicas on the pool's medium (§6.3)">,
    Describe<"skiplist/linkfree", Kind::map, factories::Plain<linkfree_soft::LinkFreeSkipList<>>,
             "link-free durable skip list (Zuriel et al. §3 by extension): towers rebuilt on "
             "recovery">,
    Describe<"skiplist/soft", Kind::map, factories::Plain<linkfree_soft::SoftSkipList<>>,
             "SOFT durable skip list (Zuriel et al. by extension): volatile towers, scan">,
    Describe<"skiplist/psync-bound", Kind::map,
             factories::PsyncBoundOf<factories::Plain<algo::SkipList<algo::transient>>>,
             "reference, not durable: skiplist/transient + one psync per successful update (the "
             "ceiling of any durable skip list here)">,
    Describe<"skiplist/montage", Kind::map, factories::Montage<montage::SkipList<>>,
             "lock-free skip list on nbMontage: DRAM index, persistent payloads, "
             "buffered, sync, scan">,
    Describe<"skiplist-bytes/transient", Kind::map,
             factories::FixedSizeStringsOf<factories::Plain<montage::TransientByteStringSkipList>>,
             "skiplist-bytes/montage's transient twin: the same list in DRAM, payloads on the "
             "heap, plain CASes (--key-size and --value-size bytes, default 8)">,
    Describe<"skiplist-bytes/montage", Kind::map,
             factories::FixedSizeStringsOf<factories::Montage<montage::ByteStringSkipList<>>>,
             "skiplist/montage over byte-string keys and values in byte order, each key and "
             "value written as --key-size and --value-size bytes (default 8)">,
    Describe<"skiplist-bytes/soft", Kind::map,
             factories::FixedSizeStringsOf<factories::Plain<linkfree_soft::SoftStringSkipList>>,
             "skiplist/soft over byte-string keys and values in byte order: durable on return, "
             "one psync per insert, replacement and remove (--key-size and --value-size bytes)">,
    // Natarajan-Mittal external binary search tree (algo/natarajan_mittal_bst.hpp)
    Describe<"bst/transient", Kind::map,
             factories::Plain<algo::NatarajanMittalTree<algo::transient>>,
             "Natarajan-Mittal lock-free BST in DRAM (the transient baseline)">,
    Describe<"bst/izraelevitz", Kind::map,
             factories::Plain<algo::NatarajanMittalTree<algo::izraelevitz>>,
             "Natarajan-Mittal BST, Izraelevitz transform">,
    Describe<"bst/flit", Kind::map, factories::Plain<algo::NatarajanMittalTree<algo::flit>>,
             "Natarajan-Mittal BST, FliT transform">,
    Describe<"bst/mirror", Kind::map,
             factories::Plain<algo::NatarajanMittalTree<mirror::MirrorPolicy<>>>,
             "Natarajan-Mittal BST, Mirror">,
    Describe<"bst/mirror-pm", Kind::map,
             factories::Plain<algo::NatarajanMittalTree<mirror::MirrorBothInPoolPolicy>>,
             "Natarajan-Mittal BST, Mirror with both replicas on the pool's medium (§6.3)">,
    Describe<"bst/montage", Kind::map, factories::Montage<montage::NatarajanMittalTree<>>,
             "Natarajan-Mittal BST on nbMontage: DRAM tree, persistent payloads, "
             "buffered, sync">,
    // Masstree (InCLL's substrate; incll/masstree.hpp)
    Describe<"masstree/transient", Kind::map, factories::Plain<incll::Masstree>,
             "Masstree in DRAM: a trie of B+trees over 8-byte key slices, optimistic readers, "
             "put and scan (the transient baseline of InCLL)">,
    Describe<"masstree/incll", Kind::map, factories::Incll<incll::InCLLMasstree<>>,
             "Masstree, InCLL: epoch checkpoints; an insert or a remove logs the "
             "border's permutation in its own cache line (InCLL_p), an update the old value in "
             "its value's line; splits and interior nodes are logged whole to an external log">,
    Describe<"masstree/logging", Kind::map, factories::Incll<incll::LoggingMasstree<>>,
             "Masstree, InCLL's LOGGING mode: epoch checkpoints, every node logged whole to an "
             "external undo log before its first write in an epoch">,
    Describe<"masstree-bytes/transient", Kind::map,
             factories::FixedSizeStringsOf<factories::Plain<incll::StringMasstree>, true>,
             "masstree/transient over byte-string keys and values (--key-size and --value-size "
             "bytes, default 8; from 16, each 8 consecutive keys share a prefix: layers)">,
    Describe<"masstree-bytes/incll", Kind::map,
             factories::FixedSizeStringsOf<factories::Incll<incll::InCLLStringMasstree<>>, true>,
             "masstree/incll over byte-string keys and values in pool blocks (--key-size and "
             "--value-size bytes, default 8; from 16, each 8 consecutive keys share a prefix)">,
    Describe<"masstree-bytes/logging", Kind::map,
             factories::FixedSizeStringsOf<factories::Incll<incll::LoggingStringMasstree<>>, true>,
             "masstree/logging over byte-string keys and values in pool blocks (--key-size and "
             "--value-size bytes, default 8; from 16, each 8 consecutive keys share a prefix)">,
    // Michael-Scott queue, Treiber stack, lock-protected heap
    Describe<"queue/transient", Kind::queue,
             factories::Plain<algo::MichaelScottQueue<algo::transient>>,
             "Michael-Scott lock-free queue in DRAM (the transient baseline)">,
    Describe<"queue/xenium", Kind::queue, factories::Plain<comparators::XeniumQueue>,
             "comparator, not pmds's code: xenium's michael_scott_queue in DRAM, the "
             "independent check of queue/transient">,
    Describe<"queue/izraelevitz", Kind::queue,
             factories::Plain<algo::MichaelScottQueue<algo::izraelevitz>>,
             "Michael-Scott queue, Izraelevitz transform">,
    Describe<"queue/flit", Kind::queue, factories::Plain<algo::MichaelScottQueue<algo::flit>>,
             "Michael-Scott queue, FliT transform">,
    Describe<"queue/mirror", Kind::queue,
             factories::Plain<algo::MichaelScottQueue<mirror::MirrorPolicy<>>>,
             "Michael-Scott queue, Mirror">,
    Describe<"stack/transient", Kind::stack, factories::Plain<algo::TreiberStack<algo::transient>>,
             "Treiber lock-free stack in DRAM (the transient baseline)">,
    Describe<"stack/izraelevitz", Kind::stack,
             factories::Plain<algo::TreiberStack<algo::izraelevitz>>,
             "Treiber stack, Izraelevitz transform">,
    Describe<"stack/flit", Kind::stack, factories::Plain<algo::TreiberStack<algo::flit>>,
             "Treiber stack, FliT transform">,
    Describe<"stack/mirror", Kind::stack,
             factories::Plain<algo::TreiberStack<mirror::MirrorPolicy<>>>, "Treiber stack, Mirror">,
    Describe<"heap/transient", Kind::priority_queue,
             factories::Heap<algo::LockedBinaryHeap<algo::transient>>,
             "sequential binary min-heap behind one lock (Fatourou et al.'s heap baseline)">,
    // AtomicFloat: one shared word, fetch_multiply by a CAS loop (algo/atomic_float.hpp)
    Describe<"register/transient", Kind::register_object,
             factories::Plain<algo::AtomicFloat<algo::transient>>,
             "AtomicFloat (Fatourou et al.) in DRAM: load + CAS loop (the transient baseline)">,
    Describe<"register/izraelevitz", Kind::register_object,
             factories::Plain<algo::AtomicFloat<algo::izraelevitz>>,
             "AtomicFloat, Izraelevitz transform: flush+fence after every load and CAS">,
    Describe<"register/flit", Kind::register_object,
             factories::Plain<algo::AtomicFloat<algo::flit>>,
             "AtomicFloat, FliT transform: loads persist only while a CAS is in flight">,
    Describe<"register/mirror", Kind::register_object,
             factories::Plain<algo::AtomicFloat<mirror::MirrorPolicy<>>>,
             "AtomicFloat, Mirror: loads from DRAM, CAS persists first">,
    // Persistent software combining (Fatourou et al., combining/): PBcomb (blocking) and PWFcomb
    // (wait-free), each detectable, durable-only (no ReturnVal/Deactivate persisted, null
    // recovery) and volatile (Figure 8's twin, the ratio's denominator).
    Describe<"register/pbcomb", Kind::register_object,
             factories::Plain<combining::CombiningAtomicFloat<combining::PBComb,
                                                              combining::Persistence::detectable>>,
             "AtomicFloat on PBcomb (Fatourou et al.): detectable recoverability">,
    Describe<"register/pbcomb-durable", Kind::register_object,
             factories::Plain<combining::CombiningAtomicFloat<combining::PBComb,
                                                              combining::Persistence::durable>>,
             "AtomicFloat on PBcomb, durable only: the state is persisted, not the responses">,
    Describe<"register/pbcomb-transient", Kind::register_object,
             factories::Plain<
                 combining::CombiningAtomicFloat<combining::PBComb, combining::Persistence::none>>,
             "AtomicFloat on volatile PBcomb (Fatourou et al. Figure 8): the twin of "
             "register/pbcomb">,
    Describe<"register/pwfcomb", Kind::register_object,
             factories::Plain<combining::CombiningAtomicFloat<combining::PWFComb,
                                                              combining::Persistence::detectable>>,
             "AtomicFloat on PWFcomb (Fatourou et al., wait-free): detectable recoverability">,
    Describe<"register/pwfcomb-durable", Kind::register_object,
             factories::Plain<combining::CombiningAtomicFloat<combining::PWFComb,
                                                              combining::Persistence::durable>>,
             "AtomicFloat on PWFcomb, durable only: the state and S persisted">,
    Describe<"register/pwfcomb-transient", Kind::register_object,
             factories::Plain<
                 combining::CombiningAtomicFloat<combining::PWFComb, combining::Persistence::none>>,
             "AtomicFloat on volatile PWFcomb: the twin of register/pwfcomb">,
    Describe<"stack/pbcomb", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PBComb, combining::Persistence::detectable>>,
             "PBstack (Fatourou et al.): a linked stack on PBcomb with elimination and a recycling "
             "stack, detectable recoverability">,
    Describe<"stack/pbcomb-durable", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PBComb, combining::Persistence::durable>>,
             "PBstack, durable only: the top and nodes persisted, not the responses">,
    Describe<"stack/pbcomb-transient", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PBComb, combining::Persistence::none>>,
             "PBstack on volatile PBcomb: the twin of stack/pbcomb">,
    Describe<"stack/pbcomb-no-elim", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PBComb, combining::Persistence::detectable,
                                           combining::StackOptions{false, true}>>,
             "PBstack without elimination (Fatourou et al. Figure 7a's PBSTACK-NO-ELIM)">,
    Describe<"stack/pbcomb-no-rec", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PBComb, combining::Persistence::detectable,
                                           combining::StackOptions{true, false}>>,
             "PBstack without the recycling stack: nodes go back to the pool's allocator "
             "(Figure 7a's PBSTACK-NO-REC)">,
    Describe<"stack/pwfcomb", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PWFComb, combining::Persistence::detectable>>,
             "PWFstack (Fatourou et al.): a linked stack on wait-free PWFcomb with elimination, "
             "popped nodes reclaimed by epochs, detectable recoverability">,
    Describe<"stack/pwfcomb-durable", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PWFComb, combining::Persistence::durable>>,
             "PWFstack, durable only: the top and nodes persisted, not the responses">,
    Describe<"stack/pwfcomb-transient", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PWFComb, combining::Persistence::none>>,
             "PWFstack on volatile PWFcomb: the twin of stack/pwfcomb">,
    Describe<"stack/pwfcomb-no-elim", Kind::stack,
             factories::Plain<
                 combining::CombiningStack<combining::PWFComb, combining::Persistence::detectable,
                                           combining::StackOptions{false, true}>>,
             "PWFstack without elimination (Figure 7a's PWFSTACK-NO-ELIM)">,
    Describe<"queue/montage", Kind::queue, factories::Montage<montage::Queue<>>,
             "Michael-Scott queue on nbMontage: DRAM list, payloads with serial "
             "numbers in the pool, buffered durable linearizability with sync">,
    Describe<"queue/pbcomb", Kind::queue,
             factories::Plain<combining::CombiningQueue<combining::Persistence::detectable>>,
             "PBqueue (Fatourou et al.): two PBcomb instances (enqueuers, dequeuers), detectable">,
    Describe<"queue/pbcomb-durable", Kind::queue,
             factories::Plain<combining::CombiningQueue<combining::Persistence::durable>>,
             "PBqueue, durable only: head, tail and nodes persisted, not the responses">,
    Describe<"queue/pbcomb-transient", Kind::queue,
             factories::Plain<combining::CombiningQueue<combining::Persistence::none>>,
             "PBqueue on volatile PBcomb: the twin of queue/pbcomb">,
    Describe<
        "queue/pwfcomb", Kind::queue,
        factories::Plain<combining::WaitFreeCombiningQueue<combining::Persistence::detectable>>,
        "PWFqueue (Fatourou et al. App. B): two PWFcomb instances, a two-part list, detectable">,
    Describe<"queue/pwfcomb-durable", Kind::queue,
             factories::Plain<combining::WaitFreeCombiningQueue<combining::Persistence::durable>>,
             "PWFqueue, durable only: head, tail and nodes persisted, not the responses">,
    Describe<"queue/pwfcomb-transient", Kind::queue,
             factories::Plain<combining::WaitFreeCombiningQueue<combining::Persistence::none>>,
             "PWFqueue on volatile PWFcomb: the twin of queue/pwfcomb">,
    Describe<"heap/pbcomb", Kind::priority_queue,
             factories::Bounded<
                 combining::CombiningHeap<combining::PBComb, combining::Persistence::detectable>>,
             "PBheap (Fatourou et al.): a bounded binary min-heap on PBcomb, detectable">,
    Describe<"heap/pbcomb-durable", Kind::priority_queue,
             factories::Bounded<
                 combining::CombiningHeap<combining::PBComb, combining::Persistence::durable>>,
             "PBheap, durable only: the heap array persisted, not the responses">,
    Describe<"heap/pbcomb-transient", Kind::priority_queue,
             factories::Bounded<
                 combining::CombiningHeap<combining::PBComb, combining::Persistence::none>>,
             "PBheap on volatile PBcomb: the twin of heap/pbcomb">,
    Describe<"heap/pwfcomb", Kind::priority_queue,
             factories::Bounded<
                 combining::CombiningHeap<combining::PWFComb, combining::Persistence::detectable>>,
             "the same bounded heap on PWFcomb (wait-free; Fatourou et al. §8), detectable">,
    Describe<"heap/pwfcomb-durable", Kind::priority_queue,
             factories::Bounded<
                 combining::CombiningHeap<combining::PWFComb, combining::Persistence::durable>>,
             "the heap on PWFcomb, durable only">,
    Describe<"heap/pwfcomb-transient", Kind::priority_queue,
             factories::Bounded<
                 combining::CombiningHeap<combining::PWFComb, combining::Persistence::none>>,
             "the heap on volatile PWFcomb: the twin of heap/pwfcomb">>;

// The registry is built on the public entry point: a pool that pmds.hpp's open_or_create<S> made
// carries pool_layout<S>, and `pmds check`, `pmds dump` and the crash lab open it by that name,
// so the entry of that name must build the same S (a byte-string map's entry wraps it in
// FixedSizeStrings).
namespace detail {
template <class F>
struct pool_structure {
  using type = typename F::type;
};
template <class Inner, bool SharedPrefixes>
struct pool_structure<factories::FixedSizeStringsOf<Inner, SharedPrefixes>> {
  using type = typename Inner::type;
};
template <class... Ds>
constexpr bool layouts_agree(TypeList<Ds...>) {
  return ((pool_layout<typename pool_structure<typename Ds::factory>::type>.empty() ||
           pool_layout<typename pool_structure<typename Ds::factory>::type> == Ds::name) &&
          ...);
}
}  // namespace detail
static_assert(detail::layouts_agree(Registered{}),
              "an entry's name differs from pmds::pool_layout of its structure (pmds.hpp)");

// Compiling the table of entries() compiles every registered structure (a minute per source
// file). A program whose several files use the registry may compile it in one: define
// PMDS_REGISTRY_TABLE_IN_ONE_FILE for all of them (registry/entries.hpp then declares entries()
// without defining it), and in exactly one file write PMDS_REGISTRY_TABLE_HERE() at namespace
// scope (tools/registry_table does, once per backend, for the pmds command, the crash lab's
// programs and the tests that use the whole table).
#if !defined(PMDS_REGISTRY_TABLE_IN_ONE_FILE)
// Every registered structure, in the order of Registered.
inline std::span<const Entry> entries() {
  return table_of<Registered>();
}
#endif
#define PMDS_REGISTRY_TABLE_HERE()                                   \
  std::span<const pmds::registry::Entry> pmds::registry::entries() { \
    return pmds::registry::table_of<pmds::registry::Registered>();   \
  }                                                                  \
  static_assert(true, "a semicolon follows PMDS_REGISTRY_TABLE_HERE()")

// One entry, compiled alone (entries() compiles every registered structure's factory; a
// program that looks up one entry builds in seconds with this): the entry named Name in List
// (the registry, or a list kept apart such as the crash lab's fixtures).
template <Text Name, class List = Registered>
const Entry& entry_named() {
  static const Entry entry = detail::Table<List>::template first_entry<decltype(
      []<class D>() { return D::name == Name.view(); })>();
  return entry;
}

// One function pointer per registered entry (same order as entries()): Driver<D>::run for each
// descriptor D, converted to Fn. Each is compiled against D::type, so the loop inside calls the
// structure directly. Example: the harness's instantiate<bench::RunFn, bench::Functions>().
template <class Fn, template <class> class Driver>
const std::array<Fn, Registered::size>& instantiate() {
  static constexpr std::array<Fn, Registered::size> table =
      detail::Table<Registered>::template functions<Fn, Driver>();
  return table;
}

// Calls f.template operator()<D>() for every registered descriptor D, in order.
template <class F>
void for_each_descriptor(F&& f) {
  detail::Table<Registered>::visit(f);
}

}  // namespace pmds::registry

// The look-ups over the table (find, select, known_names).
#include "pmds/registry/entries.hpp"

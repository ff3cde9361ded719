// pmds — THE list of registered structures × techniques (included by registry.hpp).
//
// To register a new structure or technique: include its header and add ONE line to Registered
// below (a Describe<name, kind, criterion, factory, description>). Every tool — `pmds list`,
// `pmds bench`, `pmds crashtest`, the default suite — picks it up from here. A factory says how
// to build the concrete type (registry.hpp, concept Factory); the ones below cover the shapes
// the structures so far have.
//
// Names are "structure/technique". Kinds: a structure with get is a map (the harness reads with
// get), without get a set. Every durable entry keeps its structure alone in its pool.
#pragma once

#include <memory>

#include "pmds/algo/atomic_float.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/locked_heap.hpp"
#include "pmds/algo/michael_hash.hpp"
#include "pmds/algo/ms_queue.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/algo/skip_list.hpp"
#include "pmds/algo/treiber_stack.hpp"
#include "pmds/bench/psync_bound.hpp"
#include "pmds/registry.hpp"
#include "pmds/sets/hash_set.hpp"
#include "pmds/sets/linkfree_list.hpp"
#include "pmds/sets/linkfree_skiplist.hpp"
#include "pmds/sets/soft_list.hpp"
#include "pmds/sets/soft_skiplist.hpp"

namespace pmds::registry {

namespace factories {

// algo/ structures (policy.hpp): S<transient>() in DRAM; S<durable>(pool, root slot 0) to
// create, S(pool, 0, algo::recover) to open and recover.
template <class T>
struct Algo {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions&) {
    if constexpr (T::Policy::durable)
      return std::make_unique<T>(*pool, 0);
    else
      return std::make_unique<T>();
  }
  static std::unique_ptr<T> open(pm::Pool& pool,
                                 const CreateOptions&) requires(T::Policy::durable) {
    return std::make_unique<T>(pool, 0, algo::recover);
  }
};

// algo/ hash tables: as Algo, with the bucket count (bucket_count_for: one per key of the range,
// a power of two — seed 000 §6 runs 1M keys over 2^20 buckets). Open reads it from the pool.
template <class T>
struct AlgoHash {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions& o) {
    if constexpr (T::Policy::durable)
      return std::make_unique<T>(*pool, 0, bucket_count_for(o));
    else
      return std::make_unique<T>(bucket_count_for(o));
  }
  static std::unique_ptr<T> open(pm::Pool& pool,
                                 const CreateOptions&) requires(T::Policy::durable) {
    return std::make_unique<T>(pool, 0, algo::recover);
  }
};

// algo/ lock-protected heap (transient only), its vector reserved for the key range.
template <class T>
struct AlgoHeap {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool*, const CreateOptions& o) {
    return std::make_unique<T>(static_cast<std::size_t>(o.key_range));
  }
};

// sets/ (seed 000: link-free and SOFT): S(create_new, pool) and S(open_existing, pool), which
// recovers from the durable areas.
template <class T>
struct DurableSet {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions&) {
    return std::make_unique<T>(sets::create_new, *pool);
  }
  static std::unique_ptr<T> open(pm::Pool& pool, const CreateOptions&) {
    return std::make_unique<T>(sets::open_existing, pool);
  }
};

// sets::HashSet<L>: as DurableSet, with the bucket count (kept in the pool for open).
template <class T>
struct DurableHashSet {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions& o) {
    return std::make_unique<T>(sets::create_new, *pool, bucket_count_for(o));
  }
  static std::unique_ptr<T> open(pm::Pool& pool, const CreateOptions&) {
    return std::make_unique<T>(sets::open_existing, pool);
  }
};

// bench::PsyncBound over a transient entry's factory F: F's structure plus one psync per
// successful update (the benchmark reference of bench/psync_bound.hpp; transient itself).
template <class F>
struct PsyncBoundOf {
  using type = bench::PsyncBound<typename F::type>;
  static std::unique_ptr<type> create(pm::Pool* pool, const CreateOptions& o) {
    return std::make_unique<type>(F::create(pool, o));
  }
};

}  // namespace factories

using Registered = TypeList<
    // Harris-Michael linked list (algo/harris_michael_list.hpp)
    Describe<"list/transient", Kind::map, Criterion::none,
             factories::Algo<algo::HarrisMichaelList<algo::transient>>,
             "Harris-Michael lock-free list in DRAM (the transient baseline)">,
    Describe<"list/izraelevitz", Kind::map, Criterion::durable,
             factories::Algo<algo::HarrisMichaelList<algo::izraelevitz>>,
             "Harris-Michael list, Izraelevitz transform: flush+fence after every shared access">,
    Describe<"list/linkfree", Kind::map, Criterion::durable,
             factories::DurableSet<sets::LinkFreeList<>>,
             "link-free durable list (seed 000 §3): no persisted links, validity bits">,
    Describe<"list/soft", Kind::map, Criterion::durable, factories::DurableSet<sets::SoftList<>>,
             "SOFT durable list (seed 000 §4): persistent nodes separate from volatile ones">,
    Describe<"list/psync-bound", Kind::map, Criterion::none,
             factories::PsyncBoundOf<factories::Algo<algo::HarrisMichaelList<algo::transient>>>,
             "reference, not durable: list/transient + one psync per successful update (the "
             "ceiling of any durable list here)">,
    // Michael's hash table: a fixed array of buckets, one list each (algo/michael_hash.hpp)
    Describe<"hash/transient", Kind::map, Criterion::none,
             factories::AlgoHash<algo::MichaelHashTable<algo::transient>>,
             "Michael lock-free hash table in DRAM (the transient baseline)">,
    Describe<"hash/izraelevitz", Kind::map, Criterion::durable,
             factories::AlgoHash<algo::MichaelHashTable<algo::izraelevitz>>,
             "Michael hash table, Izraelevitz transform: flush+fence after every shared access">,
    Describe<"hash/linkfree", Kind::map, Criterion::durable,
             factories::DurableHashSet<sets::LinkFreeHashSet>,
             "link-free durable hash table (seed 000 §3), buckets in DRAM">,
    Describe<"hash/soft", Kind::map, Criterion::durable,
             factories::DurableHashSet<sets::SoftHashSet<>>,
             "SOFT durable hash table (seed 000 §4), buckets in DRAM">,
    Describe<"hash/psync-bound", Kind::map, Criterion::none,
             factories::PsyncBoundOf<factories::AlgoHash<algo::MichaelHashTable<algo::transient>>>,
             "reference, not durable: hash/transient + one psync per successful update (the "
             "ceiling of any durable hash table here)">,
    // Skip lists
    Describe<"skiplist/transient", Kind::map, Criterion::none,
             factories::Algo<algo::SkipList<algo::transient>>,
             "lock-free skip list (Herlihy-Shavit) in DRAM (the transient baseline)">,
    Describe<"skiplist/izraelevitz", Kind::map, Criterion::durable,
             factories::Algo<algo::SkipList<algo::izraelevitz>>,
             "lock-free skip list, Izraelevitz transform">,
    Describe<"skiplist/linkfree", Kind::map, Criterion::durable,
             factories::DurableSet<sets::LinkFreeSkipList<>>,
             "link-free durable skip list (seed 000 §3 by extension): towers rebuilt on recovery">,
    Describe<"skiplist/soft", Kind::map, Criterion::durable,
             factories::DurableSet<sets::SoftSkipList<>>,
             "SOFT durable skip list (seed 000 by extension): volatile towers, scan">,
    Describe<"skiplist/psync-bound", Kind::map, Criterion::none,
             factories::PsyncBoundOf<factories::Algo<algo::SkipList<algo::transient>>>,
             "reference, not durable: skiplist/transient + one psync per successful update (the "
             "ceiling of any durable skip list here)">,
    // Natarajan-Mittal external binary search tree (algo/natarajan_mittal_bst.hpp)
    Describe<"bst/transient", Kind::map, Criterion::none,
             factories::Algo<algo::NatarajanMittalTree<algo::transient>>,
             "Natarajan-Mittal lock-free BST in DRAM (the transient baseline)">,
    Describe<"bst/izraelevitz", Kind::map, Criterion::durable,
             factories::Algo<algo::NatarajanMittalTree<algo::izraelevitz>>,
             "Natarajan-Mittal BST, Izraelevitz transform">,
    // Michael-Scott queue, Treiber stack, lock-protected heap
    Describe<"queue/transient", Kind::queue, Criterion::none,
             factories::Algo<algo::MichaelScottQueue<algo::transient>>,
             "Michael-Scott lock-free queue in DRAM (the transient baseline)">,
    Describe<"queue/izraelevitz", Kind::queue, Criterion::durable,
             factories::Algo<algo::MichaelScottQueue<algo::izraelevitz>>,
             "Michael-Scott queue, Izraelevitz transform">,
    Describe<"stack/transient", Kind::stack, Criterion::none,
             factories::Algo<algo::TreiberStack<algo::transient>>,
             "Treiber lock-free stack in DRAM (the transient baseline)">,
    Describe<"stack/izraelevitz", Kind::stack, Criterion::durable,
             factories::Algo<algo::TreiberStack<algo::izraelevitz>>,
             "Treiber stack, Izraelevitz transform">,
    Describe<"heap/transient", Kind::priority_queue, Criterion::none,
             factories::AlgoHeap<algo::LockedBinaryHeap<algo::transient>>,
             "sequential binary min-heap behind one lock (seed 004's heap baseline)">,
    // AtomicFloat: one shared word, fetch_multiply by a CAS loop (algo/atomic_float.hpp)
    Describe<"register/transient", Kind::register_object, Criterion::none,
             factories::Algo<algo::AtomicFloat<algo::transient>>,
             "AtomicFloat (seed 004) in DRAM: load + CAS loop (the transient baseline)">,
    Describe<"register/izraelevitz", Kind::register_object, Criterion::durable,
             factories::Algo<algo::AtomicFloat<algo::izraelevitz>>,
             "AtomicFloat, Izraelevitz transform: flush+fence after every load and CAS">>;

}  // namespace pmds::registry

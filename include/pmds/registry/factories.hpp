// pmds — the registry's factories: how each family of structures is built in DRAM or in a new
// pool, and opened (recovered) from an existing one (concept Factory, registry/descriptor.hpp).
// The list in pmds/registry.hpp names one factory per entry.
#pragma once

#include <memory>

#include "pmds/algo/atomic_float.hpp"
#include "pmds/algo/flit_policy.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/locked_heap.hpp"
#include "pmds/algo/michael_hash.hpp"
#include "pmds/algo/ms_queue.hpp"
#include "pmds/algo/natarajan_mittal_bst.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/algo/skip_list.hpp"
#include "pmds/algo/treiber_stack.hpp"
#include "pmds/combining/atomic_float.hpp"
#include "pmds/combining/heap.hpp"
#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/pwfcomb.hpp"
#include "pmds/combining/queue.hpp"
#include "pmds/combining/stack.hpp"
#include "pmds/combining/wait_free_queue.hpp"
#include "pmds/comparators/xenium.hpp"
#include "pmds/incll/durable_masstree.hpp"
#include "pmds/incll/masstree.hpp"
#include "pmds/linkfree_soft/hash_set.hpp"
#include "pmds/linkfree_soft/linkfree_list.hpp"
#include "pmds/linkfree_soft/linkfree_skiplist.hpp"
#include "pmds/linkfree_soft/soft_list.hpp"
#include "pmds/linkfree_soft/soft_skiplist.hpp"
#include "pmds/linkfree_soft/soft_string_hash_map.hpp"
#include "pmds/linkfree_soft/soft_string_skiplist.hpp"
#include "pmds/mirror/policy.hpp"
#include "pmds/montage/hash_map.hpp"
#include "pmds/montage/natarajan_mittal_bst.hpp"
#include "pmds/montage/queue.hpp"
#include "pmds/montage/skip_list.hpp"
#include "pmds/montage/split_ordered_hash.hpp"
#include "pmds/reference/psync_bound.hpp"
#include "pmds/registry/descriptor.hpp"
#include "pmds/registry/fixed_size_strings.hpp"

namespace pmds::registry {

namespace factories {

// Every structure follows one constructor convention (interfaces.hpp): S(args...) in DRAM,
// S(create_new, pool, args...) in a new pool, S(open_existing, pool) to open and recover.
template <class T>
constexpr bool is_durable = criterion_of<T>() != Criterion::none;

// A structure built without arguments.
template <class T>
struct Plain {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions&) {
    if constexpr (is_durable<T>)
      return std::make_unique<T>(create_new, *pool);
    else
      return std::make_unique<T>();
  }
  static std::unique_ptr<T> open(pm::Pool& pool, const CreateOptions&) requires is_durable<T> {
    return std::make_unique<T>(open_existing, pool);
  }
};

// A hash table, built with its bucket count (bucket_count_for: one per key of the range, a power
// of two — Zuriel et al. §6 runs 1M keys over 2^20 buckets); open reads it from the pool.
template <class T>
struct Hash {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions& o) {
    if constexpr (is_durable<T>)
      return std::make_unique<T>(create_new, *pool, bucket_count_for(o));
    else
      return std::make_unique<T>(bucket_count_for(o));
  }
  static std::unique_ptr<T> open(pm::Pool& pool, const CreateOptions&) requires is_durable<T> {
    return std::make_unique<T>(open_existing, pool);
  }
};

// A lock-protected heap (transient only), its vector reserved for the key range.
template <class T>
struct Heap {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool*, const CreateOptions& o) {
    return std::make_unique<T>(static_cast<std::size_t>(o.key_range));
  }
};

// A bounded structure (Fatourou et al.'s combining heaps), built with capacity_for(o); open reads
// the capacity from the pool.
template <class T>
struct Bounded {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions& o) {
    if constexpr (is_durable<T>)
      return std::make_unique<T>(create_new, *pool, static_cast<std::size_t>(capacity_for(o)));
    else
      return std::make_unique<T>(static_cast<std::size_t>(capacity_for(o)));
  }
  static std::unique_ptr<T> open(pm::Pool& pool, const CreateOptions&) requires is_durable<T> {
    return std::make_unique<T>(open_existing, pool);
  }
};

// An nbMontage structure (montage/): a hash table's bucket count, and whether its epoch advancer
// runs in a thread of its own (off in the crash lab, whose scheduler runs it).
inline montage::Options montage_options(const CreateOptions& o) {
  montage::Options m;
  m.background_thread = o.background_thread;
  m.recovery_threads = o.recovery_threads;
  return m;
}
template <class T>
struct Montage {
  using type = T;
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions& o) {
    if constexpr (requires { T::default_bucket_count; })
      return std::make_unique<T>(create_new, *pool, bucket_count_for(o), montage_options(o));
    else
      return std::make_unique<T>(create_new, *pool, montage_options(o));
  }
  static std::unique_ptr<T> open(pm::Pool& pool, const CreateOptions& o) {
    return std::make_unique<T>(open_existing, pool, montage_options(o));
  }
};

// A byte-string map, seen as an 8-byte map by FixedSizeStrings (fixed_size_strings.hpp): keys
// and values written as CreateOptions::key_size and value_size bytes (keys in groups sharing a
// prefix when SharedPrefixes).
template <class Inner, bool SharedPrefixes = false>
struct FixedSizeStringsOf {
  using type = FixedSizeStrings<typename Inner::type, SharedPrefixes>;
  static std::unique_ptr<type> create(pm::Pool* pool, const CreateOptions& o) {
    return std::make_unique<type>(Inner::create(pool, o), o.key_size, o.value_size);
  }
  static std::unique_ptr<type> open(pm::Pool& pool, const CreateOptions& o) {
    return std::make_unique<type>(Inner::open(pool, o), o.key_size, o.value_size);
  }
};

// A durable Masstree of InCLL (incll/): whether its epoch advancer runs in a thread of its own
// (off in the crash lab, whose scheduler runs it).
template <class T>
struct Incll {
  using type = T;
  static incll::Options options(const CreateOptions& o) {
    incll::Options i;
    i.background_thread = o.background_thread;
    i.lazy_recovery = o.lazy_recovery;
    return i;
  }
  static std::unique_ptr<T> create(pm::Pool* pool, const CreateOptions& o) {
    return std::make_unique<T>(create_new, *pool, options(o));
  }
  static std::unique_ptr<T> open(pm::Pool& pool, const CreateOptions& o) {
    return std::make_unique<T>(open_existing, pool, options(o));
  }
};

// reference::PsyncBound over a transient entry's factory F: F's structure plus `Psyncs` psyncs per
// successful update (the benchmark reference of reference/psync_bound.hpp; transient itself).
template <class F, int Psyncs = 1>
struct PsyncBoundOf {
  using type = reference::PsyncBound<typename F::type, Psyncs>;
  static std::unique_ptr<type> create(pm::Pool* pool, const CreateOptions& o) {
    return std::make_unique<type>(F::create(pool, o));
  }
};

}  // namespace factories

}  // namespace pmds::registry

// pmds::linkfree_soft::HashSet<L> — Zuriel et al.'s durable hash set: "a table of buckets, where
// each bucket uses the [durable] list to hold its items" (§3). One template for both techniques:
//   HashSet<LinkFreeBucketList>  = "hash/linkfree"   (linkfree_soft/linkfree_list.hpp)
//   HashSet<SoftBucketList>      = "hash/soft"       (linkfree_soft/soft_list.hpp)
// The bucket array is fixed at creation (2^20 in the benchmarks) and lives in DRAM: buckets are
// links, and Zuriel et al. persist no link. The bucket count is kept in the pool's root table so
// that recovery can rebuild the same table from the durable areas.
//
// ---- The bucket-list interface (kept small on purpose; both list headers implement it) -------
// A bucket list L provides, as static members (all operations lock-free, safe concurrently):
//
//   typename L::Shared      state every bucket of one set shares (the pool allocator, the epoch
//                           domain, ...). Constructed as L::Shared(pm::Pool&); not movable.
//   typename L::Bucket      one bucket: the head of one list. Default construction = an empty
//                           bucket (HashSet allocates an array of them).
//   static constexpr std::uint64_t L::hash_tag   the root tag of HashSet<L> in a pool
//                           (detail::make_tag("HLINKFRE"), ...), distinct per technique.
//   static constexpr const char* L::hash_name     "hash/linkfree", ... (for error messages).
//
//   static bool L::insert(Shared&, Bucket&, Key, Value);   // false if the key was present
//   static bool L::remove(Shared&, Bucket&, Key);          // false if it was absent
//   static bool L::contains(Shared&, Bucket&, Key);
//   static std::optional<Value> L::get(Shared&, Bucket&, Key);
//       Keys reaching these are never reserved (HashSet checks them first). Each operation pins
//       the epoch domain itself and is durably linearizable on return.
//
//   template <class IndexOf>
//   static RecoveryStats L::recover(Shared&, std::span<Bucket> buckets, IndexOf index_of);
//       Open: quiescent, single-threaded, on a freshly constructed Shared and empty buckets.
//       Scans every durable area of the pool once (pm::ChunkAllocator::recover), links every
//       valid, undeleted node into buckets[index_of(key)] in key order, returns every other
//       slot to the free lists, and issues no flush (Zuriel et al. §2.1).
//
//   template <class F>
//   static void L::for_each(Shared&, const Bucket&, F&& f);
//       Quiescent: f(Key, Value) for every key of the bucket, in key order (tests, size()).
//
//   static void L::drain(Shared&);  quiescent: run every pending reclamation now.
//
// The same bucket list alone in a pool is Zuriel et al.'s list: ListSet<L>
// (linkfree_soft/list_set.hpp), which also needs L::list_tag and L::list_name.
//
// A set owns its pool (root(0), root(1), its nodes' size class): see
// linkfree_soft/detail/set_root.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "pmds/bucket_index.hpp"
#include "pmds/error.hpp"
#include "pmds/huge_pages.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::linkfree_soft {

/// A hash set of 8-byte keys, each with an 8-byte value, durable when each operation returns: a
/// table of buckets fixed at creation, each bucket a durable lock-free list.
///
/// - **Criterion:** durable linearizability: after a crash, every operation that returned is in
///   the recovered set, and an operation in flight is either wholly there or absent.
/// - **Cost:** link-free (`LinkFreeHashSet`): an insert persists its new node (one flush and
///   fence), a remove persists the node's deletion mark before it unlinks it; contains and get
///   write nothing when the key is absent, and when they find the key's node whose insertion (or
///   deletion) no thread has persisted yet, they persist it before returning (one flush and
///   fence; the node's flags say when someone already did, and then they write nothing); an
///   insert that finds its key present does the same. SOFT (`SoftHashSet`): at most one fence
///   per insert and per remove (its persistent node's create or destroy); contains and get never
///   flush or fence. Both: plus one persist when the pool allocator claims a new chunk.
/// - **Progress:** lock-free; contains and get are wait-free (the pool allocator's slow paths,
///   sharing free slots between threads and growing the pool, take a mutex: pm/allocator.hpp).
/// - **Threads:** up to pmds::max_threads (128) threads at once; more throw TooManyThreads.
/// - **A full pool:** an insert that needs a new node throws PoolFull and changes nothing;
///   remove, contains and get need none.
/// - **Bad input:** keys 0 and 2^64-1 (reserved for sentinels) throw ReservedKey in every
///   operation and change nothing; every value is allowed.
/// - **A bad pool:** opening a pool that holds another structure throws PoolError
///   (layout_mismatch), a bucket count outside [1, 2^40] in its root PoolError (corrupted);
///   creating one in a pool that holds a structure throws PoolError (bad_argument).
///
/// Zuriel et al. §3 (a table of durable lists; the link-free list §3, SOFT §4). Registered as
/// "hash/linkfree" (`LinkFreeHashSet`: pmds::DurableHashMap) and "hash/soft" (pmds::SoftHashSet).
template <class L>
class HashSet {
 public:
  // Durable linearizability (Zuriel et al. §1); the registry reads it (registry::criterion_of).
  static constexpr Criterion criterion = Criterion::durable;
  using BucketList = L;
  static constexpr std::size_t default_bucket_count = std::size_t{1} << 20;  // Zuriel et al. §6

  // Creates an empty set with `bucket_count` buckets in `pool`, which must hold no structure.
  // The pool must outlive the set.
  HashSet(CreateTag, pm::Pool& pool, std::size_t bucket_count = default_bucket_count)
      : pool_(pool), shared_(pool) {
    if (bucket_count == 0 || bucket_count > (std::size_t{1} << 40))
      throw PoolError(PoolErrc::bad_argument, std::string("pmds: ") + L::hash_name +
                                                  ": bucket count " + std::to_string(bucket_count) +
                                                  " is not in [1, 2^40]");
    init_buckets(bucket_count);
    detail::write_set_root(pool, L::hash_tag, bucket_count, L::hash_name);
  }

  // Opens the set a pool holds and recovers it (Zuriel et al. §3.5, §4.6): after a crash or a clean
  // close alike, the buckets are rebuilt from the durable areas.
  HashSet(OpenTag, pm::Pool& pool) : pool_(pool), shared_(pool) {
    const std::uint64_t n = detail::read_set_root(pool, L::hash_tag, L::hash_name);
    if (n == 0 || n > (std::uint64_t{1} << 40))
      throw PoolError(PoolErrc::corrupted, std::string("pmds: pool '") + pool.path() +
                                               "': " + L::hash_name + " with bucket count " +
                                               std::to_string(n));
    init_buckets(static_cast<std::size_t>(n));
    recovery_ = L::recover(shared_, std::span<typename L::Bucket>(buckets_.get(), bucket_count_),
                           [this](Key k) { return index_of(k); });
  }

  HashSet(const HashSet&) = delete;
  HashSet& operator=(const HashSet&) = delete;

  bool insert(Key k, Value v) {
    check_key(k);
    return L::insert(shared_, bucket(k), k, v);
  }
  bool remove(Key k) {
    check_key(k);
    return L::remove(shared_, bucket(k), k);
  }
  bool contains(Key k) {
    check_key(k);
    return L::contains(shared_, bucket(k), k);
  }
  std::optional<Value> get(Key k) {
    check_key(k);
    return L::get(shared_, bucket(k), k);
  }

  // Quiescent: f(Key, Value) for every key (bucket by bucket, each in key order).
  template <class F>
  void for_each(F&& f) {
    for (std::size_t i = 0; i < bucket_count_; ++i) L::for_each(shared_, buckets_[i], f);
  }
  // Quiescent: the number of keys.
  std::size_t size() {
    std::size_t n = 0;
    for_each([&n](Key, Value) { ++n; });
    return n;
  }

  // Quiescent: runs every pending reclamation now (slots of removed nodes become allocatable).
  void drain() { L::drain(shared_); }

  std::size_t bucket_count() const { return bucket_count_; }
  // What the recovery at open found (all zero for a created set).
  const RecoveryStats& recovery_stats() const { return recovery_; }
  pm::Pool& pool() const { return pool_; }
  typename L::Shared& shared() { return shared_; }

  // The bucket of a key (bucket_index.hpp: the same mapping as every pmds hash table).
  std::size_t index_of(Key k) const { return index_(k); }

 private:
  void init_buckets(std::size_t n) {
    bucket_count_ = n;
    index_ = BucketIndex(n);
    buckets_ = make_chunk_array<typename L::Bucket>(n);
  }
  typename L::Bucket& bucket(Key k) { return buckets_[index_of(k)]; }

  pm::Pool& pool_;
  typename L::Shared shared_;
  std::size_t bucket_count_ = 0;
  BucketIndex index_;
  ChunkArray<typename L::Bucket> buckets_;  // on huge pages (huge_pages.hpp)
  RecoveryStats recovery_;
};

}  // namespace pmds::linkfree_soft

// pmds::linkfree_soft::ListSet<L> — Zuriel et al.'s durable sorted list: one bucket list (the
// interface of linkfree_soft/hash_set.hpp) on its own in a pool. One template for both techniques:
//   ListSet<LinkFreeBucketList<>>  = LinkFreeList<> = "list/linkfree"
//   (linkfree_soft/linkfree_list.hpp) ListSet<SoftBucketList<>>      = SoftList<>     = "list/soft"
//   (linkfree_soft/soft_list.hpp)
// Besides the bucket-list interface, L names the list's root tag and registry name:
//   static constexpr std::uint64_t L::list_tag;   static constexpr const char* L::list_name;
// The pool's root table holds the tag and the parameter 1 (one bucket), as every link-free and
// SOFT set does (linkfree_soft/detail/set_root.hpp); the list itself is rebuilt from the durable
// areas at open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "pmds/interfaces.hpp"
#include "pmds/linkfree_soft/detail/set_root.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::linkfree_soft {

template <class L>
class ListSet {
 public:
  // Durable linearizability (Zuriel et al. §1); the registry reads it (registry::criterion_of).
  static constexpr Criterion criterion = Criterion::durable;
  using BucketList = L;
  static constexpr std::uint64_t tag = L::list_tag;
  static constexpr const char* name = L::list_name;

  // Creates an empty list in `pool`, which must hold no structure and must outlive the list.
  ListSet(CreateTag, pm::Pool& pool) : pool_(pool), shared_(pool) {
    detail::write_set_root(pool, tag, 1, name);
  }

  // Opens the list a pool holds and recovers it from the durable areas (Zuriel et al. §3.5, §4.6),
  // after a crash or a clean close alike.
  ListSet(OpenTag, pm::Pool& pool) : pool_(pool), shared_(pool) {
    detail::read_set_root(pool, tag, name);
    recovery_ = L::recover(shared_, std::span<typename L::Bucket>(&bucket_, 1),
                           [](Key) { return std::size_t{0}; });
  }

  ListSet(const ListSet&) = delete;
  ListSet& operator=(const ListSet&) = delete;

  // A set with an 8-byte value per key; insert does not update an existing key. Reserved keys
  // throw ReservedKey.
  bool insert(Key k, Value v) {
    check_key(k);
    return L::insert(shared_, bucket_, k, v);
  }
  bool remove(Key k) {
    check_key(k);
    return L::remove(shared_, bucket_, k);
  }
  bool contains(Key k) {
    check_key(k);
    return L::contains(shared_, bucket_, k);
  }
  std::optional<Value> get(Key k) {
    check_key(k);
    return L::get(shared_, bucket_, k);
  }

  // Quiescent: f(key, value) for every key, in key order.
  template <class F>
  void for_each(F&& f) {
    L::for_each(shared_, bucket_, f);
  }
  // Quiescent: the number of keys.
  std::size_t size() {
    std::size_t n = 0;
    for_each([&n](Key, Value) { ++n; });
    return n;
  }

  // Quiescent: runs every pending reclamation now (slots of removed nodes become allocatable).
  void drain() { L::drain(shared_); }

  // What the recovery at open found (all zero for a created list).
  const RecoveryStats& recovery_stats() const { return recovery_; }
  pm::Pool& pool() const { return pool_; }
  typename L::Shared& shared() { return shared_; }

 private:
  pm::Pool& pool_;
  typename L::Shared shared_;  // destroyed after bucket_: retired nodes are freed last
  typename L::Bucket bucket_;
  RecoveryStats recovery_;
};

}  // namespace pmds::linkfree_soft

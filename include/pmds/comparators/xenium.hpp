// pmds — independent implementations of the transient twins' algorithms, from xenium (Debian
// libxenium-dev), registered as comparator entries (list/xenium, hash/xenium, queue/xenium) so
// that every suite shows each twin beside code pmds did not write. The twins are the
// denominators of every ratio pmds reports; these entries are how a reader checks that a twin is
// not slow (docs/ARCHITECTURE.md §6, "Independent comparators"; results/README.md, "twins/").
//
// Each adapter only translates pmds's interface (interfaces.hpp) to xenium's; the algorithm,
// its memory orders and its reclamation are xenium's own, with the reclaimer xenium's users
// would pick for these structures: generic_epoch_based, as the twins use epoch reclamation.
//   - list/xenium:  harris_michael_list_based_set over (key, value) pairs ordered by key;
//                   list/transient is algo::HarrisMichaelList<transient>.
//   - hash/xenium:  harris_michael_hash_map; hash/transient is algo::MichaelHashTable. xenium
//                   fixes the bucket count at compile time: 2^20 here, the twin's count at the
//                   default suite's --key-range 1048576 (bucket_count_for); std::hash of an
//                   integer is the identity, so there both map a key to the same bucket
//                   (bucket_index.hpp). At a smaller key range xenium's table has more buckets
//                   than the twin's (shorter chains, a larger bucket array): compare at 2^20.
//   - queue/xenium: michael_scott_queue; queue/transient is algo::MichaelScottQueue.
// Not registered: xenium's ramalhete_queue (and nikolaev_queue, absent from the Debian
// package) are not the algorithm of any twin, so they would not test a denominator.
#pragma once

#include <cassert>  // xenium's headers use assert without including it
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include <xenium/harris_michael_hash_map.hpp>
#include <xenium/harris_michael_list_based_set.hpp>
#include <xenium/michael_scott_queue.hpp>

#include "pmds/interfaces.hpp"
#include "pmds/reclaim/xenium_generic_epoch.hpp"

namespace pmds::comparators {

namespace xenium_detail {
// A traits type of our own: xenium's reclaimer state is static per instantiation, so these
// comparators do not share an epoch with reclaim/xenium_epoch.hpp's domain.
struct Traits : xenium::reclamation::generic_epoch_based_traits<> {};
using Reclaimer = xenium::reclamation::generic_epoch_based<Traits>;
// No region_guard around an operation (xenium's way to make one critical region of a
// traversal's guard_ptrs, like the twins' one pin per operation): tried, xenium ran slower, not
// faster (xenium/twin at 1 thread, 21 rounds: hash 0.72 against 0.80 without, queue 0.73 against
// 0.99, list 0.59 against 0.57), so the comparators use xenium's plain guard_ptrs.

using Entry = std::pair<Key, Value>;
struct ByKey {
  bool operator()(const Entry& a, const Entry& b) const { return a.first < b.first; }
};
}  // namespace xenium_detail

// xenium::harris_michael_list_based_set as a map: an element is (key, value), ordered and
// compared by key alone, so a probe (key, 0) finds the key's element.
class XeniumList {
  using Entry = xenium_detail::Entry;
  using Set =
      xenium::harris_michael_list_based_set<Entry,
                                            xenium::policy::reclaimer<xenium_detail::Reclaimer>,
                                            xenium::policy::compare<xenium_detail::ByKey>>;

 public:
  static constexpr const char* name = "list";
  static constexpr Criterion criterion = Criterion::none;  // DRAM only

  bool insert(Key key, Value value) {
    check_key(key);
    return set_.emplace(key, value);
  }
  bool remove(Key key) {
    check_key(key);
    return set_.erase(Entry{key, 0});
  }
  bool contains(Key key) {
    check_key(key);
    return set_.contains(Entry{key, 0});
  }
  std::optional<Value> get(Key key) {
    check_key(key);
    auto it = set_.find(Entry{key, 0});
    if (it == set_.end()) return std::nullopt;
    return it->second;
  }

 private:
  Set set_;
};

// xenium::harris_michael_hash_map with 2^20 buckets (see the header comment): 8 MiB of bucket
// heads, so it lives on the heap.
class XeniumHash {
  using Map = xenium::harris_michael_hash_map<Key, Value,
                                              xenium::policy::reclaimer<xenium_detail::Reclaimer>,
                                              xenium::policy::buckets<std::size_t{1} << 20>>;

 public:
  static constexpr const char* name = "hash";
  static constexpr Criterion criterion = Criterion::none;  // DRAM only

  bool insert(Key key, Value value) {
    check_key(key);
    return map_->emplace(key, value);
  }
  bool remove(Key key) {
    check_key(key);
    return map_->erase(key);
  }
  bool contains(Key key) {
    check_key(key);
    return map_->contains(key);
  }
  std::optional<Value> get(Key key) {
    check_key(key);
    auto it = map_->find(key);
    if (it == map_->end()) return std::nullopt;
    return it->second;
  }

 private:
  std::unique_ptr<Map> map_ = std::make_unique<Map>();
};

class XeniumQueue {
  using Queue =
      xenium::michael_scott_queue<Value, xenium::policy::reclaimer<xenium_detail::Reclaimer>>;

 public:
  static constexpr const char* name = "queue";
  static constexpr Criterion criterion = Criterion::none;  // DRAM only

  void enqueue(Value v) { queue_.push(v); }
  std::optional<Value> dequeue() {
    Value v;
    if (!queue_.try_pop(v)) return std::nullopt;
    return v;
  }

 private:
  Queue queue_;
};

}  // namespace pmds::comparators

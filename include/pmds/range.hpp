/// \file
/// pmds::Range — `for (const auto& [k, v] : map.range(from, to))` over an ordered map, written
/// once over the map's `scan(from, max_count, visit)`.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace pmds {

/// The keys of an ordered map in [from, to) (or from `from` to the end), ascending, with their
/// values: what `map.range(from, to)` returns. Iterate it with a range-for; each element is a
/// `std::pair<K, V>` of owned copies.
///
/// - **Weakly consistent, safe while other threads write:** each key comes at most once and in
///   ascending order; a key present for the whole iteration comes; a key inserted or removed
///   meanwhile may come or not; each value is one the key held during the iteration. It is not
///   a snapshot of the map at one instant (a snapshot would have to stop the writers).
/// - **Cost:** the elements are read in batches of `batch_size` through the map's own scan (one
///   search of the map per batch, its epoch pinned only during the batch, so a slow loop body
///   holds back no reclamation).
/// - **Lifetime:** the map must outlive the range and its iterators (an iterator does not need
///   the range).
template <class Map, class K, class V>
class Range {
 public:
  using value_type = std::pair<K, V>;
  static constexpr std::size_t batch_size = 64;

  /// An input iterator; compares equal to `end()` once past the last element. It holds its own
  /// batch and bounds: it stays valid after the Range that made it is gone (not the map).
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::pair<K, V>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;

    iterator() = default;
    reference operator*() const { return batch_[pos_]; }
    pointer operator->() const { return &batch_[pos_]; }
    iterator& operator++() {
      if (++pos_ == batch_.size()) {
        const K last = std::move(batch_.back().first);
        fill(last, false);
      }
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& i, std::default_sentinel_t) { return i.map_ == nullptr; }

   private:
    friend class Range;
    iterator(Map* map, const K& from, const std::optional<K>& to) : map_(map), to_(to) {
      fill(from, true);
    }

    // The next batch: the first from `from` itself, each later one from the last key returned
    // (which the scan visits again if it is still there, and is dropped). Continuing from the
    // last key rather than its successor needs no successor function (a byte string's would be
    // one byte longer, past a map's key limit).
    void fill(const K& from, bool first) {
      pos_ = 0;
      batch_.clear();
      if (exhausted_) {
        map_ = nullptr;
        return;
      }
      const std::size_t want = first ? batch_size : batch_size + 1;
      const std::size_t visited = map_->scan(view(from), want, [&](const auto& k, const auto& v) {
        if (exhausted_ || (!first && equal(k, from))) return;
        if (to_ && !less(k, *to_)) {
          exhausted_ = true;  // the rest of the scan is past `to`
          return;
        }
        batch_.emplace_back(K(k), V(v));
      });
      if (visited < want) exhausted_ = true;  // the scan reached the map's end
      if (batch_.empty()) map_ = nullptr;
    }

    static auto view(const K& k) {
      if constexpr (std::is_same_v<K, std::string>)
        return std::string_view(k);
      else
        return k;
    }
    // a == b and a < b, a as the scan passes it (a string_view for a byte-string map).
    template <class A>
    static bool equal(const A& a, const K& b) {
      return view(b) == a;
    }
    template <class A>
    static bool less(const A& a, const K& b) {
      return a < view(b);
    }

    Map* map_ = nullptr;  // null: past the end
    std::optional<K> to_;
    std::vector<value_type> batch_;
    std::size_t pos_ = 0;
    bool exhausted_ = false;  // no batch after this one
  };

  /// Keys in [from, to).
  Range(Map& map, K from, K to) : map_(&map), from_(std::move(from)), to_(std::move(to)) {}
  /// Keys from `from` to the end.
  Range(Map& map, K from) : map_(&map), from_(std::move(from)) {}

  /// Starts the iteration: reads the first batch.
  iterator begin() const { return iterator(map_, from_, to_); }
  std::default_sentinel_t end() const { return {}; }

 private:
  Map* map_;
  K from_;
  std::optional<K> to_;
};

}  // namespace pmds

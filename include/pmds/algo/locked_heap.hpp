// pmds — a lock-protected sequential binary min-heap: the baseline for Fatourou et al.'s heaps
// (PBheap and friends, in combining/), which compare a combining heap against one lock around
// a sequential heap.
//
// A class template over the memory policy like every algo/ structure, so the registry names it
// "heap/transient", but only for transient policies: the Izraelevitz transformation makes
// lock-free structures durable, not lock-based ones (a crash in the middle of a sift leaves a
// broken heap that no trace can repair), so the durable heaps are Fatourou et al.'s, not this
// file's. Keys may repeat; reserved keys are rejected like everywhere else.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::algo {

template <class P>
requires MemoryPolicy<P>
class LockedBinaryHeap {
  static_assert(!P::durable,
                "LockedBinaryHeap is the transient baseline; durable heaps are in combining/ "
                "(a lock-based heap is not made durable by the Izraelevitz transformation)");

 public:
  using Policy = P;
  static constexpr const char* name = "heap";

  explicit LockedBinaryHeap(std::size_t capacity_hint = 0) { keys_.reserve(capacity_hint); }

  void insert(Key key) {
    check_key(key);
    std::lock_guard lock(mutex_);
    keys_.push_back(key);
    sift_up(keys_.size() - 1);
  }

  std::optional<Key> delete_min() {
    std::lock_guard lock(mutex_);
    if (keys_.empty()) return std::nullopt;
    const Key min = keys_.front();
    keys_.front() = keys_.back();
    keys_.pop_back();
    if (!keys_.empty()) sift_down(0);
    return min;
  }

  std::optional<Key> get_min() {
    std::lock_guard lock(mutex_);
    if (keys_.empty()) return std::nullopt;
    return keys_.front();
  }

  std::size_t size() {
    std::lock_guard lock(mutex_);
    return keys_.size();
  }

  // Quiescent: f(key) for every key, in heap-array order.
  template <class F>
  void for_each(F&& f) const {
    for (Key k : keys_) f(k);
  }

 private:
  void sift_up(std::size_t i) {
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (keys_[parent] <= keys_[i]) return;
      std::swap(keys_[parent], keys_[i]);
      i = parent;
    }
  }
  void sift_down(std::size_t i) {
    const std::size_t n = keys_.size();
    for (;;) {
      const std::size_t left = 2 * i + 1, right = left + 1;
      std::size_t smallest = i;
      if (left < n && keys_[left] < keys_[smallest]) smallest = left;
      if (right < n && keys_[right] < keys_[smallest]) smallest = right;
      if (smallest == i) return;
      std::swap(keys_[i], keys_[smallest]);
      i = smallest;
    }
  }

  std::mutex mutex_;
  std::vector<Key> keys_;
};

}  // namespace pmds::algo

// pmds — stable small thread ids.
//
// Per-thread durable areas, descriptors and announce arrays are indexed by a small id in
// [0, max_threads). A thread gets the smallest free id on its first call of thread_id() and
// gives it back when it exits, so ids are reused and stay dense. More than max_threads threads
// at once is an error (TooManyThreads), never a silent overflow of a per-thread array.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pmds/error.hpp"

namespace pmds {

inline constexpr std::size_t max_threads = 128;

namespace detail {

class ThreadIdTable {
 public:
  // Takes the smallest free id; throws TooManyThreads when all are taken.
  std::size_t acquire() {
    for (std::size_t word = 0; word < kWords; ++word) {
      std::uint64_t bits = used_[word].load(std::memory_order_relaxed);
      while (~bits != 0) {
        const int bit = __builtin_ctzll(~bits);
        if (used_[word].compare_exchange_weak(bits, bits | (std::uint64_t{1} << bit),
                                              std::memory_order_acq_rel)) {
          return word * 64 + static_cast<std::size_t>(bit);
        }
      }
    }
    throw TooManyThreads("pmds: more than " + std::to_string(max_threads) +
                         " threads use pmds at once (pmds::max_threads)");
  }

  void release(std::size_t id) {
    used_[id / 64].fetch_and(~(std::uint64_t{1} << (id % 64)), std::memory_order_acq_rel);
  }

  std::size_t in_use() const {
    std::size_t n = 0;
    for (const auto& w : used_) n += static_cast<std::size_t>(__builtin_popcountll(w.load()));
    return n;
  }

 private:
  static constexpr std::size_t kWords = max_threads / 64;
  std::atomic<std::uint64_t> used_[kWords] = {};
};

inline ThreadIdTable thread_id_table;

struct ThreadIdHolder {
  static constexpr std::size_t kNone = ~std::size_t{0};
  std::size_t id = kNone;
  ~ThreadIdHolder() {
    if (id != kNone) thread_id_table.release(id);
  }
};

inline thread_local ThreadIdHolder thread_id_holder;

}  // namespace detail

// This thread's id in [0, max_threads). Throws TooManyThreads if none is free.
inline std::size_t thread_id() {
  auto& holder = detail::thread_id_holder;
  if (holder.id == detail::ThreadIdHolder::kNone) holder.id = detail::thread_id_table.acquire();
  return holder.id;
}

// This thread's id if it has taken one, else `fallback`; never takes one (a background thread
// that only advances an epoch need not occupy a slot).
inline std::size_t thread_id_or(std::size_t fallback) {
  const std::size_t id = detail::thread_id_holder.id;
  return id == detail::ThreadIdHolder::kNone ? fallback : id;
}

// Number of ids currently held by live threads.
inline std::size_t threads_in_use() {
  return detail::thread_id_table.in_use();
}

}  // namespace pmds

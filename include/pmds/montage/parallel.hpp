// pmds::montage — the parallel steps of recovery (nbMontage §3.4: recovery "can be parallelized";
// Options::recovery_threads, `pmds bench --recovery-threads`): a loop split into ranges over N
// threads, and a sort built on it. A structure's rebuild uses them (reading its payloads'
// keys and values, sorting them, making and linking its DRAM nodes); EpochSystem::recover()'s
// scan of the pool stays on one thread: with 1M payloads it took 9-15 ms of an open's 115-200 ms.
//
// Written by hand rather than with std::sort(std::execution::par, ...): libstdc++'s parallel
// algorithms need Intel TBB at link time, which would make every program that includes this
// header-only library link TBB for one sort at open. A sort of N ranges and N-1 merges is
// enough for the few recovery threads this is for.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace pmds::montage {

// f(begin, end) on `threads` contiguous ranges of [0, n), the first on the calling thread, the
// others on threads of their own; returns when all are done. An exception thrown by any range
// is rethrown here (the first one, by range order).
template <class F>
void in_parallel(std::size_t threads, std::size_t n, F&& f) {
  threads = std::max<std::size_t>(1, std::min(threads, n));
  if (threads == 1) {
    f(std::size_t{0}, n);
    return;
  }
  std::vector<std::exception_ptr> errors(threads);
  auto run = [&](std::size_t i) {
    try {
      f(n * i / threads, n * (i + 1) / threads);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  for (std::size_t i = 1; i < threads; ++i) workers.emplace_back(run, i);
  run(0);
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Sorts v by `less` over `threads` threads: each sorts its range, then neighbouring ranges are
// merged pairwise, the merges of one round in parallel too.
template <class T, class Less>
void parallel_sort(std::vector<T>& v, Less less, std::size_t threads) {
  threads = std::max<std::size_t>(1, std::min(threads, v.size()));
  std::vector<std::size_t> bounds(threads + 1);
  for (std::size_t i = 0; i <= threads; ++i) bounds[i] = v.size() * i / threads;
  in_parallel(threads, threads, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r)
      std::sort(v.begin() + bounds[r], v.begin() + bounds[r + 1], less);
  });
  while (bounds.size() > 2) {
    std::vector<std::size_t> merged;
    const std::size_t pairs = (bounds.size() - 1) / 2;
    in_parallel(pairs, pairs, [&](std::size_t first, std::size_t last) {
      for (std::size_t p = first; p < last; ++p)
        std::inplace_merge(v.begin() + bounds[2 * p], v.begin() + bounds[2 * p + 1],
                           v.begin() + bounds[2 * p + 2], less);
    });
    for (std::size_t i = 0; i < bounds.size(); i += 2) merged.push_back(bounds[i]);
    if (merged.back() != bounds.back()) merged.push_back(bounds.back());
    bounds = std::move(merged);
  }
}

}  // namespace pmds::montage

// pmds bench — one timed run of a workload on a structure, and its prefill.
//
// A timed run (one repetition):
//   - workers start, register (thread ids), and wait;
//   - the coordinator opens the warm-up phase, sleeps --warmup, opens the measured phase and
//     notes the time, sleeps --duration, closes it and notes the time again;
//   - each worker counts the operations it completes in the measured phase per type (calls and
//     successes), and reads its own pm::thread_counters() when it enters and leaves that phase;
//     the coordinator sums them, and adds what the structure's background thread counted in
//     the meantime (pm::background_counters). Throughput = measured operations / measured wall
//     time.
// The workload bodies are compiled against the structure's concrete type (nothing virtual per
// operation); bench/target.hpp hands them out per registry entry.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "pmds/bench/progress.hpp"
#include "pmds/bench/random.hpp"
#include "pmds/bench/workload.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::bench {

// What one timed run needs (one structure × thread count × repetition).
struct RunParams {
  Workload workload = Workload::set;
  unsigned threads = 1;
  double warmup_s = 0.2;
  double duration_s = 1.0;
  std::uint64_t key_range = 1024;
  std::uint64_t prefill = 0;  // elements to put in before the timed run
  unsigned reads_pct = 90;
  unsigned local_work = 512;
  unsigned scan_length = 100;
  const KeyChooser* keys = nullptr;  // the run's key distribution (keyed workloads)
  std::uint64_t seed = 1;
  std::uint64_t rep = 0;
  Progress* progress = nullptr;  // may be null
  std::string progress_label;
};

struct RepResult {
  OpCounts ops;         // the measured phase: what throughput and the mix are computed from
  OpCounts warmup_ops;  // the warm-up phase (reported separately, so tests can account for
                        // every call the structure saw)
  pm::Counters counters;
  // readwhilewriting: the writer's operations in the measured phase, apart from `ops` (a faster
  // writer leaves the readers less of the memory system, so a read rate alone says half of it).
  OpCounts writer_ops;
  double seconds = 0;
  double mops() const { return seconds > 0 ? static_cast<double>(ops.total()) / seconds / 1e6 : 0; }
};

// ---------------------------------------------------------------------------------------------
// Workload bodies: one call does one operation (or one pair), counting it.

namespace detail {

// A local work loop of n dummy iterations (Fatourou et al. §6). An iteration increments a volatile
// counter (a load and a store, chained through store-to-load forwarding: about 5 cycles), as the
// benchmarks of Fatourou et al.'s artifact count theirs, so --local-work N is the work their -w N
// is and a side-by-side run compares the operations, not the loops.
inline void local_work(std::uint64_t n) {
  volatile std::uint64_t counter = 0;
  for (std::uint64_t i = 0; i < n; ++i) counter = counter + 1;
}

template <class T>
bool read_key(T& s, Key k) {
  if constexpr (Map<T>)
    return s.get(k).has_value();
  else
    return s.contains(k);
}

// The set mix: reads %, the rest split evenly between insert and remove. Draws in 1/200ths so
// an odd remainder (e.g. 5% updates) still splits exactly in two.
template <class T>
struct SetMix {
  T& s;
  const KeyChooser& keys;
  std::uint64_t read_cut, insert_cut;
  SetMix(T& s_, const RunParams& p, unsigned)
      : s(s_),
        keys(*p.keys),
        read_cut(2ull * p.reads_pct),
        insert_cut(read_cut + (100 - p.reads_pct)) {}
  void operator()(Rng& rng, OpCounts& c) {
    const std::uint64_t r = rng.below(200);
    const Key k = keys(rng);
    if (r < read_cut)
      c.add(Op::read, read_key(s, k));
    else if (r < insert_cut)
      c.add(Op::insert, s.insert(k, k));
    else
      c.add(Op::remove, s.remove(k));
  }
};

// YCSB A/B/C: reads % get, the rest put (an update: success = the key was already there).
template <class T>
struct YcsbReadUpdate {
  T& s;
  const KeyChooser& keys;
  std::uint64_t reads;
  YcsbReadUpdate(T& s_, const RunParams& p, unsigned) : s(s_), keys(*p.keys), reads(p.reads_pct) {}
  void operator()(Rng& rng, OpCounts& c) {
    const bool is_read = rng.below(100) < reads;
    const Key k = keys(rng);
    if (is_read) {
      c.add(Op::read, read_key(s, k));
    } else {
      if constexpr (UpdatableMap<T>) c.add(Op::update, !s.put(k, k ^ rng.next()));
    }
  }
};

// YCSB E: 95% scans of 1..scan_length keys from a chosen start; 5% inserts of new keys above
// the loaded range (thread i inserts key_range + 1 + i, + threads, + 2*threads, ...).
template <class T>
struct YcsbScanInsert {
  T& s;
  const KeyChooser& keys;
  std::uint64_t scan_length, next_key, stride;
  YcsbScanInsert(T& s_, const RunParams& p, unsigned index)
      : s(s_),
        keys(*p.keys),
        scan_length(p.scan_length),
        next_key(p.key_range + 1 + index),
        stride(p.threads) {}
  void operator()(Rng& rng, OpCounts& c) {
    if (rng.below(100) < 95) {
      const Key from = keys(rng);
      const std::uint64_t n = 1 + rng.below(scan_length);
      std::uint64_t visited = 0;
      if constexpr (Scannable<T>) visited = s.scan(from, n, [](Key, Value) {});
      c.calls[static_cast<std::size_t>(Op::scan)] += 1;
      c.successes[static_cast<std::size_t>(Op::scan)] += visited;
    } else {
      const Key k = next_key;
      next_key += stride;
      if constexpr (Set<T>) c.add(Op::insert, s.insert(k, k));
    }
  }
};

// db_bench's shapes (workload.hpp): one operation of the shape per call; under readwhilewriting
// the thread after the readers (index == threads) is the writer. deleterandom removes the loaded
// keys in a random order (a permutation of [1, key_range], each thread its own share), so every
// remove finds its key, whatever the contender's speed: its warm-up gets keys instead of removing
// them, and the measurement ends when a thread's share runs out (exhausted(); run_timed), as
// db_bench's deleterandom ends after its removes. (A run that went on removing absent keys
// measured cheap misses: at 2 threads, a 1M-key map fast enough to finish its shares in 0.4 s
// reported 50x its real removal rate.)
template <class T>
struct DbBenchShape {
  T& s;
  const KeyChooser& keys;
  Workload shape;
  Scrambler order;
  std::uint64_t next_delete, stride;
  bool measuring = false;
  DbBenchShape(T& s_, const RunParams& p, unsigned index)
      : s(s_),
        keys(*p.keys),
        shape(p.workload == Workload::readwhilewriting && index == p.threads ? Workload::overwrite
                                                                             : p.workload),
        order(p.key_range, p.seed ^ 0xDE1E7Eull),
        next_delete(index),
        stride(p.threads) {}
  void operator()(Rng& rng, OpCounts& c) {
    switch (shape) {
      case Workload::fillrandom:
      case Workload::overwrite:
        if constexpr (UpdatableMap<T>) {
          const Key k = keys(rng);
          c.add(Op::update, !s.put(k, k ^ rng.next()));
        }
        break;
      case Workload::deleterandom:
        if (measuring) {
          const Key k = 1 + order(next_delete % order.size());
          next_delete += stride;
          c.add(Op::remove, s.remove(k));
          break;
        }
        [[fallthrough]];  // its warm-up gets
      default:
        c.add(Op::read, read_key(s, keys(rng)));
    }
  }
  void start_measuring() { measuring = true; }
  bool exhausted() const { return shape == Workload::deleterandom && next_delete >= order.size(); }
};

// Pairs from empty: enqueue then dequeue (push then pop), local work after each operation.
// Values are unique per thread and never 0.
template <class T>
struct Pairs {
  T& s;
  std::uint64_t max_work, next_value;
  Pairs(T& s_, const RunParams& p, unsigned index)
      : s(s_), max_work(p.local_work), next_value((std::uint64_t{index} + 1) << 40) {}
  void operator()(Rng& rng, OpCounts& c) {
    const Value v = next_value++;
    if constexpr (Queue<T>) {
      s.enqueue(v);
      c.add(Op::enqueue, true);
      local_work(rng.below(max_work + 1));
      c.add(Op::dequeue, s.dequeue().has_value());
    } else if constexpr (Stack<T>) {
      s.push(v);
      c.add(Op::push, true);
      local_work(rng.below(max_work + 1));
      c.add(Op::pop, s.pop().has_value());
    }
    local_work(rng.below(max_work + 1));
  }
};

// Heap: an insert then a delete-min (equal numbers, so the size stays at the prefill), local
// work after each.
template <class T>
struct HeapPairs {
  T& s;
  const KeyChooser& keys;
  std::uint64_t max_work;
  HeapPairs(T& s_, const RunParams& p, unsigned) : s(s_), keys(*p.keys), max_work(p.local_work) {}
  void operator()(Rng& rng, OpCounts& c) {
    if constexpr (PriorityQueue<T>) {
      s.insert(keys(rng));
      c.add(Op::pq_insert, true);
      local_work(rng.below(max_work + 1));
      c.add(Op::delete_min, s.delete_min().has_value());
      local_work(rng.below(max_work + 1));
    }
  }
};

// AtomicFloat (Fatourou et al. §6): fetch_multiply with factors 1.000001 and 0.999999 in turn, and
// local work between operations. The value changes at every operation and never comes back to
// an earlier one (their product is not 1 in floating point), yet stays near its start for any
// run length. A value that cycled (factors 2 and 0.5) would repeat every second round, and
// PBcomb, which writes back only the record lines that changed, would skip the state's line:
// a benchmark of a write-back no real workload skips.
template <class T>
struct AtomicFloat {
  T& s;
  std::uint64_t max_work;
  bool up_next = true;
  AtomicFloat(T& s_, const RunParams& p, unsigned) : s(s_), max_work(p.local_work) {}
  void operator()(Rng& rng, OpCounts& c) {
    if constexpr (Register<T>) {
      s.fetch_multiply(up_next ? 1.000001 : 0.999999);
      up_next = !up_next;
      c.add(Op::multiply, true);
      local_work(rng.below(max_work + 1));
    }
  }
};

enum class Phase : int { starting, warmup, measure, stop };

struct alignas(64) WorkerSlot {
  OpCounts ops, warmup_ops;
  pm::Counters counters;
};

inline void sleep_for(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// Runs body objects made by make(index) on p.threads threads through the phases (and, under
// readwhilewriting, one more: the writer, whose operations and counters are left out). A body
// with start_measuring() is told when the measurement starts; one with exhausted() ends the
// measurement for every thread when it has no operation left to run (DbBenchShape's
// deleterandom), the measured time then ending there.
template <class Body, class T>
RepResult run_timed(T& s, const RunParams& p) {
  using clock = std::chrono::steady_clock;
  std::atomic<int> phase{static_cast<int>(Phase::starting)};
  std::atomic<clock::rep> ended_early{0};  // when a body ran out, since the clock's epoch
  std::atomic<unsigned> ready{0};
  std::atomic<bool> failed{false};
  const unsigned threads = p.threads + (p.workload == Workload::readwhilewriting ? 1 : 0);
  std::vector<WorkerSlot> slots(threads);
  std::vector<std::exception_ptr> errors(threads);
  const auto in = [&](Phase ph) {
    return phase.load(std::memory_order_relaxed) == static_cast<int>(ph);
  };

  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      try {
        (void)pmds::thread_id();  // take an id before timing starts
        Rng rng(thread_seed(p.seed, p.rep * 1024 + i));
        Body body(s, p, i);
        OpCounts warm, measured;
        ready.fetch_add(1);
        while (in(Phase::starting)) std::this_thread::yield();
        while (in(Phase::warmup)) body(rng, warm);
        if constexpr (requires { body.start_measuring(); }) body.start_measuring();
        const pm::Counters before = pm::thread_counters();
        while (in(Phase::measure)) {
          if constexpr (requires { body.exhausted(); }) {
            if (body.exhausted()) {
              const clock::rep now = clock::now().time_since_epoch().count();
              int measuring = static_cast<int>(Phase::measure);
              if (phase.compare_exchange_strong(measuring, static_cast<int>(Phase::stop)))
                ended_early.store(now);
              break;
            }
          }
          body(rng, measured);
        }
        slots[i].counters = pm::thread_counters() - before;
        slots[i].ops = measured;
        slots[i].warmup_ops = warm;
      } catch (...) {
        errors[i] = std::current_exception();
        failed.store(true);
        ready.fetch_add(1);
      }
    });
  }

  while (ready.load() < threads) std::this_thread::yield();
  // Sleeps in slices so a worker's failure or an early end ends the phase and the progress line
  // moves.
  const auto wait = [&](double seconds, const char* what, Phase ph) {
    const auto end = clock::now() + std::chrono::duration<double>(seconds);
    for (auto now = clock::now(); now < end && !failed.load() && in(ph); now = clock::now()) {
      if (p.progress != nullptr) {
        const double left = std::chrono::duration<double>(end - now).count();
        p.progress->update(p.progress_label + "  " + what + " " + format_seconds(seconds - left) +
                           "/" + format_seconds(seconds) + " s");
      }
      sleep_for(std::min(0.1, std::chrono::duration<double>(end - now).count()));
    }
  };
  phase.store(static_cast<int>(Phase::warmup));
  wait(p.warmup_s, "warm-up", Phase::warmup);
  const auto t0 = clock::now();
  const pm::Counters background_before = pm::background_counters.read();
  phase.store(static_cast<int>(Phase::measure));
  wait(p.duration_s, "measuring", Phase::measure);
  phase.store(static_cast<int>(Phase::stop));
  auto t1 = clock::now();
  const pm::Counters background = pm::background_counters.read() - background_before;
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (const clock::rep early = ended_early.load(); early != 0)
    t1 = clock::time_point(clock::duration(early));

  RepResult r;
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  for (unsigned i = 0; i < p.threads; ++i) {
    const WorkerSlot& slot = slots[i];
    r.ops += slot.ops;
    r.warmup_ops += slot.warmup_ops;
    r.counters += slot.counters;
  }
  r.counters += background;  // the structure's epoch advancer, during the measured phase
  for (unsigned i = p.threads; i < threads; ++i) r.writer_ops += slots[i].ops;
  return r;
}

// Runs f(begin, end) over [0, n) split into chunks taken by `threads` threads.
template <class F>
void parallel_chunks(std::uint64_t n, unsigned threads, F&& f) {
  constexpr std::uint64_t chunk = 4096;
  std::atomic<std::uint64_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  const auto work = [&] {
    try {
      for (;;) {
        const std::uint64_t b = next.fetch_add(chunk);
        if (b >= n || failed.load()) return;
        f(b, std::min(n, b + chunk));
      }
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  for (unsigned i = 1; i < threads; ++i) helpers.emplace_back(work);
  work();
  for (auto& h : helpers) h.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace detail

// The prefill: puts `count` elements into a fresh structure and returns how many operations
// succeeded (counted, not assumed).
//   sets/maps: the keys 1 + Scrambler(i) for i in [0, count): distinct keys spread at random
//              over [1, key_range], so exactly `count` inserts are needed, even for a full
//              load (no coupon collecting); with several threads, chunks of i are shared out;
//   priority queues: `count` keys drawn uniformly (duplicates are fine in a heap);
//   queues and stacks: `count` distinct values (only the recovery measurement asks for any).
template <class T>
std::uint64_t prefill(T& s, std::uint64_t count, std::uint64_t key_range, std::uint64_t seed,
                      unsigned threads) {
  std::atomic<std::uint64_t> succeeded{0};
  if (count == 0) return 0;
  threads = std::max(1u, std::min(threads, std::max(1u, std::thread::hardware_concurrency())));
  if constexpr (Set<T>) {
    const Scrambler order(key_range, seed ^ 0x9F1Eull);
    detail::parallel_chunks(count, threads, [&](std::uint64_t b, std::uint64_t e) {
      std::uint64_t ok = 0;
      for (std::uint64_t i = b; i < e; ++i) {
        const Key k = 1 + order(i);
        ok += s.insert(k, k) ? 1 : 0;
      }
      succeeded.fetch_add(ok);
    });
  } else if constexpr (PriorityQueue<T>) {
    detail::parallel_chunks(count, threads, [&](std::uint64_t b, std::uint64_t e) {
      Rng rng(thread_seed(seed ^ 0x4EA9ull, b));
      for (std::uint64_t i = b; i < e; ++i) s.insert(1 + rng.below(key_range));
      succeeded.fetch_add(e - b);
    });
  } else if constexpr (Queue<T> || Stack<T>) {
    detail::parallel_chunks(count, threads, [&](std::uint64_t b, std::uint64_t e) {
      for (std::uint64_t i = b; i < e; ++i) {
        if constexpr (Queue<T>)
          s.enqueue(i + 1);
        else
          s.push(i + 1);
      }
      succeeded.fetch_add(e - b);
    });
  }
  return succeeded.load();
}

// The number of elements a structure holds after a run: its prefill plus the net effect of
// the operations run (warm-up included), from their counted successes.
inline std::uint64_t elements_after(std::uint64_t prefilled, const RepResult& r) {
  OpCounts all = r.ops;
  all += r.warmup_ops;
  // A put that found its key absent inserted it (fillrandom); success = the key was there.
  const auto added = all.successes_of(Op::insert) + all.calls_of(Op::enqueue) +
                     all.calls_of(Op::push) + all.calls_of(Op::pq_insert) +
                     (all.calls_of(Op::update) - all.successes_of(Op::update));
  const auto taken = all.successes_of(Op::remove) + all.successes_of(Op::dequeue) +
                     all.successes_of(Op::pop) + all.successes_of(Op::delete_min);
  return prefilled + added - std::min(prefilled + added, taken);
}

// One timed run of p.workload on s (after its prefill).
template <class T>
RepResult run_workload(T& s, const RunParams& p) {
  switch (p.workload) {
    case Workload::set:
      if constexpr (Set<T>) return detail::run_timed<detail::SetMix<T>>(s, p);
      break;
    case Workload::ycsb_a:
    case Workload::ycsb_b:
    case Workload::ycsb_c:
      if constexpr (Set<T>) return detail::run_timed<detail::YcsbReadUpdate<T>>(s, p);
      break;
    case Workload::ycsb_e:
      if constexpr (Set<T>) return detail::run_timed<detail::YcsbScanInsert<T>>(s, p);
      break;
    case Workload::pairs:
      if constexpr (Queue<T> || Stack<T>) return detail::run_timed<detail::Pairs<T>>(s, p);
      break;
    case Workload::heap:
      if constexpr (PriorityQueue<T>) return detail::run_timed<detail::HeapPairs<T>>(s, p);
      break;
    case Workload::atomicfloat:
      if constexpr (Register<T>) return detail::run_timed<detail::AtomicFloat<T>>(s, p);
      break;
    case Workload::fillrandom:
    case Workload::readrandom:
    case Workload::overwrite:
    case Workload::readwhilewriting:
    case Workload::deleterandom:
      if constexpr (Map<T>) return detail::run_timed<detail::DbBenchShape<T>>(s, p);
      break;
  }
  throw Error(std::string("pmds: workload ") + to_string(p.workload) +
              " does not apply to this structure");
}

}  // namespace pmds::bench

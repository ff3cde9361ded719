// pmds bench — the benchmark runner: prefill, timed runs with N threads, and the per-structure
// loop over thread counts and repetitions that produces one Record per structure × thread count.
//
// Hot path: Functions<D>::run is compiled against the descriptor's concrete type D::type, so
// the worker loops call the structure's member functions directly; the registry hands out one
// instantiation per entry (registry::instantiate). Nothing virtual per operation.
//
// A timed run (one repetition):
//   - workers start, register (thread ids), and wait;
//   - the coordinator opens the warm-up phase, sleeps --warmup, opens the measured phase and
//     notes the time, sleeps --duration, closes it and notes the time again;
//   - each worker counts the operations it completes in the measured phase per type (calls and
//     successes), and reads its own pm::thread_counters() when it enters and leaves that phase;
//     the coordinator sums them. Throughput = measured operations / measured wall time.
// Each repetition uses a fresh structure, prefilled again, so repetitions are independent.
#pragma once

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "pmds/bench/progress.hpp"
#include "pmds/bench/random.hpp"
#include "pmds/bench/record.hpp"
#include "pmds/bench/workload.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/registry.hpp"

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
  double seconds = 0;
  double mops() const { return seconds > 0 ? static_cast<double>(ops.total()) / seconds / 1e6 : 0; }
};

// ---------------------------------------------------------------------------------------------
// Workload bodies: one call does one operation (or one pair), counting it.

namespace detail {

// A local work loop of n dummy iterations (seed 004 §6), which the compiler may not remove.
inline void local_work(std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) asm volatile("" ::: "memory");
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

// AtomicFloat (seed 004 §6): fetch_multiply with factors 2 and 0.5 in turn — exact in binary
// floating point, so the value stays within a factor 2^threads of its start however long it
// runs — and local work between operations.
template <class T>
struct AtomicFloat {
  T& s;
  std::uint64_t max_work;
  bool double_next = true;
  AtomicFloat(T& s_, const RunParams& p, unsigned) : s(s_), max_work(p.local_work) {}
  void operator()(Rng& rng, OpCounts& c) {
    if constexpr (Register<T>) {
      s.fetch_multiply(double_next ? 2.0 : 0.5);
      double_next = !double_next;
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

// Runs body objects made by make(index) on p.threads threads through the phases.
template <class Body, class T>
RepResult run_timed(T& s, const RunParams& p) {
  std::atomic<int> phase{static_cast<int>(Phase::starting)};
  std::atomic<unsigned> ready{0};
  std::atomic<bool> failed{false};
  std::vector<WorkerSlot> slots(p.threads);
  std::vector<std::exception_ptr> errors(p.threads);
  const auto in = [&](Phase ph) {
    return phase.load(std::memory_order_relaxed) == static_cast<int>(ph);
  };

  std::vector<std::thread> workers;
  workers.reserve(p.threads);
  for (unsigned i = 0; i < p.threads; ++i) {
    workers.emplace_back([&, i] {
      try {
        (void)pmds::thread_id();  // take an id before timing starts
        Rng rng(thread_seed(p.seed, p.rep * 1024 + i));
        Body body(s, p, i);
        OpCounts warm, measured;
        ready.fetch_add(1);
        while (in(Phase::starting)) std::this_thread::yield();
        while (in(Phase::warmup)) body(rng, warm);
        const pm::Counters before = pm::thread_counters();
        while (in(Phase::measure)) body(rng, measured);
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

  using clock = std::chrono::steady_clock;
  while (ready.load() < p.threads) std::this_thread::yield();
  // Sleeps in slices so a worker's failure ends the run early and the progress line moves.
  const auto wait = [&](double seconds, const char* what) {
    const auto end = clock::now() + std::chrono::duration<double>(seconds);
    for (auto now = clock::now(); now < end && !failed.load(); now = clock::now()) {
      if (p.progress != nullptr) {
        const double left = std::chrono::duration<double>(end - now).count();
        p.progress->update(p.progress_label + "  " + what + " " + format_seconds(seconds - left) +
                           "/" + format_seconds(seconds) + " s");
      }
      sleep_for(std::min(0.1, std::chrono::duration<double>(end - now).count()));
    }
  };
  phase.store(static_cast<int>(Phase::warmup));
  wait(p.warmup_s, "warm-up");
  const auto t0 = clock::now();
  phase.store(static_cast<int>(Phase::measure));
  wait(p.duration_s, "measuring");
  phase.store(static_cast<int>(Phase::stop));
  const auto t1 = clock::now();
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  RepResult r;
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  for (const auto& slot : slots) {
    r.ops += slot.ops;
    r.warmup_ops += slot.warmup_ops;
    r.counters += slot.counters;
  }
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
  const auto added = all.successes_of(Op::insert) + all.calls_of(Op::enqueue) +
                     all.calls_of(Op::push) + all.calls_of(Op::pq_insert);
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
  }
  throw Error(std::string("pmds: workload ") + to_string(p.workload) +
              " does not apply to this structure");
}

// The type-erased entry points the registry instantiates per descriptor.
using PrefillFn = std::uint64_t (*)(void* object, std::uint64_t count, std::uint64_t key_range,
                                    std::uint64_t seed, unsigned threads);
using RunFn = RepResult (*)(void* object, const RunParams&);

template <class D>
struct PrefillDriver {
  static std::uint64_t run(void* object, std::uint64_t count, std::uint64_t key_range,
                           std::uint64_t seed, unsigned threads) {
    return prefill(*static_cast<typename D::type*>(object), count, key_range, seed, threads);
  }
};
template <class D>
struct RunDriver {
  static RepResult run(void* object, const RunParams& p) {
    return run_workload(*static_cast<typename D::type*>(object), p);
  }
};

// What the runner needs about one structure: its entry and its two compiled entry points.
struct Target {
  const registry::Entry* entry = nullptr;
  PrefillFn prefill = nullptr;
  RunFn run = nullptr;
};

// A target for a descriptor outside the registry (tests); `entry` must outlive the target.
template <class D>
Target target_of(const registry::Entry& entry) {
  return {&entry, &PrefillDriver<D>::run, &RunDriver<D>::run};
}

// The target of a registered entry.
inline Target target_of(const registry::Entry& entry) {
  return {&entry, registry::instantiate<PrefillFn, PrefillDriver>()[entry.index],
          registry::instantiate<RunFn, RunDriver>()[entry.index]};
}

// Why a workload cannot run on an entry, or nullopt when it can.
inline std::optional<std::string> unsupported_reason(const registry::Entry& e, Workload w) {
  using registry::Kind;
  const bool keyed_set = e.kind == Kind::set || e.kind == Kind::map;
  switch (w) {
    case Workload::set:
    case Workload::ycsb_c:
      if (!keyed_set) return "needs a set or map";
      return std::nullopt;
    case Workload::ycsb_a:
    case Workload::ycsb_b:
      if (!keyed_set) return "needs a map";
      if (!e.can_update) return "needs put (update)";
      return std::nullopt;
    case Workload::ycsb_e:
      if (!keyed_set) return "needs a map";
      if (!e.can_scan) return "needs scan";
      return std::nullopt;
    case Workload::pairs:
      if (e.kind != Kind::queue && e.kind != Kind::stack) return "needs a queue or stack";
      return std::nullopt;
    case Workload::heap:
      if (e.kind != Kind::priority_queue) return "needs a priority queue";
      return std::nullopt;
    case Workload::atomicfloat:
      if (e.kind != Kind::register_object) return "needs a register";
      return std::nullopt;
  }
  return "unknown workload";
}

// The workload a kind is benchmarked with by default (the default suite, `pmds bench` without
// --workload for a single kind).
inline Workload default_workload(registry::Kind k) {
  using registry::Kind;
  switch (k) {
    case Kind::set:
    case Kind::map:
      return Workload::set;
    case Kind::queue:
    case Kind::stack:
      return Workload::pairs;
    case Kind::priority_queue:
      return Workload::heap;
    case Kind::register_object:
      return Workload::atomicfloat;
  }
  return Workload::set;
}

// Bytes the process's allocator has handed out (all arenas, plus mmapped blocks): the DRAM a
// structure uses is a difference of two readings. nullopt when the statistics do not follow
// allocations (a sanitizer's allocator replaces malloc): checked once with a 4 MiB block.
inline std::optional<std::uint64_t> dram_in_use() {
  const auto reading = [] {
    const struct mallinfo2 m = mallinfo2();
    return static_cast<std::uint64_t>(m.uordblks) + static_cast<std::uint64_t>(m.hblkhd);
  };
  static const bool statistics_work = [&] {
    constexpr std::size_t probe = 4u << 20;
    const std::uint64_t before = reading();
    void* volatile block = std::malloc(probe);
    const std::uint64_t during = reading();
    std::free(block);
    return during >= before + probe;
  }();
  if (!statistics_work) return std::nullopt;
  return reading();
}

// Where temporary pool files go: $PMDS_POOL_DIR, else /dev/shm (memory, like the page cache a
// DAX-less machine gives anyway), else the system temporary directory.
inline std::filesystem::path temporary_pool_dir() {
  if (const char* d = std::getenv("PMDS_POOL_DIR"); d != nullptr && *d != '\0') return d;
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0)
    return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

namespace detail {
// The temporary pool file in use, so that an interrupted run can remove it from a signal
// handler (remove_temporary_pool_now: unlink is async-signal-safe). One at a time: the runner
// uses one pool at a time.
inline char temporary_pool_in_use[4096] = {};
inline std::atomic<bool> temporary_pool_noted{false};
}  // namespace detail

inline std::string temporary_pool_path(std::string_view name) {
  static std::atomic<unsigned> counter{0};
  std::string safe(name);
  std::replace(safe.begin(), safe.end(), '/', '-');
  std::string path =
      (temporary_pool_dir() / ("pmds-bench-" + std::to_string(::getpid()) + "-" +
                               std::to_string(counter.fetch_add(1)) + "-" + safe + ".pool"))
          .string();
  detail::temporary_pool_noted.store(false);
  if (path.size() < sizeof detail::temporary_pool_in_use) {
    std::memcpy(detail::temporary_pool_in_use, path.c_str(), path.size() + 1);
    detail::temporary_pool_noted.store(true);
  }
  return path;
}

// For a SIGINT/SIGTERM handler: removes the temporary pool file of the run in progress.
inline void remove_temporary_pool_now() noexcept {
  if (detail::temporary_pool_noted.load()) ::unlink(detail::temporary_pool_in_use);
}

struct RecoveryMeasurement {
  double milliseconds = 0;
  std::uint64_t elements = 0;          // put in before the crash
  std::optional<std::uint64_t> found;  // counted after recovery (sets/maps, queues, stacks)
};

// Recovery time after a real process crash: a child process creates the structure in a fresh
// pool at `path`, fills it with `elements`, and exits without closing anything (the pool stays
// marked dirty, as after kill -9; the page cache holds every store). The parent then opens the
// pool and times open + recovery, and counts what it finds (the contents are read after the
// timing). Call with no other thread running in the process (fork).
inline RecoveryMeasurement measure_recovery(const Target& t, const registry::CreateOptions& o,
                                            const std::string& path, std::uint64_t elements,
                                            std::uint64_t seed) {
  RecoveryMeasurement m;
  m.elements = elements;
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) throw Error("pmds: fork failed for the recovery measurement");
  if (child == 0) {
    int code = 0;
    try {
      auto inst = registry::Instance::create(*t.entry, o, path);
      const std::uint64_t n = t.prefill(inst.object(), elements, o.key_range, seed, 1);
      if (n != elements) code = 3;
      std::fflush(nullptr);
      ::_exit(code);  // no destructor runs: the pool is never closed (dirty)
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pmds: recovery measurement (child): %s\n", e.what());
      ::_exit(2);
    }
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("pmds: the recovery measurement's child process failed for " +
                std::string(t.entry->name) + " (status " + std::to_string(status) + ")");
  const auto t0 = std::chrono::steady_clock::now();
  auto inst = registry::Instance::open(*t.entry, path, o);
  const auto t1 = std::chrono::steady_clock::now();
  m.milliseconds = std::chrono::duration<double, std::milli>(t1 - t0).count();
  if (inst.pool() != nullptr && inst.pool()->was_clean_shutdown())
    throw Error("pmds: the pool of the recovery measurement was marked clean; expected dirty");
  if (t.entry->kind != registry::Kind::register_object) m.found = inst.contents().size();
  return m;
}

// The space a quiescent structure holds: the bytes of the pool slots it holds, and the DRAM its
// destruction gives back (a difference taken around the destruction, not the creation, so that
// frees other structures' deferred reclamation makes meanwhile cannot distort it).
struct Space {
  double pool_bytes = 0;
  bool has_dram_bytes = false;  // malloc statistics follow allocations (not under sanitizers)
  double dram_bytes = 0;
};

// Measures inst's space and destroys its structure (its pool stays open).
inline Space space_of(registry::Instance& inst) {
  Space space;
  if (inst.pool() != nullptr)
    space.pool_bytes = static_cast<double>(inst.pool()->allocator().allocated_bytes());
  const auto dram_live = dram_in_use();
  inst.destroy();  // the structure only: the pool's own DRAM is not the structure's
  const auto dram_freed = dram_in_use();
  if (dram_live && dram_freed) {
    space.has_dram_bytes = true;
    space.dram_bytes = static_cast<double>(*dram_live > *dram_freed ? *dram_live - *dram_freed : 0);
  }
  return space;
}

// What one repetition measured: its run, and (when asked) the space of an empty structure (the
// fixed cost) and of the structure at the end of the run. Trivially copyable: an isolated
// repetition sends it back through a pipe.
struct RepOutcome {
  RepResult result;
  std::uint64_t filled = 0;  // successful prefill operations
  Space empty, end;
};

// One repetition: a fresh structure (in a fresh pool at `path` when durable), its prefill, the
// timed run, and, if `measure_space`, first the space of an empty structure built alone, then
// the space at the end of the run.
inline RepOutcome run_one_repetition(const Target& t, const registry::CreateOptions& create,
                                     const std::string& path, const RunParams& p,
                                     std::uint64_t prefill_seed, unsigned threads,
                                     bool measure_space) {
  const registry::Entry& e = *t.entry;
  RepOutcome out;
  if (measure_space) {
    auto empty = registry::Instance::create(e, create, path);
    out.empty = space_of(empty);
    empty.close();
    if (!path.empty()) std::filesystem::remove(path);
  }
  auto inst = registry::Instance::create(e, create, path);
  out.filled = t.prefill(inst.object(), p.prefill, p.key_range, prefill_seed, threads);
  if (out.filled != p.prefill)
    throw Error("pmds: prefill of " + std::string(e.name) + " inserted " +
                std::to_string(out.filled) + " of " + std::to_string(p.prefill) + " elements");
  out.result = t.run(inst.object(), p);
  if (measure_space) out.end = space_of(inst);
  inst.close();
  return out;
}

namespace detail {

// Runs body() in a forked child and returns what it returned. Why: structures measured one
// after another in one process share its heap, and a structure's throughput at this scale
// depends on where its nodes land (a transient table filled into a fresh heap ran up to a
// third faster than one filled into the holes another structure's nodes left). A child per
// repetition gives every structure the same fresh start. Call with no other thread running.
template <class Body>
RepOutcome in_child_process(const Body& body, std::string_view name) {
  static_assert(std::is_trivially_copyable_v<RepOutcome>);
  int fds[2];
  if (::pipe(fds) != 0) throw Error("pmds: pipe failed for an isolated repetition");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("pmds: fork failed for an isolated repetition");
  }
  if (child == 0) {
    ::close(fds[0]);
    int code = 0;
    std::string message;
    RepOutcome out;
    try {
      out = body();
    } catch (const std::exception& ex) {
      message = ex.what();
      code = 2;
    }
    // The message (on failure) or the outcome, prefixed by one status byte.
    const char status = code == 0 ? 'o' : 'e';
    bool written = ::write(fds[1], &status, 1) == 1;
    if (code == 0)
      written = written && ::write(fds[1], &out, sizeof out) == static_cast<ssize_t>(sizeof out);
    else
      written = written && ::write(fds[1], message.data(), message.size()) ==
                               static_cast<ssize_t>(message.size());
    std::fflush(nullptr);
    ::_exit(written ? code : 3);  // no destructors: the parent owns every shared resource
  }
  ::close(fds[1]);
  std::string bytes;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      bytes.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!bytes.empty() && bytes[0] == 'e') throw Error(bytes.substr(1));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || bytes.size() != 1 + sizeof(RepOutcome))
    throw Error("pmds: the isolated repetition of " + std::string(name) + " failed (wait status " +
                std::to_string(status) + ")");
  RepOutcome out;
  std::memcpy(&out, bytes.data() + 1, sizeof out);
  return out;
}

}  // namespace detail

// Runs cfg's workload on one target at every thread count of cfg; one Record per count.
inline std::vector<Record> run_target(const Target& t, const Config& cfg, Progress* progress,
                                      const std::string& progress_prefix = {}) {
  const registry::Entry& e = *t.entry;
  std::vector<Record> records;
  const auto base_record = [&](unsigned threads) {
    Record r;
    r.structure = std::string(e.name);
    r.technique = std::string(e.technique);
    r.kind = registry::to_string(e.kind);
    r.criterion = to_string(e.criterion);
    r.workload = to_string(cfg.workload);
    r.distribution = is_keyed(cfg.workload) ? to_string(cfg.distribution) : "none";
    r.threads = threads;
    r.key_range = cfg.key_range;
    r.prefill = cfg.effective_prefill();
    r.reads_pct = cfg.effective_reads();
    r.duration_s = cfg.duration_s;
    r.warmup_s = cfg.warmup_s;
    r.reps = cfg.reps;
    r.seed = cfg.seed;
    r.fence_latency_ns = cfg.fence_latency_ns;
    r.local_work = cfg.local_work;
    r.zipf_theta = cfg.zipf_theta;
    r.backend = pm::to_string(pm::backend);
    r.flush_instruction = pm::to_string(pm::flush_instruction());
    if (is_keyed(cfg.workload)) {
      registry::CreateOptions o;
      o.key_range = cfg.key_range;
      o.buckets = cfg.buckets;
      r.buckets = registry::bucket_count_for(o);
    }
    return r;
  };
  if (const auto why = unsupported_reason(e, cfg.workload)) {
    for (const unsigned threads : cfg.threads) {
      Record r = base_record(threads);
      r.status = "unsupported";
      r.note = *why;
      records.push_back(std::move(r));
    }
    return records;
  }

  registry::CreateOptions create;
  create.key_range = cfg.key_range;
  create.buckets = cfg.buckets;
  create.pool_size = cfg.pool_size;
  if (cfg.workload == Workload::ycsb_e) {
    // YCSB E inserts new keys above the range; count them into the structure's sizing.
    create.pool_size = cfg.pool_size != 0 ? cfg.pool_size : registry::default_pool_size(create) * 2;
  }
  std::optional<KeyChooser> keys;
  if (is_keyed(cfg.workload))
    keys.emplace(cfg.distribution, cfg.key_range, cfg.zipf_theta, cfg.seed);

  // --pool PATH: every pool of this run is made at PATH, replacing the previous one, and the last
  // stays there (the CLI refuses to start when PATH already exists, so any file found there
  // is one this run made). Otherwise each pool is a temporary file, removed after use.
  const auto remove_file = [](const std::string& p) {
    std::error_code ec;
    std::filesystem::remove(p, ec);
  };
  const bool keep_pool = !cfg.pool_path.empty();
  const auto pool_path = [&] {
    if (!keep_pool) return temporary_pool_path(e.name);
    remove_file(cfg.pool_path);
    return cfg.pool_path;
  };

  for (const unsigned threads : cfg.threads) {
    Record r = base_record(threads);
    RunParams p;
    p.workload = cfg.workload;
    p.threads = threads;
    p.warmup_s = cfg.warmup_s;
    p.duration_s = cfg.duration_s;
    p.key_range = cfg.key_range;
    p.prefill = cfg.effective_prefill();
    p.reads_pct = cfg.effective_reads();
    p.local_work = cfg.local_work;
    p.scan_length = cfg.scan_length;
    p.keys = keys ? &*keys : nullptr;
    p.seed = cfg.seed;
    p.progress = progress;
    for (unsigned rep = cfg.first_rep; rep < cfg.first_rep + cfg.reps; ++rep) {
      p.rep = rep;
      p.progress_label = progress_prefix + std::string(e.name) + "  " + to_string(cfg.workload) +
                         "  threads " + std::to_string(threads) + "  rep " +
                         std::to_string(rep + 1);
      if (progress != nullptr) progress->update(p.progress_label + "  prefill");
      const std::string path = e.durable ? pool_path() : std::string();
      const auto one_rep = [&] {
        return run_one_repetition(t, create, path, p, cfg.seed + rep, threads, rep == 0);
      };
      const RepOutcome out = cfg.isolate ? detail::in_child_process(one_rep, e.name) : one_rep();
      if (!path.empty() && !keep_pool) remove_file(path);
      const RepResult& res = out.result;
      r.mops_reps.push_back(res.mops());
      r.ops += res.ops;
      r.seconds_total += res.seconds;
      r.counters += res.counters;
      if (rep == 0) {
        r.elements_after_prefill = out.filled;
        r.elements = elements_after(out.filled, res);
        r.pool_bytes = out.end.pool_bytes;
        r.fixed_pool_bytes = out.empty.pool_bytes;
        if (out.end.has_dram_bytes && out.empty.has_dram_bytes) {
          r.dram_bytes = out.end.dram_bytes;
          r.fixed_dram_bytes = out.empty.dram_bytes;
        }
      }
    }
    r.finish_throughput();
    r.finish_counts();
    r.finish_bytes();
    records.push_back(std::move(r));
  }

  // Recovery time: once per structure (it does not depend on the thread count of the run),
  // from a structure holding the prefill (queues/stacks: half the key range, as they run from
  // empty), reported on each of its records.
  if (e.durable && cfg.measure_recovery) {
    if (progress != nullptr) progress->update(progress_prefix + std::string(e.name) + "  recovery");
    const std::uint64_t elements =
        (e.kind == registry::Kind::queue || e.kind == registry::Kind::stack)
            ? cfg.key_range / 2
            : (e.kind == registry::Kind::register_object ? 0 : cfg.effective_prefill());
    const std::string path = pool_path();
    try {
      const RecoveryMeasurement m = measure_recovery(t, create, path, elements, cfg.seed);
      for (Record& r : records) {
        r.recovery_ms = m.milliseconds;
        r.recovery_elements = m.elements;
        r.recovered_elements = m.found;
      }
    } catch (...) {
      remove_file(path);
      throw;
    }
    if (!keep_pool) remove_file(path);
  }
  return records;
}

}  // namespace pmds::bench

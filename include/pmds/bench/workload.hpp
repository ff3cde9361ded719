// pmds bench — what a benchmark run is: the workloads of docs/ARCHITECTURE.md §6, the operation
// types the harness counts, and the run configuration that `pmds bench` options fill in.
//
// Workloads (and the structure kinds they apply to):
//   set          set/map mix over [1, key_range] prefilled to --prefill keys (default half):
//                reads % contains/get, the rest split evenly between insert and remove
//                (Zuriel et al. §6, Mirror 80/10/10, nbMontage 2:1:1);          sets, maps
//   ycsb-a/b/c   50/50, 95/5, 100/0 read/update (update = put) over a map loaded with every
//                key of the range (YCSB's load phase; --prefill overrides);    maps (a/b: put)
//   ycsb-e       95% scans of 1..100 keys from a chosen start, 5% inserts of new keys
//                (above the loaded range, as YCSB inserts new records);         maps with scan
//   pairs        enqueue+dequeue (push+pop) pairs from empty, a random local work loop of
//                0..local_work iterations between operations (Fatourou et al. §6);  queues, stacks
//   heap         a priority queue prefilled to half the key range, then equal numbers of
//                inserts and delete-mins, local work between operations (Fatourou et al. §6)
//   atomicfloat  fetch_multiply on one shared register, local work between (Fatourou et al. §6)
//   db_bench's shapes (LevelDB/RocksDB db_bench, as pmemkv-bench ran them), timed like the rest:
//   fillrandom   puts of uniform keys into a map that starts empty;          maps with put
//   readrandom   gets of uniform keys in a map loaded with every key;        maps
//   overwrite    puts of uniform keys in a loaded map (each replaces);       maps with put
//   readwhilewriting  gets by the --threads threads while one more thread puts without pause;
//                the writer's puts are left out of the throughput, the mix and the
//                counters (db_bench reports the readers) and reported apart as its rate
//                (writer_mops);                                               maps with put
//   deleterandom removes of the loaded keys in a random order, each found: the warm-up gets
//                keys, and the measurement ends when a thread's share of the range runs out
//                (db_bench's ends after its removes);                         maps
// Keys follow --distribution: uniform, or zipfian (theta 0.99) with scrambled keys (InCLL).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/bench/random.hpp"

namespace pmds::bench {

enum class Workload {
  set,
  ycsb_a,
  ycsb_b,
  ycsb_c,
  ycsb_e,
  pairs,
  heap,
  atomicfloat,
  fillrandom,
  readrandom,
  overwrite,
  readwhilewriting,
  deleterandom,
};

inline constexpr std::array<Workload, 13> all_workloads = {
    Workload::set,         Workload::ycsb_a,     Workload::ycsb_b,    Workload::ycsb_c,
    Workload::ycsb_e,      Workload::pairs,      Workload::heap,      Workload::atomicfloat,
    Workload::fillrandom,  Workload::readrandom, Workload::overwrite, Workload::readwhilewriting,
    Workload::deleterandom};

constexpr const char* to_string(Workload w) {
  switch (w) {
    case Workload::set:
      return "set";
    case Workload::ycsb_a:
      return "ycsb-a";
    case Workload::ycsb_b:
      return "ycsb-b";
    case Workload::ycsb_c:
      return "ycsb-c";
    case Workload::ycsb_e:
      return "ycsb-e";
    case Workload::pairs:
      return "pairs";
    case Workload::heap:
      return "heap";
    case Workload::atomicfloat:
      return "atomicfloat";
    case Workload::fillrandom:
      return "fillrandom";
    case Workload::readrandom:
      return "readrandom";
    case Workload::overwrite:
      return "overwrite";
    case Workload::readwhilewriting:
      return "readwhilewriting";
    case Workload::deleterandom:
      return "deleterandom";
  }
  return "?";
}

inline std::optional<Workload> parse_workload(std::string_view s) {
  for (const Workload w : all_workloads)
    if (s == to_string(w)) return w;
  return std::nullopt;
}

constexpr bool is_ycsb(Workload w) {
  return w == Workload::ycsb_a || w == Workload::ycsb_b || w == Workload::ycsb_c ||
         w == Workload::ycsb_e;
}

constexpr bool is_db_bench(Workload w) {
  return w == Workload::fillrandom || w == Workload::readrandom || w == Workload::overwrite ||
         w == Workload::readwhilewriting || w == Workload::deleterandom;
}

// Workloads that draw keys from [1, key_range] with a distribution and prefill the structure.
constexpr bool is_keyed(Workload w) {
  return w == Workload::set || is_ycsb(w) || w == Workload::heap || is_db_bench(w);
}

// The read percentage a workload runs: --reads for the set mix, fixed for YCSB (E: scans).
constexpr unsigned fixed_read_percent(Workload w) {
  switch (w) {
    case Workload::ycsb_a:
      return 50;
    case Workload::ycsb_b:
    case Workload::ycsb_e:
      return 95;
    case Workload::ycsb_c:
    case Workload::readrandom:
    case Workload::readwhilewriting:
      return 100;
    default:
      return 0;
  }
}

// Every operation type the harness issues; counted per thread, summed, and reported.
enum class Op : std::uint8_t {
  read,        // contains (sets) or get (maps)
  insert,      // insert(k, v): succeeds when k was absent
  remove,      // remove(k): succeeds when k was present
  update,      // put(k, v) (YCSB update)
  scan,        // scan(from, n, visit) (YCSB E)
  enqueue,     // queue
  dequeue,     //   succeeds when the queue was not empty
  push,        // stack
  pop,         //   succeeds when the stack was not empty
  pq_insert,   // priority queue insert(k)
  delete_min,  //   succeeds when the heap was not empty
  multiply,    // register fetch_multiply
};
inline constexpr std::size_t op_type_count = 12;

constexpr const char* to_string(Op op) {
  constexpr const char* names[op_type_count] = {"read", "insert",    "remove",     "update",
                                                "scan", "enqueue",   "dequeue",    "push",
                                                "pop",  "pq_insert", "delete_min", "multiply"};
  return names[static_cast<std::size_t>(op)];
}

// Calls and successes per operation type (for scans, `successes` counts the keys visited).
struct OpCounts {
  std::array<std::uint64_t, op_type_count> calls{};
  std::array<std::uint64_t, op_type_count> successes{};

  void add(Op op, bool success) {
    ++calls[static_cast<std::size_t>(op)];
    successes[static_cast<std::size_t>(op)] += success ? 1 : 0;
  }
  std::uint64_t total() const {
    std::uint64_t n = 0;
    for (const auto c : calls) n += c;
    return n;
  }
  std::uint64_t calls_of(Op op) const { return calls[static_cast<std::size_t>(op)]; }
  std::uint64_t successes_of(Op op) const { return successes[static_cast<std::size_t>(op)]; }
  OpCounts& operator+=(const OpCounts& o) {
    for (std::size_t i = 0; i < op_type_count; ++i) {
      calls[i] += o.calls[i];
      successes[i] += o.successes[i];
    }
    return *this;
  }
};

// Everything `pmds bench` was asked to do. Defaults are the ones the --help text states.
struct Config {
  std::vector<std::string> structures;  // registry names (patterns already resolved by the CLI)
  Workload workload = Workload::set;
  std::vector<unsigned> threads = {1};
  double duration_s = 1.0;
  double warmup_s = 0.2;
  unsigned reps = 3;
  // The first repetition's number: run_target runs repetitions first_rep .. first_rep+reps-1
  // (each with its own prefill seed). The CLI runs one repetition of every structure at a time
  // (see bench_command.cpp), so that a slow spell of a noisy machine falls on all of them.
  unsigned first_rep = 0;
  std::uint64_t key_range = 1024;
  std::optional<std::uint64_t> prefill;  // unset: half the range (set, heap); all of it (YCSB)
  std::optional<unsigned> reads_pct;     // set workload only; unset: 90 (Zuriel et al. §6 default)
  Distribution distribution = Distribution::uniform;
  double zipf_theta = 0.99;
  std::uint64_t seed = 1;
  std::uint32_t fence_latency_ns = 0;
  std::string pool_path;            // empty: a temporary pool file per run, removed afterwards
  std::uint64_t pool_size = 0;      // 0: sized from the key range
  std::uint64_t max_pool_size = 0;  // 0: the pool never grows
  std::uint64_t buckets = 0;        // hash tables; 0: the structure's choice for the key range
  unsigned local_work = 512;        // pairs, heap, atomicfloat: max iterations between operations
  unsigned scan_length = 100;       // ycsb-e: scans of 1..scan_length keys
  bool measure_recovery = true;
  std::size_t recovery_threads = 1;          // nbMontage structures: threads that rebuild at open
  bool lazy_recovery = false;                // InCLL Masstrees: recover borders on first access
  std::size_t key_size = 8, value_size = 8;  // byte-string maps (the "-bytes" entries)
  // Each repetition in a forked child process (runner.hpp, detail::in_child_process): every
  // structure starts from the same fresh heap. The CLI sets it (--no-isolate clears it); tests
  // that call run_target directly leave it off.
  bool isolate = false;
  std::string json_path, csv_path;
  std::string ratios_path;  // the ratio table alone (the default suite gathers them)
  bool progress = false;    // force the progress line even when stderr is not a terminal
  bool table = true;

  unsigned effective_reads() const {
    if (workload == Workload::set) return reads_pct.value_or(90);
    return fixed_read_percent(workload);
  }
  std::uint64_t effective_prefill() const {
    if (prefill) return *prefill;
    if (is_ycsb(workload)) return key_range;
    if (workload == Workload::fillrandom) return 0;
    if (is_db_bench(workload)) return key_range;
    if (workload == Workload::set || workload == Workload::heap) return key_range / 2;
    return 0;
  }
};

}  // namespace pmds::bench

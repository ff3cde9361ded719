// pmds bench — command-line options of `pmds bench` (names fixed by issue 3, so scripts can rely
// on them), declared on a CLI11 app (the `bench` subcommand of `pmds`). Every value is checked in
// full; every mistake is a CLI::ParseError whose message names the option and the bad value.
// Needs CLI11 (Debian: libcli11-dev); the rest of pmds/bench does not.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "pmds/bench/workload.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::bench {

struct ParsedBench {
  Config config;
  std::string structure_spec;  // as given; empty = every applicable structure
  bool workload_given = false;
};

// Strict number checks. CLI11 2.1's own conversion reads "010" as octal, "0x10" as hex and "-1"
// as 2^64-1 for an unsigned option, and its Range lets "nan" through; these accept only plain
// decimal numbers. whole_number is a transform: it rewrites the value without leading zeros, so
// that CLI11's conversion cannot read it as octal.
inline CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo ||
            v > hi)
          return "expects a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "], not \"" + text + "\"";
        text = std::to_string(v);
        return {};
      },
      "");
}

// A finite decimal number in [lo, hi], or (lo, hi] when lo_open.
inline CLI::Validator real_number(double lo, double hi, bool lo_open) {
  return CLI::Validator(
      [lo, hi, lo_open](std::string& text) -> std::string {
        double v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
            !std::isfinite(v) || !(lo_open ? v > lo : v >= lo) || v > hi) {
          char range[96];
          std::snprintf(range, sizeof range, "%s%g, %g]", lo_open ? "(" : "[", lo, hi);
          return std::string("expects a number in ") + range + ", not \"" + text + "\"";
        }
        return {};
      },
      "");
}

inline CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) { return text.empty() ? "needs " + what : std::string(); }, "");
}

// Declares the options of `pmds bench` on `app`, filling `out` when it parses; the checks across
// options run when the parse completes (CLI::ValidationError).
inline void add_bench_options(CLI::App& app, ParsedBench& out) {
  Config& c = out.config;
  c.isolate = true;  // the CLI's default: every repetition in a fresh child process
  app.footer(
      "Runs a workload on registered structures (see `pmds list`) and reports throughput\n"
      "(median and min-max over repetitions), flushes/op and fences/op, bytes per element\n"
      "(pool and DRAM) and, for durable structures, recovery time after a process crash.");
  // An option given twice: the last one counts; a flag takes no value (--no-table=yes is wrong).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.option_defaults()->disable_flag_override();

  std::vector<std::string> workloads;
  for (const Workload w : all_workloads) workloads.emplace_back(to_string(w));

  app.add_option("--structure", out.structure_spec,
                 "registry names, \"all\", or patterns \"hash/*\", \"*/izraelevitz\"\n"
                 "(default: every structure the workload applies to)")
      ->type_name("A,B,...")
      ->check(non_empty("at least one name"));
  app.add_option_function<std::string>(
         "--workload",
         [&out](const std::string& v) {
           out.config.workload = *parse_workload(v);
           out.workload_given = true;
         },
         "set, ycsb-a, ycsb-b, ycsb-c, ycsb-e, pairs, heap, atomicfloat,\n"
         "fillrandom, readrandom, overwrite, readwhilewriting, deleterandom\n"
         "(default: set)\n"
         "  set       reads % contains/get, the rest insert/remove evenly\n"
         "  ycsb-a/b/c 50/5/0 % put, the rest get; map loaded with the\n"
         "            whole key range unless --prefill\n"
         "  ycsb-e    95 % scans of 1..100 keys, 5 % inserts of new keys\n"
         "  pairs     enqueue+dequeue / push+pop pairs from empty\n"
         "  heap      half-full priority queue, insert + delete-min\n"
         "  atomicfloat  fetch_multiply on one shared register\n"
         "  db_bench's shapes, on maps (fillrandom from empty, the rest on the\n"
         "  whole key range unless --prefill): fillrandom and overwrite put,\n"
         "  readrandom gets, deleterandom removes the loaded keys in random\n"
         "  order (its warm-up gets; it ends early when a thread has removed\n"
         "  its share), readwhilewriting gets on\n"
         "  --threads threads beside one more that puts (not counted)")
      ->type_name("W")
      ->check(CLI::IsMember(workloads).description(""));
  app.add_option("--threads", c.threads, "thread counts to run (default: 1)")
      ->type_name("1,2,4")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->transform(whole_number(1, pmds::max_threads - 2));
  app.add_option("--duration", c.duration_s, "measured time per repetition (default: 1)")
      ->type_name("SECONDS")
      ->check(real_number(0, 86400, true));
  app.add_option("--warmup", c.warmup_s, "warm-up before each measurement (default: 0.2)")
      ->type_name("SECONDS")
      ->check(real_number(0, 86400, false));
  app.add_option("--reps", c.reps, "repetitions per thread count (default: 3)")
      ->type_name("N")
      ->transform(whole_number(1, 1000));
  app.add_option("--key-range", c.key_range, "keys are drawn from [1, N] (default: 1024)")
      ->type_name("N")
      ->transform(whole_number(2, 1ull << 40));
  app.add_option_function<std::uint64_t>(
         "--prefill", [&c](std::uint64_t v) { c.prefill = v; },
         "elements put in before the run (default: half the range;\nycsb: the whole range)")
      ->type_name("N")
      ->transform(whole_number(0, 1ull << 40));
  app.add_option_function<unsigned>(
         "--reads", [&c](unsigned v) { c.reads_pct = v; },
         "read percentage of the set workload, 0..100 (default: 90)")
      ->type_name("PCT")
      ->transform(whole_number(0, 100));
  app.add_option_function<std::string>(
         "--distribution",
         [&c](const std::string& v) {
           c.distribution = v == "zipfian" ? Distribution::zipfian : Distribution::uniform;
         },
         "uniform or zipfian (theta 0.99, scrambled keys) (default: uniform)")
      ->type_name("D")
      ->check(CLI::IsMember({"uniform", "zipfian"}).description(""));
  app.add_option("--seed", c.seed, "random seed (default: 1)")
      ->type_name("S")
      ->transform(whole_number(0, std::numeric_limits<std::uint64_t>::max()));
  app.add_option("--fence-latency", c.fence_latency_ns,
                 "extra latency emulated after every fence, in ns (default: 0)")
      ->type_name("NS")
      ->transform(whole_number(0, 10'000'000));
  app.add_option("--pool", c.pool_path,
                 "make the pools at PATH and keep the last one there (PATH must\n"
                 "not exist); default: temporary files under $PMDS_POOL_DIR,\n"
                 "/dev/shm or /tmp, removed afterwards")
      ->type_name("PATH")
      ->check(non_empty("a file path"));
  app.add_option("--json", c.json_path, "write the results as JSON")
      ->type_name("FILE")
      ->check(non_empty("a file path"));
  app.add_option("--csv", c.csv_path, "write the results as CSV")
      ->type_name("FILE")
      ->check(non_empty("a file path"));
  app.add_option("--ratios", c.ratios_path,
                 "write the ratio table (to the transient twin and to psync-bound) alone")
      ->type_name("FILE")
      ->check(non_empty("a file path"));

  const std::string more = "more";
  app.add_option("--buckets", c.buckets,
                 "hash tables: bucket count (default: the key range, to a power of 2)")
      ->type_name("N")
      ->group(more)
      ->transform(whole_number(1, 1ull << 36));
  app.add_option("--pool-size", c.pool_size,
                 "pool file size (its initial size with --max-pool-size), suffixes K, M, G "
                 "(default: from the key range)")
      ->type_name("BYTES")
      ->group(more)
      ->transform(CLI::AsSizeValue(false).description(""))
      ->check(whole_number(1, 1ull << 44));  // 16 TiB
  app.add_option("--max-pool-size", c.max_pool_size,
                 "the most a pool may grow to, from --pool-size (its initial size) on demand; "
                 "suffixes K, M, G (default: it never grows)")
      ->type_name("BYTES")
      ->group(more)
      ->transform(CLI::AsSizeValue(false).description(""))
      ->check(whole_number(1, 1ull << 44));
  app.add_option("--zipf-theta", c.zipf_theta, "zipfian skew, 0 < X < 1 (default: 0.99)")
      ->type_name("X")
      ->group(more)
      ->check(real_number(0, 0.999999, true));
  app.add_option("--local-work", c.local_work,
                 "pairs/heap/atomicfloat: max local-work iterations (default: 512)")
      ->type_name("N")
      ->group(more)
      ->transform(whole_number(0, 1 << 20));
  app.add_option("--recovery-threads", c.recovery_threads,
                 "nbMontage structures: threads that rebuild the index when the\n"
                 "recovery measurement opens the pool (default: 1)")
      ->type_name("N")
      ->group(more)
      ->transform(whole_number(1, montage::Options::max_recovery_threads));
  app.add_flag("--lazy-recovery", c.lazy_recovery,
               "InCLL Masstrees (masstree/*, masstree-bytes/*): the recovery\n"
               "measurement's open recovers each border on its first access\n"
               "(InCLL §4.3) instead of all of them before it returns")
      ->group(more);
  app.add_option("--key-size", c.key_size,
                 "byte-string maps (the -bytes entries): bytes each key is written as\n"
                 "(default: 8; nbMontage's paper runs 32)")
      ->type_name("BYTES")
      ->group(more)
      ->transform(whole_number(8, montage::ByteStringKeys::max_key_size));
  app.add_option("--value-size", c.value_size,
                 "byte-string maps (the -bytes entries): bytes each value is written as\n"
                 "(default: 8; nbMontage's paper runs 1024)")
      ->type_name("BYTES")
      ->group(more)
      ->transform(whole_number(8, montage::ByteStringKeys::max_value_size));
  app.add_flag_callback(
         "--no-recovery", [&c] { c.measure_recovery = false; },
         "skip the recovery-time measurement")
      ->group(more);
  app.add_flag_callback(
         "--no-isolate", [&c] { c.isolate = false; },
         "run the repetitions in this process instead of one fresh child\n"
         "process each (structures then share one heap, and the placement\n"
         "of one's nodes depends on what ran before it)")
      ->group(more);
  app.add_flag_callback(
         "--no-table", [&c] { c.table = false; }, "do not print the table")
      ->group(more);
  app.add_flag("--progress", c.progress,
               "show the progress line even when stderr is not a terminal")
      ->group(more);
  app.set_help_flag("-h,--help", "this text")->group(more);

  // Checks across options.
  app.callback([&c] {
    if (c.reads_pct && c.workload != Workload::set)
      throw CLI::ValidationError(std::string("--reads applies to --workload set only; ") +
                                 to_string(c.workload) + " has a fixed mix");
    if (c.prefill &&
        (c.workload == Workload::set || is_ycsb(c.workload) || is_db_bench(c.workload)) &&
        *c.prefill > c.key_range)
      throw CLI::ValidationError("--prefill " + std::to_string(*c.prefill) +
                                 " exceeds --key-range " + std::to_string(c.key_range) +
                                 ": a set holds at most one element per key");
    if (c.prefill && (c.workload == Workload::pairs || c.workload == Workload::atomicfloat) &&
        *c.prefill != 0)
      throw CLI::ValidationError(std::string("--prefill does not apply to --workload ") +
                                 to_string(c.workload) + " (it runs from empty)");
    for (std::size_t i = 0; i < c.threads.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (c.threads[i] == c.threads[j])
          throw CLI::ValidationError("--threads lists " + std::to_string(c.threads[i]) + " twice");
  });
}

}  // namespace pmds::bench

// pmds bench — command-line options of `pmds bench` (names fixed by issue 3, so scripts can rely
// on them), parsed strictly: every value is checked in full, every mistake is an OptionError
// whose message names the option and says what it accepts.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "pmds/bench/workload.hpp"
#include "pmds/error.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::bench {

class OptionError : public Error {
 public:
  using Error::Error;
};

inline constexpr const char* bench_help = R"(usage: pmds bench [options]

Runs a workload on registered structures (see `pmds list`) and reports throughput
(median and min-max over repetitions), flushes/op and fences/op, bytes per element
(pool and DRAM) and, for durable structures, recovery time after a process crash.

  --structure A,B,...   registry names, "all", or patterns "hash/*", "*/izraelevitz"
                        (default: every structure the workload applies to)
  --workload W          set, ycsb-a, ycsb-b, ycsb-c, ycsb-e, pairs, heap, atomicfloat
                        (default: set)
                          set       reads % contains/get, the rest insert/remove evenly
                          ycsb-a/b/c 50/5/0 % put, the rest get; map loaded with the
                                    whole key range unless --prefill
                          ycsb-e    95 % scans of 1..100 keys, 5 % inserts of new keys
                          pairs     enqueue+dequeue / push+pop pairs from empty
                          heap      half-full priority queue, insert + delete-min
                          atomicfloat  fetch_multiply on one shared register
  --threads 1,2,4       thread counts to run (default: 1)
  --duration SECONDS    measured time per repetition (default: 1)
  --warmup SECONDS      warm-up before each measurement (default: 0.2)
  --reps N              repetitions per thread count (default: 3)
  --key-range N         keys are drawn from [1, N] (default: 1024)
  --prefill N           elements put in before the run (default: half the range;
                        ycsb: the whole range)
  --reads PCT           read percentage of the set workload, 0..100 (default: 90)
  --distribution D      uniform or zipfian (theta 0.99, scrambled keys) (default: uniform)
  --seed S              random seed (default: 1)
  --fence-latency NS    extra latency emulated after every fence, in ns (default: 0)
  --pool PATH           make the pools at PATH and keep the last one there (PATH must
                        not exist); default: temporary files under $PMDS_POOL_DIR,
                        /dev/shm or /tmp, removed afterwards
  --json FILE           write the results as JSON
  --csv FILE            write the results as CSV
  more:
  --buckets N           hash tables: bucket count (default: the key range, to a power of 2)
  --pool-size BYTES     pool file size, suffixes K, M, G (default: from the key range)
  --zipf-theta X        zipfian skew, 0 < X < 1 (default: 0.99)
  --local-work N        pairs/heap/atomicfloat: max local-work iterations (default: 512)
  --no-recovery         skip the recovery-time measurement
  --no-isolate          run the repetitions in this process instead of one fresh child
                        process each (structures then share one heap, and the placement
                        of one's nodes depends on what ran before it)
  --no-table            do not print the table
  --progress            show the progress line even when stderr is not a terminal
  --help                this text
)";

struct ParsedBench {
  Config config;
  std::string structure_spec;  // as given; empty = every applicable structure
  bool workload_given = false;
  bool help = false;
};

namespace detail {

inline std::uint64_t parse_u64(std::string_view opt, std::string_view text, std::uint64_t lo,
                               std::uint64_t hi) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    throw OptionError("pmds bench: " + std::string(opt) + " expects a whole number in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "], not \"" +
                      std::string(text) + "\"");
  return v;
}

inline double parse_double(std::string_view opt, std::string_view text, double lo, double hi,
                           bool lo_open) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool low_ok = lo_open ? v > lo : v >= lo;
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) ||
      !low_ok || v > hi) {
    char range[96];
    std::snprintf(range, sizeof range, "%s%g, %g]", lo_open ? "(" : "[", lo, hi);
    throw OptionError("pmds bench: " + std::string(opt) + " expects a number in " + range +
                      ", not \"" + std::string(text) + "\"");
  }
  return v;
}

// Sizes with an optional K, M or G suffix (powers of 1024).
inline std::uint64_t parse_size(std::string_view opt, std::string_view text) {
  std::uint64_t scale = 1;
  std::string_view digits = text;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        scale = 1ull << 10;
        break;
      case 'M':
      case 'm':
        scale = 1ull << 20;
        break;
      case 'G':
      case 'g':
        scale = 1ull << 30;
        break;
      default:
        break;
    }
    if (scale != 1) digits.remove_suffix(1);
  }
  const std::uint64_t limit = (1ull << 44) / scale;  // 16 TiB
  try {
    return parse_u64(opt, digits, 1, limit) * scale;
  } catch (const OptionError&) {
    throw OptionError("pmds bench: " + std::string(opt) +
                      " expects a size in bytes with an optional K, M or G suffix (at most "
                      "16T), not \"" +
                      std::string(text) + "\"");
  }
}

inline std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = s.find(',', start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? s.npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

}  // namespace detail

// Parses the arguments after "bench". Throws OptionError on any mistake.
inline ParsedBench parse_bench_options(std::span<const std::string_view> args) {
  ParsedBench out;
  Config& c = out.config;
  c.isolate = true;  // the CLI's default: every repetition in a fresh child process
  bool reads_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    std::optional<std::string_view> inline_value;
    if (arg.starts_with("--")) {
      if (const auto eq = arg.find('='); eq != std::string_view::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
    } else {
      throw OptionError("pmds bench: unexpected argument \"" + std::string(arg) +
                        "\" (options start with --; see pmds bench --help)");
    }
    const auto flag = [&] {
      if (inline_value) throw OptionError("pmds bench: " + std::string(arg) + " takes no value");
    };
    const auto value = [&]() -> std::string_view {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size())
        throw OptionError("pmds bench: " + std::string(arg) + " needs a value");
      return args[++i];
    };

    if (arg == "--help") {
      flag();
      out.help = true;
    } else if (arg == "--structure") {
      const std::string_view v = value();
      if (v.empty()) throw OptionError("pmds bench: --structure needs at least one name");
      out.structure_spec = std::string(v);
    } else if (arg == "--workload") {
      const std::string_view v = value();
      const auto w = parse_workload(v);
      if (!w)
        throw OptionError("pmds bench: unknown workload \"" + std::string(v) +
                          "\"; choose one of set, ycsb-a, ycsb-b, ycsb-c, ycsb-e, pairs, heap, "
                          "atomicfloat");
      c.workload = *w;
      out.workload_given = true;
    } else if (arg == "--threads") {
      c.threads.clear();
      for (const auto part : detail::split_commas(value()))
        c.threads.push_back(
            static_cast<unsigned>(detail::parse_u64("--threads", part, 1, pmds::max_threads - 2)));
    } else if (arg == "--duration") {
      c.duration_s = detail::parse_double("--duration", value(), 0, 86400, true);
    } else if (arg == "--warmup") {
      c.warmup_s = detail::parse_double("--warmup", value(), 0, 86400, false);
    } else if (arg == "--reps") {
      c.reps = static_cast<unsigned>(detail::parse_u64("--reps", value(), 1, 1000));
    } else if (arg == "--key-range") {
      c.key_range = detail::parse_u64("--key-range", value(), 2, 1ull << 40);
    } else if (arg == "--prefill") {
      c.prefill = detail::parse_u64("--prefill", value(), 0, 1ull << 40);
    } else if (arg == "--reads") {
      c.reads_pct = static_cast<unsigned>(detail::parse_u64("--reads", value(), 0, 100));
      reads_given = true;
    } else if (arg == "--distribution") {
      const std::string_view v = value();
      if (v == "uniform")
        c.distribution = Distribution::uniform;
      else if (v == "zipfian")
        c.distribution = Distribution::zipfian;
      else
        throw OptionError("pmds bench: --distribution is uniform or zipfian, not \"" +
                          std::string(v) + "\"");
    } else if (arg == "--seed") {
      c.seed = detail::parse_u64("--seed", value(), 0, std::numeric_limits<std::uint64_t>::max());
    } else if (arg == "--fence-latency") {
      c.fence_latency_ns =
          static_cast<std::uint32_t>(detail::parse_u64("--fence-latency", value(), 0, 10'000'000));
    } else if (arg == "--pool") {
      const std::string_view v = value();
      if (v.empty()) throw OptionError("pmds bench: --pool needs a file path");
      c.pool_path = std::string(v);
    } else if (arg == "--json") {
      const std::string_view v = value();
      if (v.empty()) throw OptionError("pmds bench: --json needs a file path");
      c.json_path = std::string(v);
    } else if (arg == "--csv") {
      const std::string_view v = value();
      if (v.empty()) throw OptionError("pmds bench: --csv needs a file path");
      c.csv_path = std::string(v);
    } else if (arg == "--buckets") {
      c.buckets = detail::parse_u64("--buckets", value(), 1, 1ull << 36);
    } else if (arg == "--pool-size") {
      c.pool_size = detail::parse_size("--pool-size", value());
    } else if (arg == "--zipf-theta") {
      c.zipf_theta = detail::parse_double("--zipf-theta", value(), 0, 0.999999, true);
    } else if (arg == "--local-work") {
      c.local_work = static_cast<unsigned>(detail::parse_u64("--local-work", value(), 0, 1 << 20));
    } else if (arg == "--no-recovery") {
      flag();
      c.measure_recovery = false;
    } else if (arg == "--no-isolate") {
      flag();
      c.isolate = false;
    } else if (arg == "--no-table") {
      flag();
      c.table = false;
    } else if (arg == "--progress") {
      flag();
      c.progress = true;
    } else {
      throw OptionError("pmds bench: unknown option " + std::string(arg) +
                        " (see pmds bench --help)");
    }
  }

  // Checks across options.
  if (reads_given && c.workload != Workload::set)
    throw OptionError(std::string("pmds bench: --reads applies to --workload set only; ") +
                      to_string(c.workload) + " has a fixed mix");
  if (c.prefill && (c.workload == Workload::set || is_ycsb(c.workload)) && *c.prefill > c.key_range)
    throw OptionError("pmds bench: --prefill " + std::to_string(*c.prefill) +
                      " exceeds --key-range " + std::to_string(c.key_range) +
                      ": a set holds at most one element per key");
  if (c.prefill && (c.workload == Workload::pairs || c.workload == Workload::atomicfloat) &&
      *c.prefill != 0)
    throw OptionError(std::string("pmds bench: --prefill does not apply to --workload ") +
                      to_string(c.workload) + " (it runs from empty)");
  for (std::size_t i = 0; i < c.threads.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (c.threads[i] == c.threads[j])
        throw OptionError("pmds bench: --threads lists " + std::to_string(c.threads[i]) + " twice");
  return out;
}

}  // namespace pmds::bench

// pmds bench — one result record (a structure × thread count) and its three outputs: a
// terminal table, JSON and CSV.
//
// JSON: {"pmds_bench": 1, "command": "...", "results": [record, ...]}; each record carries
// every parameter of its run, so records from many files can be grouped into sweeps
// (scripts/plot.py). Required fields (issue 3): structure, threads, workload, mops (median over
// repetitions, Mops/s), mops_min, mops_max, flushes_per_op, fences_per_op, bytes_per_element.
// Numbers that do not apply (bytes per element of an empty queue, recovery of a transient
// structure) are null. CSV: the same scalar fields, one row per record, op counts as columns.
// The JSON is written with nlohmann-json (Debian: nlohmann-json3-dev).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "pmds/bench/workload.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/pm/access.hpp"

namespace pmds::bench {

// One structure's throughput relative to another's, taken round by round: repetition i of both
// ran in the same round of the interleaved schedule (pmds bench runs repetition i of every
// structure before repetition i+1 of any), so a slow spell of a noisy machine falls on both.
// median, min and max are over the rounds' ratios.
struct Ratio {
  std::string to;  // the reference structure, e.g. "hash/transient"
  double median = 0, min = 0, max = 0;
  std::size_t rounds = 0;
};

// The median of v (the mean of the middle two for an even count); v must not be empty.
inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Record {
  // What ran.
  std::string structure, technique, kind, criterion, workload, distribution;
  std::string status = "ok";  // "ok" or "unsupported" (note says why)
  std::string note;
  unsigned threads = 0;
  std::uint64_t key_range = 0, prefill = 0, seed = 0;
  std::uint64_t buckets = 0;  // the bucket count hash tables are given (others ignore it)
  unsigned reads_pct = 0, reps = 0, local_work = 0;
  double duration_s = 0, warmup_s = 0, zipf_theta = 0;
  std::uint32_t fence_latency_ns = 0;
  std::string backend, flush_instruction;
  // Throughput, Mops/s.
  std::vector<double> mops_reps;
  double mops = 0, mops_min = 0, mops_max = 0;
  double seconds_total = 0;  // measured seconds summed over repetitions
  // Operations actually run in the measured phases, summed over repetitions.
  OpCounts ops;
  // readwhilewriting: the writer's operations in the measured phases (summed over repetitions),
  // and their rate in Mops/s (finish_throughput()); unset for other workloads.
  OpCounts writer_ops;
  std::optional<double> writer_mops;
  // Persistence instructions issued in the measured phases, summed over workers and
  // repetitions (counting backend; 0 under hardware), and per operation (finish_counts()).
  pm::Counters counters;
  double flushes_per_op = 0, fences_per_op = 0, rmws_per_op = 0;
  // Epoch-checkpointed structures (InCLL's): epoch boundaries and objects logged whole to the
  // external log during warm-up and measurement, summed over repetitions, and their quotient.
  CheckpointCounts checkpoints;
  std::optional<double> logged_per_epoch;
  // Space at the end of the first repetition's run.
  std::uint64_t elements_after_prefill = 0;  // counted successful prefill operations
  std::uint64_t elements = 0;                // then, after the run (prefill + net inserts)
  double pool_bytes = 0;                     // bytes of the pool slots the structure holds
  // malloc'd bytes (all arenas) the structure held; unset where malloc statistics are not
  // available (sanitizer builds replace malloc), and then bytes_per_element is unset too.
  std::optional<double> dram_bytes;
  // The same for an empty structure, built alone: the fixed cost (anchors, sentinels, bucket
  // arrays), which the per-element figures leave out.
  double fixed_pool_bytes = 0;
  std::optional<double> fixed_dram_bytes;
  // Bytes per element beyond the empty structure: (end - empty) / elements.
  std::optional<double> bytes_per_element, pool_bytes_per_element, dram_bytes_per_element;
  // Throughput per round relative to the transient twin ("hash/transient" for "hash/soft") and
  // to the psync-bound reference ("hash/psync-bound"), where those ran in the same invocation
  // (add_ratios()).
  std::optional<Ratio> ratio_to_transient, ratio_to_psync_bound;
  // Recovery after a process crash (durable structures).
  std::optional<double> recovery_ms;
  std::optional<std::uint64_t> recovery_elements, recovered_elements;
  std::uint64_t recovery_threads = 1;          // --recovery-threads (nbMontage structures)
  bool lazy_recovery = false;                  // --lazy-recovery (InCLL Masstrees)
  std::uint64_t key_size = 8, value_size = 8;  // --key-size, --value-size (byte-string maps)

  bool ok() const { return status == "ok"; }

  // Adds the repetitions of `later`, a record of the same structure, workload and thread count
  // run afterwards (the CLI's interleaved repetitions). Space and recovery stay this record's:
  // they are measured in the first repetition only.
  void merge_repetitions(const Record& later) {
    mops_reps.insert(mops_reps.end(), later.mops_reps.begin(), later.mops_reps.end());
    ops += later.ops;
    writer_ops += later.writer_ops;
    counters += later.counters;
    checkpoints += later.checkpoints;
    seconds_total += later.seconds_total;
    reps += later.reps;
    finish_throughput();
    finish_counts();
  }

  // Per-operation persistence counts from the sums.
  void finish_counts() {
    const double n = static_cast<double>(ops.total());
    flushes_per_op = n > 0 ? static_cast<double>(counters.flushes) / n : 0;
    fences_per_op = n > 0 ? static_cast<double>(counters.fences) / n : 0;
    rmws_per_op = n > 0 ? static_cast<double>(counters.rmws) / n : 0;
    if (checkpoints.epochs > 0)
      logged_per_epoch =
          static_cast<double>(checkpoints.logged_objects) / static_cast<double>(checkpoints.epochs);
  }

  // Median of the repetitions (the mean of the middle two for an even count), min and max.
  // The writer's rate over all repetitions' measured seconds.
  void finish_throughput() {
    if (mops_reps.empty()) return;
    mops = median_of(mops_reps);
    const auto [lo, hi] = std::minmax_element(mops_reps.begin(), mops_reps.end());
    mops_min = *lo;
    mops_max = *hi;
    if (writer_ops.total() > 0 && seconds_total > 0)
      writer_mops = static_cast<double>(writer_ops.total()) / seconds_total / 1e6;
  }
  void finish_bytes() {
    if (elements == 0) return;
    const double n = static_cast<double>(elements);
    pool_bytes_per_element = (pool_bytes - fixed_pool_bytes) / n;
    if (!dram_bytes || !fixed_dram_bytes) return;
    dram_bytes_per_element = (*dram_bytes - *fixed_dram_bytes) / n;
    bytes_per_element = *pool_bytes_per_element + *dram_bytes_per_element;
  }
  // The empty structure's bytes, pool and DRAM (unset where DRAM cannot be measured).
  std::optional<double> fixed_bytes() const {
    if (!fixed_dram_bytes) return std::nullopt;
    return fixed_pool_bytes + *fixed_dram_bytes;
  }
};

// The ratio of r to reference, round by round, or nullopt if they did not run the same rounds.
inline std::optional<Ratio> ratio_between(const Record& r, const Record& reference) {
  if (!r.ok() || !reference.ok() || r.mops_reps.empty() ||
      r.mops_reps.size() != reference.mops_reps.size())
    return std::nullopt;
  std::vector<double> per_round;
  for (std::size_t i = 0; i < r.mops_reps.size(); ++i) {
    if (reference.mops_reps[i] <= 0) return std::nullopt;
    per_round.push_back(r.mops_reps[i] / reference.mops_reps[i]);
  }
  const auto [lo, hi] = std::minmax_element(per_round.begin(), per_round.end());
  return Ratio{reference.structure, median_of(per_round), *lo, *hi, per_round.size()};
}

// Sets every record's ratios to the records of its structure's transient twin and
// "psync-bound" technique with the same workload and thread count, where those are among
// `records`. The twin of technique "t" or "t-variant" is "t-transient" where one ran
// (Fatourou et al.'s combining objects with persistence compiled out: queue/pbcomb-transient for
// queue/pbcomb and queue/pbcomb-durable), else the structure's "transient".
inline void add_ratios(std::vector<Record>& records) {
  const auto family = [](const std::string& name) { return name.substr(0, name.find('/')); };
  const auto find = [&](const Record& r, const std::string& technique) -> const Record* {
    const std::string name = family(r.structure) + "/" + technique;
    for (const Record& o : records)
      if (o.structure == name && o.workload == r.workload && o.threads == r.threads) return &o;
    return nullptr;
  };
  const auto is_transient = [](const std::string& t) {
    return t == "transient" || (t.size() > 10 && t.ends_with("-transient"));
  };
  for (Record& r : records) {
    if (is_transient(r.technique)) continue;
    const Record* twin = find(r, r.technique.substr(0, r.technique.find('-')) + "-transient");
    if (twin == nullptr) twin = find(r, "transient");
    if (twin != nullptr) r.ratio_to_transient = ratio_between(r, *twin);
    if (r.technique == "psync-bound") continue;
    if (const Record* bound = find(r, "psync-bound"))
      r.ratio_to_psync_bound = ratio_between(r, *bound);
  }
}

namespace detail {

using Json = nlohmann::ordered_json;

// The scalar fields of a record, in output order (the JSON record's first fields, the CSV
// columns); null where a number does not apply.
inline Json scalar_fields(const Record& r) {
  const auto optional = [](const auto& x) { return x ? Json(*x) : Json(nullptr); };
  const auto ratio_median = [](const auto& x) { return x ? Json(x->median) : Json(nullptr); };
  const auto ratio_min = [](const auto& x) { return x ? Json(x->min) : Json(nullptr); };
  const auto ratio_max = [](const auto& x) { return x ? Json(x->max) : Json(nullptr); };
  return {{"structure", r.structure},
          {"technique", r.technique},
          {"kind", r.kind},
          {"criterion", r.criterion},
          {"workload", r.workload},
          {"threads", r.threads},
          {"status", r.status},
          {"note", r.note},
          {"mops", r.mops},
          {"mops_min", r.mops_min},
          {"mops_max", r.mops_max},
          {"writer_mops", optional(r.writer_mops)},
          {"flushes_per_op", r.flushes_per_op},
          {"fences_per_op", r.fences_per_op},
          {"rmws_per_op", r.rmws_per_op},
          {"logged_per_epoch", optional(r.logged_per_epoch)},
          {"bytes_per_element", optional(r.bytes_per_element)},
          {"pool_bytes_per_element", optional(r.pool_bytes_per_element)},
          {"dram_bytes_per_element", optional(r.dram_bytes_per_element)},
          {"elements", r.elements},
          {"elements_after_prefill", r.elements_after_prefill},
          {"pool_bytes", r.pool_bytes},
          {"dram_bytes", optional(r.dram_bytes)},
          {"fixed_bytes", optional(r.fixed_bytes())},
          {"fixed_pool_bytes", r.fixed_pool_bytes},
          {"fixed_dram_bytes", optional(r.fixed_dram_bytes)},
          {"ratio_to_transient", ratio_median(r.ratio_to_transient)},
          {"ratio_to_transient_min", ratio_min(r.ratio_to_transient)},
          {"ratio_to_transient_max", ratio_max(r.ratio_to_transient)},
          {"ratio_to_psync_bound", ratio_median(r.ratio_to_psync_bound)},
          {"ratio_to_psync_bound_min", ratio_min(r.ratio_to_psync_bound)},
          {"ratio_to_psync_bound_max", ratio_max(r.ratio_to_psync_bound)},
          {"recovery_ms", optional(r.recovery_ms)},
          {"recovery_elements", optional(r.recovery_elements)},
          {"recovered_elements", optional(r.recovered_elements)},
          {"recovery_threads", r.recovery_threads},
          {"lazy_recovery", r.lazy_recovery},
          {"key_size", r.key_size},
          {"value_size", r.value_size},
          {"ops", r.ops.total()},
          {"seconds", r.seconds_total},
          {"distribution", r.distribution},
          {"zipf_theta", r.zipf_theta},
          {"key_range", r.key_range},
          {"prefill", r.prefill},
          {"buckets", r.buckets},
          {"reads_pct", r.reads_pct},
          {"duration_s", r.duration_s},
          {"warmup_s", r.warmup_s},
          {"reps", r.reps},
          {"local_work", r.local_work},
          {"seed", r.seed},
          {"fence_latency_ns", r.fence_latency_ns},
          {"backend", r.backend},
          {"flush_instruction", r.flush_instruction}};
}

// CSV numbers: six significant digits; empty where the number does not apply.
inline std::string csv_number(double x) {
  if (!std::isfinite(x)) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

inline std::string csv_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_number_float()) return csv_number(v.get<double>());
  return v.dump();
}

}  // namespace detail

// NaN and infinities are written as null.
inline void write_json(std::ostream& out, const std::vector<Record>& records,
                       const std::string& command) {
  using detail::Json;
  Json results = Json::array();
  for (const Record& r : records) {
    Json record = detail::scalar_fields(r);
    record["mops_reps"] = r.mops_reps;
    Json& mix = record["op_mix"] = Json::object();
    for (std::size_t k = 0; k < op_type_count; ++k)
      if (r.ops.calls[k] != 0)
        mix[to_string(static_cast<Op>(k))] = {{"calls", r.ops.calls[k]},
                                              {"successes", r.ops.successes[k]}};
    results.push_back(std::move(record));
  }
  const Json doc = {{"pmds_bench", 1}, {"command", command}, {"results", std::move(results)}};
  out << doc.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

inline std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

inline void write_csv(std::ostream& out, const std::vector<Record>& records) {
  bool first = true;
  const detail::Json header = detail::scalar_fields(Record{});
  for (const auto& [name, value] : header.items()) {
    out << (first ? "" : ",") << name;
    first = false;
  }
  for (std::size_t k = 0; k < op_type_count; ++k) {
    const std::string op = to_string(static_cast<Op>(k));
    out << ",calls_" << op << ",successes_" << op;
  }
  out << ",mops_reps\n";
  for (const Record& r : records) {
    first = true;
    const detail::Json fields = detail::scalar_fields(r);
    for (const auto& [name, value] : fields.items()) {
      out << (first ? "" : ",") << csv_cell(detail::csv_text(value));
      first = false;
    }
    for (std::size_t k = 0; k < op_type_count; ++k)
      out << "," << r.ops.calls[k] << "," << r.ops.successes[k];
    std::string reps;
    for (std::size_t k = 0; k < r.mops_reps.size(); ++k) {
      if (k != 0) reps += ';';
      reps += detail::csv_number(r.mops_reps[k]);
    }
    out << "," << csv_cell(reps) << "\n";
  }
}

// The ratio table: every record with a ratio, the median of its per-round ratios to the
// transient twin and to psync-bound, with their spread [min - max] over the rounds.
inline void write_ratio_table(std::ostream& out, const std::vector<Record>& records) {
  std::size_t name_width = 9;
  bool any = false;
  for (const Record& r : records) {
    if (!r.ratio_to_transient && !r.ratio_to_psync_bound) continue;
    name_width = std::max(name_width, r.structure.size());
    any = true;
  }
  if (!any) return;
  const auto cell = [](const std::optional<Ratio>& x) {
    char c[48];
    // Two decimals; three significant digits for ratios far below 1 (Izraelevitz: ~0.01).
    if (x && x->max < 0.1)
      std::snprintf(c, sizeof c, "%.3g [%.3g - %.3g]", x->median, x->min, x->max);
    else if (x)
      std::snprintf(c, sizeof c, "%.2f [%.2f - %.2f]", x->median, x->min, x->max);
    else
      std::snprintf(c, sizeof c, "-");
    return std::string(c);
  };
  char line[256];
  std::snprintf(line, sizeof line, "%-*s %-11s %3s %22s %22s %6s\n", static_cast<int>(name_width),
                "structure", "workload", "thr", "/ transient twin", "/ psync-bound", "rounds");
  out << line;
  for (const Record& r : records) {
    if (!r.ratio_to_transient && !r.ratio_to_psync_bound) continue;
    const std::size_t rounds =
        r.ratio_to_transient ? r.ratio_to_transient->rounds : r.ratio_to_psync_bound->rounds;
    std::snprintf(line, sizeof line, "%-*s %-11s %3u %22s %22s %6zu\n",
                  static_cast<int>(name_width), r.structure.c_str(), r.workload.c_str(), r.threads,
                  cell(r.ratio_to_transient).c_str(), cell(r.ratio_to_psync_bound).c_str(), rounds);
    out << line;
  }
}

// The terminal table: one line per record.
inline void write_table(std::ostream& out, const std::vector<Record>& records) {
  std::size_t name_width = 9;
  for (const Record& r : records) name_width = std::max(name_width, r.structure.size());
  char line[512];
  std::snprintf(line, sizeof line, "%-*s %-11s %3s %9s %19s %8s %8s %8s %10s %11s  %s\n",
                static_cast<int>(name_width), "structure", "workload", "thr", "Mops/s",
                "[min - max]", "flush/op", "fence/op", "B/elem", "fixed B", "recovery", "op mix");
  out << line;
  for (const Record& r : records) {
    if (!r.ok()) {
      std::snprintf(line, sizeof line, "%-*s %-11s %3u  %s (%s)\n", static_cast<int>(name_width),
                    r.structure.c_str(), r.workload.c_str(), r.threads, r.status.c_str(),
                    r.note.c_str());
      out << line;
      continue;
    }
    char range[40], bytes[24], fixed[24], recovery[24];
    std::snprintf(range, sizeof range, "[%.3g - %.3g]", r.mops_min, r.mops_max);
    if (r.bytes_per_element)
      std::snprintf(bytes, sizeof bytes, "%.1f", *r.bytes_per_element);
    else
      std::snprintf(bytes, sizeof bytes, "-");
    if (const auto f = r.fixed_bytes())
      std::snprintf(fixed, sizeof fixed, "%.0f", *f);
    else
      std::snprintf(fixed, sizeof fixed, "-");
    if (r.recovery_ms)
      std::snprintf(recovery, sizeof recovery, "%.2f ms", *r.recovery_ms);
    else
      std::snprintf(recovery, sizeof recovery, "-");
    // The mix actually run, as percentages of the measured operations.
    std::string mix;
    const double total = static_cast<double>(r.ops.total());
    for (std::size_t k = 0; k < op_type_count && total > 0; ++k) {
      if (r.ops.calls[k] == 0) continue;
      char part[48];
      std::snprintf(part, sizeof part, "%s%s %.1f%%", mix.empty() ? "" : ", ",
                    to_string(static_cast<Op>(k)),
                    100.0 * static_cast<double>(r.ops.calls[k]) / total);
      mix += part;
    }
    if (r.writer_mops) {
      char part[48];
      std::snprintf(part, sizeof part, "; writer %.3f Mops/s", *r.writer_mops);
      mix += part;
    }
    // Three decimals down to 0.01 Mops/s, three significant digits below (slow durable ones).
    char mops[24];
    std::snprintf(mops, sizeof mops, r.mops >= 0.01 ? "%.3f" : "%.3g", r.mops);
    std::snprintf(line, sizeof line, "%-*s %-11s %3u %9s %19s %8.2f %8.2f %8s %10s %11s  %s\n",
                  static_cast<int>(name_width), r.structure.c_str(), r.workload.c_str(), r.threads,
                  mops, range, r.flushes_per_op, r.fences_per_op, bytes, fixed, recovery,
                  mix.c_str());
    out << line;
  }
}

}  // namespace pmds::bench

// pmds bench — runs the benchmark harness (pmds/bench/runner.hpp) on registered structures and
// writes the table (stdout), JSON and CSV. Options: pmds/bench/options.hpp (--help), parsed by
// main.cpp.
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "pmds/bench/options.hpp"
#include "pmds/bench/progress.hpp"
#include "pmds/bench/record.hpp"
#include "pmds/bench/runner.hpp"
#include "pmds/pm/instructions.hpp"
#include "pmds/registry/entries.hpp"

namespace pmds::cli {

namespace {

// Ctrl-C or kill: remove the temporary pool file of the run in progress, then die of the signal.
extern "C" void on_interrupt(int sig) {
  bench::remove_temporary_pool_now();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Opens an output file before the run starts, so a bad path fails in a second, not after it.
std::optional<std::ofstream> open_output(const std::string& path, const char* option) {
  if (path.empty()) return std::nullopt;
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  if (!out)
    throw Error("pmds bench: cannot write " + std::string(option) + " file \"" + path + "\"");
  return out;
}

}  // namespace

int bench_command(const bench::ParsedBench& parsed, std::string_view command_line) {
  const auto usage_error = [](const std::string& message) {
    std::cerr << message << "\n";
    return exit_usage;
  };
  std::vector<const registry::Entry*> chosen;
  if (!parsed.structure_spec.empty()) {
    try {
      chosen = registry::select(parsed.structure_spec);
    } catch (const Error& e) {  // registry::UnknownStructure
      return usage_error(e.what());
    }
  } else {
    for (const registry::Entry& e : registry::entries())
      if (!parsed.workload_given || !bench::unsupported_reason(e, parsed.config.workload))
        chosen.push_back(&e);
    if (chosen.empty())
      return usage_error(registry::entries().empty()
                             ? std::string("pmds bench: no structure is registered yet")
                             : std::string("pmds bench: no registered structure supports "
                                           "--workload ") +
                                   bench::to_string(parsed.config.workload) + " (see pmds list)");
  }
  if (parsed.config.key_size != 8 || parsed.config.value_size != 8) {
    if (std::none_of(chosen.begin(), chosen.end(),
                     [](const registry::Entry* e) { return e->byte_strings; }))
      return usage_error(
          "pmds bench: --key-size and --value-size apply to the byte-string maps (the -bytes "
          "entries: hash-bytes, skiplist-bytes and masstree-bytes; see pmds list), and none is "
          "selected");
  }
  const std::string& pool = parsed.config.pool_path;
  std::error_code exists_ec;
  if (!pool.empty() && std::filesystem::exists(pool, exists_ec))
    return usage_error("pmds bench: --pool " + pool +
                       " already exists; pmds bench makes its own pool there and will not "
                       "overwrite a file (remove it or choose another path)");

  const bench::Config& cfg = parsed.config;
  try {
    auto json = open_output(cfg.json_path, "--json");
    auto csv = open_output(cfg.csv_path, "--csv");
    auto ratio_file = open_output(cfg.ratios_path, "--ratios");
    pm::set_fence_latency_ns(cfg.fence_latency_ns);
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);

    // Repetitions are interleaved: repetition r of every structure runs before repetition r+1
    // of any, so that a slow spell of a noisy machine (other tenants, frequency changes) falls on
    // all the structures compared rather than on whichever ran then; the ratios between them
    // are what the benchmarks are for. Each (structure, repetition) still gets a fresh structure
    // and prefill, as before; space and recovery are measured in the first repetition.
    bench::Progress progress(cfg.progress);
    std::vector<std::vector<bench::Record>> per_structure(chosen.size());
    for (unsigned rep = 0; rep < cfg.reps; ++rep) {
      for (std::size_t i = 0; i < chosen.size(); ++i) {
        const registry::Entry& e = *chosen[i];
        bench::Config one = cfg;
        if (!parsed.workload_given) one.workload = bench::default_workload(e.kind);
        if (one.workload != bench::Workload::set) one.reads_pct.reset();
        if (one.workload == bench::Workload::pairs || one.workload == bench::Workload::atomicfloat)
          one.prefill.reset();
        one.first_rep = rep;
        one.reps = 1;
        one.measure_recovery = cfg.measure_recovery && rep == 0;
        const std::string prefix = "[" + std::to_string(i + 1) + "/" +
                                   std::to_string(chosen.size()) + ", rep " +
                                   std::to_string(rep + 1) + "/" + std::to_string(cfg.reps) + "] ";
        auto got = bench::run_target(bench::target_of(e), one, &progress, prefix);
        std::vector<bench::Record>& mine = per_structure[i];
        if (mine.empty()) {
          mine = std::move(got);
        } else {
          if (got.size() != mine.size())
            throw Error("pmds bench: internal error: repetitions returned different records");
          for (std::size_t j = 0; j < got.size(); ++j)
            if (got[j].ok()) mine[j].merge_repetitions(got[j]);
        }
      }
    }
    std::vector<bench::Record> records;
    for (auto& mine : per_structure) records.insert(records.end(), mine.begin(), mine.end());
    bench::add_ratios(records);
    progress.clear();

    // The ratios first: on a noisy machine they, not the absolute figures, are the result.
    std::ostringstream ratios;
    bench::write_ratio_table(ratios, records);
    if (cfg.table) {
      std::cout << "# pmds bench: backend " << pm::to_string(pm::backend) << ", flush "
                << pm::to_string(pm::flush_instruction()) << ", fence latency "
                << cfg.fence_latency_ns << " ns, " << bench::format_seconds(cfg.duration_s)
                << " s x " << cfg.reps << " reps (+" << bench::format_seconds(cfg.warmup_s)
                << " s warm-up), key range " << cfg.key_range << ", "
                << bench::to_string(cfg.distribution) << " keys\n";
      if (!ratios.str().empty())
        std::cout << "# throughput ratios, median of the per-round ratios [min - max]\n"
                  << ratios.str() << "\n";
      bench::write_table(std::cout, records);
    }
    if (json) {
      bench::write_json(*json, records, std::string(command_line));
      json->close();
      if (!*json) throw Error("pmds bench: writing " + cfg.json_path + " failed");
      std::cerr << "pmds bench: wrote " << cfg.json_path << "\n";
    }
    if (ratio_file) {
      *ratio_file << ratios.str();
      ratio_file->close();
      if (!*ratio_file) throw Error("pmds bench: writing " + cfg.ratios_path + " failed");
      std::cerr << "pmds bench: wrote " << cfg.ratios_path << "\n";
    }
    if (csv) {
      bench::write_csv(*csv, records);
      csv->close();
      if (!*csv) throw Error("pmds bench: writing " + cfg.csv_path + " failed");
      std::cerr << "pmds bench: wrote " << cfg.csv_path << "\n";
    }
    if (!cfg.pool_path.empty() && std::filesystem::exists(cfg.pool_path))
      std::cerr << "pmds bench: kept the last pool at " << cfg.pool_path << "\n";
  } catch (const std::exception& e) {
    std::cerr << "pmds bench: error: " << e.what() << "\n";
    return exit_failure;
  }
  return exit_ok;
}

}  // namespace pmds::cli

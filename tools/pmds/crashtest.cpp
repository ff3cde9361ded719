// pmds-crashlab — the crash lab program `pmds crashtest` execs (simulated backend).
//
// For each selected structure: the simulated power failures here (pmds/crashlab/sim_lab.hpp),
// then the real process crashes in pmds-crashlab-process (hardware backend, next to this
// program; one backend per program), whose JSON result line is merged in. Prints a progress
// line, every violation with its excerpt and replay command, the summary table; writes the JSON
// records; exits 1 on any violation or lab error.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "crashtest_options.hpp"
#include "crashtest_select.hpp"
#include "pmds/crashlab/mutant_text.hpp"
#include "pmds/crashlab/mutation.hpp"
#include "pmds/crashlab/process.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/sim_lab.hpp"

namespace {

using namespace pmds;
using namespace pmds::crashlab;

// Runs pmds-crashlab-process for one structure and merges its result into r.
void run_process_part(const registry::Entry& e, const crashtest::Options& o, LabResult& r) {
  const auto program = self_directory() / "pmds-crashlab-process";
  if (::access(program.c_str(), X_OK) != 0) {
    r.errors.push_back("process crashes: " + program.string() +
                       " is not built (build target pmds-crashlab-process)");
    return;
  }
  std::vector<std::string> argv{program.string(),
                                "--structure",
                                std::string(e.name),
                                "--process-crashes",
                                std::to_string(o.process_crashes),
                                "--threads",
                                std::to_string(o.threads),
                                "--process-ops",
                                std::to_string(o.process_ops),
                                "--keys",
                                std::to_string(o.keys),
                                "--reads",
                                std::to_string(o.reads),
                                "--seed",
                                std::to_string(o.seed),
                                "--json-line",
                                "--quiet"};
  if (o.prefill) argv.insert(argv.end(), {"--prefill", std::to_string(o.prefill)});
  if (o.stop_at_first) argv.push_back("--stop-at-first");
  if (o.keep_histories) argv.push_back("--keep-histories");
  if (o.process_grow) argv.push_back("--process-grow");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error("pipe failed");
  const pid_t pid = spawn(program.string(), argv, {}, -1, fds[1]);
  ::close(fds[1]);
  std::string out;
  char b[65536];
  ssize_t n;
  while ((n = ::read(fds[0], b, sizeof b)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(b, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  const ExitStatus st = wait_for(pid);
  const auto nl = out.find('\n');
  if (out.empty() || nl == std::string::npos) {
    r.errors.push_back("process crashes: pmds-crashlab-process " + st.describe() +
                       " without a result");
    return;
  }
  const LabResult p = result_from_json(nlohmann::json::parse(out.substr(0, nl)));
  r.process_crashes += p.process_crashes;
  r.violations += p.violations;
  r.undecided += p.undecided;
  r.killed_recoveries += p.killed_recoveries;
  r.killed_recoveries_midway += p.killed_recoveries_midway;
  r.growth_kills += p.growth_kills;
  r.process_seconds += p.process_seconds;
  if (r.first_violation_process_crash == 0)
    r.first_violation_process_crash = p.first_violation_process_crash;
  for (const auto& v : p.details) r.details.push_back(v);
  for (const auto& x : p.errors) r.errors.push_back(x);
}

// The simulated lab's options from the command line's.
SimOptions sim_options(const crashtest::Options& o, const std::optional<ReplayPoint>& replay,
                       const std::vector<pm::sim::Mutant>& mutants) {
  SimOptions so;
  so.workload = crashtest::workload_options(o, o.ops);
  so.vary_mix = o.mix == "vary";
  so.seed = o.seed;
  so.crashes = o.crashes;
  so.images = o.images;
  so.crashes_per_run = o.crashes_per_run;
  so.recovery_crash_percent = o.recovery_crashes;
  so.switch_probability = o.switch_probability;
  so.persist_switch_probability = o.persist_switch_probability;
  so.pct_percent = o.pct;
  so.pct_depth = o.pct_depth;
  so.return_crash_percent = o.return_crashes;
  so.background_crash_percent = o.background_crashes;
  so.grow_percent = o.grow;
  so.growth_crash_percent = o.growth_crashes;
  so.pool_size = o.pool_mib << 20;  // (0: the lab's default)
  so.stop_at_first_violation = o.stop_at_first;
  so.keep_histories = o.keep_histories || replay.has_value();
  so.keep_details = 5;
  so.replay = replay;
  so.mutants = mutants;
  return so;
}

// Writes the JSON records to o.json_file (if given); false (after saying why) when it cannot.
bool write_json(const crashtest::Options& o, const Json& records) {
  if (o.json_file.empty()) return true;
  std::ofstream f(o.json_file);
  f << records.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  if (f) return true;
  std::cerr << "pmds crashtest: cannot write " << o.json_file << "\n";
  return false;
}

// `pmds crashtest --mutate`: a mutation run per structure (crashlab/mutation.hpp).
int run_mutation_command(const crashtest::Options& o,
                         const std::vector<const registry::Entry*>& entries,
                         const SimOptions& base) {
  Json records = Json::array();
  bool ok = true;
  for (const registry::Entry* e : entries) {
    SimOptions so = base;
    // A Masstree's border holds 15 keys: 8 never split one, and a split is what its external
    // log records and recovery applies (masstree/incll's log-apply flush and its fence's
    // dropped flushes survived 300 crash points at 8 keys, caught within 109 at 64).
    if (o.mutate_default_keys && (e->structure == "masstree" || e->structure == "masstree-bytes"))
      so.workload.key_range = 32;
    const auto progress = [&](const MutantResult& m) {
      if (o.quiet) return;
      std::fprintf(stderr, "%-24s %-13s %-62s %s after %llu crashes, %.1f s\n", e->name.data(),
                   mode_name(m.mutant.mode), m.site.location.c_str(), verdict_of(m),
                   static_cast<unsigned long long>(crashes_run(m)), m.seconds);
    };
    // The sim test programs a site may name (killing_test): the build's test/, beside bin/.
    const MutationResult r =
        run_mutation(*e, so, o.census_crashes, o.planned_rerun, PMDS_SOURCE_DIR,
                     self_directory().parent_path() / "test", progress);
    std::cout << mutation_table(r);
    if (!r.census_passed()) {
      for (const auto& v : r.census.details) std::cout << describe(r.structure, v);
      for (const auto& x : r.census.errors)
        std::cout << "LAB ERROR " << r.structure << ": " << x << "\n";
      ok = false;
    } else if (r.score() < o.min_score) {
      std::cout << "  score below --min-score " << o.min_score << "\n";
      ok = false;
    }
    std::cout << "\n";
    records.push_back(mutation_json(r));
  }
  if (!write_json(o, records)) return 1;
  return ok ? 0 : 1;
}

int run(int argc, char** argv) {
  CLI::App app{crashtest::description, "pmds crashtest"};
  crashtest::Options o;
  crashtest::add_options(app, o);
  if (const auto done = cli::parse_command_line(app, argc, argv)) return *done;
  const auto entries = crashtest::select(o);
  if (!entries) return 2;
  std::vector<pm::sim::Mutant> mutants;
  if (!o.mutant.empty()) {
    const auto parsed = crashlab::parse_mutants(o.mutant);
    if (!parsed) {
      std::cerr << "pmds crashtest: --mutant needs skip@FILE:LINE[:COL] or "
                   "drop-flushes@FILE:LINE[:COL], comma separated, not \""
                << o.mutant << "\"\n";
      return 2;
    }
    mutants = *parsed;
  }
  std::optional<ReplayPoint> replay;
  if (!o.replay.empty()) {
    replay = ReplayPoint::parse(o.replay);
    if (!replay || entries->size() != 1) {
      std::cerr
          << "pmds crashtest: --replay needs W:E:I[:PHASE@N[:PHASE@N]][:pct@S] and exactly one "
             "--structure\n";
      return 2;
    }
  }
  if (o.mutate) return run_mutation_command(o, *entries, sim_options(o, replay, mutants));
  std::vector<LabResult> results;
  const bool show_progress = !o.quiet && ::isatty(2);
  for (const registry::Entry* e : *entries) {
    SimOptions so = sim_options(o, replay, mutants);
    if (!o.quiet)
      so.progress = [&](const LabResult& r) {
        const double rate =
            r.sim_seconds > 0 ? static_cast<double>(r.simulated_crashes) / r.sim_seconds : 0;
        std::fprintf(
            stderr, "%s%-44s simulated %llu/%llu  images %llu  violations %llu  %.1f crashes/s%s",
            show_progress ? "\r" : "", e->name.data(),
            static_cast<unsigned long long>(r.simulated_crashes),
            static_cast<unsigned long long>(o.crashes),
            static_cast<unsigned long long>(r.images_checked),
            static_cast<unsigned long long>(r.violations), rate, show_progress ? "" : "\n");
      };
    LabResult r;
    r.structure = std::string(e->name);
    r.criterion = criterion_label(e->criterion);
    if (o.crashes > 0 || replay) {
      if (!o.quiet && !show_progress) so.progress = nullptr;  // only the final line when piped
      r = run_simulated(*e, so);
      if (!o.quiet)
        std::fprintf(stderr, "%s%-44s simulated %llu  images %llu  violations %llu  %.1f s\n",
                     show_progress ? "\r" : "", e->name.data(),
                     static_cast<unsigned long long>(r.simulated_crashes),
                     static_cast<unsigned long long>(r.images_checked),
                     static_cast<unsigned long long>(r.violations), r.sim_seconds);
      // A mutant that matches no executed site changes nothing: a passing run would say
      // nothing about it (a stale line number, a typo). Only a run that ended on its own
      // reports all its sites.
      if (!replay && r.violations == 0 && r.errors.empty())
        for (const pm::sim::Mutant& m : mutants)
          if (!std::any_of(r.sites.begin(), r.sites.end(), [&m](const SiteUse& s) {
                const auto at = crashlab::parse_mutant("skip@" + s.location);
                return at && m.matches(at->file.c_str(), at->line, at->column);
              }))
            r.errors.push_back("--mutant " + crashlab::mutant_text(m) +
                               " matched no persistence site the runs executed (pmds crashtest "
                               "--mutate --structure " +
                               r.structure + " lists them)");
    }
    if (o.process_crashes > 0 && !replay && !(o.stop_at_first && r.violations > 0)) {
      run_process_part(*e, o, r);
      if (!o.quiet)
        std::fprintf(stderr, "%-44s process crashes %llu  violations so far %llu  %.1f s\n",
                     e->name.data(), static_cast<unsigned long long>(r.process_crashes),
                     static_cast<unsigned long long>(r.violations), r.process_seconds);
    }
    for (const auto& v : r.details) std::cout << describe(r.structure, v);
    for (const auto& x : r.errors) std::cout << "LAB ERROR " << r.structure << ": " << x << "\n";
    if (r.violations > r.details.size())
      std::cout << "(" << r.violations - r.details.size() << " more violations of " << r.structure
                << " not shown)\n";
    results.push_back(std::move(r));
  }
  std::cout << "\n" << summary_table(results) << "\n" << recovery_crash_table(results);
  Json records = Json::array();
  for (const auto& r : results) records.push_back(result_json(r));
  if (!write_json(o, records)) return 1;
  for (const auto& r : results)
    if (!r.passed()) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "pmds crashtest: " << e.what() << "\n";
    return 1;
  }
}

// pmds crash lab — the lab measures itself: mutation runs (docs/ARCHITECTURE.md §3,
// "Mutation: the lab measures itself"). Simulated backend only.
//
// run_mutation(entry, options) first runs the lab on the structure as it is (the census): it
// must pass, and it lists the persistence sites (pm/site.hpp) its workloads and recoveries
// executed. Then, for each executed site, one lab run with that site mutated (pm::sim::Mutant):
//   skip          the site issues nothing (a flush or fence not issued, a persist issuing
//                 neither, a non-temporal store made plain);
//   drop-flushes  (fence and persist sites whose fence completed another site's flushes) the
//                 fence is issued but the flushes pending at it never become durable through it.
// Each mutant gets the same crash budget and stops at its first violation; one that survives it
// under the random scheduler alone (--mutate's default) is run again under planned preemptions
// at the same budget (the table's "pct" column; not with an explicit --pct 0). A mutant the lab
// catches is a removal the lab proves wrong; a survivor is either redundant (the structure is
// correct without it, here) or a blind spot of the lab. The score is caught / mutants.
//
// A site known to be redundant says so where it is written, so that the reason is read beside
// the instruction and the report shows it: the comment block right above the site's line (or a
// comment on the line itself) holds "Mutant survives:" followed by the reason, which names the
// later instruction that orders what the site would (e.g. "the locked CAS that follows orders
// the flush on x86"). A survivor whose site says so is reported "redundant" with that reason; one
// that does not is "SURVIVED": a blind spot of the lab until someone explains it. The lab reads
// the reason from the source tree it was built from (redundancy_reason).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <sys/wait.h>

#include "pmds/crashlab/mutant_text.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/sim_lab.hpp"

namespace pmds::crashlab {

struct MutantResult {
  SiteUse site;
  pm::sim::Mutant mutant;
  bool caught = false;
  std::uint64_t crashes = 0;                // crash points the mutant's lab reached
  std::uint64_t first_violation_crash = 0;  // 0: none
  std::string command;                      // replays the first violation, or reruns the lab
  double seconds = 0;
  std::vector<std::string> errors;  // the lab could not run this mutant (counted as not caught)
  std::string redundant;            // a survivor whose site says why it is redundant: the reason
  // A mutant the lab's workloads cannot reach but a sim test kills (killing_test): the test, as
  // "PROGRAM FILTER", run with the mutant and seen to fail. Counted as caught.
  std::string killed_by_test;
  bool planned_rerun = false;  // the random scheduler missed it; the counts are the rerun's
};

struct MutationResult {
  std::string structure;
  LabResult census;  // the unmutated run
  std::vector<MutantResult> mutants;
  std::uint64_t budget = 0;  // crash points per mutant
  double seconds = 0;

  std::size_t caught() const {
    std::size_t n = 0;
    for (const auto& m : mutants) n += m.caught;
    return n;
  }
  double score() const {
    return mutants.empty() ? 1.0 : static_cast<double>(caught()) / mutants.size();
  }
  // Survivors whose site says why they are redundant.
  std::size_t redundant() const {
    std::size_t n = 0;
    for (const auto& m : mutants) n += !m.caught && m.errors.empty() && !m.redundant.empty();
    return n;
  }
  // Mutants neither caught nor explained: the lab's open blind spots (errors included).
  std::size_t open() const { return mutants.size() - caught() - redundant(); }
  // The census must pass: mutants of a structure that already fails prove nothing.
  bool census_passed() const { return census.passed(); }
};

// The mutant of a site, from its location "FILE:LINE:COLUMN".
inline pm::sim::Mutant mutant_of(const SiteUse& site, pm::sim::MutationMode mode) {
  auto m = parse_mutant("skip@" + site.location);
  if (!m) throw Error("pmds crashtest: unreadable site location " + site.location);
  m->mode = mode;
  return *m;
}

// The comment on the site's line and the comment block right above it, joined into one line
// (empty when the source is not there to read).
inline std::string site_comment(const std::string& location,
                                const std::filesystem::path& source_root) {
  const auto colon2 = location.rfind(':');
  const auto colon1 = colon2 == std::string::npos ? colon2 : location.rfind(':', colon2 - 1);
  if (colon1 == std::string::npos) return {};
  const std::string file = location.substr(0, colon1);
  const std::size_t line = std::strtoull(location.c_str() + colon1 + 1, nullptr, 10);
  std::ifstream in(source_root / file);
  std::vector<std::string> lines;
  for (std::string l; lines.size() < line && std::getline(in, l);) lines.push_back(l);
  if (line == 0 || lines.size() < line) return {};
  const auto comment_of = [](const std::string& l) -> std::optional<std::string> {
    const auto at = l.find("//");
    if (at == std::string::npos) return std::nullopt;
    const auto text = l.find_first_not_of(' ', at + 2);
    return text == std::string::npos ? std::string() : l.substr(text);
  };
  // The block: the site's own line's comment, after the comments of the lines right above it.
  std::size_t first = line - 1;
  while (first > 0 && lines[first - 1].find_first_not_of(' ') != std::string::npos &&
         lines[first - 1].compare(lines[first - 1].find_first_not_of(' '), 2, "//") == 0)
    --first;
  std::string block;
  for (std::size_t i = first; i < line; ++i)
    if (const auto c = comment_of(lines[i])) block += (block.empty() ? "" : " ") + *c;
  return block;
}

// The reason the source gives for the site at `location` ("FILE:LINE:COLUMN", FILE relative to
// `source_root`) being redundant under `technique`: the text after "Mutant survives:" in the
// comment on its line or in the comment block right above it, to the block's end (or to the
// next marker), joined into one line. A site written once over several memory policies may hold
// for some of them only: "Mutant survives (izraelevitz):" or "(izraelevitz, flit)" gives a reason
// for those techniques alone, "(masstree/logging)" for that structure alone (`structure`: the
// entry's name). Empty when it gives none that applies, or when the source is not there to read
// (an installed lab).
inline std::string redundancy_reason(const std::string& location,
                                     const std::filesystem::path& source_root,
                                     std::string_view technique = {},
                                     std::string_view structure = {}) {
  const std::string block = site_comment(location, source_root);
  constexpr std::string_view marker = "Mutant survives";
  for (auto at = block.find(marker); at != std::string::npos;) {
    const auto next = block.find(marker, at + marker.size());
    std::string_view rest = std::string_view(block).substr(at + marker.size());
    rest = rest.substr(0, next == std::string::npos ? rest.size() : next - at - marker.size());
    bool applies = false;
    if (rest.starts_with(":")) {
      applies = true;
      rest.remove_prefix(1);
    } else if (rest.starts_with(" (") && rest.find("):") != std::string_view::npos) {
      const auto close = rest.find("):");
      // The techniques or structures named, separated by commas and spaces.
      std::string_view names = rest.substr(2, close - 2);
      while (!names.empty() && !applies) {
        const auto end = names.find_first_of(", ");
        const std::string_view name = names.substr(0, end);
        applies = !name.empty() && (name == technique || name == structure);
        names.remove_prefix(end == std::string_view::npos ? names.size() : end + 1);
      }
      rest.remove_prefix(close + 2);
    }
    if (applies) {
      const auto first = rest.find_first_not_of(' ');
      const auto last = rest.find_last_not_of(' ');
      return first == std::string_view::npos ? std::string()
                                             : std::string(rest.substr(first, last - first + 1));
    }
    at = next;
  }
  return {};
}

// The sim test the site's comment names as killing its mutants, where the lab's small workloads
// do not reach the window: "Mutant killed by test: PROGRAM FILTER" (a test program of the
// simulated backend and a gtest filter), as "PROGRAM FILTER"; empty when it names none.
inline std::string killing_test(const std::string& location,
                                const std::filesystem::path& source_root) {
  const std::string block = site_comment(location, source_root);
  constexpr std::string_view marker = "Mutant killed by test:";
  const auto at = block.find(marker);
  if (at == std::string::npos) return {};
  std::istringstream words(block.substr(at + marker.size()));
  std::string program, filter;
  if (!(words >> program >> filter)) return {};
  return program + " " + filter;
}

// Whether the test ("PROGRAM FILTER", killing_test) fails with the mutant and passes without
// it: PROGRAM is looked for in `test_directory` and run (at most 10 minutes each) with the mutant
// in PMDS_SIM_MUTANTS (test/support/sim_mutants_from_environment.cpp installs it), then without.
// False when the program is not there (an installed lab): the claim is then not checked, and
// the mutant stays open.
inline bool test_kills(const std::string& test, const pm::sim::Mutant& mutant,
                       const std::filesystem::path& test_directory) {
  const auto space = test.find(' ');
  const std::filesystem::path program = test_directory / test.substr(0, space);
  if (!std::filesystem::is_regular_file(program)) return false;
  // The exit status of the test run with `mutants` (-1: it did not end by itself in time).
  const auto run = [&](const std::string& mutants) {
    const std::string command = "PMDS_SIM_MUTANTS='" + mutants + "' timeout 600 '" +
                                program.string() + "' --gtest_filter='" + test.substr(space + 1) +
                                "' > /dev/null 2>&1";
    const int status = std::system(command.c_str());
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) == 124) return -1;
    return WEXITSTATUS(status);
  };
  // 1 is GoogleTest's status for a failed test; the program refuses a mutant text it cannot
  // read with 2 (test/support/sim_mutants_from_environment.cpp), which kills nothing.
  const int mutated = run(mutant_text(mutant));
  return mutated == 1 && run("") == 0;
}

// `o.crashes` is the budget of each mutant; `census_crashes` that of the unmutated run.
// `planned_rerun`: a mutant that survives a run with no planned preemptions (o.pct_percent 0) is
// run again under PCT alone.
// `source_root`: the source tree the sites' reasons are read from (redundancy_reason,
// killing_test); `test_directory`: where the sim test programs a site names are (test_kills).
inline MutationResult run_mutation(const registry::Entry& e, SimOptions o,
                                   std::uint64_t census_crashes, bool planned_rerun,
                                   const std::filesystem::path& source_root,
                                   const std::filesystem::path& test_directory,
                                   const std::function<void(const MutantResult&)>& progress = {}) {
  const auto start = std::chrono::steady_clock::now();
  MutationResult out;
  out.structure = std::string(e.name);
  out.budget = o.crashes;
  o.stop_at_first_violation = true;
  o.replay.reset();
  o.progress = nullptr;

  SimOptions census = o;
  census.crashes = census_crashes;
  census.stop_at_first_violation = false;
  census.mutants.clear();
  out.census = run_simulated(e, census);
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (!out.census_passed()) {
    out.seconds = elapsed();
    return out;
  }

  for (const SiteUse& site : out.census.sites) {
    std::vector<pm::sim::MutationMode> modes{pm::sim::MutationMode::skip};
    if (site.drains_other_sites) modes.push_back(pm::sim::MutationMode::drop_flushes);
    for (const auto mode : modes) {
      MutantResult m;
      m.site = site;
      m.mutant = mutant_of(site, mode);
      o.mutants = {m.mutant};
      LabResult r = run_simulated(e, o);
      // A survivor of the random scheduler gets a second run, all of it under planned
      // preemptions (PCT, one hash bucket), at the same budget: a removed write-back whose window
      // needs two preemptions shows only there (hash/montage's advance fence, epoch_system.hpp,
      // survived 300 crash points at --pct 0 and was caught at the 27th under PCT), while the
      // random scheduler's window switches catch most removals sooner (see --pct's default).
      SimOptions ran = o;  // the options of the run reported
      if (planned_rerun && r.violations == 0 && r.errors.empty() && o.pct_percent == 0) {
        ran.pct_percent = 100;
        const double first_seconds = r.sim_seconds;
        r = run_simulated(e, ran);
        r.sim_seconds += first_seconds;
        m.planned_rerun = true;
      }
      m.caught = r.violations > 0;
      m.crashes = r.simulated_crashes;
      m.first_violation_crash = r.first_violation_crash;
      m.seconds = r.sim_seconds;
      m.errors = r.errors;
      m.command = !r.details.empty()
                      ? r.details.front().replay
                      : lab_command(e, ran) + " --crashes " + std::to_string(ran.crashes);
      if (!m.caught && m.errors.empty())
        m.redundant = redundancy_reason(m.site.location, source_root, e.technique, e.name);
      if (!m.caught && m.errors.empty() && m.redundant.empty()) {
        const std::string test = killing_test(m.site.location, source_root);
        if (!test.empty() && test_kills(test, m.mutant, test_directory)) {
          m.caught = true;
          m.killed_by_test = test;
        }
      }
      if (progress) progress(m);
      out.mutants.push_back(std::move(m));
    }
  }
  out.seconds = elapsed();
  return out;
}

// A mutant's verdict: "ERROR" (the lab could not run it), "caught", "caught-by-test" (the sim
// test its site names failed with it), "redundant" (a survivor whose site says why) or
// "SURVIVED" (an open blind spot).
inline const char* verdict_of(const MutantResult& m) {
  return !m.errors.empty()           ? "ERROR"
         : !m.killed_by_test.empty() ? "caught-by-test"
         : m.caught                  ? "caught"
         : !m.redundant.empty()      ? "redundant"
                                     : "SURVIVED";
}

// The crashes a mutant's line reports: up to the first violation when the lab caught it, else
// the whole budget it ran (a survivor, or one a sim test killed).
inline std::uint64_t crashes_run(const MutantResult& m) {
  return m.caught && m.killed_by_test.empty() ? m.first_violation_crash : m.crashes;
}

inline const char* mode_name(pm::sim::MutationMode m) {
  return m == pm::sim::MutationMode::skip ? "skip" : "drop-flushes";
}

// One line per mutant, then the score.
inline std::string mutation_table(const MutationResult& r) {
  std::string s;
  char line[1024];
  if (!r.census_passed()) {
    return "mutation " + r.structure +
           ": the unmutated structure does not pass the lab; no mutant was run\n";
  }
  std::snprintf(line, sizeof line,
                "mutation %s: %zu sites executed, %zu mutants, %llu crashes each\n",
                r.structure.c_str(), r.census.sites.size(), r.mutants.size(),
                static_cast<unsigned long long>(r.budget));
  s += line;
  std::snprintf(line, sizeof line, "  %-58s %-11s %9s %8s %-12s %-9s %7s %-3s\n", "site", "kind",
                "workload", "recovery", "mutant", "verdict", "crashes", "pct");
  s += line;
  for (const auto& m : r.mutants) {
    std::snprintf(line, sizeof line, "  %-58s %-11s %9llu %8llu %-12s %-9s %7llu %-3s\n",
                  m.site.location.c_str(), m.site.kind.c_str(),
                  static_cast<unsigned long long>(m.site.workload),
                  static_cast<unsigned long long>(m.site.recovery), mode_name(m.mutant.mode),
                  verdict_of(m), static_cast<unsigned long long>(crashes_run(m)),
                  m.planned_rerun ? "yes" : "");
    s += line;
  }
  for (const auto& m : r.mutants) {
    if (!m.killed_by_test.empty())
      s += "  caught-by-test " + mutant_text(m.mutant) + ": " + m.killed_by_test + "\n";
    if (m.caught) continue;
    s += "  " + std::string(verdict_of(m)) + " " + mutant_text(m.mutant) + ": " + m.command + "\n";
    if (!m.redundant.empty()) s += "    why: " + m.redundant + "\n";
    for (const auto& x : m.errors) s += "    " + x + "\n";
  }
  std::snprintf(line, sizeof line,
                "  score %zu/%zu = %.2f; %zu redundant (their sites say why), %zu open   %.1f s\n",
                r.caught(), r.mutants.size(), r.score(), r.redundant(), r.open(), r.seconds);
  s += line;
  return s;
}

inline Json mutation_json(const MutationResult& r) {
  Json mutants = Json::array();
  for (const auto& m : r.mutants)
    mutants.push_back({{"site", site_json(m.site)},
                       {"mutant", mutant_text(m.mutant)},
                       {"mode", mode_name(m.mutant.mode)},
                       {"caught", m.caught},
                       {"crashes", m.crashes},
                       {"first_violation_crash", m.first_violation_crash},
                       {"command", m.command},
                       {"seconds", m.seconds},
                       {"errors", m.errors},
                       {"redundant", m.redundant},
                       {"killed_by_test", m.killed_by_test},
                       {"planned_rerun", m.planned_rerun}});
  return {{"structure", r.structure},   {"census", result_json(r.census)},
          {"budget", r.budget},         {"mutants", mutants},
          {"caught", r.caught()},       {"score", r.score()},
          {"redundant", r.redundant()}, {"open", r.open()},
          {"seconds", r.seconds}};
}

}  // namespace pmds::crashlab

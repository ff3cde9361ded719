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
// Each mutant gets the same crash budget and stops at its first violation. A mutant the lab
// catches is a removal the lab proves wrong; a survivor is either redundant (the structure is
// correct without it, here) or a blind spot of the lab. The score is caught / mutants.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

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
  // The census must pass: mutants of a structure that already fails prove nothing.
  bool census_passed() const { return census.passed(); }
};

// The mutant of a site, from its location "FILE:LINE:COLUMN".
inline pm::sim::Mutant mutant_of(const SiteUse& site, pm::sim::MutationMode mode) {
  auto m = pm::sim::Mutant::parse("skip@" + site.location);
  if (!m) throw Error("pmds crashtest: unreadable site location " + site.location);
  m->mode = mode;
  return *m;
}

// `o.crashes` is the budget of each mutant; `census_crashes` that of the unmutated run.
inline MutationResult run_mutation(const registry::Entry& e, SimOptions o,
                                   std::uint64_t census_crashes,
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
      const LabResult r = run_simulated(e, o);
      m.caught = r.violations > 0;
      m.crashes = r.simulated_crashes;
      m.first_violation_crash = r.first_violation_crash;
      m.seconds = r.sim_seconds;
      m.errors = r.errors;
      m.command = !r.details.empty()
                      ? r.details.front().replay
                      : lab_command(e, o) + " --crashes " + std::to_string(o.crashes);
      if (progress) progress(m);
      out.mutants.push_back(std::move(m));
    }
  }
  out.seconds = elapsed();
  return out;
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
  std::snprintf(line, sizeof line, "  %-58s %-11s %9s %8s %-12s %-8s %7s\n", "site", "kind",
                "workload", "recovery", "mutant", "caught", "crashes");
  s += line;
  for (const auto& m : r.mutants) {
    const std::string verdict = !m.errors.empty() ? "ERROR" : m.caught ? "caught" : "SURVIVED";
    std::snprintf(
        line, sizeof line, "  %-58s %-11s %9llu %8llu %-12s %-8s %7llu\n", m.site.location.c_str(),
        m.site.kind.c_str(), static_cast<unsigned long long>(m.site.workload),
        static_cast<unsigned long long>(m.site.recovery), mode_name(m.mutant.mode), verdict.c_str(),
        static_cast<unsigned long long>(m.caught ? m.first_violation_crash : m.crashes));
    s += line;
  }
  for (const auto& m : r.mutants) {
    if (m.caught) continue;
    s += "  " + std::string(m.errors.empty() ? "survivor" : "error") + " " + m.mutant.text() +
         ": " + m.command + "\n";
    for (const auto& x : m.errors) s += "    " + x + "\n";
  }
  std::snprintf(line, sizeof line, "  score %zu/%zu = %.2f   %.1f s\n", r.caught(),
                r.mutants.size(), r.score(), r.seconds);
  s += line;
  return s;
}

inline Json mutation_json(const MutationResult& r) {
  Json mutants = Json::array();
  for (const auto& m : r.mutants)
    mutants.push_back({{"site", site_json(m.site)},
                       {"mutant", m.mutant.text()},
                       {"mode", mode_name(m.mutant.mode)},
                       {"caught", m.caught},
                       {"crashes", m.crashes},
                       {"first_violation_crash", m.first_violation_crash},
                       {"command", m.command},
                       {"seconds", m.seconds},
                       {"errors", m.errors}});
  return {{"structure", r.structure}, {"census", result_json(r.census)},
          {"budget", r.budget},       {"mutants", mutants},
          {"caught", r.caught()},     {"score", r.score()},
          {"seconds", r.seconds}};
}

}  // namespace pmds::crashlab

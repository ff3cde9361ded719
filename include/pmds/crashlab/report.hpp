// pmds crash lab — results: per-structure counts, the violations found (criterion, object,
// excerpt, the command that replays each), the summary table and the JSON record.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/crashlab/history.hpp"

namespace pmds::crashlab {

// The phases of a recovery process, in the order it runs them (crashlab/child.hpp), each a
// place the lab may crash it.
enum class RecoveryPhase : std::uint8_t {
  open,
  finish,
  pending,
  reexecute,
  contents,
  continuation,
  close,
  reopen,
  reread
};
inline constexpr std::size_t recovery_phase_count = 9;
inline constexpr const char* recovery_phase_names[recovery_phase_count] = {
    "open",         "finish", "pending", "reexecute", "contents",
    "continuation", "close",  "reopen",  "reread"};
// The phases that read the contents back (never crashed where reading runs operations:
// crashlab/child.hpp, reading_operates).
constexpr bool reads_contents(RecoveryPhase p) {
  return p == RecoveryPhase::contents || p == RecoveryPhase::reread;
}
constexpr const char* to_string(RecoveryPhase p) {
  return recovery_phase_names[static_cast<std::size_t>(p)];
}
inline std::optional<RecoveryPhase> recovery_phase_named(std::string_view name) {
  for (std::size_t i = 0; i < recovery_phase_count; ++i)
    if (name == recovery_phase_names[i]) return static_cast<RecoveryPhase>(i);
  return std::nullopt;
}
struct Violation {
  std::string kind;       // "simulated" or "process"
  std::string scheduler;  // simulated: the run's scheduler, "random" or "pct" (scheduler.hpp)
  std::string criterion;  // durable | buffered | detectable | linearizability | recovery | leak
  std::string object;     // "key 17", "queue", ...
  std::string message;
  std::vector<std::string> excerpt;
  std::string replay;              // one command that replays it
  std::string history_file;        // the whole history, when kept
  std::uint64_t crash_number = 0;  // which crash of its kind (1-based) revealed it
};

// A persistence site the lab's runs executed (pm/site.hpp), for `pmds crashtest --mutate`.
struct SiteUse {
  std::string location;  // FILE:LINE:COLUMN, FILE from the repository root where it can tell
  std::string kind;      // flush | fence | persist | nontemporal
  std::uint64_t workload = 0, recovery = 0;  // executions in workload runs / in recoveries
  bool drains_other_sites = false;           // a fence of it completed another site's flushes
};

// A compiler's file name shortened to the repository's layout ("/src/pmds/include/pmds/x.hpp"
// -> "include/pmds/x.hpp"), so a location reads, and matches a mutant, from any checkout.
inline std::string site_location(std::string_view file, std::uint32_t line, std::uint32_t column) {
  for (const std::string_view root : {"include/pmds/", "test/", "tools/", "bench/", "examples/"}) {
    const auto at = file.rfind(root);
    if (at != std::string_view::npos && (at == 0 || file[at - 1] == '/')) {
      file = file.substr(at);
      break;
    }
  }
  return std::string(file) + ":" + std::to_string(line) + ":" + std::to_string(column);
}

// Adds `use` to `sites` (counts summed with an entry of the same location).
inline void add_site(std::vector<SiteUse>& sites, const SiteUse& use) {
  for (SiteUse& s : sites)
    if (s.location == use.location) {
      s.workload += use.workload;
      s.recovery += use.recovery;
      s.drains_other_sites = s.drains_other_sites || use.drains_other_sites;
      return;
    }
  sites.push_back(use);
}

inline Json site_json(const SiteUse& s) {
  return {{"location", s.location},
          {"kind", s.kind},
          {"workload", s.workload},
          {"recovery", s.recovery},
          {"drains_other_sites", s.drains_other_sites}};
}
inline SiteUse site_from_json(const nlohmann::json& j) {
  SiteUse s;
  s.location = j.value("location", s.location);
  s.kind = j.value("kind", s.kind);
  s.workload = j.value("workload", s.workload);
  s.recovery = j.value("recovery", s.recovery);
  s.drains_other_sites = j.value("drains_other_sites", s.drains_other_sites);
  return s;
}

struct LabResult {
  std::string structure;
  std::string criterion;
  std::uint64_t simulated_crashes = 0;        // crash points reached
  std::uint64_t images_checked = 0;           // crash images recovered and checked
  std::uint64_t recovery_crashes = 0;         // recoveries crashed on purpose, then recovered again
  std::uint64_t nested_recovery_crashes = 0;  // ... whose crash image's recovery crashed again
  // Recovery crashes (nested ones included) by the phase they landed in.
  std::array<std::uint64_t, recovery_phase_count> recovery_crash_phases{};
  std::uint64_t killed_recoveries = 0;  // process lab: recovery processes killed with SIGKILL
  std::uint64_t killed_recoveries_midway = 0;  // of those, killed before their recovery ended
  // Detectable entries: operations a recovery invoked again with their tickets (recover_pending
  // said "not taken"), crashed recoveries' included.
  std::uint64_t reexecuted_operations = 0;
  // Buffered maps with an epoch bound: the deepest loss measured, in epochs (verdict.hpp,
  // epochs_lost); nullopt when no crash lost a completed update.
  std::optional<std::uint64_t> max_epochs_lost;
  std::uint64_t process_crashes = 0;  // kill -9 of a process using a real pool
  std::uint64_t violations = 0;       // images / process crashes whose check failed
  // Histories the checker could not decide (counted as violations too).
  std::uint64_t undecided = 0;
  std::uint64_t first_violation_crash = 0;          // simulated crash number, 0: none
  std::uint64_t first_violation_process_crash = 0;  // process crash number, 0: none
  std::uint64_t workload_runs = 0;
  std::uint64_t events = 0;  // simulator events executed by the workloads (crash-point range)
  // The simulator's diagnostic (docs/ARCHITECTURE.md §3): times a thread stored after loading a
  // value another thread had not made durable yet. Informational: not a violation by itself.
  std::uint64_t not_durable_reads = 0;
  std::uint64_t background_steps = 0;    // rounds of the structure's background work (scheduled)
  std::uint64_t background_crashes = 0;  // crash points aimed inside one of them
  std::uint64_t pool_growths = 0;        // growths of the workloads' pools (simulated)
  std::uint64_t growth_crashes = 0;      // crash points aimed at a pool's growth (simulated)
  std::uint64_t growth_kills = 0;        // process crashes that interrupted a growth
  double sim_seconds = 0, process_seconds = 0;
  std::vector<Violation> details;   // the first few violations
  std::vector<std::string> errors;  // the lab could not run (not a verdict on the structure)
  std::vector<SiteUse> sites;       // persistence sites executed (simulated lab)

  double seconds() const { return sim_seconds + process_seconds; }
  bool passed() const { return violations == 0 && errors.empty(); }
};

inline Json violation_json(const Violation& v) {
  Json j = {{"kind", v.kind},       {"criterion", v.criterion}, {"object", v.object},
            {"message", v.message}, {"replay", v.replay},       {"crash", v.crash_number}};
  if (!v.scheduler.empty()) j["scheduler"] = v.scheduler;
  if (!v.history_file.empty()) j["history_file"] = v.history_file;
  j["excerpt"] = v.excerpt;
  return j;
}

// Reading back what violation_json and result_json wrote: a missing field keeps its default.
inline Violation violation_from_json(const nlohmann::json& j) {
  Violation v;
  v.kind = j.value("kind", v.kind);
  v.scheduler = j.value("scheduler", v.scheduler);
  v.criterion = j.value("criterion", v.criterion);
  v.object = j.value("object", v.object);
  v.message = j.value("message", v.message);
  v.replay = j.value("replay", v.replay);
  v.history_file = j.value("history_file", v.history_file);
  v.crash_number = j.value("crash", v.crash_number);
  v.excerpt = j.value("excerpt", v.excerpt);
  return v;
}

// {"open": N, "finish": N, ...}: recovery crashes by phase.
inline Json recovery_phases_json(const std::array<std::uint64_t, recovery_phase_count>& counts) {
  Json j = Json::object();
  for (std::size_t i = 0; i < recovery_phase_count; ++i) j[recovery_phase_names[i]] = counts[i];
  return j;
}

// "open 12, finish 3, ...": recovery crashes by phase, for people.
inline std::string recovery_phases_text(
    const std::array<std::uint64_t, recovery_phase_count>& counts) {
  std::string s;
  for (std::size_t i = 0; i < recovery_phase_count; ++i) {
    if (!s.empty()) s += ", ";
    s += std::string(recovery_phase_names[i]) + " " + std::to_string(counts[i]);
  }
  return s;
}

// The JSON record of one structure (`pmds crashtest --json`).
inline Json result_json(const LabResult& r) {
  Json details = Json::array(), sites = Json::array();
  for (const auto& v : r.details) details.push_back(violation_json(v));
  for (const auto& s : r.sites) sites.push_back(site_json(s));
  return {{"structure", r.structure},
          {"criterion", r.criterion},
          {"simulated_crashes", r.simulated_crashes},
          {"images_checked", r.images_checked},
          {"recovery_crashes", r.recovery_crashes},
          {"nested_recovery_crashes", r.nested_recovery_crashes},
          {"recovery_crash_phases", recovery_phases_json(r.recovery_crash_phases)},
          {"killed_recoveries", r.killed_recoveries},
          {"killed_recoveries_midway", r.killed_recoveries_midway},
          {"reexecuted_operations", r.reexecuted_operations},
          {"max_epochs_lost", r.max_epochs_lost ? Json(*r.max_epochs_lost) : Json(nullptr)},
          {"process_crashes", r.process_crashes},
          {"violations", r.violations},
          {"undecided", r.undecided},
          {"first_violation_crash", r.first_violation_crash},
          {"first_violation_process_crash", r.first_violation_process_crash},
          {"workload_runs", r.workload_runs},
          {"simulator_events", r.events},
          {"not_durable_reads", r.not_durable_reads},
          {"background_steps", r.background_steps},
          {"background_crashes", r.background_crashes},
          {"pool_growths", r.pool_growths},
          {"growth_crashes", r.growth_crashes},
          {"growth_kills", r.growth_kills},
          {"simulated_seconds", r.sim_seconds},
          {"process_seconds", r.process_seconds},
          {"crashes_per_second",
           r.sim_seconds > 0 ? static_cast<double>(r.simulated_crashes) / r.sim_seconds : 0.0},
          {"details", details},
          {"errors", r.errors},
          {"sites", sites}};
}

inline LabResult result_from_json(const nlohmann::json& j) {
  LabResult r;
  r.structure = j.value("structure", r.structure);
  r.criterion = j.value("criterion", r.criterion);
  r.simulated_crashes = j.value("simulated_crashes", r.simulated_crashes);
  r.images_checked = j.value("images_checked", r.images_checked);
  r.recovery_crashes = j.value("recovery_crashes", r.recovery_crashes);
  r.nested_recovery_crashes = j.value("nested_recovery_crashes", r.nested_recovery_crashes);
  if (const auto it = j.find("recovery_crash_phases"); it != j.end() && it->is_object())
    for (std::size_t i = 0; i < recovery_phase_count; ++i)
      r.recovery_crash_phases[i] = it->value(recovery_phase_names[i], std::uint64_t{0});
  r.killed_recoveries = j.value("killed_recoveries", r.killed_recoveries);
  r.killed_recoveries_midway = j.value("killed_recoveries_midway", r.killed_recoveries_midway);
  r.reexecuted_operations = j.value("reexecuted_operations", r.reexecuted_operations);
  if (const auto it = j.find("max_epochs_lost"); it != j.end() && it->is_number())
    r.max_epochs_lost = it->get<std::uint64_t>();
  r.process_crashes = j.value("process_crashes", r.process_crashes);
  r.violations = j.value("violations", r.violations);
  r.undecided = j.value("undecided", r.undecided);
  r.first_violation_crash = j.value("first_violation_crash", r.first_violation_crash);
  r.first_violation_process_crash =
      j.value("first_violation_process_crash", r.first_violation_process_crash);
  r.workload_runs = j.value("workload_runs", r.workload_runs);
  r.events = j.value("simulator_events", r.events);
  r.not_durable_reads = j.value("not_durable_reads", r.not_durable_reads);
  r.background_steps = j.value("background_steps", r.background_steps);
  r.background_crashes = j.value("background_crashes", r.background_crashes);
  r.pool_growths = j.value("pool_growths", r.pool_growths);
  r.growth_crashes = j.value("growth_crashes", r.growth_crashes);
  r.growth_kills = j.value("growth_kills", r.growth_kills);
  r.sim_seconds = j.value("simulated_seconds", r.sim_seconds);
  r.process_seconds = j.value("process_seconds", r.process_seconds);
  for (const auto& v : j.value("details", nlohmann::json::array()))
    r.details.push_back(violation_from_json(v));
  r.errors = j.value("errors", r.errors);
  for (const auto& s : j.value("sites", nlohmann::json::array()))
    r.sites.push_back(site_from_json(s));
  return r;
}

// A violation for people: what, where, the excerpt, and how to replay it.
inline std::string describe(const std::string& structure, const Violation& v) {
  std::string s = "VIOLATION " + structure + " [" + v.criterion + "]";
  if (!v.object.empty()) s += " " + v.object;
  s += " (" + v.kind + " crash #" + std::to_string(v.crash_number) +
       (v.scheduler.empty() ? "" : ", " + v.scheduler + " scheduler") + "): " + v.message + "\n";
  for (const auto& l : v.excerpt) s += "    " + l + "\n";
  if (!v.history_file.empty())
    s += "  history: " + v.history_file + "  (tools/lincheck: lincheck -text FILE)\n";
  if (!v.replay.empty()) s += "  replay:  " + v.replay + "\n";
  return s;
}

// The summary table: structure, criterion, simulated crashes, images checked, process crashes,
// recoveries crashed on purpose, violations, histories the checker left undecided, time.
inline std::string summary_table(const std::vector<LabResult>& results) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-44s %-11s %9s %8s %8s %7s %10s %6s %8s\n", "structure",
                "criterion", "simulated", "images", "process", "rec.crs", "violations", "undec.",
                "time s");
  s += line;
  for (const auto& r : results) {
    std::snprintf(line, sizeof line, "%-44s %-11s %9llu %8llu %8llu %7llu %10llu %6llu %8.1f%s\n",
                  r.structure.c_str(), r.criterion.c_str(),
                  static_cast<unsigned long long>(r.simulated_crashes),
                  static_cast<unsigned long long>(r.images_checked),
                  static_cast<unsigned long long>(r.process_crashes),
                  static_cast<unsigned long long>(r.recovery_crashes),
                  static_cast<unsigned long long>(r.violations),
                  static_cast<unsigned long long>(r.undecided), r.seconds(),
                  r.errors.empty() ? "" : "  LAB ERROR");
    s += line;
  }
  return s;
}

// Where the recoveries were crashed: per structure, the recovery crashes (simulated) by the
// phase they landed in, how many of them were a crash of a crashed recovery's recovery, and the
// recovery processes killed with SIGKILL (process lab).
inline std::string recovery_crash_table(const std::vector<LabResult>& results) {
  std::string s =
      "recovery crashes by phase (simulated; nested: of a crashed recovery's "
      "recovery), recovery processes killed (process), crash points inside background steps, the "
      "workloads' pool growths (simulated) and kills inside a growth (process)\n";
  for (const auto& r : results)
    s += "  " + r.structure + ": " + recovery_phases_text(r.recovery_crash_phases) + "; nested " +
         std::to_string(r.nested_recovery_crashes) + "; killed " +
         std::to_string(r.killed_recoveries) + " (" + std::to_string(r.killed_recoveries_midway) +
         " midway)" +
         (r.background_steps > 0 ? "; in background steps " + std::to_string(r.background_crashes)
                                 : std::string()) +
         (r.pool_growths > 0
              ? "; pool growths " + std::to_string(r.pool_growths) +
                    " (crash points aimed at one " + std::to_string(r.growth_crashes) + ")"
              : std::string()) +
         (r.growth_kills > 0 ? "; kills inside a growth " + std::to_string(r.growth_kills)
                             : std::string()) +
         (r.criterion == "detectable"
              ? "; re-executed " + std::to_string(r.reexecuted_operations) + " operations"
              : std::string()) +
         (r.max_epochs_lost ? "; deepest loss " + std::to_string(*r.max_epochs_lost) + " epochs"
                            : std::string()) +
         "\n";
  return s;
}

}  // namespace pmds::crashlab

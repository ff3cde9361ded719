// pmds crash lab — results: per-structure counts, the violations found (criterion, object,
// excerpt, the command that replays each), the summary table and the JSON record.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "pmds/crashlab/history.hpp"
#include "pmds/crashlab/json.hpp"

namespace pmds::crashlab {

struct Violation {
  std::string kind;       // "simulated" or "process"
  std::string criterion;  // durable | buffered | detectable | linearizability | recovery | leak
  std::string object;     // "key 17", "queue", ...
  std::string message;
  std::vector<std::string> excerpt;
  std::string replay;              // one command that replays it
  std::string history_file;        // the whole history, when kept
  std::uint64_t crash_number = 0;  // which crash of its kind (1-based) revealed it
};

struct LabResult {
  std::string structure;
  std::string criterion;
  std::uint64_t simulated_crashes = 0;      // crash points reached
  std::uint64_t images_checked = 0;         // crash images recovered and checked
  std::uint64_t recovery_crashes = 0;       // recoveries crashed on purpose, then recovered again
  std::uint64_t process_crashes = 0;        // kill -9 of a process using a real pool
  std::uint64_t violations = 0;             // images / process crashes whose check failed
  std::uint64_t undecided = 0;              // histories the checker could not decide in time
  std::uint64_t first_violation_crash = 0;  // simulated crash number, 0: none
  std::uint64_t first_violation_process_crash = 0;  // process crash number, 0: none
  std::uint64_t workload_runs = 0;
  std::uint64_t events = 0;  // simulator events executed by the workloads (crash-point range)
  // The simulator's diagnostic (DESIGN.md §3): times a thread stored after loading a value
  // another thread had not made durable yet. Informational: not a violation by itself.
  std::uint64_t not_durable_reads = 0;
  double sim_seconds = 0, process_seconds = 0;
  std::vector<Violation> details;   // the first few violations
  std::vector<std::string> errors;  // the lab could not run (not a verdict on the structure)

  double seconds() const { return sim_seconds + process_seconds; }
  bool passed() const { return violations == 0 && errors.empty(); }
};

inline std::string violation_json(const Violation& v) {
  std::string s =
      "{\"kind\":" + json_string(v.kind) + ",\"criterion\":" + json_string(v.criterion) +
      ",\"object\":" + json_string(v.object) + ",\"message\":" + json_string(v.message) +
      ",\"replay\":" + json_string(v.replay) + ",\"crash\":" + std::to_string(v.crash_number);
  if (!v.history_file.empty()) s += ",\"history_file\":" + json_string(v.history_file);
  s += ",\"excerpt\":[";
  for (std::size_t i = 0; i < v.excerpt.size(); ++i)
    s += (i ? "," : "") + json_string(v.excerpt[i]);
  return s + "]}";
}

inline Violation violation_from_json(const json::Value& j) {
  Violation v;
  v.kind = j["kind"].str();
  v.criterion = j["criterion"].str();
  v.object = j["object"].str();
  v.message = j["message"].str();
  v.replay = j["replay"].str();
  v.history_file = j["history_file"].str();
  v.crash_number = j["crash"].u64();
  for (const auto& x : j["excerpt"].items) v.excerpt.push_back(x.str());
  return v;
}

// The JSON record of one structure (`pmds crashtest --json`).
inline std::string result_json(const LabResult& r) {
  const auto num = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", x);
    return std::string(b);
  };
  std::string s =
      "{\"structure\":" + json_string(r.structure) + ",\"criterion\":" + json_string(r.criterion) +
      ",\"simulated_crashes\":" + std::to_string(r.simulated_crashes) +
      ",\"images_checked\":" + std::to_string(r.images_checked) +
      ",\"recovery_crashes\":" + std::to_string(r.recovery_crashes) +
      ",\"process_crashes\":" + std::to_string(r.process_crashes) +
      ",\"violations\":" + std::to_string(r.violations) +
      ",\"undecided\":" + std::to_string(r.undecided) +
      ",\"first_violation_crash\":" + std::to_string(r.first_violation_crash) +
      ",\"first_violation_process_crash\":" + std::to_string(r.first_violation_process_crash) +
      ",\"workload_runs\":" + std::to_string(r.workload_runs) +
      ",\"simulator_events\":" + std::to_string(r.events) +
      ",\"not_durable_reads\":" + std::to_string(r.not_durable_reads) +
      ",\"simulated_seconds\":" + num(r.sim_seconds) +
      ",\"process_seconds\":" + num(r.process_seconds) + ",\"crashes_per_second\":" +
      num(r.sim_seconds > 0 ? static_cast<double>(r.simulated_crashes) / r.sim_seconds : 0) +
      ",\"details\":[";
  for (std::size_t i = 0; i < r.details.size(); ++i)
    s += (i ? "," : "") + violation_json(r.details[i]);
  s += "],\"errors\":[";
  for (std::size_t i = 0; i < r.errors.size(); ++i) s += (i ? "," : "") + json_string(r.errors[i]);
  return s + "]}";
}

inline LabResult result_from_json(const json::Value& j) {
  LabResult r;
  r.structure = j["structure"].str();
  r.criterion = j["criterion"].str();
  r.simulated_crashes = j["simulated_crashes"].u64();
  r.images_checked = j["images_checked"].u64();
  r.recovery_crashes = j["recovery_crashes"].u64();
  r.process_crashes = j["process_crashes"].u64();
  r.violations = j["violations"].u64();
  r.undecided = j["undecided"].u64();
  r.first_violation_crash = j["first_violation_crash"].u64();
  r.first_violation_process_crash = j["first_violation_process_crash"].u64();
  r.workload_runs = j["workload_runs"].u64();
  r.events = j["simulator_events"].u64();
  r.not_durable_reads = j["not_durable_reads"].u64();
  r.sim_seconds = j["simulated_seconds"].number();
  r.process_seconds = j["process_seconds"].number();
  for (const auto& v : j["details"].items) r.details.push_back(violation_from_json(v));
  for (const auto& e : j["errors"].items) r.errors.push_back(e.str());
  return r;
}

// A violation for people: what, where, the excerpt, and how to replay it.
inline std::string describe(const std::string& structure, const Violation& v) {
  std::string s = "VIOLATION " + structure + " [" + v.criterion + "]";
  if (!v.object.empty()) s += " " + v.object;
  s += " (" + v.kind + " crash #" + std::to_string(v.crash_number) + "): " + v.message + "\n";
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

}  // namespace pmds::crashlab

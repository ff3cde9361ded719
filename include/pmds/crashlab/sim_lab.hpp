// pmds crash lab — simulated power failures (docs/ARCHITECTURE.md §3–4). Simulated backend only.
//
// run_simulated(entry, options) crashes one registered structure `options.crashes` times:
//
//   lab process ── fork ──> workload process (one per workload run, seed W = mix(seed, run)):
//     creates the structure in a fresh pool file (attached to the Px86 simulator), runs the
//     prefill and then the workload threads under the deterministic scheduler, recording the
//     history. Crash points: `crashes_per_run` per run, most of them simulator events drawn
//     uniformly over the run (crash-point events are fences, RMWs and clflushes,
//     docs/ARCHITECTURE.md §3), some (`return_crash_percent`) the first event after an operation
//     returns while another thread is stalled with stores it has not flushed (scheduler.hpp).
//     At each one
//     the simulator calls the lab's handler just before the event takes effect, every other
//     thread stopped; the handler takes the snapshot, and for each of K crash images (all-minimum,
//     all-maximum, random choices per line; every image when there are at most K):
//       writes the image as a pool file,
//       starts a fresh recovery process (crashlab/child.hpp) that maps it at the pool's base,
//       recovers (sometimes crashed itself at a drawn event, then recovered again from that
//       image: recovery must be restartable), counts slots and reads the contents back, then
//       runs further operations, closes the pool cleanly and reads it again,
//       and judges it all (crashlab/verdict.hpp: recovery, leak, the entry's criterion, and
//       the operations after recovery).
//     The handler then returns and the run goes on to the next crash point (the model's state
//     does not depend on whether a handler ran, so every crash point replays alone).
//   The lab process collects the results (JSON lines through a pipe) and starts runs until the
//   requested number of crash points is reached.
//
// Reproducible: a run is a function of its seed (workload, schedule); a crash point is
// (W, event); an image is (W, event, index); so every violation prints one command,
// `<command> --structure NAME ... --replay W:E:I[:R]`, that replays exactly that check.
//
// PMDS_CRASHLAB_DUMP=DIR writes every checked history to DIR (for working on the checker).
#pragma once

#if !defined(PMDS_BACKEND_SIMULATED)
#error "pmds/crashlab/sim_lab.hpp needs the simulated backend (link pmds::pmds_simulated)"
#endif

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pmds/crashlab/process.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/sim_options.hpp"
#include "pmds/crashlab/sim_workload.hpp"

namespace pmds::crashlab {

// Crashes one structure `o.crashes` times (or replays o.replay) and checks every image.
inline LabResult run_simulated(const registry::Entry& e, const SimOptions& o) {
  LabResult r;
  r.structure = std::string(e.name);
  r.criterion = criterion_label(e.criterion);
  const auto start = std::chrono::steady_clock::now();
  const std::size_t ops_total = o.workload.threads * o.workload.ops;
  std::uint64_t estimate = 0;              // events of one run, from the previous run
  detail::RecoveryPhases recovery_phases;  // from the previous run's recoveries
  std::uint64_t steps = 0;                 // preemption points of the previous run
  std::uint64_t background_steps = 0;      // background steps of the previous run
  for (std::uint64_t run = 0; r.simulated_crashes < o.crashes || (o.replay && run == 0); ++run) {
    if (o.replay && run > 0) break;
    const std::uint64_t wseed = o.replay ? o.replay->workload_seed : mix_seed(o.seed, run);
    std::vector<std::uint64_t> events;
    detail::AimedCrashes aimed;  // none when replaying: the replayed point is an event
    if (o.replay) {
      events.push_back(o.replay->event);
    } else {
      const std::uint64_t range = estimate ? estimate : 60 * (ops_total + 8);
      const std::uint64_t all =
          std::min<std::uint64_t>(o.crashes_per_run, o.crashes - r.simulated_crashes);
      aimed.after_return = static_cast<std::size_t>(all * o.return_crash_percent / 100);
      if (e.has_background_work())
        aimed.in_background =
            std::min<std::size_t>(static_cast<std::size_t>(all * o.background_crash_percent / 100),
                                  static_cast<std::size_t>(all) - aimed.after_return);
      aimed.background_steps = background_steps;
      if (grown_run(o, wseed))
        aimed.in_growth = std::min<std::size_t>(
            static_cast<std::size_t>(all * o.growth_crash_percent / 100),
            static_cast<std::size_t>(all) - aimed.after_return - aimed.in_background);
      const std::uint64_t want = all - aimed.after_return - aimed.in_background - aimed.in_growth;
      std::mt19937_64 rng(mix_seed(wseed, 0xc4a54));
      for (std::uint64_t i = 0; i < want; ++i) events.push_back(rng() % range);
      std::sort(events.begin(), events.end());
      events.erase(std::unique(events.begin(), events.end()), events.end());
    }
    const ForkedChild child = fork_with_pipe();
    if (child.pid == 0) {
      stay_on_this_cpu();  // the run and its helpers work one at a time (process.hpp)
      const std::size_t keep =
          o.keep_details > r.details.size() ? o.keep_details - r.details.size() : 0;
      const std::uint64_t pct_steps = o.replay ? o.replay->pct_steps : steps ? steps : 1000;
      detail::WorkloadProcess(e, o, wseed, std::move(events), aimed, r.simulated_crashes + 1, keep,
                              recovery_phases, pct_steps, child.to_parent)
          .run();
    }
    ++r.workload_runs;
    std::string buffer;
    bool done = false;
    char b[65536];
    for (;;) {
      const ssize_t n = ::read(child.from_child, b, sizeof b);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      buffer.append(b, static_cast<std::size_t>(n));
      std::size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        const auto j = nlohmann::json::parse(buffer.substr(0, nl));
        buffer.erase(0, nl + 1);
        const auto count = [&j](const char* key) { return j.value(key, std::uint64_t{0}); };
        const std::string type = j.value("type", "");
        if (type == "crash") {
          ++r.simulated_crashes;
          r.images_checked += count("images");
          r.recovery_crashes += count("recovery_crashes");
          r.nested_recovery_crashes += count("nested_recovery_crashes");
          r.reexecuted_operations += count("reexecuted");
          r.background_crashes += j.value("background", false) ? 1 : 0;
          r.growth_crashes += j.value("growth", false) ? 1 : 0;
          if (const auto it = j.find("epochs_lost"); it != j.end() && it->is_number())
            r.max_epochs_lost = std::max(r.max_epochs_lost.value_or(0), it->get<std::uint64_t>());
          if (const auto it = j.find("recovery_crash_phases"); it != j.end())
            for (std::size_t i = 0; i < recovery_phase_count; ++i)
              r.recovery_crash_phases[i] += it->value(recovery_phase_names[i], std::uint64_t{0});
          r.undecided += count("undecided");
          const std::uint64_t found = count("violation_count");
          if (found > 0 && r.first_violation_crash == 0)
            r.first_violation_crash = r.simulated_crashes;
          r.violations += found;
          for (const auto& v : j.value("violations", nlohmann::json::array()))
            if (r.details.size() < o.keep_details) r.details.push_back(violation_from_json(v));
          r.sim_seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (o.progress) o.progress(r);
        } else if (type == "done") {
          done = true;
          estimate = std::max<std::uint64_t>(count("events"), 1);
          steps = count("steps");
          r.events += count("events");
          r.not_durable_reads += count("warnings");
          r.background_steps += count("background_steps");
          r.pool_growths += count("growths");
          background_steps = count("background_steps");
          for (const auto& s : j.value("sites", nlohmann::json::array()))
            add_site(r.sites, site_from_json(s));
          if (const auto it = j.find("recovery_phases"); it != j.end() && it->is_array())
            recovery_phases = detail::RecoveryPhases::from_json(*it);
          if (count("stolen") > 0)
            r.errors.push_back("scheduler: a thread blocked outside the access layer; run " +
                               std::to_string(wseed) + " may not replay exactly");
        } else if (type == "error") {
          r.errors.push_back("workload run " + std::to_string(wseed) + ": " +
                             j.value("message", ""));
        }
      }
    }
    ::close(child.from_child);
    const ExitStatus st = wait_for(child.pid);
    for (const auto& path : detail::scratch_paths(child.pid)) ::unlink(path.c_str());
    if (!st.exited || st.code != 0) {
      if (!(st.exited && st.code == 0) && r.errors.empty() &&
          !(o.stop_at_first_violation && r.violations > 0))
        r.errors.push_back("workload run " + std::to_string(wseed) + ": the process " +
                           st.describe());
    } else if (!done && !(o.stop_at_first_violation && r.violations > 0)) {
      r.errors.push_back("workload run " + std::to_string(wseed) + " ended without reporting");
    }
    if (!r.errors.empty()) break;
    if (o.stop_at_first_violation && r.violations > 0) break;
    if (o.replay) break;
    // A run whose crash points all fell after its end: its events tell the next one the range.
  }
  r.sim_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace pmds::crashlab

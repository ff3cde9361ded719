// pmds crash lab — what one simulated-crash run is asked to do (crashlab/sim_lab.hpp runs it):
// SimOptions, the replayable crash point (ReplayPoint, RecoveryCrash) and the command lines that
// run the lab again or replay one point. Each workload run's mix is drawn from its seed
// (run_workload), so a replay finds the same one.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/crashlab/mutant_text.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/workload.hpp"
#include "pmds/pm/sim/sites.hpp"
#include "pmds/registry/descriptor.hpp"

namespace pmds::crashlab {

// A crash of a recovery process: `offset` simulator events into its phase `phase` (or into the
// first later phase it runs, when it does not run that one): crashlab/child.hpp. Written
// "PHASE@OFFSET".
struct RecoveryCrash {
  RecoveryPhase phase = RecoveryPhase::open;
  std::uint64_t offset = 0;

  std::string text() const { return std::string(to_string(phase)) + "@" + std::to_string(offset); }
  static std::optional<RecoveryCrash> parse(std::string_view s) {
    const auto at = s.find('@');
    if (at == std::string_view::npos) return std::nullopt;
    const auto phase = recovery_phase_named(s.substr(0, at));
    const std::string_view digits = s.substr(at + 1);
    if (!phase || digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return RecoveryCrash{*phase, std::stoull(std::string(digits))};
  }
};

// One crash check to replay: workload seed, crash event (from the start of the workload
// process's recorded part), image index, where its recovery was crashed (if it was) and the
// recovery of that crash image crashed in turn (if it was), and for a run scheduled with PCT the
// preemption points its change points were drawn over (the previous run's count, which a
// replay does not have).
struct ReplayPoint {
  std::uint64_t workload_seed = 0;
  std::uint64_t event = 0;
  std::size_t image = 0;
  std::optional<RecoveryCrash> recovery_crash;
  std::optional<RecoveryCrash> recovery_crash2;
  std::uint64_t pct_steps = 0;  // 0: not a PCT run

  std::string text() const {
    std::string s =
        std::to_string(workload_seed) + ":" + std::to_string(event) + ":" + std::to_string(image);
    if (recovery_crash) s += ":" + recovery_crash->text();
    if (recovery_crash && recovery_crash2) s += ":" + recovery_crash2->text();
    if (pct_steps) s += ":pct@" + std::to_string(pct_steps);
    return s;
  }
  // Parses "W:E:I[:PHASE@OFFSET[:PHASE@OFFSET]][:pct@STEPS]"; nullopt when malformed.
  static std::optional<ReplayPoint> parse(std::string_view s) {
    // Digits only, within 64 bits.
    const auto number = [](std::string_view t) -> std::optional<std::uint64_t> {
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (t.empty() || t[0] == '-' || ec != std::errc{} || end != t.data() + t.size())
        return std::nullopt;
      return v;
    };
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (start <= s.size()) {
      const auto end = std::min(s.find(':', start), s.size());
      parts.push_back(s.substr(start, end - start));
      start = end + 1;
      if (end == s.size()) break;
    }
    std::uint64_t pct_steps = 0;
    if (parts.size() > 3 && parts.back().starts_with("pct@")) {
      const auto steps = number(parts.back().substr(4));
      if (!steps || *steps == 0) return std::nullopt;
      pct_steps = *steps;
      parts.pop_back();
    }
    if (parts.size() < 3 || parts.size() > 5) return std::nullopt;
    std::uint64_t numbers[3];
    for (std::size_t i = 0; i < 3; ++i) {
      const auto n = number(parts[i]);
      if (!n) return std::nullopt;
      numbers[i] = *n;
    }
    ReplayPoint p{numbers[0],   numbers[1],   static_cast<std::size_t>(numbers[2]),
                  std::nullopt, std::nullopt, pct_steps};
    if (parts.size() >= 4 && !(p.recovery_crash = RecoveryCrash::parse(parts[3])))
      return std::nullopt;
    if (parts.size() == 5 && !(p.recovery_crash2 = RecoveryCrash::parse(parts[4])))
      return std::nullopt;
    return p;
  }
};

struct SimOptions {
  WorkloadOptions workload;
  // Each workload run draws its own mix from its seed (run_workload below): one crash budget
  // then covers several key ranges and read shares, as a mutation run needs (a removal may be
  // caught under one mix only: ARCHITECTURE.md §3, "Mutation").
  bool vary_mix = false;
  std::uint64_t seed = 1;
  std::uint64_t crashes = 500;       // crash points to reach
  std::size_t images = 3;            // crash images per crash point
  std::size_t crashes_per_run = 25;  // crash points per workload run
  // Images whose recovery is itself crashed, at an event in one of its phases (RecoveryPhase,
  // crashlab/child.hpp) drawn first, each phase as likely; and of those, the share whose crash
  // image's recovery is crashed again (in its open, finish, pending or contents phase), so
  // recoveries are crashed two deep.
  unsigned recovery_crash_percent = 20;
  unsigned nested_recovery_crash_percent = 50;
  // After recovering an image, run further operations on the structure, close it cleanly and
  // reopen it (crashlab/child.hpp, make_continuation): a recovered structure must work on.
  bool continue_after_recovery = true;
  // Scheduler: chance to switch thread at each access-layer operation. 0.01 preempts about a
  // quarter of the operations of an Izraelevitz structure; 0.05 preempts nearly all, and the
  // histories of queues and stacks (checked as one object, not per key) then overlap so much
  // that the linearizability search takes seconds per history.
  double switch_probability = 0.01;
  // ... and at a flush of a line the thread stored to since it last flushed it (a persistence
  // window, crashlab/scheduler.hpp).
  double persist_switch_probability = 0.2;
  // Share of the workload runs scheduled with PCT's planned preemptions (crashlab/scheduler.hpp)
  // of depth pct_depth; in those runs a hash table has one bucket, so that its threads meet on
  // one list's words. Each run's scheduler is drawn from its seed.
  unsigned pct_percent = 50;
  std::size_t pct_depth = 3;
  // Share of each run's crash points taken right after an operation returns while another
  // thread waits at the flush that would make its stores durable (crashlab/scheduler.hpp);
  // the rest are drawn uniformly over the run's events.
  unsigned return_crash_percent = 40;
  // Entries with background work (an epoch advancer, the lazy sweep): share of each run's crash
  // points taken inside one of its steps, at an event drawn over the step before's events.
  unsigned background_crash_percent = 15;
  // 0: 16 MiB (of 256 KiB chunks: each thread claims a chunk of every slot size it allocates).
  std::uint64_t pool_size = 0;
  // Share of the workload runs whose pool starts at one chunk and grows on demand up to
  // pool_size (Pool::grow): a workload then grows it several times, each growth is a crash
  // point like any other, and every recovery opens a pool that grew (drawn from the run's seed).
  unsigned grow_percent = 50;
  // In those runs, share of the crash points aimed at a growth: at an event drawn over the
  // first events after it begins (the header's growth line written back, the file extended and
  // mapped, the line written back again, the allocator's first claims of the new chunks).
  unsigned growth_crash_percent = 10;
  double recovery_timeout_s = 30;
  // lincheck's limit per partition of up to 100 operations, retried once at 4x; a history it
  // still cannot decide is a violation ("undecided", crashlab/verdict.hpp).
  double check_timeout_s = 10;
  bool stop_at_first_violation = false;
  std::size_t keep_details = 3;            // violations kept in LabResult::details
  bool keep_histories = false;             // keep each reported violation's history file
  std::string command = "pmds crashtest";  // how replay commands start
  std::optional<ReplayPoint> replay;       // check only this point (printing its history)
  // Run the workload and every recovery with these persistence sites mutated
  // (pm::sim::Mutant; crashlab/mutation.hpp runs one lab per executed site).
  std::vector<pm::sim::Mutant> mutants;
  std::function<void(const LabResult&)> progress;  // called after each crash point
};

// Whether the run with seed `wseed` is scheduled with PCT (SimOptions::pct_percent).
inline bool pct_run(const SimOptions& o, std::uint64_t wseed) {
  return mix_seed(wseed, 0x9c7) % 100 < o.pct_percent;
}

// Whether the run with seed `wseed` starts from a pool that grows (SimOptions::grow_percent).
inline bool grown_run(const SimOptions& o, std::uint64_t wseed) {
  return mix_seed(wseed, 0x960) % 100 < o.grow_percent;
}

// The workload options of the run with seed `wseed`: o.workload, or with o.vary_mix a key range
// from {K/2, K, 2K} and a read share from {R-30, R, R+30} (within 0..90), for a queue, stack
// or priority queue without an explicit --prefill a prefill of 1 or the default 4 (an empty
// container has paths of its own: a dequeue that returns empty on a head another dequeue has
// not persisted yet is caught within 12 crash points from 1 item, 456 from 4), and for an InCLL
// Masstree eager or lazy recovery (each has persistence sites of its own). Drawn from the
// seed, so a replay of the run finds the same mix.
inline WorkloadOptions run_workload(const registry::Entry& e, const SimOptions& o,
                                    std::uint64_t wseed) {
  WorkloadOptions w = o.workload;
  // PCT runs of a hash table: one bucket, so that its threads meet on one list's words.
  if (pct_run(o, wseed) && e.structure.starts_with("hash")) w.buckets = 1;
  if (!o.vary_mix) return w;
  std::mt19937_64 rng(mix_seed(wseed, 0x313c));
  const std::uint64_t keys[] = {std::max<std::uint64_t>(2, w.key_range / 2), w.key_range,
                                2 * w.key_range};
  w.key_range = keys[rng() % 3];
  const int reads = static_cast<int>(w.read_percent) + 30 * (static_cast<int>(rng() % 3) - 1);
  w.read_percent = static_cast<unsigned>(std::clamp(reads, 0, 90));
  const bool container = e.kind == registry::Kind::queue || e.kind == registry::Kind::stack ||
                         e.kind == registry::Kind::priority_queue;
  if (rng() % 2 == 0 && container && w.prefill == 0) w.prefill = 1;
  // An InCLL Masstree: half the runs recover lazily (unless every run does: --lazy-recovery).
  if (rng() % 2 == 0 && recovers_lazily_on_request(e)) w.lazy_recovery = true;
  return w;
}

// The command line that runs the lab on e with the same options (without the crash budget).
inline std::string lab_command(const registry::Entry& e, const SimOptions& o) {
  char sw[32];
  std::snprintf(sw, sizeof sw, "%g", o.switch_probability);
  std::string s = o.command + " --structure " + std::string(e.name) + " --threads " +
                  std::to_string(o.workload.threads) + " --ops " + std::to_string(o.workload.ops) +
                  " --keys " + std::to_string(o.workload.key_range) + " --reads " +
                  std::to_string(o.workload.read_percent) + " --switch " + sw + " --images " +
                  std::to_string(o.images);
  if (o.workload.prefill != 0) s += " --prefill " + std::to_string(o.workload.prefill);
  s += open_options(o.workload);
  if (o.pool_size != SimOptions{}.pool_size)
    s += " --pool-mib " + std::to_string(o.pool_size >> 20);
  if (o.grow_percent != SimOptions{}.grow_percent) s += " --grow " + std::to_string(o.grow_percent);
  if (o.growth_crash_percent != SimOptions{}.growth_crash_percent)
    s += " --growth-crashes " + std::to_string(o.growth_crash_percent);
  if (o.persist_switch_probability != SimOptions{}.persist_switch_probability) {
    std::snprintf(sw, sizeof sw, "%g", o.persist_switch_probability);
    s += std::string(" --switch-persist ") + sw;
  }
  if (o.background_crash_percent != SimOptions{}.background_crash_percent)
    s += " --background-crashes " + std::to_string(o.background_crash_percent);
  if (o.return_crash_percent != SimOptions{}.return_crash_percent)
    s += " --return-crashes " + std::to_string(o.return_crash_percent);
  if (o.seed != SimOptions{}.seed) s += " --seed " + std::to_string(o.seed);
  if (o.vary_mix) s += " --mix vary";
  if (o.pct_percent != SimOptions{}.pct_percent) s += " --pct " + std::to_string(o.pct_percent);
  if (o.pct_depth != SimOptions{}.pct_depth) s += " --pct-depth " + std::to_string(o.pct_depth);
  if (!o.mutants.empty()) s += " --mutant " + mutants_text(o.mutants);
  return s;
}

// The command line that replays one point with the same options.
inline std::string replay_command(const registry::Entry& e, const SimOptions& o,
                                  const ReplayPoint& p) {
  return lab_command(e, o) + " --replay " + p.text();
}

}  // namespace pmds::crashlab

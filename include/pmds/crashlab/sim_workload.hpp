// pmds crash lab — the workload process of a simulated-crash run (crashlab/sim_lab.hpp forks
// one per run): it creates the structure in a fresh pool attached to the Px86 simulator, runs the
// prefill and the workload threads under the deterministic scheduler, and at each crash point
// writes the crash images, starts a recovery process for each (crashing some of them in turn) and
// judges what they report. Its results go to the lab process as JSON lines through a pipe.
// Everything here runs in the forked child.
#pragma once

#if !defined(PMDS_BACKEND_SIMULATED)
#error "pmds/crashlab/sim_workload.hpp needs the simulated backend (link pmds::pmds_simulated)"
#endif

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pmds/crashlab/child.hpp"
#include "pmds/crashlab/entries.hpp"
#include "pmds/crashlab/history.hpp"
#include "pmds/crashlab/image_file.hpp"
#include "pmds/crashlab/mutant_text.hpp"
#include "pmds/crashlab/process.hpp"
#include "pmds/crashlab/report.hpp"
#include "pmds/crashlab/scheduler.hpp"
#include "pmds/crashlab/sim_options.hpp"
#include "pmds/crashlab/verdict.hpp"
#include "pmds/crashlab/workload.hpp"
#include "pmds/pm/simulator.hpp"
#include "pmds/reclaim/epoch.hpp"
#include "pmds/registry/descriptor.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::crashlab {

namespace detail {

// The crash images to check at one crash point: every distinct choice when there are at most
// `k`, else all-minimum, all-maximum and k-2 random ones.
inline std::vector<pm::sim::Choice> choose_images(const pm::sim::Snapshot& snap, std::size_t k,
                                                  std::uint64_t seed) {
  std::vector<pm::sim::Choice> out;
  if (snap.for_each_choice(static_cast<double>(k),
                           [&](const pm::sim::Choice& c) { out.push_back(c); }))
    return out;
  out.push_back(snap.choice(pm::sim::ImageKind::minimum));
  out.push_back(snap.choice(pm::sim::ImageKind::maximum));
  for (std::size_t i = 2; i < k; ++i)
    out.push_back(snap.choice(pm::sim::ImageKind::random, mix_seed(seed, i)));
  out.resize(std::min(out.size(), std::max<std::size_t>(k, 1)));
  return out;
}

// The scratch files of the workload process `pid`: pool, image, recovery-crash image, recovery
// report. The lab process removes them too when the workload process ends (it may _exit or die
// without cleaning up).
inline std::array<std::string, 5> scratch_paths(pid_t pid) {
  const std::string tag = work_directory() + "/pmds-crashlab-" + std::to_string(pid);
  return {tag + ".pool", tag + "-image.pool", tag + "-image2.pool", tag + "-image3.pool",
          tag + ".out"};
}

// Where each phase of a recovery process lies in its simulator events, as the last recovery
// that ran to its end reported them: phase p spans [bounds[p], bounds[p + 1]), the last one
// ends at the process's last event; a phase it did not run is empty. A crash of a recovery
// draws its phase first, each phase with events as likely (the open is as often crashed as
// the continuation, which takes far more events), then an event in it.
struct RecoveryPhases {
  std::array<std::uint64_t, recovery_phase_count + 1> bounds{};
  bool known = false;

  static RecoveryPhases of(const Recovered& r) {
    RecoveryPhases p;
    p.known = true;
    p.bounds[recovery_phase_count] = r.events;
    for (std::size_t i = recovery_phase_count; i-- > 0;)
      p.bounds[i] = r.phase_start[i].value_or(p.bounds[i + 1]);
    return p;
  }
  // A crash in a phase drawn among `allowed`, at an event within that phase's length (nullopt:
  // none of them has an event).
  template <class Rng>
  std::optional<RecoveryCrash> draw(Rng& rng, const std::vector<RecoveryPhase>& allowed) const {
    std::vector<std::size_t> with_events;
    for (const RecoveryPhase p : allowed) {
      const auto i = static_cast<std::size_t>(p);
      if (known && bounds[i + 1] > bounds[i]) with_events.push_back(i);
    }
    if (with_events.empty()) return std::nullopt;
    const std::size_t i = with_events[rng() % with_events.size()];
    const std::uint64_t length = bounds[i + 1] - bounds[i];
    // A quarter at one of the phase's last events: where a recovery commits what it did (the
    // record of failed epochs emptied, the epoch moved), whose order against the phase's
    // earlier writes a uniform draw over a long phase rarely tests.
    if (rng() % 4 == 0) {
      const std::uint64_t last = std::min<std::uint64_t>(length, 4);
      return RecoveryCrash{static_cast<RecoveryPhase>(i), length - 1 - rng() % last};
    }
    return RecoveryCrash{static_cast<RecoveryPhase>(i), rng() % length};
  }
  Json json() const { return known ? Json(bounds) : Json(nullptr); }
  static RecoveryPhases from_json(const nlohmann::json& j) {
    RecoveryPhases p;
    if (j.is_array() && j.size() == p.bounds.size()) {
      for (std::size_t i = 0; i < p.bounds.size(); ++i) p.bounds[i] = j[i].get<std::uint64_t>();
      p.known = true;
    }
    return p;
  }
};

// The phases a recovery may be crashed in: all of them but those that read the contents of a
// structure whose reading runs operations (reading_operates), or only those before the
// continuation (`recovery_only`: the second, nested crash).
inline std::vector<RecoveryPhase> crashable_phases(const registry::Entry& e, bool recovery_only) {
  std::vector<RecoveryPhase> out;
  for (std::size_t i = 0; i < recovery_phase_count; ++i) {
    const auto p = static_cast<RecoveryPhase>(i);
    if (reads_contents(p) && reading_operates(e)) continue;
    if (recovery_only && p >= RecoveryPhase::continuation) break;
    out.push_back(p);
  }
  return out;
}

// A recovery of one crash image: the recoveries crashed on purpose, in order (what each saw:
// its phase, its contents, its continuation so far), and the recovery that ran to its end.
struct RecoveryRun {
  std::vector<Recovered> crashed;
  Recovered final;
};

// The crash points of a run aimed at a moment rather than drawn over its events.
struct AimedCrashes {
  std::size_t after_return = 0;        // SimOptions::return_crash_percent's
  std::size_t in_background = 0;       // SimOptions::background_crash_percent's
  std::size_t in_growth = 0;           // SimOptions::growth_crash_percent's
  std::uint64_t background_steps = 0;  // the previous run's (spreads in_background over a run)
};

// The workload process: everything below runs in the forked child.
class WorkloadProcess {
 public:
  WorkloadProcess(const registry::Entry& e, const SimOptions& o, std::uint64_t wseed,
                  std::vector<std::uint64_t> events, AimedCrashes aimed,
                  std::uint64_t first_crash_number, std::size_t keep_budget,
                  RecoveryPhases recovery_phases, std::uint64_t step_estimate, int result_fd)
      : e_(e),
        o_(o),
        wseed_(wseed),
        workload_(run_workload(e, o, wseed)),
        events_(std::move(events)),
        return_crashes_(aimed.after_return),
        return_share_(aimed.after_return),
        return_dice_(mix_seed(wseed, 0x7e7a)),
        background_crashes_(aimed.in_background),
        background_share_(aimed.in_background),
        background_estimate_(std::max<std::uint64_t>(aimed.background_steps, 1)),
        background_dice_(mix_seed(wseed, 0xb4c6)),
        growth_crashes_(aimed.in_growth),
        growth_dice_(mix_seed(wseed, 0x960d)),
        crash_number_(first_crash_number),
        keep_budget_(keep_budget),
        recovery_phases_(recovery_phases),
        pct_(pct_run(o, wseed)),
        step_estimate_(step_estimate),
        out_(result_fd) {}

  [[noreturn]] void run() {
    ::signal(SIGPIPE, SIG_IGN);
    try {
      execute();
    } catch (const std::exception& ex) {
      send({{"type", "error"}, {"message", ex.what()}});
      finish(1);
    }
    finish(0);
  }

 private:
  void execute() {
    const auto paths = scratch_paths(::getpid());
    pool_file_ = ScratchFile(paths[0]);
    image_file_ = ScratchFile(paths[1]);
    image2_file_ = ScratchFile(paths[2]);
    image3_file_ = ScratchFile(paths[3]);
    out_file_ = ScratchFile(paths[4]);
    lincheck_ = std::make_unique<Lincheck>(find_lincheck(), o_.check_timeout_s);
    recovery_ = std::make_unique<RecoveryServer>();
    pm::sim::set_mutants(o_.mutants);

    registry::CreateOptions co = create_options(workload_);
    co.pool_size = o_.pool_size != 0 ? o_.pool_size : 16ull << 20;
    co.chunk_size = lab_chunk_size(e_, co);
    if (grown_run(o_, wseed_)) start_at_one_chunk(co);
    co.background_thread = false;  // the scheduler runs it (below)
    // Creation is not under test: it ends as a clean close would, with everything durable. Most
    // runs then close the pool and work on it opened again, so the open (its mark of an open
    // pool, the structure's recovery after a clean shutdown) is under test too; one run in four
    // works on the structure as created, so crashes land in its first moments too (InCLL's
    // trees once changed the nodes made at creation unlogged in the epoch they were made in).
    const bool as_created = mix_seed(wseed_, 0xc4ea7ed) % 4 == 0;
    auto inst = [&] {
      if (as_created) {
        auto created = registry::Instance::create(e_, co, pool_file_.path());
        pm::sim::mark_all_durable();
        return created;
      }
      registry::Instance::create(e_, co, pool_file_.path()).close();
      return registry::Instance::open(e_, pool_file_.path(), co);
    }();
    if (e_.kind == registry::Kind::register_object) init_ = inst.contents();
    pm::sim::reset_warning_count();
    pm::sim::reset_site_counts();
    base_ = pm::sim::event_count();

    const std::size_t threads = workload_.threads;
    const std::size_t capacity =
        workload_.ops + 64 + workload_.key_range + (workload_.prefill ? workload_.prefill : 8);
    log_memory_.reset(static_cast<unsigned char*>(
        std::aligned_alloc(64, (HistoryLog::bytes_for(threads + 1, capacity) + 63) / 64 * 64)));
    log_.emplace(HistoryLog::create(log_memory_.get(), HistoryLog::bytes_for(threads + 1, capacity),
                                    threads + 1, capacity));
    const Workload w = make_workload(e_, workload_, wseed_);
    // The structure's background work, if any, is scheduled thread number `threads`.
    const bool background = inst.has_background_work();
    scheduler_.emplace(
        threads + (background ? 1 : 0), mix_seed(wseed_, 0x5c4ed), o_.switch_probability,
        o_.persist_switch_probability,
        pct_ ? std::optional<Scheduler::Pct>(Scheduler::Pct{o_.pct_depth, step_estimate_})
             : std::nullopt);
    arm_next(pm::sim::event_count());

    for (const auto& op : w.prefill) record_operation(*log_, inst, threads, op);

    current_ = this;
    growth_line_ = inst.pool() != nullptr
                       ? static_cast<const char*>(inst.pool()->base()) + pm::format::growth_offset
                       : nullptr;
    pm::sim::set_schedule_hook(&WorkloadProcess::preemption_point);
    std::vector<std::thread> workers;
    std::mutex error_mutex;
    std::string error;
    // The threads take their pmds::thread_id()s one after another, and start only once all
    // have: the ids, which choose a thread's allocator chunks and epoch slots, are then the same
    // in every replay. (Taken at a thread's first turn, an id was either that of a thread that
    // had already ended, with its chunks, or a new one, with a new chunk, by the clock: under
    // PCT a thread can end before another's first turn.)
    Wakeup took_id;
    std::latch go(1);
    const auto start = [&](auto body) {
      workers.emplace_back([&, body] {
        pmds::thread_id();
        took_id.post();
        go.wait();
        body();
      });
      took_id.wait();
    };
    for (std::size_t t = 0; t < threads; ++t) {
      start([&, t] {
        scheduler_->enter(t);
        try {
          for (const auto& op : w.per_thread[t]) {
            record_operation(*log_, inst, t, op);
            after_return();
          }
        } catch (const std::exception& ex) {
          std::lock_guard g(error_mutex);
          if (error.empty()) error = "workload thread " + std::to_string(t) + ": " + ex.what();
        }
        // Its retires handed over in its turn, not at its exit, which comes while other
        // threads run: a collect there would run them or not by the clock (a byte-string
        // Masstree's frees write the pool).
        reclaim::EpochDomain::detach_this_thread();
        scheduler_->leave();
      });
    }
    std::uint64_t background_steps = 0;
    if (background)
      start([&] {
        scheduler_->enter(threads);
        try {
          std::uint64_t step_events = 0;  // the last step's (other threads' included)
          while (!scheduler_->alone()) {
            const std::uint64_t before = pm::sim::event_count();
            in_background(step_events);
            inst.background_step();
            // An aimed crash the step ended before reaching is dropped, not taken elsewhere.
            if (background_armed_) arm_next(pm::sim::event_count());
            step_events = pm::sim::event_count() - before;
            ++background_steps;
            scheduler_->yield();
          }
        } catch (const std::exception& ex) {
          std::lock_guard g(error_mutex);
          if (error.empty()) error = std::string("background work: ") + ex.what();
        }
        scheduler_->leave();
      });
    go.count_down();
    for (auto& th : workers) th.join();
    pm::sim::set_schedule_hook(nullptr);
    pm::sim::clear_crash_handler();
    if (!error.empty()) throw Error(error);
    for (const pm::sim::SiteCount& c : pm::sim::site_counts())
      add_site(sites_, {site_location(c.file, c.line, c.column), to_string(c.kind), c.executions, 0,
                        c.drains_other_sites});
    Json sites = Json::array();
    for (const SiteUse& use : sites_) sites.push_back(site_json(use));
    send({{"type", "done"},
          {"sites", sites},
          {"events", pm::sim::event_count() - base_},
          {"recovery_phases", recovery_phases_.json()},
          {"warnings", pm::sim::warning_count()},
          {"switches", scheduler_->switches()},
          {"steps", scheduler_->steps()},
          {"stolen", scheduler_->stolen()},
          {"background_steps", background_steps},
          {"growths", growths_}});
  }

  // Ends the workload process. Its helper processes (lincheck, the recovery server) are ended
  // and waited for first: orphans would be reparented to PID 1, which in a container may never
  // reap them.
  [[noreturn]] void finish(int status) {
    lincheck_.reset();
    recovery_.reset();
    _exit(status);
  }

  // Arms the first drawn crash point at or after event `from` (absolute).
  void arm_next(std::uint64_t from) {
    while (next_ < events_.size() && base_ + events_[next_] < from) ++next_;
    background_armed_ = growth_armed_ = false;
    if (next_ < events_.size())
      pm::sim::set_crash_handler(base_ + events_[next_], [this] { on_crash(); });
  }

  // An operation just returned (its thread holds the turn): when another thread is stalled
  // with stores it has not flushed yet, crash at the next event, now and then: with chance
  // (this run's share) / (the run's operations), so the share spreads over the run. The dice
  // are the lab's own, not the scheduler's, so the schedule — and every event number — is the
  // same with or without.
  void after_return() {
    if (return_crashes_ == 0 || !scheduler_->stalled_in_window()) return;
    const std::uint64_t ops = workload_.threads * workload_.ops + 1;
    if (return_dice_() % ops >= return_share_) return;
    --return_crashes_;
    pm::sim::set_crash_handler(pm::sim::event_count(), [this] { on_crash(); });
    background_armed_ = growth_armed_ = false;
  }

  // A background step is about to run (its thread holds the turn): now and then, with chance
  // (this run's share) / (the previous run's steps), crash at an event inside it, drawn over
  // the events the step before took. Own dice, as after_return's.
  void in_background(std::uint64_t step_events) {
    if (background_crashes_ == 0) return;
    if (background_dice_() % background_estimate_ >= background_share_) return;
    --background_crashes_;
    const std::uint64_t at = pm::sim::event_count() + background_dice_() % (step_events + 1);
    pm::sim::set_crash_handler(at, [this] { on_crash(); });
    background_armed_ = true;
    growth_armed_ = false;
  }

  // Every access-layer operation of a workload thread: the scheduler's preemption point, and
  // the start of a growth seen in passing (the header's growth line written back with a growth
  // pending: Pool::grow's first step).
  static void preemption_point(pm::sim::Operation op, const void* addr) {
    WorkloadProcess* self = current_;
    if (op == pm::sim::Operation::flush && addr == self->growth_line_) self->at_growth_line();
    Scheduler::preemption_point(op, addr);
  }

  // The growth line is being written back (its thread holds the turn). At a growth's start,
  // now and then (half the growths, while this run's share lasts), crash at an event drawn
  // over the growth's: half the time among its first four (its own write-backs), else among
  // its first sixteen (with the allocator's first claims and the first nodes in the new
  // chunks). Own dice, as after_return's.
  void at_growth_line() {
    std::uint64_t pending = 0;  // the thread's own store, already in memory
    std::memcpy(&pending, growth_line_ + offsetof(pm::format::GrowthLine, pending), sizeof pending);
    if (pending == 0 || pending == growth_seen_) return;
    growth_seen_ = pending;
    ++growths_;
    if (growth_crashes_ == 0 || growth_dice_() % 2 != 0) return;
    --growth_crashes_;
    const std::uint64_t span = growth_dice_() % 2 == 0 ? 4 : 16;
    pm::sim::set_crash_handler(pm::sim::event_count() + growth_dice_() % span,
                               [this] { on_crash(); });
    background_armed_ = false;
    growth_armed_ = true;
  }

  void send(const Json& line) { write_all(out_, json_line(line) + "\n"); }

  // The crash handler: the simulator lock is held, every other thread is stopped.
  void on_crash() {
    Scheduler::Freeze freeze(scheduler_ ? &*scheduler_ : nullptr);
    const std::uint64_t event = pm::sim::event_count() - base_;
    const std::uint64_t crash_number = crash_number_++;
    const bool in_background = std::exchange(background_armed_, false);
    const bool in_growth = std::exchange(growth_armed_, false);
    Json violations = Json::array();
    std::size_t images = 0, undecided = 0, found = 0;
    RecoveryCrashes recovery_crashes;
    try {
      const std::uint64_t crash_time = log_->now();
      const std::vector<Record> records = log_->snapshot();
      const pm::sim::Snapshot snap = pm::sim::snapshot(false);
      const auto choices = choose_images(snap, o_.images, mix_seed(wseed_, event));
      for (std::size_t i = 0; i < choices.size(); ++i) {
        if (o_.replay && o_.replay->image != i) continue;
        ++images;
        write_crash_image(snap, choices[i], pool_file_.path(), image_file_.path());
        ReplayPoint point{wseed_, event, i, std::nullopt, std::nullopt, pct_ ? step_estimate_ : 0};
        const RecoveryRun run = recover(point, records, recovery_crashes);
        std::vector<Violation> vs = check(point, crash_number, crash_time, records, run, undecided);
        for (auto& v : vs) {
          ++found;
          violations.push_back(violation_json(v));
        }
      }
    } catch (const std::exception& ex) {
      send({{"type", "error"}, {"message", ex.what()}});
      finish(1);
    }
    send({{"type", "crash"},
          {"event", event},
          {"images", images},
          {"recovery_crashes", recovery_crashes.first},
          {"nested_recovery_crashes", recovery_crashes.nested},
          {"recovery_crash_phases", recovery_phases_json(recovery_crashes.phases)},
          {"epochs_lost", epochs_lost_ ? Json(*epochs_lost_) : Json(nullptr)},
          {"reexecuted", std::exchange(reexecuted_, 0)},
          {"background", in_background},
          {"growth", in_growth},
          {"undecided", undecided},
          {"violation_count", found},
          {"violations", violations}});
    if (found > 0 && o_.stop_at_first_violation) finish(0);
    arm_next(base_ + event + 1);  // a drawn point at this event (after_return's too) is done
  }

  // Recovery crashes at one crash point: recoveries crashed, nested ones, by phase.
  struct RecoveryCrashes {
    std::uint64_t first = 0, nested = 0;
    std::array<std::uint64_t, recovery_phase_count> phases{};
  };

  // Recovers the image in a fresh process. When the dice say so (or when replaying such a
  // point) that recovery is crashed at an event drawn in one of its phases, and its crash image
  // recovered again; that recovery is crashed in turn, now and then, in its own recovery phases
  // (two deep), and its crash image recovered by a third process, which runs to its end.
  RecoveryRun recover(ReplayPoint& point, const std::vector<Record>& records,
                      RecoveryCrashes& crashes) {
    Args a{{"entry", std::string(e_.name)},
           {"image", image_file_.path()},
           {"out", out_file_.path()},
           {"keys", std::to_string(workload_.key_range)},
           {"key_size", std::to_string(workload_.key_size)},
           {"value_size", std::to_string(workload_.value_size)},
           {"lazy", workload_.lazy_recovery ? "1" : "0"},
           {"timeout", std::to_string(static_cast<unsigned>(o_.recovery_timeout_s))}};
    if (o_.continue_after_recovery) {
      a["continue"] = std::to_string(continuation_length(workload_));
      // Half the continuations run in turn under every thread id the workload used (its
      // threads' and the prefill's: child.hpp, run_in_turn), half on one thread, whose
      // allocations reuse what it freed itself (list/soft-bug-alloc-by-valid-start is caught
      // there, and went unseen in 500 crash points with every continuation spread).
      const bool spread = mix_seed(mix_seed(wseed_, point.event), point.image + 2000) % 2 == 0;
      a["threads"] = std::to_string(spread ? workload_.threads + 1 : 1);
    }
    if (!o_.mutants.empty()) a["mutant"] = mutants_text(o_.mutants);
    if (e_.criterion == Criterion::detectable) a["tickets"] = last_tickets(records);
    std::mt19937_64 dice(mix_seed(mix_seed(wseed_, point.event), point.image + 1000));
    // Half the recoveries of a detectable entry invoke each thread's last operation again with its
    // ticket (Fatourou et al.'s recovery); the other half check recover_pending's answers alone.
    if (e_.criterion == Criterion::detectable && dice() % 2 == 0) a["reexecute"] = "1";
    // Arms a crash of the recovery with arguments `args`, its image to `out`.
    const auto crash_at = [&](Args args, std::optional<RecoveryCrash> crash,
                              const std::string& out) {
      if (!crash) return args;
      static constexpr const char* kinds[] = {"min", "max", "random"};
      const std::uint64_t where = mix_seed(static_cast<std::uint64_t>(crash->phase), crash->offset);
      args["crash_phase"] = to_string(crash->phase);
      args["crash_offset"] = std::to_string(crash->offset);
      args["crash_kind"] = kinds[mix_seed(point.event, point.image + where) % 3];
      args["crash_seed"] = std::to_string(mix_seed(wseed_, where));
      args["crash_out"] = out;
      return args;
    };
    std::optional<RecoveryCrash> crash1;
    if (o_.replay) {
      crash1 = o_.replay->recovery_crash;
    } else if (dice() % 100 < o_.recovery_crash_percent) {
      crash1 = recovery_phases_.draw(dice, crashable_phases(e_, false));
    }
    RecoveryRun run;
    run.final = run_recovery(crash_at(a, crash1, image2_file_.path()));
    if (!run.final.crashed) {
      if (run.final.ok) recovery_phases_ = RecoveryPhases::of(run.final);
    } else {
      ++crashes.first;
      ++crashes.phases[static_cast<std::size_t>(*run.final.crashed)];
      point.recovery_crash = crash1;
      run.crashed.push_back(std::move(run.final));
      Args again = a;
      again["image"] = image2_file_.path();
      // An InCLL Masstree's crashed recovery is recovered again the other way (eager after
      // lazy, lazy after eager) at half the points, as a pool reopened with other options, or
      // whose record of failed epochs is full, is: each way must recover what the other left
      // half done (InCLL §4.3: an eager recovery empties a record lazy ones filled; a lazy one
      // must not take the borders a crashed eager one marked for recovered).
      if (recovers_lazily_on_request(e_) &&
          mix_seed(mix_seed(wseed_, point.event), point.image + 3000) % 2 == 0)
        again["lazy"] = workload_.lazy_recovery ? "0" : "1";
      std::optional<RecoveryCrash> crash2;
      if (o_.replay) {
        crash2 = o_.replay->recovery_crash2;
      } else if (dice() % 100 < o_.nested_recovery_crash_percent) {
        crash2 = recovery_phases_.draw(dice, crashable_phases(e_, true));
      }
      // The crash image of a recovery crashed in its continuation or later holds operations no
      // ticket names: recover_pending is asked only about the workload's.
      if (*run.crashed.back().crashed >= RecoveryPhase::continuation) again.erase("tickets");
      run.final = run_recovery(crash_at(again, crash2, image3_file_.path()));
      if (run.final.crashed) {
        ++crashes.nested;
        ++crashes.phases[static_cast<std::size_t>(*run.final.crashed)];
        point.recovery_crash2 = crash2;
        run.crashed.push_back(std::move(run.final));
        again["image"] = image3_file_.path();
        if (*run.crashed.back().crashed >= RecoveryPhase::continuation) again.erase("tickets");
        run.final = run_recovery(again);
      }
      if (run.final.crashed) {
        run.final.ok = false;
        run.final.error = "a recovery crashed where no crash was asked for";
      }
      if (!run.final.error.empty()) {
        std::string where;
        for (const Recovered& c : run.crashed)
          where += std::string(where.empty() ? "" : ", then ") + to_string(*c.crashed);
        run.final.error = "after crashes of recovery in " + where + ": " + run.final.error;
      }
    }
    for (const SiteUse& use : run.final.sites) add_site(sites_, use);
    return run;
  }

  // One recovery process; what its report file says.
  Recovered run_recovery(const Args& a) {
    ::unlink(out_file_.path().c_str());
    const ExitStatus status = recovery_->run(a);
    return parse_recovered(read_file(out_file_.path()), status);
  }

  std::vector<Violation> check(const ReplayPoint& point, std::uint64_t crash_number,
                               std::uint64_t crash_time, const std::vector<Record>& records,
                               const RecoveryRun& run, std::size_t& undecided) {
    Violation base;
    base.kind = "simulated";
    base.scheduler = pct_ ? "pct" : "random";
    base.crash_number = crash_number;
    base.replay = replay_command(e_, o_, point);
    Judge j{.entry = e_,
            .checker = *lincheck_,
            .threads = workload_.threads,
            .key_range = workload_.key_range,
            .crashed_after_open = true,
            .dump_name = "history-" + point.text(),
            .print = o_.replay.has_value(),
            .keep = {}};
    if (o_.keep_histories)
      j.keep = [&](const std::string& text) -> std::string {
        if (keep_budget_ == 0) return "";
        --keep_budget_;
        std::string file = work_directory() + "/pmds-crashlab-violation-" +
                           std::to_string(::getpid()) + "-" + point.text() + ".jsonl";
        for (char& c : file)
          if (c == ':') c = '-';
        write_file(file, text);
        return file;
      };
    HistoryText h;
    h.entry = &e_;
    h.meta = {{"structure", std::string(e_.name)}, {"replay", point.text()}};
    h.init = e_.kind == registry::Kind::register_object ? &init_ : nullptr;
    h.records = records;
    h.crashed = true;
    h.crash_time = crash_time;
    // The entry's epoch bound, with the crash's epoch as the first recovery of the image found
    // it (a later one may find the epoch a crashed recovery moved on).
    h.crash_epoch = run.crashed.empty() ? run.final.crash_epoch : run.crashed.front().crash_epoch;
    if (h.crash_epoch) {
      // What the workload's history came to: read by the first recovery that went on past it,
      // or by the final one.
      const Recovered* reader = &run.final;
      for (const Recovered& r : run.crashed)
        if (*r.crashed >= RecoveryPhase::continuation) {
          reader = &r;
          break;
        }
      if (const auto lost = epochs_lost(e_, records, reader->items, *h.crash_epoch))
        epochs_lost_ = std::max(epochs_lost_.value_or(0), *lost);
    }
    reexecuted_ += run.final.reexecuted.size();
    for (const Recovered& r : run.crashed) reexecuted_ += r.reexecuted.size();
    const std::optional<std::uint64_t> crash_epoch = h.crash_epoch;
    Judgement verdict =
        judge_after_crashed_recoveries(j, std::move(h), run.crashed, run.final, base);
    if (crash_epoch)
      if (auto behind = clock_behind(e_, records, *crash_epoch)) {
        Violation v = base;
        v.criterion = "recovery";
        v.object = "epoch clock";
        v.message = std::move(*behind);
        verdict.violations.push_back(std::move(v));
      }
    undecided += verdict.undecided;
    return std::move(verdict.violations);
  }

  const registry::Entry& e_;
  const SimOptions& o_;
  std::uint64_t wseed_;
  const WorkloadOptions workload_;  // this run's (run_workload)
  std::vector<std::uint64_t> events_;
  std::size_t return_crashes_;  // left in this run
  std::size_t return_share_;    // at the start
  std::mt19937_64 return_dice_;
  std::size_t background_crashes_;     // left in this run
  std::size_t background_share_;       // at the start
  std::uint64_t background_estimate_;  // background steps of a run (the previous one's)
  std::mt19937_64 background_dice_;
  bool background_armed_ = false;  // the armed crash point is in_background's
  std::size_t growth_crashes_;     // left in this run (at_growth_line)
  std::mt19937_64 growth_dice_;
  bool growth_armed_ = false;                         // the armed crash point is at_growth_line's
  const char* growth_line_ = nullptr;                 // the pool header's growth line
  std::uint64_t growth_seen_ = 0;                     // the pending count of the last growth seen
  std::uint64_t growths_ = 0;                         // growths begun in the workload
  static inline WorkloadProcess* current_ = nullptr;  // the one of this (forked) process
  std::size_t next_ = 0;
  std::uint64_t crash_number_;
  std::size_t keep_budget_;
  RecoveryPhases recovery_phases_;
  bool pct_;                                  // this run is scheduled with PCT (pct_run)
  std::uint64_t step_estimate_;               // PCT's change points' range (ReplayPoint::pct_steps)
  std::optional<std::uint64_t> epochs_lost_;  // the deepest loss measured (epochs_lost)
  std::uint64_t reexecuted_ = 0;  // operations re-invoked with their tickets, since the last report
  int out_;
  std::uint64_t base_ = 0;
  ScratchFile pool_file_, image_file_, image2_file_, image3_file_, out_file_;
  std::unique_ptr<Lincheck> lincheck_;
  std::unique_ptr<RecoveryServer> recovery_;
  struct FreeDeleter {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, FreeDeleter> log_memory_;
  std::optional<HistoryLog> log_;
  std::optional<Scheduler> scheduler_;
  std::vector<registry::Item> init_;
  std::vector<SiteUse>
      sites_;  // executed by recoveries so far (the workload's are added at its end)
};

}  // namespace detail

}  // namespace pmds::crashlab
